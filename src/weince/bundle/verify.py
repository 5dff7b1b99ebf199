"""``weince verify``: check a results bundle and rebuild its report with the installed code.

Checks, in order: the archive's members against the manifest (missing files, files whose
SHA-256 does not match, files the manifest does not list), then rebuilds every claim table,
``tables.tex``, ``claims.json`` and the summary from the bundle's result files into a
temporary folder and compares them with the shipped copies (cell by cell for the Markdown
tables; verdict by verdict for ``claims.json``). The line that says when and at which
commit a report was built is the only text allowed to differ.

Offline, seconds, and only the report's dependencies (numpy, scipy, PyYAML, jsonschema,
matplotlib): nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

import yaml

from weince.bundle import _report
from weince.bundle.make import FORMAT, sha256_file
from weince.utils.provenance import git_commit

__all__ = ["verify_bundle", "VerifyResult", "normalise", "table_cells"]

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

    @property
    def ok(self) -> bool:
        return not (self.missing or self.mismatched or self.unlisted or self.differing
                    or self.verdict_changes or self.errors)

    def render(self, max_lines: int = 12) -> str:
        out = [f"bundle {self.bundle}: profile {self.profile}, {self.n_files} files, made "
               f"{self.created or '?'}",
               f"manifest sha256 {self.manifest_sha256 or '?'}"]
        for e in self.errors:
            out.append(f"ERROR {e}")
        if self.n_files:
            bad = len(self.missing) + len(self.mismatched)
            out.append(f"files: {self.n_files - bad} of {self.n_files} present with the "
                       f"manifest's SHA-256" + ("" if bad or self.unlisted else " (all)"))
        for label, items in (("MISSING", self.missing), ("HASH MISMATCH", self.mismatched),
                             ("NOT IN MANIFEST", self.unlisted)):
            for p in items[:max_lines]:
                out.append(f"  {label}: {p}")
            if len(items) > max_lines:
                out.append(f"  ... and {len(items) - max_lines} more {label.lower()}")
        if self.absent:
            out.append(f"note: {len(self.absent)} file(s) the report reads were absent when "
                       f"the bundle was made (their rows say missing/not run), e.g. "
                       f"{self.absent[0]}")
        c = self.commits
        if c:
            out.append(f"commits: results {c.get('results') or 'none'}; report built at "
                       f"{c.get('report', '?')}; bundle made at {c.get('bundle', '?')}; "
                       f"installed weince {c.get('installed', '?')}"
                       + (" (same)" if c.get("same") else " (differs: the check uses the "
                          "installed code)"))
        if self.identical or self.differing:
            out.append(f"rebuilt report: {len(self.identical)} file(s) identical"
                       + (f", {len(self.differing)} differ" if self.differing else ""))
        for name, lines in self.differing.items():
            out.append(f"  DIFFERS {name}:")
            out += [f"    {ln}" for ln in lines[:max_lines]]
            if len(lines) > max_lines:
                out.append(f"    ... and {len(lines) - max_lines} more line(s)")
        if self.verdict_changes:
            out.append("verdicts that would change:")
            out += [f"  {v}" for v in self.verdict_changes]
        elif self.verdicts:
            out.append("claim verdicts (unchanged): " + "; ".join(f"{k} {v}"
                                                          for k, v in self.verdicts.items()))
        out += [f"note: {n}" for n in self.notes]
        out.append("OK: every file matches its hash and the report rebuilds identically"
                   if self.ok else "FAILED: see the lines above")
        return "\n".join(out)


def _short(c: str) -> str:
    return c[:12] + ("+dirty" if c.endswith("+dirty") else "")


def _safe_members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    for m in tar.getmembers():
        p = PurePosixPath(m.name)
        if p.is_absolute() or ".." in p.parts:
            raise ValueError(f"archive member {m.name!r} points outside the folder; this is "
                             f"not a weince bundle (or it was altered)")
        if m.isfile():
            m.name = str(p)  # "./a/b" (tar -C dir .) -> "a/b"
            yield m


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
    import difflib

    return [("shipped: " if d[0] == "-" else "rebuilt: ") + d[1:].strip()
            for d in difflib.unified_diff(old, new, lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---")) and d[1:].strip()]


def _verdicts(claims: dict[str, Any]) -> dict[str, tuple[str, dict[str, str]]]:
    return {c["id"]: (c.get("verdict", "?"), dict(c.get("arm_verdicts") or {}))
            for c in claims.get("claims", [])}


def verify_bundle(path: str | Path, *, keep: str | Path | None = None) -> VerifyResult:
    """Check the bundle at ``path``; ``keep``: also copy the rebuilt report there."""
    path = Path(path)
    res = VerifyResult(bundle=path.name)
    if not path.exists():
        res.errors.append(f"{path} does not exist")
        return res
    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as err:
        res.errors.append(f"{path} is not a readable tar archive ({err})")
        return res
    with tar, tempfile.TemporaryDirectory(prefix="weince-verify-") as tmpd:
        tmp = Path(tmpd)
        root = tmp / "bundle"
        try:
            members = list(_safe_members(tar))
        except ValueError as err:
            res.errors.append(str(err))
            return res
        mans = [m for m in members if PurePosixPath(m.name).name == "manifest.json"
                and PurePosixPath(m.name).parent.name == "bundle"]
        if len(mans) != 1:
            res.errors.append(f"expected one */bundle/manifest.json in the archive, found "
                              f"{len(mans)}: not a bundle made by `weince bundle`")
            return res
        man_bytes = tar.extractfile(mans[0]).read()
        res.manifest_sha256 = hashlib.sha256(man_bytes).hexdigest()
        try:
            manifest = json.loads(man_bytes)
        except json.JSONDecodeError as err:
            res.errors.append(f"{mans[0].name} is not valid JSON ({err})")
            return res
        if manifest.get("format") != FORMAT:
            res.errors.append(f"bundle format {manifest.get('format')!r}; this weince reads "
                              f"{FORMAT!r}")
            return res
        res.profile = manifest["profile"]
        res.created = manifest.get("created", "")
        res.absent = list(manifest.get("absent", []))
        kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(root, members=members, **kw)

        # 1. the files against the manifest
        listed = {f["path"]: f for f in manifest["files"]}
        res.n_files = len(listed)
        meta = manifest["meta"]
        own = {f"{meta}/manifest.json", f"{meta}/SHA256SUMS"}
        for p, f in sorted(listed.items()):
            fp = root / p
            if not fp.is_file():
                res.missing.append(p)
            elif sha256_file(fp) != f["sha256"]:
                res.mismatched.append(p)
        res.unlisted = sorted(m.name for m in members if m.name not in listed
                              and m.name not in own)
        sums = root / meta / "SHA256SUMS"
        if sums.is_file() and sums.read_text() != "".join(
                f"{f['sha256']}  {f['path']}\n" for f in manifest["files"]):
            res.mismatched.append(f"{meta}/SHA256SUMS (does not agree with manifest.json)")

        # 2. commits
        results_commits = sorted({_short(f["provenance"]["git_commit"])
                                  for f in manifest["files"]
                                  if (f.get("provenance") or {}).get("git_commit")
                                  and f["role"] != "report"})
        installed = git_commit()
        shipped_claims_path = root / manifest["reports"] / "claims.json"
        report_commit = "?"
        shipped_claims: dict[str, Any] = {}
        if shipped_claims_path.is_file():
            try:
                shipped_claims = json.loads(shipped_claims_path.read_text())
                report_commit = _short(str((shipped_claims.get("provenance") or {})
                                           .get("git_commit", "?")))
            except json.JSONDecodeError as err:
                res.errors.append(f"{manifest['reports']}/claims.json is not valid JSON "
                                  f"({err})")
        res.commits = {"results": ", ".join(results_commits), "report": report_commit,
                       "bundle": _short(manifest.get("weince_commit", "?")),
                       "installed": _short(installed),
                       "same": results_commits == [_short(installed)]}

        # 3. rebuild the report from the bundle's result files
        resolved = root / manifest["resolved_config"]
        if not resolved.is_file():
            res.errors.append(f"{manifest['resolved_config']} is missing: cannot rebuild")
            return res
        cfg = yaml.safe_load(resolved.read_text())
        hash_free = False
        if Path(str(cfg.get("results", "results"))).as_posix() + f"/{res.profile}" \
                != manifest["results"]:
            cfg["results"] = str(root / manifest["results"]).rsplit("/", 1)[0]
            hash_free = True
            res.notes.append("the results root was an absolute path when bundled: the "
                             "workflow config hash line is not compared")
        out = tmp / "rebuilt"
        out.mkdir()
        shipped = root / manifest["reports"]
        rebuilt = list(manifest.get("rebuilt") or _report.rebuilt_names(cfg))
        # companion pages written by other rules (norms, ablations): the summary links them
        if shipped.is_dir():
            for f in shipped.iterdir():
                if f.is_file() and f.name not in rebuilt:
                    shutil.copy2(f, out / f.name)
        try:
            with _cwd(root):
                _report.rebuild(cfg, root / manifest["claims"], out)
        except Exception as err:  # a tampered file can break the report in any way
            res.errors.append(f"rebuilding the report failed: {type(err).__name__}: {err}")
            return res
        if keep:
            shutil.copytree(out, keep, dirs_exist_ok=True)

        # 4. compare
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
                continue  # claims.json: compared verdict by verdict below
            old = normalise(a.read_text(), config_hash=hash_free)
            new = normalise(b.read_text(), config_hash=hash_free)
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
                (a, aa), (b, bb) = vo.get(cid, ("absent", {})), vn.get(cid, ("absent", {}))
                if a != b:
                    res.verdict_changes.append(f"{cid}: {a} -> {b}")
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
    return res
