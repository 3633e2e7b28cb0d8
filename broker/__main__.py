"""``kafka-server-start [-daemon] server.properties [--override key=value]*``: run one broker, as ``kafka.Kafka``.

The command line is Kafka's: ``--override`` is repeatable (``--override k=v`` or ``--override=k=v``), ``--help``
prints the usage on stderr and exits 1, ``--version`` prints the version and exits 0, and ``-daemon`` (first)
runs the broker in the background with its console output in ``<LOG_DIR>/kafkaServer.out``.

A start-up failure (a bad config value, an unreadable config file, a LOG_DIR that cannot hold the log files, an
unsupported listener, a port in use, a locked log dir, ZooKeeper unreachable within
``zookeeper.connection.timeout.ms``, a broker id in use, a meta.properties of another broker or cluster) prints one
line on stderr naming the key or path at fault in Kafka's words, is recorded in server.log, and exits with status 1,
never with a traceback. An unusable log dir (cannot be created, not a readable directory, ``.lock`` or
``meta.properties`` cannot be opened) prints Kafka's two lines: ``Failed to create or validate data directory <dir>
(log.dirs): <why>`` and ``Shutdown broker because none of the specified log dirs from <dirs> can be created or
validated``. Anything unexpected prints Kafka's ``Fatal error during KafkaServer startup. Prepare to shutdown`` with
the exception (its traceback goes to server.log only). SIGTERM/SIGINT stop the broker cleanly (logs
flushed, checkpoints written, clean-shutdown marker left). While it runs, the broker's pid file in LOG_DIR lets
``kafka-server-stop`` find it.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Optional

from broker import KAFKA_VERSION, __version__

if TYPE_CHECKING:
    from broker.config import KafkaConfig

log = logging.getLogger("broker")

#: how the usage line names the command (bin/ scripts export their own name)
PROG = os.environ.get("BROKER_PROG", "kafka-server-start")
USAGE = f"USAGE: {PROG} [-daemon] server.properties [--override property=value]*"
OPTIONS = """Option               Description
------               -----------
--override <String>  Optional property that should override values set in
                       server.properties file
--version            Print version information and exit."""
#: start-up errors whose message is the whole story (anything else is a bug: its traceback goes to server.log)
EXPECTED_ERRORS = ("ZkUnavailableError", "BrokerIdInUseError", "InconsistentClusterIdError", "ConfigError",
                   "KafkaStorageError", "InconsistentBrokerIdError")


class UsageError(Exception):
    """A bad command line; the message comes before the usage text."""


@dataclass
class Arguments:
    config: str
    overrides: List[str] = field(default_factory=list)
    daemon: bool = False


def parse_args(argv: List[str]) -> Optional[Arguments]:
    """Kafka's command line (kafka.Kafka.getPropsFromArgs); None means "print the version". Raises UsageError."""
    args = list(argv)
    daemon = bool(args) and args[0] == "-daemon"
    if daemon:
        args.pop(0)
    if not args or "--help" in args:
        raise UsageError("")
    if "--version" in args:
        return None
    config, rest = args[0], args[1:]
    if config.startswith("--"):
        raise UsageError(f"{config} needs a server.properties file before it")
    overrides: List[str] = []
    extra: List[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--override":
            if i + 1 >= len(rest):
                raise UsageError("Option override requires an argument")
            overrides.append(rest[i + 1])
            i += 2
            continue
        if arg.startswith("--override="):
            overrides.append(arg[len("--override="):])
        elif arg.startswith("-") and arg != "-":
            raise UsageError(f"{arg.lstrip('-')} is not a recognized option")
        else:
            extra.append(arg)
        i += 1
    if extra:
        raise UsageError("Found non argument parameters: " + ",".join(extra))
    return Arguments(config, overrides, daemon)


def _fail(message: str, *more: str) -> int:
    """One line on stderr (what the operator sees; a log dir failure adds Kafka's shutdown line), the same lines in
    server.log; exit status 1."""
    from broker.log_setup import log_to_files_only
    for line in (message, *more):
        print(f"ERROR {line}", file=sys.stderr, flush=True)
        log_to_files_only(log, logging.ERROR, line)
    return 1


async def _run(config: "KafkaConfig") -> int:
    from broker.server import BrokerServer, StartupError
    server = BrokerServer(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        start = loop.create_task(server.start())
        stop_wait = loop.create_task(stop.wait())
        done, _ = await asyncio.wait({start, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        if start in done:
            start.result()
        else:
            start.cancel()
            _ignore_further_stop_signals(loop)
            await server.stop()
            return 0
    except StartupError as exc:
        await _safe_stop(server)
        return _fail(str(exc))
    except Exception as exc:
        await _safe_stop(server)
        name = type(exc).__name__
        lines = getattr(exc, "lines", None)  # LogDirsError: one line per unusable log dir, then Kafka's shutdown line
        if lines:
            return _fail(*lines)
        if name in EXPECTED_ERRORS:
            return _fail(str(exc).splitlines()[0] if str(exc) else name)
        from broker.log_setup import log_to_files_only
        log_to_files_only(log, logging.ERROR, "Fatal error during KafkaServer startup. Prepare to shutdown",
                          exc_info=exc)
        return _fail(f"Fatal error during KafkaServer startup. Prepare to shutdown ({name}: {exc}; traceback in "
                     f"server.log)")
    await stop.wait()
    _ignore_further_stop_signals(loop)
    await server.stop()
    return 0


def _ignore_further_stop_signals(loop: asyncio.AbstractEventLoop) -> None:
    """Once shutdown has begun, another SIGTERM/SIGINT changes nothing (as for Kafka's JVM): without this, one
    arriving after the event loop closed (which restores the default action) would kill the process mid-exit."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)
        signal.signal(sig, signal.SIG_IGN)


async def _safe_stop(server: object) -> None:
    try:
        await server.stop()  # type: ignore[attr-defined]
    except Exception:
        log.debug("Error while stopping after a failed start", exc_info=True)


def _start_daemon(args: Arguments) -> int:
    """-daemon: the same command, detached, console output in <LOG_DIR>/kafkaServer.out (as kafka-run-class.sh)."""
    from broker.log_setup import log_dir
    directory = log_dir()
    directory.mkdir(parents=True, exist_ok=True)
    out_path = directory / "kafkaServer.out"
    # -P: the broker this interpreter has installed, never a "broker" directory that happens to be the cwd
    cmd = [sys.executable, "-P", "-m", "broker", os.path.abspath(args.config)]
    for item in args.overrides:
        cmd += ["--override", item]
    env = dict(os.environ, BROKER_LOG_DIR=str(directory))
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, close_fds=True)
    print(f"Broker started in the background (pid {proc.pid}, output in {out_path})")
    return 0


def _unreadable(config: str) -> Optional[str]:
    """Why the config file cannot be read (Kafka: java.nio.file.AccessDeniedException and the like), or None."""
    if os.path.isdir(config):
        return f"Cannot read config file {config}: Is a directory"
    try:
        with open(config, "rb"):
            return None
    except OSError as exc:
        return f"Cannot read config file {config}: {exc.strerror or exc}"


def _log_dir_message(exc: OSError, where: str) -> str:
    """The broker's own log files (server.log, the pid file, kafkaServer.out) cannot be written: name the variable
    that chose their directory (``where``, from :func:`_log_dir_source`) and the path at fault."""
    path = f" ({exc.filename})" if exc.filename and not where.endswith(str(exc.filename)) else ""
    return f"Cannot write the broker's log files in {where}: {exc.strerror or exc}{path}"


def _log_dir_source() -> str:
    """``LOG_DIR=<dir>`` (or ``BROKER_LOG_DIR=<dir>``, or ``the default LOG_DIR <dir>``): read before
    setup_logging, which sets BROKER_LOG_DIR itself."""
    from broker.log_setup import log_dir
    for variable in ("BROKER_LOG_DIR", "LOG_DIR"):
        if os.environ.get(variable):
            return f"{variable}={log_dir()}"
    return f"the default LOG_DIR {log_dir()}"


def main(argv: Optional[List[str]] = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        if str(exc):
            print(str(exc), file=sys.stderr)
        print(USAGE, file=sys.stderr)
        print(OPTIONS, file=sys.stderr)
        return 1
    if args is None:
        print(f"{__version__} (Apache Kafka {KAFKA_VERSION} compatible, ZooKeeper mode)")
        return 0
    if not os.path.exists(args.config):
        print(f"ERROR Config file not found: {args.config}", file=sys.stderr)
        return 1
    unreadable = _unreadable(args.config)
    if unreadable:
        print(f"ERROR {unreadable}", file=sys.stderr)
        return 1
    from broker.config.loader import load_config
    from broker.config.types import ConfigError
    if args.daemon:
        logging.getLogger().addHandler(logging.NullHandler())  # warnings belong to the daemon's own logs
        try:
            load_config(args.config, args.overrides)  # a bad value is reported here, not only in the .out file
        except ConfigError as exc:
            print(f"ERROR {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"ERROR Cannot read config file {args.config}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        try:
            return _start_daemon(args)
        except OSError as exc:
            print(f"ERROR {_log_dir_message(exc, _log_dir_source())}", file=sys.stderr)
            return 1

    from broker.log_setup import setup_logging
    from broker.pid_files import remove_pid_file, write_pid_file
    where = _log_dir_source()
    try:
        directory = setup_logging()
        pid_file = write_pid_file(directory)
    except OSError as exc:
        print(f"ERROR {_log_dir_message(exc, where)}", file=sys.stderr)
        return 1
    try:
        try:
            config = load_config(args.config, args.overrides)
        except ConfigError as exc:
            return _fail(str(exc))
        except OSError as exc:
            return _fail(f"Cannot read config file {args.config}: {exc.strerror or exc}")
        if config.ignored_keys_set:
            log.info("Accepted but not acted on by this broker: %s", ", ".join(config.ignored_keys_set))
        try:
            from broker import accel  # noqa: F401  (logs which record-batch implementation is in use)
        except ImportError as exc:  # BROKER_REQUIRE_NATIVE without a Cython build
            return _fail(str(exc))
        _use_uvloop()
        return asyncio.run(_run(config))
    finally:
        remove_pid_file(pid_file)


def _use_uvloop() -> None:
    """Pick the event loop: asyncio's by default, uvloop with BROKER_EVENT_LOOP=uvloop.

    Measured here (tools/bench): uvloop halves the broker's CPU per small request, but with the
    disk work on worker threads its produce ack latency p99 at 1,000 records/s was 30-80 ms,
    against 2.5-4 ms on asyncio's loop; so asyncio's loop is the default.
    """
    if os.environ.get("BROKER_EVENT_LOOP", "asyncio") != "uvloop":
        return
    try:
        import uvloop
    except ImportError:
        log.warning("BROKER_EVENT_LOOP=uvloop but uvloop is not installed; using asyncio's event loop")
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    log.info("Using uvloop %s", uvloop.__version__)


if __name__ == "__main__":
    sys.exit(main())
