"""log_to: a rule script's log."""

from __future__ import annotations

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
