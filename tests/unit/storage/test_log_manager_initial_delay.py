"""log.initial.task.delay.ms delays the first retention, flush and checkpoint runs (Kafka's InitialTaskDelayMs),
instead of a fixed 30 s: a broker configured with a short delay applies retention that soon after start-up."""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import pytest

from broker.storage.cleaner import CleanerConfig
from broker.storage.config import LogConfig
from broker.storage.log_manager import LogManager


class RecordingScheduler:
    """Remembers what was scheduled (name -> (delay_s, period_s)); runs nothing."""

    def __init__(self) -> None:
        self.tasks: Dict[str, Tuple[float, float]] = {}

    def schedule(self, name: str, fn: Callable[[], None], delay_s: float = 0.0, period_s: float = -1.0) -> None:
        self.tasks[name] = (delay_s, period_s)

    def schedule_once(self, delay_s: float, fn: Callable[[], None]) -> None:
        pass

    def shutdown(self) -> None:
        pass


@pytest.mark.parametrize("delay_ms", [0, 1500, 30000])
def test_first_runs_wait_the_initial_task_delay(tmp_path, delay_ms: int) -> None:
    s = RecordingScheduler()
    m = LogManager([str(tmp_path)], LogConfig(), broker_id=0, cluster_id="c", scheduler=s,  # type: ignore[arg-type]
                   retention_check_interval_ms=1000, flush_check_interval_ms=2000,
                   cleaner_config=CleanerConfig(enable=False), initial_task_delay_ms=delay_ms)
    m.startup()
    for name in ("kafka-log-retention", "kafka-log-flusher", "kafka-recovery-point-checkpoint",
                 "kafka-log-start-offset-checkpoint"):
        assert s.tasks[name][0] == delay_ms / 1000.0, (name, s.tasks[name])
    assert s.tasks["kafka-log-retention"][1] == 1.0


def test_default_is_kafkas_30_seconds(tmp_path) -> None:
    s = RecordingScheduler()
    m = LogManager([str(tmp_path)], LogConfig(), broker_id=0, cluster_id="c", scheduler=s,  # type: ignore[arg-type]
                   cleaner_config=CleanerConfig(enable=False))
    m.startup()
    assert s.tasks["kafka-log-retention"][0] == 30.0
