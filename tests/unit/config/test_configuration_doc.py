"""docs/configuration.md is generated from broker/config/ and must be current; its statuses follow the code."""
from __future__ import annotations

from broker.config.defs import BROKER_CONFIGS
from broker.config.kafka_config import DYNAMIC_ONLY_KEYS
from broker.config.topic_defs import TOPIC_CONFIGS
from tools.docs.configuration import HONOURED, IGNORED, OUTPUT, REGENERATE, broker_key_status, main, render


def test_checked_in_reference_is_current() -> None:
    assert OUTPUT.exists(), f"{OUTPUT} is missing: run {REGENERATE}"
    assert OUTPUT.read_text() == render(), (
        f"docs/configuration.md is stale (broker/config/ changed): run `.venv/bin/{REGENERATE}` and commit it")


def test_check_mode_reports_a_stale_file(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    stale = tmp_path / "configuration.md"
    stale.write_text(render().replace("honoured", "honored", 1))
    assert main(["--check", "--output", str(stale)]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert main(["--output", str(stale)]) == 0 and main(["--check", "--output", str(stale)]) == 0


def test_every_key_has_one_row() -> None:
    text = render()
    for name in BROKER_CONFIGS:
        assert f"| `{name}` |" in text, name
    for name in TOPIC_CONFIGS:
        assert f"| `{name}` |" in text, name
    rows = [ln for ln in text.splitlines() if ln.startswith("| `")]
    assert len(rows) == len(BROKER_CONFIGS) + len(TOPIC_CONFIGS)


def test_statuses_follow_the_security_policy_and_the_flags() -> None:
    assert broker_key_status(BROKER_CONFIGS["log.segment.bytes"]) == HONOURED
    assert broker_key_status(BROKER_CONFIGS["num.network.threads"]) == IGNORED
    assert broker_key_status(BROKER_CONFIGS["sasl.jaas.config"]).startswith("refused")  # only listener-prefixed
    assert broker_key_status(BROKER_CONFIGS["zookeeper.set.acl"]).startswith("refused unless `false`")
    assert broker_key_status(BROKER_CONFIGS["ssl.keystore.location"]) == HONOURED
    for key in DYNAMIC_ONLY_KEYS:
        assert broker_key_status(BROKER_CONFIGS[key]).startswith("dynamic only")
    assert "AclAuthorizer" in broker_key_status(BROKER_CONFIGS["authorizer.class.name"])
