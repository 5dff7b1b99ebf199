"""log_to: a rule script's log."""

from __future__ import annotations

import gc

import pytest

from weince.pipeline.logs import log_to


def test_the_log_gets_the_output_and_the_error(tmp_path):
    log = tmp_path / "logs" / "job.log"
    with pytest.raises(ValueError, match="bad input"):
        with log_to(log):
            print("step 1 done")
            raise ValueError("bad input")
    text = log.read_text()
    assert "step 1 done" in text and "ValueError: bad input" in text


def test_a_job_collects_less_often_and_the_caller_s_collector_comes_back():
    before = gc.get_threshold()
    with log_to(None):
        assert gc.isenabled()                    # cycles are still collected
        assert gc.get_threshold()[0] >= 100_000  # but not after every 700 new objects
        assert gc.get_threshold()[1:] == before[1:]
    assert gc.get_threshold() == before and gc.isenabled()
