"""The GPU acceptance checks of issue 17 in one run; writes one Markdown report.

    bash benchmarks/gpu_acceptance.sh                 # one GPU, under 8 minutes; report in $OUT
    bash benchmarks/gpu_acceptance.sh --cpu report.md # the same code paths at tiny sizes on CPU

No network and no data sets: CIFAR-shaped random images are written in the real on-disk
format (the ``cifar-100-python`` pickles) into a temporary data root and read back by
:func:`weince.data.vision.load_vision`. Sections of the report:

1. ``pytest -m cuda`` (CUDA paths equal CPU paths; training steps of every arm under
   ``torch.cuda.set_sync_debug_mode("error")``).
2. Pretraining throughput: per backbone (ResNet-18, ResNet-50, ViT-S) and arm, float32 and
   bf16 autocast, the eager step and the compiled step (``CompiledStep``: views, forward,
   loss, gradients and Adam as one graph), img/s over timed steps after warm-up (compile
   time excluded, reported apart) and peak memory. Compiling every combination does not
   fit in 8 minutes: by default the compiled step runs one arm per backbone in bf16
   (``--compiled-arms``, ``--full``); runs left out by the time budget are listed as such.
3. One end-to-end ``pretrain`` epoch from the synthetic pickles (the real data path).
4. C8 at the paper's setting (ResNet-18, 2 x 256 views) via ``weince timing``.
5. A bert-base-sized SimCSE step (``BertConfig()``, random weights, random token ids).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ARMS = ("infonce", "weince", "weince_recipe", "infonce_topm")
SECTIONS = ("## Environment", "## 1. CUDA tests", "## 2. Pretraining throughput",
            "## 2b. One graph per step",
            "## 3. End-to-end pretrain epoch", "## 4. C8: loss overhead in the paper's step",
            "## 5. SimCSE step (bert-base shape)", "## Summary")


def write_cifar100(root: Path, n_train: int, n_test: int = 100, seed: int = 0) -> Path:
    """Random CIFAR-100-shaped images in the ``cifar-100-python`` pickle layout."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", n_train), ("test", n_test)):
        entry = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                 "fine_labels": rng.integers(0, 100, n).tolist(),
                 "coarse_labels": rng.integers(0, 20, n).tolist(),
                 "filenames": [f"img{i}.png" for i in range(n)], "batch_label": name}
        with open(folder / name, "wb") as f:
            pickle.dump(entry, f)
    with open(folder / "meta", "wb") as f:
        pickle.dump({"fine_label_names": [f"c{i}" for i in range(100)],
                     "coarse_label_names": [f"s{i}" for i in range(20)]}, f)
    return root


class Timer:
    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def __enter__(self):
        self.sync()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.sync()
        self.s = time.perf_counter() - self.t0


def peak_mib(device) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None


def throughput(backbone, arm, precision, mode, images, device, P) -> dict:
    """img/s of timed steps after warm-up; ``mode``: "eager" or a torch.compile mode."""
    from weince.data.augment import build_augment
    from weince.losses import build_loss
    from weince.models import build_simclr_model
    from weince.train.simclr import CompiledStep, eager_step

    torch.manual_seed(0)
    cuda = device.type == "cuda"
    use_amp = precision == "bf16" and cuda
    model = build_simclr_model(backbone, P["image_size"], 3, out_dim=64).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    loss_fn = build_loss(arm, tau=0.5).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, weight_decay=1e-6)
    aug = build_augment("cifar100", image_size=P["image_size"])
    gen = torch.Generator(device=device).manual_seed(1)
    bs = P["batch"]
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    if mode == "eager":
        def step(batch):
            return eager_step(model, loss_fn, opt, aug, batch, gen, use_amp=use_amp,
                              channels_last=cuda)
    else:
        step = CompiledStep(model, loss_fn, opt, aug, use_amp=use_amp, channels_last=cuda,
                            mode=mode)
    idx = torch.arange(bs, device=images.device)
    with Timer(device) as t_warm:
        for i in range(P["warmup"]):
            out = step(images[(idx + i * bs) % images.shape[0]])
    with Timer(device) as t:
        for i in range(P["steps"]):
            out = step(images[(idx + (i + P["warmup"]) * bs) % images.shape[0]])
    loss = out[0] if isinstance(out, tuple) else out
    return {"backbone": backbone, "arm": arm, "precision": precision if cuda else "fp32",
            "mode": mode, "img_s": P["steps"] * bs / t.s, "step_ms": 1e3 * t.s / P["steps"],
            "warmup_s": t_warm.s, "peak_mib": peak_mib(device), "loss": float(loss),
            "finite": bool(torch.isfinite(loss))}


def graph_breaks(backbone, arm, images, device, P) -> dict:
    """``torch._dynamo.explain`` of the whole step function: graphs and graph breaks."""
    from weince.data.augment import build_augment
    from weince.losses import build_loss
    from weince.models import build_simclr_model
    from weince.train.simclr import CompiledStep

    torch.manual_seed(0)
    model = build_simclr_model(backbone, P["image_size"], 3, out_dim=64).to(device)
    loss_fn = build_loss(arm, tau=0.5).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, weight_decay=1e-6)
    aug = build_augment("cifar100", image_size=P["image_size"])
    step = CompiledStep(model, loss_fn, opt, aug, use_amp=device.type == "cuda", mode=None)
    batch = images[:P["batch"]]
    u = aug.draw(2 * P["batch"], torch.Generator(device=device).manual_seed(0), device)
    torch._dynamo.reset()
    with torch._dynamo.config.patch(trace_autograd_ops=True):
        out = torch._dynamo.explain(step._step)(batch, u, step.lr)
    torch._dynamo.reset()
    reasons = "; ".join(str(r.reason).splitlines()[0][:100] for r in out.break_reasons)
    return {"backbone": backbone, "arm": arm, "graphs": out.graph_count,
            "graph_breaks": out.graph_break_count, "ops": out.op_count, "reasons": reasons or None}


def simcse_step(arm, device, P) -> dict:
    """Steps of a SimCSE encoder from a random ``BertConfig`` on random token ids."""
    from transformers import BertConfig, BertModel

    from weince.losses import build_loss

    torch.manual_seed(0)
    cfg = BertConfig(**P["bert"])
    enc = BertModel(cfg).to(device).train()     # dropout on: the two passes differ
    loss_fn = build_loss(arm, tau=0.05, layout="pairs").to(device).train()
    opt = torch.optim.AdamW(enc.parameters(), lr=3e-5)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, cfg.vocab_size, (P["sent_batch"], P["sent_len"]), generator=g).to(device)
    att = torch.ones_like(ids)
    use_amp = device.type == "cuda"
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def step():
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_amp):
            z1 = enc(input_ids=ids, attention_mask=att).last_hidden_state[:, 0]
            z2 = enc(input_ids=ids, attention_mask=att).last_hidden_state[:, 0]
        loss = loss_fn(z1.float(), z2.float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    for _ in range(P["warmup"]):
        step()
    with Timer(device) as t:
        for _ in range(P["steps"]):
            loss = step()
    return {"arm": arm, "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
            "sent_s": P["steps"] * P["sent_batch"] / t.s, "step_ms": 1e3 * t.s / P["steps"],
            "peak_mib": peak_mib(device), "loss": float(loss), "finite": bool(torch.isfinite(loss))}


def table(rows, keys) -> list[str]:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3f}"
        return "-" if v is None else str(v)
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(fmt(r.get(k)) for k in keys) + " |" for r in rows]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report", nargs="?", default=None, help="report path (default: $OUT/gpu_acceptance.md)")
    p.add_argument("--cpu", action="store_true", default=bool(os.environ.get("WEINCE_ACCEPTANCE_CPU")),
                   help="tiny sizes on CPU (also: WEINCE_ACCEPTANCE_CPU=1)")
    p.add_argument("--compiled-arms", nargs="+", default=["weince"])
    p.add_argument("--compile-mode", default=None,
                   help="torch.compile mode of the compiled step (GPU default: reduce-overhead, "
                        "i.e. CUDA graphs; max-autotune compiles for minutes)")
    p.add_argument("--full", action="store_true", help="compiled step for every arm and precision")
    p.add_argument("--budget-s", type=float, default=None, help="skip compiled runs after this")
    args = p.parse_args(argv)

    out_dir = Path(os.environ.get("OUT", "gpu_acceptance_out"))
    report = Path(args.report) if args.report else out_dir / "gpu_acceptance.md"
    report.parent.mkdir(parents=True, exist_ok=True)
    cpu = args.cpu
    if not cpu and not torch.cuda.is_available():
        print("no CUDA device visible: run with --cpu for the tiny CPU mode", file=sys.stderr)
        return 2
    device = torch.device("cpu" if cpu else "cuda")
    if cpu:
        # every arm on the small CNN, one arm on each real backbone, one compiled step
        P = dict(eager={"smallcnn": ARMS, "resnet18": ["weince_recipe"], "resnet50": ["weince"],
                        "vit_s": ["weince"]},
                 image_size=8, batch=8, warmup=1, steps=1,
                 n_train=64, precisions=["fp32"], compile_mode=args.compile_mode or "default",
                 compiled_backbones=["smallcnn"], budget_s=args.budget_s or 1e9,
                 explain_arms=["weince_recipe"], e2e_compiled_backbone="smallcnn",
                 bert=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64), sent_batch=8, sent_len=12,
                 timing=["--set", "device=cpu", "--set", "sizes=[32]", "--set", "loss_reps=3",
                         "--set", "warmup=1", "--set", "backbone=resnet18", "--set",
                         "image_size=8", "--set", "step_batch=4", "--set", "step_reps=2",
                         "--set", "n_boot=50"])
    else:
        P = dict(eager={b: ARMS for b in ("resnet18", "resnet50", "vit_s")}, image_size=32,
                 batch=256, warmup=3,
                 steps=10, n_train=4096, precisions=["fp32", "bf16"],
                 compile_mode=args.compile_mode or "reduce-overhead",
                 compiled_backbones=["resnet18", "resnet50", "vit_s"], budget_s=args.budget_s or 330,
                 explain_arms=["weince_recipe"], e2e_compiled_backbone="resnet18",
                 bert={}, sent_batch=64, sent_len=32,
                 timing=["--set", "device=cuda", "--set", "losses=[infonce,weince,weince_recipe]",
                         "--set", "sizes=[512,4096]", "--set", "loss_reps=30", "--set", "warmup=5",
                         "--set", "backbone=resnet18", "--set", "step_batch=256",
                         "--set", "step_reps=30", "--set", "compile=eager"])
    t_start = time.perf_counter()
    lines = ["# GPU acceptance report (issue 17)", "",
             f"Mode: {'CPU (tiny sizes: checks that the script runs, not a measurement)' if cpu else 'GPU'}. "
             f"Command: `{' '.join(['bash benchmarks/gpu_acceptance.sh'] + (argv if argv is not None else sys.argv[1:]))}`", ""]
    ok = True

    # ---- environment
    lines += ["## Environment", "", f"- torch {torch.__version__}, Python {platform.python_version()}",
              f"- device: {torch.cuda.get_device_name(0) if not cpu else platform.processor() or 'cpu'}",
              f"- threads: {torch.get_num_threads()}", ""]

    # ---- 1. pytest -m cuda
    repo = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider",
           "tests/losses", "tests/train/test_step_compile.py"]
    res = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    tail = (res.stdout + res.stderr).strip().splitlines()[-12:]
    test_ok = res.returncode in (0, 5)
    ok &= test_ok
    lines += ["## 1. CUDA tests", "", f"`{' '.join(cmd[2:])}` -> exit {res.returncode}"
              + (" (skipped on CPU: no device)" if cpu else ""), "", "```", *tail, "```", ""]

    with tempfile.TemporaryDirectory() as tmp:
        from weince.data.vision import load_vision

        root = write_cifar100(Path(tmp) / "data", P["n_train"])
        images = load_vision("cifar100", root, "train").images.to(device)

        # ---- 2. throughput
        rows, skipped = [], []
        runs = [(b, a, pr, "eager") for b, arms in P["eager"].items() for a in arms
                for pr in P["precisions"]]
        comp_arms = ARMS if args.full else args.compiled_arms
        comp_prec = P["precisions"] if args.full else P["precisions"][-1:]
        runs += [(b, a, pr, P["compile_mode"]) for b in P["compiled_backbones"]
                 for a in comp_arms for pr in comp_prec]
        for b, a, pr, mode in runs:
            if mode != "eager" and time.perf_counter() - t_start > P["budget_s"]:
                skipped.append(f"{b}/{a}/{pr}/{mode}")
                continue
            try:
                r = throughput(b, a, pr, mode, images, device, P)
                ok &= r["finite"]
            except Exception as err:  # report, carry on
                r = {"backbone": b, "arm": a, "precision": pr, "mode": mode,
                     "error": f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"}
                traceback.print_exc()
                ok = False
            rows.append(r)
            print(json.dumps(r), flush=True)
        base = {(r["backbone"], r["precision"], r["mode"]): r["img_s"] for r in rows
                if r.get("arm") == "infonce" and "img_s" in r}
        for r in rows:
            key = (r["backbone"], r["precision"], r["mode"])
            if "img_s" in r and key in base:
                r["step_vs_infonce"] = base[key] / r["img_s"]
        lines += ["## 2. Pretraining throughput", "",
                  f"Batch {P['batch']} images (2 x {P['batch']} views), {P['image_size']}px, "
                  f"{P['warmup']} warm-up + {P['steps']} timed steps; step_vs_infonce = step time "
                  f"over InfoNCE's in the same backbone/precision/mode.", ""]
        lines += table(rows, ["backbone", "arm", "precision", "mode", "img_s", "step_ms",
                              "step_vs_infonce", "warmup_s", "peak_mib", "loss", "error"])
        if skipped:
            lines += ["", f"Compiled runs left out by the time budget ({P['budget_s']:.0f} s): "
                      + ", ".join(skipped)]
        lines.append("")

        # ---- 2b. graph breaks of the whole step, every backbone
        grows = []
        for b in ("smallcnn", "resnet18", "resnet50", "vit_s"):
            for a in P["explain_arms"]:
                try:
                    r = graph_breaks(b, a, images, device, P)
                    ok &= r["graph_breaks"] == 0 and r["graphs"] == 1
                except Exception as err:
                    traceback.print_exc()
                    r = {"backbone": b, "arm": a, "reasons": f"{type(err).__name__}: {str(err)[:160]}"}
                    ok = False
                grows.append(r)
                print(json.dumps(r), flush=True)
        lines += ["## 2b. One graph per step", "",
                  "`torch._dynamo.explain` of the whole step (views, forward, loss, gradients, "
                  "Adam) per backbone: one graph and no break is what `torch.compile(fullgraph=True)` needs.", ""]
        lines += table(grows, ["backbone", "arm", "graphs", "graph_breaks", "ops", "reasons"])
        lines.append("")

        # ---- 3. end-to-end pretrain
        from weince.train.simclr import pretrain
        e2e = dict(dataset="cifar100", data_root=str(root), backbone="resnet18",
                   loss="weince_recipe", epochs=1, batch_size=P["batch"],
                   max_train_images=P["batch"] * 2, image_size=P["image_size"],
                   device=str(device), progress=False)
        e2e_lines = []
        for name, extra in (("eager", {}), ("compiled step", {"compile_step": P["compile_mode"],
                                                              "backbone": P["e2e_compiled_backbone"]})):
            cfg = {**e2e, **extra}
            try:
                summ = pretrain(cfg, Path(tmp) / f"run-{len(e2e_lines)}")
                e2e_lines.append(
                    f"- {name}: `pretrain` {cfg['backbone']} / {cfg['loss']}"
                    f"{', compile_step ' + cfg['compile_step'] if 'compile_step' in cfg else ''}, "
                    f"2 steps from the synthetic pickles: final loss {summ['final']['loss']:.4f}, "
                    f"beta_t {summ['final'].get('beta_t', float('nan')):.3f}, "
                    f"{summ['img_s_mean']:.0f} img/s (compilation included)")
            except Exception as err:
                traceback.print_exc()
                e2e_lines.append(f"- {name}: FAILED: {type(err).__name__}: {err}")
                ok = False
        e2e_line = "\n".join(e2e_lines)
        lines += ["## 3. End-to-end pretrain epoch", "", e2e_line, ""]

    # ---- 4. C8 via weince timing
    tjson = (report.parent / "timing.json")
    cmd = [sys.executable, "-m", "weince.cli", "timing", *P["timing"], "--out", str(tjson)]
    res = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    ok &= res.returncode == 0
    lines += ["## 4. C8: loss overhead in the paper's step", "",
              f"`weince timing {' '.join(P['timing'])}` -> exit {res.returncode}", "", "```",
              *(res.stdout.strip().splitlines()[-25:] or res.stderr.strip().splitlines()[-10:]), "```", ""]

    # ---- 5. SimCSE
    srows = []
    for arm in ARMS:
        try:
            r = simcse_step(arm, device, P)
            ok &= r["finite"]
        except Exception as err:
            traceback.print_exc()
            r = {"arm": arm, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"}
            ok = False
        srows.append(r)
    lines += ["## 5. SimCSE step (bert-base shape)", "",
              f"Random-weight `BertModel` ({'tiny config' if cpu else 'BertConfig(): 12 layers, 768 wide'}), "
              f"random token ids, batch {P['sent_batch']} x {P['sent_len']} tokens, two dropout passes, "
              f"pairs layout, AdamW{'' if cpu else ', bf16 autocast'}.", ""]
    lines += table(srows, ["arm", "layers", "hidden", "sent_s", "step_ms", "peak_mib", "loss", "error"])
    lines.append("")

    lines += ["## Summary", "", f"{'PASS' if ok else 'FAIL'}: every section ran"
              f"{'' if ok else ' (see the errors above)'}; total {time.perf_counter() - t_start:.0f} s.", ""]
    report.write_text("\n".join(lines))
    print(f"report: {report}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
