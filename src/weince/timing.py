"""Overhead timing of WEINCE against InfoNCE (claim C8), measured side by side.

    from weince.timing import TimingConfig, run_timing
    result = run_timing(TimingConfig(device="cpu"))

Command line (:mod:`weince.cli.timing`)::

    weince timing --out results/timing.json                      # CPU defaults
    weince timing --set device=cuda --set step_batch=256 --set compile=both --out timing.json

Two measurements, both in one process, with the losses interleaved round-robin inside every
repetition so that machine noise and clock drift hit every loss alike:

* **loss alone**: forward + backward of the loss on ``(N, d)`` embeddings at each ``2N``;
* **whole step**: backbone + head forward, loss, backward, optimiser step on a batch of two
  augmented-size views (the model and data are shared by all losses).

Each repetition gives a paired ratio ``t_loss / t_infonce``; the report is the median ratio
with a bootstrap 95% interval over repetitions (the order of the losses alternates between
repetitions). That interval covers the noise *within* one run only: on a shared machine the
overhead of identical runs moved from -17% to +108%. So the whole step is timed in
``runs`` independent runs one after the other (a fresh model, optimiser and batch each, the
losses interleaved inside every run); its headline ``overhead_pct`` is the mean of the
runs' median overheads, and ``overhead_ci_runs`` the 95% t-interval across the runs: the
run-to-run variation of the machine that ran it (the per-step interval stays as
``overhead_ci``). On CUDA the times come from CUDA events. ``compile: both`` times eager and
``torch.compile``d losses side by side (ratios within a mode, plus compiled / eager). The
whole step also gets an *attributed* overhead: the loss's extra time, timed alone on the
step's embeddings, as a share of the step. The trainable parameters of every loss module are
counted (the paper: zero). The raw times are kept in the JSON.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from scipy import stats
from tqdm.auto import tqdm

from weince.losses import build_loss
from weince.models import build_simclr_model
from weince.train.config import MODES, TimingConfig
from weince.train.optim import Adam
from weince.utils.device import resolve_device

__all__ = ["TimingConfig", "MODES", "time_loss_alone", "time_whole_step", "run_timing",
           "paired_summary", "across_runs", "loss_label"]

class _Timer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __enter__(self):
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.end.record()
            torch.cuda.synchronize()
            self.seconds = self.start.elapsed_time(self.end) / 1e3
        else:
            self.seconds = time.perf_counter() - self.t0


def paired_summary(times: dict[str, list[float]], base: str, n_boot: int = 2000,
                   seed: int = 0) -> dict:
    """Median time per loss and the median paired ratio to ``base`` with a bootstrap 95% CI
    (also as an overhead in percent); the raw times (ms) are kept for re-analysis."""
    rng = np.random.default_rng(seed)
    ref = np.asarray(times[base])
    out = {}
    for name, listed in times.items():
        ts = np.asarray(listed)
        ratios = ts / ref
        boots = np.median(rng.choice(ratios, size=(n_boot, ratios.size), replace=True), axis=1)
        lo, hi = float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))
        med = float(np.median(ratios))
        out[name] = {
            "median_ms": 1e3 * float(np.median(ts)),
            "ratio": med,
            "ratio_ci": [lo, hi],
            "overhead_pct": 100.0 * (med - 1.0),
            "overhead_ci": [100.0 * (lo - 1.0), 100.0 * (hi - 1.0)],
            "n": int(ts.size),
            "times_ms": [round(1e3 * float(t), 4) for t in ts],
        }
    return out


def across_runs(run_times: dict[str, list[list[float]]], base: str, level: float = 0.95
                ) -> dict:
    """Per loss, its overhead over ``base`` in each run (``run_times[loss][run]``: that run's
    step times, paired by position with the base's) as the run's median paired ratio, and
    across the runs their geometric mean with a t-interval of the log ratios (a ratio of
    times: the interval never reaches -100%), both as overheads in percent:
    ``{"runs", "run_overheads_pct", "overhead_pct", "overhead_ci_runs", "noise_pct"}``,
    ``noise_pct`` being the interval's half-width in points (no interval, ``None``, with
    one run)."""
    out = {}
    for name, runs in run_times.items():
        logs = np.log([float(np.median(np.asarray(ts) / np.asarray(ref)))
                       for ts, ref in zip(runs, run_times[base])])
        mean = float(logs.mean())
        ci, noise = None, None
        if logs.size >= 2:
            half = float(stats.t.ppf(0.5 + level / 2, logs.size - 1) * logs.std(ddof=1)
                         / np.sqrt(logs.size))
            ci = [100.0 * (np.exp(mean - half) - 1.0), 100.0 * (np.exp(mean + half) - 1.0)]
            noise = (ci[1] - ci[0]) / 2.0
        out[name] = {"runs": int(logs.size),
                     "run_overheads_pct": [100.0 * (float(np.exp(x)) - 1.0) for x in logs],
                     "overhead_pct": 100.0 * (float(np.exp(mean)) - 1.0),
                     "overhead_ci_runs": ci, "noise_pct": noise}
    return out


def _with_runs(cfg: TimingConfig, block: dict, run_times: dict[str, list[list[float]]]
               ) -> None:
    """Put the across-runs overhead (:func:`across_runs`) into each loss's summary of
    ``block`` (every mode), keeping the pooled per-step figures as ``pooled_overhead_pct``
    and ``overhead_ci``."""
    per_mode = block.get("modes") or {block["mode"]: block["losses"]}
    for mode, losses in per_mode.items():
        runs = across_runs({n: run_times[loss_label(n, mode)] for n in cfg.losses},
                           cfg.losses[0])
        for n, summary in losses.items():
            summary["pooled_overhead_pct"] = summary["overhead_pct"]
            summary.update(runs[n])
            summary["ratio"] = 1.0 + summary["overhead_pct"] / 100.0


def loss_label(name: str, mode: str) -> str:
    """How a loss timed in ``mode`` is named in the result: ``weince``, ``weince[compiled]``."""
    return name if mode == "eager" else f"{name}[{mode}]"


def _loss_modules(cfg: TimingConfig, device: torch.device):
    """``({label: callable}, {loss: trainable parameters})``; one label per loss and mode."""
    eager = {name: build_loss(name, tau=cfg.tau).to(device).train() for name in cfg.losses}
    params = {name: sum(p.numel() for p in m.parameters() if p.requires_grad)
              for name, m in eager.items()}
    mods = {}
    for mode in cfg.modes:
        for name, m in eager.items():
            mods[loss_label(name, mode)] = m if mode == "eager" else torch.compile(m)
    return mods, params


def _order(labels: list[str], rep: int) -> list[str]:
    """Forward on even repetitions, backward on odd ones: a loss's place in the round does
    not favour it, and a linear drift within a pair of rounds cancels."""
    return labels if rep % 2 == 0 else labels[::-1]


def _summaries(cfg: TimingConfig, times: dict[str, list[float]]) -> dict:
    """``mode`` (headline: compiled when measured), ``losses`` (its ratios to InfoNCE of the
    same mode), and with ``compile: both`` also ``modes`` and ``compiled_vs_eager``."""
    per_mode = {mode: paired_summary({n: times[loss_label(n, mode)] for n in cfg.losses},
                                     cfg.losses[0], cfg.n_boot, cfg.seed)
                for mode in cfg.modes}
    head = cfg.modes[-1]
    out = {"mode": head, "losses": per_mode[head]}
    if len(cfg.modes) > 1:
        out["modes"] = per_mode
        speed = {}
        for n in cfg.losses:  # t_compiled / t_eager, paired per repetition
            s = paired_summary({"eager": times[n], "compiled": times[loss_label(n, "compiled")]},
                               "eager", cfg.n_boot, cfg.seed)["compiled"]
            speed[n] = {k: s[k] for k in ("ratio", "ratio_ci")}
        out["compiled_vs_eager"] = speed
    return out


def time_loss_alone(cfg: TimingConfig, device: torch.device, progress=None) -> list[dict]:
    """Loss forward+backward at each ``2N`` of ``cfg.sizes``; one row per size."""
    g = torch.Generator().manual_seed(cfg.seed)
    mods, _ = _loss_modules(cfg, device)
    labels = list(mods)
    rows = []
    for two_n in cfg.sizes:
        n = two_n // 2
        z1 = torch.randn(n, cfg.dim, generator=g).to(device)
        z2 = z1 + 0.5 * torch.randn(n, cfg.dim, generator=g).to(device)
        times: dict[str, list[float]] = {name: [] for name in mods}
        for rep in range(cfg.warmup + cfg.loss_reps):
            for name in _order(labels, rep):
                a, b = z1.detach().requires_grad_(True), z2.detach().requires_grad_(True)
                with _Timer(device) as t:
                    mods[name](a, b).backward()
                if rep >= cfg.warmup:
                    times[name].append(t.seconds)
            if progress:
                progress.update(1)
        rows.append({"2N": two_n, "d": cfg.dim, **_summaries(cfg, times)})
    return rows


def time_whole_step(cfg: TimingConfig, device: torch.device, progress=None) -> dict:
    """Backbone forward+backward and an Adam step per loss on a shared model and batch, in
    ``cfg.runs`` independent runs (:func:`across_runs`: the headline overhead and its
    interval across them; the per-step figures of all runs pooled stay beside them).

    Besides the direct paired ratios, every repetition also times each loss alone
    (forward+backward) on that step's embeddings, detached: ``attributed`` gives the
    extra loss time over InfoNCE as a share of InfoNCE's step time, a low-noise estimate of
    the same overhead (the backbone's work does not depend on the loss)."""
    mods, _ = _loss_modules(cfg, device)
    times: dict[str, list[float]] = {name: [] for name in mods}
    loss_times: dict[str, list[float]] = {name: [] for name in mods}
    run_times: dict[str, list[list[float]]] = {name: [] for name in mods}
    for run in range(cfg.runs):   # one after the other: the interval spans the machine's drift
        got = _time_one_run(cfg, device, mods, run, progress)
        for name in mods:
            times[name] += got[0][name]
            loss_times[name] += got[1][name]
            run_times[name].append(got[0][name])
    amp = cfg.amp and device.type == "cuda"
    out = {"backbone": cfg.backbone, "image_size": cfg.image_size, "batch": f"2 x {cfg.step_batch}",
           "amp_bf16": amp, "loss_precision": "float32", "runs": cfg.runs,
           **_summaries(cfg, times)}
    _with_runs(cfg, out, run_times)
    base = loss_label(cfg.losses[0], out["mode"])
    step_ms = 1e3 * float(np.median(times[base]))
    loss_ms = {n: 1e3 * float(np.median(loss_times[loss_label(n, out["mode"])]))
               for n in cfg.losses}
    out["attributed"] = {
        n: {"loss_ms": loss_ms[n], "extra_ms": loss_ms[n] - loss_ms[cfg.losses[0]],
            "overhead_pct": 100.0 * (loss_ms[n] - loss_ms[cfg.losses[0]]) / step_ms}
        for n in cfg.losses}
    return out


def _time_one_run(cfg: TimingConfig, device: torch.device, mods: dict, run: int, progress
                  ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """One run of the whole step: a fresh model, optimiser and batch (seeded by the run),
    every loss interleaved in each repetition; (step times, loss-alone times) per label."""
    torch.manual_seed(cfg.seed + run)
    model = build_simclr_model(cfg.backbone, cfg.image_size, cfg.channels).to(device)
    fmt = (torch.channels_last if (cfg.channels_last and device.type == "cuda")
           else torch.contiguous_format)
    model = model.to(memory_format=fmt)
    opt = Adam(model.parameters(), lr=3e-4, weight_decay=1e-6)
    x1 = torch.randn(cfg.step_batch, cfg.channels, cfg.image_size, cfg.image_size, device=device)
    x2 = torch.randn_like(x1)
    x = torch.cat([x1, x2]).contiguous(memory_format=fmt)
    labels = list(mods)
    amp = cfg.amp and device.type == "cuda"
    times: dict[str, list[float]] = {name: [] for name in mods}
    loss_times: dict[str, list[float]] = {name: [] for name in mods}

    def step(fn):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            _, z = model(x)
        # the loss in float32 outside autocast, as the training step runs it: inside
        # autocast its similarity matmul would run in bf16, another step than the paper's
        loss = fn(z[: cfg.step_batch].float(), z[cfg.step_batch:].float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return z.detach()

    warm = max(1, cfg.warmup // 2)
    for rep in range(warm + cfg.step_reps):
        for name in _order(labels, rep):
            with _Timer(device) as t:
                z_last = step(mods[name])
            if rep >= warm:
                times[name].append(t.seconds)
        z_last = z_last.float()
        for name in _order(labels, rep):
            a = z_last[: cfg.step_batch].clone().requires_grad_(True)
            b = z_last[cfg.step_batch:].clone().requires_grad_(True)
            with _Timer(device) as t:
                mods[name](a, b).backward()
            if rep >= warm:
                loss_times[name].append(t.seconds)
        if progress:
            progress.update(1)
    return times, loss_times


def run_timing(cfg: TimingConfig) -> dict:
    """Both measurements and the parameter counts, as the JSON-able result of the C8 table."""
    device = resolve_device(cfg.device)
    _, params = _loss_modules(cfg, device)  # counted on the eager modules (compiling is lazy)
    total = len(cfg.sizes) * (cfg.warmup + cfg.loss_reps)
    if cfg.backbone:
        total += cfg.runs * (max(1, cfg.warmup // 2) + cfg.step_reps)
    with tqdm(total=total, desc="timing", unit="rep") as bar:
        loss_rows = time_loss_alone(cfg, device, bar)
        step = time_whole_step(cfg, device, bar) if cfg.backbone else None
    return {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "compile": cfg.compile,
        "trainable_parameters": params,
        "loss_alone": loss_rows,
        "whole_step": step,
    }
