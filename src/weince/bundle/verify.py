"""``weince verify``: check a results bundle and rebuild its report with the installed code.

A bundle comes from someone else, so the archive is treated as hostile: it is read once,
front to back (:mod:`weince.bundle._unpack`), its manifest first, checked before anything
else is decompressed (its paths confined to the archive's results folder, its declared
sizes against the limits of :mod:`weince.bundle._limits`, ``max_bytes`` and the free
temporary space); links, fifos, devices, paths outside the folder, names stored twice and
members larger than declared are findings, and every decompressed byte is counted. Only
the regular files the manifest lists are unpacked, into a temporary folder, hashed while
streamed.

Checks, in order: the archive's members against the manifest (missing files, files whose
size or SHA-256 does not match, files the manifest does not list), then rebuilds every
claim table, ``tables.tex``, ``claims.json`` and the summary from the bundle's result
files into a temporary folder and compares them with the shipped copies (cell by cell for
the Markdown tables; verdict by verdict for ``claims.json``). The line that says when and
at which commit a report was built is the only text allowed to differ. ``extract=DIR``
then copies the verified files to ``DIR`` (a checkout), only when every check of the
archive passed.

The rebuild judges by the reviewer's rules, not the archive's: the installed code and the
installed claims registry (:mod:`weince.bundle._registry`). The archive's registry, and the
decision rules in words its claim files carry, are compared with the installed ones, and
each difference (claim, key, archive value, installed value) fails the check; only
``archive_registry=True`` (``--archive-registry``) judges by the archive's own, and the
output then says so on every verdict line. A commit with uncommitted changes (``+dirty``)
is reported as such, never as the same code.

Offline, seconds, and only the report's dependencies (numpy, scipy, PyYAML, jsonschema,
matplotlib): nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import re
import lzma
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from weince.bundle import _report
from weince.bundle._archive import (DEFAULT_MAX_BYTES, DEFAULT_MAX_MANIFEST_BYTES, BundleError,
                                    inside)
from weince.bundle._atomic import place_all
from weince.bundle._limits import CannotRun
from weince.bundle._unpack import unpack
from weince.bundle._registry import installed_registry, registry_differences, rule_differences
from weince.bundle._trust import signature_of, taken_on_trust, trust_lines
from weince.bundle.chain import check_archive
from weince.bundle.make import FORMAT, sources
from weince.bundle.signing import Signature
from weince.pipeline.claims import load_claims
from weince.pipeline.profile import Profile
from weince.utils.diskspace import is_disk_full
from weince.utils.metrics import EVALUATIONS, metrics_of
from weince.utils.predictions import recheck
from weince.utils.provenance import git_commit

__all__ = ["verify_bundle", "checked_archive", "VerifyResult", "normalise", "table_cells",
           "BundleError"]

_BUILT = re.compile(r"built \d{4}-\d\d-\d\dT[0-9:]+(?:[+-]\d\d:\d\d|Z)? at (git )?commit "
                    r"(?:[0-9a-f]{1,40}(?:\+dirty)?|unknown|none)")
_CFG_HASH = re.compile(r"(workflow config hash) [0-9a-f]{12}")


def normalise(text: str, *, config_hash: bool = False) -> str:
    """The report text without the build stamp (date and commit of the report build)."""
    text = _BUILT.sub(r"built <date> at \1commit <commit>", text)
    if config_hash:
        text = _CFG_HASH.sub(r"\1 <hash>", text)
    return text


def table_cells(md: str) -> tuple[list[str], dict[tuple[str, ...], list[str]], list[str]]:
    """A claim table in Markdown -> (header, {row key: cells}, other lines). The row key is
    the first three columns (setting, metric, arm)."""
    header: list[str] = []
    rows: dict[tuple[str, ...], list[str]] = {}
    other: list[str] = []
    for line in md.splitlines():
        if line.startswith("|") and line.endswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]
            if all(set(c) <= set("-: ") for c in cells):
                continue
            if not header:
                header = cells
                continue
            key = tuple(cells[:3])
            n = 2
            while key in rows:
                key = tuple(cells[:3]) + (f"#{n}",)
                n += 1
            rows[key] = cells
        else:
            other.append(line)
    return header, rows, other


@dataclass
class VerifyResult:
    bundle: str
    profile: str = "?"
    manifest_sha256: str = ""
    n_files: int = 0
    created: str = ""
    unsafe: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    differing: dict[str, list[str]] = field(default_factory=dict)
    verdict_changes: list[str] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extracted: str = ""
    registry: str = ""                 # the registry that judged, in words
    archive_registry: bool = False     # judged by the archive's own (asked for)
    registry_diff: list[str] = field(default_factory=list)
    recomputed: int = 0                # numbers recomputed from per-example predictions
    recheck_files: int = 0             # probe result files that carry predictions
    unchecked: list[str] = field(default_factory=list)       # probe files without them
    recheck_failed: list[str] = field(default_factory=list)  # "file: what does not follow"
    chain_broken: list[str] = field(default_factory=list)    # weince.bundle.chain
    sources: dict[str, Any] = field(default_factory=dict)    # commits, GPUs, sites, images
    cannot_run: str = ""               # the check could not run here (disk, memory)
    unpacked: bool = False             # the pass over the archive ran to its end
    signature: Signature = field(default_factory=Signature)  # the manifest's, checked or not
    on_trust: list[str] = field(default_factory=list)        # report inputs nothing recomputes

    @property
    def archive_ok(self) -> bool:
        """Every listed file present with its size and hash, every probe number following
        from its predictions; nothing unsafe, unlisted or malformed (the report may still
        differ)."""
        return not (self.unsafe or self.missing or self.mismatched or self.unlisted
                    or self.errors or self.recheck_failed or self.cannot_run
                    or self.signature.problem or self.chain_broken)

    @property
    def ok(self) -> bool:
        """The archive is sound and the report rebuilds identically by the installed rules
        (by the archive's registry only when asked: ``archive_registry``)."""
        return self.archive_ok and not (self.differing or self.verdict_changes or (
            self.registry_diff and not self.archive_registry))

    @property
    def exit_code(self) -> int:
        """0: everything matches; 1: numbers differ (the rebuilt report, a verdict, a
        probe number or the claims registry); 2: a hostile or inconsistent archive (unsafe,
        malformed or over a limit, a file missing, unlisted or not the manifest's); 3: the
        check could not run here (disk, memory)."""
        if self.cannot_run:
            return 3
        if self.errors or self.unsafe or self.missing or self.mismatched or self.unlisted:
            return 2
        return 0 if self.ok else 1

    def render(self, max_lines: int = 12) -> str:
        out = [f"bundle {self.bundle}: profile {self.profile}, {self.n_files} files, made "
               f"{self.created or '?'}",
               f"manifest sha256 {self.manifest_sha256 or '?'}"]
        out += [f"UNSAFE MEMBER {p}" for p in self.unsafe]
        if self.cannot_run:
            out.append(f"COULD NOT RUN HERE: {self.cannot_run}")
        if self.n_files and self.unpacked:
            bad = len(self.missing) + len(self.mismatched)
            out.append(f"files: {self.n_files - bad} of {self.n_files} present with the "
                       f"manifest's SHA-256" + ("" if bad or self.unlisted else " (all)"))
        for label, items in (("MISSING", self.missing), ("HASH MISMATCH", self.mismatched),
                             ("NOT IN MANIFEST", self.unlisted)):
            for p in items[:max_lines]:
                out.append(f"  {label}: {p}")
            if len(items) > max_lines:
                out.append(f"  ... and {len(items) - max_lines} more {label.lower()}")
        for e in self.errors:
            out.append(f"ERROR {e}")
        out += self._recheck_lines(max_lines)
        out += trust_lines(self.on_trust, max_lines)
        out.append(self.signature.words())
        out += [f"  CHAIN BROKEN: {b}" for b in self.chain_broken]
        if self.absent:
            out.append(f"note: {len(self.absent)} file(s) the report reads were absent when "
                       f"the bundle was made (their rows say missing/not run), e.g. "
                       f"{self.absent[0]}")
        c = self.commits
        if c:
            out.append(f"commits: results {c.get('results') or 'none'}; report built at "
                       f"{c.get('report', '?')}; bundle made at {c.get('bundle', '?')}; "
                       f"installed weince {c.get('installed', '?')} ({c.get('relation', '?')})")
        out += self._registry_lines(max_lines)
        if self.identical or self.differing:
            out.append(f"rebuilt report: {len(self.identical)} file(s) identical"
                       + (f", {len(self.differing)} differ" if self.differing else ""))
        for name, lines in self.differing.items():
            out.append(f"  DIFFERS {name}:")
            out += [f"    {ln}" for ln in lines[:max_lines]]
            if len(lines) > max_lines:
                out.append(f"    ... and {len(lines) - max_lines} more line(s)")
        by = " [judged by the archive's registry]" if self.archive_registry else ""
        if self.verdict_changes:
            out.append("verdicts that would change" + (" (the shipped one -> the archive's "
                                                       "registry's)" if by else "") + ":")
            out += [f"  {v}{by}" for v in self.verdict_changes]
        elif self.verdicts and by:
            out.append("claim verdicts (unchanged), judged by the archive's registry, not "
                       "the installed one:")
            out += [f"  {k} {v}{by}" for k, v in self.verdicts.items()]
        elif self.verdicts:
            out.append("claim verdicts (unchanged): " + "; ".join(f"{k} {v}"
                                                          for k, v in self.verdicts.items()))
        out += [f"note: {n}" for n in self.notes]
        if self.extracted:
            out.append(self.extracted)
        if self.ok and by:
            out.append("OK by the archive's own claims registry (--archive-registry), NOT the "
                       "installed one: every file matches its hash and the report rebuilds "
                       "identically")
        else:
            out.append("OK: every file matches its hash and the report rebuilds identically "
                       "by the installed code and claims registry" if self.ok
                       else "FAILED: see the lines above")
        return "\n".join(out)

    def _recheck_lines(self, max_lines: int) -> list[str]:
        out = []
        if self.recheck_files:
            bad = len({f.split(":", 1)[0] for f in self.recheck_failed})
            out.append(f"probe numbers: {self.recomputed} recomputed from the per-example test "
                       f"predictions of {self.recheck_files} file(s) (a grid arm's assembled "
                       f"k-NN: matched with the grid run it names)"
                       + (f"; {bad} file(s) do NOT follow from their predictions:" if bad
                          else ", all match"))
        out += [f"  NUMBER MISMATCH {p}" for p in self.recheck_failed[:max_lines]]
        if len(self.recheck_failed) > max_lines:
            out.append(f"  ... and {len(self.recheck_failed) - max_lines} more")
        if self.unchecked:
            out.append(f"note: {len(self.unchecked)} probe result file(s) carry no per-example "
                       f"predictions (made before they were saved), so their numbers are taken "
                       f"on trust, e.g. {self.unchecked[0]}")
        s = self.sources
        if s:
            out.append("made at: " + "; ".join(f"{k} {', '.join(v) or 'none recorded'}"
                                               for k, v in s.items()))
        return out

    def _registry_lines(self, max_lines: int) -> list[str]:
        if not self.registry:
            return []
        out = [f"claims registry: {self.registry}"]
        if self.registry_diff:
            out.append(f"the archive's claims registry and rules differ from the installed "
                       f"ones ({len(self.registry_diff)} difference(s))"
                       + (", judged by the archive's as asked:" if self.archive_registry
                          else "; the installed ones judge:"))
            out += [f"  REGISTRY DIFFERS: {d}" for d in self.registry_diff[:max_lines]]
            if len(self.registry_diff) > max_lines:
                out.append(f"  ... and {len(self.registry_diff) - max_lines} more")
        return out


def _short(c: str) -> str:
    return c[:12] + ("+dirty" if c.endswith("+dirty") else "")


def _relation(results: list[str], report: str, installed: str) -> str:
    """How the installed code relates to the code that made the results and the report:
    a commit with uncommitted changes (``+dirty``) names no code, so it is never the same."""
    dirty = [what for what, cs in (("the results", results), ("the report", [report]),
                                   ("the installed weince", [installed]))
             if any(c.endswith("+dirty") for c in cs)]
    if dirty:
        return (f"DIRTY: {', '.join(dirty)} came from uncommitted changes, so the commit "
                f"does not say which code; the check uses the installed code")
    if results == [installed] and report in (installed, "?"):
        return "same"
    return "differs: the check uses the installed code"


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _diff_table(old: str, new: str) -> list[str]:
    ho, ro, oo = table_cells(old)
    hn, rn, on = table_cells(new)
    lines: list[str] = []
    header = hn or ho
    for key in ro.keys() | rn.keys():
        if key not in rn:
            lines.append(f"row [{' / '.join(key)}] is gone")
        elif key not in ro:
            lines.append(f"row [{' / '.join(key)}] is new")
        else:
            for i, (a, b) in enumerate(zip(ro[key], rn[key])):
                if a != b:
                    col = header[i] if i < len(header) else f"column {i + 1}"
                    lines.append(f"row [{' / '.join(key)}] column '{col}': {a!r} -> {b!r}")
    lines.sort()
    if ho != hn:
        lines.insert(0, f"header {ho} -> {hn}")
    lines += _diff_lines(oo, on)
    return lines


def _diff_lines(old: list[str], new: list[str]) -> list[str]:
    return [("shipped: " if d[0] == "-" else "rebuilt: ") + d[1:].strip()
            for d in difflib.unified_diff(old, new, lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---")) and d[1:].strip()]


_CLAIM_FILE_KEYS = ("id", "verdict", "reason", "rule", "arm_verdicts", "ours", "forest")


def _dict_at(d: Any, key: str) -> dict[str, Any]:
    """``d[key]`` when it is a dict, else an empty one (a claim file may lack it)."""
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def _claim_file_diff(shipped: Path, rebuilt: Path) -> list[str]:
    """What differs between a shipped and a rebuilt claim file, in the keys the summary
    reads (result paths inside may differ with where the bundle was unpacked)."""
    try:
        a, b = (json.loads(f.read_text()) for f in (shipped, rebuilt))
    except (ValueError, OSError) as err:
        return [f"unreadable: {err}"[:200]]
    if not isinstance(a, dict):
        return ["not a claim file"]
    out = [f"{k}: {a.get(k)!r} -> {b.get(k)!r}"[:300] for k in _CLAIM_FILE_KEYS
           if a.get(k) != b.get(k)]
    ia, ib = _dict_at(a, "inputs"), _dict_at(b, "inputs")
    if ia.get("registry") != ib.get("registry"):
        out.append("inputs.registry: computed from another registry entry than the installed "
                   "registry's")
    fa, fb = _dict_at(ia, "files"), _dict_at(ib, "files")
    out += [f"inputs.files {name}: {str(fa.get(name))[:12]} -> {str(fb.get(name))[:12]}"
            for name in sorted(fa.keys() | fb.keys()) if fa.get(name) != fb.get(name)]
    return out


def _verdicts(claims: dict[str, Any]) -> dict[str, tuple[str, dict[str, str]]]:
    return {c["id"]: (c.get("verdict", "?"), dict(c.get("arm_verdicts") or {}))
            for c in claims.get("claims", [])}


def _in_bundle(err: BaseException, root: Path) -> str:
    """The message of ``err`` with paths in the temporary folder spelt as in the archive."""
    return " ".join(str(err).replace(f"{root}{os.sep}", "").split())


def _load_yaml(path: Path, what: str) -> dict[str, Any]:
    """A plain YAML mapping from the bundle: no tags beyond safe_load's, no aliases (a
    config written by ``yaml.safe_dump`` of a JSON-read dict has none)."""
    text = path.read_text(errors="replace")
    try:
        if any(isinstance(ev, yaml.AliasEvent) for ev in yaml.parse(text)):
            raise BundleError(f"{what} uses YAML aliases; a bundle's config is plain "
                              f"key: value YAML (refused)")
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        problem = " ".join(str(err).split())
        raise BundleError(f"{what} is not plain YAML ({problem[:300]}); a bundle's config is "
                          f"written by yaml.safe_dump (refused)") from None
    if not isinstance(data, dict):
        raise BundleError(f"{what} must hold a YAML mapping (the workflow config), got "
                          f"{type(data).__name__}")
    return data


def _load_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (ValueError, RecursionError) as err:
        raise BundleError(f"{what} is not valid JSON ({str(err)[:200]})") from None


def _claims_list(data: Any, what: str) -> dict[str, Any]:
    if not (isinstance(data, dict) and isinstance(data.get("claims", []), list)
            and all(isinstance(c, dict) and isinstance(c.get("id"), str)
                    for c in data.get("claims", []))):
        raise BundleError(f"{what} must be an object whose 'claims' is a list of claims "
                          f"with an 'id' (as `weince report` writes it)")
    return data


@contextlib.contextmanager
def checked_archive(archive: str | Path, say, *, refused: str, claims: str | Path | None = None,
                    allowed_signers: str | Path | None = None
                    ) -> Iterator[tuple[Path, dict[str, Any], Profile, VerifyResult] | None]:
    """``archive`` verified and unpacked into a temporary folder, its check said: ``(root,
    manifest, the profile it was run with, the check)`` while the ``with`` lasts, or None
    (``refused`` said after the check) when it fails its check. What ``--reevaluate`` and
    ``--retrain`` start from."""
    with tempfile.TemporaryDirectory(prefix="weince-check-") as tmpd:
        root = Path(tmpd) / "files"
        res = verify_bundle(archive, extract=root, claims=claims,
                            allowed_signers=allowed_signers)
        res.extracted = ""   # a temporary folder of this check, not the reviewer's
        say(res.render())
        if not res.archive_ok:
            say(refused)
            yield None
            return
        man = json.loads(next(root.glob("**/bundle/manifest.json")).read_text())
        yield root, man, Profile.of(_load_yaml(root / man["resolved_config"],
                                               man["resolved_config"])), res


def verify_bundle(path: str | Path, *, keep: str | Path | None = None,
                  extract: str | Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                  max_manifest_bytes: int = DEFAULT_MAX_MANIFEST_BYTES,
                  claims: str | Path | None = None,
                  archive_registry: bool = False,
                  draw_forests: bool | None = None,
                  allowed_signers: str | Path | None = None,
                  require_signature: bool = True) -> VerifyResult:
    """Check the bundle at ``path``.

    Args:
        claims: the installed claims registry (default: ``config/claims.yaml`` of the
            checkout weince is imported from, else of the working folder).
        archive_registry: judge by the archive's own registry instead (every verdict line
            says so); its differences from the installed one are still listed.
        keep: also copy the rebuilt report there.
        draw_forests: draw the forest plots of the rebuilt report (default: when ``keep``).
        extract: when every check of the archive passes, copy the listed files (and the
            manifest and SHA256SUMS) to this folder, at their paths in the archive: the
            safe ``tar xzf ... -C CHECKOUT``.
        max_bytes: cap on the total size of the files unpacked (from the manifest, before
            unpacking).
        max_manifest_bytes: cap on the size of ``manifest.json``.
        allowed_signers: an ``ssh-keygen`` allowed-signers file: the manifest's signature
            must verify against it (:mod:`weince.bundle.signing`); None: not checked.
        require_signature: with ``allowed_signers``, an unsigned archive fails (else its
            provenance reads as reported by the site: ``weince merge``).

    Never raises for a bad archive: every problem is a line of the result
    (:attr:`VerifyResult.exit_code` 2; 3 when the check could not run here).
    """
    path = Path(path)
    res = VerifyResult(bundle=path.name, archive_registry=archive_registry)
    try:
        installed = installed_registry(claims).resolve()
    except FileNotFoundError as err:
        if not archive_registry:
            res.errors.append(str(err))
            return res
        installed = None
    if not path.is_file():
        res.errors.append(f"{path} does not exist" if not path.exists()
                          else f"{path} is not a file")
        return res
    with tempfile.TemporaryDirectory(prefix="weince-verify-") as tmpd:
        try:
            _verify(path, Path(tmpd), res, keep=keep, extract=extract, max_bytes=max_bytes,
                    max_manifest_bytes=max_manifest_bytes, installed=installed,
                    draw=bool(keep) if draw_forests is None else draw_forests,
                    allowed_signers=allowed_signers, require_signature=require_signature)
        except CannotRun as err:
            res.cannot_run = str(err)
        except BundleError as err:
            res.errors.append(str(err))
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as err:
            res.errors.append(f"{path.name}: the archive's data is unreadable "
                              f"({type(err).__name__}: {err})")
        except MemoryError:
            res.cannot_run = ("out of memory while checking the archive: re-run on a "
                              "machine with more memory (the archive was not judged)")
        except OSError as err:  # a full temporary folder; a listed file whose folder is a file
            if is_disk_full(err):
                res.cannot_run = (f"the temporary folder {Path(tmpd).parent} ran out of space "
                                  f"({err.strerror}): point TMPDIR at a larger disk and "
                                  f"re-run (the archive was not judged)")
            else:
                res.errors.append(f"unpacking {path.name} failed ({type(err).__name__}: "
                                  f"{err})")
    if extract is not None and not res.extracted:
        res.extracted = (f"not unpacked into {extract}: the archive failed the checks above "
                         f"(nothing was written there)")
    return res


def _verify(path: Path, tmp: Path, res: VerifyResult, *, keep, extract,
            max_bytes: int, max_manifest_bytes: int, installed: Path | None,
            draw: bool, allowed_signers: str | Path | None = None,
            require_signature: bool = True) -> None:
    root = tmp / "bundle"
    root.mkdir()
    # 1. the files against the manifest, in one bounded pass: the manifest (first in the
    # archive) and its declared sizes checked before anything else is decompressed, then
    # the sizes from the headers and the hashes while unpacking (weince.bundle._unpack)
    u = unpack(path, root, FORMAT, max_bytes=max_bytes, max_manifest_bytes=max_manifest_bytes,
               on_manifest=lambda man, data: _read_manifest(man, data, res))
    res.unsafe, res.unlisted = u.unsafe, sorted(u.unlisted)
    res.missing, res.mismatched = u.missing, sorted(u.mismatched)
    manifest, listed, own = u.manifest, u.listed, u.own
    res.unpacked = True
    res.signature = signature_of(root, manifest["meta"], allowed_signers, require_signature)
    if res.unsafe:
        res.notes.append("the report is not rebuilt from an archive that holds members "
                         "other than regular files and folders")
        return
    # 1b. every probe number against its per-example predictions; what nothing recomputes
    _recheck_numbers(manifest, root, res)
    res.on_trust = taken_on_trust(manifest, res.unchecked)
    # 1c. every result to the encoder it read, to its training run, folder and profile
    res.chain_broken, notes = check_archive(manifest, root, res.mismatched)
    res.notes += notes
    # 2. commits
    shipped, shipped_claims = _commits(manifest, root, res)
    # 3. the registry that judges: the installed one, unless the archive's was asked for
    claims_path = _registry(manifest, root, installed, res)
    # 4. rebuild the report from the bundle's result files
    out, rebuilt, hash_free = _rebuild(manifest, root, tmp, shipped, res, keep, claims_path,
                                       draw)
    # 5. compare: the pages, the verdicts, and the rules in words the claim files carry
    _compare(rebuilt, shipped, out, hash_free, shipped_claims, res)
    res.registry_diff += rule_differences(_rules(shipped), _rules(out))
    # 6. unpack into a checkout, only what was verified
    if extract is not None:
        res.extracted = _extract_into(root, [*listed, *own], Path(extract), res,
                                      manifest["results"])


def _read_manifest(manifest: dict[str, Any], man_bytes: bytes, res: VerifyResult) -> None:
    """What the result says of the bundle's manifest (checked by
    :func:`weince.bundle._archive.check_manifest`)."""
    res.manifest_sha256 = hashlib.sha256(man_bytes).hexdigest()
    res.n_files = len(manifest["files"])
    res.profile = manifest["profile"]
    res.created = manifest.get("created") or ""
    res.absent = [str(a) for a in manifest.get("absent") or []]


# the result files whose numbers follow from per-example predictions, and their evaluation
PROBE_FILES = {e.file: e.name for e in EVALUATIONS
               if any(m.per_example is not None for m in metrics_of(e.name))}


def _recheck_numbers(manifest: dict[str, Any], root: Path, res: VerifyResult) -> None:
    """Recompute every accuracy of the bundle's probe result files from their per-example
    test predictions (:func:`weince.utils.predictions.recheck`); the test labels of one
    data set must be the same in every file."""
    by_dataset: dict[str, dict[str, str]] = {}
    for f in manifest["files"]:
        kind = PROBE_FILES.get(f["path"].rsplit("/", 1)[-1])
        if kind is None or f.get("role") == "report" or f["path"] in res.mismatched \
                or not (root / f["path"]).is_file():
            continue
        try:
            data = json.loads((root / f["path"]).read_bytes())
        except (ValueError, RecursionError):
            res.recheck_failed.append(f"{f['path']}: not valid JSON")
            continue
        if not isinstance(data, dict):
            continue
        if isinstance(data.get("selected_point"), dict) and "predictions" not in data:
            _recheck_assembled(f["path"], data, root, res)
            continue
        problems, n, labels = recheck(data, kind)
        if labels is None and not problems:
            res.unchecked.append(f["path"])
            continue
        res.recheck_files += 1
        res.recomputed += n
        res.recheck_failed += [f"{f['path']}: {p}" for p in problems]
        parts = f["path"].split("/")
        ds = parts[parts.index("vision") + 1] if "vision" in parts[:-2] else \
            _dict_at(data, "meta").get("dataset")
        if labels and ds:
            by_dataset.setdefault(ds, {})[f["path"]] = labels
    for ds, files in by_dataset.items():
        if len(set(files.values())) > 1:
            first = next(iter(files))
            odd = next(p for p, h in files.items() if h != files[first])
            res.recheck_failed.append(f"{odd}: its test labels of {ds} differ from those of "
                                      f"{first} (one data set, one test set)")


def _recheck_assembled(path: str, data: dict[str, Any], root: Path, res: VerifyResult) -> None:
    """A final grid arm's ``knn.json`` assembled from its grid points' runs (each metric
    from the point chosen for it): every number must be that run's, whose own predictions
    are rechecked where it lies (``<arm>@<point>/`` beside the arm's folder)."""
    parts = path.split("/")
    if len(parts) < 3:
        res.unchecked.append(path)
        return
    checked = 0
    for metric, point in data["selected_point"].items():
        src = "/".join([*parts[:-3], f"{parts[-3]}@{point}", *parts[-2:]])
        try:
            other = json.loads((root / src).read_bytes())
        except (OSError, ValueError):
            res.unchecked.append(path)
            return
        for where, a, b in (("", data, other), ("val.", _dict_at(data, "val"),
                                                _dict_at(other, "val"))):
            if a.get(metric) != b.get(metric):
                res.recheck_failed.append(f"{path}: {where}{metric} is not that of {src}, the "
                                          f"grid point it names")
            checked += 1
    res.recheck_files += 1
    res.recomputed += checked


def _commits(manifest: dict[str, Any], root: Path, res: VerifyResult
             ) -> tuple[Path, dict[str, Any]]:
    """The commits of the results, the report, the bundle and the installed code; returns
    the shipped report folder and its ``claims.json``."""
    results_commits = sorted({_short(str(f["provenance"]["git_commit"]))
                              for f in manifest["files"]
                              if (f.get("provenance") or {}).get("git_commit")
                              and f.get("role") != "report"})
    installed = git_commit()
    shipped = root / manifest["reports"]
    shipped_claims: dict[str, Any] = {}
    report_commit = "?"
    cj = f"{manifest['reports']}/claims.json"
    if (shipped / "claims.json").is_file():
        try:
            shipped_claims = _claims_list(_load_json(shipped / "claims.json", cj), cj)
            report_commit = _short(str((shipped_claims.get("provenance") or {})
                                       .get("git_commit", "?")))
        except BundleError as err:
            res.errors.append(str(err))
            shipped_claims = {}
    res.commits = {"results": ", ".join(results_commits), "report": report_commit,
                   "bundle": _short(manifest.get("weince_commit") or "?"),
                   "installed": _short(installed)}
    res.commits["relation"] = _relation(results_commits, report_commit, _short(installed))
    res.sources = {k: v for k, v in sources(manifest["files"]).items() if k != "commits"}

    return shipped, shipped_claims


def _registry(manifest: dict[str, Any], root: Path, installed: Path | None,
              res: VerifyResult) -> Path:
    """The registry the rebuild judges by (the installed one unless the archive's was asked
    for), and every difference of the archive's from the installed one."""
    archive = root / manifest["claims"]
    try:
        theirs = load_claims(archive)
    except Exception as err:  # noqa: BLE001 - a tampered registry can fail in any way
        if res.archive_registry:
            raise BundleError(f"the bundle's claims registry cannot be read: "
                              f"{type(err).__name__}: {_in_bundle(err, root)[:300]}") from None
        theirs = None
        res.registry_diff.append(f"the archive's claims registry {manifest['claims']} cannot "
                                 f"be read ({type(err).__name__}: "
                                 f"{_in_bundle(err, root)[:200]})")
    if installed is not None and theirs is not None:
        res.registry_diff += registry_differences(theirs, load_claims(installed))
    if res.archive_registry:
        res.registry = (f"the archive's own ({manifest['claims']}), as asked "
                        f"(--archive-registry): every verdict below is judged by it, not by "
                        f"the installed rules")
        return archive
    assert installed is not None   # None only with --archive-registry (returned above)
    res.registry = f"the installed one ({installed})"
    return installed


def _rules(report: Path) -> dict[str, str]:
    """Claim id -> the decision rule in words of each claim file under ``report``."""
    out = {}
    for f in sorted((report / "claims").glob("*.json")) if report.is_dir() else []:
        try:
            d = json.loads(f.read_text())
        except (ValueError, OSError):
            continue
        if isinstance(d, dict) and isinstance(d.get("id"), str) and \
                isinstance(d.get("rule"), str):
            out[d["id"]] = d["rule"]
    return out


def _rebuild(manifest: dict[str, Any], root: Path, tmp: Path, shipped: Path,
             res: VerifyResult, keep, claims_path: Path, draw: bool
             ) -> tuple[Path, list[str], bool]:
    """Rebuild the report from the bundle's result files into ``tmp/rebuilt``; returns
    that folder, the rebuilt file names and whether the config hash line is left out of
    the comparison."""
    resolved = root / manifest["resolved_config"]
    if not resolved.is_file():
        raise BundleError(f"{manifest['resolved_config']} is missing: cannot rebuild")
    cfg = _load_yaml(resolved, manifest["resolved_config"])
    if cfg.get("profile") != res.profile:
        raise BundleError(f"{manifest['resolved_config']} is the config of profile "
                          f"{cfg.get('profile')!r}, the manifest says {res.profile!r}")
    hash_free = False
    results_cfg = cfg.get("results", "results")
    if not isinstance(results_cfg, str) or \
            Path(results_cfg).as_posix() + f"/{res.profile}" != manifest["results"]:
        cfg["results"] = str(root / manifest["results"]).rsplit("/", 1)[0]
        hash_free = True
        res.notes.append("the results root was an absolute path when bundled: the "
                         "workflow config hash line is not compared")
    try:
        with _cwd(root):
            prof = Profile.of(cfg)
            inputs = _report.report_inputs(prof, claims_path)
    except Exception as err:  # noqa: BLE001 - a tampered registry or config can fail in any way
        raise BundleError(f"the bundle's claims registry or config cannot be read: "
                          f"{type(err).__name__}: {_in_bundle(err, root)[:300]}") from None
    outside = sorted(str(p) for p in inputs if not inside(root, p))
    if outside:
        raise BundleError(f"the bundle's config makes the report read {outside[0]}, outside "
                          f"the bundle (refused: no host file is read)")
    out = tmp / "rebuilt"
    out.mkdir()
    rebuilt = list(manifest.get("rebuilt") or _report.rebuilt_names(prof))
    # companion pages written by other rules (norms, ablations): the summary links them
    if shipped.is_dir():
        for f in shipped.iterdir():
            if f.is_file() and not f.is_symlink() and f.name not in rebuilt:
                shutil.copyfile(f, out / f.name)
    try:
        with _cwd(root):
            _report.rebuild(prof, claims_path, out, draw=draw)
    except Exception as err:  # a tampered file can break the report in any way
        if is_disk_full(err) or isinstance(err, MemoryError):
            raise
        raise BundleError(f"rebuilding the report failed: {type(err).__name__}: "
                          f"{_in_bundle(err, root)[:500]}") from None
    if keep:
        shutil.copytree(out, keep, dirs_exist_ok=True)

    return out, rebuilt, hash_free


def _compare(rebuilt: list[str], shipped: Path, out: Path, hash_free: bool,
             shipped_claims: dict[str, Any], res: VerifyResult) -> None:
    """Each rebuilt page against the shipped one, and the verdicts claim by claim."""
    for name in rebuilt:
        a, b = shipped / name, out / name
        label = name
        if not a.is_file():
            res.differing[label] = ["not in the bundle"]
            continue
        if not b.is_file():
            res.differing[label] = ["not rebuilt"]
            continue
        if name.endswith(".json"):
            if name != "claims.json":   # a claim file: what the summary read from it
                diff = _claim_file_diff(a, b)
                if diff:
                    res.differing[label] = diff
                else:
                    res.identical.append(label)
            continue  # claims.json: compared verdict by verdict below
        old = normalise(a.read_text(errors="replace"), config_hash=hash_free)
        new = normalise(b.read_text(errors="replace"), config_hash=hash_free)
        if old == new:
            res.identical.append(label)
        elif name.endswith(".md") and name.startswith("table_"):
            res.differing[label] = _diff_table(old, new)
        elif name.endswith(".tex") and name.startswith("table_"):
            n = len(_diff_lines(old.splitlines(), new.splitlines())) // 2 or 1
            res.differing[label] = [f"{n} line(s) differ: the LaTeX twin of "
                                    f"{name[:-4]}.md (its cells are listed there)"]
        else:
            res.differing[label] = _diff_lines(old.splitlines(), new.splitlines())
    if shipped_claims:
        new_claims = json.loads((out / "claims.json").read_text())
        vo, vn = _verdicts(shipped_claims), _verdicts(new_claims)
        for cid in sorted(vo.keys() | vn.keys(), key=lambda c: (len(c), c)):
            (was, aa), (now, bb) = vo.get(cid, ("absent", {})), vn.get(cid, ("absent", {}))
            if was != now:
                res.verdict_changes.append(f"{cid}: {was} -> {now}")
            for arm in sorted(aa.keys() | bb.keys()):
                if aa.get(arm) != bb.get(arm):
                    res.verdict_changes.append(f"{cid} ({arm}): {aa.get(arm, 'absent')} "
                                               f"-> {bb.get(arm, 'absent')}")
        res.verdicts = {cid: v for cid, (v, _) in vn.items()}
        if shipped_claims.get("claims") == new_claims.get("claims") \
                and not res.verdict_changes:
            res.identical.append("claims.json")
        elif not res.verdict_changes:
            res.differing["claims.json"] = ["the claims' reasons or provenance differ "
                                            "(same verdicts)"]


def _extract_into(root: Path, names: list[str], dest: Path, res: VerifyResult,
                  results: str) -> str:
    """Move the verified files to ``dest``, all or nothing, each written beside its place
    then renamed over it, so that a link already there is replaced, never followed
    (:func:`weince.bundle._atomic.place_all`: only inside the archive's results folder,
    never over a file a checkout tracks)."""
    if not res.archive_ok:
        return ""  # verify_bundle says why
    if dest.exists() and not dest.is_dir():
        raise BundleError(f"--extract {dest}: exists and is not a folder")
    present = [n for n in names if (root / n).is_file() or (root / n).is_symlink()]
    n, replaced = place_all(root, present, dest, results)  # SHA256SUMS is optional
    return (f"unpacked {n} verified file(s) into {dest}"
            + (f" ({replaced} replaced an existing file)" if replaced else ""))
