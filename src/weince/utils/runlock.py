"""One writer per run folder: an exclusive ``flock`` on a lock file beside the outputs.

A training, feature or evaluation job takes ``{folder}/.{name}.lock`` before it writes
there, and the kernel releases it when the process ends, however it ends (``kill -9``
included), so a lock never goes stale. A second process that wants the same outputs (an
orphaned job of a killed Snakemake beside the one the re-run starts, two live runs after
``snakemake --unlock``) refuses at once, naming the holder's PID and command::

    from weince.utils.runlock import run_lock
    with run_lock("results/smoke/.../seed7", "train"):
        ...                                   # write the run's files

    @locks_output("out_dir", "train")         # the same around a library entry point
    def pretrain(cfg, out_dir): ...

    held_locks("results/smoke")               # [(lock file, holder)] of live writers

Only rank 0 of a ``torchrun`` group locks (every rank writes through it). Without
``fcntl`` (not a POSIX system) nothing is locked.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:   # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]  # no fcntl: nothing is locked (docstring)

__all__ = ["RunLockedError", "run_lock", "locks_output", "hold_run_lock", "release_run_lock",
           "held_locks", "lock_path", "holder"]

RETRY_S = 1.0   # how long a second writer waits (a probe of held_locks holds a lock briefly)


class RunLockedError(RuntimeError):
    """Another live process writes the same run folder."""


def lock_path(folder: str | os.PathLike, name: str) -> Path:
    return Path(folder) / f".{name}.lock"


def holder(path: str | os.PathLike) -> str:
    """Who holds the lock file ``path``, as it says: ``PID 123: snakemake ...``."""
    return _holder(Path(path))


def _holder(path: Path) -> str:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        lines = []
    if not lines:
        return "PID unknown"
    pid = lines[0].strip()
    host = lines[2].strip() if len(lines) > 2 else ""
    cmd = lines[1].strip() if len(lines) > 1 else ""
    return (f"PID {pid}" + (f" on {host}" if host and host != socket.gethostname() else "")
            + (f": {cmd[:120]}" if cmd else ""))


def _try_lock(fd: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


@contextlib.contextmanager
def run_lock(folder: str | os.PathLike, name: str, *, wait_s: float = RETRY_S
             ) -> Iterator[Path]:
    """Hold ``{folder}/.{name}.lock`` exclusively for the block, or raise
    :class:`RunLockedError` naming the holder and what to do."""
    folder = Path(folder)
    path = lock_path(folder, name)
    if fcntl is None:   # pragma: no cover
        yield path
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _try_lock(fd, wait_s):
            raise RunLockedError(
                f"{folder}: another process is writing {name} here ({_holder(path)}); two "
                f"writers in one run folder would corrupt it. If that process belongs to a "
                f"live run, let it finish; if it is left over from a killed run, stop it "
                f"(`ps -fp PID`, then `kill PID`) and re-run (never `snakemake --unlock` a "
                f"live run)")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n{' '.join(sys.argv)}\n{socket.gethostname()}\n"
                 .encode())
        yield path
    finally:
        os.close(fd)   # closing the descriptor releases the lock (so does the process' end)


def _rank0() -> bool:
    return int(os.environ.get("RANK", "0") or 0) == 0


_HELD: dict[Path, contextlib.ExitStack] = {}


def hold_run_lock(output: str | os.PathLike, *, wait_s: float = RETRY_S) -> Path:
    """Take :func:`run_lock` for the file ``output`` (its folder, named after the file) for
    the rest of the process: one line at the top of a job's script. Held already by this
    process: returned as it is."""
    key = lock_path(Path(output).parent, Path(output).name)
    if key in _HELD:
        return key
    stack = contextlib.ExitStack()
    path = stack.enter_context(run_lock(Path(output).parent, Path(output).name,
                                        wait_s=wait_s))
    _HELD[path] = stack
    return path


def release_run_lock(path: str | os.PathLike) -> None:
    """Release a lock taken with :func:`hold_run_lock` (its lock file's path)."""
    stack = _HELD.pop(Path(path), None)
    if stack is not None:
        stack.close()


def locks_output(arg: str, name: str | None = None, *, parent: bool = False) -> Callable:
    """Decorator: hold :func:`run_lock` on the folder given as argument ``arg`` (with
    ``parent=True``, a file argument: its folder, the lock named after the file unless
    ``name`` says otherwise) while the function runs; a ``None`` argument, and ranks other
    than 0, lock nothing."""
    def wrap(fn: Callable) -> Callable:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def locked(*args: Any, **kwargs: Any) -> Any:
            out = sig.bind_partial(*args, **kwargs).arguments.get(arg)
            if out is None or not _rank0():
                return fn(*args, **kwargs)
            folder = Path(out).parent if parent else Path(out)
            with run_lock(folder, name or Path(out).name):
                return fn(*args, **kwargs)
        return locked
    return wrap


def held_locks(root: str | os.PathLike) -> list[tuple[Path, str]]:
    """The lock files under ``root`` that a live process holds, each with its holder."""
    if fcntl is None or not Path(root).is_dir():   # pragma: no cover
        return []
    out = []
    for path in sorted(Path(root).rglob(".*.lock")):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            out.append((path, _holder(path)))
        finally:
            os.close(fd)
    return out
