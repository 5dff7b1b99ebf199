"""``weince bench-loss --targets``: every case timed side by side, each ratio beside its
target, the verdict computed from the ratio; the compiled cases compile what they say."""

from __future__ import annotations

import json

import pytest
import torch

import weince.cli.bench_targets as BT
from weince.cli import main
from weince.cli.bench_targets import Case

SMALL = (Case("WEINCE / InfoNCE, 2N = 64", "weince", "infonce", 64, 1.15),
         Case("WEINCE / InfoNCE, bank", "weince", "infonce", 32, 1.15, bank=96),
         Case("recipe / InfoNCE, 2N = 128", "weince_recipe", "infonce", 128, 1.5))


def test_each_case_gets_a_paired_ratio_and_a_computed_verdict(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(BT, "CASES", SMALL)
    out = tmp_path / "targets.json"
    assert main(["bench-loss", "--targets", "--reps", "3", "--dim", "8", "--threads", "1",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"] for r in rows] == [c.label for c in SMALL]
    for r, case in zip(rows, SMALL):
        assert r["case"] in text and r["reps"] == 3 and r["target"] == case.target
        assert r["within"] == ("yes" if r["ratio"] <= case.target else "NO")
        lo, hi = (float(x) for x in r["min-max"].split("-"))
        assert lo <= round(r["ratio"], 2) + 0.005 and round(r["ratio"], 2) - 0.005 <= hi


def test_sizes_limit_the_cases(monkeypatch, capsys):
    monkeypatch.setattr(BT, "CASES", SMALL)
    rows = BT.run_targets(dim=8, reps=1, sizes=(128,), progress=None)
    assert [r["case"] for r in rows] == ["recipe / InfoNCE, 2N = 128"]


@pytest.mark.parametrize("case, loss_compiled, base_compiled", [
    (Case("eager", "weince", "infonce", 64, 1.15), False, False),
    (Case("compiled / eager", "weince", "weince", 64, 1.0, compiled=True), True, False),
    (Case("both compiled", "weince", "infonce", 64, 1.15, both=True), True, True)])
def test_the_compiled_cases_compile_what_they_say(case, loss_compiled, base_compiled):
    loss, base = BT._modules(case, 0.2)    # torch.compile only wraps: nothing compiles here
    compiled = torch._dynamo.eval_frame.OptimizedModule
    assert isinstance(loss, compiled) == loss_compiled
    assert isinstance(base, compiled) == base_compiled


@pytest.mark.slow     # two compilations
def test_a_both_compiled_case_runs():
    row = BT.run_case(Case("both compiled", "weince", "infonce", 64, 1.15, both=True),
                      dim=8, reps=2, warmup=1)
    assert row["ratio"] > 0 and row["within"] in ("yes", "NO")
