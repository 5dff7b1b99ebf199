"""``benchmarks/chunked_memory.py`` runs its cases in fresh interpreters and prints a table;
a case that would not fit in the available memory is reported, not started."""

from __future__ import annotations

import pytest

from benchmarks import chunked_memory as CM


@pytest.mark.slow     # four spawned interpreters
def test_the_benchmark_prints_a_row_per_case(capsys, tmp_path):
    out = tmp_path / "rows.json"
    assert CM.main(["--sizes", "256", "--chunks", "64", "--threads", "1",
                    "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for loss in ("infonce", "weince"):
        assert f"| 256 | {loss} | none |" in text and f"| 256 | {loss} | 64 |" in text
    assert "peak RSS" in text and out.exists()


def test_a_case_that_does_not_fit_is_not_started(monkeypatch, capsys):
    monkeypatch.setattr(CM, "available_bytes", lambda: 1 * CM.GIB)
    monkeypatch.setattr(CM, "spawn", lambda *a: pytest.fail("a case was started"))
    assert CM.main(["--sizes", "16384", "--chunks", "1024", "--losses", "weince"]) == 0
    text = capsys.readouterr().out
    assert "not run: needs about 8.0 GiB, 1.0 GiB available" in text


def test_the_estimate_scales_a_measured_case():
    done = [{"B": 4096, "loss": "weince", "chunk": None, "need": 2 ** 28},
            {"B": 4096, "loss": "weince", "chunk": 512, "need": 2 ** 26}]
    assert CM.estimate(16384, "weince", None, done) == 16 * 2 ** 28
    assert CM.estimate(16384, "weince", 512, done) == 4 * 2 ** 26
    assert CM.estimate(8192, "infonce", None, done) == 8.0 * 8192 * 8192 * 4
