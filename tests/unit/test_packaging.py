"""pyproject.toml agrees with the rest of the project: the runtime dependencies with requirements.txt, every console
script with the launcher's table and a callable main, every package-data pattern with files that exist (the
integration test tests/integration/test_packaging.py builds and installs the package for real); a tool whose
dependency is missing says what to install in one line."""
from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path
from typing import Any, Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pyproject() -> Dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower()


def runtime_requirements() -> List[str]:
    """The lines of requirements.txt's "Runtime" block (up to the next comment line)."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("# Runtime"))
    block: List[str] = []
    for ln in lines[start + 1:]:
        if ln.startswith("#"):
            break
        if ln.strip():
            block.append(ln.strip())
    return block


def test_runtime_dependencies_match_requirements_txt() -> None:
    assert sorted(pyproject()["project"]["dependencies"]) == sorted(runtime_requirements())


def test_build_requirements_are_declared() -> None:
    requires = {_name(r) for r in pyproject()["build-system"]["requires"]}
    assert {"setuptools", "cython", "wheel"} <= requires


def test_the_tools_need_only_the_runtime_install() -> None:
    """scripts/install.sh installs requirements.txt only: what the bin/ tools import must be there."""
    runtime = {_name(r) for r in runtime_requirements()}
    assert "confluent-kafka" in runtime
    assert not any(_name(r) == "confluent-kafka" for r in (ROOT / "requirements-test.txt").read_text().splitlines())
    assert "tools" not in pyproject()["project"].get("optional-dependencies", {})


def test_every_console_script_runs_a_main_through_the_launcher() -> None:
    from kafka_broker_py import _launch

    scripts = pyproject()["project"]["scripts"]
    assert sorted(scripts) == sorted(_launch.TOOLS)
    assert _launch.TOOLS["kafka-server-start"] == "broker.__main__"
    for name, target in scripts.items():
        assert target == f"kafka_broker_py._launch:{name.replace('-', '_')}", name
        assert callable(getattr(_launch, name.replace("-", "_"))), name
        assert callable(importlib.import_module(_launch.TOOLS[name]).main), name
    bin_tools = {p.name[:-3] for p in (ROOT / "bin").glob("kafka-*.sh")}
    assert set(scripts) <= bin_tools, set(scripts) - bin_tools


def test_the_distribution_has_one_top_level_package() -> None:
    assert pyproject()["project"]["name"] == "kafka-broker-py"
    setup_py = (ROOT / "setup.py").read_text()
    assert 'NAMESPACE = "kafka_broker_py"' in setup_py
    assert "packages.find" not in (ROOT / "pyproject.toml").read_text()  # setup.py puts the prefix on every package
    for package in pyproject()["tool"]["setuptools"]["package-data"]:
        assert package.startswith("kafka_broker_py."), package


def package_directory(package: str) -> Path:
    """The checkout folder of an installed package name (kafka_broker_py.broker.x -> broker/x)."""
    parts = package.split(".")
    assert parts[0] == "kafka_broker_py"
    return ROOT.joinpath(*parts[1:]) if len(parts) > 1 else ROOT / "kafka_broker_py"


def test_package_data_patterns_match_files() -> None:
    data = pyproject()["tool"]["setuptools"]["package-data"]
    for package, patterns in data.items():
        directory = package_directory(package)
        for pattern in patterns:
            assert list(directory.glob(pattern)), f"{package}: {pattern} matches nothing"
    schemas = list((ROOT / "broker" / "protocol" / "schemas").glob("*.schema"))
    assert len(schemas) > 50  # the codec reads them at run time: they must ship


def test_the_checkouts_logging_config_is_the_packaged_one() -> None:
    assert (ROOT / "config" / "logging.ini").resolve() == (ROOT / "broker" / "config" / "logging.ini").resolve()


def test_version_is_single_sourced() -> None:
    import broker
    assert pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "broker.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", broker.__version__)


# ------------------------------------------------------------------------------------- a dependency not installed
@pytest.fixture
def without_confluent_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import confluent_kafka`` (and its submodules) fails as if the package were not installed."""
    import sys

    for name in [n for n in sys.modules if n == "confluent_kafka" or n.startswith("confluent_kafka.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)


# The tools whose clients are librdkafka's (a Producer, a Consumer): they import confluent_kafka before connecting.
@pytest.mark.parametrize("module, args", [
    ("tools.cli.console_producer", ["--bootstrap-server", "127.0.0.1:1", "--topic", "t"]),
    ("tools.cli.console_consumer", ["--bootstrap-server", "127.0.0.1:1", "--topic", "t"]),
    ("tools.cli.producer_perf_test", ["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput",
                                      "-1", "--producer-props", "bootstrap.servers=127.0.0.1:1"]),
    ("tools.cli.consumer_perf_test", ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--messages", "1"]),
])
def test_a_tool_without_its_client_library_says_what_to_install(
        module: str, args: List[str], without_confluent_kafka: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    script = "kafka-" + module.rsplit(".", 1)[-1].replace("_", "-")
    for argv0, prog in (("/venv/bin/" + script, script), (str(ROOT / "tools" / "cli" / "x.py"), script + ".sh")):
        monkeypatch.setattr(sys, "argv", [argv0])
        assert importlib.import_module(module).main(args) == 1
        out, err = capsys.readouterr()
        assert out == "" and err == (f"{prog}: confluent-kafka is not installed; run bash {ROOT}/scripts/install.sh "
                                     "(or pip install confluent-kafka)\n"), err


def test_any_tool_reports_a_module_missing_at_run_time(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from tools.cli.command import tool_main
    from tools.cli.options import OptionParser

    def run(args: List[str], parser: OptionParser) -> int:
        import kazoo_not_installed_here  # noqa: F401
        return 0

    monkeypatch.setattr(sys, "argv", ["/venv/bin/kafka-anything"])
    assert tool_main(lambda: OptionParser("x"), run, []) == 1
    assert capsys.readouterr().err == ("kafka-anything: kazoo_not_installed_here is not installed; run bash "
                                       f"{ROOT}/scripts/install.sh (or pip install kazoo_not_installed_here)\n")


def test_the_launcher_reports_a_module_missing_at_import(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import sys

    from kafka_broker_py import _launch

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    monkeypatch.setattr(sys, "argv", ["/venv/bin/kafka-x"])
    assert _launch.launch("uvloop_is_not_here_either", "kafka-x") == 1
    assert capsys.readouterr().err == ("kafka-x: uvloop_is_not_here_either is not installed; run bash "
                                       f"{ROOT}/scripts/install.sh (or pip install uvloop_is_not_here_either)\n")
    assert str(ROOT) in sys.path and str(ROOT) in os.environ["PYTHONPATH"].split(os.pathsep)


def test_tools_name_themselves_as_invoked(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """As Kafka's scripts ($0): bin/kafka-run-class.sh runs python -m tools.cli.run_class (argv[0] its .py file);
    the console script's argv[0] is its own path."""
    import sys

    from tools import cluster
    from tools.cli import run_class, transactions

    for argv0, prog in ((str(ROOT / "tools" / "cli" / "run_class.py"), "kafka-run-class.sh"),
                        ("/venv/bin/kafka-run-class", "kafka-run-class")):
        monkeypatch.setattr(sys, "argv", [argv0])
        assert run_class.main([]) == 1
        assert capsys.readouterr().err == f"USAGE: {prog} [-daemon] [-name servicename] [-loggc] classname [opts]\n"
    for argv0, prog in ((str(ROOT / "tools" / "cluster.py"), "kafka-cluster.sh"),
                        ("/venv/bin/kafka-cluster", "kafka-cluster")):
        monkeypatch.setattr(sys, "argv", [argv0])
        with pytest.raises(SystemExit):
            cluster.main(["--help"])
        assert capsys.readouterr().out.startswith(f"usage: {prog} [-h]")
    # Kafka's TransactionsCommand names itself kafka-transactions.sh; the console script, kafka-transactions
    for argv0, prog in ((str(ROOT / "tools" / "cli" / "transactions.py"), "kafka-transactions.sh"),
                        ("/venv/bin/kafka-transactions", "kafka-transactions")):
        monkeypatch.setattr(sys, "argv", [argv0])
        assert transactions.main(["--bootstrap-server", "127.0.0.1:1", "nonsense"]) == 1
        err = capsys.readouterr().err.splitlines()
        assert err[0] == f"usage: {prog} [-h] [-v] [--command-config FILE]", err
        assert err[1] == " " * len(f"usage: {prog} ") + "--bootstrap-server host:port COMMAND ...", err
        assert err[2].startswith(f"{prog}: error: invalid choice: 'nonsense'"), err
