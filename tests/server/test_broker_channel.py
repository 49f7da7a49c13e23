"""kafkapy.server.broker_channel: requests to another broker, from a coroutine stepped in place."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server import eager
from kafkapy.server.broker_channel import BrokerChannel


def test_a_request_started_in_place_outside_any_task_is_answered() -> None:
    """EndTxn is stepped in place (no task yet) and may send WriteTxnMarkers to another broker
    before it first suspends. The channel waits with asyncio.wait_for, which since Python 3.12
    raises "Timeout should be used inside a task" there: the request must move into the task
    that awaits the rest, as on 3.11, and be answered."""
    with Broker() as other:
        assert other.runtime is not None
        registrations = list(other.runtime.cluster.brokers)
        broker_id = registrations[0].broker_id
        listener = registrations[0].endpoints[0].listener

        async def main() -> Mapping[str, Any] | None:
            loop = asyncio.get_running_loop()
            channel = BrokerChannel(lambda: registrations, lambda: listener, "in-place-test")
            answered: asyncio.Future[Mapping[str, Any] | None] = loop.create_future()

            async def finish(rest: Any) -> Mapping[str, Any] | None:  # the worker task's part
                answer: Mapping[str, Any] | None = await rest
                return answer

            def step_in_place() -> None:  # a loop callback, as a connection's read is: no task
                assert asyncio.current_task() is None
                try:
                    done, rest = eager.start(channel.request(broker_id, ApiKey.API_VERSIONS, 3, {
                        "client_software_name": "kafkapy-test", "client_software_version": "1"}))
                except Exception as exc:  # the test fails with it, not with a timeout
                    answered.set_exception(exc)
                    return
                if done:
                    answered.set_result(rest)
                else:
                    task = loop.create_task(finish(rest))
                    task.add_done_callback(lambda t: answered.set_result(t.result()))

            loop.call_soon(step_in_place)
            try:
                return await asyncio.wait_for(answered, 10)
            finally:
                channel.close()

        answer = asyncio.run(main())
    assert answer is not None
    assert answer["error_code"] == ErrorCode.NONE
    assert any(key["api_key"] == ApiKey.WRITE_TXN_MARKERS for key in answer["api_keys"])
