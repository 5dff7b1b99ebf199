"""The report page on small synthetic results; the profile settings and workflow targets."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from markdown_it import MarkdownIt

from weince.norms.page import claim_verdicts, render_markdown, write_norms_report
from weince.norms.run import PROBES_FILE, NormsConfig, _batching, _dynamics, load_norms_config
from weince.pipeline.profile import Profile
from weince.pipeline.stages import norms_config, text_model
from weince.pipeline.targets import norms_results
from weince.utils import write_json
from weince.utils.config import as_config
from weince.utils.results import InvalidResultError
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED

REPO = Path(__file__).resolve().parents[2]


class _GS:
    """Stand-in for GradientStats built from arrays."""

    def __init__(self, drift, heat, norm):
        t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
        self.drift, self.heat, self.heat_pre = t(drift), t(heat), t(heat / norm ** 2)
        self.drift_pre, self.grad_sq, self.view_norm = t(0 * norm), t(heat), t(norm)


def _unit(tmp: Path, name: str, n: int, seed: int, signal: float) -> Path:
    """A result whose heat rises and drift falls with the norm (signal > 0)."""
    rng = np.random.default_rng(seed)
    norm = rng.uniform(1, 3, n)
    heat = np.exp(signal * norm + rng.normal(0, 0.3, n)) * 1e-6
    drift = -signal * 1e-3 * norm + rng.normal(0, 1e-3, n)
    settings = {"optimizer": "adamw", "eta": 1e-3, "lambda_rad": 0.01, "decoupled": True,
                "note": "adamw: decoupled", "testable": True}
    cfg = NormsConfig(n_boot=300)
    dyn, arrays = _dynamics(_GS(drift, heat, norm), torch.as_tensor(norm), None, settings, cfg)
    row = {"task": "knn", "metric": "recall@1", "subset": "frequent", "alpha": 0.1,
           "plain": 80.0, "rescored": 82.0, "gain": 2.0, "ci": [0.5, 3.5], "n": n,
           "testable": n >= 30, "primary": True, "norm_feature": "head",
           "verdict": REPRODUCED if n >= 30 else NOT_TESTABLE}
    res = {"kind": "vision", "dataset": "digits", "backbone": "smallcnn", "arm": name,
           "seed": 7, "loss": name, **dyn, "n3": {"rows": [row], "verdict": row["verdict"]}}
    res["verdicts"] = {"N1": dyn["n1"]["verdict"], "N2": dyn["n2"]["verdict"],
                       "N3": row["verdict"]}
    d = tmp / name
    write_json(d / "norms.json", res)
    np.savez(d / PROBES_FILE, **arrays)
    return d / "norms.json"


def test_report_on_synthetic_results(tmp_path):
    strong = _unit(tmp_path, "infonce", 300, 0, 1.0)
    tiny = _unit(tmp_path, "weince", 12, 1, 1.0)
    cv = write_norms_report([strong, tiny], tmp_path / "rep" / "norms.md", profile="unit")
    by = json.loads(strong.read_text())
    assert by["n2"]["heat_vs_norm"]["pearson"]["r"] > 0.5
    assert by["verdicts"]["N2"] == REPRODUCED
    small = json.loads(tiny.read_text())
    assert small["verdicts"] == {"N1": NOT_TESTABLE, "N2": NOT_TESTABLE, "N3": NOT_TESTABLE}
    # a not-testable unit does not spoil the claim; the count says so
    assert cv["N2"]["verdict"] == REPRODUCED and cv["N2"]["n_testable"] == 1
    assert cv["N3"]["verdict"] == REPRODUCED
    md = (tmp_path / "rep" / "norms.md").read_text()
    assert "digits/smallcnn infonce s7 [loss infonce]" in md
    assert "| N2 |" in md and "**reproduced**" in md and "1 / 1 (of 2)" in md
    assert "norms_figures/norms_n2.png" in md
    # every row of a table has as many (unescaped) cell separators as its header
    tables, cur = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cur.append(len(re.findall(r"(?<!\\)\|", line)))
        elif cur:
            tables.append(cur)
            cur = []
    assert len(tables) == 4 and all(len(set(t)) == 1 for t in tables), tables
    assert (tmp_path / "rep" / "norms_figures" / "norms_n2.png").exists()
    summary = json.loads((tmp_path / "rep" / "norms_summary.json").read_text())
    assert summary["claims"]["N1"]["units"][1]["verdict"] == NOT_TESTABLE
    assert "provenance" in summary


def test_no_signal_is_not_reproduced(tmp_path):
    flat = _unit(tmp_path, "infonce", 300, 2, 0.0)
    res = json.loads(flat.read_text())
    assert res["verdicts"]["N2"] == NOT_REPRODUCED
    cv = claim_verdicts([res])
    assert cv["N2"]["verdict"] == NOT_REPRODUCED


def test_empty_report_says_not_run():
    cv = claim_verdicts([])
    assert all(v["verdict"] == NOT_RUN for v in cv.values())
    assert "## Verdicts" in render_markdown([])


@pytest.mark.parametrize("profile", ["config", "smoke", "paper"])
def test_every_profile_parses_into_the_config(profile):
    path = str(REPO / "config" / f"{profile}.yaml")
    cfg = load_norms_config(path, [])
    assert isinstance(cfg, NormsConfig) and cfg.resamples >= 2
    cfg = load_norms_config(path, ["n_boot=10"])
    assert cfg.n_boot == 10
    with pytest.raises(ValueError, match="nonsense"):
        load_norms_config(path, ["nonsense=1"])
    cfg = norms_config(Profile.of(yaml.safe_load(open(path))))
    assert as_config(NormsConfig, cfg).n_boot >= 200


def test_workflow_targets():
    config = {"vision": {"enabled": True, "datasets": ["digits"], "backbones": ["smallcnn"],
                         "arms": ["infonce", "weince"], "seeds": [7, 21]},
              "text": {"enabled": True, "models": ["minilm"], "arms": ["infonce"],
                       "seeds": [7, 21]}}
    config.update(profile="default", results="r",
                  norms={"vision": {"arms": None, "seeds": [7]}, "text": {"models": []}})
    v = [str(p) for p in norms_results(Profile.of(config))]
    assert v == ["r/default/vision/digits/smallcnn/infonce/seed7/norms.json",
                 "r/default/vision/digits/smallcnn/weince/seed7/norms.json"]
    config.update(profile="p", norms={"vision": {"enabled": False},
                                      "text": {"models": ["minilm"], "simcse_runs": True}})
    t = [str(p) for p in norms_results(Profile.of(config))]
    assert t == ["r/p/text/minilm/pretrained/seed0/norms.json",
                 "r/p/text/minilm/infonce/seed7/norms.json"]
    config["norms"] = {"vision": {"enabled": False}, "text": {"enabled": False}}
    assert norms_results(Profile.of(config)) == []
    assert text_model(Profile.of(config), "minilm", "pretrained", "x") == "minilm"
    assert text_model(Profile.of(config), "minilm", "infonce", "x") == "x/model"


def test_batching_fits_the_filler_bank():
    assert _batching(256, 1000, 16) == {"batch_size": 256, "probes_per_batch": 16}
    assert _batching(256, 40, 16) == {"batch_size": 41, "probes_per_batch": 16}
    assert _batching(8, 40, 16) == {"batch_size": 8, "probes_per_batch": 7}
    with pytest.raises(ValueError, match="filler bank is empty"):
        _batching(8, 0, 4)


@pytest.mark.parametrize("where", ["nan_literal", "null_in_judged"])
def test_non_finite_norms_result_is_invalid_not_na(tmp_path, where):
    """A NaN in norms.json (or null where a judged verdict needs a number) stops the page
    with an error naming the file and the rule to re-run, never an 'n/a' cell."""
    path = _unit(tmp_path, "infonce", 300, 0, 1.0)
    res = json.loads(path.read_text())
    assert res["verdicts"]["N2"] == REPRODUCED
    if where == "nan_literal":
        res["n2"]["heat_vs_norm"]["spearman"]["r"] = float("nan")
        path.write_text(json.dumps(res))    # json writes the literal NaN
        key = "n2.heat_vs_norm.spearman.r"
    else:
        res["n2"]["drift_vs_norm"]["pearson"]["r"] = None
        path.write_text(json.dumps(res))
        key = "n2.drift_vs_norm.pearson.r"
    with pytest.raises(InvalidResultError, match="invalid") as err:
        write_norms_report([path], tmp_path / "rep" / "norms.md", figures=False)
    assert str(path) in str(err.value) and key in str(err.value)
    assert "snakemake --forcerun" in str(err.value)
    assert not (tmp_path / "rep" / "norms.md").exists()


def test_not_testable_null_is_a_legitimate_absence(tmp_path):
    """A too-small unit's correlation is null (NaN written by write_json) and its verdict
    'not testable': that is no error, and the page shows n/a."""
    tiny = _unit(tmp_path, "weince", 2, 1, 1.0)
    res = json.loads(tiny.read_text())
    assert res["verdicts"]["N2"] == NOT_TESTABLE
    assert res["n2"]["heat_vs_norm"]["pearson"]["r"] is None
    write_norms_report([tiny], tmp_path / "rep" / "norms.md", figures=False)
    assert "n/a" in (tmp_path / "rep" / "norms.md").read_text()


def test_strings_from_result_files_are_escaped_on_the_page(tmp_path):
    """A result file's strings (labels, notes, row fields) cannot add
    images, links, raw HTML or table cells to the page."""
    path = _unit(tmp_path, "infonce", 300, 0, 1.0)
    res = json.loads(path.read_text())
    res["dataset"] = "![x](/etc/passwd)"
    res["arm"] = "<img src=/etc/hosts>"
    res["n1"]["premise"].update(decoupled=False, note="[link](http://example.com) a|b")
    res["n3"]["rows"][0].update(task="knn|extra", subset="`code`", metric="**bold**")
    md = render_markdown([res], profile="unit")
    assert r"\!\[x\](/etc/passwd)/smallcnn \<img src=/etc/hosts\> s7" in md
    assert r"\[link\](http://example.com) a\|b" in md and r"knn\|extra" in md
    page = MarkdownIt("commonmark", {"html": False}).enable("table").render(md)
    assert "<img" not in page and "<a " not in page and "<code>code" not in page
    assert "<strong>bold" not in page
    tables, cur = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cur.append(len(re.findall(r"(?<!\\)\|", line)))
        elif cur:
            tables.append(cur)
            cur = []
    assert tables and all(len(set(t)) == 1 for t in tables), tables
