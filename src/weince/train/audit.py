"""Training states committed as training goes, and segments replayed from them (the training
audit of ``docs/reviewing.md``, after proof-of-learning, Jia et al., IEEE S&P 2021).

Both loops (:mod:`weince.train.simclr`, :mod:`weince.train.simcse`) hold an :class:`Auditor`:

- at every epoch end the SHA-256 of the weights (:func:`weights_digest`) goes into that
  epoch's ``train_log.jsonl`` record (``weights_sha256``): a chain committed as training goes;
- at :data:`AUDIT_POINTS` audit points the digest of the full training state
  (:func:`state_digest`: weights, optimiser, schedule, loss buffers, every random
  generator and the position in the data order, what resume uses) is recorded at the point
  and :data:`SEGMENT_STEPS` optimiser steps later: an *audit segment*. ``train.json``'s
  ``audit`` block lists them.

The audit points are a function of the run's config, known to anyone who has it:
:func:`audit_points` seeds Python's ``random.Random`` with the first 16 hex digits of
``sha256("weince-audit:" + h)``, where ``h`` is :func:`audit_hash` of the run's config (its
``config_hash`` without the keys that never change a result: threads, progress, ...), and
draws ``AUDIT_POINTS`` distinct start steps in ``[0, total_steps - SEGMENT_STEPS]``
(fewer when the run has fewer positions). A step count is the number of optimiser steps
done since the start of the run.

``keep_states`` (a training option) says which states stay on disk, in ``audit/`` of the
run folder as ``step-<n>.pt`` (the checkpoint format, loadable with ``weights_only``):
``none`` (digests only), ``audit`` (the start and end state of every audit segment: what
``weince bundle --with-audit`` ships; the default) or ``epochs`` (also the state at every
epoch end, so that a site can be asked for any epoch of its digest chain).

Nothing here draws a random number or changes the order of the steps: a state is read
(``state_dict``, ``get_state``), never written, so a run with the audit trains the same
weights as one without.

:class:`Replay` stands in for the auditor when a segment is replayed
(:mod:`weince.bundle.retrain`): the loop resumes from the segment's start state instead of
``checkpoint.pt`` and stops with :class:`SegmentDone`, carrying the state, after the
segment's last step.
"""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from weince.train.config import AUDIT_POINTS, SEGMENT_STEPS
from weince.utils.checkpoint import load_torch_file, save_checkpoint
from weince.utils.provenance import config_hash

__all__ = ["AUDIT_POINTS", "SEGMENT_STEPS", "KEEP_STATES", "STATE_KEYS", "audit_hash",
           "audit_points", "state_digest", "weights_digest", "weights_of", "Auditor",
           "Replay", "SegmentDone", "load_state", "state_file"]

KEEP_STATES = ("none", "audit", "epochs")
#: the entries of a state that its digest covers (the training state; not the log, timings,
#: the running loss sums of an epoch or the config)
STATE_KEYS = ("model", "optimizer", "scheduler", "loss", "rng", "rng_ranks", "shuffle_gen",
              "aug_gen", "epoch", "step")
_FREE = frozenset({"progress", "timing_warmup", "num_workers", "threads", "compile",
                   "compile_step", "data_root", "download", "keep_checkpoint", "tensorboard",
                   "keep_states", "device", "eval_batch_size"})


def audit_hash(cfg: Mapping[str, Any]) -> str:
    """The config hash the audit points derive from: :func:`config_hash` of ``cfg`` without
    the keys that never change a result (so a resumed run with other threads keeps its
    points)."""
    return config_hash({k: v for k, v in cfg.items() if k not in _FREE})


def audit_points(chash: str, total_steps: int, n: int = AUDIT_POINTS,
                 span: int = SEGMENT_STEPS) -> tuple[list[int], int]:
    """``(starts, span)``: the sorted start steps of the run's audit segments and their
    length (``span`` shortened to ``total_steps`` for a run shorter than it)."""
    span = max(0, min(int(span), int(total_steps)))
    if span < 1:
        return [], 0
    seed = int(hashlib.sha256(f"weince-audit:{chash}".encode()).hexdigest()[:16], 16)
    positions = list(range(0, int(total_steps) - span + 1))
    return sorted(random.Random(seed).sample(positions, min(n, len(positions)))), span


def _feed(h: Any, path: str, value: Any) -> None:
    """Hash one entry canonically (sorted keys; tensors by dtype, shape and bytes)."""
    if isinstance(value, Mapping):
        for k in sorted(value, key=str):
            _feed(h, f"{path}/{k}", value[k])
    elif isinstance(value, (list, tuple)):
        h.update(f"{path}:seq{len(value)};".encode())
        for i, v in enumerate(value):
            _feed(h, f"{path}[{i}]", v)
    elif torch.is_tensor(value):
        t = value.detach().cpu().contiguous()
        h.update(f"{path}:{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif callable(value):   # a scheduler's lambda: named, not hashed by address
        h.update(f"{path}:fn;".encode())
    else:
        h.update(f"{path}={value!r};".encode())


def state_digest(state: Mapping[str, Any]) -> str:
    """SHA-256 of a training state's :data:`STATE_KEYS` entries, independent of the file
    format and of the order of dict keys."""
    h = hashlib.sha256()
    for key in STATE_KEYS:
        if key in state:
            _feed(h, key, state[key])
    in_epoch = state.get("in_epoch")
    if in_epoch:        # the position inside an epoch (its running loss sums are not state)
        _feed(h, "in_epoch_step", int(in_epoch["step"]))
    return h.hexdigest()


def weights_digest(model_state: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 of a model's ``state_dict`` (names, dtypes, shapes, bytes)."""
    h = hashlib.sha256()
    _feed(h, "model", model_state)
    return h.hexdigest()


def weights_of(state: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The trained weights of a state's model (floating-point entries, not BatchNorm's
    running statistics), in float64 on the CPU: what the attribution distance measures."""
    return {k: v.detach().cpu().double() for k, v in state["model"].items()
            if torch.is_tensor(v) and v.is_floating_point() and "running_" not in k}


def state_file(out: Path, step: int) -> Path:
    return out / "audit" / f"step-{int(step):06d}.pt"


def load_state(path: str | Path) -> dict[str, Any]:
    """A state written by the audit (``weights_only``: it runs no code)."""
    state = load_torch_file(path, what="training audit state",
                            remake="ask the archive's site for it (or bundle --with-audit)")
    if not isinstance(state, dict) or "model" not in state:
        raise ValueError(f"{path}: not a training state (no model entry)")
    return state


class SegmentDone(Exception):
    """A replay reached the end of its segment; ``state`` is the training state there."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__("segment done")
        self.state = state


class Auditor:
    """The audit of one training run (module docstring). The loop calls :meth:`begin` once
    it knows its step count, :meth:`restore` after a resume, asks :meth:`wants` after every
    step (and before the first one: step 0) and hands the state to :meth:`record`;
    :meth:`epoch_end` gives the epoch record's digest; :meth:`summary` goes into
    ``train.json``, :meth:`records` into the checkpoint."""

    replay = False

    def __init__(self, out: Path, keep_states: str = "audit", *, main: bool = True) -> None:
        if keep_states not in KEEP_STATES:
            raise ValueError(f"keep_states must be one of {', '.join(KEEP_STATES)}, got "
                             f"{keep_states!r}")
        self.out, self.keep, self.main = Path(out), keep_states, main
        self.starts: list[int] = []
        self.span = 0
        self.hash = ""
        self.spe = 0
        self.digests: dict[int, str] = {}

    def begin(self, cfg: Mapping[str, Any], total_steps: int, steps_per_epoch: int) -> None:
        self.hash = audit_hash(cfg)
        self.starts, self.span = audit_points(self.hash, total_steps)
        self.spe = int(steps_per_epoch)

    def restore(self, records: Mapping[str, Any] | None) -> None:
        """The digests recorded before an interruption (the checkpoint's ``audit``)."""
        for k, v in dict((records or {}).get("digests") or {}).items():
            self.digests[int(k)] = str(v)

    def records(self) -> dict[str, Any]:
        return {"digests": {str(k): v for k, v in sorted(self.digests.items())}}

    def audit_steps(self) -> set[int]:
        return {s for a in self.starts for s in (a, a + self.span)}

    def wants(self, step: int) -> bool:
        """Whether the state after ``step`` optimiser steps is recorded (every rank takes
        the same decision)."""
        if step in self.audit_steps():
            return True
        return self.keep == "epochs" and self.spe > 0 and step > 0 and step % self.spe == 0

    def record(self, step: int, state: Callable[[], dict[str, Any]]) -> None:
        """Digest (and, as ``keep_states`` says, save) the state after ``step`` steps."""
        st = state()
        if not self.main:
            return
        self.digests[int(step)] = state_digest(st)
        if self.keep == "epochs" or (self.keep == "audit" and step in self.audit_steps()):
            save_checkpoint(state_file(self.out, step), **st)

    def epoch_end(self, model_state: Mapping[str, torch.Tensor]) -> dict[str, str]:
        """The epoch record's ``weights_sha256``."""
        return {"weights_sha256": weights_digest(model_state)}

    def summary(self) -> dict[str, Any]:
        """``train.json``'s ``audit`` block."""
        segs = []
        for a in self.starts:
            b = a + self.span
            segs.append({"start": a, "end": b, "start_sha256": self.digests.get(a),
                         "end_sha256": self.digests.get(b),
                         "start_file": f"audit/{state_file(Path(), a).name}"
                         if self.keep != "none" else None,
                         "end_file": f"audit/{state_file(Path(), b).name}"
                         if self.keep != "none" else None})
        return {"audit_hash": self.hash, "points": AUDIT_POINTS, "segment_steps": self.span,
                "keep_states": self.keep, "torch_threads": torch.get_num_threads(),
                "segments": segs,
                "states_sha256": {str(k): v for k, v in sorted(self.digests.items())}}

    # -- hooks a replay overrides
    def start_state(self, cfg: Mapping[str, Any], fresh: Callable[[], dict[str, Any]]
                    ) -> dict[str, Any] | None:
        return None

    def prepare(self, job: Any) -> None:
        return None


class Replay(Auditor):
    """Replays one segment: the loop resumes from ``start`` (a state of :func:`load_state`)
    and raises :class:`SegmentDone` after step ``end``. ``fresh()`` (the loop's) gives the
    loss buffers of a loss other than the state's (another arm replays from the same start).
    ``dtype=torch.float64`` replays the network and the optimiser in float64 (the loss stays
    float32, as the loops compute it): a stand-in for another device's rounding."""

    replay = True

    def __init__(self, start: Mapping[str, Any], end: int, *,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__(Path("."), "none")
        self.start, self.end, self.dtype = dict(start), int(end), dtype

    def begin(self, cfg: Mapping[str, Any], total_steps: int, steps_per_epoch: int) -> None:
        self.spe = int(steps_per_epoch)

    def wants(self, step: int) -> bool:
        return step == self.end

    def record(self, step: int, state: Callable[[], dict[str, Any]]) -> None:
        raise SegmentDone(state())

    def start_state(self, cfg: Mapping[str, Any], fresh: Callable[[], dict[str, Any]]
                    ) -> dict[str, Any] | None:
        # a copy: the optimiser takes the moments' tensors as they are and updates them in
        # place, and the same start is replayed under every arm
        st = copy.deepcopy(self.start)
        own = fresh()
        if set(st.get("loss") or {}) != set(own.get("loss") or {}):
            st["loss"] = own["loss"]    # another arm's loss: its own (fresh) buffers
        if _kind(st.get("device")) != _kind(own.get("device")):
            # a generator that lives on the run's device cannot move to another kind of
            # device: this replay draws its augmentations from its own (seeded) one
            st["device"], st["aug_gen"] = own.get("device"), own.get("aug_gen")
        return {**own, **{k: v for k, v in st.items() if k in own or k == "in_epoch"},
                "cfg": dict(cfg), "log": [], "preempted": []}

    def prepare(self, job: Any) -> None:
        """A float64 replay: the model, the optimiser's moments and the inputs in float64."""
        if self.dtype != torch.float64:
            return
        job.model.double()
        opt = job.opt if hasattr(job, "opt") else job.optimizer
        for st in opt.state.values():
            for k, v in list(st.items()):
                if torch.is_tensor(v) and v.is_floating_point() and k != "step":
                    st[k] = v.double()
        job.fwd = _AsDouble(job.fwd)


def _kind(device: Any) -> str | None:
    return None if device is None else torch.device(str(device)).type


class _AsDouble(torch.nn.Module):
    """Calls a model with its floating-point inputs in float64."""

    def __init__(self, inner: Callable[..., Any]) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        cast = [a.double() if torch.is_tensor(a) and a.is_floating_point() else a for a in args]
        return self.inner(*cast, **kwargs)


def segments_of(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The audit segments a ``train.json`` records (none before the audit existed)."""
    return list(((summary.get("audit") or {}).get("segments")) or [])


def missing(run: Path, segs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The state files of ``segs`` that are not in ``run``."""
    out = []
    for s in segs:
        for key in ("start_file", "end_file"):
            name = s.get(key)
            if not name or not (run / name).is_file():
                out.append(str(name or f"step {s.get(key[:-5])} (not kept)"))
    return out
