"""weince.report on fabricated result files: verdicts, missing results, schema errors,
tables and the LaTeX they compile to."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from weince.cli import main
from weince.pipeline import arms, layout
from weince.pipeline.claims import SCHEMA_PATH
from weince.pipeline.profile import Profile
from weince.report import (NOT_REPRODUCED, NOT_RUN, REPRODUCED, ResultSchemaError, build_report,
                           load_claims)
from weince.report.tables import claim_lines, latex_escape
from weince.utils.verdict_words import SCALE_ONLY
from weince.report.verdicts import partial_verdict
from weince.utils.summary import diff_estimate, estimate, t_quantile

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"



REGISTRY_IDS = [c["id"] for c in load_claims(CLAIMS)["claims"]]



def by_id(results):
    return {r.claim["id"]: r for r in results}


def run_dir(cfg, dataset, backbone, arm, seed):
    return layout.run_dir(Profile.of(cfg), layout.VisionRun(dataset, backbone, arm, seed))


# ----------------------------------------------------------------------------- statistics
def test_t_interval_matches_scipy():
    vals = [50.1, 49.7, 50.6, 50.0]
    e = estimate(vals)
    lo, hi = stats.t.interval(0.95, len(vals) - 1, loc=np.mean(vals), scale=stats.sem(vals))
    assert e.n == 4 and e.mean == pytest.approx(np.mean(vals))
    assert (e.lo, e.hi) == (pytest.approx(lo), pytest.approx(hi))
    one = estimate([3.0])
    assert one.n == 1 and one.mean == 3.0 and not one.has_interval


def test_welch_difference_matches_scipy():
    a, b = [53.0, 53.3, 53.5, 52.9], [49.8, 50.1, 50.2]
    d = diff_estimate(estimate(a), estimate(b))
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert d.mean == pytest.approx(np.mean(a) - np.mean(b))
    assert (d.lo, d.hi) == (pytest.approx(ci.low), pytest.approx(ci.high))


# ----------------------------------------------------------------------------- verdicts
def test_summary_lists_all_nine_claims_with_verdicts(fx):
    res = build_report(Profile.of(fx), with_figures=False)
    assert [r.claim["id"] for r in res] == REGISTRY_IDS
    summary = (Path(fx["reports"]) / "fx" / "summary.md").read_text()
    for cid in REGISTRY_IDS:
        line = next(ln for ln in summary.splitlines() if ln.startswith(f"| {cid} |"))
        assert any(v in line for v in (REPRODUCED, NOT_REPRODUCED, NOT_RUN, SCALE_ONLY,
                                       "partially run")), line
    for cid in REGISTRY_IDS:
        assert (Path(fx["reports"]) / "fx" / f"table_{cid.lower()}.md").exists()
        assert (Path(fx["reports"]) / "fx" / f"table_{cid.lower()}.tex").exists()
    # every page points once to the words it uses; C9 and C11 say what kind of claim they are
    glossary = "[docs/glossary.md](../../docs/glossary.md)"
    assert glossary in summary
    for cid in REGISTRY_IDS:
        page = (Path(fx["reports"]) / "fx" / f"table_{cid.lower()}.md").read_text()
        assert glossary in page, cid
    assert "(implementation check)" in next(ln for ln in summary.splitlines()
                                            if ln.startswith("| C9 |"))
    assert "(synthetic experiment)" in next(ln for ln in summary.splitlines()
                                                        if ln.startswith("| C11 |"))


def test_gain_verdicts_follow_the_files(fx, fixture_linear):
    r = by_id(build_report(Profile.of(fx), with_figures=False))
    c3 = r["C3"]
    # recipe: gain 3.23 vs paper 3.27 -> reproduced; plain weince: +0.07 -> not reproduced
    assert c3.verdict == REPRODUCED
    assert c3.arm_verdicts["weince"] == NOT_REPRODUCED
    row = next(x for x in c3.rows if x.paper_setting)
    g = row.gains["weince_recipe"]
    assert g.mean == pytest.approx(np.mean(fixture_linear[("cifar100", "weince_recipe")])
                                   - np.mean(fixture_linear[("cifar100", "infonce")]))
    # C3 reads its own setting alone; a claim none of whose settings ran (C4) shows the
    # profile's settings as scale-model rows: digits with its direction, never a verdict
    assert all(x.paper_setting for x in c3.rows)
    scale_row = next(x for x in r["C4"].rows
                     if not x.paper_setting and x.setting.dataset == "digits")
    assert scale_row.verdicts["weince_recipe"].startswith("scale model: gain > 0")
    # C4's settings were not run, its rows are scale-model readings: no verdict, and the
    # cell says so rather than "not run" beside numbers; C6's k-NN gain (3.2) is far from
    # the paper's (6.65)
    assert r["C4"].verdict == SCALE_ONLY
    assert r["C6"].verdict == NOT_REPRODUCED
    # C5: the one paper pair run passes, 14 of 15 were not run: partially run
    assert r["C5"].verdict == partial_verdict(1, 15)
    assert "1 of the paper's 15 row(s) ran" in r["C5"].reason
    # C7 ran MiniLM on synthetic pairs only: a scale-model row with a direction, no verdict
    assert r["C7"].verdict == SCALE_ONLY
    assert any(v.startswith("scale model") for x in r["C7"].rows for v in x.verdicts.values())


def test_method_claims_verdicts(fx):
    r = by_id(build_report(Profile.of(fx), with_figures=False))
    # one of the paper's six diagnostic settings ran (cifar100/resnet18), and passes
    assert r["C1"].verdict == partial_verdict(1, 6)  # xi in [-0.39, -0.35], interval < 0
    assert r["C2"].verdict == partial_verdict(1, 6)  # every fit rejects softmax
    assert r["C8"].verdict == REPRODUCED  # 0.9% <= 2% and zero parameters
    assert r["C8"].arm_verdicts["weince_recipe"] == NOT_REPRODUCED  # 3.5% > 2%
    text = "\n".join(" | ".join(line) for line in claim_lines(r["C8"]))
    assert "trainable parameters: 0; 95% CI [+0.20, +1.40]%; attributed from the loss alone " \
           "+0.250%" in text
    assert r["C9"].verdict == REPRODUCED


def test_timing_of_a_small_backbone_is_a_scale_model_row(fx):
    fx["timing"]["config"]["backbone"] = "smallcnn"
    r = by_id(build_report(Profile.of(fx), with_figures=False))["C8"]
    assert r.verdict == SCALE_ONLY
    row = next(x for x in r.rows if not x.paper_setting)
    assert row.verdicts["weince"] == ("scale model: overhead +0.90% [+0.20, +1.40] (timed "
                                      "steps of one run), zero trainable parameters")


def test_sign_claim_fails_when_interval_crosses_zero(fx):
    for s in fx["vision"]["seeds"]:
        for ds in fx["vision"]["datasets"]:
            p = run_dir(Profile.of(fx), ds, "resnet18", "infonce", s) / "pot.json"
            d = json.loads(p.read_text())
            d["fit"]["xi"] = {7: -0.2, 21: 0.3, 63: 0.1}[s]
            p.write_text(json.dumps(d))
    assert by_id(build_report(Profile.of(fx), with_figures=False))["C1"].verdict \
        == partial_verdict(0, 6)


def test_reject_claim_fails_when_one_fit_keeps_softmax(fx):
    p = run_dir(Profile.of(fx), "cifar100", "resnet18", "infonce", 21) / "link.json"
    d = json.loads(p.read_text())
    d["fit"]["p_value"] = 0.4
    p.write_text(json.dumps(d))
    r = by_id(build_report(Profile.of(fx), with_figures=False))["C2"]
    assert r.verdict == partial_verdict(0, 6)
    assert "2/3" in Path(fx["reports"], "fx", "table_c2.md").read_text()


def test_profile_without_text_or_timing_says_not_run(fx):
    fx["text"]["enabled"] = False
    fx["timing"]["enabled"] = False
    r = by_id(build_report(Profile.of(fx), with_figures=False))
    assert r["C7"].verdict == NOT_RUN and r["C8"].verdict == NOT_RUN


# ----------------------------------------------------------------------------- missing files
def test_missing_result_is_shown_as_missing_never_typed(fx):
    run = run_dir(Profile.of(fx), "cifar100", "resnet18", "weince_recipe", 63)
    run.joinpath("linear.json").unlink()
    r = by_id(build_report(Profile.of(fx), with_figures=False))["C3"]
    row = next(x for x in r.rows if x.paper_setting)
    assert row.cells["weince_recipe"].est.n == 2
    md = Path(fx["reports"], "fx", "table_c3.md").read_text()
    assert "(n=2; 1 missing)" in md and "missing (first:" in md


def test_all_results_of_an_arm_missing(fx):
    for s in fx["vision"]["seeds"]:
        run = run_dir(Profile.of(fx), "cifar100", "resnet18", "weince_recipe", s)
        run.joinpath("linear.json").unlink()
    r = by_id(build_report(Profile.of(fx), with_figures=False))["C3"]
    assert r.verdict == NOT_RUN
    md = Path(fx["reports"], "fx", "table_c3.md").read_text()
    line = next(ln for ln in md.splitlines() if "| cifar100 / resnet18 |" in ln
                and "| weince_recipe |" in ln)
    assert "| missing |" in line


# ----------------------------------------------------------------------------- schema errors
def test_wrong_schema_names_file_and_key(fx):
    p = run_dir(Profile.of(fx), "cifar100", "resnet18", "infonce", 21) / "linear.json"
    d = json.loads(p.read_text())
    d["test_accuracy"] = d.pop("test_acc")
    p.write_text(json.dumps(d))
    with pytest.raises(ResultSchemaError) as err:
        build_report(Profile.of(fx), with_figures=False)
    msg = str(err.value)
    assert str(p) in msg and "'test_acc'" in msg and "C3" in msg


def test_result_without_provenance_is_an_error(fx):
    p = run_dir(Profile.of(fx), "cifar100", "resnet18", "infonce", 7) / "knn.json"
    d = json.loads(p.read_text())
    del d["provenance"]
    p.write_text(json.dumps(d))
    with pytest.raises(ResultSchemaError, match="provenance"):
        build_report(Profile.of(fx), with_figures=False)


def test_non_numeric_metric_is_an_error(fx):
    p = run_dir(Profile.of(fx), "digits", "resnet18", "infonce", 7) / "linear.json"
    d = json.loads(p.read_text())
    d["test_acc"] = "high"
    p.write_text(json.dumps(d))
    with pytest.raises(ResultSchemaError, match="test_acc"):
        build_report(Profile.of(fx), with_figures=False)


# ----------------------------------------------------------------------------- registry
def test_registry_decides_which_claims_are_listed(fx, tmp_path):
    """No code counts claims: a registry without C6 and without the N entries still
    builds, and lists exactly what it holds."""
    reg = yaml.safe_load(CLAIMS.read_text())
    reg["claims"] = [c for c in reg["claims"] if c["id"] != "C6" and c["kind"] != "norms"]
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump(reg))
    ids = [c["id"] for c in load_claims(p)["claims"]]
    assert "C6" not in ids and not any(i.startswith("N") for i in ids)
    res = build_report(Profile.of({**fx, "claims": str(p)}), with_figures=False)
    assert [r.claim["id"] for r in res] == ids
    out = Path(fx["reports"], "fx")
    assert not (out / "table_c6.md").exists() and not (out / "table_n1.md").exists()
    assert "| N1 |" not in (out / "summary.md").read_text()


def test_registry_refuses_a_duplicate_id(tmp_path):
    reg = yaml.safe_load(CLAIMS.read_text())
    reg["claims"].append(dict(reg["claims"][0]))
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump(reg))
    with pytest.raises(ValueError, match=r"\['C1'\] appear more than once"):
        load_claims(p)


def test_registry_schema_error_names_the_field(tmp_path):
    reg = yaml.safe_load(CLAIMS.read_text())
    reg["claims"][2]["kind"] = "bigger"
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump(reg))
    with pytest.raises(ValueError, match="claims/2/kind"):
        load_claims(p)


def test_workflow_schema_link_points_at_the_package_schema():
    link = CLAIMS.parents[1] / "workflow" / "schemas" / "claims.schema.yaml"
    assert link.resolve() == SCHEMA_PATH.resolve()


# ----------------------------------------------------------------------------- tables/provenance
def test_tables_carry_provenance(fx):
    build_report(Profile.of(fx), with_figures=False)
    md = Path(fx["reports"], "fx", "table_c3.md").read_text()
    assert "git commit" in md and "config hash" in md and "result dates" in md
    tex = Path(fx["reports"], "fx", "table_c3.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and "git commit" in tex
    claims = json.loads(Path(fx["reports"], "fx", "claims.json").read_text())
    assert [c["id"] for c in claims["claims"]] == REGISTRY_IDS
    assert "provenance" in claims


def test_figures_are_drawn_from_logs_and_fits(fx):
    build_report(Profile.of(fx))
    figs = Path(fx["reports"], "fx", "figures")
    assert (figs / "lambda_training_cifar100_resnet18.png").stat().st_size > 1000
    assert (figs / "c1_estimates.png").exists() and (figs / "c2_estimates.png").exists()


def test_latex_escape():
    assert latex_escape("a_b 50% & #1 +- 0.2") == r"a\_b 50\% \& \#1 $\pm$ 0.2"
    assert latex_escape("40.73 -> 47.38, x >= y") == r"40.73 $\rightarrow$ 47.38, x $\geq$ y"
    assert latex_escape("\u03bb") == "?"


def test_cli_writes_the_report(fx, tmp_path):
    cfg_file = tmp_path / "profile.yaml"
    cfg_file.write_text(yaml.safe_dump(fx))
    assert main(["report", "--config", str(cfg_file), "--profile", "fx", "--no-figures"]) == 0
    assert Path(fx["reports"], "fx", "summary.md").exists()


@pytest.mark.skipif(shutil.which("pdflatex") is None,
                    reason="pdflatex not installed (apt-get install texlive-latex-recommended)")
def test_generated_latex_compiles(fx):
    build_report(Profile.of(fx), with_figures=False)
    out = Path(fx["reports"], "fx")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                           "tables.tex"], cwd=out, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (out / "tables.pdf").stat().st_size > 1000


# ----------------------------------------------------------------------------- layout
def test_grid_point_names_round_trip():
    grid = {"margin": [0, 2, 6], "kappa_rho": [5, 10, 20], "kappa_aic": [0.5, 1, 2]}
    pts = arms.grid_points(grid)
    assert len(pts) == 27 and len(set(pts)) == 27
    assert "m2_kr10_ka0.5" in pts
    assert arms.parse_point("m2_kr10_ka0.5") == {"margin": 2.0, "kappa_rho": 10.0,
                                                   "kappa_aic": 0.5}
    assert arms.split_arm("weince@m0_kr5_ka2") == ("weince", {"margin": 0.0,
                                                                "kappa_rho": 5.0,
                                                                "kappa_aic": 2.0})
    with pytest.raises(ValueError, match="bad grid point"):
        arms.parse_point("margin2")
    assert math.isfinite(len(arms.grid_points(None)))


@pytest.mark.parametrize("df", [1, 2, 3, 4.7, 10, 29.3, 1000])
def test_t_quantile_is_scipy_stats_t_ppf(df):
    """The report's t quantile (scipy.special, no scipy.stats import) is scipy.stats's."""
    for p in (0.9, 0.975, 0.995):
        assert t_quantile(p, df) == stats.t.ppf(p, df)


def test_report_package_imports_without_scipy_stats():
    probe = "import sys, weince.report, weince.report.html; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
