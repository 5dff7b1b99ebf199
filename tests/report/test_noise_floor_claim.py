"""C11's verdict rule (kind noise_floor) on constructed result files: reproduced when the
Weibit MSE falls like c/n and the softmax sits on its floor; not reproduced when either
fails or too many replicates had no estimate; not run without the file; kept in a
rehearsal. Also its table, summary row and figure."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest

from weince.evt import noise_floor_theory
from weince.report import load_claims
from weince.report.claim_file import record_of
from weince.report.figures import noise_floor_figure
from weince.report.glance import MAX_ROW_CHARS, summary_row
from weince.report.rehearsal import withhold_verdicts
from weince.report.tables import claim_latex, claim_markdown
from weince.report.verdicts import NOT_REPRODUCED, NOT_RUN, REPRODUCED, Setting, evaluate_claim
from weince.utils import write_json
from weince.utils.results import load_result
from weince.utils.verdict_words import REHEARSAL

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"


C11 = next(c for c in load_claims(CLAIMS)["claims"] if c["id"] == "C11")
NS = (100, 200, 500, 1000, 2000, 5000, 10000)
TH = noise_floor_theory()


def rows(weibit=lambda n: TH["weibit_c"] / n, softmax=None, rel_se=0.01, degenerate=0,
         replicates=12_000):
    softmax = softmax or (lambda n: TH["softmax_floor"] + TH["softmax_c"] / n)
    out = []
    for n in NS:
        out.append({"n": n, "replicates": replicates, "used": replicates - degenerate,
                    "degenerate": degenerate, "mse_weibit": weibit(n),
                    "se_weibit": rel_se * weibit(n), "mse_softmax": softmax(n),
                    "se_softmax": 0.003 * softmax(n), "theory_weibit": TH["weibit_c"] / n,
                    "softmax_floor": TH["softmax_floor"],
                    "theory_softmax": TH["softmax_floor"] + TH["softmax_c"] / n})
    return out


def judge(tmp: Path, data_rows=None, *, present=True, enabled=True):
    f = tmp / "synthetic" / "noise_floor.json"
    if present:
        write_json(f, {"setting": {"replicates": 12_000, "seed": 1}, "theory": TH,
                       "rows": data_rows if data_rows is not None else rows()})
    settings = [Setting("synthetic")] if enabled else []
    return evaluate_claim(copy.deepcopy(C11), settings, ["weibit", "softmax"],
                          lambda s, a, name: [tmp / "synthetic" / name], alpha=0.05,
                          scale="test")


def test_the_papers_picture_is_reproduced(tmp_path):
    res = judge(tmp_path)
    assert res.verdict == REPRODUCED, res.reason
    assert "contains -1" in res.reason and "at the floor" in res.reason
    head = res.rows[0]
    assert head.cells["weibit"].est.contains(-1.0)
    assert [r.label for r in res.rows[1:]] == [f"MSE at n = {n}" for n in NS]


@pytest.mark.parametrize("case, data, why", [
    ("Weibit slower than c/n", rows(weibit=lambda n: 2.0 / n ** 0.5), "excludes -1"),
    ("softmax without a floor", rows(softmax=lambda n: 13.0 / n), "not at the floor"),
    ("softmax far above its floor", rows(softmax=lambda n: 1.5 * TH["softmax_floor"]),
     "not at the floor"),
    ("Weibit on a c/n line above the floor", rows(weibit=lambda n: 500.0 / n), "not below"),
    ("too many degenerate replicates", rows(degenerate=500), "more than 1%"),
])
def test_each_condition_can_fail(tmp_path, case, data, why):
    res = judge(tmp_path, data)
    assert res.verdict == NOT_REPRODUCED, case
    assert why in res.reason, (case, res.reason)


def test_not_run_without_the_stage_or_its_file(tmp_path):
    assert judge(tmp_path / "a", enabled=False).verdict == NOT_RUN
    res = judge(tmp_path / "b", present=False)
    assert res.verdict == NOT_RUN and "noise_floor" in res.reason


def test_a_bad_file_fails_naming_the_key(tmp_path):
    bad = rows()
    bad[2]["mse_weibit"] = None
    with pytest.raises(ValueError, match="mse_weibit"):
        judge(tmp_path, bad)


def test_the_rehearsal_keeps_its_verdict(tmp_path):
    res = judge(tmp_path)
    kept = withhold_verdicts(res)
    assert kept.verdict == REPRODUCED
    other = dataclasses.replace(res, claim={**res.claim, "kind": "gain"})
    assert withhold_verdicts(other).verdict == REHEARSAL


def test_table_summary_row_and_figure(tmp_path):
    res = judge(tmp_path)
    info = {"profile": "t", "config_hash": "x", "built": "now", "git_commit": "c"}
    md = claim_markdown(res, info)
    assert "| weibit |" in md and "reading (no verdict)" in md and "c/n" in md
    assert "\\begin{tabular}" in claim_latex(res, info)
    cells = summary_row(record_of(res), "table_c11.md")
    line = "| " + " | ".join(cells) + " |"
    assert "Weibit slope" in cells[4] and "floor" in cells[4]
    assert len(line) <= MAX_ROW_CHARS
    out = noise_floor_figure(load_result(tmp_path / "synthetic" / "noise_floor.json"),
                             tmp_path / "c11.png", "C11")
    assert out.stat().st_size > 10_000
