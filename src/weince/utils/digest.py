"""SHA-256 digests as the identity of the files that one job writes and another reads.

A writer records the digest of what it wrote (an encoder's in its run's ``train.json`` under
``encoder_sha256``; an evaluation records the digest of the encoder or model it read in its
result's ``provenance.inputs``); a reader checks the file against the recorded digest before
use, whatever the file's modification time says. A text model (a folder) is digested over its
files' names and contents in sorted order.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["sha256_file", "sha256_path", "DigestMismatch", "check_digest"]

_BLOCK = 1 << 20


def sha256_file(path: str | Path) -> str:
    """The SHA-256 (hex) of one file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def sha256_path(path: str | Path) -> str:
    """A file's SHA-256, or a folder's: the digest of each regular file's relative POSIX path
    and SHA-256, one ``<sha256>  <path>`` line each in sorted order (``sha256sum``'s form)."""
    path = Path(path)
    if not path.is_dir():
        return sha256_file(path)
    lines = [f"{sha256_file(p)}  {p.relative_to(path).as_posix()}\n"
             for p in sorted(path.rglob("*")) if p.is_file() and not p.is_symlink()]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


class DigestMismatch(ValueError):
    """A file whose bytes are not those its writer recorded (truncated, edited or swapped)."""


def check_digest(path: str | Path, expected: str | None, *, recorded_in: str | Path,
                 rebuild: str | None = None) -> str:
    """Check ``path`` against the digest ``expected`` that ``recorded_in`` holds; return the
    digest. Raises :class:`DigestMismatch` with one line naming the file, the record and the
    command that rebuilds it (``rebuild``) when they differ. ``expected=None`` (a record that
    predates digests) checks nothing and returns the file's digest."""
    actual = sha256_path(path)
    if expected is not None and actual != expected:
        fix = f"; rebuild it: {rebuild}" if rebuild else ""
        raise DigestMismatch(
            f"{path}: its SHA-256 {actual[:12]}... is not the {str(expected)[:12]}... that "
            f"{recorded_in} records for it (truncated, edited or swapped){fix}")
    return actual
