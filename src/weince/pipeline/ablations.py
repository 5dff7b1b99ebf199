"""The ablation plan: which groups of arms a profile trains and reads.

A reviewer's questions, each answered by one group of arms (:data:`GROUPS`) trained with
the same SimCLR pretraining, feature extraction and linear probe as the main arms:
``confound`` (the recipe's top-M terms), ``gate`` (learned against fixed ``lam`` and single
factors), ``beta`` (per-anchor exponent), ``temperature`` (both losses over ``tau``),
``baselines`` (HCL, DCL, DCLW) and ``features`` (backbone against projection head). The
arms themselves are :data:`weince.pipeline.arms.ARMS`. The profile's ``ablations`` block says
which groups run, on which (dataset, backbone) pairs and encoder seeds
(:func:`ablation_plan`); :mod:`weince.report.ablations` writes the page.

Every arm of ``vision.arms`` has a row on the page: when the profile's groups leave one
out, the plan adds the group ``arms`` (:func:`arms_group`), every arm of ``vision.arms``
against the claims' baseline (an arm's ``baseline`` in the claims registry).

    from weince.pipeline.ablations import ablation_plan
    plan = ablation_plan(prof)          # prof: the resolved profile
    plan.run_arms(), ablation_inputs(plan)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from weince.pipeline.arms import TAUS, canonical_arm, tau_arm_name
from weince.pipeline.claims import load_claims
from weince.pipeline.layout import VisionRun
from weince.pipeline.profile import Profile

__all__ = ["Row", "Group", "GROUPS", "ARMS_GROUP", "FEATURE_FILES", "Plan", "ablation_plan",
           "arms_group", "ablation_outputs", "ablation_inputs"]


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
ARMS_GROUP = "arms"   # the group of the profile's own arms (not a config choice)


# ---------------------------------------------------------------- per-profile plan
@dataclass(frozen=True)
class Plan:
    """What a profile runs for the ablations: groups on (dataset, backbone) pairs over
    encoder seeds, in the profile ``prof``."""

    prof: Profile
    groups: tuple[Group, ...]
    pairs: tuple[tuple[str, str], ...]
    seeds: tuple[int, ...]

    @property
    def profile(self) -> str:
        return self.prof.name

    def canonical(self, arm: str) -> str:
        """The arm whose run gives ``arm``'s result (:func:`weince.pipeline.arms.canonical_arm`
        at the profile's losses and temperature)."""
        return canonical_arm(arm, self.prof.vision.losses, self.prof.vision.tau)

    def run_arms(self) -> list[str]:
        """The distinct arm names to train (canonical: no run is duplicated)."""
        return list(dict.fromkeys(self.canonical(r.arm) for g in self.groups for r in g.rows))

    def run_dir(self, dataset: str, backbone: str, arm: str, seed: int) -> Path:
        return VisionRun(dataset, backbone, self.canonical(arm), int(seed)).dir(
            self.prof.results, self.profile)

    def result_files(self, dataset: str, backbone: str, row: Row) -> list[Path]:
        """One probe result per encoder seed for a row."""
        return [self.run_dir(dataset, backbone, row.arm, s) / FEATURE_FILES[row.feature]
                for s in self.seeds]

    def log_files(self, dataset: str, backbone: str, arm: str) -> list[Path]:
        return [self.run_dir(dataset, backbone, arm, s) / "train_log.jsonl" for s in self.seeds]


def _claims_baseline(prof: Profile, arms: list[str]) -> str:
    """The first of ``arms`` that a vision claim of the registry takes as its baseline
    (``arms.baseline``), else the first of ``arms``."""
    baselines = [c["arms"].get("baseline") for c in load_claims(prof.claims)["claims"]
                 if c.get("stage") == "vision"]
    return next((a for a in arms if a in baselines), arms[0])


def arms_group(prof: Profile, groups: tuple[Group, ...]) -> Group | None:
    """The group ``arms``: every arm of ``vision.arms`` against the claims' baseline, when
    ``groups`` name no row of some arm (compared as the runs they read,
    :func:`weince.pipeline.arms.canonical_arm`); None when they name every arm."""
    arms = list(prof.vision.arms) if prof.vision.enabled else []

    def run_of(arm: str) -> str:
        return canonical_arm(arm, prof.vision.losses, prof.vision.tau)

    named = {run_of(r.arm) for g in groups for r in g.rows}
    if all(run_of(a) in named for a in arms):
        return None
    return Group(ARMS_GROUP, "The profile's arms",
                 "How does each arm the profile trains (vision.arms) compare with the "
                 "claims' baseline, on the same pretraining and probe?",
                 tuple(Row(a) for a in arms), _claims_baseline(prof, arms))


def ablation_plan(prof: Profile) -> Plan:
    """The profile's ablation plan, from its ``ablations`` block: ``enabled``, ``groups``
    (names of :data:`GROUPS`, or ``"all"``), ``pairs`` (default: the profile's first vision
    pair) and ``seeds`` (default: the profile's ``vision.seeds``); the schema has checked the
    names. A disabled plan, or one with no groups, has no groups; else the group ``arms``
    (:func:`arms_group`) follows them when they leave an arm of ``vision.arms`` out."""
    block = prof.ablations
    if not block.enabled:
        return Plan(prof, (), (), ())
    names = list(GROUPS) if block.groups == "all" else list(block.groups)
    pairs = prof.vision.pairs[:1] if block.pairs is None else block.pairs
    seeds = prof.vision.seeds if block.seeds is None else block.seeds
    if names and (not pairs or not seeds):
        raise ValueError(f"ablations block ({prof.name}): groups {names} need at "
                         f"least one (dataset, backbone) pair and one encoder seed; the "
                         f"profile's vision block has pairs {list(prof.vision.pairs)} and seeds "
                         f"{list(prof.vision.seeds)}")
    groups = tuple(GROUPS[n] for n in names)
    extra = arms_group(prof, groups) if groups else None
    return Plan(prof, groups + ((extra,) if extra else ()), tuple(pairs), tuple(seeds))


def ablation_outputs(prof: Profile) -> dict[str, Path]:
    """Files the ablation report writes (``md``, ``json``, figure folder)."""
    d = prof.report_dir
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
