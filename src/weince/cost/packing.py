"""How many training runs of a setting share one GPU on a machine without a scheduler
(``node.jobs_per_gpu``; docs/cluster.md, "One machine with several GPUs"), and what that
does to the wall time of a node.

    from weince.cost.packing import packing, node_wall
    packing(prof, "cifar100/resnet18", "h100-sxm").jobs_per_gpu   # 4 with the defaults
    node_wall(prof, est, "8xh100-sxm", runs)                        # the planner's lines

``jobs_per_gpu: auto`` (the default) is derived from the cost model's own figures, per
setting and GPU, without a GPU:

- **memory**: the calibration runs of the throughput model (devices.yaml) use Lambda's
  batch for the card's memory class, a batch near the largest that fits; their card memory
  / (batch x training FLOPs per example) is the memory one FLOP of a step holds (activations
  dominate; ~10 bytes per FLOP for ResNet-50 in TF32). A run needs its step's FLOPs times
  that, plus :data:`CONTEXT_GB` for its process (CUDA context, caching allocator); the runs
  on a GPU may fill :data:`MEMORY_USE` of it.
- **utilisation**: the throughput model's rate is measured at the calibration runs' steps;
  a step with a fraction ``u`` of their FLOPs keeps the GPU busy about ``u`` of the time at
  best (its kernels are smaller and the host's work per step does not shrink with it), so
  ``floor(1 / u)`` runs fit before they slow each other.
- ``jobs_per_gpu`` = the smaller of the two fits and ``node.max_jobs_per_gpu`` (4), at
  least 1: 1 where a run fills the GPU.

Both are estimates. A shared run's ``train.json`` says so beside its measured step time
(``step_timing.gpu_slot``), and the GPU acceptance check measures the slowdown of two runs
on one GPU; a setting whose packed runs turn out slower than alone sets ``jobs_per_gpu: 1``.

Packing changes no result: a job's numbers depend on its seed and settings, never on the
device it shares (on the CPU bit for bit; on a GPU within the documented tolerance).
"""

from __future__ import annotations

import heapq
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weince.cost.throughput import device, example_flops, load_devices, rates
from weince.pipeline.profile import Profile

__all__ = ["Packing", "packing", "jobs_per_gpu", "job_jobs_per_gpu", "setting_of_job",
           "parse_node", "node_wall", "node_lines", "CONTEXT_GB", "MEMORY_USE", "ALONE_RULES"]

# rules whose job has its GPU alone whatever the packing: the timing job measures the loss's
# and the step's time, which a shared GPU would change
ALONE_RULES = frozenset({"timing"})

CONTEXT_GB = 1.5     # one process's CUDA context and allocator reserve, beyond its tensors
MEMORY_USE = 0.9     # the share of a card's memory the runs on it may fill together
_NODE_RE = re.compile(r"^(\d+)\s*[xX*]\s*([A-Za-z0-9._-]+)$")


@dataclass(frozen=True)
class Packing:
    """The packing of one setting on one GPU type: ``jobs_per_gpu`` and what it rests on."""

    key: str
    gpu: str
    jobs_per_gpu: int
    memory_gb: float          # one run's estimated memory
    utilisation: float        # one run's estimated share of the GPU's time, 0-1
    memory_fit: int
    utilisation_fit: int
    cap: int
    source: str               # "estimate" | "config"

    @property
    def slowdown(self) -> float:
        """Each run's time at ``jobs_per_gpu`` on one GPU over its time alone (estimate):
        1 while the runs' utilisations add up to no more than the GPU, else their sum."""
        return max(1.0, self.jobs_per_gpu * self.utilisation)

    def why(self) -> str:
        return (f"{self.key} on {self.gpu}: {self.jobs_per_gpu} per GPU ({self.source}; "
                f"estimate: ~{self.memory_gb:.1f} GB and ~{self.utilisation:.0%} of the GPU "
                f"per run, so {self.memory_fit} fit its memory and {self.utilisation_fit} its "
                f"time, at most {self.cap})")


def _calibration(gpu: str, family: str, precision: str) -> list[dict[str, Any]]:
    """The calibration measurements behind the rate of (gpu, family, precision), with a
    batch (so a step's FLOPs are known)."""
    cell = rates().get((gpu, family, precision))
    ids = set(cell["from"]) if cell else set()
    return [m for m in load_devices()["measurements"]
            if m["id"] in ids and m.get("batch") and "model" in m]


def _step_flops(m: Mapping[str, Any]) -> float:
    size = int(m.get("image_size") or m.get("seq_len") or 0)
    return float(m["batch"]) * example_flops(m["model"], size)


def _bytes_per_flop(gpu: str, family: str, precision: str) -> float:
    """Memory per training FLOP of a step: a card's memory over the FLOPs of the Lambda
    calibration step sized for it (the family's own, else BERT's for ViT: transformers)."""
    for fam in (family, "bert"):
        runs = [m for m in load_devices()["measurements"]
                if m["use"] == "calibration" and str(m.get("source", "")).startswith("lambda")
                and m.get("batch") and "model" in m and m["precision"] == precision
                and _family(m) == fam]
        if runs:
            return statistics.median(float(device(m["gpu"])["memory_gb"]) * 1e9
                                     / _step_flops(m) for m in runs)
    raise ValueError(f"no calibration run in {precision} to size the memory of a {family} "
                     f"step: set node.jobs_per_gpu for this setting")


def _family(m: Mapping[str, Any]) -> str:
    from weince.cost.throughput import family_of  # noqa: PLC0415 - one helper, no cycle

    return m.get("family") or family_of(m["model"])


def _config_value(prof: Profile, key: str) -> int | None:
    """``node.jobs_per_gpu`` for ``key``: a number for every setting, or a mapping of
    settings (and ``default``) to numbers; None where it says ``auto``."""
    given = (prof.config.get("node") or {}).get("jobs_per_gpu", "auto")
    if isinstance(given, Mapping):
        given = given.get(key, given.get("default", "auto"))
    return None if given in (None, "auto") else int(given)


def packing(prof: Profile, key: str, gpu: str | None = None) -> Packing:
    """The packing of setting ``key`` (``dataset/backbone`` or ``text/<model>``) on ``gpu``
    (default: the card of ``cost.gpu`` with the least memory): the config's
    ``node.jobs_per_gpu`` where it gives a number, else the estimate (module docstring)."""
    from weince.cost.estimate import _settings_for, gpu_set  # noqa: PLC0415 - no cycle

    gpus = gpu_set(prof, gpu)
    g = min(gpus, key=lambda n: float(device(n)["memory_gb"]))
    s = _settings_for(prof, key) if gpu is None else _setting_on(prof, key, g)
    calib = _calibration(g, s.family, s.precision)
    util = min(1.0, s.flops_per_step / statistics.median(_step_flops(m) for m in calib)) \
        if calib else 1.0
    mem = CONTEXT_GB + s.flops_per_step * _bytes_per_flop(g, s.family, s.precision) / 1e9
    cap = int((prof.config.get("node") or {}).get("max_jobs_per_gpu", 4))
    mem_fit = max(1, math.floor(MEMORY_USE * float(device(g)["memory_gb"]) / mem))
    util_fit = max(1, math.floor(1.0 / max(util, 1e-9)))
    given = _config_value(prof, key)
    n = given if given is not None else max(1, min(cap, mem_fit, util_fit))
    return Packing(key, g, n, mem, util, mem_fit, util_fit, cap,
                   "config" if given is not None else "estimate")


def _setting_on(prof: Profile, key: str, gpu: str) -> Any:
    from weince.cost.estimate import _text_setting, _vision_setting  # noqa: PLC0415

    if key.startswith("text/"):
        return _text_setting(prof, key.split("/", 1)[1], [gpu])
    d, b = key.split("/")
    return _vision_setting(prof, d, b, [gpu])


def jobs_per_gpu(prof: Profile, key: str, gpu: str | None = None) -> int:
    """``packing(prof, key, gpu).jobs_per_gpu``."""
    return packing(prof, key, gpu).jobs_per_gpu


def setting_of_job(wildcards: Mapping[str, str]) -> str | None:
    """The setting (``dataset/backbone`` or ``text/<model>``) of a job's wildcards (a fused
    vision job's ``prefix`` is ``dataset/backbone/arm``); None for a job of no setting."""
    if "dataset" in wildcards and "backbone" in wildcards:
        return f"{wildcards['dataset']}/{wildcards['backbone']}"
    if "prefix" in wildcards:
        return "/".join(str(wildcards["prefix"]).split("/")[:2])
    if "model" in wildcards:
        return f"text/{wildcards['model']}"
    return None


def job_jobs_per_gpu(prof: Profile, rule: str, wildcards: Mapping[str, str]) -> int:
    """The ``jobs_per_gpu`` resource of one GPU job (its slot's sharing): 1 for
    :data:`ALONE_RULES` and jobs of no setting, else its setting's number from the config,
    else the estimate on ``cost.gpu`` (1 where the cost model cannot price the setting)."""
    key = setting_of_job(wildcards)
    if rule in ALONE_RULES or key is None:
        return 1
    given = _config_value(prof, key)
    if given is not None:
        return given
    memo = (prof.config_hash, key)
    if memo not in _JOBS:
        try:
            _JOBS[memo] = packing(prof, key).jobs_per_gpu
        except (ValueError, KeyError):
            _JOBS[memo] = 1
    return _JOBS[memo]


_JOBS: dict[tuple[str, str], int] = {}   # (config hash, setting) -> the estimate's number


def parse_node(text: str) -> tuple[int, str]:
    """``8xh100-sxm`` -> ``(8, "h100-sxm")``; the GPU checked against devices.yaml."""
    m = _NODE_RE.match(str(text).strip())
    if not m or int(m.group(1)) < 1:
        raise ValueError(f"--node {text!r}: give the GPU count and a GPU type of the cost "
                         f"model, e.g. 8xh100-sxm")
    gpu = m.group(2).lower()
    device(gpu)
    return int(m.group(1)), gpu


def _makespan(durations: Sequence[float], slots: int) -> float:
    """Wall time of independent jobs on ``slots`` slots, longest first onto the slot that
    frees first (each job waits only for a slot)."""
    free = [0.0] * max(1, slots)
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(free, free[0] + d)
    return max(free)


def node_wall(runs: Sequence[Any], packs: Mapping[str, Packing], gpus: int,
              packed: bool) -> tuple[float, float]:
    """(low, high) wall hours of ``runs`` (:class:`~weince.cost.estimate.RunEstimate`) on
    ``gpus`` GPUs: alone (one run per GPU) or at each setting's ``jobs_per_gpu``, a run then
    taking its time alone x :attr:`Packing.slowdown`. The runs of one packing go onto
    ``gpus x jobs_per_gpu`` slots; settings with different packings run one after another
    (their jobs do not share a GPU: sharing jobs wait for an exclusive one's GPU)."""
    out = []
    for end in (0, 1):
        total = 0.0
        for per in sorted({packs[r.setting.key].jobs_per_gpu if packed else 1 for r in runs}):
            group = [r for r in runs
                     if (packs[r.setting.key].jobs_per_gpu if packed else 1) == per]
            times = [r.hours[end] * (packs[r.setting.key].slowdown if packed else 1.0)
                     for r in group]
            total += _makespan(times, gpus * per)
        out.append(total)
    return out[0], out[1]


def node_lines(runs: Sequence[Any], gpu_hours: tuple[float, float], node: str,
               prof: Profile) -> list[str]:
    """The planner's lines for ``--node``: the runs' wall time on the node at one run per
    GPU and at the configured packing, beside their GPU-hours."""
    from weince.cost.estimate import hours_range  # noqa: PLC0415 - no cycle

    count, gpu = parse_node(node)
    keys = sorted({r.setting.key for r in runs})
    packs = {k: packing(prof, k, gpu) for k in keys}
    alone = node_wall(runs, packs, count, packed=False)
    packed = node_wall(runs, packs, count, packed=True)
    name = device(gpu)["name"]
    L = [f"On one machine with {count} x {name} (--node {node}), {len(runs)} training runs, "
         f"GPU-hours {hours_range(*gpu_hours)}:",
         f"- wall time at one run per GPU: {hours_range(*alone)} h",
         f"- wall time at the configured runs per GPU: {hours_range(*packed)} h "
         f"(node.jobs_per_gpu; GPU-hours of the GPUs held: "
         f"{hours_range(packed[0] * count, packed[1] * count)})"]
    L += [f"  - {packs[k].why()}; each run ~{packs[k].slowdown:.2f}x its time alone"
          for k in keys]
    L.append("  (training runs only, each waiting for a slot, not for its inputs: the grid's "
             "selection before its final runs and the evaluation jobs add to it; a shared "
             "run's slowdown counts the GPU's time only, not contention for memory bandwidth "
             "or the host's cores, so the packed figure is a lower bound)")
    return L
