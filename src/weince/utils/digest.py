"""SHA-256 digests as the identity of the files that one job writes and another reads.

A writer records the digest of what it wrote (an encoder's in its run's ``train.json`` under
``encoder_sha256``, a SimCSE model folder's under ``model_sha256``; a feature or score file's,
which has no JSON of its own, in ``.<name>.digest.json`` beside it: :func:`record_file`); an
evaluation records the digest of the encoder or model it read in its result's
``provenance.inputs`` (:func:`weince.utils.results.reading`); a reader checks the file against
the recorded digest before use, whatever the file's modification time says. A text model (a
folder) is digested over its files' names and contents in sorted order.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weince.utils.results import load_result, write_json

__all__ = ["sha256_file", "sha256_path", "folder_digest", "DigestMismatch", "check_digest",
           "record_path", "record_file", "record_replacement", "check_recorded", "recorded_inputs",
           "check_run_file", "input_entry", "RUN_RECORD"]

_BLOCK = 1 << 20
# one process (a fused job, a bundle) hashes a file once: keyed by what any change to the
# file changes (its inode, size, and the change time ``st_ctime``, which no user can set
# back as ``touch`` sets back the modification time)
_SEEN: dict[tuple[int, int, int, int, int], str] = {}
RUN_RECORD = "train.json"   # a training run's record: its encoder's (model's) digest


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 (hex) of one file's bytes, read in blocks (once per process while the
    file is unchanged)."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key in _SEEN:
        return _SEEN[key]
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    if len(_SEEN) > 4096:
        _SEEN.clear()
    _SEEN[key] = h.hexdigest()
    return _SEEN[key]


def sha256_path(path: str | os.PathLike) -> str:
    """A file's SHA-256, or a folder's: the digest of each regular file's relative POSIX path
    and SHA-256, one ``<sha256>  <path>`` line each in sorted order (``sha256sum``'s form).
    Hidden files are left out (Snakemake's ``.snakemake_timestamp`` in an output folder,
    which a bundle does not ship either)."""
    path = Path(path)
    if not path.is_dir():
        return sha256_file(path)
    return folder_digest({p.relative_to(path).as_posix(): sha256_file(p)
                          for p in path.rglob("*") if p.is_file() and not p.is_symlink()})


def folder_digest(files: Mapping[str, str]) -> str:
    """:func:`sha256_path` of a folder from its files' digests (relative POSIX path ->
    SHA-256: e.g. an archive's manifest entries), hidden files left out, in the order of
    the paths' strings."""
    lines = [f"{files[rel]}  {rel}\n" for rel in sorted(files)
             if not any(part.startswith(".") for part in rel.split("/"))]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


class DigestMismatch(ValueError):
    """A file whose bytes are not those its writer recorded (truncated, edited or swapped)."""


def check_digest(path: str | os.PathLike, expected: str | None, *, recorded_in: str | os.PathLike,
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


def input_entry(path: str | os.PathLike, sha256: str) -> dict[str, str]:
    """One input of a result, as its ``provenance.inputs`` records it."""
    return {"path": str(path), "sha256": sha256}


def record_path(path: str | os.PathLike) -> Path:
    """Where the writer of ``path`` records its digest when it writes no JSON of its own
    (a feature file, a score file): ``.<name>.digest.json`` beside it (hidden: a bundle
    leaves it out)."""
    path = Path(path)
    return path.parent / f".{path.name}.digest.json"


def record_file(path: str | os.PathLike, inputs: Mapping[str, Any] | None = None) -> str:
    """Record ``path``'s digest (and the inputs it was made from) at :func:`record_path`;
    return the digest. Called by the job that wrote ``path``, right after writing it."""
    digest = sha256_path(path)
    write_json(record_path(path), {"file": Path(path).name, "sha256": digest,
                                   "inputs": dict(inputs or {})})
    return digest


def record_replacement(path: str | os.PathLike, tmp: str | os.PathLike) -> str:
    """Record the digest of ``tmp``, about to replace ``path`` (a checkpoint written each
    epoch: its writer calls this before the rename). The record keeps the digest of the file
    it replaces too, so a process killed between the two renames leaves a checkpoint that
    still checks (the previous one, whole)."""
    digest = sha256_file(tmp)
    old = _load_record(record_path(path)) if Path(path).exists() else None
    write_json(record_path(path), {"file": Path(path).name, "sha256": digest, "inputs": {},
                                   "previous": (old or {}).get("sha256")})
    return digest


def _load_record(record: Path) -> dict[str, Any] | None:
    return load_result(record) if record.is_file() else None


def check_recorded(path: str | os.PathLike, *, rebuild: str | None = None) -> dict[str, Any]:
    """Check ``path`` against the digest its writer recorded (:func:`record_file`); return
    ``{"sha256", "inputs"}`` (the inputs the writer recorded). A file without a record
    (written before digests were recorded) is not checked."""
    rec = _load_record(record_path(path))
    expected = rec.get("sha256") if rec else None
    if rec and rec.get("previous") and sha256_path(path) == rec["previous"]:
        expected = rec["previous"]   # the file it was about to replace, whole
    actual = check_digest(path, expected, recorded_in=record_path(path), rebuild=rebuild)
    return {"sha256": actual, "inputs": (rec or {}).get("inputs") or {}}


def recorded_inputs(path: str | os.PathLike) -> dict[str, Any]:
    """The inputs the writer of ``path`` recorded with its digest (``{}`` without one)."""
    rec = _load_record(record_path(path))
    return dict((rec or {}).get("inputs") or {})


def check_run_file(path: str | os.PathLike, key: str, *, rebuild: str | None = None) -> str:
    """Check a training run's output ``path`` (its ``encoder.pt``, its ``model`` folder)
    against the digest its ``train.json`` (beside it) records under ``key``
    (``encoder_sha256``, ``model_sha256``); return the digest. No ``train.json`` or no
    ``key`` (a run trained before digests were recorded): nothing is checked."""
    record = Path(path).parent / RUN_RECORD
    rec = _load_record(record)
    return check_digest(path, (rec or {}).get(key), recorded_in=record, rebuild=rebuild)
