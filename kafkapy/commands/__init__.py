"""Subcommands of the ``kafkapy`` CLI, one module each.

Every module here defines ``register(subparsers)``, which adds its parser and
sets ``func`` to a callable taking the parsed arguments and returning an exit
code. kafkapy/cli.py discovers them, so a new command is a new file. Modules named
``_*`` are helpers the commands share, not commands.
"""
