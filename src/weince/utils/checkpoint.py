"""Atomic checkpoints with RNG state, for automatic resume after an interruption.

A training loop calls :func:`save_checkpoint` at the end of every epoch and
:func:`load_checkpoint` at start; ``restore_rng`` puts back python/numpy/torch (CPU and
CUDA) generators so that a resumed CPU run reproduces an uninterrupted one bit for bit.

Random state across machines: a checkpoint keeps the CUDA generator of the device the run
used (``rng_state(device)``), not one state per visible GPU, so it resumes where fewer (or
no) GPUs are visible; a state saved on ``cuda:1`` continues on whatever CUDA device the
resumed run uses. Older checkpoints with one state per visible GPU (a list) are read too.
A generator that lives on the training device (the augmentation generator) cannot move
between a CPU and a GPU (their states differ in kind and size): :func:`restore_generator`
and :func:`check_resume_device` say so, naming the devices and the fix, instead of failing
in ``Generator.set_state``.

Every torch file the package reads (checkpoints, ``encoder.pt``, ``features.pt``) goes
through :func:`load_torch_file`, which loads with ``weights_only=True``: a file holds only
tensors, numbers, strings and plain containers, so opening a file from someone else can
never run code. The RNG states are stored in that form too (python's and numpy's
Mersenne-Twister keys as int64 tensors). A file that needs more (an old checkpoint with
pickled numpy objects, or a crafted one) is refused with an error that names the file and
the command that remakes it; there is no fallback to an unsafe load.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import random
import re
import zipfile
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from weince.utils.digest import (DigestMismatch, check_recorded, record_path,
                                 record_replacement)
from weince.utils.diskspace import atomic_write, payload_bytes

__all__ = ["release_checkpoint", "rng_state", "restore_rng", "save_checkpoint", "load_checkpoint",
           "seed_everything",
           "torch_threads", "load_torch_file", "UnreadableFileError", "ResumeDeviceError",
           "check_resume_device", "restore_generator"]


class ResumeDeviceError(ValueError):
    """A checkpoint's device-bound random state cannot continue on this run's device."""


class UnreadableFileError(ValueError):
    """A file the package reads is corrupt, truncated or not of the expected kind (or would
    need an unsafe load); the message names the file and how to remake it."""


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Run the block with ``torch.set_num_threads(n)`` (unchanged when ``n`` is falsy) and
    restore the previous count afterwards."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def _cuda_device(device) -> torch.device | None:
    """The CUDA device a run uses (``None`` for a CPU run or when CUDA is unavailable);
    ``device=None`` means the current CUDA device if CUDA has been initialised."""
    if not torch.cuda.is_available():
        return None
    if device is None:
        if not torch.cuda.is_initialized():
            return None
        return torch.device("cuda", torch.cuda.current_device())
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return torch.device("cuda", torch.cuda.current_device() if device.index is None
                        else device.index)


def rng_state(device: str | torch.device | None = None) -> dict[str, Any]:
    """Every global generator's state as tensors and plain numbers (``weights_only``-safe).

    ``device``: the run's device. For a CUDA device, that device's generator is kept (as
    ``{"cuda": {"device": "cuda:N", "state": ...}}``), never the other visible GPUs'."""
    version, keys, gauss = random.getstate()
    # the legacy tuple (the default); its stub's return type also admits the dict form
    name, np_keys, pos, has_gauss, cached = cast(tuple[str, np.ndarray, int, int, float],
                                                 np.random.get_state())
    state = {
        "python": {"version": int(version), "keys": torch.tensor(keys, dtype=torch.int64),
                   "gauss": gauss},
        "numpy": {"name": str(name), "keys": torch.from_numpy(np_keys.astype(np.int64)),
                  "pos": int(pos), "has_gauss": int(has_gauss), "cached": float(cached)},
        "torch": torch.get_rng_state(),
    }
    cuda = _cuda_device(device)
    if cuda is not None:
        state["cuda"] = {"device": str(cuda), "state": torch.cuda.get_rng_state(cuda)}
    return state


def restore_rng(state: dict[str, Any], device: str | torch.device | None = None) -> None:
    """Put back the generators of :func:`rng_state`; the CUDA one goes to ``device`` (the
    resumed run's device; ``None``: the current CUDA device if CUDA is initialised).

    A CUDA state is ignored on a CPU run (nothing there draws from it). Old checkpoints hold
    one state per GPU visible when they were written (a list): the state at the resumed
    device's index is used when the list has one, else the first (the device a
    single-process run used)."""
    py, nq = state["python"], state["numpy"]
    random.setstate((py["version"], tuple(int(k) for k in py["keys"].tolist()), py["gauss"]))
    np.random.set_state((nq["name"], nq["keys"].numpy().astype(np.uint32), nq["pos"],
                         nq["has_gauss"], nq["cached"]))
    torch.set_rng_state(state["torch"])
    saved = state.get("cuda")
    cuda = _cuda_device(device)
    if saved is None or cuda is None:
        return
    if isinstance(saved, dict):
        cuda_state = saved["state"]
    else:  # legacy: torch.cuda.get_rng_state_all() of the machine that wrote it
        saved = list(saved)
        if not saved:
            return
        cuda_state = saved[cuda.index] if cuda.index < len(saved) else saved[0]
    torch.cuda.set_rng_state(cuda_state, cuda)


def check_resume_device(saved: str | None, device: str | torch.device, path: str | os.PathLike,
                        *, what: str = "the augmentation generator") -> None:
    """Refuse to resume a checkpoint written on another kind of device (``"cpu"`` vs
    ``"cuda"``) when the run's random streams live on that device.

    Raises:
        ResumeDeviceError: naming both devices and the two ways on.
    """
    if saved is None:
        return
    was, now = torch.device(saved).type, torch.device(device).type
    if was != now:
        raise ResumeDeviceError(
            f"{path}: this checkpoint was written by a run on {saved}, and this run is on "
            f"{torch.device(device)}: {what}'s state exists only on a {was} device, so the run "
            f"cannot continue exactly here. Resume it with device: {was}"
            f"{' (on a machine with a GPU)' if was == 'cuda' else ''}, or delete the "
            f"checkpoint (or use another --out folder) to start over on {now}.")


def restore_generator(gen: torch.Generator, state: torch.Tensor, path: str | os.PathLike,
                      *, what: str = "the augmentation generator") -> None:
    """``gen.set_state(state)``; a state of another kind of device (a CPU generator's
    state on a CUDA generator, or the reverse) raises :class:`ResumeDeviceError`."""
    try:
        gen.set_state(state)
    except (RuntimeError, ValueError) as err:
        raise ResumeDeviceError(
            f"{path}: {what}'s saved state does not fit this run's {gen.device} generator "
            f"({state.numel()} bytes saved; {str(err).splitlines()[0]}): the checkpoint was "
            f"written on another kind of device. Resume it on the device it was written on, or "
            f"delete the checkpoint (or use another --out folder) to start over.") from None


def save_checkpoint(path: str | os.PathLike, **state: Any) -> Path:
    """``torch.save`` to a temporary file then rename: never a torn checkpoint; a full disk
    is one line naming the file and the space (:func:`weince.utils.diskspace.atomic_write`)."""
    def write(tmp: Path) -> None:
        torch.save(state, tmp)
        record_replacement(path, tmp)   # its digest, which the resume checks

    return atomic_write(path, write, need=payload_bytes(state))


def load_torch_file(path: str | os.PathLike, *, what: str, remake: str,
                    map_location: str | torch.device = "cpu") -> Any:
    """``torch.load(path, weights_only=True)`` with errors a user can act on.

    Args:
        path: an existing file.
        what: what the file is, for messages ("encoder file", "checkpoint", ...).
        remake: what to do to remake it (a command or workflow rule), for messages.

    Raises:
        UnreadableFileError: the file is truncated/corrupt, or holds pickled Python objects
            beyond tensors and plain containers (refused: loading them could run code).
    """
    path = Path(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        found = re.search(r"GLOBAL ([\w.]+)", str(e))
        if found:  # the weights-only unpickler refused a global: an old or crafted file
            raise UnreadableFileError(
                f"{path}: refusing to load this {what}: it holds pickled Python objects "
                f"(`{found.group(1)}`), not only tensors, numbers, strings and plain "
                f"containers; it is an older file format, or a file that could run code when "
                f"opened. Delete it and {remake}.") from None
        raise UnreadableFileError(f"{path}: not a readable {what} (corrupt: not a torch "
                                  f"file). Delete it and {remake}.") from None
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError, KeyError,
            IndexError, UnicodeDecodeError) as e:
        # torch's own reason is informative for a broken zip archive, noise otherwise
        detail = str(e).strip().splitlines()[0] if isinstance(e, RuntimeError) and str(e) else ""
        raise UnreadableFileError(
            f"{path}: not a readable {what} (truncated or corrupt{': ' + detail if detail else ''}"
            f"). Delete it and {remake}.") from None


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu",
                    remake: str = "re-run the command (it starts over)") -> dict | None:
    """The saved state, or ``None`` when there is no checkpoint (a fresh start)."""
    path = Path(path)
    if not path.exists():
        return None
    try:   # the checkpoint its run wrote, whatever its timestamp (a truncated or edited one)
        check_recorded(path)
    except DigestMismatch as err:
        raise UnreadableFileError(f"{err}. Delete it and {remake}.") from None
    state = load_torch_file(path, what="checkpoint", remake=remake, map_location=map_location)
    if not isinstance(state, dict):
        raise UnreadableFileError(f"{path}: not a checkpoint (a {type(state).__name__}, not a "
                                  f"dict). Delete it and {remake}.")
    return state


def release_checkpoint(run_dir: str | os.PathLike) -> bool:
    """Remove a finished run's resume state (``checkpoint.pt``): the workflow's first
    consumer of a training's outputs calls it, once Snakemake has stored them. True when a
    file was removed."""
    path = Path(run_dir) / "checkpoint.pt"
    record_path(path).unlink(missing_ok=True)   # its digest's record goes with it
    try:            # the features job and a probe may both release it, side by side
        path.unlink()
    except FileNotFoundError:
        return False
    return True
