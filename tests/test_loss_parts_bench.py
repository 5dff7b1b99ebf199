"""``benchmarks/loss_parts.py`` times each loss-cost case's parts and accounts for them."""

from __future__ import annotations

import json

import pytest

from benchmarks import loss_parts as LP
from weince.cli.bench_targets import Case


def test_every_case_gets_its_parts_and_their_arithmetic(monkeypatch, capsys, tmp_path):
    cases = (Case("WEINCE small", "weince", "infonce", 128, 1.15),
             Case("WEINCE bank", "weince", "infonce", 64, 1.15, bank=256),
             Case("recipe small", "weince_recipe", "infonce", 128, 1.5),
             Case("compiled, left out", "weince", "weince", 128, 1.0, compiled=True))
    monkeypatch.setattr(LP, "CASES", cases)
    out = tmp_path / "parts.json"
    assert LP.main(["--reps", "2", "--dim", "16", "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    rows = saved["rows"]
    assert "provenance" in saved
    assert [r["case"] for r in rows] == ["WEINCE small", "WEINCE bank", "recipe small"]
    text = capsys.readouterr().out
    for r in rows:
        assert r["case"] in text
        parts = ("logits", "stats", "logging") + (("pooled",) if "recipe" in r["case"] else ())
        assert r["rest_ms"] == pytest.approx(r["loss_ms"] - sum(r[f"{p}_ms"] for p in parts))
        assert r["ratio"] == pytest.approx(r["loss_ms"] / r["base_ms"])
        assert r["budget_ms"] == pytest.approx(r["target"] * r["base_ms"] - r["logits_ms"])
        assert all(r[f"{p}_ms"] > 0 for p in parts + ("base", "loss", "select", "fit"))
    assert "pooled_ms" not in rows[0] and rows[2]["pooled_ms"] > 0


def test_sizes_limit_the_cases(monkeypatch, capsys):
    monkeypatch.setattr(LP, "CASES", (Case("at 64", "weince", "infonce", 64, 1.15),
                                      Case("at 128", "weince", "infonce", 128, 1.15)))
    assert LP.main(["--reps", "1", "--dim", "8", "--sizes", "128"]) == 0
    text = capsys.readouterr().out
    assert "at 128" in text and "at 64" not in text
