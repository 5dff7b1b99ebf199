"""The training curves of a claim's rows, drawn on its page: how its encoders trained.

    from weince.report.curves import claim_curve_logs, curves_figure
    logs = claim_curve_logs(prof, claim)      # setting -> arm -> [(seed, train_log.jsonl)]
    curves_figure(logs, "curves_c3.png", "C3 ...", planned={"digits/smallcnn": 1})

The runs are those whose folders hold a file the claim reads
(:func:`weince.pipeline.targets.claim_inputs`), each with the ``train_log.jsonl`` its
training wrote (:mod:`weince.train.trainlog`). One row of panels per setting, arms
overlaid in one colour each, the line the mean over encoder seeds and the shaded band
their range:

- **loss** per epoch (pretraining) or per logged step (SimCSE), the training objective in
  nats per anchor;
- **lambda_mean**, the gate's mean over anchors, with the 10% and 90% quantiles over
  anchors (``lambda_q10``/``lambda_q90``, mean over seeds) as dotted lines;
- **beta_t**, the recipe's batch-level Weibull exponent, where an arm logs it;
- **dev Spearman** per evaluation (SimCSE, claim C7), STS-B dev Spearman x 100.

A run that stopped before its planned end (killed, diverged, or still running) ends in a
cross at its last logged point and is named in the legend, so it cannot pass for a
finished one. A log with a line that is not JSON (truncated or edited) stops the figure with
:class:`UnreadableLogError`, naming the file and the line and how to rebuild it, rather than
leaving that run's curve out.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from weince.pipeline.profile import Profile
from weince.pipeline.targets import claim_inputs
from weince.train.trainlog import read_jsonl
from weince.utils.plotting import pyplot
from weince.utils.rerun import snakemake_command

__all__ = ["claim_curve_logs", "claim_planned", "curves_figure", "claim_curves", "PANELS",
           "curves_section", "CURVES_HEADING", "CURVES_NOTE", "curves_name",
           "UnreadableLogError"]

Logs = dict[str, dict[str, list[tuple[int, Path]]]]

# panel key -> (y label with its unit, log key of its lower / upper quantile line)
PANELS: dict[str, tuple[str, tuple[str, str] | None]] = {
    "loss": ("training loss (nats per anchor)", None),
    "lambda_mean": ("lambda: mean over anchors (0-1)", ("lambda_q10", "lambda_q90")),
    "beta_t": ("beta_t, the recipe's Weibull exponent", None),
    "dev_spearman": ("STS-B dev Spearman (x100)", None),
}
_VISION = re.compile(r"/vision/(?P<d>[^/]+)/(?P<b>[^/]+)/(?P<arm>[^/]+)/seed(?P<seed>\d+)$")
_TEXT = re.compile(r"/text/(?P<m>[^/]+)/(?P<arm>[^/]+)/seed(?P<seed>\d+)$")


def claim_curve_logs(prof: Profile, claim: Mapping[str, Any]) -> Logs:
    """``setting -> arm -> [(seed, train_log.jsonl)]`` of the training runs ``claim`` reads
    (its inputs' run folders); settings are ``dataset/backbone`` or ``text/<model>``."""
    out: Logs = {}
    seen: set[str] = set()
    for f in claim_inputs(prof, claim):
        folder = Path(f).parent.as_posix()
        if folder in seen:
            continue
        seen.add(folder)
        m = _VISION.search(folder)
        if m is not None:
            key = f"{m['d']}/{m['b']}"
        else:
            m = _TEXT.search(folder)
            if m is None:
                continue
            key = f"text/{m['m']}"
        out.setdefault(key, {}).setdefault(m["arm"], []).append(
            (int(m["seed"]), Path(folder) / "train_log.jsonl"))
    return out


def claim_planned(prof: Profile, logs: Logs) -> dict[str, int | None]:
    """The planned last epoch (pretraining) or step (SimCSE: ``total_steps`` of a finished
    run's ``train.json``) per setting of ``logs``; None where no file says."""
    out: dict[str, int | None] = {}
    for key, arms in logs.items():
        if key.startswith("text/"):
            totals = [_total_steps(p.parent / "train.json") for runs in arms.values()
                      for _, p in runs]
            out[key] = max((t for t in totals if t), default=None)
        else:
            d = key.split("/")[0]
            out[key] = prof.vision.pretrain_for(d).epochs
    return out


def _total_steps(path: Path) -> int | None:
    try:
        return int(json.loads(path.read_text()).get("total_steps") or 0) or None
    except (OSError, ValueError):
        return None


# ----------------------------------------------------------------------------- reading
Series = dict[float, list[float]]      # x -> one value per seed


class UnreadableLogError(ValueError):
    """A training log with a line that is not JSON: the figure would lose that run's curve."""


def _records(path: Path) -> list[dict[str, Any]]:
    """The log's records; none for a run without a log (not trained yet: drawn as missing
    from the legend's seed count); an unreadable line stops the figure, naming the file and
    the line, instead of dropping the run's curve without a word."""
    try:
        return read_jsonl(path)
    except FileNotFoundError:
        return []
    except ValueError as err:
        raise UnreadableLogError(
            f"{err}: the training log is damaged, and the curves figure would lose this "
            f"run's curve. Restore the file (a bundle of the run holds it), or retrain the run "
            f"({snakemake_command('--forcerun', path)})") from None


End = tuple[int, float, "float | None", dict[str, tuple[float, float]]]


def _read(runs: Sequence[tuple[int, Path]], keys: Sequence[str]
          ) -> tuple[dict[str, Series], list[End]]:
    """key -> x -> values over seeds, and per seed: its last logged x, the first x whose
    loss was not finite (None: none; the log keeps a NaN as null) and, per key, its last
    finite point."""
    series: dict[str, Series] = defaultdict(lambda: defaultdict(list))
    ends = []
    for seed, path in runs:
        last_x, bad, at = 0.0, None, {}
        for i, rec in enumerate(_records(path)):
            x = float(rec.get("epoch", rec.get("step", i + 1)))
            last_x = max(last_x, x)
            if "loss" in rec and not isinstance(rec["loss"], (int, float)) and bad is None:
                bad = x
            for k in keys:
                v = rec.get(k)
                if isinstance(v, (int, float)) and math.isfinite(v):
                    series[k][x].append(float(v))
                    at[k] = (x, float(v))
        ends.append((seed, last_x, bad, dict(at)))
    return series, ends


# ----------------------------------------------------------------------------- drawing
def _keys(logs: Logs) -> list[str]:
    """The panels of the figure: those some run of ``logs`` logs, in :data:`PANELS` order."""
    present: set[str] = set()
    for arms in logs.values():
        for runs in arms.values():
            for _, p in runs:
                for rec in _records(p):
                    present |= {k for k in PANELS if isinstance(rec.get(k), (int, float))}
    return [k for k in PANELS if k in present]


def _band(ax, series: Series, color: str, label: str | None, ls: str = "-") -> None:
    xs = sorted(series)
    ax.plot(xs, [sum(series[x]) / len(series[x]) for x in xs], color=color, ls=ls,
            marker="o" if len(xs) < 30 else None, ms=3, lw=1.4, label=label)
    if any(len(series[x]) > 1 for x in xs):
        ax.fill_between(xs, [min(series[x]) for x in xs], [max(series[x]) for x in xs],
                        color=color, alpha=0.18, linewidth=0)


def _panel(ax, key: str, arms: Mapping[str, Sequence[tuple[int, Path]]],
           planned: int | None, legend: list[str]) -> None:
    lo_hi = PANELS[key][1]
    keys = [key, *(lo_hi or ())]
    for ci, arm in enumerate(sorted(arms)):
        color = f"C{ci % 10}"
        series, ends = _read(arms[arm], keys)
        if series.get(key):
            n = len(arms[arm])
            _band(ax, series[key], color, f"{arm} ({n} seed{'s' if n > 1 else ''})")
        if lo_hi:
            for q in lo_hi:
                if series.get(q):
                    xs = sorted(series[q])
                    ax.plot(xs, [sum(series[q][x]) / len(series[q][x]) for x in xs],
                            color=color, ls=":", lw=1.0)
        for seed, last_x, bad, at in ends:
            stopped = planned is not None and last_x < planned
            if (stopped or bad is not None) and key in at:
                ax.plot([at[key][0]], [at[key][1]], marker="x", color=color, ms=9, mew=2)
                note = (f"{arm} seed {seed}: loss not finite at {int(bad)}" if bad is not None
                        else f"{arm} seed {seed}: ends at {int(last_x)} of {planned}")
                if note not in legend:
                    legend.append(note)


def curves_figure(logs: Logs, out: str | os.PathLike, title: str,
                  planned: Mapping[str, int | None] | None = None,
                  max_settings: int = 8) -> Path | None:
    """The figure of the module docstring, as PNG (and PDF beside it); None when no run of
    ``logs`` has logged anything (nothing is drawn empty)."""
    settings = [s for s in sorted(logs) if _keys({s: logs[s]})][:max_settings]
    if not settings:
        return None
    rows = {s: _keys({s: logs[s]}) for s in settings}
    ncol = max(len(k) for k in rows.values())
    plt = pyplot()
    fig, axes = plt.subplots(len(settings), ncol, squeeze=False,
                             figsize=(3.6 * ncol + 0.6, 2.9 * len(settings) + 0.9))
    notes: list[str] = []
    for row, setting in zip(axes, settings):
        text = setting.startswith("text/")
        for ax in row[len(rows[setting]):]:
            ax.set_visible(False)
        for ax, key in zip(row, rows[setting]):
            _panel(ax, key, logs[setting], (planned or {}).get(setting), notes)
            ax.set_xlabel("optimiser step" if text else "epoch")
            ax.set_ylabel(PANELS[key][0], fontsize=8)
            ax.set_title(setting.removeprefix("text/"), fontsize=8)
            ax.grid(True, alpha=0.3)
            ax.xaxis.get_major_locator().set_params(integer=True)
            if ax.has_data() and ax.dataLim.width == 0:    # one epoch or step: its tick
                ax.set_xticks([ax.dataLim.x0])
            if ax.has_data():
                ax.legend(fontsize=6)
    more = f" (first {len(settings)} of {len(logs)} settings)" if len(logs) > len(settings) \
        else ""
    sub = ("line: mean over encoder seeds; shaded: seed range; dotted: lambda's 10% and "
           "90% quantiles over anchors; x: a run that ended early")
    if notes:
        sub += "\nended early: " + "; ".join(notes[:6]) + (" ..." if len(notes) > 6 else "")
    fig.suptitle(f"{title}{more}\n{sub}", fontsize=8)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    fig.savefig(out.with_suffix(".pdf"))
    plt.close(fig)
    return out


def claim_curves(prof: Profile, claim: Mapping[str, Any], folder: str | os.PathLike
                 ) -> Path | None:
    """``curves_<id>.png`` of ``claim``'s training runs in ``folder`` (the claim table
    job's figure folder), or None when its rows have no training log (a stale figure is
    removed)."""
    cid = str(claim["id"])
    out = Path(folder) / curves_name(cid)
    out.unlink(missing_ok=True)
    logs = claim_curve_logs(prof, claim)
    if not logs:
        return None
    return curves_figure(logs, out, f"{cid}: training curves of its rows (profile {prof.name})",
                         claim_planned(prof, logs))


CURVES_HEADING = "### Training curves"
CURVES_NOTE = ("*Training curves of these rows (each run's `train_log.jsonl`): loss and the "
               "gate's mean lambda per epoch (SimCSE: per logged step, and the dev Spearman "
               "per evaluation), arms overlaid; line: mean over encoder seeds, band: their "
               "range; dotted: lambda's 10% and 90% quantiles over anchors; a cross: a run "
               "that ended before its planned end.*")


def curves_name(cid: str) -> str:
    """The file name of a claim's curves figure, in its table job's folder and in the
    report's ``figures/``."""
    return f"curves_{cid.lower()}.png"


def curves_section(prof: Profile, claim: Mapping[str, Any]) -> str:
    """The section of a claim's Markdown table page that shows its training curves
    (``figures/curves_<id>.png``, which the summary copies from the claim table job), ""
    for a claim whose rows come from no training run. It depends on the claim and the
    profile only, so a bundle's rebuild of the page writes the same text."""
    if not claim_curve_logs(prof, claim):
        return ""
    cid = str(claim["id"])
    return (f"\n{CURVES_HEADING}\n\n![training curves {cid}](figures/{curves_name(cid)})\n\n"
            f"{CURVES_NOTE}\n")
