"""The broker's command line (kafka.Kafka's), its log locations and its pid files, without starting a broker."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker import __main__ as cli
from broker import __version__
from broker.log_setup import (
    DEFAULT_LOG_CONFIG,
    install_root,
    log_dir,
    log_to_files_only,
)
from broker.pid_files import (
    is_broker_command,
    is_broker_process,
    pid_file_path,
    recorded_brokers,
    remove_pid_file,
    write_pid_file,
)

ROOT = Path(__file__).resolve().parents[2]


def test_overrides_are_repeatable_in_both_forms() -> None:
    args = cli.parse_args(["s.properties", "--override", "a=1", "--override=b=2=3", "--override", "c="])
    assert args is not None and args.config == "s.properties" and not args.daemon
    assert args.overrides == ["a=1", "b=2=3", "c="]
    daemon = cli.parse_args(["-daemon", "s.properties"])
    assert daemon is not None and daemon.daemon and daemon.overrides == []


@pytest.mark.parametrize("argv, message", [
    ([], ""),
    (["--help"], ""),
    (["s.properties", "--help"], ""),
    (["-daemon"], ""),
    (["s.properties", "extra", "more"], "Found non argument parameters: extra,more"),
    (["s.properties", "--overide", "a=b"], "overide is not a recognized option"),
    (["s.properties", "--override"], "Option override requires an argument"),
    (["--override", "a=b"], "--override needs a server.properties file before it"),
])
def test_usage_errors(argv: list, message: str) -> None:
    with pytest.raises(cli.UsageError) as info:
        cli.parse_args(argv)
    assert str(info.value) == message


def test_help_goes_to_stderr_with_exit_1_and_version_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and cli.USAGE in err and "--override <String>" in err
    assert cli.main(["s.properties", "--version"]) == 0
    out, err = capsys.readouterr()
    assert out.split()[0] == __version__ and err == ""


def test_missing_config_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([str(tmp_path / "none.properties")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"ERROR Config file not found: {tmp_path / 'none.properties'}\n"


def test_log_dir_prefers_broker_log_dir_then_log_dir_then_the_install(tmp_path: Path) -> None:
    assert log_dir({"BROKER_LOG_DIR": str(tmp_path / "a"), "LOG_DIR": str(tmp_path / "b")}) == tmp_path / "a"
    assert log_dir({"LOG_DIR": str(tmp_path / "b")}) == tmp_path / "b"
    assert install_root() == ROOT  # a checkout (it has bin/kafka-server-start.sh)
    assert log_dir({}) == ROOT / "logs"
    assert DEFAULT_LOG_CONFIG.is_file()


def test_log_to_files_only_skips_the_console(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("test.files.only")
    logger.propagate = False
    file_handler = logging.FileHandler(tmp_path / "server.log")
    console = logging.StreamHandler(sys.stderr)
    logger.addHandler(file_handler)
    logger.addHandler(console)
    try:
        log_to_files_only(logger, logging.ERROR, "boom once", exc_info=ValueError("why"))
    finally:
        logger.removeHandler(file_handler)
        logger.removeHandler(console)
        file_handler.close()
    text = (tmp_path / "server.log").read_text()
    assert "boom once" in text and "ValueError: why" in text
    assert capsys.readouterr().err == ""


def test_broker_commands_are_recognised() -> None:
    assert is_broker_command(["/v/bin/python", "-m", "broker", "s.properties"])
    assert is_broker_command(["/v/bin/python3", "-P", "-m", "broker", "/abs/s.properties"])  # -daemon's child
    assert not is_broker_command(["/v/bin/python3", "-P"])
    assert is_broker_command(["/v/bin/python3.11", "/v/bin/kafka-server-start", "s.properties"])
    assert not is_broker_command(["/v/bin/python", "-m", "brokers"])
    assert not is_broker_command(["/usr/bin/java", "kafka.Kafka", "s.properties"])
    assert not is_broker_command(["sleep", "broker"])


def test_pid_files_of_dead_or_foreign_processes_are_stale(tmp_path: Path) -> None:
    mine = write_pid_file(tmp_path)  # pytest is not a broker process
    assert mine == pid_file_path(tmp_path, os.getpid()) and mine.read_text() == f"{os.getpid()}\n"
    (tmp_path / "kafkaServer-garbage.pid").write_text("not a pid\n")
    assert recorded_brokers(tmp_path) == []
    assert list(tmp_path.iterdir()) == []
    remove_pid_file(mine)  # already gone: no error


def test_stop_tool_stops_the_recorded_broker_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A stand-in broker (a `python -m broker` whose broker package only sleeps) recorded in one LOG_DIR is
    stopped by kafka-server-stop with that LOG_DIR; one not recorded there is left alone."""
    fake = tmp_path / "fake"
    (fake / "broker").mkdir(parents=True)
    (fake / "broker" / "__init__.py").write_text("")
    (fake / "broker" / "__main__.py").write_text("import time\ntime.sleep(60)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    recorded = subprocess.Popen([sys.executable, "-m", "broker"], cwd=fake, env=env)
    other = subprocess.Popen([sys.executable, "-m", "broker"], cwd=fake, env=env)
    try:
        deadline = time.monotonic() + 10
        while not (is_broker_process(recorded.pid) and is_broker_process(other.pid)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        logs = tmp_path / "logs"
        write_pid_file(logs, recorded.pid)
        assert recorded_brokers(logs) == [recorded.pid]
        monkeypatch.setenv("LOG_DIR", str(logs))
        monkeypatch.delenv("BROKER_LOG_DIR", raising=False)
        from tools.server_stop import main as stop
        assert stop(["--dry-run"]) == 0 and capsys.readouterr().out.split() == ["Would", "stop:", str(recorded.pid)]
        assert stop(["--all", "--dry-run"]) == 0
        assert {str(recorded.pid), str(other.pid)} <= set(capsys.readouterr().out.split())
        assert stop(["--timeout", "10"]) == 0
        assert recorded.wait(10) == -15 and other.poll() is None
        assert stop([]) == 1 and capsys.readouterr().out.strip().endswith("No kafka server to stop")
        assert list(logs.iterdir()) == []  # the stale file went with it
        assert stop(["--node-id", "1"]) == 1
    finally:
        for proc in (recorded, other):
            proc.kill()
            proc.wait()
    assert not is_broker_process(other.pid) and not is_broker_process(-1)


def test_log_lines_use_log4j_level_names(tmp_path: Path) -> None:
    """Kafka's layout ``[%d] %p %m (%c)``: WARN and FATAL, not Python's WARNING and CRITICAL, on stdout and in
    server.log; a logging configuration of the user's own (its levels written either way) prints them too."""
    code = ("import logging; from broker.log_setup import setup_logging; setup_logging(); "
            "lg = logging.getLogger('broker.x'); lg.info('i'); lg.warning('w'); lg.error('e'); lg.critical('c')")
    env = dict(os.environ, BROKER_LOG_DIR=str(tmp_path / "logs"))
    env.pop("BROKER_LOG_CONFIG", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(ROOT),
                         timeout=60)
    assert out.returncode == 0, out.stderr
    levels = [line.split("] ", 1)[1] for line in out.stdout.splitlines()]
    assert levels == ["INFO i (broker.x)", "WARN w (broker.x)", "ERROR e (broker.x)", "FATAL c (broker.x)"], out.stdout
    assert (tmp_path / "logs" / "server.log").read_text().count("] WARN w (broker.x)") == 1
    own = tmp_path / "own.ini"
    own.write_text("[loggers]\nkeys=root\n[handlers]\nkeys=h\n[formatters]\nkeys=f\n[logger_root]\nlevel=WARNING\n"
                   "handlers=h\n[handler_h]\nclass=StreamHandler\nlevel=WARN\nformatter=f\nargs=(sys.stdout,)\n"
                   "[formatter_f]\nformat=%(levelname)s %(message)s\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=60,
                         env=dict(env, BROKER_LOG_CONFIG=str(own)))
    assert out.returncode == 0 and out.stdout.splitlines() == ["WARN w", "ERROR e", "FATAL c"], out.stdout + out.stderr
