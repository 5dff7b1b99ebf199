"""Reading a bundle archive that someone else made: its input is untrusted by definition.

What :mod:`weince.bundle._unpack` (the one pass over an archive) relies on:

- :func:`check_manifest` validates ``manifest.json`` before any path in it is used: every
  path it names is relative, free of ``..`` and control characters, every hash 64 hex
  digits, every size a non-negative integer.
- :func:`extract_member` writes one regular member to a fresh file (never through a link:
  the folder holds only what this module wrote) and hashes it while streaming.
- The manifest's size cap (read only when its header says it fits; ``--max-manifest-bytes``
  raises it); the other limits are :mod:`weince.bundle._limits`'.

Nothing here calls ``extractall``, follows a link or opens a path that the archive names
outside the extraction folder.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any, overload

__all__ = ["BundleError", "DEFAULT_MAX_BYTES", "DEFAULT_MAX_MANIFEST_BYTES", "MAX_MEMBERS",
           "parse_size", "relpath", "inside", "check_manifest", "read_member",
           "extract_member"]

DEFAULT_MAX_BYTES = 8 << 30            # everything unpacked (a paper bundle with encoders)
DEFAULT_MAX_MANIFEST_BYTES = 32 << 20  # a paper profile's manifest is a few MB
MAX_MEMBERS = 500_000                  # headers kept in memory while scanning
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_PROFILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*\Z")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
          "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


class BundleError(ValueError):
    """The archive or its manifest cannot be checked safely (``weince verify`` exit 2)."""


def parse_size(text: str) -> int:
    """``"8G"``, ``"512MiB"``, ``"1000"`` -> bytes (binary units); for ``--max-bytes``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; write e.g. 16G, 512M or "
                                         f"1000000 (bytes)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _fmt(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def relpath(value: Any, what: str) -> str:
    """``value`` as a normalised relative POSIX path inside the bundle, or BundleError."""
    if not isinstance(value, str) or not value.strip("./"):
        raise BundleError(f"manifest.json: {what} must be a non-empty path string, got "
                          f"{value!r}")
    if any(ord(ch) < 32 or ch == "\x7f" for ch in value) or "\\" in value:
        raise BundleError(f"manifest.json: {what} {value!r} holds a control character or a "
                          f"backslash; bundle paths are plain POSIX paths")
    p = PurePosixPath(value)
    if p.is_absolute() or re.match(r"[A-Za-z]:", value):
        raise BundleError(f"manifest.json: {what} {value!r} is an absolute path; a bundle "
                          f"names only paths inside itself (refused: no host file is read)")
    if ".." in p.parts:
        raise BundleError(f"manifest.json: {what} {value!r} climbs out with '..'; a bundle "
                          f"names only paths inside itself (refused: no host file is read)")
    return str(p)


def inside(root: Path, rel: str | Path) -> bool:
    """Whether ``root / rel`` still lies inside ``root`` once links are resolved."""
    base = root.resolve()
    try:
        (base / rel).resolve().relative_to(base)
        return True
    except (ValueError, OSError, RuntimeError):
        return False


def _kind(m: tarfile.TarInfo) -> str | None:
    """None for a regular file or a folder; else what the member is, in words."""
    if m.isreg() or m.isdir():
        return None
    if m.issym():
        return f"symbolic link -> {m.linkname}"
    if m.islnk():
        return f"hard link to {m.linkname}"
    if m.isfifo():
        return "fifo"
    if m.ischr() or m.isblk():
        return f"{'character' if m.ischr() else 'block'} device {m.devmajor},{m.devminor}"
    return f"member of tar type {m.type!r}"


@overload
def _str(man: dict, key: str) -> str: ...
@overload
def _str(man: dict, key: str, required: bool) -> str | None: ...
def _str(man: dict, key: str, required: bool = True) -> str | None:
    v = man.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise BundleError(f"manifest.json: {key!r} must be a string, got "
                          f"{'nothing' if v is None else type(v).__name__}")
    return v


def check_manifest(man: Any, fmt: str) -> None:
    """Raise BundleError naming the first thing of ``man`` a bundle of ``fmt`` cannot hold."""
    if not isinstance(man, dict):
        raise BundleError(f"manifest.json must hold a JSON object, got {type(man).__name__}")
    if man.get("format") != fmt:
        raise BundleError(f"bundle format {man.get('format')!r}; this weince reads {fmt!r}")
    profile = _str(man, "profile")
    if not _PROFILE.match(profile):
        raise BundleError(f"manifest.json: profile {profile!r} is not a profile name "
                          f"(letters, digits, '_', '-', '.')")
    for key in ("meta", "results", "claims", "resolved_config", "reports"):
        relpath(man.get(key), repr(key))
    for key in ("created", "weince_commit"):
        _str(man, key, required=False)
    files = man.get("files")
    if not isinstance(files, list):
        raise BundleError(f"manifest.json: 'files' must be a list of file entries, got "
                          f"{type(files).__name__ if files is not None else 'nothing'}")
    seen: set[str] = set()
    for i, f in enumerate(files):
        where = f"files[{i}]"
        if not isinstance(f, dict):
            raise BundleError(f"manifest.json: {where} must be an object with path, sha256 "
                              f"and bytes, got {type(f).__name__}")
        path = relpath(f.get("path"), f"{where}.path")
        if path != f["path"]:
            raise BundleError(f"manifest.json: {where}.path {f['path']!r} is not in normal "
                              f"form ({path!r})")
        if path in seen:
            raise BundleError(f"manifest.json: {path} is listed twice")
        seen.add(path)
        if not isinstance(f.get("sha256"), str) or not _HEX64.match(f["sha256"]):
            raise BundleError(f"manifest.json: {where}.sha256 ({path}) must be 64 lowercase "
                              f"hex digits, got {f.get('sha256')!r}")
        size = f.get("bytes")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise BundleError(f"manifest.json: {where}.bytes ({path}) must be a non-negative "
                              f"integer, got {size!r}")
        if not isinstance(f.get("role", ""), str):
            raise BundleError(f"manifest.json: {where}.role ({path}) must be a string")
        prov = f.get("provenance")
        if prov is not None and not (isinstance(prov, dict) and all(
                v is None or isinstance(v, (str, int, float)) for v in prov.values())):
            raise BundleError(f"manifest.json: {where}.provenance ({path}) must be an object "
                              f"of plain values")
    for key in ("rebuilt", "absent"):
        items = man.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise BundleError(f"manifest.json: {key!r} must be a list of paths, got "
                              f"{type(items).__name__}")
        for i, item in enumerate(items):
            relpath(item, f"{key}[{i}]")


def read_member(tar: tarfile.TarFile, m: tarfile.TarInfo, limit: int, what: str) -> bytes:
    """The bytes of a small member, refused from its header when over ``limit``."""
    if m.size > limit:
        raise BundleError(f"{what} is {_fmt(m.size)}, over the cap of {_fmt(limit)}; a "
                          f"bundle's is far smaller (raise the cap with --max-manifest-bytes "
                          f"only for a bundle you expect to be this large)")
    fh = tar.extractfile(m)
    data = fh.read(limit + 1) if fh else b""
    if len(data) != m.size:
        raise BundleError(f"{what}: the archive is truncated ({len(data)} of {m.size} bytes)")
    return data


def extract_member(tar: tarfile.TarFile, m: tarfile.TarInfo, root: Path, name: str) -> str:
    """Write regular member ``m`` to ``root / name`` (a new file); its SHA-256, hashed
    while streaming. Refuses a destination outside ``root`` or one that exists."""
    dest = root / name
    if not inside(root, dest.parent) and dest.parent.exists():
        raise BundleError(f"{name}: its folder lies outside the extraction folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not inside(root, dest):
        raise BundleError(f"{name}: resolves outside the extraction folder")
    src = tar.extractfile(m)
    h = hashlib.sha256()
    n = 0
    with open(dest, "xb") as out:
        while src is not None:
            block = src.read(min(1 << 20, m.size - n))
            if not block:
                break
            h.update(block)
            out.write(block)
            n += len(block)
    if n != m.size:
        raise BundleError(f"{name}: the archive is truncated ({n} of {m.size} bytes)")
    return h.hexdigest()
