"""The ablation plan: which groups of arms a profile trains and reads.

A reviewer's questions, each answered by one group of arms (:data:`GROUPS`) trained with
the same SimCLR pretraining, feature extraction and linear probe as the main arms:
``confound`` (the recipe's top-M terms), ``gate`` (learned against fixed ``lam`` and single
factors), ``beta`` (per-anchor exponent), ``temperature`` (both losses over ``tau``),
``baselines`` (HCL, DCL, DCLW) and ``features`` (backbone against projection head). The
arms themselves are :data:`weince.pipeline.arms.ARMS`. The profile's ``ablations`` block says
which groups run, on which (dataset, backbone) pairs and encoder seeds
(:func:`ablation_plan`); :mod:`weince.report.ablations` writes the page.

    from weince.pipeline.ablations import ablation_plan
    plan = ablation_plan(config)        # config: the profile's workflow config
    plan.run_arms(), ablation_inputs(plan)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from weince.pipeline.arms import TAUS, canonical_arm, tau_arm_name
from weince.pipeline.layout import VisionRun, report_dir, vision_pairs

__all__ = ["Row", "Group", "GROUPS", "FEATURE_FILES", "Plan", "ablation_plan",
           "ablation_outputs", "ablation_inputs"]


@dataclass(frozen=True)
class Row:
    """A line of an ablation table: an arm, probed on ``backbone`` or ``head`` features."""

    arm: str
    feature: str = "backbone"
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or (self.arm if self.feature == "backbone" else f"{self.arm} [head]")


@dataclass(frozen=True)
class Group:
    """A set of rows answering one question; ``reference`` is the name of the row every
    other row is compared with."""

    name: str
    title: str
    question: str
    rows: tuple[Row, ...]
    reference: str



_GROUP_LIST = [
    Group("confound", "Confound: the recipe's top-M terms",
          "Does the gain come from the extreme-value gate or from the two top-M terms that "
          "the authors' recipe adds to the WEINCE arm only?",
          tuple(Row(a) for a in ("infonce", "infonce_topm", "weince", "weince_recipe",
                                 "weince_recipe_no_weib")), "infonce"),
    Group("gate", "Gate: learned per-anchor lambda against fixed lambda and single factors",
          "Does the learned gate matter? lam = 0 is InfoNCE exactly; lam = 1 uses the Weibull "
          "logit alone.",
          (Row("weince"), Row("infonce", label="infonce (lam=0)"),
           *(Row(f"weince_lam{x}") for x in ("0p25", "0p5", "1")),
           Row("weince_gate_rho"), Row("weince_gate_aic")), "weince"),
    Group("beta", "Exponent: beta = 1 (official code) against per-anchor beta (paper's formula)",
          "Does the per-anchor Weibull exponent of the paper's printed formula change the "
          "result of the code's beta = 1?",
          (Row("weince"), Row("weince_beta_anchor")), "weince"),
    Group("temperature", "Temperature: InfoNCE and WEINCE over tau",
          "Is InfoNCE simply mistuned? Both losses at tau in {0.1, 0.2, 0.5, 1.0}.",
          tuple(Row(tau_arm_name(loss, t)) for loss in ("infonce", "weince") for t in TAUS),
          tau_arm_name("infonce", 0.5)),
    Group("baselines", "Hard-negative baselines from the literature",
          "Do existing hard-negative losses (HCL, DCL, DCLW) already give the gain?",
          tuple(Row(a) for a in ("infonce", "hcl", "dcl", "dclw", "weince")), "infonce"),
    Group("features", "Features: backbone against projection head",
          "What does probing the projection-head output instead of the backbone features "
          "(the protocol) change?",
          (Row("infonce"), Row("infonce", "head"), Row("weince"), Row("weince", "head")),
          "infonce"),
]
GROUPS: dict[str, Group] = {g.name: g for g in _GROUP_LIST}
FEATURE_FILES = {"backbone": "linear.json", "head": "linear_head.json"}


# ---------------------------------------------------------------- per-profile plan
_PLAN_KEYS = {"enabled", "groups", "pairs", "seeds"}


@dataclass
class Plan:
    """What a profile runs for the ablations: groups on (dataset, backbone) pairs over
    encoder seeds; ``cfg`` is the workflow config (profile, results, vision, ...)."""

    cfg: dict[str, Any]
    groups: list[Group]
    pairs: list[tuple[str, str]]
    seeds: list[int]

    @property
    def profile(self) -> str:
        return str(self.cfg["profile"])

    def run_arms(self) -> list[str]:
        """The distinct arm names to train (canonical: no run is duplicated)."""
        out: list[str] = []
        for g in self.groups:
            for r in g.rows:
                a = canonical_arm(r.arm, self.cfg)
                if a not in out:
                    out.append(a)
        return out

    def run_dir(self, dataset: str, backbone: str, arm: str, seed: int) -> Path:
        return VisionRun(dataset, backbone, canonical_arm(arm, self.cfg), int(seed)).dir(
            self.cfg.get("results", "results"), self.profile)

    def result_files(self, dataset: str, backbone: str, row: Row) -> list[Path]:
        """One probe result per encoder seed for a row."""
        return [self.run_dir(dataset, backbone, row.arm, s) / FEATURE_FILES[row.feature]
                for s in self.seeds]

    def log_files(self, dataset: str, backbone: str, arm: str) -> list[Path]:
        return [self.run_dir(dataset, backbone, arm, s) / "train_log.jsonl" for s in self.seeds]


def ablation_plan(cfg: Mapping[str, Any]) -> Plan:
    """The profile's ablation plan, from its ``ablations`` block.

    Keys: ``enabled`` (bool), ``groups`` (names of :data:`GROUPS`, or ``"all"``), ``pairs``
    (``[[dataset, backbone], ...]``; default: the profile's first vision pair) and
    ``seeds`` (default: the profile's ``vision.seeds``). A disabled plan, or one with no
    groups, has no groups.
    """
    if "profile" not in cfg:
        raise ValueError("the workflow config has no 'profile' key; pass the profile's "
                         "config (config/config.yaml, config/smoke.yaml or config/paper.yaml)")
    block = dict(cfg.get("ablations") or {})
    bad = set(block) - _PLAN_KEYS
    if bad:
        raise ValueError(f"ablations block ({cfg['profile']}): unknown key(s) "
                         f"{sorted(bad)}; valid: {sorted(_PLAN_KEYS)}")
    cfg = dict(cfg)
    if not block.get("enabled", True):
        return Plan(cfg, [], [], [])
    names = block.get("groups") or []
    if names == "all":
        names = list(GROUPS)
    if isinstance(names, str):
        names = [names]
    for n in names:
        if n not in GROUPS:
            raise ValueError(f"ablations block ({cfg['profile']}): unknown group {n!r}; "
                             f"valid: {list(GROUPS)} or 'all'")
    pairs = block.get("pairs")
    if pairs is None:
        pairs = vision_pairs(cfg)[:1]
    pairs = [tuple(p) for p in pairs]
    for p in pairs:
        if len(p) != 2 or not all(isinstance(x, str) for x in p):
            raise ValueError(f"ablations block ({cfg['profile']}): a pair must be "
                             f"[dataset, backbone], got {list(p)!r}")
    seeds = block.get("seeds")
    if seeds is None:
        seeds = list((cfg.get("vision") or {}).get("seeds") or [])
    if names and (not pairs or not seeds):
        raise ValueError(f"ablations block ({cfg['profile']}): groups {names} need at "
                         f"least one (dataset, backbone) pair and one encoder seed; the "
                         f"profile's vision block has pairs {vision_pairs(cfg)} and seeds "
                         f"{(cfg.get('vision') or {}).get('seeds')}")
    return Plan(cfg, [GROUPS[n] for n in names], pairs, [int(s) for s in seeds])


def ablation_outputs(cfg: Mapping[str, Any]) -> dict[str, Path]:
    """Files the ablation report writes (``md``, ``json``, figure folder)."""
    d = report_dir(cfg)
    return {"md": d / "ablations.md", "json": d / "ablations.json", "figures": d / "ablations"}


def ablation_inputs(plan: Plan) -> list[Path]:
    """Every result file the report reads: probe results and training logs per run."""
    out: list[Path] = []
    for dataset, backbone in plan.pairs:
        for g in plan.groups:
            for r in g.rows:
                out += plan.result_files(dataset, backbone, r)
                out += plan.log_files(dataset, backbone, r.arm)
    return list(dict.fromkeys(out))
