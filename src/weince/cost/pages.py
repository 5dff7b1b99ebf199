"""The cost tables as Markdown: per claim and setting, per GPU type and for a mixed set,
the calibration against published measurements, the devices (docs/cost.md and
docs/cost_claims.md are made from them by ``weince plan`` and ``weince cost``).

    from weince.cost.pages import claims_markdown, totals_markdown, calibration_markdown
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from weince.cost.estimate import (CHEAPER_OPTIONS, CostSettings, assumptions, claim_rows,
                                  estimate, gpu_set, hours_range, job_runtime, with_overlay)
from weince.cost.throughput import (amp_speedups, calibration_rows, device_names,
                                    load_devices, rates, thin_evidence)
from weince.pipeline.profile import Profile

__all__ = ["claims_markdown", "totals_rows", "totals_markdown", "calibration_markdown",
           "devices_markdown", "REST_GPU", "REST_CLAIM", "rest_line"]

REST_GPU = "h100-sxm"    # the GPU the front pages price the rest of the paper on
REST_CLAIM = "C3"        # the headline claim priced on its own (Table 2's CIFAR-100 ResNet-18)

AMP = next(o for o in CHEAPER_OPTIONS if o["key"] == "vision.pretrain.amp: true")


def _cell(x: str) -> str:
    return str(x).replace("|", "\\|")


def claims_markdown(prof: Profile, gpu: str | Iterable[str] | None = None,
                    config_name: str = "") -> str:
    """The per-claim and per-setting GPU-hours of a profile on ``gpu`` (one or a mixed
    set), its assumptions, the totals per GPU type, and the devices."""
    est = estimate(prof, gpu)
    L = [f"GPU-hours of the training runs of {config_name or 'the profile'}, **an estimate for "
         f"{est.label}**, as a range (fast end - slow end):", "",
         "| claim | what | training runs | GPU-hours | from |", "| --- | --- | ---: | ---: | --- |"]
    for r in claim_rows(est, prof):
        L.append(f"| {r['id']} | {_cell(r['title'])} | {r['runs']} | "
                 f"{hours_range(r['low'], r['high'])} | {r['source']} |")
    L += ["", "A run serves several claims (C3-C6 and C10 share encoders), so the rows do not "
          "add up to the total; claims with no training run (timing, checks, norms) cost "
          "minutes.", "", "Per setting (one run):", "",
          "| setting | steps | TFLOP per step | precision | s per step | GPU-hours per run | "
          "runs | SLURM runtime (min) x segments |",
          "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    counts: dict[str, int] = {}
    for run in est.runs:
        counts[run.setting.key] = counts.get(run.setting.key, 0) + 1
    slurm = with_overlay(prof, {"cost": {"gpu": est.gpus}})
    requests = CostSettings.of(prof).enabled
    for key, s in est.settings.items():
        fast, slow = s.step_s
        step = f"{fast:.3g}" if fast == slow else f"{fast:.3g}-{slow:.3g}"
        if s.source != "estimated":
            step += f" ({s.source})"
        req = job_runtime(slurm, key) if requests else None
        runtime = f"{req['runtime']} x {req['segments']}" if req else "-"
        L.append(f"| {key} | {s.steps:,} | {s.flops_per_step / 1e12:.2f} | "
                 f"{s.precision.upper()} | {step} | {hours_range(*s.hours)} | {counts[key]} | "
                 f"{runtime} |")
    L += ["", "Assumptions:", ""] + [f"- {a}" for a in assumptions(est)]
    L += ["", "Every training run of the profile per GPU type (`weince plan --totals`):", ""]
    L += totals_markdown(prof, est.gpus if len(est.gpus) > 1 else None).splitlines()
    L += ["", devices_markdown().rstrip("\n")]
    return "\n".join(L) + "\n"


def totals_rows(prof: Profile, mixed: Iterable[str] | None = None
                ) -> list[dict[str, Any]]:
    """Every training run's GPU-hours on each listed GPU type, as the profile runs and with
    ``vision.pretrain.amp: true``; then the mixed set ``mixed`` (any run on any of them)."""
    amp = with_overlay(prof, AMP["overlay"])
    sets = [[g] for g in device_names()]
    if mixed:
        sets.append(gpu_set(prof, list(mixed)))
    rows = []
    for gs in sets:
        lo, hi = estimate(prof, gs).total()
        alo, ahi = estimate(amp, gs).total()
        rows.append({"gpu": ",".join(gs), "mixed": len(gs) > 1, "low": lo, "high": hi,
                     "amp_low": alo, "amp_high": ahi})
    return rows


def totals_markdown(prof: Profile, mixed: Iterable[str] | None = None) -> str:
    """The totals of :func:`totals_rows` as a Markdown table."""
    L = ["| GPU | GPU-hours, as the profile runs | with `vision.pretrain.amp: true` |",
         "| --- | ---: | ---: |"]
    for r in totals_rows(prof, mixed):
        name = f"mixed: {r['gpu']}" if r["mixed"] else r["gpu"]
        L.append(f"| {name} | {hours_range(r['low'], r['high'])} | "
                 f"{hours_range(r['amp_low'], r['amp_high'])} |")
    L += ["", "A mixed set's range runs from its fastest GPU's fast end to its slowest GPU's "
          "slow end: a run may land on any of them (docs/cluster.md, \"Mixed GPU types\")."]
    return "\n".join(L) + "\n"


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def calibration_markdown() -> str:
    """Each published measurement, what it measured, and the model's range for it."""
    data = load_devices()
    band = data["band"]
    L = ["| measurement | used for | GPU | what was measured | measured | predicted range | "
         "inside | source |", "| --- | --- | --- | --- | ---: | ---: | --- | --- |"]
    for r in calibration_rows():
        src = next(m["source"] for m in data["measurements"] if m["id"] == r["id"])
        L.append(f"| {r['id']} | {r['use']} | {r['gpu']} | {_cell(r['what'])} | "
                 f"{_fmt(r['measured'])} {r['unit']} | {_fmt(r['low'])}-{_fmt(r['high'])} | "
                 f"{'yes' if r['inside'] else '**no**'} | {src} |")
    L += ["", f"Predicted range: the calibrated rate of the GPU, family and precision x "
          f"[{band['low']:g}, {band['high']:g}], divided by the model's counted FLOPs per "
          f"example. A calibration row sits inside by construction; the check rows were not "
          f"fitted. The 4-GPU row's figure is per GPU.", "", "Sources:", ""]
    for key, src in data["sources"].items():
        what = src["what"][:1].upper() + src["what"][1:]
        L.append(f"- `{key}`: {src['title']}, {src['url']}. {what}.")
    L += ["", "Measured AMP speed-up over TF32 (the same source, the same GPU):", "",
          "| GPU | family | AMP / TF32 |", "| --- | --- | ---: |"]
    for sp in amp_speedups():
        L.append(f"| {sp['gpu']} | {sp['family']} | {sp['speedup']:.2f}x |")
    L += ["", "Where the evidence is thin:", ""] + [f"- {t}" for t in thin_evidence()]
    return "\n".join(L) + "\n"


def devices_markdown() -> str:
    """The devices with their peaks and the calibrated rate of every cell."""
    L = ["Devices (`--gpu`; dense peaks in TFLOP/s; calibrated training rate in TFLOP/s and "
         "as a fraction of the peak, before the band):", "",
         "| --gpu | device | FP32 | TF32 | BF16 | cnn FP32/TF32/BF16 | vit FP32/TF32/BF16 | "
         "bert FP32/TF32/BF16 | source |",
         "| --- | --- | ---: | ---: | ---: | --- | --- | --- | --- |"]
    for name in device_names():
        d = load_devices()["devices"][name]
        cells = []
        for fam in ("cnn", "vit", "bert"):
            parts = []
            for p in ("fp32", "tf32", "bf16"):
                c = rates().get((name, fam, p))
                parts.append("-" if c is None else
                             f"{c['rate'] / 1e12:.0f} ({c['rate'] / 1e12 / float(d[p]):.0%})")
            cells.append(" / ".join(parts))
        L.append(f"| {name} | {d['name']} | {d['fp32']:g} | {d['tf32']:g} | {d['bf16']:g} | "
                 f"{' | '.join(cells)} | {_cell(d['source'])}"
                 + (f"; efficiency of {d['stand_in']}: {_cell(d['why_stand_in'])}"
                    if d.get("stand_in") else "") + " |")
    return "\n".join(L) + "\n"


def rest_line(paper: Profile, gpu: str = REST_GPU, claim: str = REST_CLAIM) -> str:
    """One line: what reproducing the paper's training claims takes, from the planner's
    estimate of the paper profile ``paper`` on ``gpu``: the headline claim alone, then the
    whole paper, each with its runs, its GPU-hours (a range) and the command that plans it."""
    rows = {r["id"]: r for r in claim_rows(estimate(paper, gpu), paper)}
    one, total = rows[claim], rows["total"]
    name = load_devices()["devices"][gpu]["name"]
    return (f"**Reproducing the rest** takes GPUs, by the planner's estimate on an {name}: "
            f"{claim} alone (its own setting) {one['runs']:,} training runs, "
            f"{hours_range(one['low'], one['high'])} GPU-hours (`weince plan --configfile "
            f"config/paper.yaml --target reports/paper/table_{claim.lower()}.md --gpu {gpu}`); "
            f"the whole paper {total['runs']:,} runs, "
            f"{hours_range(total['low'], total['high'])} GPU-hours (`weince plan --totals`).")
