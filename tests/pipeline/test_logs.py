"""log_to: a rule script's log, and its one-line reason on the console when it fails."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from weince.pipeline.joblog import log_to


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


SRC = Path(__file__).resolve().parents[2] / "src"


def _script(tmp_path, body: str):
    """Run ``body`` as a rule script would run (its own process); (returncode, stderr)."""
    code = "from weince.pipeline.joblog import log_to\n" + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(SRC)})
    return r.returncode, r.stderr


def test_a_failed_job_says_why_in_one_line_on_the_console(tmp_path):
    """Snakemake shows a script's stderr above its `Error in rule` block (whose message is
    None): the reason goes there in one line, the traceback only to the log."""
    rc, err = _script(tmp_path, """
        with log_to("logs/pretrain.log"):
            print("epoch 0")
            raise ValueError("checkpoint.pt was written with lr=0.001;\\n this run asks "
                             "lr=0.002: delete it to start over")
    """)
    assert rc == 1
    assert err.splitlines() == [
        "weince job failed: ValueError: checkpoint.pt was written with lr=0.001; this run "
        "asks lr=0.002: delete it to start over (traceback: logs/pretrain.log)"]
    log = (tmp_path / "logs" / "pretrain.log").read_text()
    assert "epoch 0" in log and "Traceback (most recent call last)" in log


def test_an_unwritable_log_is_one_line_before_anything_runs(tmp_path):
    (tmp_path / "results").write_text("a file where the folder should be")
    rc, err = _script(tmp_path, """
        with log_to("results/logs/report.log"):
            print("never")
    """)
    assert rc == 1 and "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("weince job failed: cannot write the job's log results/logs/report.log")


def test_a_deliberate_exit_keeps_its_own_message(tmp_path):
    rc, err = _script(tmp_path, """
        with log_to("job.log"):
            raise SystemExit(143)
    """)
    assert rc == 143 and "weince job failed" not in err
    assert "exit 143" in (tmp_path / "job.log").read_text()
