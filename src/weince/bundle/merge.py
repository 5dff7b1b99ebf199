"""``weince merge``: several verified bundles, from several sites, as one summary.

Each archive is first checked exactly as ``weince verify`` checks it (hostile archive,
hashes, per-example predictions, the installed claims registry, commits, the manifest's
signature when ``allowed_signers`` is given): one that fails is refused and nothing is
written. The archives are then taken in the order of their file names, so that any order
of ``paths`` writes the same pages, byte for byte. From the union of their rebuilt claim
files:

- one row per archive per (claim, setting, metric, arm), with a Source column naming the
  archive (its manifest's SHA-256), and the site label, commits, GPU types and container
  images of the result files behind that row, read as reported by the site unless the
  manifest's signature verified (then: signed by its principal);
- the protocol reference is the installed code's profile of the archive's name
  (:mod:`weince.bundle.order`), never another archive: a row whose result-relevant settings
  (:mod:`weince.bundle._protocol`) differ from it is refused, in one line naming the key
  and both values; where the installed code has no reference, rows of one setting that
  disagree are all refused;
- two rows of one setting whose numbers come from the same files or encoders (the same
  SHA-256) are one result: the second is refused as a duplicate, not a replication;
- a setting two archives ran under the reference protocol is a *replication*: both rows,
  and a line with their difference and whether their 95% intervals overlap (nothing is
  averaged or dropped);
- a number nothing re-checked (its files carry no per-example predictions) is marked
  ``(on trust)`` beside it;
- a claim no archive covers reads ``not run``, with its price from the planner.

Every page is written as Markdown and as HTML (``html/``, as the report's). Verdicts are
each archive's own (judged by the installed rules); the merge pools no numbers. Nothing
here imports torch.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import weince
from weince.bundle._archive import DEFAULT_MAX_BYTES, DEFAULT_MAX_MANIFEST_BYTES
from weince.bundle._atomic import MergeLocked, staged_folder
from weince.bundle._protocol import first_difference, protocol_of
from weince.bundle._registry import installed_registry
from weince.bundle.make import sha256_file
from weince.bundle.order import reference_profile, reference_protocol
from weince.bundle.verify import VerifyResult, verify_bundle
from weince.cost.estimate import claim_rows, estimate, hours_range
from weince.cost.pages import REST_GPU
from weince.pipeline.claims import load_claims
from weince.pipeline.profile import Profile
from weince.report.html import html_page_for, write_markdown_page
from weince.utils.config import parse_yaml
from weince.utils.diskspace import is_disk_full
from weince.utils.escape import md_escape

__all__ = ["merge_bundles", "MergeResult", "Row"]


@dataclass
class Archive:
    name: str
    sha256: str
    site: str
    root: Path                         # the verified files, unpacked
    results: str                       # the results folder inside the archive
    manifest: dict[str, Any]
    claims: dict[str, dict[str, Any]]  # claim id -> its rebuilt claim file
    signed_by: str = ""                # the principal whose signature verified, if any
    on_trust: frozenset[str] = frozenset()   # claim inputs nothing recomputes

    by_path: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    digests: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.by_path = {f["path"]: f.get("provenance") or {} for f in self.manifest["files"]}
        self.digests = {f["path"]: str(f.get("sha256")) for f in self.manifest["files"]}

    def file_provenance(self, arc: str) -> dict[str, Any]:
        """The manifest's provenance of the file at ``arc`` (empty when it has none)."""
        return self.by_path.get(arc, {})


@dataclass
class Row:
    claim: str
    setting: str
    label: str
    arm: str
    archive: Archive
    cell: dict[str, Any]
    gain: dict[str, Any] | None
    verdict: str
    protocol: dict[str, Any]
    files: list[str]
    reference: dict[str, Any] | None = None   # the installed code's protocol for it
    on_trust: bool = False                   # a number nothing recomputed
    made_of: frozenset[str] = frozenset()    # :meth:`identity`, read while the files exist

    def __post_init__(self) -> None:
        self.made_of = frozenset(self._read_identity())

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.claim, self.setting, self.label, self.arm)

    def identity(self) -> frozenset[str]:
        """The SHA-256s of what the row's numbers come from: its result files (the
        manifest's) and the encoders their training records name (``encoder_sha256``)."""
        return self.made_of

    def _read_identity(self) -> set[str]:
        a, out = self.archive, set()
        for arc in self.files:
            for f in (arc, _measured_at(a, arc)):
                if f in a.digests:
                    out.add(f"file {a.digests[f]}")
            train = _config_file(a.root / _measured_at(a, arc).rsplit("/", 1)[0] / "train.json")
            if isinstance(train.get("encoder_sha256"), str):
                out.add(f"encoder {train['encoder_sha256']}")
        return out


@dataclass
class MergeResult:
    out: Path
    archives: list[VerifyResult] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    replications: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cannot_run: str = ""     # a full disk at --out (nothing was left there)

    @property
    def exit_code(self) -> int:
        """0: merged, every row kept; 1: an archive failed its check (nothing written);
        2: unusable input; 3: merged, but a row was refused (another protocol than the
        installed code's, or a duplicate of another archive's result); 4: it could not run
        here (a full disk; an archive's check could not run)."""
        if self.cannot_run or any(r.exit_code == 3 for r in self.archives):
            return 4
        if self.errors:
            return 2
        if not all(r.ok for r in self.archives):
            return 1
        return 3 if self.refused or self.duplicates else 0

    def render(self, max_lines: int = 12) -> str:
        if self.cannot_run:
            return f"weince merge: {self.cannot_run}"
        out = []
        for r in self.archives:
            out.append(f"== {r.bundle}")
            out += [f"  {ln}" for ln in r.render(max_lines).splitlines()]
        out += [f"ERROR {e}" for e in self.errors]
        if self.exit_code in (1, 2):
            out.append("FAILED: no merged report written (every archive must pass `weince "
                       "verify`; see the lines above)")
            return "\n".join(out)
        out += [f"REFUSED {line}" for line in self.refused]
        out += [f"DUPLICATE {line}" for line in self.duplicates]
        out += [f"replication: {line}" for line in self.replications[:max_lines]]
        if len(self.replications) > max_lines:
            out.append(f"... and {len(self.replications) - max_lines} more replication(s), "
                       f"each on its claim's page")
        out.append(f"merged {len(self.archives)} archive(s) into {self.out}: summary.md and "
                   f"{len(self.pages)} claim page(s), each also as HTML under html/")
        if self.exit_code == 3:
            out.append(f"exit 3: {len(self.refused)} row(s) refused for their protocol and "
                       f"{len(self.duplicates)} as duplicates (see above; the pages name "
                       f"each)")
        return "\n".join(out)


def _short(c: str) -> str:
    return c[:12] + ("+dirty" if c.endswith("+dirty") else "")


def _arc_path(path: str, results: str) -> str:
    """A result file's path inside the archive, from the path the rebuild read it at."""
    marker = f"/{results}/"
    i = path.rfind(marker)
    return path[i + 1:] if i >= 0 else path


def _load_archive(res: VerifyResult, path: Path, work: Path) -> Archive:
    root, report = work / "files", work / "report"
    mans = sorted(root.glob("**/bundle/manifest.json"))
    manifest = json.loads(mans[0].read_text())
    claims = {}
    for f in sorted((report / "claims").glob("*.json")):
        d = json.loads(f.read_text())
        if isinstance(d, dict) and isinstance(d.get("id"), str):
            claims[d["id"]] = d
    sites = (manifest.get("sources") or {}).get("sites") or []
    site = ", ".join(sites) or manifest.get("site") or "-"
    return Archive(path.name, res.manifest_sha256, site, root, manifest["results"], manifest,
                   claims, signed_by=res.signature.principal if res.signature.verified else "",
                   on_trust=frozenset(res.on_trust))


def _config_file(path: Path) -> dict[str, Any]:
    """A JSON result file's content ({} when absent or not an object)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _config(path: Path) -> dict[str, Any] | None:
    cfg = (_config_file(path).get("provenance") or {}).get("config")
    return cfg if isinstance(cfg, dict) else None


def _measured_at(a: Archive, arc: str) -> str:
    """The file whose run measured ``arc``'s numbers: a grid arm's assembled ``knn.json``
    names its grid point's run (``<arm>@<point>/``), any other file is its own."""
    try:
        point = json.loads((a.root / arc).read_text()).get("selected_point")
    except (OSError, ValueError, AttributeError):
        return arc
    parts = arc.split("/")
    if not isinstance(point, dict) or not point or len(parts) < 3:
        return arc
    return "/".join([*parts[:-3], f"{parts[-3]}@{next(iter(point.values()))}", *parts[-2:]])


def _protocol(a: Archive, files: list[str], ref: Profile | None
              ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The protocol of a row: its first result file's (the run that measured it), with that
    of the encoder's training (``train.json`` beside it) under ``pretrain.``; and the
    installed code's reference protocol for that file (:mod:`weince.bundle.order`)."""
    for arc in (_measured_at(a, f) for f in files):
        cfg = _config(a.root / arc)
        if cfg is None:
            continue
        out = protocol_of(cfg)
        train = a.root / arc.rsplit("/", 1)[0] / "train.json"
        pre = _config(train) if arc.rsplit("/", 1)[-1] != "train.json" else None
        if pre is not None:
            out.update(protocol_of(pre, "pretrain"))
        point = _config_file(a.root / arc).get("selected_point")
        return out, reference_protocol(ref, arc, a.results,
                                       point if isinstance(point, str) else None)
    return {}, None


def _rows(a: Archive, config_dir: Path | None = None) -> list[Row]:
    """Every (setting, metric, arm) cell of the archive's claim files that has a number."""
    out = []
    ref = reference_profile(str(a.manifest.get("profile")), config_dir)
    for cid, claim in sorted(a.claims.items()):
        for r in claim.get("rows") or []:
            for arm, cell in (r.get("cells") or {}).items():
                est = cell.get("estimate") or {}
                if not est.get("n"):
                    continue
                files = [_arc_path(str(p), a.results) for p in cell.get("files") or []]
                proto, reference = _protocol(a, files, ref)
                out.append(Row(cid, str(r.get("setting")), str(r.get("label")), arm, a, cell,
                               (r.get("gains") or {}).get(arm),
                               str((r.get("verdicts") or {}).get(arm) or "-"),
                               proto, files, reference,
                               on_trust=any(f in a.on_trust for f in files)))
    return out


def _source(row: Row) -> str:
    """The Source cell: archive (manifest SHA-256), site, commits, GPU types, images."""
    a = row.archive
    seen: dict[str, set[str]] = {"commit": set(), "GPU": set(), "container": set()}
    for arc in row.files:
        sibling = arc.rsplit("/", 1)[0] + "/train.json"
        for p in (a.file_provenance(arc), a.file_provenance(sibling)):
            if p.get("git_commit"):
                seen["commit"].add(_short(str(p["git_commit"])))
            if p.get("gpu"):
                seen["GPU"].add(str(p["gpu"]))
            if p.get("container"):
                seen["container"].add(str(p["container"])[:19])
    told = [f"site {a.site}"] + [f"{k} {', '.join(sorted(v)) or 'not recorded'}"
                                 for k, v in seen.items()]
    who = f"signed by {a.signed_by}" if a.signed_by else "reported by the site, unsigned"
    return f"{a.name} (sha256 {a.sha256[:12]}); {'; '.join(told)} ({who})"


def _interval(est: dict[str, Any], extra: dict[str, Any]) -> tuple[Any, Any]:
    lo, hi = est.get("lo"), est.get("hi")
    if lo is None or hi is None:
        lo, hi = extra.get("lo"), extra.get("hi")
    return lo, hi


def _fmt(row: Row) -> str:
    est = row.cell.get("estimate") or {}
    lo, hi = _interval(est, row.cell.get("extra") or {})
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
    mark = f" {TRUST_MARK}" if row.on_trust else ""
    return f"{est.get('mean'):.4g}{mark}{ci} (n={est.get('n')})"


def _replication(first: Row, other: Row) -> str:
    ea, eb = first.cell.get("estimate") or {}, other.cell.get("estimate") or {}
    la, ha = _interval(ea, first.cell.get("extra") or {})
    lb, hb = _interval(eb, other.cell.get("extra") or {})
    diff = float(eb["mean"]) - float(ea["mean"])
    if None in (la, ha, lb, hb):
        overlap = "cannot say (a row has no interval: n < 2)"
    else:
        overlap = "yes" if la <= hb and lb <= ha else "NO"
    return (f"{first.claim} [{first.setting} / {first.label} / {first.arm}]: "
            f"{other.archive.name} {_fmt(other)} vs. {first.archive.name} {_fmt(first)}: "
            f"difference {diff:+.4g}; intervals overlap: {overlap}")


def _against_reference(row: Row) -> tuple[str, Any, Any] | None:
    """The first key (sorted) where ``row`` differs from the installed code's reference
    protocol (a reference value of None is set at run time, from the data: not compared)."""
    ref = row.reference or {}
    for key in sorted(ref):
        if ref[key] is not None and row.protocol.get(key, "<absent>") != ref[key]:
            return key, ref[key], row.protocol.get(key, "<absent>")
    return None


def _where(row: Row) -> str:
    return f"{row.claim} [{row.setting} / {row.label} / {row.arm}] of {row.archive.name}"


def _refuse(group: list[Row], res: MergeResult) -> list[Row]:
    """The rows of one setting that stand: those of the installed code's protocol (each
    compared with the reference on its own), or, where the installed code has no
    reference for them, all of them only when they agree (else none: nothing says which
    is right). Refused rows get a line each."""
    kept = []
    loose = [r for r in group if r.reference is None]
    for row in group:
        if row.reference is not None:
            diff = _against_reference(row)
            if diff is None:
                kept.append(row)
                continue
            k, want, got = diff
            res.refused.append(f"{_where(row)}: another protocol than the installed code's "
                               f"profile {row.archive.manifest.get('profile')!r}: {k} is "
                               f"{got!r} here and {want!r} there")
    if loose:
        first = next((d for r in loose[1:] if (d := first_difference(loose[0].protocol,
                                                                    r.protocol))), None)
        if first is None:
            kept += loose
        else:
            k = first[0]
            for row in loose:
                res.refused.append(f"{_where(row)}: the archives ran this setting under "
                                   f"different protocols ({k}: "
                                   + ", ".join(f"{r.archive.name} {r.protocol.get(k, '<absent>')!r}"
                                               for r in loose)
                                   + ") and the installed code has no reference for it: "
                                     "every such row is refused")
    return kept


def _deduplicate(kept: list[Row], res: MergeResult) -> list[Row]:
    """Rows of one setting whose numbers come from the same files or encoders (the same
    SHA-256) are one result: the first archive's (by name) stands, the others are refused
    as duplicates."""
    out: list[Row] = []
    for row in kept:
        twin = next((o for o in out if o.identity() & row.identity()), None)
        if twin is None:
            out.append(row)
            continue
        same = sorted(twin.identity() & row.identity())[0]
        res.duplicates.append(f"{_where(row)}: the same result as {twin.archive.name}'s "
                              f"({same.split()[0]} SHA-256 {same.split()[1][:12]}): one "
                              f"result bundled twice is not a replication")
    return out


def _group(rows: list[Row], res: MergeResult) -> dict[tuple, list[Row]]:
    """Rows by setting (archives by name), less those refused (:func:`_refuse`) and the
    duplicates (:func:`_deduplicate`); an archive's gains in a setting whose baseline row
    was refused are not shown."""
    by_key: dict[tuple, list[Row]] = {}
    for row in sorted(rows, key=lambda r: (r.key, r.archive.name)):
        by_key.setdefault(row.key, []).append(row)
    groups: dict[tuple, list[Row]] = {}
    refused: set[tuple[str, str, str, str]] = set()
    for key, group in by_key.items():
        kept = _deduplicate(_refuse(group, res), res)
        stand = {id(r) for r in kept}
        refused |= {(r.claim, r.setting, r.label, r.archive.name) for r in group
                    if id(r) not in stand}
        for other in kept[1:]:
            res.replications.append(_replication(kept[0], other))
        if kept:
            groups[key] = kept
    for group in groups.values():
        for row in group:
            if (row.claim, row.setting, row.label, row.archive.name) in refused:
                row.gain = {"refused": True}   # measured against a refused baseline
    return groups


def _prices(claims_path: Path) -> dict[str, str]:
    """Claim id -> its planner price on the paper profile, in words (empty when the
    checkout has no config/paper.yaml)."""
    paper = Path(weince.__file__).resolve().parents[2] / "config" / "paper.yaml"
    if not paper.is_file():
        return {}
    prof = dataclasses.replace(Profile.of(parse_yaml(paper.read_text(), str(paper)) or {}),
                               claims=claims_path)
    out = {}
    for r in claim_rows(estimate(prof, REST_GPU), prof):
        cid = r["id"]
        out[cid] = (f"{r['runs']:,} training runs, {hours_range(r['low'], r['high'])} "
                    f"GPU-hours on {REST_GPU} (`weince plan --configfile config/paper.yaml "
                    f"--target reports/paper/table_{cid.lower()}.md --gpu {REST_GPU}`)"
                    if r["runs"] else "no training runs of its own in the planner's estimate")
    return out


_HEADER = ["Setting", "Metric", "Arm", "Ours: mean [95% CI] (n)", "vs. baseline", "Verdict",
           "Source"]


TRUST_MARK = "(on trust)"
TRUST_NOTE = (f"{TRUST_MARK}: a number nothing re-checked: its result files carry no "
              f"per-example predictions (STS correlations, timings, tail fits, norms, and probe "
              f"files made before predictions were saved), so `weince verify` could not "
              f"recompute it; `weince verify --reevaluate` recomputes STS numbers from shipped "
              f"models.")


def _page(cid: str, title: str, rows: list[list[Row]], replications: list[str],
          refused: list[str], price: str) -> str:
    lines = ["[Summary](summary.md)", "", f"## {cid}: {md_escape(title)}", ""]
    if not rows:
        lines += ["**not run** in any merged archive.", "",
                  f"Price of running it: {price or 'not priced (no config/paper.yaml)'}.", ""]
        return "\n".join(lines)
    lines += ["| " + " | ".join(_HEADER) + " |", "|" + "---|" * len(_HEADER)]
    for group in rows:
        for row in group:
            gain = row.gain or {}
            vs = ("baseline refused" if gain.get("refused") else f"gain {gain['mean']:+.2f}"
                  if isinstance(gain.get("mean"), (int, float)) else "-")
            cells = [row.setting, row.label, row.arm, _fmt(row), vs, row.verdict, _source(row)]
            lines.append("| " + " | ".join(md_escape(str(c)) for c in cells) + " |")
    lines.append("")
    if any(row.on_trust for group in rows for row in group):
        lines += [md_escape(TRUST_NOTE), ""]
    if replications:
        lines += ["### Replications", ""] + [f"- {md_escape(r)}" for r in replications] + [""]
    if refused:
        lines += ["### Refused", ""] + [f"- {md_escape(r)}" for r in refused] + [""]
    return "\n".join(lines)


def _refused_lines(cid: str, res: MergeResult) -> list[str]:
    """The refused and duplicate lines of claim ``cid``."""
    return [r for r in res.refused if r.startswith(f"{cid} [")] + \
        [f"duplicate: {r}" for r in res.duplicates if r.startswith(f"{cid} [")]


def _verdicts(cid: str, groups: list[list[Row]]) -> str:
    """Each archive with a row of the claim, and the verdict its own report gave it."""
    seen = {row.archive.name: row.archive for g in groups for row in g}
    return "; ".join(f"{name}: {a.claims[cid].get('verdict')}"
                     for name, a in sorted(seen.items()))


def _write(out: Path, archives: list[Archive], rows: list[Row], res: MergeResult,
           claims_path: Path) -> None:
    reg = load_claims(claims_path)["claims"]
    groups = _group(rows, res)
    prices = _prices(claims_path)
    out.mkdir(parents=True, exist_ok=True)
    summary = ["# WEINCE reproduction: merged archives", "",
               "| Archive | manifest SHA-256 | site | profile | commits |", "|---|---|---|---|---|"]
    for a in archives:
        commits = ", ".join(_short(c) for c in (a.manifest.get("sources") or {})
                            .get("commits", [])) or "-"
        signed = f"signed by {a.signed_by}" if a.signed_by else "reported, unsigned"
        summary.append(f"| {a.name} | {a.sha256} | {md_escape(a.site)} ({md_escape(signed)}) | "
                       f"{a.manifest['profile']} | {commits} |")
    trusted = sum(row.on_trust for g in groups.values() for row in g)
    summary += ["", "Each row of a claim page is one archive's; a setting run by two archives "
                "under the installed code's protocol is listed twice (a replication), never "
                "averaged; a row under another protocol, or the same result (the same SHA-256) "
                "as another archive's, is refused (named on its claim's page). A site's label, "
                "commits, GPU types and container images are what it reported, unless its "
                "manifest's signature was checked (`--allowed-signers`). "
                f"Here: {len(res.replications)} replicated row(s), {len(res.refused)} refused, "
                f"{len(res.duplicates)} duplicate(s), {trusted} number(s) taken on trust, "
                f"marked {TRUST_MARK} on their pages.",
                "",
                "| Claim | What | Verdict per archive | Page |", "|---|---|---|---|"]
    for claim in reg:
        cid = claim["id"]
        mine = [g for k, g in groups.items() if k[0] == cid]
        reps = [r for r in res.replications if r.startswith(f"{cid} [")]
        refused = _refused_lines(cid, res)
        name = f"table_{cid.lower()}.md"
        (out / name).write_text(_page(cid, claim.get("title", ""), mine, reps, refused,
                                      prices.get(cid, "")) + "\n")
        res.pages.append(name)
        verdict = _verdicts(cid, mine) if mine else \
            f"not run; price: {prices.get(cid, 'not priced')}"
        summary.append(f"| {cid} | {md_escape(claim.get('short_title', claim.get('title', '')))}"
                       f" | {md_escape(verdict)} | [{cid}]({name}) |")
    (out / "summary.md").write_text("\n".join(summary) + "\n")
    for name in ["summary.md", *res.pages]:
        page = html_page_for(out / name)
        if page is not None:
            write_markdown_page(out / name, page)


class _NotMerged(Exception):
    """An archive failed its check: the staged output is removed."""


def _verify_all(paths: list[str | Path], tmp: Path, res: MergeResult, claims_path: Path,
                max_bytes: int, max_manifest_bytes: int, allowed_signers: str | Path | None,
                config_dir: Path | None) -> tuple[list[Archive], list[Row]]:
    """Each archive checked as ``weince verify`` checks it, its rows read (with what they
    are made of: :meth:`Row.identity`), then its files removed (at most one archive's files
    at a time in the temporary folder)."""
    archives, rows = [], []
    for i, p in enumerate(paths):
        work = tmp / str(i)
        r = verify_bundle(p, keep=work / "report", extract=work / "files",
                          max_bytes=max_bytes, max_manifest_bytes=max_manifest_bytes,
                          claims=claims_path, draw_forests=False,
                          allowed_signers=allowed_signers, require_signature=False)
        res.archives.append(r)
        if r.ok:
            archives.append(_load_archive(r, Path(p), work))
            rows += _rows(archives[-1], config_dir)
        shutil.rmtree(work, ignore_errors=True)
    if not res.exit_code:
        shas = [a.sha256 for a in archives]
        twice = sorted({a.name for a in archives if shas.count(a.sha256) > 1})
        if twice:
            res.errors.append(f"{' and '.join(twice)} are one archive (the same manifest "
                              f"SHA-256): a replication is a second run, not a second copy")
    return archives, rows


def merge_bundles(paths: list[str | Path], out: str | Path, *,
                  claims: str | Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                  max_manifest_bytes: int = DEFAULT_MAX_MANIFEST_BYTES,
                  allowed_signers: str | Path | None = None,
                  reference_config: str | Path | None = None) -> MergeResult:
    """Verify every archive of ``paths`` (as ``weince verify``), then write the merged
    summary and one page per claim to ``out`` (each also as HTML); nothing is written
    unless all pass. The archives are taken in the order of their file names, whatever
    the order of ``paths``: any order gives the same pages, byte for byte.
    ``reference_config``: the config folder whose profiles are the protocol reference
    (default: the installed checkout's ``config/``)."""
    res = MergeResult(Path(out))
    try:
        claims_path = installed_registry(claims).resolve()
    except FileNotFoundError as err:
        res.errors.append(str(err))
        return res
    digests: dict[str, list[str]] = {}
    for p in paths:
        if Path(p).is_file():
            digests.setdefault(sha256_file(Path(p)), []).append(Path(p).name)
    twice = next((names for names in digests.values() if len(names) > 1), None)
    if twice:
        res.errors.append(f"{' and '.join(twice)} are one archive (the same SHA-256): a "
                          f"replication is a second run, not a second copy")
        return res
    names = [Path(p).name for p in paths]
    if len(set(names)) != len(names):
        res.errors.append("two archives share a file name; the Source column names archives "
                          "by file name: rename one")
        return res
    paths = sorted(paths, key=lambda q: (Path(q).name, str(q)))
    config_dir = None if reference_config is None else Path(reference_config)
    try:   # written beside --out, renamed over it at the end; held against a second merge
        with staged_folder(Path(out)) as stage, \
                tempfile.TemporaryDirectory(prefix="weince-merge-") as tmpd:
            archives, rows = _verify_all(paths, Path(tmpd), res, claims_path, max_bytes,
                                         max_manifest_bytes, allowed_signers, config_dir)
            if res.exit_code:
                raise _NotMerged
            _write(stage, archives, rows, res, claims_path)
    except _NotMerged:
        pass
    except MergeLocked as err:
        res.errors.append(str(err))
    except OSError as err:
        if not is_disk_full(err):
            raise
        page = f" ({Path(err.filename).name})" if err.filename else ""
        res.cannot_run = (f"{out}: no space left on the device while writing it{page}; free "
                          f"space there or merge elsewhere (--out); nothing was left")
    return res
