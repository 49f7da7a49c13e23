"""BROKER_LOGGER config resources (KIP-412): the broker's loggers and their levels, described and
changed at run time as Kafka's broker does it for its log4j loggers.

kafkapy's loggers are Python's ``logging`` loggers: every logger the process has made (a name with
only a placeholder does not count), and ``root``. A level is told and taken in log4j's names, which
Python's levels stand for: FATAL is CRITICAL, WARN is WARNING, and TRACE, which Python lacks, is
level 5 (below DEBUG). A logger without a level of its own reports the level it inherits.

SET gives a logger a level; DELETE takes its own level away (so it inherits again), never the
root's; APPEND and SUBTRACT do not apply. Like Kafka's log4j levels, these are the process's:
brokers embedded in one process share them, and nothing is stored, so a restart forgets them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kafkapy.errors import ErrorCode, KafkaApiError

__all__ = ["DYNAMIC_BROKER_LOGGER_CONFIG", "ROOT_LOGGER", "alter_loggers", "check_logger_ops",
           "logger_entries"]

ROOT_LOGGER: Final = "root"
DYNAMIC_BROKER_LOGGER_CONFIG: Final = 6  # DescribeConfigs' ConfigSource of every logger
TRACE: Final = 5
# log4j's level names (Kafka's LogLevelConfig.VALID_LOG_LEVELS) and the Python level of each
LEVELS: Final[Mapping[str, int]] = {
    "FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING, "INFO": logging.INFO,
    "DEBUG": logging.DEBUG, "TRACE": TRACE,
}
_VALID: Final = ", ".join(sorted(LEVELS))
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _level_name(level: int) -> str:
    """The log4j name of a Python level: the most verbose log4j level that still shows it."""
    for name, value in sorted(LEVELS.items(), key=lambda item: item[1]):
        if level <= value:
            return name
    return "FATAL"


def _existing(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def logger_entries(keys: Iterable[str] | None) -> list[dict[str, Any]]:
    """DescribeConfigs' entries: each logger (or only those of ``keys``) with its effective level,
    read-write, never sensitive, without synonyms or type, as Kafka describes BROKER_LOGGER."""
    loggers = {ROOT_LOGGER: logging.getLogger(),
               **{name: logger for name, logger in list(logging.Logger.manager.loggerDict.items())
                  if isinstance(logger, logging.Logger)}}
    wanted = None if keys is None else set(keys)
    return [{"name": name, "value": _level_name(logger.getEffectiveLevel()), "read_only": False,
             "config_source": DYNAMIC_BROKER_LOGGER_CONFIG, "is_default": False, "is_sensitive": False,
             "synonyms": [], "config_type": 0, "documentation": None}
            for name, logger in sorted(loggers.items()) if wanted is None or name in wanted]


def check_logger_ops(ops: Iterable[Mapping[str, Any]]) -> None:
    """Kafka's checks of a BROKER_LOGGER alteration, each op in turn (KafkaApiError): the logger
    must exist, a SET must name a log4j level (case as written), the root keeps its level, and only
    SET and DELETE apply."""
    for op in ops:
        name, operation, value = op.get("name") or "", op.get("config_operation"), op.get("value")
        if operation in (SET, DELETE):
            if _existing(name) is None:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
            if operation == SET and value not in LEVELS:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                                    f"Cannot set the log level of {name} to {value} as it is not a supported "
                                    f"log level. Valid log levels are {_VALID}")
            if operation == DELETE and name == ROOT_LOGGER:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
        elif operation in (APPEND, SUBTRACT):
            verb = "APPEND" if operation == APPEND else "SUBTRACT"
            raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                f"{verb} operation is not allowed for the BROKER_LOGGER resource")
        else:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {operation} is not "
                                                           "allowed for the BROKER_LOGGER resource")


def alter_loggers(ops: Iterable[Mapping[str, Any]], log: logging.Logger) -> None:
    """Apply checked ops (``check_logger_ops``): SET a level, DELETE a logger's own level."""
    for op in ops:
        name, value = op.get("name") or "", op.get("value") or ""
        logger = _existing(name)
        if logger is None:  # gone since the check: nothing to change
            continue
        if op.get("config_operation") == SET:
            logger.setLevel(LEVELS[value])
            log.warning("Updated the log level of %s to %s", name, value)
        else:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", name)
