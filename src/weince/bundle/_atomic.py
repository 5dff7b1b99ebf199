"""Writing on the reviewer's machine all at once or not at all.

- :func:`place_all`: ``weince verify --extract DIR`` puts the verified files into ``DIR``
  in two steps, every file beside its place first, then each renamed into it; a failure in
  the first step (a full disk) removes what it wrote. It refuses, before writing, a path
  that lies outside the archive's results folder, in a checkout's hidden or code folders
  once links are resolved, or over a file a git checkout tracks.
- :func:`staged_folder`: ``weince merge`` writes into a folder beside ``--out``, renamed
  over ``--out`` at the end and removed on any failure; the folder is its lock (a second
  merge into the same ``--out`` is refused while the first runs).
- :func:`remove_quietly`: what a failed step wrote, removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from weince.bundle._archive import BundleError
from weince.bundle._limits import CannotRun
from weince.utils.diskspace import is_disk_full

try:
    import fcntl
except ImportError:   # pragma: no cover - Windows: no lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["place_all", "staged_folder", "remove_quietly", "MergeLocked", "STALE_S"]

STALE_S = 30.0   # an unlocked staging folder older than this is a killed merge's


class MergeLocked(RuntimeError):
    """Another ``weince merge`` is writing the same ``--out``."""


def remove_quietly(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:   # pragma: no cover - nothing more can be done
        pass


def _tracked(dest: Path, folder: str) -> set[str]:
    """The files under ``folder`` that the git checkout at ``dest`` tracks (empty when
    ``dest`` is no checkout or git is missing)."""
    try:
        proc = subprocess.run(["git", "-C", str(dest), "ls-files", "-z", "--", folder],
                              capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return set()
    return set(proc.stdout.decode(errors="replace").split("\0")) - {""} \
        if proc.returncode == 0 else set()


def _check_targets(names: list[str], dest: Path, results: str) -> None:
    base = dest.resolve()
    tracked = _tracked(dest, results) if dest.is_dir() else set()
    for name in names:
        if not name.startswith(f"{results}/"):
            raise BundleError(f"--extract: {name} lies outside the archive's results folder "
                              f"{results}/ (refused; nothing was written)")
        if name in tracked:
            raise BundleError(f"--extract: {name} is a file the checkout {dest} tracks; an "
                              f"archive never replaces one (refused; nothing was written)")
        try:   # its folder (a link at the file itself is replaced, never followed)
            rel = (dest / name).parent.resolve().relative_to(base)
        except ValueError:
            raise BundleError(f"--extract: the folder of {dest / name} leads outside {dest} "
                              f"through a link; unpack into a folder without links in "
                              f"{results}/ (refused; nothing was written)") from None
        top = rel.parts[0] if rel.parts else ""
        if top.startswith(".") or top in ("workflow", "src", "config"):
            raise BundleError(f"--extract: {dest / name} resolves into {top}/ of {dest} "
                              f"(refused; nothing was written)")


def place_all(root: Path, names: list[str], dest: Path, results: str) -> tuple[int, int]:
    """Move (or copy, across disks) ``root/<name>`` for each of ``names`` to
    ``dest/<name>``, all or nothing (module docstring); a listed link is made again as the
    same relative link. Returns (files placed, files replaced)."""
    _check_targets(names, dest, results)
    made: list[Path] = []      # folders created, then the files beside their places
    staged: list[tuple[Path, Path]] = []
    try:
        for name in names:
            src, target = root / name, dest / name
            missing = [p for p in [target.parent, *target.parent.parents] if not p.exists()]
            target.parent.mkdir(parents=True, exist_ok=True)
            made += reversed(missing)
            part = target.with_name(f".{target.name}.weince-part")
            remove_quietly(part)
            made.append(part)
            if src.is_symlink():
                os.symlink(os.readlink(src), part)
            else:
                try:
                    os.replace(src, part)     # the temporary copy is not needed again
                except OSError:
                    shutil.copyfile(src, part)
            staged.append((part, target))
    except BaseException as err:
        for p in reversed(made):
            remove_quietly(p) if not p.is_dir() else _rmdir(p)
        if is_disk_full(err):
            raise CannotRun(f"--extract {dest}: no space left on the device while unpacking "
                            f"({err}); nothing was written there") from None
        raise
    replaced = 0
    for part, target in staged:
        replaced += target.exists() or target.is_symlink()
        os.replace(part, target)
    return len(staged), replaced


def _rmdir(p: Path) -> None:
    with contextlib.suppress(OSError):
        p.rmdir()


def _lock(folder: Path) -> int | None:
    """A descriptor of ``folder`` holding its exclusive lock, or None when another process
    holds it."""
    fd = os.open(folder, os.O_RDONLY)
    if fcntl is None:   # pragma: no cover
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A new folder beside ``out`` to write into; renamed over ``out`` when the block ends
    well, removed when it does not. Raises :class:`MergeLocked` while another process
    stages ``out``."""
    out = Path(out)
    stage = out.with_name(f".{out.name}.weince-merge")
    made = [p for p in [out.parent, *out.parent.parents] if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = None
    try:
        fd = _claim(stage, out)
        yield stage
        _swap(stage, out)
    except BaseException:
        if fd is not None:
            remove_quietly(stage)
        for p in made:
            _rmdir(p)
        raise
    finally:
        if fd is not None:
            os.close(fd)


def _claim(stage: Path, out: Path) -> int:
    try:
        os.mkdir(stage)
    except FileExistsError:
        fd = _lock(stage)
        if fd is None or time.time() - stage.stat().st_mtime < STALE_S:
            if fd is not None:
                os.close(fd)
            raise MergeLocked(f"{out}: another weince merge is writing it now (its staging "
                              f"folder {stage} is held); wait for it to finish (nothing was "
                              f"written)") from None
        os.close(fd)    # a killed merge's leftovers
        remove_quietly(stage)
        os.mkdir(stage)
    fd = _lock(stage)
    if fd is None:   # pragma: no cover - another merge claimed it in between
        raise MergeLocked(f"{out}: another weince merge is writing it now (nothing was "
                          f"written)")
    return fd


def _swap(stage: Path, out: Path) -> None:
    """Rename ``stage`` over ``out`` (an existing folder through ``<out>.old``)."""
    if out.is_dir() and not out.is_symlink():
        old = out.with_name(f".{out.name}.weince-old")
        remove_quietly(old)
        os.replace(out, old)
        os.replace(stage, out)
        remove_quietly(old)
    else:
        if out.exists() or out.is_symlink():
            raise OSError(f"{out} exists and is not a folder")
        os.replace(stage, out)
