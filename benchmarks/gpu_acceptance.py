"""The GPU acceptance run: one script, five sections, a report that
survives anything. How to run it, on the GPU machine or here: ``benchmarks/gpu_acceptance.sh``.

Sections, in order (each in its own process, with its own timeout):

1. ``rehearsal``: the paper profile's rehearsal on CUDA: ``weince synthetic-data
   --root DIR`` then ``snakemake --cores N --configfile config/paper.yaml
   config/rehearsal.yaml --config data_root=DIR``; its cost forecast
   (``reports/rehearsal/forecast.md``) is copied into the report. Skipped, saying so, while
   ``config/rehearsal.yaml`` is not in the tree. CPU mode: the dry run (``-n``) only.
2. ``cuda_tests``: ``pytest -m cuda tests`` (every test marked ``cuda``).
3. ``throughput``: img/s and peak memory per backbone x arm, eager and compiled
   (``CompiledStep``), with the CUDA-graph skips of every compiled run counted.
4. ``equality``: the compiled step against the eager step from the same weights (loss,
   weights and BatchNorm buffers after two steps), and the graph count of the whole step.
5. ``c8``: claim C8 at the paper's setting (``weince.timing``: ResNet-18, 2 x 256 views, the
   paper profile's float32 pretraining step, eager and compiled side by side).

The Markdown report and a JSON twin (same name, ``.json``) are rewritten atomically before
the first section and after every section, and mark the section in progress as ``running``:
a run killed at any point (a hang, an out-of-memory kill, the machine's time limit) leaves a
report with every section it finished, and the rows of the section it was in stay in
``.<report name>.<section>.json`` beside it (each section rewrites that file after every row). Every section gets a timeout, a share of what is left
of ``--budget`` (a section's unused time goes to the later ones); a section that overruns is
stopped (its process group is killed) and reported as ``timeout`` with the rows it had
written. SIGTERM/SIGINT stop the current section and write the report as ``interrupted``.

Compiled runs call ``torch._dynamo.reset()`` before each new step function: each
``CompiledStep`` is one more graph of the same ``_step`` code, and with ``fullgraph=True``
the ninth such graph in one process fails (``FailOnRecompileLimitHit``) without a reset.
``--recompile-limit 1`` (the CPU test uses it) makes any missing reset fail at once.
``--compile-backend aot_eager`` (the CPU test uses it too) compiles the same single graph
without Inductor's code generation; the default, and the GPU run, is Inductor.

Oldest torch: 2.11 (the compiled step traces ``torch.autograd.grad`` with Dynamo's
``trace_autograd_ops``, new in 2.11); with an older torch the compiled rows say so and the
eager sections run. Nothing here uses an API newer than torch 2.11.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARMS = ("infonce", "weince", "weince_recipe", "infonce_topm")
SECTIONS = (("rehearsal", "1. Rehearsal of the paper profile"),
            ("cuda_tests", "2. CUDA tests"),
            ("throughput", "3. Pretraining throughput and peak memory"),
            ("equality", "4. Compiled step versus eager step"),
            ("c8", "5. C8 at the paper's setting"))
TITLES = dict(SECTIONS)
# share of the remaining budget per section (renormalised over the sections still to run)
SHARES = {"rehearsal": 0.30, "cuda_tests": 0.15, "throughput": 0.30, "equality": 0.10,
          "c8": 0.15}
OLDEST_TORCH = (2, 11)
PINNED_TORCH = "2.14.1"


# ----------------------------------------------------------------------------- settings
def settings(cpu: bool, args) -> dict:
    """Sizes of every section: the GPU run (8 minutes on one H200) or tiny CPU sizes (a
    check that every code path runs, not a measurement)."""
    if cpu:
        return dict(
            device="cpu", image_size=8, batch=8, warmup=1, steps=1,
            eager={"smallcnn": list(ARMS), "resnet18": ["weince_recipe"], "vit_s": ["weince"]},
            precisions=["fp32"], compiled_backbones=["smallcnn"],
            compiled_arms=args.compiled_arms or ["infonce", "weince"],
            compiled_precisions=["fp32"], compile_mode=args.compile_mode or "default",
            simcse=dict(bert=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64), batch=8, length=12, arms=["weince"]),
            equality=[("smallcnn", "weince_recipe")], equality_batch=8, equality_size=8,
            cuda_tests=["tests/data/test_augment.py", "tests/losses/test_weince.py"],
            rehearsal_dry_run=True,
            timing=dict(device="cpu", losses=["infonce", "weince"], sizes=[8], loss_reps=2,
                        warmup=1, backbone="smallcnn", image_size=8, channels=3,
                        step_batch=4, step_reps=2, compile="eager", amp=False, n_boot=50),
            compile_backend=args.compile_backend, budget=args.budget or 900)
    arms = args.compiled_arms or list(ARMS)
    return dict(
        device="cuda", image_size=32, batch=256, warmup=3, steps=10,
        eager={b: list(ARMS) for b in ("resnet18", "resnet50", "vit_s")},
        precisions=["fp32", "bf16"], compiled_backbones=["resnet18", "resnet50", "vit_s"],
        compiled_arms=list(ARMS) if args.full else arms,
        compiled_precisions=["fp32", "bf16"] if args.full else ["fp32"],
        compile_mode=args.compile_mode or "reduce-overhead",
        simcse=dict(bert={}, batch=64, length=32, arms=["infonce", "weince"]),
        equality=[("resnet18", "weince_recipe"), ("vit_s", "weince")], equality_batch=64,
        equality_size=32, cuda_tests=["tests"], rehearsal_dry_run=False,
        timing=dict(device="cuda", losses=["infonce", "weince", "weince_recipe"],
                    sizes=[512, 4096], loss_reps=30, warmup=5, backbone="resnet18",
                    image_size=32, channels=3, step_batch=256, step_reps=30, compile="both",
                    amp=False),
        compile_backend=args.compile_backend, budget=args.budget or 480)


# ----------------------------------------------------------------------------- files
def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"
    return "-" if v is None else str(v).replace("|", "/")


def table(rows: list[dict], keys: list[str]) -> list[str]:
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    return out + ["| " + " | ".join(_fmt(r.get(k)) for k in keys) + " |" for r in rows]


class Section:
    """What a section process reports: ``emit()`` rewrites its result file after every row,
    so that a section stopped by its timeout still hands over what it measured."""

    def __init__(self, out: Path, deadline: float):
        self.out, self.deadline = out, deadline
        self.rows: list[dict] = []
        self.md: list[str] = []
        self.ok = True
        self.skipped: str | None = None
        self.extra: dict = {}

    def left(self) -> float:
        return self.deadline - time.time()

    def emit(self) -> None:
        write_atomic(self.out, json.dumps({"ok": self.ok, "skipped": self.skipped,
                                           "rows": self.rows, "md": self.md, **self.extra},
                                          default=str))


def _run(cmd: list[str], timeout: float, cwd: Path = REPO) -> tuple[int, str]:
    """A command in its own process group; killed with its children at ``timeout``."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=max(timeout, 1))
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, _ = proc.communicate()
        return 124, (out or "") + f"\n[stopped after {timeout:.0f} s]"


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# ----------------------------------------------------------------------------- sections
def section_rehearsal(S: Section, P: dict, args) -> None:
    overlay = REPO / "config" / "rehearsal.yaml"
    if not overlay.exists():
        S.skipped = ("config/rehearsal.yaml is not in this tree (the rehearsal overlay of "
                     "the paper profile); nothing to rehearse")
        return
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        rc, out = _run([py, "-m", "weince.cli", "synthetic-data", "--root", str(data)],
                       S.left() / 4)
        S.md += [f"`weince synthetic-data --root DIR` -> exit {rc}", ""]
        if rc != 0:
            S.ok = False
            S.md += ["```", *out.strip().splitlines()[-15:], "```"]
            return
        cmd = [py, "-m", "snakemake", "--cores", str(os.cpu_count() or 1), "--configfile",
               "config/paper.yaml", "config/rehearsal.yaml", "--config", f"data_root={data}"]
        if P["rehearsal_dry_run"]:
            cmd.append("-n")
        rc, out = _run(cmd, S.left() - 5)
    S.ok = rc == 0
    S.md += [f"`snakemake {' '.join(cmd[3:])}` -> exit {rc}"
             + (" (CPU mode: the dry run, nothing trained)" if P["rehearsal_dry_run"] else ""),
             "", "```", *out.strip().splitlines()[-12:], "```", ""]
    forecast = REPO / "reports" / "rehearsal" / "forecast.md"
    if forecast.exists() and not P["rehearsal_dry_run"]:
        S.md += ["Forecast (`reports/rehearsal/forecast.md`):", "",
                 *forecast.read_text().splitlines()[:60]]
    elif not P["rehearsal_dry_run"]:
        S.ok = False
        S.md.append("no `reports/rehearsal/forecast.md` was written")


def section_cuda_tests(S: Section, P: dict, args) -> None:
    import torch

    # `-o addopts=`: one process, without the suite's xdist options (pytest-xdist may not
    # be installed where this runs; the cuda tests share one device anyway)
    cmd = [sys.executable, "-m", "pytest", "-m", "cuda", "-o", "addopts=", "--strict-markers",
           "-q", "-rs", "-p", "no:cacheprovider", *P["cuda_tests"]]
    rc, out = _run(cmd, S.left() - 5)
    lines = out.strip().splitlines()
    cuda = torch.cuda.is_available()
    # no CUDA: every cuda test skips (exit 0) or none is selected (5)
    S.ok = rc == 0 if cuda else rc in (0, 5)
    S.extra["exit"] = rc
    S.md += [f"`pytest {' '.join(cmd[3:])}` -> exit {rc}"
             + ("" if cuda else " (no CUDA device: the tests skip; this checks the selection)"),
             "", "```", *lines[-15:], "```"]


def _images(n: int, size: int, device):
    import torch

    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 256, (n, 3, size, size), generator=g, dtype=torch.uint8).to(device)


def _compile_supported() -> str | None:
    import torch

    if not hasattr(torch._dynamo.config, "trace_autograd_ops"):
        return (f"the compiled step needs torch >= {'.'.join(map(str, OLDEST_TORCH))} "
                f"(trace_autograd_ops); this is torch {torch.__version__}")
    return None


def _build(backbone: str, arm: str, P: dict, device, eps: float = 1e-8):
    import torch

    from weince.data.augment import build_augment
    from weince.losses import build_loss
    from weince.models import build_simclr_model

    torch.manual_seed(0)
    model = build_simclr_model(backbone, P["image_size"], 3, out_dim=64).to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    loss_fn = build_loss(arm, tau=0.5).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, eps=eps)   # paper: no weight decay
    aug = build_augment("cifar100", image_size=P["image_size"], mean=None, std=None)
    return model, loss_fn, opt, aug


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def throughput_run(backbone, arm, precision, mode, images, device, P) -> dict:
    """img/s of the timed steps after warm-up; ``mode``: "eager" or a torch.compile mode."""
    import torch
    from torch._dynamo.utils import counters

    from weince.train.simclr import CompiledStep, eager_step

    cuda = device.type == "cuda"
    use_amp = precision == "bf16" and cuda
    model, loss_fn, opt, aug = _build(backbone, arm, P, device)
    gen = torch.Generator(device=device).manual_seed(1)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    skips0 = counters["inductor"]["cudagraph_skips"]
    if mode == "eager":
        def step(batch):
            return eager_step(model, loss_fn, opt, aug, batch, gen, use_amp=use_amp,
                              channels_last=cuda)
    else:
        torch._dynamo.reset()   # a fresh step function: no recompile limit across runs
        cs = CompiledStep(model, loss_fn, opt, aug, use_amp=use_amp, channels_last=cuda,
                          mode=mode, backend=P["compile_backend"])

        def step(batch):
            return cs(batch, gen)[0]
    bs = P["batch"]
    idx = torch.arange(bs, device=images.device)
    _sync(device)
    t0 = time.perf_counter()
    for i in range(P["warmup"]):
        loss = step(images[(idx + i * bs) % images.shape[0]])
    _sync(device)
    t1 = time.perf_counter()
    for i in range(P["steps"]):
        loss = step(images[(idx + (i + P["warmup"]) * bs) % images.shape[0]])
    _sync(device)
    t2 = time.perf_counter()
    loss = float(loss)
    row = {"backbone": backbone, "arm": arm, "precision": precision, "mode": mode,
           "img_s": P["steps"] * bs / (t2 - t1), "step_ms": 1e3 * (t2 - t1) / P["steps"],
           "warmup_s": t1 - t0, "loss": loss, "finite": loss == loss and abs(loss) != float("inf"),
           "peak_mib": torch.cuda.max_memory_allocated() / 2**20 if cuda else None}
    if mode != "eager":
        row["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"] - skips0
    return row


def simcse_run(arm, device, P) -> dict:
    """A SimCSE step of a random-weight ``BertModel`` (bert-base shape on the GPU)."""
    import torch
    from transformers import BertConfig, BertModel

    from weince.losses import build_loss

    torch.manual_seed(0)
    sp = P["simcse"]
    cfg = BertConfig(**sp["bert"])
    enc = BertModel(cfg).to(device).train()
    loss_fn = build_loss(arm, tau=0.05, layout="pairs").to(device).train()
    opt = torch.optim.AdamW(enc.parameters(), lr=3e-5)
    ids = torch.randint(1000, cfg.vocab_size, (sp["batch"], sp["length"]),
                        generator=torch.Generator().manual_seed(0)).to(device)
    att = torch.ones_like(ids)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    def step():
        z1 = enc(input_ids=ids, attention_mask=att).last_hidden_state[:, 0]
        z2 = enc(input_ids=ids, attention_mask=att).last_hidden_state[:, 0]
        loss = loss_fn(z1.float(), z2.float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    for _ in range(P["warmup"]):
        step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(P["steps"]):
        loss = step()
    _sync(device)
    dt = time.perf_counter() - t0
    return {"arm": arm, "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
            "sent_s": P["steps"] * sp["batch"] / dt, "step_ms": 1e3 * dt / P["steps"],
            "peak_mib": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
            "loss": float(loss)}


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200] if str(err) else ''}"


def section_throughput(S: Section, P: dict, args) -> None:
    import torch

    device = torch.device(P["device"])
    images = _images(max(4 * P["batch"], 64), P["image_size"], device)
    runs = [(b, a, pr, "eager") for b, arms in P["eager"].items() for a in arms
            for pr in P["precisions"]]
    runs += [(b, a, pr, P["compile_mode"]) for b in P["compiled_backbones"]
             for a in P["compiled_arms"] for pr in P["compiled_precisions"]]
    no_compile = _compile_supported()
    keys = ["backbone", "arm", "precision", "mode", "img_s", "step_ms", "step_vs_infonce",
            "warmup_s", "peak_mib", "cudagraph_skips", "loss", "error"]
    skipped = []

    def render():
        base = {(r["backbone"], r["precision"], r["mode"]): r["img_s"] for r in S.rows
                if r.get("arm") == "infonce" and "img_s" in r}
        for r in S.rows:
            k = (r["backbone"], r["precision"], r["mode"])
            if "img_s" in r and k in base:
                r["step_vs_infonce"] = base[k] / r["img_s"]
        S.md = [f"Batch {P['batch']} images (2 x {P['batch']} views), {P['image_size']} px, "
                f"{P['warmup']} warm-up + {P['steps']} timed steps; `warmup_s` includes "
                f"compilation; `step_vs_infonce`: step time over InfoNCE's in the same "
                f"backbone/precision/mode; `cudagraph_skips`: graphs that CUDA graphs did not "
                f"capture (mode `reduce-overhead`; 0 is the expected count). Compiled runs "
                f"reset Dynamo before each new step function.", ""]
        if P["compile_backend"] != "inductor":
            S.md[-2] += (f" Compiled rows: backend `{P['compile_backend']}` (Dynamo's single "
                         f"graph run without Inductor's code generation: not Inductor's speed).")
        S.md += table(S.rows, keys)
        if skipped:
            S.md += ["", "Not run (section time): " + ", ".join(skipped)]
        if S.extra.get("simcse"):
            S.md += ["", f"SimCSE step ({'tiny' if P['device'] == 'cpu' else 'bert-base'} "
                     f"random-weight `BertModel`, batch {P['simcse']['batch']} x "
                     f"{P['simcse']['length']} tokens, two dropout passes, float32):", ""]
            S.md += table(S.extra["simcse"], ["arm", "layers", "hidden", "sent_s", "step_ms",
                                              "peak_mib", "loss", "error"])

    for b, a, pr, mode in runs:
        if S.left() < 5:
            skipped.append(f"{b}/{a}/{pr}/{mode}")
            continue
        if mode != "eager" and no_compile:
            S.rows.append({"backbone": b, "arm": a, "precision": pr, "mode": mode,
                           "error": no_compile})
            continue
        try:
            r = throughput_run(b, a, pr, mode, images, device, P)
            S.ok &= r["finite"] and r.get("cudagraph_skips", 0) == 0
        except Exception as err:  # reported, the next run goes on
            traceback.print_exc()
            r = {"backbone": b, "arm": a, "precision": pr, "mode": mode, "error": _error(err)}
            S.ok = False
        S.rows.append(r)
        render()
        S.emit()
    S.extra["simcse"] = []
    for arm in P["simcse"]["arms"]:
        if S.left() < 5:
            skipped.append(f"simcse/{arm}")
            continue
        try:
            S.extra["simcse"].append(simcse_run(arm, device, P))
        except Exception as err:
            traceback.print_exc()
            S.extra["simcse"].append({"arm": arm, "error": _error(err)})
            S.ok = False
    render()


def section_equality(S: Section, P: dict, args) -> None:
    """Two steps of the eager and the compiled step from the same weights and random draws."""
    import copy

    import torch

    from weince.train.simclr import CompiledStep, eager_step

    device = torch.device(P["device"])
    no_compile = _compile_supported()
    if no_compile:
        S.skipped = no_compile
        return
    cuda = device.type == "cuda"
    # Adam's first steps are about lr * sign(grad): a large eps makes the update linear in
    # small gradients, so that rounding differences stay rounding-sized
    tol = dict(rtol=2e-3, atol=2e-4) if cuda else dict(rtol=1e-4, atol=1e-5)
    P = {**P, "image_size": P["equality_size"]}
    images = _images(P["equality_batch"], P["image_size"], device)
    for backbone, arm in P["equality"]:
        if S.left() < 10:
            S.rows.append({"backbone": backbone, "arm": arm, "error": "not run (section time)"})
            continue
        row = {"backbone": backbone, "arm": arm, "mode": P["compile_mode"],
               "backend": P["compile_backend"]}
        try:
            ref = _build(backbone, arm, P, device, eps=0.1)
            got_model = copy.deepcopy(ref[0])
            got_loss = copy.deepcopy(ref[1])
            got_opt = torch.optim.Adam(got_model.parameters(), lr=3e-4, eps=0.1)
            torch._dynamo.reset()
            step = CompiledStep(got_model, got_loss, got_opt, ref[3], channels_last=cuda,
                                mode=P["compile_mode"], backend=P["compile_backend"])
            g1 = torch.Generator(device=device).manual_seed(5)
            g2 = torch.Generator(device=device).manual_seed(5)
            dl = []
            for _ in range(2):
                a = eager_step(ref[0], ref[1], ref[2], ref[3], images, g1, channels_last=cuda)
                b, _ = step(images, g2)
                dl.append(abs(float(a) - float(b)) / max(abs(float(a)), 1e-12))
            worst, name = 0.0, None
            pairs = list(zip(ref[0].state_dict().items(), got_model.state_dict().values()))
            for (n, p), q in pairs:
                if not p.is_floating_point():
                    continue
                d = float(((q.float() - p.float()).abs()
                           / (tol["atol"] + tol["rtol"] * p.float().abs())).max())
                if d > worst:
                    worst, name = d, n
            torch._dynamo.reset()
            with torch._dynamo.config.patch(trace_autograd_ops=True):
                u = ref[3].draw(2 * images.shape[0], torch.Generator(device=device).manual_seed(0),
                                device)
                ex = torch._dynamo.explain(CompiledStep(ref[0], ref[1], ref[2], ref[3],
                                                        channels_last=cuda, mode=None)._step)(
                    images, u, torch.tensor(3e-4, device=device))
            torch._dynamo.reset()
            row.update(loss_rel_diff=max(dl), worst_weight=name, worst_over_tol=worst,
                       graphs=ex.graph_count, graph_breaks=ex.graph_break_count,
                       equal=worst <= 1.0 and max(dl) <= tol["rtol"])
            S.ok &= row["equal"] and ex.graph_count == 1 and ex.graph_break_count == 0
        except Exception as err:
            traceback.print_exc()
            row["error"] = _error(err)
            S.ok = False
        S.rows.append(row)
        S.md = [f"Two training steps, eager (`torch.optim.Adam`, `loss.backward()`) and "
                f"compiled (`CompiledStep`, mode `{P['compile_mode']}`, backend "
                f"`{P['compile_backend']}`), from the same "
                f"weights and the same random draws (batch {P['equality_batch']}, "
                f"{P['image_size']} px, Adam eps 0.1). Equal: every weight and buffer within "
                f"`atol + rtol * |w|` (rtol {tol['rtol']:g}, atol {tol['atol']:g}; "
                f"`worst_over_tol` <= 1) and the losses within rtol. `graphs`/`graph_breaks`: "
                f"`torch._dynamo.explain` of the whole step (one graph, no break).", ""]
        S.md += table(S.rows, ["backbone", "arm", "mode", "loss_rel_diff", "worst_weight",
                               "worst_over_tol", "graphs", "graph_breaks", "equal", "error"])
        S.emit()


def section_c8(S: Section, P: dict, args) -> None:
    from weince.timing import TimingConfig, run_timing

    cfg = TimingConfig(**P["timing"])
    res = run_timing(cfg)
    S.extra["timing"] = res
    st = res["whole_step"]
    S.md = [f"`weince.timing` with {', '.join(f'{k}={v}' for k, v in P['timing'].items())}: "
            f"the loss in float32 outside autocast, the backbone in "
            f"{'bf16 autocast' if st['amp_bf16'] else 'float32 (the paper profile)'}; ratios "
            f"are medians of paired repetitions with bootstrap 95% intervals.", ""]
    rows = []
    for block, what in [*((r, f"loss alone 2N={r['2N']}") for r in res["loss_alone"]),
                        (st, f"whole step {st['backbone']} {st['batch']}")]:
        for mode, summ in (block.get("modes") or {block["mode"]: block["losses"]}).items():
            for name, s in summ.items():
                rows.append({"what": what, "mode": mode, "loss": name,
                             "median_ms": s["median_ms"], "overhead_pct": s["overhead_pct"],
                             "ci_pct": f"[{s['overhead_ci'][0]:+.2f}, {s['overhead_ci'][1]:+.2f}]"})
    S.rows = rows
    S.md += table(rows, ["what", "mode", "loss", "median_ms", "overhead_pct", "ci_pct"])
    att = st["attributed"]
    S.md += ["", "Attributed whole-step overhead (the loss's extra time on the step's "
             "embeddings, as a share of the step; headline mode "
             f"`{st['mode']}`): " + ", ".join(f"{n} {a['overhead_pct']:+.3f}%"
                                              for n, a in att.items() if n != cfg.losses[0]),
             f"Trainable parameters per loss: {res['trainable_parameters']} (paper: zero). "
             "Paper: about +0.67% step time."]
    S.ok = all(v == 0 for v in res["trainable_parameters"].values())


RUNNERS = {"rehearsal": section_rehearsal, "cuda_tests": section_cuda_tests,
           "throughput": section_throughput, "equality": section_equality, "c8": section_c8}


def run_section(args) -> int:
    """The child process of one section."""
    if args.recompile_limit:
        import torch

        torch._dynamo.config.recompile_limit = args.recompile_limit
    P = settings(args.cpu, args)
    S = Section(Path(args.section_out), args.deadline)
    S.emit()
    try:
        RUNNERS[args.run_section](S, P, args)
    except Exception as err:
        traceback.print_exc()
        S.ok = False
        S.md += ["", f"section failed: {_error(err)}"]
    S.emit()
    return 0


# ----------------------------------------------------------------------------- report
def environment(cpu: bool) -> dict:
    import torch

    env = {"torch": torch.__version__, "pinned_torch": PINNED_TORCH,
           "python": platform.python_version(), "cuda": torch.version.cuda,
           "device": (torch.cuda.get_device_name(0) if torch.cuda.is_available() and not cpu
                      else platform.processor() or "cpu"),
           "threads": torch.get_num_threads()}
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    wheels = os.environ.get("WEINCE_WHEELS_LOG")
    if wheels and Path(wheels).exists():
        env["wheels"] = Path(wheels).read_text().strip().splitlines()
    return env


def render(state: dict) -> str:
    env = state["environment"]
    lines = ["# GPU acceptance report", "",
             f"Mode: {state['mode']}. Command: `{state['command']}`. Started "
             f"{state['started']}; budget {state['budget_s']:.0f} s.", "",
             "## Environment", "",
             f"- torch {env['torch']} (the artifact pins {env['pinned_torch']}; oldest this "
             f"script supports: {'.'.join(map(str, OLDEST_TORCH))}), CUDA {env['cuda']}, "
             f"Triton {env['triton']}, Python {env['python']}",
             f"- device: {env['device']}; torch threads {env['threads']}"]
    if env.get("wheels"):
        lines += ["- carried wheels (`benchmarks/gpu_wheels.py install`):",
                  *(f"  - {w}" for w in env["wheels"])]
    lines.append("")
    for name, title in SECTIONS:
        sec = state["sections"].get(name)
        if sec is None:
            continue
        lines += [f"## {title}", ""]
        status = sec["status"]
        when = ""
        if "elapsed_s" in sec:
            when = f" ({sec['elapsed_s']:.0f} s of {sec['timeout_s']:.0f} s allowed)"
        elif "timeout_s" in sec:
            when = f" (started; {sec['timeout_s']:.0f} s allowed; pid {sec.get('pid')})"
        lines += [f"Status: **{status}**{when}" + (f": {sec['reason']}" if sec.get("reason")
                                                   else ""), ""]
        lines += list(sec.get("md") or [])
        lines.append("")
    done = [s for s in state["sections"].values() if s["status"] not in ("pending", "running")]
    bad = [n for n, s in state["sections"].items() if s["status"] in
           ("failed", "timeout", "interrupted")]
    verdict = ("INCOMPLETE" if not state.get("finished") else "FAIL" if bad else "PASS")
    lines += ["## Summary", "",
              f"{verdict}: {len(done)} of {len(state['sections'])} sections finished"
              + (f"; not passed: {', '.join(bad)}" if bad else "")
              + f"; {state.get('elapsed_s', 0):.0f} s so far.", ""]
    return "\n".join(lines)


def save(state: dict, report: Path) -> None:
    state["elapsed_s"] = time.time() - state["t0"]
    write_atomic(report.with_suffix(".json"), json.dumps(state, indent=1, default=str))
    write_atomic(report, render(state))


class Interrupted(Exception):
    pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="GPU acceptance run (see benchmarks/gpu_acceptance.sh)")
    p.add_argument("report", nargs="?", default=None,
                   help="Markdown report (default: ${OUT:-gpu_acceptance_out}/gpu_acceptance.md); "
                        "its JSON twin is written beside it")
    p.add_argument("--cpu", action="store_true", default=bool(os.environ.get("WEINCE_ACCEPTANCE_CPU")),
                   help="tiny sizes on the CPU (the test suite runs this)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run (GPU default 480, CPU 900)")
    p.add_argument("--sections", nargs="+", choices=[n for n, _ in SECTIONS], default=None,
                   help="run only these sections (in the fixed order)")
    p.add_argument("--compiled-arms", nargs="+", default=None, choices=ARMS)
    p.add_argument("--compile-mode", default=None,
                   help="torch.compile mode of the compiled step (GPU default reduce-overhead)")
    p.add_argument("--compile-backend", default="inductor", choices=("inductor", "aot_eager"),
                   help="torch.compile backend of the compiled step (default inductor; "
                        "aot_eager: the same single graph without code generation, the test "
                        "suite's check of this script's compiled sections)")
    p.add_argument("--full", action="store_true", help="compiled step in fp32 and bf16 too")
    p.add_argument("--recompile-limit", type=int, default=None,
                   help="torch._dynamo recompile limit in the sections (1: any missing reset fails)")
    p.add_argument("--run-section", default=None, help=argparse.SUPPRESS)
    p.add_argument("--section-out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.run_section:
        return run_section(args)

    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA device visible: run with --cpu for the tiny CPU mode", file=sys.stderr)
        return 2
    report = Path(args.report or Path(os.environ.get("OUT", "gpu_acceptance_out")) /
                  "gpu_acceptance.md").resolve()
    P = settings(args.cpu, args)
    names = [n for n, _ in SECTIONS if args.sections is None or n in args.sections]
    state = {"mode": "CPU (tiny sizes: the code paths run; no number here is a measurement)"
             if args.cpu else "GPU", "command": " ".join(
                 ["bash benchmarks/gpu_acceptance.sh", *(argv if argv is not None else sys.argv[1:])]),
             "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
             "t0": time.time(), "budget_s": P["budget"], "environment": environment(args.cpu),
             "sections": {n: {"status": "pending", "title": TITLES[n]} for n in names},
             "finished": False}
    save(state, report)

    def stop(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    end = state["t0"] + P["budget"]
    child = None
    try:
        for i, name in enumerate(names):
            sec = state["sections"][name]
            left = end - time.time()
            share = SHARES[name] / sum(SHARES[n] for n in names[i:])
            timeout = left * share
            if timeout < (3 if args.cpu else 15):
                sec.update(status="skipped", reason=f"budget spent ({left:.0f} s left)")
                save(state, report)
                continue
            out = report.with_name(f".{report.stem}.{name}.json")
            out.unlink(missing_ok=True)
            cmd = [sys.executable, str(Path(__file__).resolve()), "--run-section", name,
                   "--section-out", str(out), "--deadline", str(time.time() + timeout)]
            for flag, val in (("--cpu", args.cpu), ("--full", args.full)):
                if val:
                    cmd.append(flag)
            for flag, val in (("--compile-mode", args.compile_mode),
                              ("--compile-backend", args.compile_backend),
                              ("--recompile-limit", args.recompile_limit)):
                if val:
                    cmd += [flag, str(val)]
            if args.compiled_arms:
                cmd += ["--compiled-arms", *args.compiled_arms]
            if args.budget:
                cmd += ["--budget", str(args.budget)]
            t0 = time.time()
            child = subprocess.Popen(cmd, cwd=REPO, start_new_session=True)
            sec.update(status="running", timeout_s=timeout, pid=child.pid)
            save(state, report)
            try:
                rc = child.wait(timeout=timeout + 10)   # the section watches its own deadline
            except subprocess.TimeoutExpired:
                _kill_group(child)
                rc = None
            child = None
            res = json.loads(out.read_text()) if out.exists() else {}
            out.unlink(missing_ok=True)
            sec.update(elapsed_s=time.time() - t0, md=res.get("md", []), rows=res.get("rows", []),
                       **{k: v for k, v in res.items() if k not in ("md", "rows", "ok", "skipped")})
            if rc is None:
                sec.update(status="timeout", reason=f"stopped after {timeout:.0f} s; the rows "
                                                    f"above are those it finished")
            elif rc != 0 or not res:
                sec.update(status="failed", reason=f"the section's process ended with exit {rc} "
                                                   f"(killed or out of memory?)")
            elif res.get("skipped"):
                sec.update(status="skipped", reason=res["skipped"])
            else:
                sec["status"] = "ok" if res.get("ok") else "failed"
            save(state, report)
    except Interrupted as sig:
        if child is not None:
            _kill_group(child)
        for sec in state["sections"].values():
            if sec["status"] == "running":
                sec.update(status="interrupted", reason=f"{sig} received")
        save(state, report)
        print(f"interrupted ({sig}); report: {report}", file=sys.stderr)
        return 143
    state["finished"] = True
    save(state, report)
    print(f"report: {report} (and {report.with_suffix('.json').name})")
    bad = [n for n, s in state["sections"].items() if s["status"] in ("failed", "timeout")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
