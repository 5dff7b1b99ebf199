"""Atomic writes that say when the disk is full, and the free space of a folder.

Every result, checkpoint, encoder and feature file is written to ``<file>.tmp`` and renamed
over ``<file>`` (:func:`atomic_write`): a crash never leaves a torn file that a resumed
workflow would take for a finished one. When the write fails for lack of space (``ENOSPC``
or a quota, ``EDQUOT``; ``torch.save`` reports it as ``[enforce fail at
inline_container.cc] unexpected pos ...`` or ``file write failed``) the ``*.tmp`` is removed
and one line names the file, the space it needed and the space left::

    from weince.utils.diskspace import atomic_write
    atomic_write(path, lambda tmp: torch.save(state, tmp), need=payload_bytes(state))
    # DiskFullError: results/.../checkpoint.pt: no space left on the device while writing
    #   it (needs about 273.1 MB, 12.0 MB free in results/...): free space ...
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["DiskFullError", "atomic_write", "is_disk_full", "free_bytes", "human_bytes",
           "payload_bytes", "parse_size", "write_text"]

_TORCH_FULL = re.compile(r"unexpected pos \d+ vs \d+|file write failed|No space left on device"
                         r"|Disk quota exceeded")


class DiskFullError(OSError):
    """A write failed because the disk (or the quota) is full."""


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000.0
    return f"{n:.1f} TB"   # pragma: no cover


def parse_size(text: str | int | float) -> int:
    """``"2TB"``, ``"500 GB"``, ``"1.5T"``, ``1e12`` -> bytes (decimal units, as
    :func:`human_bytes` prints them); ``ValueError`` for anything else."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a size")
    if isinstance(text, (int, float)):
        if not text >= 0:
            raise ValueError(f"{text!r} is not a size")
        return int(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgtp]?)b?\s*", str(text).lower())
    if not m:
        raise ValueError(f"{text!r} is not a size")
    return int(float(m.group(1)) * 1000 ** "bkmgtp".index(m.group(2) or "b"))


def free_bytes(path: str | os.PathLike) -> int:
    """Free bytes (for this user) on the file system that holds ``path`` or its nearest
    existing parent."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` (or an error it was raised from) is a full disk or quota."""
    seen = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        # torch's RuntimeError, safetensors' SafetensorError (a plain Exception) in words
        if not isinstance(cur, OSError) and _TORCH_FULL.search(str(cur)):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def payload_bytes(obj: Any) -> int:
    """Bytes of the tensors and arrays in ``obj`` (nested dicts, lists, tuples): about
    what ``torch.save``/``np.savez`` write."""
    if hasattr(obj, "element_size") and hasattr(obj, "numel"):
        return int(obj.element_size() * obj.numel())
    if hasattr(obj, "nbytes") and not isinstance(obj, (bytes, bytearray)):
        return int(obj.nbytes)
    if isinstance(obj, (bytes, bytearray, str)):
        return len(obj)
    if isinstance(obj, dict):
        return sum(payload_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(payload_bytes(v) for v in obj)
    return 0


def _remove(tmp: Path) -> None:
    try:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
    except OSError:   # pragma: no cover - nothing more can be done here
        pass


def _swap(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` over ``path``; a folder over a folder through ``<path>.old`` (a
    rename cannot replace a folder that holds files)."""
    if tmp.is_dir() and path.is_dir() and not path.is_symlink():
        old = path.with_name(path.name + ".old")
        _remove(old)
        os.replace(path, old)
        os.replace(tmp, path)
        _remove(old)
    else:
        os.replace(tmp, path)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], Any], *,
                 need: int | None = None, tmp: str | os.PathLike | None = None) -> Path:
    """``write(tmp)`` then rename ``tmp`` over ``path`` (``tmp``: ``<path>.tmp`` unless
    given). ``tmp`` may be a folder ``write`` fills (a model saved with
    ``save_pretrained``): it then replaces the folder ``path``. On any failure the
    temporary file or folder is removed; a full disk is a :class:`DiskFullError` naming the
    file, ``need`` (bytes, when known) and the free space left."""
    path = Path(path)
    tmp = Path(tmp) if tmp is not None else path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    free = None
    try:
        # the free space before the write: after a failed one the writer (torch's) may
        # still hold the partial file open, its blocks not yet given back
        free = free_bytes(path.parent)
        _remove(tmp)   # a crashed write's leftovers (a folder would keep stale files)
        write(tmp)
        _swap(tmp, path)
    except BaseException as err:
        _remove(tmp)
        if not is_disk_full(err):
            raise
        needs = f"needs about {human_bytes(need)}, " if need else ""
        left = f"{human_bytes(free)} were free" if free is not None else "free space unknown"
        raise DiskFullError(
            errno.ENOSPC,
            f"{path}: no space left on the device while writing it ({needs}{left} in "
            f"{path.parent}); free space there (or point "
            f"`results:` at a larger disk) and re-run; no partial file was left") from None
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """``Path(path).write_text(text)`` through :func:`atomic_write` (a page or a table:
    never half written, a full disk named)."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda tmp: tmp.write_bytes(data), need=len(data))
