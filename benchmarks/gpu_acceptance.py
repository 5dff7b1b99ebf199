"""The GPU acceptance run: one script, six sections, most important first, a report that
survives anything. How to run it, on the GPU machine or here: ``benchmarks/gpu_acceptance.sh``.

Sections, in order (each in its own process, with its own timeout):

1. ``cuda_tests``: ``pytest -m cuda`` on the test files that hold a ``cuda`` test.
2. ``e2e``: the GPU's results against the CPU's, end to end. ResNet-18 with the CIFAR stem
   is pretrained by ``weince.train.simclr.pretrain`` with the paper profile's settings
   (``weince.pipeline.stages.pretrain_config``: Adam 3e-4, tau 0.5, float32, per-view
   forward, the ``weince_recipe`` arm) at tiny sizes on the CIFAR-100 files of
   ``weince.data.synthetic_formats`` (class colour plus noise: learnable), then
   ``extract_features``, ``linear_probe`` and ``knn_eval`` run with the profile's settings,
   as the workflow's rules call them. The CPU reference runs first, on this machine's CPUs;
   the GPU runs twice from the same seed: in full float32 (cuDNN's TF32 convolutions off)
   and at the profile's precision (cuDNN's default TF32 convolutions). Both devices draw the
   views' random parameters from the same CPU generator stream (the GPU still crops, jitters
   and blurs on the GPU): what differs is the arithmetic alone. Checks, per GPU run:
   the per-epoch loss curve, every test image's backbone feature (cosine to the CPU's),
   every test image's k-NN prediction (full training bank, k 50, T 0.1), k-NN acc@50 and
   linear test accuracy; and the CPU reference's k-NN accuracy must be at least
   ``LEARNT_X`` times chance (the classes are found: the accuracies compared are not
   chance against chance). Tolerances (``TOLERANCES``): float32 on both sides
   differs by summation order only (cuDNN's and oneDNN's kernels), ~1e-7 per operation,
   grown by 20 Adam steps (Adam's first steps move each weight by about lr x sign(grad),
   so a gradient near zero can flip): loss 1e-3 relative, features cosine >= 0.99 (median
   0.999), accuracies within 3 points, 95% of predictions equal. TF32 rounds products to 10
   mantissa bits (~5e-4 each): loss 1e-2, cosine >= 0.98 (median 0.995), accuracies within
   5 points, 90% equal. CPU mode compares 1 thread against all threads (another summation
   order) with the float32 tolerances.
3. ``step_times``: the median seconds per optimiser step of every backbone x arm x
   precision the paper profile trains, at each data set's image size and the profile's
   batch (``weince.train.step_timer.StepTimer``, as the rehearsal measures), and of a SimCSE
   step of a random bert-base ``BertModel``; written after every measurement to
   ``measured_steps.yaml`` beside the report (the planner's ``cost.measured`` overlay).
4. ``c8``: claim C8 at the paper's setting (``weince.timing``: ResNet-18, 2 x 256 views, the
   paper profile's float32 pretraining step, eager and compiled losses side by side).
5. ``rehearsal``: the rehearsal overlay restricted to one pair (``config/paper.yaml
   config/paper_cifar100_r18.yaml config/rehearsal.yaml``, 102 jobs) on synthetic files in a
   temporary folder, ``--max-threads 2`` so that 8 jobs share the GPU at once (``node.
   jobs_per_gpu: 8``: the slot pool lets them); its forecast is copied into the report. CPU
   mode: the dry run only.
6. ``shared``: two jobs on one GPU give the numbers of one alone. Section 2's float32 GPU
   run (pretraining, features, probe, k-NN) in its own process, which takes a slot of the
   machine's pool (``weince.utils.gpu_slots``) before it imports torch, as every workflow
   job does: once alone (``jobs_per_gpu`` 1), then twice at once with ``jobs_per_gpu`` 2,
   which puts both on one GPU (slots 0 and 1). Checks: the two held slots 0 and 1 of the
   same device and their training overlapped; each shared run against the one alone with
   section 2's float32 tolerances (the same arithmetic; only kernel scheduling and cuDNN's
   choices under another process's load may differ); the shared runs' images per second
   beside the lone run's (their step times say they shared). CPU mode: the same on a fake
   device list (``WEINCE_FAKE_GPUS``), where the numbers must be equal bit for bit.

The plan on one H200 (8 minutes = 480 s, counted from the shell's start; ``--plan`` prints
this table with the figures it derives: the cost model's step times, the dry run's job
count). Each section's timeout is its budget's share of the time left, so what one
section leaves unused goes to the later ones:

==============  ==========  ============  ==============================================
section         budget (s)  expected (s)  why
==============  ==========  ============  ==============================================
launcher        10          10            carried wheels installed, torch imported
cuda_tests      75          60            4 files collected; one Inductor compile of the
                                          whole step (~45 s), 8 eager tests (~1 s each)
e2e             80          55            CPU: 20 steps x 64 images of ResNet-18 (~100
                                          img/s on 16 cores) + features of 400 images;
                                          GPU: 2 x (20 steps + cuDNN autotuning + eval)
step_times      100         45-85         9 shapes x 4 arms x 8 steps + 3 bert-base arms:
                                          21-58 s of steps by the cost model, ~2 s per
                                          shape for the model and cuDNN autotuning
c8              65          60            3 losses compiled at 2 sizes (~6 x 8 s), 30
                                          paired repetitions of each timing
rehearsal       110         110-145       102 jobs, 8 at a time, ~7 s each (interpreter,
                                          torch, CUDA context, a few steps; 14 of them a
                                          claim's table, ~3 s); unused time of the
                                          sections above (~100 s) comes on top
shared          40          25-40         section 2's GPU run 3 times, in 3 processes
                                          (CUDA context, 20 steps, eval: ~8 s each): one
                                          alone, then two at once on one GPU
==============  ==========  ============  ==============================================

Dropped for time: the compiled step's throughput and its equality with the eager step
(one Inductor compile of the whole ResNet-18 or ViT-S step takes about a minute). The
compiled step's numerics are ``tests/train/test_step_compile.py``'s; section 1 runs the
compiled step once on CUDA; section 4 times compiled losses.

The Markdown report and a JSON twin (same name, ``.json``) are rewritten atomically before
the first section and after every section, and mark the section in progress as ``running``:
a run killed at any point (a hang, an out-of-memory kill, the machine's time limit) leaves a
report with every section it finished, and the rows of the section it was in stay in
``.<report name>.<section>.json`` beside it (each section rewrites that file after every
row). A section that overruns is stopped (its process group is killed) and reported as
``timeout`` with the rows it had written. SIGTERM/SIGINT stop the current section and write
the report as ``interrupted``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml

from weince.cost.estimate import estimate, family_of_backbone, precision_of, vision_step_flops
from weince.data.augment import build_augment
from weince.data.synthetic_formats import write_synthetic_data
from weince.eval.features import extract_features
from weince.eval.knn import knn_eval, weighted_vote
from weince.eval.linear import linear_probe
from weince.losses import build_loss
from weince.models import build_simclr_model
from weince.models.text import SimCSEModel
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import probe_kwargs
from weince.pipeline.stages import pretrain_config
from weince.timing import TimingConfig, run_timing
from weince.train import simclr
from weince.train.optim import build_optimizer as _build_optimizer
from weince.train.simclr import eager_step, pretrain, complete_config
from weince.train.simcse import _optimizer
from weince.train.step_timer import StepTimer
from weince.utils.config import to_dict
from weince.utils.gpu_slots import FAKE_ENV, GPUS_ENV, LOCK_DIR_ENV

REPO = Path(__file__).resolve().parents[1]
SECTIONS = (("cuda_tests", "1. CUDA tests"),
            ("e2e", "2. End to end: GPU against CPU"),
            ("step_times", "3. Measured step times"),
            ("c8", "4. C8 at the paper's setting"),
            ("rehearsal", "5. Rehearsal of one pair"),
            ("shared", "6. Two jobs on one GPU"))
TITLES = dict(SECTIONS)
LAUNCHER_S = 10
# planned seconds of each section on one H200 (module docstring); the timeouts are these
# shares of the time left, renormalised over the sections still to run
PLAN = {
    "cuda_tests": dict(budget_s=75, expected="60",
                       why="4 files collected; one Inductor compile of the whole step "
                           "(~45 s), 8 eager tests (~1 s each)"),
    "e2e": dict(budget_s=80, expected="55",
                why="CPU: 20 steps x 64 images of ResNet-18 (~100 img/s on 16 cores) + "
                    "features of 400 images; GPU: 2 x (20 steps + cuDNN autotuning + eval)"),
    "step_times": dict(budget_s=100, expected="45-85",
                       why="9 shapes x 4 arms x 8 steps + 3 bert-base arms (the cost model's "
                           "step times), ~2 s per shape for the model and cuDNN autotuning"),
    "c8": dict(budget_s=65, expected="60",
               why="3 losses compiled at 2 sizes (~6 x 8 s), 30 paired repetitions of each "
                   "timing"),
    "rehearsal": dict(budget_s=110, expected="110-145",
                      why="the dry run's jobs, 8 at a time, ~7 s each (interpreter, torch, "
                          "CUDA context, a few steps; a claim's table ~3 s); unused time of the "
                          "sections above comes on top"),
    "shared": dict(budget_s=40, expected="25-40",
                   why="section 2's GPU run 3 times, in 3 processes (CUDA context, 20 steps, "
                       "eval: ~8 s each): one alone, then two at once on one GPU"),
}
PAIR_OVERLAYS = ("config/paper.yaml", "config/paper_cifar100_r18.yaml", "config/rehearsal.yaml")
REHEARSAL_MAX_JOBS = 115   # the rehearsal's budget holds this many jobs (102 planned)
E2E_PAIR = ("cifar100", "resnet18")
E2E_ARM, E2E_SEED = "weince_recipe", 7
LEARNT_X = 3.0          # the CPU reference's k-NN accuracy must reach 3 x chance
TOLERANCES = {
    "float32": dict(loss_rel=1e-3, cos_min=0.99, cos_median=0.999, acc_points=3.0,
                    agree_pct=95.0),
    "profile": dict(loss_rel=1e-2, cos_min=0.98, cos_median=0.995, acc_points=5.0,
                    agree_pct=90.0),
}
# the test suite sets it to make the GPU runs differ from the reference (their seed + 1):
# the e2e section must then fail
PERTURB_ENV = "WEINCE_ACCEPTANCE_E2E_PERTURB"
# the device name torch reports -> the key of src/weince/pipeline/devices.yaml (first match;
# None: a device the cost model has no datasheet for)
GPU_KEYS = ((r"\bgh200\b|\bh200 nvl\b", None), (r"\bh200\b", "h200"),
            (r"\bh100\b.*\bpcie\b", "h100-pcie"), (r"\bh100 nvl\b", None),
            (r"\bh100\b", "h100-sxm"), (r"\ba100\b.*\bpcie\b", None),
            (r"\ba100\b.*\b40\s*gb\b", "a100-40gb"), (r"\ba100\b.*\b80\s*gb\b", "a100-80gb"),
            (r"\bl40s\b", "l40s"))
STEPS_YAML = "measured_steps.yaml"
OLDEST_TORCH = (2, 11)
PINNED_TORCH = "2.14.1"


# ----------------------------------------------------------------------------- settings
def settings(cpu: bool) -> dict:
    """Sizes of every section: the GPU run (8 minutes on one H200) or tiny CPU sizes (a
    check that every code path runs, not a measurement)."""
    timing = dict(losses=["infonce", "weince", "weince_recipe"], backbone="resnet18",
                  image_size=32, channels=3, compile="both", amp=False)
    if cpu:
        return dict(
            device="cpu", budget=900,
            e2e=dict(train=dict(batch_size=17, max_train_images=34, epochs=2, image_size=16),
                     features=dict(max_images=100), device_threads=1),
            # one thread, no warm-up: on a busy 2-core machine a second OpenMP thread made
            # a ResNet-50 step 5x slower
            steps=dict(batch=4, text_batch=4, warmup=0, timed=1, max_image_size=16, threads=1,
                       bert=dict(vocab_size=1000, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=64)),
            timing=dict(timing, device="cpu", losses=["infonce", "weince"], sizes=[8],
                        loss_reps=2, warmup=1, backbone="smallcnn", image_size=8,
                        step_batch=4, step_reps=2, compile="eager", n_boot=50),
            rehearsal_dry_run=True)
    return dict(
        device="cuda", budget=480,
        e2e=dict(train=dict(batch_size=64, max_train_images=256, epochs=5), features={},
                 device_threads=None),
        steps=dict(batch=None, text_batch=None, warmup=2, timed=6, max_image_size=None,
                   threads=None, bert={}),
        timing=dict(timing, device="cuda", sizes=[512, 4096], loss_reps=30, warmup=5,
                    step_batch=256, step_reps=30),
        rehearsal_dry_run=False)


def paper_config():
    """The paper profile, resolved (``config/paper.yaml`` sets every key of
    ``config/config.yaml``)."""
    return Profile.of(yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))


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


def _run(cmd: list[str], timeout: float, cwd: Path = REPO, env: dict | None = None
         ) -> tuple[int, str]:
    """A command in its own process group; killed with its children at ``timeout``."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True,
                            env=None if env is None else {**os.environ, **env})
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


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200] if str(err) else ''}"


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------- 1. CUDA tests
CUDA_MARK = re.compile(r"^\s*@pytest\.mark\.cuda\b|^pytestmark\b.*\bmark\.cuda\b", re.M)


def cuda_test_files() -> list[str]:
    """The test files holding a test marked ``cuda`` (collecting only them saves the
    suite's collection)."""
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py")
                  if CUDA_MARK.search(p.read_text()))


def section_cuda_tests(S: Section, P: dict, args) -> None:
    # `-o addopts=`: one process, without the suite's xdist options (pytest-xdist may not
    # be installed where this runs; the cuda tests share one device anyway)
    cmd = [sys.executable, "-m", "pytest", "-m", "cuda", "-o", "addopts=", "--strict-markers",
           "-q", "-rs", "-p", "no:cacheprovider", *cuda_test_files()]
    rc, out = _run(cmd, S.left() - 5)
    lines = out.strip().splitlines()
    cuda = torch.cuda.is_available()
    # no CUDA: every cuda test skips (exit 0) or none is selected (5)
    S.ok = rc == 0 if cuda else rc in (0, 5)
    S.extra["exit"] = rc
    S.md += [f"`pytest {' '.join(cmd[3:])}` -> exit {rc}"
             + ("" if cuda else " (no CUDA device: the tests skip; this checks the selection)"),
             "", "```", *lines[-15:], "```"]


# ----------------------------------------------------------------------------- 2. end to end
@contextmanager
def cpu_view_draws():
    """Inside: a pretraining run draws its views' uniforms from a CPU generator with the
    seed the loop gives its device generator, so a CUDA run crops, flips, jitters and blurs
    exactly as the CPU run does (the augmentation still runs on the GPU; only the
    ``torch.rand`` of the parameters moves). A CUDA generator's stream differs from a CPU
    one's, which would make the two runs differ by more than arithmetic."""
    build = getattr(simclr, "_Pretraining", None) and getattr(simclr._Pretraining, "build", None)
    if build is None:
        raise RuntimeError("weince.train.simclr._Pretraining.build is gone: update "
                           "cpu_view_draws() in benchmarks/gpu_acceptance.py")

    def build_with_cpu_draws(self):
        build(self)
        self.aug_gen = torch.Generator().manual_seed(self.aug_gen.initial_seed())

    simclr._Pretraining.build = build_with_cpu_draws
    try:
        yield
    finally:
        simclr._Pretraining.build = build


def knn_predictions(feats: dict, k: int, temperature: float) -> torch.Tensor:
    """Every test image's k-NN class (cosine, weighted vote, the whole training split as
    the bank): the per-image counterpart of ``knn_eval``'s accuracy."""
    bank = F.normalize(feats["train"]["backbone"].float(), dim=1)
    query = F.normalize(feats["test"]["backbone"].float(), dim=1)
    labels = feats["train"]["labels"].long()
    sims, idx = (query @ bank.T).topk(min(k, bank.shape[0]), dim=1)
    classes = int(max(labels.max(), feats["test"]["labels"].max())) + 1
    return weighted_vote(sims, labels[idx], classes, temperature)


def e2e_run(name: str, device: str, P: dict, root: Path, work: Path, *, threads: int | None,
            tf32_conv: bool, seed: int) -> dict:
    """One pretraining run and its evaluation, as the workflow's rules call them."""
    paper = paper_config()
    cfg = {**to_dict(pretrain_config(paper, *E2E_PAIR, E2E_ARM, seed)), **P["e2e"]["train"],
           "device": device, "data_root": str(root), "threads": threads, "progress": False}
    out = work / name
    cuda = device.startswith("cuda")
    if cuda:
        torch.backends.cudnn.allow_tf32 = tf32_conv
    t0 = time.time()
    with cpu_view_draws() if cuda else nullcontext():
        summary = pretrain(cfg, out)
    curve = [json.loads(line)["loss"] for line in
             (out / "train_log.jsonl").read_text().splitlines() if line.strip()]
    feats = extract_features(out / "encoder.pt", out / "features.pt", device=device,
                             data_root=str(root),
                             **{**paper.vision.features_given, **P["e2e"]["features"]})
    lin = linear_probe(feats, device=device, **probe_kwargs(paper, E2E_ARM))
    knn = knn_eval(feats, device=device, **paper.vision.knn_given)   # as the workflow's job
    return {"name": name, "device": summary["device"], "threads": torch.get_num_threads(),
            "tf32_conv": summary["tf32_cudnn_conv"], "seed": seed, "curve": curve,
            "img_s": summary["img_s_mean"], "knn_acc": knn[f"acc@{paper.vision.knn.k}"]["mean"],
            "linear_acc": lin["test_acc"]["mean"],
            "classes": int(feats["test"]["labels"].unique().numel()),   # the classes present
            "h": feats["test"]["backbone"],
            "pred": knn_predictions(feats, paper.vision.knn.k, paper.vision.knn.temperature),
            "wall_s": time.time() - t0}


def e2e_checks(ref: dict, got: dict, tol: dict, want_device: str, want_tf32: bool) -> list[dict]:
    """The comparisons of one GPU run with the CPU reference."""
    loss_rel = max(abs(a - b) / abs(a) for a, b in zip(ref["curve"], got["curve"]))
    cos = F.cosine_similarity(ref["h"].double(), got["h"].double(), dim=1)
    agree = 100.0 * float((ref["pred"] == got["pred"]).double().mean())
    d_knn = abs(got["knn_acc"] - ref["knn_acc"])
    d_lin = abs(got["linear_acc"] - ref["linear_acc"])
    rows = [("ran on", got["device"], want_device, got["device"].startswith(want_device)),
            ("TF32 convolutions", got["tf32_conv"], want_tf32, got["tf32_conv"] == want_tf32),
            ("loss curve: epochs", len(got["curve"]), len(ref["curve"]),
             len(got["curve"]) == len(ref["curve"])),
            ("loss curve: max relative difference", loss_rel, f"<= {tol['loss_rel']:g}",
             loss_rel <= tol["loss_rel"]),
            ("feature cosine: min over test images", float(cos.min()),
             f">= {tol['cos_min']:g}", float(cos.min()) >= tol["cos_min"]),
            ("feature cosine: median", float(cos.median()), f">= {tol['cos_median']:g}",
             float(cos.median()) >= tol["cos_median"]),
            ("k-NN predictions equal (%)", agree, f">= {tol['agree_pct']:g}",
             agree >= tol["agree_pct"]),
            ("k-NN acc@50 difference (points)", d_knn, f"<= {tol['acc_points']:g}",
             d_knn <= tol["acc_points"]),
            ("linear accuracy difference (points)", d_lin, f"<= {tol['acc_points']:g}",
             d_lin <= tol["acc_points"])]
    return [{"run": got["name"], "check": c, "value": v, "tolerance": t, "ok": bool(ok)}
            for c, v, t, ok in rows]


def _e2e_md(S: Section, P: dict, runs: list[dict], perturb: str | None) -> None:
    tr = P["e2e"]["train"]
    S.md = [f"ResNet-18 (CIFAR stem) pretrained with the paper profile's settings, arm "
            f"`{E2E_ARM}`, seed {E2E_SEED}, on the synthetic CIFAR-100 files (`weince."
            f"data.synthetic_formats`: class colour plus noise), at "
            f"{', '.join(f'{k} {v}' for k, v in tr.items())}; then `extract_features`, "
            f"`linear_probe` and `knn_eval` with the profile's settings. The CPU reference "
            f"and the GPU runs draw the views' parameters from the same CPU generator "
            f"stream; the GPU runs once in full float32 and once at the profile's precision "
            f"(cuDNN's TF32 convolutions). Tolerances and why: `benchmarks/gpu_acceptance.py`"
            f", section 2.", ""]
    if perturb:
        S.md += [f"**{PERTURB_ENV}={perturb}: the GPU runs were made to differ on purpose "
                 f"(their seed + 1); this section must fail.**", ""]
    S.md += table([{**r, "curve": " ".join(f"{x:.5f}" for x in r["curve"])} for r in runs],
                  ["name", "device", "threads", "tf32_conv", "seed", "img_s", "curve",
                   "knn_acc", "linear_acc", "wall_s"])
    S.md += [""] + table([{**r, "value": f"{r['value']:.6g}" if isinstance(r["value"], float)
                           else r["value"]} for r in S.rows],
                         ["run", "check", "value", "tolerance", "ok"])


def section_e2e(S: Section, P: dict, args) -> None:
    dev = P["device"]
    perturb = os.environ.get(PERTURB_ENV) or None
    if perturb not in (None, "seed"):
        raise ValueError(f"{PERTURB_ENV}={perturb!r}: the one perturbation is 'seed'")
    all_threads = os.cpu_count() or 1
    plan = [("cpu reference", "cpu", all_threads, True, None),
            (f"{dev} float32", dev, P["e2e"]["device_threads"], False, "float32"),
            (f"{dev} profile", dev, P["e2e"]["device_threads"], True, "profile")]
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = write_synthetic_data(Path(tmp) / "data")
        for name, device, threads, tf32, tol in plan:
            seed = E2E_SEED + (1 if perturb and tol else 0)
            run = e2e_run(name.replace(" ", "_"), device, P, root, Path(tmp) / "runs",
                          threads=threads, tf32_conv=tf32, seed=seed)
            run["name"] = name
            runs.append(run)
            if tol is None:
                chance = 100.0 / run["classes"]
                learnt = run["knn_acc"] >= LEARNT_X * chance
                S.rows.append({"run": name, "check": "k-NN acc@50 above chance",
                               "value": run["knn_acc"], "tolerance":
                               f">= {LEARNT_X * chance:.3g} ({LEARNT_X:g} x chance)",
                               "ok": learnt})
            else:
                want_tf32 = tf32 and device.startswith("cuda") and torch.cuda.is_available()
                S.rows += e2e_checks(runs[0], run, TOLERANCES[tol], device.split(":")[0],
                                     want_tf32)
            S.ok = all(r["ok"] for r in S.rows)
            S.extra["runs"] = [{k: v for k, v in r.items() if k not in ("h", "pred")}
                               for r in runs]
            _e2e_md(S, P, runs, perturb)
            S.emit()


# ----------------------------------------------------------------------------- 3. step times
def gpu_key(device_name: str | None) -> str | None:
    """The key of ``src/weince/pipeline/devices.yaml`` for the device torch names, or None."""
    name = (device_name or "").lower()
    for pattern, key in GPU_KEYS:
        if re.search(pattern, name):
            return key
    return None


def step_shapes(paper, cap: int | None) -> list[dict]:
    """The distinct (backbone, image size) pretraining steps of the paper profile's pairs,
    cheapest first (a timeout loses the fewest settings), each with the pairs it serves."""
    arm = paper.vision.arms[0]
    shapes: dict[tuple, dict] = {}
    for dataset, backbone in paper.vision.pairs:
        cfg = complete_config(pretrain_config(paper, dataset, backbone, arm, 7))
        size = min(cfg.image_size, cap) if cap else cfg.image_size
        key = (backbone, size, cfg.channels)
        s = shapes.setdefault(key, {"backbone": backbone, "image_size": size,
                                    "channels": cfg.channels, "dataset": dataset,
                                    "settings": []})
        s["settings"].append(f"{dataset}/{backbone}")
    for s in shapes.values():   # counted at the data set's own size (the cost table's);
        # under a cap (the CPU mode) this orders the shapes as the GPU run does
        s["flops"] = vision_step_flops(s["backbone"], s["dataset"])
    return sorted(shapes.values(), key=lambda s: s["flops"])


def _timed_steps(step, device, warmup: int, timed: int) -> dict:
    """``StepTimer``'s result over ``warmup + timed`` calls of ``step()``."""
    timer = StepTimer(device, warmup=warmup)
    for _ in range(warmup + timed):
        timer.start()
        step()
        timer.stop()
    return timer.result()


def _vision_step(model, loss_fn, opt, aug, images, batch: int, gen, acfg, cuda: bool):
    """One pretraining step of ``eager_step``, alternating between the two halves of
    ``images`` (a closure over this arm's loss and settings)."""
    calls = iter(range(10**9))

    def step():
        k = next(calls) % 2
        eager_step(model, loss_fn, opt, aug, images[k * batch:(k + 1) * batch], gen,
                   use_amp=bool(acfg.amp and cuda), channels_last=cuda, forward=acfg.forward)

    return step


def time_vision_shape(shape: dict, arms: list[str], paper, P: dict, device, emit) -> None:
    """Every arm's pretraining step on one model of this shape (the step's code path of
    ``pretrain``: ``eager_step``, the profile's optimiser, augmentation, precision)."""
    sp, cuda = P["steps"], device.type == "cuda"
    cfg = complete_config(replace(pretrain_config(paper, shape["dataset"], shape["backbone"],
                                                 arms[0], 7), image_size=shape["image_size"]))
    batch = sp["batch"] or cfg.batch_size
    if cuda:   # as pretrain() sets them
        torch.backends.cudnn.benchmark = True
        torch.set_float32_matmul_precision("high" if cfg.tf32 else "highest")
    torch.manual_seed(0)
    model = build_simclr_model(cfg.backbone, cfg.image_size, cfg.channels,
                               hidden_dim=cfg.proj_hidden, out_dim=cfg.proj_dim,
                               batch_norm=cfg.proj_batch_norm, conv1_init=cfg.conv1_init).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    opt = _build_optimizer(cfg, model)
    aug = build_augment(cfg.dataset, **{"image_size": cfg.image_size, **cfg.aug_kwargs})
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (2 * batch, cfg.channels, cfg.image_size, cfg.image_size),
                           generator=g, dtype=torch.uint8).to(device)
    gen = torch.Generator(device=device).manual_seed(1)
    for arm in arms:
        acfg = complete_config(replace(pretrain_config(paper, shape["dataset"], shape["backbone"],
                                                      arm, 7), image_size=shape["image_size"]))
        loss_fn = build_loss(acfg.loss, tau=acfg.tau, **acfg.loss_kwargs).to(device).train()
        res = _timed_steps(_vision_step(model, loss_fn, opt, aug, images, batch, gen, acfg, cuda),
                           device, sp["warmup"], sp["timed"])
        emit({"stage": "vision", "backbone": shape["backbone"],
              "image_size": shape["image_size"], "arm": arm, "amp": acfg.amp,
              "tf32": acfg.tf32, "batch": batch, "settings": shape["settings"], **res})
    del model, opt
    if cuda:
        torch.cuda.empty_cache()


def _text_step(model, loss_fn, opt, twice: dict, cfg, cuda: bool):
    """One SimCSE step on the batch ``twice`` (both dropout views in one forward)."""

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bool(cfg.amp and cuda)):
            _, z = model(**twice)
        z1, z2 = z.float().chunk(2)
        loss = loss_fn(z1, z2)
        if not torch.isfinite(loss):          # the training loop checks every step
            raise FloatingPointError("non-finite SimCSE loss")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()

    return step


def time_text(model_name: str, arms: list[str], paper, P: dict, device, emit) -> None:
    """The SimCSE step (``weince.train.simcse``: one forward over both dropout views, the
    loss on the pairs, gradient clipping, AdamW) on a random ``BertModel(BertConfig())``."""
    # the text extra; transformers reads HF_HUB_OFFLINE when first imported
    from transformers import BertConfig, BertModel  # noqa: PLC0415

    sp, cuda = P["steps"], device.type == "cuda"
    torch.manual_seed(0)
    model = SimCSEModel(BertModel(BertConfig(**sp["bert"]))).to(device).train()
    for arm in arms:
        cfg = replace(paper.text.simcse, loss=arm)
        batch = sp["text_batch"] or cfg.batch_size
        loss_fn = build_loss(arm, tau=cfg.tau, layout="pairs", **cfg.loss_kwargs).to(device)
        opt = _optimizer(model, cfg)
        g = torch.Generator().manual_seed(0)
        vocab = model.encoder.config.vocab_size     # ids past bert's [unusedN] tokens
        ids = torch.randint(min(1000, vocab // 2), vocab, (batch, cfg.max_length),
                            generator=g).to(device)
        twice = {"input_ids": torch.cat([ids, ids]), "attention_mask": torch.ones(
            2 * batch, cfg.max_length, dtype=torch.long, device=device)}
        res = _timed_steps(_text_step(model, loss_fn, opt, twice, cfg, cuda), device,
                           sp["warmup"], sp["timed"])
        emit({"stage": "text", "backbone": model_name, "image_size": None, "arm": arm,
              "amp": cfg.amp, "tf32": False,       # SimCSE has no TF32 option: full float32
              "batch": batch, "settings": [f"text/{model_name}"], **res})


def measured_yaml(rows: list[dict], gpu: str | None, source: str) -> str:
    """The ``cost.measured`` overlay of the planner: one entry per setting x arm."""
    out = ["# Median seconds per optimiser step, measured by benchmarks/gpu_acceptance.sh",
           "# (section 3); a config overlay for the planner (--configfile ... THIS_FILE).",
           "cost:", "  measured:"]
    for r in rows:
        if r.get("step_s_median") is None:
            continue
        fam = family_of_backbone("text" if r["stage"] == "text" else r["backbone"])
        prec = precision_of(fam, bool(r["amp"]), bool(r["tf32"]))
        for setting in r["settings"]:
            out += [f"    - gpu: {gpu if gpu else 'null'}",
                    f"      setting: {setting}",
                    f"      precision: {prec}",
                    f"      arm: {r['arm']}",
                    f"      batch: {int(r['batch'])}",
                    f"      step_s: {r['step_s_median']:.6f}",
                    f"      source: {json.dumps(source)}"]
    if out[-1] == "  measured:":
        out[-1] = "  measured: []"
    return "\n".join(out) + "\n"


def section_step_times(S: Section, P: dict, args) -> None:
    device = torch.device(P["device"])
    if P["steps"]["threads"]:
        torch.set_num_threads(P["steps"]["threads"])
    paper = paper_config()
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor() or "cpu"
    gpu = gpu_key(name) if device.type == "cuda" else None
    source = (f"benchmarks/gpu_acceptance.sh on {name}, torch {torch.__version__}"
              + ("" if device.type == "cuda" else " (CPU mode: tiny sizes, not a measurement)"))
    yaml_path = Path(args.section_out).parent / STEPS_YAML
    S.extra.update(gpu=gpu, device_name=name, yaml=str(yaml_path))
    sp = P["steps"]
    keys = ["data sets", "backbone", "image_size", "arm", "batch", "step_s_median", "img_s",
            "peak_mem_mb", "n_timed", "error"]

    def emit(row: dict) -> None:
        if row.get("step_s_median"):
            row["img_s"] = row["batch"] / row["step_s_median"]
        S.rows.append(row)
        write_atomic(yaml_path, measured_yaml([r for r in S.rows if "error" not in r], gpu,
                                              source))
        S.md = [f"Median seconds per optimiser step (`StepTimer`: synchronised, after "
                f"{sp['warmup']} warm-up steps, {sp['timed']} timed) of the paper profile's "
                f"pretraining step per backbone x image size x arm at the profile's batch "
                f"(2 x batch views; `img_s`: batch images per second), and of the SimCSE "
                f"step (random bert-base `BertModel`). `{STEPS_YAML}` beside this report "
                f"holds them as the planner's `cost.measured` overlay (gpu `{gpu}`; one entry "
                f"per data set of a shape)."]
        if sp["max_image_size"]:
            S.md[0] += (f" CPU mode: images capped at {sp['max_image_size']} px, batch "
                        f"{sp['batch']}, a tiny BERT.")
        S.md += [""] + table([{**r, "data sets": " ".join(x.split("/")[0] for x in r["settings"])}
                              for r in S.rows], keys)
        S.emit()

    jobs = [("vision", s) for s in step_shapes(paper, sp["max_image_size"])]
    if paper.text.enabled:
        jobs += [("text", m) for m in paper.text.models]
    for kind, what in jobs:
        label = (f"{what['backbone']}@{what['image_size']}" if kind == "vision" else what)
        if S.left() < 5:
            emit({"settings": [label], "error": "not run (section time)"})
            S.ok = False
            continue
        try:
            if kind == "vision":
                time_vision_shape(what, paper.vision.arms, paper, P, device, emit)
            else:
                time_text(what, paper.text.arms, paper, P, device, emit)
        except Exception as err:  # noqa: BLE001 - reported; the next shape goes on
            traceback.print_exc()
            emit({"settings": [label], "error": _error(err)})
            S.ok = False
            if device.type == "cuda":
                torch.cuda.empty_cache()


# ----------------------------------------------------------------------------- 4. C8
def section_c8(S: Section, P: dict, args) -> None:
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


# ----------------------------------------------------------------------------- 5. rehearsal
def rehearsal_command(data: Path, work: Path) -> list[str]:
    """Snakemake on the one-pair rehearsal, everything it writes under ``work``."""
    # node.jobs_per_gpu 8: the 8 jobs at a time share the one GPU (the slot pool would hold
    # them to the estimate's number per GPU)
    return [sys.executable, "-m", "snakemake", "--configfile", *PAIR_OVERLAYS, "--config",
            f"data_root={data}", f"results={work / 'results'}", f"reports={work / 'reports'}",
            "node={jobs_per_gpu: 8}", "--nolock"]


def dry_run_jobs(out: str) -> int | None:
    """The job count of a dry run's ``Job stats`` table (its ``total`` line)."""
    m = re.search(r"^total\s+(\d+)\s*$", out, re.M)
    return int(m.group(1)) if m else None


def section_rehearsal(S: Section, P: dict, args) -> None:
    if not all((REPO / c).exists() for c in PAIR_OVERLAYS):
        S.skipped = f"{' or '.join(PAIR_OVERLAYS[1:])} is not in this tree; nothing to rehearse"
        return
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        data, work = Path(tmp) / "data", Path(tmp) / "work"
        rc, out = _run([py, "-m", "weince.cli", "synthetic-data", "--root", str(data)],
                       S.left() / 4)
        S.md += [f"`weince synthetic-data --root DIR` -> exit {rc}", ""]
        if rc != 0:
            S.ok = False
            S.md += ["```", *out.strip().splitlines()[-15:], "```"]
            return
        base = rehearsal_command(data, work)
        rc, out = _run([*base, "-n", "--quiet", "rules", "--cores", "1"], S.left() / 3)
        jobs = dry_run_jobs(out)
        S.extra["jobs"] = jobs
        S.md += [f"Dry run: exit {rc}, {jobs} jobs (`snakemake --configfile "
                 f"{' '.join(PAIR_OVERLAYS)} -n`).", ""]
        if jobs is not None and jobs > REHEARSAL_MAX_JOBS:
            S.ok = False
            S.md += [f"More than the {REHEARSAL_MAX_JOBS} jobs this section's budget was "
                     f"planned for: not run. Re-plan it (PLAN in benchmarks/"
                     f"gpu_acceptance.py, docs/gpu.md).", ""]
            return
        if rc != 0 or P["rehearsal_dry_run"]:
            S.ok = rc == 0 and jobs is not None
            S.md += (["CPU mode: the dry run only, nothing trained.", ""] if S.ok else
                     ["```", *out.strip().splitlines()[-15:], "```"])
            return
        cmd = [*base, "--cores", str(os.cpu_count() or 1), "--max-threads", "2", "--keep-going"]
        rc, out = _run(cmd, S.left() - 5)
        S.ok = rc == 0
        failed = sorted(set(re.findall(r"^Error in rule (\w+):", out, re.M)))
        S.md += [f"`snakemake ... --cores {cmd[-4]} --max-threads 2 --keep-going` -> exit {rc}"
                 + (f"; failed rules: {', '.join(failed)}" if failed else ""), "",
                 "```", *out.strip().splitlines()[-12:], "```", ""]
        forecast = work / "reports" / "rehearsal" / "forecast.md"
        if forecast.exists():
            S.md += ["Forecast (`reports/rehearsal/forecast.md`):", "",
                     *forecast.read_text().splitlines()[:60]]
            res = forecast.with_name("resources.yaml")
            if res.exists():
                write_atomic(Path(args.section_out).parent / "rehearsal_resources.yaml",
                             res.read_text())
        else:
            S.ok = False
            S.md.append("no `reports/rehearsal/forecast.md` was written")


# ----------------------------------------------------------------------------- 6. shared
# one run of section 6 in its own process: its slot first, torch after (as a workflow job)
SHARED_CHILD = """
import sys
from weince.utils.gpu_slots import take_slot
slot = take_slot(1, int(sys.argv[1]), poll_s=0.05)
sys.path.insert(0, sys.argv[2])
from benchmarks import gpu_acceptance as GA
GA.shared_child(slot, *sys.argv[3:])
"""
SHARED_WAIT_S = 120   # the most one run of a pair waits for the other to be ready


def shared_child(slot, mode: str, root: str, work: str, name: str, peer: str) -> None:
    """One run of section 6 (section 2's float32 GPU run, or its CPU run in CPU mode), its
    slot and its start and end written to ``work/name.pt``; with a ``peer``, it starts
    training once the peer's process is ready too, so that the two overlap."""
    P = settings(mode == "cpu")
    (Path(work) / f"{name}.ready").touch()
    t_wait = time.time()
    while peer != "-" and not (Path(work) / f"{peer}.ready").exists():
        if time.time() - t_wait > SHARED_WAIT_S:
            raise TimeoutError(f"{peer} was not ready after {SHARED_WAIT_S} s")
        time.sleep(0.05)
    t0 = time.time()
    run = e2e_run(name, P["device"], P, Path(root), Path(work), tf32_conv=False,
                  threads=P["e2e"]["device_threads"], seed=E2E_SEED)
    torch.save({**run, "slot": None if slot is None else slot.record(), "t0": t0,
                "t1": time.time()}, Path(work) / f"{name}.pt")


def _shared_runs(names: list[str], per_gpu: int, P: dict, root: Path, work: Path,
                 env: dict, timeout: float) -> tuple[list[dict], list[str]]:
    """Runs ``names`` at once, each in its own process with ``jobs_per_gpu`` ``per_gpu``;
    their results, and the output tails of the processes that failed."""
    mode = "cpu" if P["device"] == "cpu" else "gpu"
    procs = []
    for i, name in enumerate(names):
        peer = names[1 - i] if len(names) == 2 else "-"
        cmd = [sys.executable, "-c", SHARED_CHILD, str(per_gpu), str(REPO), mode, str(root),
               str(work), name, peer]
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True))
    runs, failed = [], []
    for name, proc in zip(names, procs):
        try:
            out, _ = proc.communicate(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate()
        if proc.returncode != 0 or not (work / f"{name}.pt").exists():
            failed.append(f"{name}: exit {proc.returncode}: " + " | ".join(
                (out or "").strip().splitlines()[-6:]))
            continue
        runs.append(torch.load(work / f"{name}.pt", weights_only=False))
    return runs, failed


def shared_checks(alone: dict, pair: list[dict], exact: bool) -> list[dict]:
    """Section 6's checks: the pair on slots 0 and 1 of one device, at the same time, each
    equal to the run alone (bit for bit on the CPU, else section 2's float32 tolerances)."""
    slots = [r["slot"] or {} for r in pair]
    rows = [{"run": "alone", "check": "slot (jobs_per_gpu 1)", "value": (alone["slot"] or {})
             .get("slot"), "tolerance": "a device alone", "ok": alone["slot"] is not None
             and not alone["slot"]["shared"]},
            {"run": "pair", "check": "slots (jobs_per_gpu 2)",
             "value": ", ".join(str(s.get("slot")) for s in slots),
             "tolerance": "slots 0 and 1 of one device",
             "ok": len(slots) == 2 and all(s.get("shared") for s in slots)
             and len({tuple(s["devices"]) for s in slots}) == 1
             and sorted(s["index"] for s in slots) == [0, 1]},
            {"run": "pair", "check": "ran at the same time (s of overlap)",
             "value": min(r["t1"] for r in pair) - max(r["t0"] for r in pair),
             "tolerance": "> 0", "ok": min(r["t1"] for r in pair) > max(r["t0"] for r in pair)}]
    for r in pair:
        rows.append({"run": r["name"], "check": "images per second / alone's",
                     "value": (r["img_s"] or 0) / max(alone["img_s"] or 1e-9, 1e-9),
                     "tolerance": "(a measurement: the shared runs' step times)", "ok": True})
        if exact:
            same = (r["curve"] == alone["curve"] and torch.equal(r["h"], alone["h"])
                    and torch.equal(r["pred"], alone["pred"])
                    and (r["knn_acc"], r["linear_acc"]) == (alone["knn_acc"],
                                                            alone["linear_acc"]))
            rows.append({"run": r["name"], "check": "loss curve, features, predictions and "
                         "accuracies equal to the run alone", "value": same,
                         "tolerance": "bit for bit (CPU)", "ok": same})
        else:
            rows += [{**c, "run": r["name"]} for c in
                     e2e_checks(alone, r, TOLERANCES["float32"], "cuda", False)]
    return rows


def section_shared(S: Section, P: dict, args) -> None:
    cpu = P["device"] == "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        root = write_synthetic_data(Path(tmp) / "data")
        work = Path(tmp) / "runs"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("SLURM_JOB_ID", FAKE_ENV)}
        env.update({LOCK_DIR_ENV: str(Path(tmp) / "locks"),
                    "PYTHONPATH": os.pathsep.join([str(REPO / "src"),
                                                   os.environ.get("PYTHONPATH", "")])})
        if cpu:     # a fake device list: the pool's locks as on a GPU machine
            env[FAKE_ENV] = "1"
        else:       # one GPU: the first the machine shows this process
            first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()
            env[GPUS_ENV] = f"{first},"
        alone, failed = _shared_runs(["alone"], 1, P, root, work, env, S.left() / 2)
        pair, failed2 = ([], []) if failed else _shared_runs(
            ["shared_a", "shared_b"], 2, P, root, work, env, S.left() - 5)
        S.md = [f"Section 2's {'CPU' if cpu else 'float32 GPU'} run in its own process, "
                f"which takes a slot of the pool (`weince.utils.gpu_slots`) before torch: "
                f"once alone, then two at once with `jobs_per_gpu: 2` on one "
                f"{'fake device' if cpu else 'GPU'}.", ""]
        if failed or failed2 or len(pair) != 2:
            S.ok = False
            S.md += ["runs that failed:", "", *[f"- {f}" for f in failed + failed2]]
            return
        S.rows = shared_checks(alone[0], pair, exact=cpu)
        S.ok = all(r["ok"] for r in S.rows)
        S.extra["runs"] = [{k: v for k, v in r.items() if k not in ("h", "pred")}
                           for r in alone + pair]
        S.md += table([{**r, "value": f"{r['value']:.6g}" if isinstance(r["value"], float)
                        else r["value"]} for r in S.rows],
                      ["run", "check", "value", "tolerance", "ok"])


RUNNERS = {"cuda_tests": section_cuda_tests, "e2e": section_e2e,
           "step_times": section_step_times, "c8": section_c8, "rehearsal": section_rehearsal,
           "shared": section_shared}


def run_section(args) -> int:
    """The child process of one section."""
    P = settings(args.cpu)
    S = Section(Path(args.section_out), args.deadline)
    S.emit()
    try:
        RUNNERS[args.run_section](S, P, args)
    except Exception as err:  # noqa: BLE001 - the section reports its failure
        traceback.print_exc()
        S.ok = False
        S.md += ["", f"section failed: {_error(err)}"]
    S.emit()
    return 0


# ----------------------------------------------------------------------------- the plan
def plan_table() -> list[str]:
    """The plan's table (docs/gpu.md prints the same lines)."""
    out = ["| section | budget (s) | expected (s) | why |", "|---|---|---|---|",
           f"| launcher | {LAUNCHER_S} | {LAUNCHER_S} | carried wheels installed, torch imported |"]
    return out + [f"| `{n}` | {p['budget_s']} | {p['expected']} | {p['why']} |"
                  for n, p in PLAN.items()]


def plan_markdown() -> str:
    """The GPU plan: each section's budget and expected time, the cost model's time of
    section 3's steps on an H200, the one-pair rehearsal's job count (a dry run)."""
    paper = paper_config()
    sp = settings(False)["steps"]
    per_arm = sp["warmup"] + sp["timed"]
    est = estimate(paper, "h200")
    shapes = step_shapes(paper, None)
    keys = [(s["settings"][0], len(paper.vision.arms)) for s in shapes]
    keys += [(f"text/{m}", len(paper.text.arms)) for m in paper.text.models]
    lo = sum(est.settings[k].step_s[0] * per_arm * n for k, n in keys)
    hi = sum(est.settings[k].step_s[1] * per_arm * n for k, n in keys)
    with tempfile.TemporaryDirectory() as tmp:
        rc, out = _run([*rehearsal_command(Path(tmp) / "data", Path(tmp)), "-n", "--quiet",
                        "rules", "--cores", "1"], 300, env={"WEINCE_SKIP_PREFLIGHT": "1"})
    jobs = dry_run_jobs(out) if rc == 0 else None
    total = LAUNCHER_S + sum(p["budget_s"] for p in PLAN.values())
    return "\n".join([
        *plan_table(), "",
        f"Total budget: {total} s. Section 3: {len(shapes)} shapes x "
        f"{len(paper.vision.arms)} arms and {len(paper.text.models)} text model x "
        f"{len(paper.text.arms)} arms, {per_arm} steps each: {lo:.0f}-{hi:.0f} s of "
        f"steps on an H200 by the cost model (`weince.cost.estimate.estimate`). Section 5: "
        f"{jobs} jobs in the dry run of `snakemake --configfile {' '.join(PAIR_OVERLAYS)}` "
        f"(at most {REHEARSAL_MAX_JOBS} fit its budget)."])


# ----------------------------------------------------------------------------- report
def environment(cpu: bool) -> dict:
    env = {"torch": torch.__version__, "pinned_torch": PINNED_TORCH,
           "python": platform.python_version(), "cuda": torch.version.cuda,
           "device": (torch.cuda.get_device_name(0) if torch.cuda.is_available() and not cpu
                      else platform.processor() or "cpu"),
           "threads": torch.get_num_threads(), "cpus": os.cpu_count()}
    try:
        import triton  # noqa: PLC0415 - optional: the CPU machine may have none
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
             f"- device: {env['device']}; torch threads {env['threads']}, CPUs {env.get('cpus')}"]
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


def parse_args(argv):
    p = argparse.ArgumentParser(description="GPU acceptance run (see benchmarks/gpu_acceptance.sh)")
    p.add_argument("report", nargs="?", default=None,
                   help="Markdown report (default: ${OUT:-gpu_acceptance_out}/gpu_acceptance.md); "
                        "its JSON twin and measured_steps.yaml are written beside it")
    p.add_argument("--cpu", action="store_true",
                   default=bool(os.environ.get("WEINCE_ACCEPTANCE_CPU")),
                   help="tiny sizes on the CPU (the test suite runs this)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run, from the shell's start (GPU default 480, "
                        "CPU 900)")
    p.add_argument("--sections", nargs="+", choices=[n for n, _ in SECTIONS], default=None,
                   help="run only these sections (in the fixed order)")
    p.add_argument("--plan", action="store_true",
                   help="print the GPU plan (budgets, the cost model's step times, the "
                        "rehearsal's job count) and exit")
    p.add_argument("--run-section", default=None, help=argparse.SUPPRESS)
    p.add_argument("--section-out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run_one(name: str, state: dict, report: Path, timeout: float, args, running: dict) -> None:
    """One section in its own process group (``running["child"]`` while it runs); its
    result file into ``state``."""
    sec = state["sections"][name]
    out = report.with_name(f".{report.stem}.{name}.json")
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run-section", name,
           "--section-out", str(out), "--deadline", str(time.time() + timeout)]
    if args.cpu:
        cmd.append("--cpu")
    t0 = time.time()
    child = subprocess.Popen(cmd, cwd=REPO, start_new_session=True)
    running["child"] = child
    sec.update(status="running", timeout_s=timeout, pid=child.pid)
    save(state, report)
    try:
        rc = child.wait(timeout=timeout + 10)   # the section watches its own deadline
    except subprocess.TimeoutExpired:
        _kill_group(child)
        rc = None
    running["child"] = None
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


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.run_section:
        return run_section(args)
    if args.plan:
        print(plan_markdown())
        return 0

    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA device visible: run with --cpu for the tiny CPU mode", file=sys.stderr)
        return 2
    report = Path(args.report or Path(os.environ.get("OUT", "gpu_acceptance_out")) /
                  "gpu_acceptance.md").resolve()
    P = settings(args.cpu)
    budget = args.budget or P["budget"]
    names = [n for n, _ in SECTIONS if args.sections is None or n in args.sections]
    t0 = float(os.environ.get("WEINCE_ACCEPTANCE_T0") or time.time())   # the shell's start
    state = {"mode": "CPU (tiny sizes: the code paths run; no number here is a measurement)"
             if args.cpu else "GPU", "command": " ".join(
                 ["bash benchmarks/gpu_acceptance.sh",
                  *(argv if argv is not None else sys.argv[1:])]),
             "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t0)),
             "t0": t0, "budget_s": budget, "environment": environment(args.cpu),
             "sections": {n: {"status": "pending", "title": TITLES[n]} for n in names},
             "finished": False}
    report.with_name(STEPS_YAML).unlink(missing_ok=True)   # never a stale earlier run's
    save(state, report)
    running: dict = {"child": None}

    def stop(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    end = t0 + budget
    try:
        for i, name in enumerate(names):
            left = end - time.time()
            timeout = left * PLAN[name]["budget_s"] / sum(PLAN[n]["budget_s"] for n in names[i:])
            if timeout < (3 if args.cpu else 15):
                state["sections"][name].update(status="skipped",
                                               reason=f"budget spent ({left:.0f} s left)")
                save(state, report)
                continue
            run_one(name, state, report, timeout, args, running)
    except Interrupted as sig:
        if running["child"] is not None:
            _kill_group(running["child"])
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
