"""Ablations: what in WEINCE does the work (issue 9).

A reviewer's questions, each answered by one group of arms trained with the same SimCLR
pretraining, feature extraction and linear probe as the main arms:

- ``confound``: does the gain come from the extreme-value gate or from the two top-M terms
  that the authors' recipe adds to the WEINCE arm only (``shared/SPEC.md`` 3.4)?
- ``gate``: does the learned, per-anchor gate matter, against fixed ``lam`` and against
  either of its two factors alone (``gate='rho'`` / ``'aic'``)?
- ``beta``: the paper's printed per-anchor exponent (``beta='anchor'``) against the
  official code's ``beta = 1``.
- ``temperature``: is InfoNCE simply mistuned? Both losses over ``tau`` in {0.1, 0.2, 0.5, 1}.
- ``baselines``: do existing hard-negative losses (HCL, DCL, DCLW;
  :mod:`weince.losses.baselines`) already give the gain?
- ``features``: the linear probe on backbone features (the protocol) against the
  projection-head features.

The arms are data (:data:`ARMS`, :data:`GROUPS`); ``config/ablations.yaml`` says which
groups a profile runs, on which (dataset, backbone) pairs and encoder seeds
(:func:`ablation_plan`). An ablation arm is an ordinary entry in the workflow's ``arm``
slot: :func:`apply_arm` turns its name into the loss, temperature and loss keyword
arguments of the run. :func:`build_ablation_report` reads the runs' ``linear.json`` /
``linear_head.json`` and ``train_log.jsonl`` and writes ``reports/<profile>/ablations.md``
(one table per group: mean, 95% t-interval across encoder seeds, n, difference to the
group's reference with a Welch interval, and commentary generated from those numbers
only), ``ablations.json`` and a figure of mean ``lambda`` and ``rho0`` over training.

    from weince.ablations import ablation_plan, build_ablation_report
    plan = ablation_plan(workflow_cfg, yaml.safe_load(open("config/ablations.yaml")))
    build_ablation_report(workflow_cfg, plan)
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from weince.report.layout import REPORT, VisionRun, vision_pairs
from weince.report.results import Provenance, encoder_value, get_key, load_result
from weince.report.stats import Estimate, diff_estimate, estimate
from weince.report.tables import fmt_estimate

__all__ = ["Arm", "Row", "Group", "ARMS", "GROUPS", "Plan", "apply_arm", "arm_settings",
           "canonical_arm", "ablation_plan", "ablation_outputs", "ablation_inputs",
           "group_commentary", "group_table", "build_ablation_report", "head_probe",
           "DEFAULT_TAU"]

DEFAULT_TAU = 0.5  # weince.train.simclr.SimCLRConfig.tau (SPEC 6)


# ---------------------------------------------------------------- arms and groups (data)
@dataclass(frozen=True)
class Arm:
    """One training arm: a registered loss (``weince.losses.build_loss`` name), its keyword
    arguments, and a temperature (``None``: the profile's ``vision.pretrain.tau``)."""

    name: str
    loss: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    tau: float | None = None
    note: str = ""

    def setting(self) -> str:
        parts = [f"{k}={v!r}" if isinstance(v, str) else f"{k}={v:g}"
                 for k, v in self.kwargs.items()]
        if self.tau is not None:
            parts.append(f"tau={self.tau:g}")
        return f"{self.loss}" + (f"({', '.join(parts)})" if parts else "")


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


def _tau_name(loss: str, tau: float) -> str:
    return f"{loss}_tau{tau:g}".replace(".", "p")


_ARM_LIST = [
    Arm("infonce", "infonce", note="InfoNCE / NT-Xent (SPEC 2)"),
    Arm("infonce_topm", "infonce_topm", note="InfoNCE + 0.5 softmax top-50 term"),
    Arm("weince", "weince", note="WEINCE core (SPEC 3.1-3.2)"),
    Arm("weince_recipe", "weince_recipe", note="WEINCE + both top-M terms (authors' recipe)"),
    Arm("weince_recipe_no_weib", "weince_recipe_no_weib",
        note="WEINCE + softmax top-M term only"),
    *[Arm(f"weince_lam{lam:g}".replace(".", "p"), "weince", {"lam": lam},
          note=f"every anchor's lambda fixed at {lam:g}") for lam in (0.25, 0.5, 1.0)],
    Arm("weince_gate_rho", "weince", {"gate": "rho"}, note="cap-proximity factor of the gate only"),
    Arm("weince_gate_aic", "weince", {"gate": "aic"}, note="AIC factor of the gate only"),
    Arm("weince_beta_anchor", "weince", {"beta": "anchor"},
        note="per-anchor Weibull slope (paper's printed formula)"),
    *[Arm(_tau_name(loss, t), loss, tau=t, note=f"{loss} at tau={t:g}")
      for loss in ("infonce", "weince") for t in (0.1, 0.2, 0.5, 1.0)],
    Arm("hcl", "hcl", {"beta": 1.0, "tau_plus": 0.1},
        note="hard-negative loss, Robinson et al. ICLR 2021"),
    Arm("dcl", "dcl", note="decoupled contrastive loss, Yeh et al. ECCV 2022"),
    Arm("dclw", "dclw", {"sigma": 0.5}, note="DCL with von Mises-Fisher weights"),
]
ARMS: dict[str, Arm] = {a.name: a for a in _ARM_LIST}

_TAUS = (0.1, 0.2, 0.5, 1.0)
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
          tuple(Row(_tau_name(loss, t)) for loss in ("infonce", "weince") for t in _TAUS),
          _tau_name("infonce", 0.5)),
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


def _check_arm(name: str) -> Arm:
    if name not in ARMS:
        raise ValueError(f"unknown ablation arm {name!r}; valid: {sorted(ARMS)}")
    return ARMS[name]


def profile_tau(cfg: Mapping[str, Any]) -> float:
    """The temperature of the profile's main arms (``vision.pretrain.tau``, default 0.5)."""
    pre = ((cfg.get("vision") or {}).get("pretrain") or {})
    return float(pre.get("tau", DEFAULT_TAU))


def canonical_arm(name: str, cfg: Mapping[str, Any]) -> str:
    """The arm whose run gives ``name``'s result: a temperature arm at the profile's own
    ``tau`` with no other option (none in the arm, none under its name in
    ``vision.losses``) *is* the main arm (``infonce_tau0p5`` -> ``infonce`` when the
    profile trains at 0.5), so it is not trained twice."""
    arm = _check_arm(name)
    own = ((cfg.get("vision") or {}).get("losses") or {}).get(name)
    if (arm.tau is not None and not arm.kwargs and not own and arm.loss in ARMS
            and math.isclose(arm.tau, profile_tau(cfg))):
        return arm.loss
    return name


def arm_settings(name: str, losses: Mapping[str, Any] | None = None,
                 tau: float | None = None) -> dict[str, Any]:
    """``{"loss", "tau", "loss_kwargs"}`` of arm ``name``.

    ``loss_kwargs``: the profile's options of the underlying loss (``losses[arm.loss]``,
    e.g. ``vision.losses.weince`` for ``weince_lam0p5``), then the arm's own options, then
    the profile's options under the arm's name (``losses[name]``, e.g.
    ``vision.losses.hcl``), later ones winning. ``tau``: the arm's own, else
    the given default.
    """
    arm = _check_arm(name)
    losses = losses or {}
    kwargs: dict[str, Any] = {}
    if name != arm.loss:
        kwargs.update(copy.deepcopy(dict(losses.get(arm.loss) or {})))
    kwargs.update(copy.deepcopy(dict(arm.kwargs)))
    kwargs.update(copy.deepcopy(dict(losses.get(name) or {})))
    return {"loss": arm.loss, "tau": arm.tau if arm.tau is not None else tau,
            "loss_kwargs": kwargs}


def apply_arm(run_cfg: Mapping[str, Any], arm: str,
              losses: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A ``SimCLRConfig`` dict for ablation arm ``arm``: ``run_cfg`` (the profile's run
    config, e.g. from ``weince.report.workflow.pretrain_config``) with ``loss``,
    ``loss_kwargs`` and, for temperature arms, ``tau`` replaced (:func:`arm_settings`).
    Names that are not ablation arms raise ``ValueError`` listing the valid ones."""
    out = copy.deepcopy(dict(run_cfg))
    s = arm_settings(arm, losses, out.get("tau"))
    out["loss"] = s["loss"]
    out["loss_kwargs"] = s["loss_kwargs"]
    if s["tau"] is not None:
        out["tau"] = float(s["tau"])
    return out


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


def ablation_plan(cfg: Mapping[str, Any], abl_cfg: Mapping[str, Any] | None) -> Plan:
    """The profile's ablation plan from ``config/ablations.yaml``.

    ``abl_cfg`` has ``defaults`` and ``profiles: {<profile>: {...}}`` blocks with keys
    ``enabled`` (bool), ``groups`` (names of :data:`GROUPS`, or ``"all"``), ``pairs``
    (``[[dataset, backbone], ...]``; default: the profile's first vision pair) and
    ``seeds`` (default: the profile's ``vision.seeds``). The profile's block overrides
    ``defaults`` key by key. A disabled plan, or one with no groups, has no groups.
    """
    if "profile" not in cfg:
        raise ValueError("the workflow config has no 'profile' key; pass the merged profile "
                         "config (config/config.yaml, config/smoke.yaml or config/paper.yaml)")
    abl_cfg = abl_cfg or {}
    unknown = set(abl_cfg) - {"defaults", "profiles"}
    if unknown:
        raise ValueError(f"config/ablations.yaml: unknown top-level key(s) {sorted(unknown)}; "
                         f"valid: ['defaults', 'profiles']")
    block = dict(abl_cfg.get("defaults") or {})
    block.update((abl_cfg.get("profiles") or {}).get(cfg["profile"]) or {})
    bad = set(block) - _PLAN_KEYS
    if bad:
        raise ValueError(f"config/ablations.yaml ({cfg['profile']}): unknown key(s) "
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
            raise ValueError(f"config/ablations.yaml ({cfg['profile']}): unknown group {n!r}; "
                             f"valid: {list(GROUPS)} or 'all'")
    pairs = block.get("pairs")
    if pairs is None:
        pairs = vision_pairs(cfg)[:1]
    pairs = [tuple(p) for p in pairs]
    for p in pairs:
        if len(p) != 2 or not all(isinstance(x, str) for x in p):
            raise ValueError(f"config/ablations.yaml ({cfg['profile']}): a pair must be "
                             f"[dataset, backbone], got {list(p)!r}")
    seeds = block.get("seeds")
    if seeds is None:
        seeds = list((cfg.get("vision") or {}).get("seeds") or [])
    if names and (not pairs or not seeds):
        raise ValueError(f"config/ablations.yaml ({cfg['profile']}): groups {names} need at "
                         f"least one (dataset, backbone) pair and one encoder seed; the "
                         f"profile's vision block has pairs {vision_pairs(cfg)} and seeds "
                         f"{(cfg.get('vision') or {}).get('seeds')}")
    return Plan(cfg, [GROUPS[n] for n in names], pairs, [int(s) for s in seeds])


def ablation_outputs(cfg: Mapping[str, Any]) -> dict[str, Path]:
    """Files :func:`build_ablation_report` writes (``md``, ``json``, figure folder)."""
    d = Path(REPORT.format(reports=cfg.get("reports", "reports"), profile=cfg["profile"]))
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


# ---------------------------------------------------------------- numbers -> text
def _f(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def _interval(e: Estimate) -> str:
    return f"[{_f(e.lo)}, {_f(e.hi)}]" if e.has_interval else "(no interval, n < 2)"


def _overlap(a: Estimate, b: Estimate) -> bool:
    return a.lo <= b.hi and b.lo <= a.hi


def _diff_text(name: str, d: Estimate) -> str:
    if d.mean is None:
        return f"{name}: not available (an arm has no result)"
    if not d.has_interval:
        return f"{name} = {_f(d.mean, True)} (no interval: an arm has n < 2)"
    where = ("includes 0" if d.lo <= 0 <= d.hi else
             "lies above 0" if d.lo > 0 else "lies below 0")
    return (f"{name} = {_f(d.mean, True)} [{_f(d.lo, True)}, {_f(d.hi, True)}] "
            f"(Welch 95% interval; it {where})")


def _ranking_text(group: Group, est: Mapping[str, Estimate], metric: str) -> list[str]:
    have = [r.name for r in group.rows if est.get(r.name) is not None
            and est[r.name].mean is not None]
    missing = [r.name for r in group.rows if r.name not in have]
    lines = []
    if missing:
        lines.append(f"No result for {', '.join(missing)}.")
    if len(have) < 2:
        lines.append("Fewer than two rows have results, so nothing is compared.")
        return lines
    top = max(est[n].mean for n in have)
    best = [n for n in have if est[n].mean == top]
    b = est[best[0]]
    if len(best) > 1:
        lines.append(f"Highest mean {metric}: {', '.join(best)} (tied at {_f(top)}).")
    else:
        lines.append(f"Highest mean {metric}: {best[0]}, {_f(b.mean)} {_interval(b)} "
                     f"over n={b.n} encoder seed(s).")
    others = [n for n in have if n != best[0]]
    ranked = sorted(others, key=lambda n: -est[n].mean)
    lines.append("Next by mean: " + "; ".join(
        f"{n} {_f(est[n].mean)} ({_f(est[n].mean - top, True)})" for n in ranked) + ".")
    if not b.has_interval:
        lines.append(f"{best[0]} has no interval (n < 2), so interval overlaps are not "
                     f"assessed.")
        return lines
    no_int = [n for n in others if not est[n].has_interval]
    ov = [n for n in others if est[n].has_interval and _overlap(b, est[n])]
    sep = [n for n in others if est[n].has_interval and not _overlap(b, est[n])]
    if ov and not sep:
        lines.append(f"Its 95% interval overlaps the interval of every other row that has "
                     f"one ({', '.join(ov)}).")
    elif sep and not ov:
        lines.append(f"Its 95% interval overlaps no other row's interval "
                     f"({', '.join(sep)} lie entirely below it).")
    elif ov or sep:
        lines.append(f"Its 95% interval overlaps those of {', '.join(ov)}; it does not "
                     f"overlap those of {', '.join(sep)}.")
    if no_int:
        lines.append(f"No interval for {', '.join(no_int)} (n < 2).")
    return lines


def group_commentary(group: Group, test: Mapping[str, Estimate],
                     val: Mapping[str, Estimate] | None = None) -> list[str]:
    """Sentences generated from the numbers only (no verdict): the row with the highest mean
    test accuracy, how its interval relates to the others', and the comparisons that the
    group's question needs (for ``confound``: ``weince_recipe - weince`` against
    ``infonce_topm - infonce``; ``temperature``: each loss at its tau chosen on validation;
    ``features``: head minus backbone per arm).

    Args:
        group: the group.
        test: row name -> :class:`Estimate` of test accuracy across encoder seeds.
        val: row name -> :class:`Estimate` of validation accuracy (used only to choose the
            temperature of each loss, never the test numbers).
    """
    val = val or {}
    lines = _ranking_text(group, test, "test accuracy")
    get = test.get
    d = lambda a, b: diff_estimate(get(a) or estimate([]), get(b) or estimate([]))  # noqa: E731
    if group.name == "confound":
        lines.append("Top-M terms added to WEINCE: " +
                     _diff_text("weince_recipe - weince", d("weince_recipe", "weince")) + ".")
        lines.append("Softmax top-M term added to InfoNCE: " +
                     _diff_text("infonce_topm - infonce", d("infonce_topm", "infonce")) + ".")
        a, b = d("weince_recipe", "weince"), d("infonce_topm", "infonce")
        if a.mean is not None and b.mean is not None:
            rel = ("overlap" if a.has_interval and b.has_interval and _overlap(a, b)
                   else "do not overlap" if a.has_interval and b.has_interval
                   else "cannot be compared (n < 2)")
            lines.append(f"The two top-M effects differ by {_f(a.mean - b.mean, True)} "
                         f"points; their intervals {rel}.")
        lines.append("The paper's comparison, " +
                     _diff_text("weince_recipe - infonce", d("weince_recipe", "infonce")) +
                     ", splits into the gate, " +
                     _diff_text("weince - infonce", d("weince", "infonce")) +
                     ", and the top-M terms above.")
        lines.append("Weibull top-M term alone: " + _diff_text(
            "weince_recipe - weince_recipe_no_weib", d("weince_recipe", "weince_recipe_no_weib"))
            + ".")
    elif group.name == "temperature":
        chosen = {}
        for loss in ("infonce", "weince"):
            rows = [_tau_name(loss, t) for t in _TAUS]
            vs = [(n, val[n].mean) for n in rows if val.get(n) is not None
                  and val[n].mean is not None and get(n) is not None and get(n).mean is not None]
            if not vs:
                lines.append(f"{loss}: no validation accuracy, so no temperature is chosen.")
                continue
            n_best = max(vs, key=lambda x: x[1])[0]
            chosen[loss] = n_best
            lines.append(f"{loss}: tau chosen on validation accuracy = {ARMS[n_best].tau:g} "
                         f"(val {_f(val[n_best].mean)}); its test accuracy "
                         f"{_f(get(n_best).mean)} {_interval(get(n_best))}.")
        if len(chosen) == 2:
            lines.append("At the validation-chosen temperatures, " + _diff_text(
                f"{chosen['weince']} - {chosen['infonce']}",
                d(chosen["weince"], chosen["infonce"])) + ".")
    elif group.name == "features":
        for arm in ("infonce", "weince"):
            lines.append(f"{arm}: " + _diff_text(
                "head - backbone", d(f"{arm} [head]", arm)) + ".")
    elif group.name == "baselines":
        base = [n for n in ("hcl", "dcl", "dclw") if get(n) is not None and get(n).mean is not None]
        if base:
            top = max(base, key=lambda n: get(n).mean)
            lines.append(f"Against the hard-negative baseline with the highest mean ({top}): " +
                         _diff_text(f"weince - {top}", d("weince", top)) + ".")
    elif group.name in ("gate", "beta"):
        for r in group.rows:
            if r.name != group.reference and r.arm != "infonce":
                lines.append(_diff_text(f"{r.name} - {group.reference}",
                                        d(r.name, group.reference)) + ".")
    return lines


def group_table(group: Group, test: Mapping[str, Estimate], missing: Mapping[str, int]
                ) -> str:
    """Markdown table: row, loss setting, test accuracy mean [95% CI] (n), difference to
    the reference row (Welch interval)."""
    ref = test.get(group.reference) or estimate([])
    lines = ["| Row | Loss setting | Linear probe test acc. (%): mean [95% CI] (n) | "
             f"vs. {group.reference} |", "| --- | --- | --- | --- |"]
    for r in group.rows:
        e = test.get(r.name) or estimate([])
        arm = ARMS[r.arm]
        setting = arm.setting() + ("; head features" if r.feature == "head" else "")
        if r.name == group.reference:
            vs = "reference"
        else:
            vs = fmt_estimate(diff_estimate(e, ref), signed=True) if e.mean is not None \
                and ref.mean is not None else "n/a"
        lines.append(f"| {r.name} | {setting} | {fmt_estimate(e, missing=missing.get(r.name, 0))}"
                     f" | {vs} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- reading results
def _read_metric(paths: Sequence[Path], key: str, prov: Provenance, allow_missing: bool,
                 seen: set | None = None) -> tuple[list[float], int]:
    """Encoder-level values of ``key`` (one per existing file) and the number missing; the
    provenance of each file read for ``test_acc`` is added once (``seen``)."""
    seen = set() if seen is None else seen
    vals, missing = [], 0
    for p in paths:
        if not p.exists():
            if allow_missing:
                missing += 1
                continue
            raise FileNotFoundError(
                f"ablation result {p} does not exist; make it with `snakemake {p}` (the "
                f"ablation arms are trained by the same pretrain/features/linear rules as the "
                f"main arms; see workflow/rules/ablations.smk)")
        data = load_result(p)
        if key == "test_acc" and p not in seen:
            seen.add(p)
            prov.add(data, p)
        v = encoder_value(get_key(data, key, p, needed_by="the ablation report"), p, key)
        if v is not None:
            vals.append(v)
    return vals, missing


def _read_log(path: Path) -> list[dict[str, Any]]:
    from weince.train.logging import read_jsonl

    return read_jsonl(path)


def _training_curves(plan: Plan, dataset: str, backbone: str, allow_missing: bool
                     ) -> dict[str, dict[str, dict[int, list[float]]]]:
    """arm -> {"lambda_mean"|"rho0": {epoch: [value per seed]}} for arms that log them."""
    curves: dict[str, dict[str, dict[int, list[float]]]] = {}
    for arm in plan.run_arms():
        for p in plan.log_files(dataset, backbone, arm):
            if not p.exists():
                if allow_missing:
                    continue
                raise FileNotFoundError(f"training log {p} does not exist; it is written by "
                                        f"`weince pretrain` (make it with `snakemake {p}`)")
            for i, rec in enumerate(_read_log(p)):
                ep = int(rec.get("epoch", i + 1))
                for key in ("lambda_mean", "rho0"):
                    v = rec.get(key)
                    if isinstance(v, (int, float)) and math.isfinite(v):
                        curves.setdefault(arm, {}).setdefault(key, {}).setdefault(ep, []).append(
                            float(v))
    return curves


def _curves_figure(curves, out: Path, title: str) -> Path | None:
    if not curves:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ci, arm in enumerate(sorted(curves)):
        for ax, key in zip(axes, ("lambda_mean", "rho0")):
            series = curves[arm].get(key)
            if not series:
                continue
            eps = sorted(series)
            means = [sum(series[e]) / len(series[e]) for e in eps]
            ax.plot(eps, means, color=f"C{ci % 10}", ls=("-", "--", ":")[(ci // 10) % 3],
                    marker="o", ms=3, label=arm)
            if any(len(series[e]) > 1 for e in eps):
                ax.fill_between(eps, [min(series[e]) for e in eps], [max(series[e]) for e in eps],
                                color=f"C{ci % 10}", alpha=0.15, linewidth=0)
    axes[0].set_ylabel("mean lambda over anchors")
    axes[1].set_ylabel("rho0 (pivot of the cap gate)")
    for ax in axes:
        ax.set_xlabel("epoch")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7)
    fig.suptitle(title + " (line: mean over encoder seeds; band: min-max)", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def _scale_line(plan: Plan, dataset: str, backbone: str) -> str:
    pre = (plan.cfg.get("vision") or {}).get("pretrain") or {}
    return (f"profile `{plan.profile}`: {dataset} / {backbone}, "
            f"{pre.get('epochs', '?')} epoch(s), batch {pre.get('batch_size', '?')}, "
            f"main-arm tau {profile_tau(plan.cfg):g}, encoder seeds "
            f"{', '.join(map(str, plan.seeds))}")


def build_ablation_report(cfg: Mapping[str, Any], plan: Plan, *, allow_missing: bool = False
                          ) -> dict[str, Path]:
    """Write ``reports/<profile>/ablations.md``, ``ablations.json`` and, per (dataset,
    backbone), ``ablations/lambda_<dataset>_<backbone>.png`` (mean ``lambda`` and ``rho0``
    over training per arm).

    Numbers: per row, the encoder-level value of each seed's probe result (the mean over
    probe seeds of ``test_acc``; SPEC 6), then the mean and 95% t-interval across encoder
    seeds; differences to the group's reference use a Welch interval.

    Args:
        cfg: the workflow config (``profile``, ``results``, ``reports``, ``vision``).
        plan: :func:`ablation_plan` of that config.
        allow_missing: show rows whose files are missing as ``missing`` instead of raising
            ``FileNotFoundError``.

    Returns:
        ``{"md", "json", "figures"}`` paths (:func:`ablation_outputs`).
    """
    from weince.utils import write_json

    outs = ablation_outputs(cfg)
    md: list[str] = [f"# Ablations: what in WEINCE does the work ({plan.profile})", "",
                     "Generated by `weince.ablations.build_ablation_report` from the result "
                     "files; nothing here is typed by hand. Each table: linear-probe test "
                     "accuracy on frozen features, the mean over probe seeds within an "
                     "encoder, then the mean and 95% t-interval across encoder seeds (n); "
                     "the last column is the difference to the group's reference row with a "
                     "Welch 95% interval. The commentary under each table is computed from "
                     "these numbers and states no verdict.", ""]
    doc: dict[str, Any] = {"profile": plan.profile, "seeds": plan.seeds, "pairs": {}}
    prov, seen = Provenance(), set()
    if not plan.groups:
        md.append(f"No ablation group is configured for profile `{plan.profile}` "
                  f"(config/ablations.yaml).")
    for dataset, backbone in plan.pairs:
        key = f"{dataset}/{backbone}"
        md += [f"## {dataset} / {backbone}", "", f"Scale: {_scale_line(plan, dataset, backbone)}.",
               ""]
        doc["pairs"][key] = {}
        for g in plan.groups:
            test, val, missing = {}, {}, {}
            for r in g.rows:
                files = plan.result_files(dataset, backbone, r)
                vals, miss = _read_metric(files, "test_acc", prov, allow_missing, seen)
                test[r.name] = estimate(vals)
                missing[r.name] = miss
                try:
                    vv, _ = _read_metric(files, "val_acc", Provenance(), True)
                except ValueError:  # an older result without val_acc: no tau selection
                    vv = []
                val[r.name] = estimate(vv)
            comments = group_commentary(g, test, val)
            md += [f"### {g.title}", "", f"*Question.* {g.question}", "",
                   group_table(g, test, missing), "", *[f"- {c}" for c in comments], ""]
            doc["pairs"][key][g.name] = {
                "question": g.question, "reference": g.reference, "commentary": comments,
                "rows": [{"row": r.name, "arm": r.arm, "run_arm": canonical_arm(r.arm, plan.cfg),
                          "feature": r.feature, "setting": ARMS[r.arm].setting(),
                          "test_acc": _est_dict(test[r.name]), "val_acc": _est_dict(val[r.name]),
                          "missing": missing[r.name]} for r in g.rows]}
        curves = _training_curves(plan, dataset, backbone, allow_missing)
        fig = _curves_figure(curves, outs["figures"] / f"lambda_{dataset}_{backbone}.png",
                             f"{plan.profile}: {dataset} / {backbone}")
        if fig is not None:
            no_gate = [a for a in plan.run_arms() if a not in curves]
            rel = fig.relative_to(outs["md"].parent)
            md += ["### Gate over training", "",
                   f"![mean lambda and rho0 over training]({rel.as_posix()})", "",
                   f"Arms that log a gate: {', '.join(sorted(curves))}."
                   + (f" Not drawn (no gate logged): {', '.join(no_gate)}." if no_gate else ""),
                   ""]
            doc["pairs"][key]["figure"] = str(fig)
    info = prov.describe()
    md += ["## Provenance", "", f"Result files: {info['files']}; git commits: "
           f"{info['git_commit']}; config hashes: {info['config_hashes']}; dates: "
           f"{info['dates']}.", ""]
    outs["figures"].mkdir(parents=True, exist_ok=True)  # a Snakemake directory() output
    outs["md"].write_text("\n".join(md))
    write_json(outs["json"], doc, cfg={"groups": [g.name for g in plan.groups],
                                       "pairs": plan.pairs, "seeds": plan.seeds})
    return outs


def _est_dict(e: Estimate) -> dict[str, Any]:
    return {"mean": e.mean, "std": e.std, "n": e.n, "lo": e.lo, "hi": e.hi,
            "values": list(e.values)}


# ---------------------------------------------------------------- head-feature probe
def head_probe(features: str | Path, out: str | Path, linear: Mapping[str, Any] | None = None,
               seed: int | None = None) -> Path:
    """Linear probe on the projection-head features of ``features.pt`` (the ``features``
    ablation), written to ``out`` (``linear_head.json``) with provenance. ``linear``: the
    profile's ``vision.linear`` keyword arguments (its ``feature`` key is overridden)."""
    from weince.eval.linear import linear_probe
    from weince.utils import write_json

    kwargs = dict(linear or {})
    kwargs["feature"] = "head"
    res = linear_probe(features, **kwargs)
    return write_json(out, res, cfg=kwargs, seed=seed)


