"""Running a tool: Kafka's exit codes and error lines, and the client set-up every tool shares.

``run_tool`` turns the exceptions of ``tools.cli.options`` into what Kafka's tools print: a usage error is its
message then the option table on stderr (exit 1), a command error its one line (exit 1), ``--help``/``--version``
their text. Ctrl-C ends a tool quietly with status 130 (a console consumer's summary is still printed by the tool);
a closed standard output (``tool | head``) ends it quietly too.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

from tools import invoked_as, main_module, missing_module_line

from .client_config import ClientConfig, build_client_config, load_properties_file
from .options import CommandError, HelpOrVersion, OptionParser, Options, UsageError
from .protocol_client import ProtocolClient, ProtocolClientError

__all__ = ["run_tool", "tool_main", "client_config", "admin_client", "protocol_client", "kafka_error_text", "future_result",
           "standard_options"]


def run_tool(parser: OptionParser, body: Callable[[], int], module: Optional[str] = None) -> int:
    """Run ``body`` (which parses with ``parser``) and map its failures to Kafka's output and exit codes; a module
    the tool needs that is not installed is one line naming what to install (``module``: the tool's, for its name)."""
    try:
        return body()
    except ModuleNotFoundError as e:
        print(missing_module_line(e, invoked_as(module or main_module())), file=sys.stderr)
        return 1
    except HelpOrVersion as h:
        stream = sys.stdout if h.stream == "stdout" else sys.stderr
        stream.write(h.text)
        return h.exit_code
    except UsageError as e:
        sys.stderr.write(f"{e}\n{parser.help_table()}")
        return 1
    except CommandError as e:
        stream = sys.stdout if e.stream == "stdout" else sys.stderr
        print(str(e), file=stream)
        return e.exit_code
    except ProtocolClientError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tool | head`: the reader left; a Java tool's PrintStream ignores that too
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


def tool_main(build_parser: Callable[[], OptionParser], run: Callable[[List[str], OptionParser], int],
              argv: Optional[Sequence[str]] = None) -> int:
    """A tool's ``main()``: its arguments (``sys.argv``'s by default) run by ``run`` under :func:`run_tool`."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    module = run.__module__ if run.__module__ != "__main__" else None
    return run_tool(parser, lambda: run(args, parser), module)


def standard_options(parser: OptionParser, bootstrap_help: str = "REQUIRED: The Kafka server to connect to.",
                     config_help: str = "Property file containing configs to be passed to Admin Client.") -> None:
    """``--bootstrap-server`` and ``--command-config``, as nearly every Kafka tool has them."""
    parser.arg("bootstrap-server", bootstrap_help, "server to connect to")
    parser.arg("command-config", config_help, "command config property file")


def client_config(opts: Options, role: str = "admin", config_option: str = "command-config",
                  extra: Optional[Dict[str, str]] = None, bootstrap_option: str = "bootstrap-server") -> ClientConfig:
    """The client settings of a tool: its properties file, then ``extra`` (e.g. ``--producer-property``), then
    ``--bootstrap-server``."""
    props: Dict[str, str] = {}
    if config_option and opts.has(config_option):
        props.update(load_properties_file(opts.value(config_option)))
    props.update(extra or {})
    bootstrap = opts.value(bootstrap_option) if bootstrap_option and opts.has(bootstrap_option) else None
    return build_client_config(props, role, bootstrap)


def admin_client(cfg: ClientConfig, client_id: str = "adminclient-1") -> Any:
    """confluent-kafka's AdminClient; its librdkafka log comes out as Kafka's client warnings, rate-limited
    (``client_log``)."""
    from confluent_kafka.admin import AdminClient

    from .client_log import serve_logs, with_kafka_log

    conf = dict(cfg.librdkafka)
    conf.setdefault("socket.timeout.ms", cfg.request_timeout_ms)
    admin = AdminClient(with_kafka_log(conf, "AdminClient", cfg.client_id or client_id))
    serve_logs(admin)
    return admin


def protocol_client(cfg: ClientConfig, client_id: str = "adminclient-1", retry: bool = True) -> ProtocolClient:
    """The project's protocol client, retrying unreachable brokers until ``default.api.timeout.ms`` as Kafka's admin
    client does (``retry=False``: one try), its warnings labelled ``[AdminClient clientId=<client_id>]``."""
    bootstrap = cfg.java.get("bootstrap.servers", "")
    name = cfg.client_id or client_id
    # the socket waits a little longer than request.timeout.ms, which requests like CreateTopics also hand the
    # broker as their own timeout: its answer at that timeout still arrives
    return ProtocolClient(bootstrap, cfg.security, client_id=cfg.client_id or "kafka-tools",
                          timeout_s=cfg.request_timeout_ms / 1000.0 + 1.0,
                          retry_timeout_s=cfg.default_api_timeout_ms / 1000.0 if retry else None,
                          log_label=f"AdminClient clientId={name}",
                          backoff_ms=(_int_prop(cfg, "reconnect.backoff.ms", 50),
                                      _int_prop(cfg, "reconnect.backoff.max.ms", 1000)))


def _int_prop(cfg: ClientConfig, key: str, default: int) -> int:
    try:
        return int(cfg.java.get(key, default))
    except ValueError:
        return default


def kafka_error_text(exc: BaseException) -> str:
    """The message of a confluent-kafka failure (KafkaException wraps a KafkaError), else ``str(exc)``."""
    arg = exc.args[0] if getattr(exc, "args", None) else None
    if arg is not None and hasattr(arg, "str") and callable(arg.str):
        return str(arg.str())
    return str(exc)


def kafka_error_code(exc: BaseException) -> Optional[int]:
    arg = exc.args[0] if getattr(exc, "args", None) else None
    if arg is not None and hasattr(arg, "code") and callable(arg.code):
        return int(arg.code())
    return None


def future_result(future: Any, timeout_s: float) -> Any:
    """A confluent-kafka future's result; a timeout becomes Kafka's TimeoutException line."""
    import concurrent.futures

    try:
        return future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise CommandError(f"org.apache.kafka.common.errors.TimeoutException: timed out after {timeout_s:.0f} s "
                           "waiting for the cluster") from None
