"""Where the broker's logs go and how they are configured, as Kafka's bin/kafka-run-class.sh and log4j.properties do.

``LOG_DIR`` (Kafka's variable; ``BROKER_LOG_DIR`` wins if both are set) names the directory of ``server.log``,
``controller.log``, ``state-change.log``, ``log-cleaner.log``, ``kafka-request.log`` and ``kafka-authorizer.log``;
its default is ``<install>/logs``, where ``<install>`` is the checkout (the directory holding ``bin/``) or, for an
installed package, the environment's prefix (the virtualenv). The logging configuration is the package's
``broker/config/logging.ini`` unless ``BROKER_LOG_CONFIG`` names another ``fileConfig`` file.
"""
from __future__ import annotations

import logging
import logging.config
import os
import sys
from pathlib import Path
from typing import Mapping, Optional

#: the packaged logging configuration (config/logging.ini in a checkout links to it)
DEFAULT_LOG_CONFIG = Path(__file__).resolve().parent / "config" / "logging.ini"
#: the line format of every handler, Kafka's: [2026-01-01 00:00:00,000] INFO message (logger)
LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
#: level names as log4j prints them (%p): Python's WARNING and CRITICAL are log4j's WARN and FATAL
KAFKA_LEVEL_NAMES = {logging.WARNING: "WARN", logging.CRITICAL: "FATAL"}


def use_kafka_level_names() -> None:
    """Print levels as Kafka's log4j layout does (``WARN``, not ``WARNING``), in every handler and formatter of this
    process, a user's logging configuration included. Level names in configuration files keep working: ``WARNING``
    and ``WARN`` both still name the level."""
    for level, name in KAFKA_LEVEL_NAMES.items():
        logging.addLevelName(level, name)


def install_root() -> Path:
    """The checkout the package runs from (it has bin/kafka-server-start.sh), else the environment's prefix."""
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "bin" / "kafka-server-start.sh").is_file():
        return checkout
    return Path(sys.prefix)


def log_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """The directory of the broker's log files (and of the pid files of the processes bin/ starts)."""
    env = os.environ if env is None else env
    chosen = env.get("BROKER_LOG_DIR") or env.get("LOG_DIR")
    return Path(chosen).resolve() if chosen else install_root() / "logs"


def setup_logging(env: Optional[Mapping[str, str]] = None) -> Path:
    """Configure logging from BROKER_LOG_CONFIG or the packaged logging.ini, writing into :func:`log_dir`.

    Returns the log directory. A broken or missing configuration file falls back to stdout only, with one
    warning, rather than stopping the broker.
    """
    env = os.environ if env is None else env
    use_kafka_level_names()
    directory = log_dir(env)
    directory.mkdir(parents=True, exist_ok=True)
    os.environ["BROKER_LOG_DIR"] = str(directory)  # the file handlers of logging.ini read it
    config = Path(env.get("BROKER_LOG_CONFIG") or DEFAULT_LOG_CONFIG)
    try:
        logging.config.fileConfig(config, disable_existing_loggers=False)
    except Exception as exc:  # a user's file: say what is wrong, keep running on stdout
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format=LOG_FORMAT, force=True)
        logging.getLogger(__name__).warning("Cannot use the logging configuration %s (%s: %s); logging to stdout "
                                            "only", config, type(exc).__name__, exc)
    return directory


def log_to_files_only(logger: logging.Logger, level: int, message: str,
                      exc_info: Optional[BaseException] = None) -> None:
    """Record ``message`` (and the traceback of ``exc_info``) in the log files but not on stdout/stderr: for a
    start-up error the caller prints itself, so the operator's terminal shows it once."""
    if not logger.isEnabledFor(level):
        return
    exc = (type(exc_info), exc_info, exc_info.__traceback__) if exc_info is not None else None
    record = logger.makeRecord(logger.name, level, "(start-up)", 0, message, (), exc)
    current: Optional[logging.Logger] = logger
    while current is not None:
        for handler in current.handlers:
            if isinstance(handler, logging.FileHandler) and record.levelno >= handler.level:
                handler.handle(record)
        current = current.parent if current.propagate else None


__all__ = ["DEFAULT_LOG_CONFIG", "KAFKA_LEVEL_NAMES", "LOG_FORMAT", "install_root", "log_dir", "setup_logging",
           "log_to_files_only", "use_kafka_level_names"]
