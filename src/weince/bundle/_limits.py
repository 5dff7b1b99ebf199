"""How much work an archive from someone else may ask of the reviewer's machine.

The manifest comes first in every bundle, so its declared sizes are checked before any
other byte is decompressed (:func:`check_declared`):

- each file against the limit of its kind (:func:`limit_of`): a result JSON, a page or a
  log is never gigabytes; an encoder's limit follows its architecture (the backbone named
  in its path), a text model's file its model's;
- the sum against the total cap (``--max-bytes``, which the reviewer can raise);
- the sum against the free space of the temporary folder (:class:`CannotRun` when it does
  not fit: a problem of this machine, not of the archive).

While the archive is read, every decompressed byte is counted (:class:`Budget`): past
what the manifest declares (with room for the tar headers) the read stops at that byte,
so an unlisted member, a padded header or a member larger than declared cannot make the
check decompress more than the archive admits to.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from weince.bundle._archive import BundleError, _fmt

__all__ = ["CannotRun", "Budget", "limit_of", "check_declared", "check_free_space",
           "open_decompressed", "HEADER_ROOM", "padded"]

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
HEADER_ROOM = 3 * KIB     # per member: its header, a long name's pax header
STREAM_ROOM = 1 * MIB     # the archive's end blocks and record padding, folders
#: parameters (millions, projection head included, rounded up) of each vision backbone
BACKBONE_PARAMS = {"smallcnn": 2, "resnet18": 17, "resnet50": 31, "vit_s": 27}
#: parameters (millions, rounded up) of each text model geometry
TEXT_PARAMS = {"minilm": 25, "minilm-l6": 25, "bert-base": 115, "bert-base-uncased": 115,
               "bert-large": 340, "bert-large-uncased": 340}
_PAGES = {".md", ".tex", ".html", ".yaml", ".yml", ".txt", ".csv", ".tsv", ".css", ".js"}
_FIGURES = {".png", ".pdf", ".svg", ".jpg", ".jpeg"}
_MODELS = {".pt", ".pth", ".ckpt", ".bin", ".safetensors"}


class CannotRun(OSError):
    """The check cannot run on this machine (disk, memory): nothing is wrong with the
    archive as far as it was read (``weince verify`` exit 3)."""


def padded(n: int) -> int:
    """``n`` bytes of member data as stored in a tar (whole 512-byte blocks)."""
    return -(-n // 512) * 512


def _weights(params_m: int) -> int:
    """The bytes of a float32 state dict of ``params_m`` million parameters, with room."""
    return params_m * 1_000_000 * 4 * 5 // 4 + 16 * MIB


def _params_of(parts: tuple[str, ...]) -> tuple[int | None, str]:
    """The parameters (millions) of the network a run folder's path names, and its name."""
    for where, table, step in (("vision", BACKBONE_PARAMS, 2), ("text", TEXT_PARAMS, 1)):
        if where in parts and parts.index(where) + step < len(parts):
            name = parts[parts.index(where) + step]
            return table.get(name), name
    return None, ""


def limit_of(path: str) -> tuple[int, str]:
    """The largest size a bundle file at ``path`` can have, and its kind in words."""
    p = PurePosixPath(path)
    suffix, parts = p.suffix.lower(), p.parts
    if "audit" in parts[:-1] and suffix in _MODELS:
        # a training state (weince.train.audit): weights, the optimiser's moments (two for
        # Adam), the schedule and the random state
        n, name = _params_of(parts)
        return ((4 * _weights(n), f"a training audit state of {name}") if n
                else (8 * GIB, "a training audit state"))
    if suffix in _MODELS or "model" in parts[:-1]:
        if "text" in parts:
            model = parts[parts.index("text") + 1] if parts.index("text") + 1 < len(parts) \
                else ""
            n = TEXT_PARAMS.get(model)
            if suffix not in _MODELS:
                return 64 * MIB, "a text model's tokenizer or config file"
            return ((_weights(n), f"the weights of text model {model}") if n
                    else (2 * GIB, "the weights of a text model"))
        if p.name == "features.pt":
            return 4 * GIB, "a feature file"
        if "vision" in parts and parts.index("vision") + 2 < len(parts):
            backbone = parts[parts.index("vision") + 2]
            n = BACKBONE_PARAMS.get(backbone)
            if n:
                return _weights(n), f"an encoder of backbone {backbone}"
        return 2 * GIB, "a model file"
    if suffix in {".npz", ".npy"}:
        return 4 * GIB, "a score array"
    if suffix == ".json":
        return 64 * MIB, "a result JSON"
    if suffix == ".jsonl":
        return 256 * MIB, "a training log"
    if suffix == ".log":
        return 64 * MIB, "a job log"
    if suffix in _PAGES or p.name in {"SHA256SUMS", "README"}:
        return 32 * MIB, "a page or config"
    if suffix in _FIGURES:
        return 64 * MIB, "a figure"
    return 64 * MIB, "a file"


def check_declared(files: list[dict[str, Any]], max_bytes: int) -> int:
    """Refuse a manifest whose declared sizes ask too much (each file against its kind's
    limit, their sum against ``max_bytes``), before anything else is decompressed;
    returns the sum."""
    for f in files:
        limit, kind = limit_of(f["path"])
        if f["bytes"] > limit:
            raise BundleError(f"{f['path']}: the manifest declares {_fmt(f['bytes'])}, over "
                              f"the {_fmt(limit)} that {kind} can hold (refused before "
                              f"unpacking anything)")
    total = sum(f["bytes"] for f in files)
    if total > max_bytes:
        raise BundleError(f"the listed files unpack to {total} bytes, over the cap of "
                          f"{max_bytes} (refused before unpacking; raise it with "
                          f"--max-bytes only for a bundle you expect to be this large)")
    return total


def check_free_space(folder: Path, need: int) -> None:
    """:class:`CannotRun` when ``folder`` has less free space than ``need`` bytes."""
    free = shutil.disk_usage(folder).free
    if need > free:
        raise CannotRun(f"the archive's files need {_fmt(need)} unpacked and the temporary "
                        f"folder {folder.parent} has {_fmt(free)} free: point TMPDIR at a "
                        f"larger disk and re-run (the archive was not judged)")


class Budget:
    """A readable stream that counts the bytes read through it and refuses, in one
    :class:`BundleError`, to read past ``limit`` (which the reader raises as it learns
    what the archive declares)."""

    def __init__(self, raw: BinaryIO, limit: int):
        self.raw, self.limit, self.read_bytes = raw, limit, 0

    def read(self, n: int = -1) -> bytes:
        left = self.limit - self.read_bytes
        want = left + 1 if n is None or n < 0 or n > left else n
        data = self.raw.read(want)
        self.read_bytes += len(data)
        if self.read_bytes > self.limit:
            raise BundleError(f"the archive decompresses past what its manifest declares "
                              f"(stopped at byte {self.limit:,} of its tar stream): a "
                              f"member not listed, or larger than listed (refused)")
        return data


_MAGIC = ((b"\x1f\x8b", gzip.GzipFile), (b"BZh", bz2.BZ2File),
          (b"\xfd7zXZ\x00", lzma.LZMAFile))


def open_decompressed(path: Path) -> BinaryIO:
    """The tar stream of the archive at ``path``, decompressed as it is read (gzip, bzip2,
    xz or none, from its first bytes)."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    for magic, cls in _MAGIC:
        if head.startswith(magic):
            return cls(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")
