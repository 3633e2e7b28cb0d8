"""Client quotas: Kafka's sampled rate and throttle formula, the 8-level precedence, the token bucket,
AlterClientQuotas value handling and znode names."""
from __future__ import annotations

import pytest

from broker.cluster.client_quota_admin import QuotaOp, QuotaRequestError, _to_quota_entity, apply_ops, java_double
from broker.quota.client_quota_manager import ClientQuotaManager, ControllerMutationQuotaManager, QuotaManagers
from broker.quota.entity import DEFAULT, QuotaEntity, QuotaOverrides, desanitize, sanitize
from broker.quota.rate import SampledRate, TokenBucket, throttle_time_ms


def test_sampled_rate_counts_at_least_samples_minus_one_windows() -> None:
    r = SampledRate(11, 1000)
    r.record(10_000, 0)
    # one sample, but the span is never counted shorter than 10 windows: 10,000 / 10 s
    assert r.window_size_ms(0) == 10_000
    assert r.measure(0) == pytest.approx(1000.0)
    for t in range(1000, 20_001, 1000):
        r.record(1000, t)
    # old samples expire after 11 windows: the 11 kept samples hold 11,000 over 10 s + 0
    assert r.measure(20_000) == pytest.approx(11_000 / 10.0)


def test_unrecord_restores_the_rate() -> None:
    r = SampledRate(11, 1000)
    r.record(5000, 100)
    before = r.measure(200)
    r.record(3000, 200)
    r.record(-3000, 200)
    assert r.measure(200) == pytest.approx(before)


def test_throttle_formula_is_kafkas() -> None:
    # X = (O - T) / T * W
    assert throttle_time_ms(1500.0, 1000.0, 10_000) == 5000
    assert throttle_time_ms(900.0, 1000.0, 10_000) == 0


def test_quota_change_applies_to_existing_groups() -> None:
    m = ClientQuotaManager("producer_byte_rate", 11, 1)
    m.update(QuotaEntity(client_id="app"), 1000.0)
    assert m.record("u", "app", 12000, now=0) == 1000
    m.update(QuotaEntity(client_id="app"), 10_000.0)
    assert m.record("u", "app", 1000, now=1000) == 0
    m.update(QuotaEntity(client_id="app"), None)
    assert m.record("u", "app", 10**9, now=1000) == 0


def test_greedy_client_is_held_to_the_quota_over_any_30_seconds() -> None:
    """A client that sends the moment it may: its rate over every 30 s after the first burst is the quota."""
    for size in (16384, 1_000_000):
        m = ClientQuotaManager("producer_byte_rate", 11, 1)
        m.update(QuotaEntity(client_id="c"), 1048576.0)
        t, sent = 0, []
        while t < 120_000:
            sent.append(t)
            t += max(m.record("u", "c", size, now=t), 2)
        for start in range(22_000, 90_000, 1000):
            rate = sum(size for ts in sent if start <= ts < start + 30_000) / 30 / 1048576.0
            assert 0.95 <= rate <= 1.05, (size, start, rate)


def test_manager_throttles_only_above_the_bound() -> None:
    m = ClientQuotaManager("producer_byte_rate", 11, 1)
    assert m.record("ANONYMOUS", "app", 10**9, now=0) == 0  # no quota: nothing recorded
    m.update(QuotaEntity(client_id="app"), 1000.0)
    # a bucket of 11 windows x 1000 B/s = 11,000 bytes may be spent at once
    assert m.record("ANONYMOUS", "app", 5000, now=0) == 0
    t = m.record("ANONYMOUS", "app", 10000, now=0)  # 4000 bytes in debt at 1000 B/s
    assert t == 4000
    assert m.record("ANONYMOUS", "app", 1000, now=4000) == 1000  # paced: exactly the quota from now on
    assert m.observed_rate("ANONYMOUS", "app", now=4000) == pytest.approx(16000 / 10.0)
    assert m.record("ANONYMOUS", "other", 10**6, now=0) == 0  # another client-id has no quota
    assert m.max_value_in_window("ANONYMOUS", "app") == pytest.approx(10_000)


def test_request_quota_caps_throttle_at_one_window() -> None:
    q = QuotaManagers(11, 1)
    q.apply(QuotaEntity(user=DEFAULT), {"request_percentage": 1.0})
    assert q.request.record("ANONYMOUS", "x", 10_000.0, now=0) == 1000


@pytest.mark.parametrize("present,expected_tags,expected", [
    ([("u", "c")], ("u", "c"), 1),
    ([("u", DEFAULT)], ("u", "c"), 2),
    ([("u", None)], ("u", ""), 3),
    ([(DEFAULT, "c")], ("u", "c"), 4),
    ([(DEFAULT, DEFAULT)], ("u", "c"), 5),
    ([(DEFAULT, None)], ("u", ""), 6),
    ([(None, "c")], ("", "c"), 7),
    ([(None, DEFAULT)], ("", "c"), 8),
])
def test_each_level_alone(present: list, expected_tags: tuple, expected: int) -> None:
    o = QuotaOverrides()
    for user, client in present:
        o.set(QuotaEntity(user, client), float(expected))
    assert o.metric_tags("u", "c") == expected_tags
    assert o.limit(expected_tags) == expected


def test_most_specific_level_wins() -> None:
    levels = [("u", "c"), ("u", DEFAULT), ("u", None), (DEFAULT, "c"), (DEFAULT, DEFAULT), (DEFAULT, None),
              (None, "c"), (None, DEFAULT)]
    for i in range(len(levels)):
        o = QuotaOverrides()
        for j, (user, client) in enumerate(levels[i:], start=i + 1):
            o.set(QuotaEntity(user, client), float(j))
        tags = o.metric_tags("u", "c")
        assert tags is not None and o.limit(tags) == i + 1, (i, tags)
    assert QuotaOverrides().metric_tags("u", "c") is None


def test_user_level_is_shared_by_all_client_ids() -> None:
    m = ClientQuotaManager("producer_byte_rate", 11, 1)
    m.update(QuotaEntity(user="alice"), 1000.0)
    assert m.record("alice", "a", 9000, now=0) == 0
    assert m.record("alice", "b", 6000, now=0) == 4000  # the same 1000 B/s (11,000 B bucket) is shared
    assert m.record("bob", "b", 10**6, now=0) == 0


def test_token_bucket_refills_and_throttles() -> None:
    b = TokenBucket(2.0, 11, 1000, 0)  # burst 22 mutations
    b.record(30, 0)
    assert b.throttle_time_ms(0) == 4000  # -8 tokens at 2/s
    assert b.throttle_time_ms(4000) == 0


def test_controller_mutation_strict_check() -> None:
    m = ControllerMutationQuotaManager(11, 1)
    assert not m.exceeded("u", "c", now=0)
    m.update(QuotaEntity(client_id="c"), 1.0)
    m.record("u", "c", 10, now=0)
    assert not m.exceeded("u", "c", now=0) and m.throttle_time_ms("u", "c", now=0) == 0
    m.record("u", "c", 10, now=0)  # 11 - 20 = -9 tokens
    assert m.exceeded("u", "c", now=0) and m.throttle_time_ms("u", "c", now=0) == 9000
    assert not m.exceeded("u", "c", now=9000)


def test_sanitize_matches_javas_url_encoder() -> None:
    assert sanitize("user@example.com") == "user%40example.com"
    assert sanitize("a b*c~d") == "a%20b%2Ac%7Ed"
    assert sanitize("é") == "%C3%A9"
    assert desanitize(sanitize("CN=x,O=y é")) == "CN=x,O=y é"
    assert QuotaEntity("a@b", "app 1").config_path() == ("users", "a%40b/clients/app%201")
    assert QuotaEntity.from_config_path("users/a%40b/clients/<default>") == QuotaEntity("a@b", DEFAULT)
    assert QuotaEntity.from_config_path("clients/x") == QuotaEntity(client_id="x")
    assert QuotaEntity.from_config_path("topics/x") is None


def test_apply_ops_as_kafka_validates() -> None:
    props = apply_ops({"SCRAM-SHA-256": "keep"}, [QuotaOp("producer_byte_rate", 1048576.0, False),
                                                  QuotaOp("request_percentage", 50.0, False)])
    assert props == {"SCRAM-SHA-256": "keep", "producer_byte_rate": "1048576", "request_percentage": "50.0"}
    assert apply_ops(props, [QuotaOp("producer_byte_rate", 0, True)]) == {"SCRAM-SHA-256": "keep",
                                                                          "request_percentage": "50.0"}
    with pytest.raises(QuotaRequestError, match="must be a LONG"):
        apply_ops({}, [QuotaOp("consumer_byte_rate", 1.5, False)])
    with pytest.raises(QuotaRequestError, match="Invalid configuration key"):
        apply_ops({}, [QuotaOp("bogus", 1.0, False)])


def test_entity_validation() -> None:
    assert _to_quota_entity([("user", None), ("client-id", "c")]) == QuotaEntity(DEFAULT, "c")
    assert _to_quota_entity([("ip", "10.1.2.3")]).config_path() == ("ips", "10.1.2.3")
    assert _to_quota_entity([("ip", None)]).config_path() == ("ips", DEFAULT)
    for bad in ([], [("user", "")], [("user", "a"), ("user", "b")], [("group", "g")],
                [("ip", "1.2.3.4"), ("user", "u")], [("ip", "no such host .invalid")]):
        with pytest.raises(QuotaRequestError):
            _to_quota_entity(bad)


def test_ip_connection_rate_and_overrides() -> None:
    from broker.quota.connection_quotas import IpConnectionRateQuotas, parse_ip_overrides
    q = IpConnectionRateQuotas(1)
    assert q.delay_ms("10.0.0.1", now=0.0) == 0
    q.update(DEFAULT, 2.0)
    q.update("10.0.0.9", 100.0)
    assert [q.delay_ms("10.0.0.1", now=0.0) for _ in range(3)] == [0, 0, 500]  # burst of 2, then 1 in debt
    assert all(q.delay_ms("10.0.0.9", now=0.0) == 0 for _ in range(50))
    assert parse_ip_overrides("127.0.0.1:5, localhost:7") == {"127.0.0.1": 7}


def test_java_double_strings() -> None:
    assert [java_double(v) for v in (50.0, 1.5, 0.0, 1e7, 12345678.0, 1e-4)] == [
        "50.0", "1.5", "0.0", "1.0E7", "1.2345678E7", "1.0E-4"]
