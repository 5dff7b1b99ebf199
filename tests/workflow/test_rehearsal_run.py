"""The rehearsal end to end on the CPU: synthetic files in the real formats,
`snakemake --configfile config/paper.yaml config/rehearsal.yaml --config data_root=DIR` in two
calls on one workflow copy:

1. the whole rehearsal DAG on one pair, CIFAR-100 x ResNet-18 (tests/workflow/rehearsal_ci.yaml):
   every rule name of the paper's dry run ran, the forecast was written, no claim but C9 and
   C11 (the synthetic experiment at its own setting) got a verdict;
2. pretraining + features of four more pairs (rehearsal_ci_loaders.yaml), so that every data
   set loader (CIFAR-10/100, STL-10, ImageNet-32, Tiny-ImageNet) and every backbone (ResNet-18,
   ResNet-50, ViT-S) of the paper profile runs through the real code path.

The overlays change sizes only, except one setting changed for time: the timing job times the
losses eagerly (`compile: eager`; inductor on a 2-core CPU cost ~200 s). Run it as its own
step: `pytest -m rehearsal` (docs/rehearsal.md, "The CI's rehearsal")."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from weince.data.synthetic_formats import write_synthetic_data
from weince.utils.verdict_words import REHEARSAL

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.rehearsal


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory, copy_workflow, run_snakemake):
    base = tmp_path_factory.mktemp("rehearsal")
    wf = copy_workflow(base / "wf")
    for name in ("rehearsal_ci.yaml", "rehearsal_ci_loaders.yaml"):
        shutil.copy2(REPO / "tests" / "workflow" / name, wf / "config")
    data = write_synthetic_data(base / "synthetic_data")
    configs = ["--configfile", "config/paper.yaml", "config/rehearsal.yaml",
               "config/rehearsal_ci.yaml"]
    proc = run_snakemake(wf, "--cores", "2", *configs, "--config", f"data_root={data}",
                     timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    loaders = run_snakemake(wf, "--cores", "2", *configs, "config/rehearsal_ci_loaders.yaml",
                        "--config", f"data_root={data}", "--",
                        *(f"results/rehearsal/vision/{d}/{b}/infonce/seed7/features.pt"
                          for d, b in LOADER_PAIRS), timeout=1800)
    assert loaders.returncode == 0, loaders.stdout[-4000:] + loaders.stderr[-8000:]
    return wf, proc.stdout + proc.stderr


# the second call's pairs: with the first call's CIFAR-100 x ResNet-18, every loader and
# backbone of the paper profile (the larger backbones on the 32-pixel data sets)
LOADER_PAIRS = [("cifar10", "resnet50"), ("imagenet32", "vit_s"), ("stl10", "resnet18"),
                ("tinyimagenet", "resnet18")]


def _rules_run(log: str) -> set[str]:
    return set(re.findall(r"^(?:local)?rule (\w+):", log, flags=re.M))


def test_every_rule_of_the_paper_dry_run_ran(rehearsal, job_counts, run_snakemake):
    wf, log = rehearsal
    paper = run_snakemake(wf, "-n", "--configfile", "config/paper.yaml", timeout=600,
                      WEINCE_SKIP_PREFLIGHT="1")   # its DAG, without its data
    assert paper.returncode == 0, paper.stderr[-4000:]
    wanted = set(job_counts(paper.stdout + paper.stderr))
    assert {"pretrain", "linear", "knn", "select_grid_point", "adopt_grid_run", "simcse",
            "norms_text", "report"} <= wanted
    wanted.discard("total")                 # the Job stats table's last row, not a rule
    missing = wanted - _rules_run(log)      # `all` included: its job logs `localrule all:`
    assert not missing, f"rules of the paper DAG the rehearsal never ran: {sorted(missing)}"
    assert {"all", "forecast"} <= _rules_run(log)


def test_every_loader_and_backbone_of_the_paper_profile_pretrained_and_extracted(rehearsal):
    wf, _ = rehearsal
    paper = yaml.safe_load((wf / "config" / "paper.yaml").read_text())["vision"]
    ran = {("cifar100", "resnet18"), *LOADER_PAIRS}
    assert set(paper["datasets"]) == {d for d, _ in ran}
    assert set(paper["backbones"]) == {b for _, b in ran}
    for d, b in ran:
        run = wf / "results" / "rehearsal" / "vision" / d / b / "infonce" / "seed7"
        summary = json.loads((run / "train.json").read_text())
        assert summary["step_timing"]["step_s_median"] > 0, (d, b)
        if (d, b) in LOADER_PAIRS:   # features.pt asked for as a target: kept
            assert (run / "features.pt").stat().st_size > 0, (d, b)
        else:   # extracted and probed, then removed as a temporary (keep_features: false)
            probe = json.loads((run / "linear.json").read_text())
            assert probe["n_test"] > 0 and probe["dim"] > 0, (d, b)
            assert not (run / "features.pt").exists(), (d, b)


def test_the_forecast_gives_hours_per_claim_table(rehearsal):
    wf, _ = rehearsal
    md = (wf / "reports" / "rehearsal" / "forecast.md").read_text()
    assert "CPU-hours" in md and "| C3 |" in md and "| C7 |" in md
    assert "GPU-hours" in md and "not a forecast of the paper run" in md
    c3 = next(line for line in md.split("## This rehearsal")[1].splitlines()
              if line.startswith("| C3 |"))
    assert re.search(r"\| [\d,.]+ \|", c3), c3                 # a number, not 'not measured'
    res = yaml.safe_load((wf / "reports" / "rehearsal" / "resources.yaml").read_text())
    assert set(res) == {"resources"} and res["resources"]["pretrain"]["runtime"] >= 1


def test_no_claim_but_c9_and_c11_gets_a_verdict_and_the_pages_say_synthetic(rehearsal):
    wf, _ = rehearsal
    out = wf / "reports" / "rehearsal"
    claims = json.loads((out / "claims.json").read_text())["claims"]
    verdicts = {c["id"]: c["verdict"] for c in claims}
    assert verdicts.pop("C9") == "reproduced"
    assert verdicts.pop("C11") in ("reproduced", "not reproduced")   # computed, not withheld
    assert set(verdicts.values()) == {REHEARSAL}
    summary = (out / "summary.md").read_text()
    assert "REHEARSAL" in summary and "SYNTHETIC" in summary
    for cid in verdicts:
        assert "REHEARSAL" in (out / f"table_{cid.lower()}.md").read_text(), cid
    norms = json.loads((out / "norms_summary.json").read_text())["claims"]
    assert {v["verdict"] for v in norms.values()} == {REHEARSAL}


def test_pretraining_and_simcse_runs_record_step_time_and_peak_memory(rehearsal):
    wf, _ = rehearsal
    runs = list((wf / "results" / "rehearsal").rglob("train.json"))
    timed = [json.loads(p.read_text()).get("step_timing") for p in runs]
    assert timed and all(t and t["step_s_median"] > 0 and t["peak_mem_mb"] > 0 for t in timed)
    text = [json.loads(p.read_text()) for p in runs if "/text/" in str(p)]
    assert text and all(not t["model_identity"]["named_model"] for t in text)  # synthetic BERT
