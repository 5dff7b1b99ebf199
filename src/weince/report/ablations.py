"""``reports/<profile>/ablations.md``: one table per ablation group, with commentary made
from the numbers (the groups and the plan: :mod:`weince.pipeline.ablations`).

Per row: the encoder-level value of each seed's probe result, then the mean and 95%
t-interval across encoder seeds (n); the difference to the group's reference row with a
Welch interval; a figure of mean ``lambda`` and ``rho0`` over training. No verdict.

    from weince.report.ablations import build_ablation_report
    build_ablation_report(prof)            # prof: the resolved profile
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from weince.pipeline.arms import ARMS, TAUS, tau_arm_name
from weince.pipeline.profile import Profile
from weince.pipeline.ablations import (ARMS_GROUP, Group, Plan, ablation_outputs,
                                      ablation_plan)
from weince.report.figures import GATE_KEYS, training_curves, training_curves_figure
from weince.utils.results import Provenance, encoder_value, get_key, load_result
from weince.utils.diskspace import write_text
from weince.utils.summary import Estimate, diff_estimate, estimate
from weince.report.tables import fmt_estimate
from weince.utils import write_json
from weince.utils.rerun import snakemake_command

__all__ = ["group_commentary", "group_table", "build_ablation_report"]


# ---------------------------------------------------------------- numbers -> text
def _f(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def _interval(e: Estimate) -> str:
    return f"[{_f(e.lo)}, {_f(e.hi)}]" if e.has_interval else "(no interval, n < 2)"


def _mean(e: Estimate | None) -> float | None:
    return None if e is None else e.mean


def _overlap(a: Estimate, b: Estimate) -> bool:
    """Whether two intervals overlap (both must have one)."""
    if a.lo is None or a.hi is None or b.lo is None or b.hi is None:
        raise ValueError("_overlap compares two intervals; an estimate has none (n < 2)")
    return a.lo <= b.hi and b.lo <= a.hi


def _diff_text(name: str, d: Estimate) -> str:
    if d.mean is None:
        return f"{name}: not available (an arm has no result)"
    if d.lo is None or d.hi is None:   # no interval
        return f"{name} = {_f(d.mean, True)} (no interval: an arm has n < 2)"
    where = ("includes 0" if d.lo <= 0 <= d.hi else
             "lies above 0" if d.lo > 0 else "lies below 0")
    return (f"{name} = {_f(d.mean, True)} [{_f(d.lo, True)}, {_f(d.hi, True)}] "
            f"(Welch 95% interval; it {where})")


def _ranking_text(group: Group, est: Mapping[str, Estimate], metric: str) -> list[str]:
    means = {r.name: m for r in group.rows if (m := _mean(est.get(r.name))) is not None}
    have = list(means)
    missing = [r.name for r in group.rows if r.name not in have]
    lines = []
    if missing:
        lines.append(f"No result for {', '.join(missing)}.")
    if len(have) < 2:
        lines.append("Fewer than two rows have results, so nothing is compared.")
        return lines
    top = max(means[n] for n in have)
    best = [n for n in have if means[n] == top]
    b = est[best[0]]
    if len(best) > 1:
        lines.append(f"Highest mean {metric}: {', '.join(best)} (tied at {_f(top)}).")
    else:
        lines.append(f"Highest mean {metric}: {best[0]}, {_f(b.mean)} {_interval(b)} "
                     f"over n={b.n} encoder seed(s).")
    others = [n for n in have if n != best[0]]
    ranked = sorted(others, key=lambda n: -means[n])
    lines.append("Next by mean: " + "; ".join(
        f"{n} {_f(means[n])} ({_f(means[n] - top, True)})" for n in ranked) + ".")
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
    ``features``: head minus backbone per arm; ``gate``, ``beta`` and ``arms``: each row minus
    the reference).

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
            rows = [tau_arm_name(loss, t) for t in TAUS]
            vs = [(n, m) for n in rows
                  if (m := _mean(val.get(n))) is not None and _mean(get(n)) is not None]
            if not vs:
                lines.append(f"{loss}: no validation accuracy, so no temperature is chosen.")
                continue
            n_best = max(vs, key=lambda x: x[1])[0]
            chosen[loss] = n_best
            best_test = test[n_best]   # present: vs keeps rows with a test result
            lines.append(f"{loss}: tau chosen on validation accuracy = {ARMS[n_best].tau:g} "
                         f"(val {_f(val[n_best].mean)}); its test accuracy "
                         f"{_f(best_test.mean)} {_interval(best_test)}.")
        if len(chosen) == 2:
            lines.append("At the validation-chosen temperatures, " + _diff_text(
                f"{chosen['weince']} - {chosen['infonce']}",
                d(chosen["weince"], chosen["infonce"])) + ".")
    elif group.name == "features":
        for arm in ("infonce", "weince"):
            lines.append(f"{arm}: " + _diff_text(
                "head - backbone", d(f"{arm} [head]", arm)) + ".")
    elif group.name == "baselines":
        base = {n: m for n in ("hcl", "dcl", "dclw") if (m := _mean(get(n))) is not None}
        if base:
            top = max(base, key=base.__getitem__)
            lines.append(f"Against the hard-negative baseline with the highest mean ({top}): " +
                         _diff_text(f"weince - {top}", d("weince", top)) + ".")
    elif group.name in ("gate", "beta", ARMS_GROUP):
        for r in group.rows:
            if r.name != group.reference and (r.arm != "infonce" or group.name == ARMS_GROUP):
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
                 seen: set[Path] | None = None) -> tuple[list[float], int]:
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
                f"ablation result {p} does not exist; make it with {snakemake_command(p)} (the "
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


def _scale_line(plan: Plan, dataset: str, backbone: str) -> str:
    pre = plan.prof.vision.pretrain
    return (f"profile `{plan.profile}`: {dataset} / {backbone}, "
            f"{pre.epochs} epoch(s), batch {pre.batch_size}, "
            f"main-arm tau {plan.prof.vision.tau:g}, encoder seeds "
            f"{', '.join(map(str, plan.seeds))}")


def build_ablation_report(prof: Profile, plan: Plan | None = None, *,
                          allow_missing: bool = False) -> dict[str, Path]:
    """Write ``reports/<profile>/ablations.md``, ``ablations.json`` and, per (dataset,
    backbone), ``ablations/lambda_<dataset>_<backbone>.png`` (mean ``lambda`` and ``rho0``
    over training per arm).

    Numbers: per row, the encoder-level value of each seed's probe result (the mean over
    probe seeds of ``test_acc``), then the mean and 95% t-interval across encoder
    seeds; differences to the group's reference use a Welch interval.

    Args:
        prof: the profile.
        plan: default :func:`~weince.pipeline.ablations.ablation_plan` of the profile.
        allow_missing: show rows whose files are missing as ``missing`` instead of raising
            ``FileNotFoundError``.

    Returns:
        ``{"md", "json", "figures"}`` paths (:func:`ablation_outputs`).
    """
    plan = ablation_plan(prof) if plan is None else plan
    outs = ablation_outputs(prof)
    md: list[str] = [f"# Ablations: what in WEINCE does the work ({plan.profile})", "",
                     "Generated by `weince.report.ablations.build_ablation_report` from the result "
                     "files; nothing here is typed by hand. Each table: linear-probe test "
                     "accuracy on frozen features, the mean over probe seeds within an "
                     "encoder, then the mean and 95% t-interval across encoder seeds (n); "
                     "the last column is the difference to the group's reference row with a "
                     "Welch 95% interval. The commentary under each table is computed from "
                     "these numbers and states no verdict.", ""]
    doc: dict[str, Any] = {"profile": plan.profile, "seeds": list(plan.seeds), "pairs": {}}
    prov, seen = Provenance(), set[Path]()
    if not plan.groups:
        md.append(f"No ablation group is configured for profile `{plan.profile}` "
                  f"(its `ablations` block).")
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
                "rows": [{"row": r.name, "arm": r.arm, "run_arm": plan.canonical(r.arm),
                          "feature": r.feature, "setting": ARMS[r.arm].setting(),
                          "test_acc": _est_dict(test[r.name]), "val_acc": _est_dict(val[r.name]),
                          "missing": missing[r.name]} for r in g.rows]}
        logs = {arm: plan.log_files(dataset, backbone, arm) for arm in plan.run_arms()}
        curves = training_curves(logs, GATE_KEYS, allow_missing=allow_missing)
        fig = training_curves_figure(curves, outs["figures"] / f"lambda_{dataset}_{backbone}.png",
                                     f"{plan.profile}: {dataset} / {backbone}", GATE_KEYS)
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
    write_text(outs["md"], "\n".join(md))
    write_json(outs["json"], doc, cfg={"groups": [g.name for g in plan.groups],
                                       "pairs": [list(p) for p in plan.pairs],
                                       "seeds": list(plan.seeds)})
    return outs


def _est_dict(e: Estimate) -> dict[str, Any]:
    return {"mean": e.mean, "std": e.std, "n": e.n, "lo": e.lo, "hi": e.hi,
            "values": list(e.values)}
