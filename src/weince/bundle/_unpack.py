"""Unpacking an archive from someone else in one bounded pass (``weince verify``, and
through it ``weince merge`` and ``--reevaluate``).

The archive is read as a stream, front to back, once: its first file must be its
manifest (``weince bundle`` writes it first), which is checked before any other byte is
decompressed:

- :func:`check_manifest` (its form), then :func:`confine`: every path it names lies in
  the archive's results folder ``<root>/<profile>/`` (its metadata folder ``bundle/``
  inside), none in a hidden folder (``.git``, ``.snakemake``) or a checkout's code or
  config folders, a link entry (``link``) only a relative link to a listed file there;
- :func:`weince.bundle._limits.check_declared`: each declared size against its kind's
  limit, the sum against the total cap, then against the temporary folder's free space.

Then each member: a link, fifo or device, a name outside the folder, a second copy of a
name, or a member the standard library's tar ``data_filter`` refuses is a finding; a
listed file whose header says more bytes than declared is refused at that header; every
other listed file is written to a new file and hashed as it streams. Every decompressed
byte counts against what the manifest declares (:class:`weince.bundle._limits.Budget`).
"""

from __future__ import annotations

import json
import lzma
import os
import posixpath
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from weince.bundle._archive import (MAX_MEMBERS, BundleError, _fmt, _kind, check_manifest,
                                    extract_member, inside, read_member)
from weince.bundle._limits import (HEADER_ROOM, STREAM_ROOM, Budget, check_declared,
                                   check_free_space, open_decompressed, padded)
from weince.bundle.signing import SIG_NAME

#: the most bytes a manifest's signature may take (an SSH signature is a few hundred)
SIG_CAP = 4 << 10

__all__ = ["Unpacked", "unpack", "confine", "CODE_FOLDERS"]

#: top-level folders of a checkout that an archive never writes into (its code, configs,
#: tests, docs and data); hidden folders (``.git``, ``.snakemake``, ...) neither
CODE_FOLDERS = frozenset({"workflow", "src", "config", "tests", "docs", "profiles",
                          "benchmarks", "requirements", "scripts", "reports", "data",
                          "Snakefile", "pyproject.toml"})
META_NAME = "bundle"


@dataclass
class Unpacked:
    manifest: dict[str, Any] = field(default_factory=dict)
    listed: dict[str, dict[str, Any]] = field(default_factory=dict)
    own: set[str] = field(default_factory=set)
    unsafe: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)   # member -> its link text
    seen: set[str] = field(default_factory=set)
    read_bytes: int = 0


def _outside(what: str, path: str, results: str) -> BundleError:
    return BundleError(f"manifest.json lists {path} ({what}), outside the archive's results "
                       f"folder {results}/: a bundle holds only its results and their "
                       f"metadata, never code, configs or hidden folders of a checkout "
                       f"(refused before anything was unpacked)")


def _check_folder(results: str, profile: str) -> None:
    parts = PurePosixPath(results).parts
    if len(parts) < 2 or parts[-1] != profile:
        raise BundleError(f"manifest.json: its results folder {results!r} is not "
                          f"<results root>/{profile} (refused before anything was unpacked)")
    bad = next((p for p in parts if p.startswith(".")), None)
    if bad or parts[0] in CODE_FOLDERS:
        where = f"a hidden folder ({bad})" if bad else f"a checkout's {parts[0]} folder"
        raise BundleError(f"manifest.json names {results} as its results folder, inside "
                          f"{where}: a bundle never writes into a checkout's code, configs "
                          f"or hidden folders (refused before anything was unpacked)")


def confine(man: dict[str, Any]) -> None:
    """Refuse, naming it, the first path of manifest ``man`` (already checked by
    :func:`check_manifest`) outside its results folder, in a hidden folder, or a link
    entry that is not a relative link to a listed file inside that folder."""
    results = man["results"]
    _check_folder(results, man["profile"])
    if man["meta"] != f"{results}/{META_NAME}":
        raise _outside("its metadata folder", man["meta"], results)
    for key in ("claims", "resolved_config", "reports"):
        if not man[key].startswith(f"{man['meta']}/"):
            raise _outside(repr(key), man[key], f"{man['meta']}")
    entries = {f["path"]: f for f in man["files"]}
    for path, f in entries.items():
        if not path.startswith(f"{results}/"):
            raise _outside("a file", path, results)
        if any(p.startswith(".") for p in PurePosixPath(path).parts):
            raise _outside("a file in a hidden folder", path, results)
        if "link" in f:
            _check_link(path, f, entries, results)


def _check_link(path: str, f: dict[str, Any], entries: dict[str, Any], results: str) -> None:
    link = f["link"]
    target = posixpath.normpath(posixpath.join(posixpath.dirname(path), str(link)))
    if not isinstance(link, str) or not link or link.startswith("/") or "\\" in link \
            or any(ord(ch) < 32 for ch in link) or not target.startswith(f"{results}/"):
        raise BundleError(f"manifest.json: {path} is a link to {link!r}, not a relative link "
                          f"to a file inside {results}/ (refused before anything was "
                          f"unpacked)")
    other = entries.get(target)
    if other is None or "link" in other or other["sha256"] != f["sha256"]:
        raise BundleError(f"manifest.json: {path} links to {target}, which the manifest does "
                          f"not list as a file with the link's SHA-256 (refused)")


def _member_name(m: tarfile.TarInfo, root: Path) -> tuple[str | None, str | None]:
    """(the normalised name of a regular member, None) or (None, why it is a finding);
    (None, None) for a folder."""
    p = PurePosixPath(m.name)
    if p.is_absolute() or ".." in p.parts or "\\" in m.name:
        return None, f"{m.name} (a path outside the folder): not a regular file or folder, " \
                     f"not unpacked"
    what = _kind(m)
    if what:
        return None, f"{m.name} ({what}): not a regular file or folder, not unpacked"
    if m.isdir():
        return None, None
    try:
        tarfile.data_filter(m, str(root))   # the standard library's layer (PEP 706)
    except tarfile.FilterError as err:
        return None, f"{m.name} (refused by the tar data filter: {err})"
    return str(p), None


def unpack(path: Path, root: Path, fmt: str, *, max_bytes: int, max_manifest_bytes: int,
           on_manifest: Callable[[dict[str, Any], bytes], None]) -> Unpacked:
    """Unpack the listed files of the archive at ``path`` into ``root`` (module
    docstring); ``on_manifest(manifest, its bytes)`` once the manifest passed its checks.
    Raises BundleError for a hostile archive, CannotRun when it does not fit here."""
    out = Unpacked()
    with open_decompressed(path) as raw:
        budget = Budget(raw, max_manifest_bytes + 64 * HEADER_ROOM + STREAM_ROOM)
        try:
            tar = tarfile.open(fileobj=budget, mode="r|")   # type: ignore[call-overload]
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError) as err:
            raise BundleError(f"{path} is not a readable tar archive ({err})") from None
        with tar:
            for n, m in enumerate(tar, 1):
                if n > MAX_MEMBERS:
                    raise BundleError(f"the archive holds more than {MAX_MEMBERS} members; a "
                                      f"bundle holds one profile's files (refused)")
                _member(tar, m, root, out, budget, fmt, max_bytes, max_manifest_bytes,
                        on_manifest)
                tar.members.clear()   # nothing is looked up again: keep no headers
        out.read_bytes = budget.read_bytes
    if not out.manifest:
        raise BundleError("no */bundle/manifest.json in the archive: not a bundle made by "
                          "`weince bundle`")
    out.missing = sorted(p for p in out.listed if p not in out.seen)
    _make_links(root, out)
    meta = out.manifest["meta"]
    (root / meta).mkdir(parents=True, exist_ok=True)
    return out


def _member(tar: tarfile.TarFile, m: tarfile.TarInfo, root: Path, out: Unpacked,
            budget: Budget, fmt: str, max_bytes: int, max_manifest_bytes: int,
            on_manifest: Callable[[dict[str, Any], bytes], None]) -> None:
    name, finding = _member_name(m, root)
    if finding and m.issym() and out.manifest:
        link = (out.listed.get(str(PurePosixPath(m.name))) or {}).get("link")
        if link is not None:
            return _link_member(m, str(PurePosixPath(m.name)), link, out)
    if finding:
        out.unsafe.append(finding)
        return None
    if name is None:
        return None
    left = budget.limit - budget.read_bytes - HEADER_ROOM
    if name in out.seen:
        out.unsafe.append(f"{name} (stored twice: which copy counts is ambiguous; refused)")
        return None
    out.seen.add(name)
    if not out.manifest:
        if not name.endswith(f"{META_NAME}/manifest.json"):
            raise BundleError(f"the archive's first file is {name}, not its "
                              f"*/{META_NAME}/manifest.json: not a bundle made by `weince "
                              f"bundle`, which writes the manifest first so that it is "
                              f"checked before anything else is unpacked")
        _manifest(tar, m, name, root, out, budget, fmt, max_bytes, max_manifest_bytes,
                  on_manifest)
        return None
    f = out.listed.get(name)
    declared = f["bytes"] if f is not None else None
    if declared is not None and m.size > declared:
        raise BundleError(f"{name} is {_fmt(m.size)} in the archive, its manifest declares "
                          f"{declared} bytes: refused at its header (nothing of it unpacked)")
    if padded(m.size) > left:
        raise BundleError(f"{name}: a member of {_fmt(m.size)} that the manifest "
                          f"{'does not list' if f is None else 'declares smaller'}; refused "
                          f"at its header (nothing of it unpacked)")
    if name == f"{out.manifest['meta']}/SHA256SUMS":
        _sums(tar, m, name, root, out)
    elif name == f"{out.manifest['meta']}/{SIG_NAME}":
        (root / name).write_bytes(read_member(tar, m, SIG_CAP, name))
    elif f is None or "link" in f:
        out.unlisted.append(name)
    else:
        if m.size != declared:
            out.mismatched.append(f"{name} ({m.size} bytes; the manifest says {declared})")
        if extract_member(tar, m, root, name) != f["sha256"] and m.size == declared:
            out.mismatched.append(name)
    return None


def _manifest(tar: tarfile.TarFile, m: tarfile.TarInfo, name: str, root: Path,
              out: Unpacked, budget: Budget, fmt: str, max_bytes: int,
              max_manifest_bytes: int,
              on_manifest: Callable[[dict[str, Any], bytes], None]) -> None:
    man_bytes = read_member(tar, m, max_manifest_bytes, name)
    try:
        man = json.loads(man_bytes)
    except (ValueError, RecursionError) as err:
        raise BundleError(f"{name} is not valid JSON ({str(err)[:200]})") from None
    check_manifest(man, fmt)
    if name != f"{man['meta']}/manifest.json":
        raise BundleError(f"{name} says its folder is {man['meta']!r}: not a bundle made by "
                          f"`weince bundle` (or it was altered)")
    on_manifest(man, man_bytes)
    confine(man)
    total = check_declared(man["files"], max_bytes)
    check_free_space(root, total + len(man_bytes))
    out.manifest = man
    out.listed = {f["path"]: f for f in man["files"]}
    out.own = {name, f"{man['meta']}/SHA256SUMS", f"{man['meta']}/{SIG_NAME}"}
    sums = len(_sums_text(man))
    budget.limit = (budget.read_bytes + sum(padded(f["bytes"]) for f in man["files"])
                    + padded(sums) + padded(SIG_CAP) + HEADER_ROOM * (len(man["files"]) + 3)
                    + STREAM_ROOM)
    (root / man["meta"]).mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(man_bytes)


def _sums_text(man: dict[str, Any]) -> bytes:
    return "".join(f"{f['sha256']}  {f['path']}\n" for f in man["files"]).encode()


def _sums(tar: tarfile.TarFile, m: tarfile.TarInfo, name: str, root: Path,
          out: Unpacked) -> None:
    expected = _sums_text(out.manifest)
    got = read_member(tar, m, len(expected), name) if m.size == len(expected) else b""
    if got != expected:
        out.mismatched.append(f"{name} (does not agree with manifest.json)")
    else:
        (root / name).write_bytes(got)


def _link_member(m: tarfile.TarInfo, name: str, link: str, out: Unpacked) -> None:
    if name in out.seen:
        out.unsafe.append(f"{name} (stored twice: which copy counts is ambiguous; refused)")
        return
    out.seen.add(name)
    if m.linkname != link:
        out.mismatched.append(f"{name} (a link to {m.linkname}; the manifest says {link})")
    else:
        out.links[name] = link


def _make_links(root: Path, out: Unpacked) -> None:
    """The listed relative links (checked by :func:`confine`), once their targets are
    unpacked."""
    for name, link in sorted(out.links.items()):
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), link))
        dest = root / name
        if target not in out.seen or target in out.links or not (root / target).is_file():
            out.missing.append(f"{name} (its link target {target} is not in the archive)")
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not inside(root, dest.parent):
            raise BundleError(f"{name}: its folder lies outside the extraction folder")
        os.symlink(link, dest)

