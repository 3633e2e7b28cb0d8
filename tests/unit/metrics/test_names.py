"""The exported names are the ones the Prometheus JMX exporter's Kafka example configuration gives Kafka's MBeans.

RULES are the rules of prometheus/jmx_exporter ``example_configs/kafka-2_0_0.yml`` (``lowercaseOutputName:
true``), in the file's order, as (pattern, name, labels); the exporter applies the first rule whose pattern
matches ``domain<key=value, ...><>attribute`` in full. Applying them to each bean of broker/metrics/names.py
must give that entry's sample name and labels.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import pytest

from broker.metrics import names as n
from broker.metrics.collector import kafka_request_name
from broker.protocol.api_keys import ApiKey
from broker.protocol.schema import load_apis

_KV2 = {"$4": "$5", "$6": "$7"}
RULES: List[Tuple[str, str, Dict[str, str]]] = [
    # special cases
    (r"kafka.server<type=(.+), name=(.+), clientId=(.+), topic=(.+), partition=(.*)><>Value", "kafka_server_$1_$2",
     {"clientId": "$3", "topic": "$4", "partition": "$5"}),
    (r"kafka.server<type=(.+), name=(.+), clientId=(.+), brokerHost=(.+), brokerPort=(.+)><>Value",
     "kafka_server_$1_$2", {"clientId": "$3", "broker": "$4:$5"}),
    (r"kafka.coordinator.(\w+)<type=(.+), name=(.+)><>Value", "kafka_coordinator_$1_$2_$3", {}),
    # generic per-second counters with 0-2 key/value pairs
    (r"kafka.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+), (.+)=(.+)><>Count", "kafka_$1_$2_$3_total", _KV2),
    (r"kafka.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+)><>Count", "kafka_$1_$2_$3_total", {"$4": "$5"}),
    (r"kafka.(\w+)<type=(.+), name=(.+)PerSec\w*><>Count", "kafka_$1_$2_$3_total", {}),
    # quotas
    (r"kafka.server<type=(.+), client-id=(.+)><>([a-z-]+)", "kafka_server_quota_$3",
     {"resource": "$1", "clientId": "$2"}),
    (r"kafka.server<type=(.+), user=(.+), client-id=(.+)><>([a-z-]+)", "kafka_server_quota_$4",
     {"resource": "$1", "user": "$2", "clientId": "$3"}),
    # generic gauges with 0-2 key/value pairs
    (r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Value", "kafka_$1_$2_$3", _KV2),
    (r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Value", "kafka_$1_$2_$3", {"$4": "$5"}),
    (r"kafka.(\w+)<type=(.+), name=(.+)><>Value", "kafka_$1_$2_$3", {}),
    # histograms as summaries: Count and NNthPercentile
    (r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Count", "kafka_$1_$2_$3_count", _KV2),
    (r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.*), (.+)=(.+)><>(\d+)thPercentile", "kafka_$1_$2_$3",
     dict(_KV2, quantile="0.$8")),
    (r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Count", "kafka_$1_$2_$3_count", {"$4": "$5"}),
    (r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.*)><>(\d+)thPercentile", "kafka_$1_$2_$3",
     {"$4": "$5", "quantile": "0.$6"}),
    (r"kafka.(\w+)<type=(.+), name=(.+)><>Count", "kafka_$1_$2_$3_count", {}),
    (r"kafka.(\w+)<type=(.+), name=(.+)><>(\d+)thPercentile", "kafka_$1_$2_$3", {"quantile": "0.$4"}),
]

#: beyond the file: Kafka 3.9's kafka.log.remote beans match none of its rules (the exporter would drop them); their
#: names follow its generic gauge rule with the domain's dots as underscores, as its kafka.coordinator.(\w+) rule
#: does (broker/metrics/names.py, rule "gauge (dotted domain)")
DOTTED_DOMAIN_RULES: List[Tuple[str, str, Dict[str, str]]] = [
    (r"kafka.log.remote<type=(.+), name=(.+)><>Value", "kafka_log_remote_$1_$2", {}),
]

EXAMPLE = {"topic": "orders", "partition": "3", "request": "Produce", "version": "9", "logDirectory": "/data/kafka",
           "delayedOperation": "RemoteFetch"}


def _subst(template: str, m: "re.Match[str]") -> str:
    return re.sub(r"\$(\d)", lambda g: m.group(int(g.group(1))), template)


def export(bean: str, rules: Optional[List[Tuple[str, str, Dict[str, str]]]] = None
           ) -> Optional[Tuple[str, Dict[str, str]]]:
    """What the exporter makes of one bean attribute: (sample name, labels), or None if no rule matches."""
    for pattern, name, labels in (RULES if rules is None else rules):
        m = re.fullmatch(pattern, bean)
        if m is not None:
            return _subst(name, m).lower(), {_subst(k, m): _subst(v, m) for k, v in labels.items()}
    return None


KAFKA_BEANS = [(spec, bean) for spec in n.SPECS for bean in spec.beans]


@pytest.mark.parametrize("spec,bean", KAFKA_BEANS, ids=[b for _, b in KAFKA_BEANS])
def test_each_name_is_what_the_jmx_exporter_rules_give_the_kafka_bean(spec: n.MetricSpec, bean: str) -> None:
    exported = export(bean.format(**EXAMPLE))
    if spec.rule == "gauge (dotted domain)":
        assert exported is None, f"a rule of kafka-2_0_0.yml matches {bean}"
        exported = export(bean.format(**EXAMPLE), DOTTED_DOMAIN_RULES)
    assert exported is not None, f"no rule of kafka-2_0_0.yml matches {bean}"
    name, labels = exported
    assert name in spec.sample_names
    expected_labels = {k: EXAMPLE[k] for k in spec.labels if "{" + k + "}" in bean}
    if bean.endswith("thPercentile"):
        expected_labels["quantile"] = "0.99"
    assert labels == expected_labels


def test_every_kafka_metric_has_its_bean_and_only_project_metrics_have_the_project_prefix() -> None:
    for spec in n.SPECS:
        if spec.name.startswith("kafka_"):
            assert spec.beans and spec.rule != "project's own", spec.name
        else:
            assert spec.name.startswith("broker_") and not spec.beans, spec.name


def test_families_are_unique_and_typed() -> None:
    assert len({s.name for s in n.SPECS}) == len(n.SPECS)
    assert {s.type for s in n.SPECS} <= {n.COUNTER, n.GAUGE, n.SUMMARY}
    for spec in n.SPECS:  # a counter's family name never ends in _total (its sample does)
        assert not spec.name.endswith("_total")


def test_the_example_rules_reach_the_names_kafka_dashboards_use() -> None:
    assert export("kafka.server<type=BrokerTopicMetrics, name=MessagesInPerSec><>Count") == \
        ("kafka_server_brokertopicmetrics_messagesin_total", {})
    assert export("kafka.network<type=RequestMetrics, name=TotalTimeMs, request=Fetch><>999thPercentile") == \
        ("kafka_network_requestmetrics_totaltimems", {"request": "Fetch", "quantile": "0.999"})


def test_request_label_is_kafkas_api_name_for_every_api() -> None:
    apis = load_apis()
    for key in ApiKey:
        schema_name = apis[int(key)].request.name
        assert schema_name.endswith("Request")
        assert kafka_request_name(int(key)) == schema_name[:-len("Request")], key
    assert kafka_request_name("FetchFollower") == "FetchFollower"
