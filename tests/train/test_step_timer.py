"""Per-step time after warm-up and peak memory (the rehearsal's measured cost forecast)."""

from __future__ import annotations

import time

import pytest

from weince.train.step_timer import StepTimer


def test_warmup_steps_are_not_timed_and_peak_memory_is_reported():
    t = StepTimer("cpu", warmup=2)
    for dt in (0.05, 0.04, 0.01, 0.01, 0.01):
        t.start()
        time.sleep(dt)
        t.stop()
    r = t.result()
    assert r["n_timed"] == 3 and r["steps_seen"] == 5 and r["warmup"] == 2
    assert 0.009 <= r["step_s_median"] < 0.04          # the slow warm-up steps are left out
    assert r["peak_mem_mb"] > 10 and r["peak_mem_kind"] == "cpu_max_rss"
    assert r["device"] == "cpu"


def test_no_timed_step_gives_none_and_stop_needs_start():
    t = StepTimer("cpu", warmup=5)
    t.start()
    t.stop()
    assert t.result()["step_s_median"] is None
    with pytest.raises(RuntimeError, match="without start"):
        t.stop()
