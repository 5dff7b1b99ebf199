"""Overhead timing of WEINCE against InfoNCE (claim C8), measured side by side.

    weince timing --out results/timing.json                      # CPU defaults
    weince timing --device cuda --backbone resnet18 --step-batch 256 --compile

Two measurements, both in one process, with the losses interleaved round-robin inside every
repetition so that machine noise and clock drift hit every loss alike:

* **loss alone**: forward + backward of the loss on ``(N, d)`` embeddings at each ``2N``;
* **whole step**: backbone + head forward, loss, backward, optimiser step on a batch of two
  augmented-size views (the model and data are shared by all losses).

Each repetition gives a paired ratio ``t_loss / t_infonce``; the report is the median ratio
with a bootstrap 95% interval over repetitions. On CUDA the times come from CUDA events.
The trainable parameters of every loss module are counted (the paper: zero).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from weince.losses import build_loss

__all__ = ["TimingConfig", "time_loss_alone", "time_whole_step", "run_timing", "paired_summary",
           "add_arguments", "main"]

@dataclass
class TimingConfig:
    """Options of ``weince timing`` (and of the workflow's timing rule)."""

    losses: list[str] = field(default_factory=lambda: ["infonce", "weince", "weince_recipe"])
    sizes: list[int] = field(default_factory=lambda: [256, 512, 1024, 4096])  # 2N, loss alone
    dim: int = 128                      # embedding width d
    loss_reps: int = 30                 # repetitions (each runs every loss once)
    warmup: int = 5
    backbone: str = "resnet18"          # whole step; "" skips it
    image_size: int = 32
    channels: int = 3
    step_batch: int = 64                # images per view in the whole step (2 x step_batch)
    step_reps: int = 10
    device: str = "auto"
    amp: bool = True                    # bf16 autocast on CUDA (ignored on CPU)
    channels_last: bool = True
    compile: bool = False               # torch.compile the loss modules
    tau: float = 0.5
    seed: int = 0
    n_boot: int = 2000

class _Timer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __enter__(self):
        if self.cuda:
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
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

def paired_summary(times: dict[str, list[float]], base: str, n_boot: int = 2000, seed: int = 0) -> dict:
    """Median time per loss and the median paired ratio to ``base`` with a bootstrap 95% CI."""
    rng = np.random.default_rng(seed)
    ref = np.asarray(times[base])
    out = {}
    for name, ts in times.items():
        ts = np.asarray(ts)
        ratios = ts / ref
        boots = np.median(rng.choice(ratios, size=(n_boot, ratios.size), replace=True), axis=1)
        out[name] = {
            "median_ms": 1e3 * float(np.median(ts)),
            "ratio": float(np.median(ratios)),
            "ratio_ci": [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))],
            "overhead_pct": 100.0 * (float(np.median(ratios)) - 1.0),
            "n": int(ts.size),
        }
    return out

def _resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA device is visible; use --device cpu")
    return torch.device(device)

def _loss_modules(cfg: TimingConfig, device: torch.device):
    mods = {name: build_loss(name, tau=cfg.tau).to(device).train() for name in cfg.losses}
    params = {name: sum(p.numel() for p in m.parameters() if p.requires_grad) for name, m in mods.items()}
    if cfg.compile:
        mods = {name: torch.compile(m) for name, m in mods.items()}
    return mods, params

def time_loss_alone(cfg: TimingConfig, device: torch.device, progress=None) -> list[dict]:
    """Loss forward+backward at each ``2N`` of ``cfg.sizes``; one row per size."""
    g = torch.Generator().manual_seed(cfg.seed)
    mods, _ = _loss_modules(cfg, device)
    rows = []
    for two_n in cfg.sizes:
        n = two_n // 2
        z1 = torch.randn(n, cfg.dim, generator=g).to(device)
        z2 = z1 + 0.5 * torch.randn(n, cfg.dim, generator=g).to(device)
        times = {name: [] for name in mods}
        for rep in range(cfg.warmup + cfg.loss_reps):
            for name, fn in mods.items():
                a, b = z1.detach().requires_grad_(True), z2.detach().requires_grad_(True)
                with _Timer(device) as t:
                    fn(a, b).backward()
                if rep >= cfg.warmup:
                    times[name].append(t.seconds)
            if progress:
                progress.update(1)
        rows.append({"2N": two_n, "d": cfg.dim, **{"losses": paired_summary(times, cfg.losses[0], cfg.n_boot, cfg.seed)}})
    return rows

def time_whole_step(cfg: TimingConfig, device: torch.device, progress=None) -> dict:
    """Backbone forward+backward and an Adam step per loss on a shared model and batch."""
    from weince.models import build_simclr_model

    torch.manual_seed(cfg.seed)
    model = build_simclr_model(cfg.backbone, cfg.image_size, cfg.channels).to(device)
    fmt = torch.channels_last if (cfg.channels_last and device.type == "cuda") else torch.contiguous_format
    model = model.to(memory_format=fmt)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, weight_decay=1e-6)
    x1 = torch.randn(cfg.step_batch, cfg.channels, cfg.image_size, cfg.image_size, device=device)
    x2 = torch.randn_like(x1)
    x = torch.cat([x1, x2]).contiguous(memory_format=fmt)
    mods, _ = _loss_modules(cfg, device)
    amp = cfg.amp and device.type == "cuda"
    times = {name: [] for name in mods}

    def step(fn):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            _, z = model(x)
            loss = fn(z[: cfg.step_batch].float(), z[cfg.step_batch:].float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for rep in range(max(1, cfg.warmup // 2) + cfg.step_reps):
        for name, fn in mods.items():
            with _Timer(device) as t:
                step(fn)
            if rep >= max(1, cfg.warmup // 2):
                times[name].append(t.seconds)
        if progress:
            progress.update(1)
    return {"backbone": cfg.backbone, "image_size": cfg.image_size, "batch": f"2 x {cfg.step_batch}",
            "amp_bf16": amp, "losses": paired_summary(times, cfg.losses[0], cfg.n_boot, cfg.seed)}

def run_timing(cfg: TimingConfig) -> dict:
    """Both measurements and the parameter counts, as the JSON-able result of the C8 table."""
    from tqdm.auto import tqdm

    device = _resolve_device(cfg.device)
    if cfg.losses[0] != "infonce":
        raise ValueError("the first loss of `losses` is the baseline of the ratios and must be 'infonce'")
    _, params = _loss_modules(TimingConfig(**{**asdict(cfg), "compile": False}), device)
    total = len(cfg.sizes) * (cfg.warmup + cfg.loss_reps)
    if cfg.backbone:
        total += max(1, cfg.warmup // 2) + cfg.step_reps
    with tqdm(total=total, desc="timing", unit="rep") as bar:
        loss_rows = time_loss_alone(cfg, device, bar)
        step = time_whole_step(cfg, device, bar) if cfg.backbone else None
    return {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "trainable_parameters": params,
        "loss_alone": loss_rows,
        "whole_step": step,
    }

def _print(result: dict) -> None:
    from tabulate import tabulate

    rows = []
    for r in result["loss_alone"]:
        for name, s in r["losses"].items():
            rows.append(["loss alone", f"2N={r['2N']}", name, s["median_ms"], s["ratio"],
                         f"[{s['ratio_ci'][0]:.3f}, {s['ratio_ci'][1]:.3f}]"])
    if result["whole_step"]:
        st = result["whole_step"]
        for name, s in st["losses"].items():
            rows.append(["whole step", f"{st['backbone']} {st['batch']}", name, s["median_ms"], s["ratio"],
                         f"[{s['ratio_ci'][0]:.3f}, {s['ratio_ci'][1]:.3f}]"])
    print(f"device {result['device']} ({result['device_name']}), threads {result['threads']}; "
          f"trainable parameters per loss: {result['trainable_parameters']}")
    print(tabulate(rows, headers=["what", "size", "loss", "median ms", "ratio", "95% CI"], floatfmt=".3f"))

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="YAML with TimingConfig fields")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one TimingConfig field (repeatable), e.g. --set sizes=[512]")
    p.add_argument("--out", default=None, help="write the result JSON here")

def main(args: argparse.Namespace) -> int:
    from weince.train.config import load_config
    from weince.utils import write_json

    cfg = load_config(TimingConfig, args.config, args.overrides)
    result = run_timing(cfg)
    _print(result)
    if args.out:
        write_json(args.out, result, cfg=asdict(cfg), seed=cfg.seed)
    return 0

if __name__ == "__main__":  # pragma: no cover
    ns = argparse.ArgumentParser()
    add_arguments(ns)
    raise SystemExit(main(ns.parse_args()))

