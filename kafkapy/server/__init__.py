"""The asyncio broker: listeners, framing, dispatch, modules and observers."""
