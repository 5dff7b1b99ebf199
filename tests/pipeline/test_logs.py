"""log_to: a rule script's log, and its quiet start-up (no garbage collection while it loads)."""

from __future__ import annotations

import gc
import os
import time

import pytest

from weince.pipeline.logs import _quiet_start_up, log_to


def test_the_log_gets_the_output_and_the_error(tmp_path):
    log = tmp_path / "logs" / "job.log"
    with pytest.raises(ValueError, match="bad input"):
        with log_to(log):
            print("step 1 done")
            raise ValueError("bad input")
    text = log.read_text()
    assert "step 1 done" in text and "ValueError: bad input" in text


def test_collection_is_off_while_starting_then_on_and_restored():
    assert gc.isenabled()
    with _quiet_start_up(0.3):
        assert not gc.isenabled()          # imports: no collector passes
        deadline = time.monotonic() + 5
        while not gc.isenabled() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gc.isenabled()              # a long job collects as usual after start-up
    assert gc.isenabled()
    with log_to(None):
        assert not gc.isenabled()
    assert gc.isenabled()                  # a short job: the caller's state comes back


def test_collection_stays_off_after_when_it_was_off_before():
    gc.disable()
    try:
        with _quiet_start_up(0.05):
            time.sleep(0.3)
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_worker_forked_during_start_up_collects():
    with log_to(None):
        pid = os.fork()
        if pid == 0:                       # a data loader's worker: no timer thread here
            os._exit(0 if gc.isenabled() else 3)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
