"""Fabricated result files for the report tests (fixtures only: real tables are computed
from the result files the workflow writes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weince.evt.noise_floor import simulate_noise_floor, write_noise_floor
from weince.pipeline import layout
from weince.utils import write_json

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"


def summary(values: list[float]) -> dict[str, Any]:
    n = len(values)
    m = sum(values) / n
    sd = (sum((v - m) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else None
    return {"mean": m, "std": sd, "n": n, "values": values}


# per (dataset, arm): per-encoder linear test accuracy; probe seeds spread +-0.1 around it
LINEAR = {
    ("cifar100", "infonce"): [49.8, 50.1, 50.2],
    ("cifar100", "weince_recipe"): [53.0, 53.3, 53.5],
    ("cifar100", "weince"): [49.9, 50.0, 50.4],
    ("digits", "infonce"): [80.0, 81.0, 82.0],
    ("digits", "weince_recipe"): [84.0, 85.0, 86.0],
    ("digits", "weince"): [79.0, 80.5, 80.0],
}


def fixture_config(tmp: Path) -> dict[str, Any]:
    return {
        "profile": "fx",
        "results": str(tmp / "results"),
        "reports": str(tmp / "reports"),
        "claims": str(CLAIMS),
        "vision": {"datasets": ["cifar100", "digits"], "backbones": ["resnet18"],
                   "arms": ["infonce", "weince_recipe", "weince"], "seeds": [7, 21, 63],
                   "pretrain": {"epochs": 2, "batch_size": 64},
                   "evt": {"arms": ["infonce"]}},
        "text": {"models": ["minilm"], "corpus": "synthetic", "arms": ["infonce", "weince"],
                 "seeds": [7, 21], "simcse": {"epochs": 1, "batch_size": 32}},
        "timing": {"enabled": True, "config": {"backbone": "resnet18"}},
        "checks": {"enabled": True},
    }


def write_fixture_results(cfg: dict[str, Any]) -> None:
    """One result file of every kind the registry reads, for every run of ``cfg``."""
    for run in layout.vision_runs(cfg):
        d = layout.run_dir(cfg, run)
        i = cfg["vision"]["seeds"].index(run.seed)
        acc = LINEAR[(run.dataset, run.arm)][i]
        write_json(d / "linear.json", {"test_acc": summary([acc - 0.1, acc, acc + 0.1]),
                                       "val_acc": summary([acc + 1, acc + 1.2])}, seed=run.seed)
        knn = {"acc@50": summary([acc - 10.0, acc - 10.0])}
        for k in (1, 2, 5, 10, 20, 50):
            knn[f"recall@{k}"] = summary([acc - 12 + k * 0.5])
        write_json(d / "knn.json", knn, seed=run.seed)
        if run.arm in cfg["vision"]["evt"]["arms"]:
            write_json(d / "pot.json", {"fit": {"xi": -0.35 - 0.02 * i, "sigma": 0.05,
                                                "xi_ci": [-0.45, -0.3]}}, seed=run.seed)
            write_json(d / "link.json", {"status": "fitted",
                                         "fit": {"lam": 0.4 + 0.01 * i, "p_value": 1e-6,
                                                 "lam_ci": [0.3, 0.5]}}, seed=run.seed)
        # lambda over training, for the figure
        if run.arm.startswith("weince"):
            d.joinpath("train_log.jsonl").write_text(
                "".join(f'{{"epoch": {e}, "lambda_mean": {0.1 * e + 0.01 * i}}}\n'
                        for e in range(3)))
    for run in layout.text_runs(cfg):
        d = layout.run_dir(cfg, run)
        sp = {"infonce": 70.0, "weince": 72.0}[run.arm] + 0.5 * run.seed / 7
        write_json(d / "sts.json", {"test": {"spearman": sp, "pearson": sp},
                                    "dev": {"spearman": sp, "pearson": sp}}, seed=run.seed)
    root, prof = cfg["results"], cfg["profile"]
    write_json(Path(layout.TIMING.format(results=root, profile=prof)) / "timing.json",
               {"whole_step": {"losses": {"weince": {"overhead_pct": 0.9, "overhead_ci": [0.2, 1.4]},
                                          "weince_recipe": {"overhead_pct": 3.5,
                                                            "overhead_ci": [2.9, 4.0]}},
                               "attributed": {"weince": {"overhead_pct": 0.25},
                                              "weince_recipe": {"overhead_pct": 1.5}}},
                "trainable_parameters": {"infonce": 0, "weince": 0, "weince_recipe": 0}})
    write_json(Path(layout.CHECKS.format(results=root, profile=prof)) / "special_case.json",
               {"max_abs_diff": 0.0, "cases": []})
    # C11's own computation, at few replicates (numpy, a fraction of a second)
    write_noise_floor(simulate_noise_floor(replicates=500, seed=1),
                      Path(layout.SYNTHETIC.format(results=root, profile=prof))
                      / "noise_floor.json")
    for run in layout.norms_vision_runs(cfg):
        write_json(layout.run_dir(cfg, run) / "norms.json",
                   {**norms_unit(run.seed, run.arm), "dataset": run.dataset,
                    "backbone": run.backbone}, seed=run.seed)


def _corr(r: float | None, lo: float | None, hi: float | None, n: int = 200) -> dict[str, Any]:
    return {"r": r, "ci": [lo, hi], "n": n}


def norms_unit(seed: int, arm: str) -> dict[str, Any]:
    """A fabricated norms.json: N2 reproduced everywhere except infonce seed 21, N1 not
    testable for weince (no decay: nothing predicted), N3 reproduced on its primary row."""
    good = not (arm == "infonce" and seed == 21)
    n1 = ({"premise": {"decoupled": True}, "predicted_vs_measured":
           {"pearson": _corr(0.4, 0.2, 0.6)}} if arm != "weince" else
          {"premise": {"decoupled": False, "note": "no decay"}})
    drift = _corr(-0.5, -0.7, -0.3) if good else _corr(-0.1, -0.3, 0.1)
    return {
        "kind": "vision", "arm": arm, "seed": seed, "loss": arm,
        "n1": n1, "n2": {"heat_vs_norm": {"pearson": _corr(0.4, 0.2, 0.6)},
                         "drift_vs_norm": {"pearson": drift}},
        "n3": {"rows": [{"task": "knn", "metric": "recall@1", "subset": "frequent",
                         "gain": 1.5, "ci": [0.5, 2.5], "primary": True,
                         "verdict": "reproduced"},
                        {"task": "knn", "metric": "recall@5", "subset": "all",
                         "gain": None, "ci": [None, None], "primary": False,
                         "verdict": "not testable at this scale"}]},
        "verdicts": {"N1": "not testable at this scale" if arm == "weince" else "reproduced",
                     "N2": "reproduced" if good else "not reproduced", "N3": "reproduced"},
    }


@pytest.fixture
def fx(tmp_path):
    cfg = fixture_config(tmp_path)
    write_fixture_results(cfg)
    return cfg


@pytest.fixture(scope="module")
def fx_module(tmp_path_factory):
    """The same results written once for a test module, for tests that only read them."""
    cfg = fixture_config(tmp_path_factory.mktemp("fx"))
    write_fixture_results(cfg)
    return cfg
