"""``weince bundle``: one profile's results, reports, configs and environment in one
archive with a SHA-256 manifest, so that someone without the GPU-hours can check that the
tables follow from the runs (``weince verify``) or rebuild them through Snakemake.

Members are stored at the paths a checkout uses, so ``weince verify FILE.tar.gz --extract
CHECKOUT`` (the safe unpacking: only the listed regular files, after the checks) puts the
result files where the workflow expects them:

    {results}/{profile}/...                      result files (JSON, train logs, grid
                                                 selections, timing, job logs, plots)
    {results}/{profile}/bundle/README.md         what the bundle holds, how to check it
    {results}/{profile}/bundle/manifest.json     per file: SHA-256, size, role, provenance
    {results}/{profile}/bundle/SHA256SUMS        the same hashes for ``sha256sum -c``
    {results}/{profile}/bundle/environment.json  Python, platform, installed packages
    {results}/{profile}/bundle/resolved.yaml     the workflow config the report was built with
    {results}/{profile}/bundle/claims.yaml       the claims registry it was built with
    {results}/{profile}/bundle/config/*.yaml     the checkout's config/ folder
    {results}/{profile}/bundle/reports/...       the generated tables, summary and figures

The bundled reports sit apart from ``{reports}/``, so that Snakemake rebuilds the reports
from the unpacked results instead of taking the shipped copies for up to date.
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import io
import json
import os
import platform
import sys
import tarfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from weince.bundle import _report
from weince.bundle import audit as _audit
from weince.bundle.chain import model_problems
from weince.bundle._protocol import first_difference, protocol_of, setting_of
from weince.bundle.signing import SIG_NAME, sign_manifest
from weince.pipeline.profile import Profile
from weince.utils.diskspace import DiskFullError, free_bytes, human_bytes, is_disk_full
from weince.utils.provenance import git_commit, site_label
from weince.utils.digest import sha256_file

__all__ = ["FORMAT", "META", "make_bundle", "report_config", "classify", "sha256_file",
           "rebuild_command", "sources", "check_protocols", "LinkError"]

FORMAT = "weince-bundle/1"
META = "bundle"  # {results}/{profile}/bundle/
MODEL_SUFFIXES = {".pt", ".pth", ".ckpt", ".bin", ".safetensors"}
SCORE_SUFFIXES = {".npz", ".npy"}
SKIP_SUFFIXES = {".tmp", ".lock", ".pyc"}
SKIP_NAMES = {"checkpoint.pt"}            # resume state of a finished run
REPORT_ARRAYS = {"norms_probes.npz"}      # small per-probe arrays the norms page plots
# The rules that write reports (workflow/rules/report.smk, norms.smk, ablations.smk).
REPORT_RULES = ("claim_tables", "report", "norms_report", "ablations_report")


def _configfile(profile: str) -> str:
    return "" if profile == "default" else f" --configfile config/{profile}.yaml"


def rebuild_command(profile: str) -> str:
    """The one Snakemake command that rebuilds the reports from unpacked results without
    running any other job (``docs/reviewing.md``, "Rebuilding the reports through the
    workflow").

    Only the report rules may run (``--allowed-rules``): every other file is taken as it
    is, so neither a missing encoder nor a config file newer than the results (Snakemake
    always compares modification times, whatever ``--rerun-triggers`` says) can start a
    training job; ``--forcerun`` rebuilds the reports even where older copies exist."""
    cfg = _configfile(profile)
    rules = " ".join(REPORT_RULES)
    return f"snakemake --cores 2{cfg} --allowed-rules {rules} all --forcerun {rules}"


@dataclass
class Entry:
    src: Path | None       # file on disk (None: generated in memory)
    arc: str               # path inside the archive
    role: str
    data: bytes | None = None
    link: str | None = None    # a relative link the workflow made, packed as that link


class LinkError(ValueError):
    """A link where ``weince bundle`` packs files: it never packs what a link points to."""


def _refuse_link(p: Path, why: str) -> LinkError:
    return LinkError(f"{p} is {why}: weince bundle never packs what a link points to (it "
                     f"could be a key or a token); put the file itself there (cp "
                     f"--remove-destination TARGET {p}) or remove it, and re-run")


def files_under(folder: Path) -> list[Path]:
    """The files and the symbolic links under ``folder`` (sorted), without following any
    link; a linked folder is a :class:`LinkError` naming it."""
    out = []
    for dirpath, dirs, names in os.walk(folder, followlinks=False):
        for d in dirs:
            if os.path.islink(os.path.join(dirpath, d)):
                target = os.readlink(os.path.join(dirpath, d))
                raise _refuse_link(Path(dirpath, d), f"a symbolic link to the folder {target}")
        out += [Path(dirpath, name) for name in names]
    return sorted(out)


def _plain_file(p: Path) -> None:
    """A LinkError when ``p`` is a symbolic link or has a second name (a hard link)."""
    if p.is_symlink():
        raise _refuse_link(p, f"a symbolic link to {os.readlink(p)}")
    if p.stat().st_nlink > 1:
        raise _refuse_link(p, f"a hard link ({p.stat().st_nlink} names for one file)")


def _link_of(p: Path, top: Path) -> str:
    """The text of the link ``p`` when it is one the workflow makes (relative, to a regular
    file inside ``top`` that is no link itself, through no link), else a LinkError."""
    text = os.readlink(p)
    lexical = Path(os.path.normpath(p.parent / text))
    real = Path(os.path.realpath(p))
    if os.path.isabs(text) or not _is_under(lexical, top) or lexical.is_symlink() \
            or real != lexical.resolve() or not _is_under(real, top.resolve()) \
            or not real.is_file():
        raise _refuse_link(p, f"a symbolic link to {text}")
    return text


def classify(rel: PurePosixPath) -> str:
    """``result``, ``model`` (encoders, features, text models: ``--with-models``),
    ``scores`` (raw arrays: ``--with-scores``), ``audit`` (training states in a run's
    ``audit/``: ``--with-audit``, :mod:`weince.bundle.audit`) or ``skip`` (temporary
    files)."""
    suffix = rel.suffix.lower()
    if suffix in SKIP_SUFFIXES or rel.name in SKIP_NAMES or rel.name.startswith("."):
        return "skip"
    if "audit" in rel.parts[:-1] and suffix == ".pt":
        return "audit"
    if suffix in MODEL_SUFFIXES or "model" in rel.parts[:-1]:
        return "model"
    if suffix in SCORE_SUFFIXES and rel.name not in REPORT_ARRAYS:
        return "scores"
    return "result"


def report_config(profile: str, reports: str | Path = "reports") -> tuple[dict[str, Any], Path]:
    """The workflow config the profile's report was built with (from the provenance block
    of ``{reports}/{profile}/claims.json``) and the report folder."""
    d = Path(reports) / profile
    cj = d / "claims.json"
    if not cj.exists():
        cmd = rebuild_command(profile).split(" --allowed-rules")[0]
        raise FileNotFoundError(f"no report for profile {profile!r}: {cj} does not exist; "
                                f"build it first (`{cmd}`), or pass --reports DIR")
    try:
        data = json.loads(cj.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{cj} is not valid JSON ({err}); rebuild the report") from err
    cfg = (data.get("provenance") or {}).get("config")
    if not isinstance(cfg, dict) or cfg.get("profile") != profile:
        raise ValueError(f"{cj} does not record the workflow config of profile {profile!r} in "
                         f"its provenance block; rebuild the report with this version of weince")
    return cfg, d


def _arc_root(results: str) -> str:
    """The results root inside the archive: the config's own (relative) spelling, so that
    unpacking in a checkout puts every file where the workflow looks; ``results`` for an
    absolute or escaping root."""
    p = PurePosixPath(str(results).replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or not p.parts:
        return "results"
    return str(p)


PROVENANCE_KEYS = ("git_commit", "config_hash", "seed", "date", "gpu", "container", "site")


def _provenance(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """What the manifest records of a result file's provenance (plain values), and the
    file's protocol (:func:`weince.bundle._protocol.protocol_of`; None without a config)."""
    if path.suffix != ".json":
        return None, None
    try:
        prov = json.loads(path.read_text()).get("provenance")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return None, None
    if not isinstance(prov, dict):
        return None, None
    small = {k: prov.get(k) for k in PROVENANCE_KEYS
             if k in prov or k in PROVENANCE_KEYS[:4]}
    small = {k: (v if v is None or isinstance(v, (str, int, float)) else str(v))
             for k, v in small.items()}
    cfg = prov.get("config")
    return small, (protocol_of(cfg) if isinstance(cfg, dict) else None)


def sources(files: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Every commit, GPU type, site and container image the result files of a manifest
    record (sorted; a file made before one was recorded adds nothing to it)."""
    out: dict[str, set[str]] = {"commits": set(), "GPU types": set(), "sites": set(),
                                "container images": set()}
    for f in files:
        prov = f.get("provenance") or {}
        if f.get("role") == "report" or not prov:
            continue
        for key, name in (("commits", "git_commit"), ("GPU types", "gpu"), ("sites", "site"),
                          ("container images", "container")):
            if prov.get(name):
                out[key].add(str(prov[name]))
    return {k: sorted(v) for k, v in out.items()}


def check_protocols(protocols: dict[str, dict[str, Any]]) -> None:
    """Refuse result files of one setting (:func:`setting_of`) whose protocols differ: a
    ``ValueError`` naming both files and the first differing key with both values."""
    first: dict[str, tuple[str, dict[str, Any]]] = {}
    for path, proto in sorted(protocols.items()):
        name = path.rsplit("/", 1)[-1]
        key = setting_of(path)
        if key not in first:
            first[key] = (path, proto)
            continue
        other, theirs = first[key]
        diff = first_difference(theirs, proto)
        if diff is not None and name == other.rsplit("/", 1)[-1]:
            k, a, b = diff
            raise ValueError(f"results of one setting ({key}) come from different protocols: "
                             f"{k} is {a!r} in {other} and {b!r} in {path}; re-run one of "
                             f"them at the other's settings (or remove the stale one) before "
                             f"bundling")


def environment() -> dict[str, Any]:
    """Python, platform and every installed distribution with its version (read from the
    package metadata: nothing is imported)."""
    pkgs = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if "Name" in dist.metadata else None
        if name:
            pkgs[name] = dist.version
    return {"python": platform.python_version(), "implementation": sys.implementation.name,
            "platform": platform.platform(), "machine": platform.machine(),
            "weince_commit": git_commit(),
            "packages": dict(sorted(pkgs.items(), key=lambda kv: kv[0].lower()))}


def _readme(profile: str, meta: str, n: dict[str, int], absent: list[str], opts: dict) -> str:
    extra = ", ".join(k for k, v in (("encoders and features", opts["with_models"]),
                                     ("raw score arrays", opts["with_scores"])) if v)
    left = [k for k, v in (("encoders and features (--with-models)", opts["with_models"]),
                           ("raw score arrays (--with-scores)", opts["with_scores"])) if not v]
    lines = [
        f"# weince results bundle: profile `{profile}`",
        "",
        f"Made by `weince bundle` on {opts['created']} at weince commit {opts['commit']}.",
        "",
        "## What it holds",
        "",
        f"- {n.get('result', 0)} result files under `{meta.rsplit('/', 1)[0]}/`: every file "
        f"the report reads (claim inputs, training logs for the figures), the other per-run "
        f"results (train.json, train_log.jsonl, grid selections, timing, job logs, plots)"
        + (f", and {extra}" if extra else "") + ".",
        f"- `{meta}/reports/`: the tables, summary, claims.json and figures as generated "
        f"({n.get('report', 0)} files).",
        f"- `{meta}/resolved.yaml`: the workflow config the report was built with; "
        f"`{meta}/claims.yaml`: the claims registry; `{meta}/config/`: the config folder.",
        f"- `{meta}/environment.json`: Python, platform and package versions.",
        f"- `{meta}/manifest.json`: SHA-256, size, role and provenance (commit, config hash, "
        f"seed, date) of every file; `{meta}/SHA256SUMS`: the same hashes.",
    ]
    if left:
        lines.append(f"- Not included: {'; '.join(left)}.")
    if absent:
        lines.append(f"- {len(absent)} file(s) the report reads did not exist when the bundle "
                     f"was made (listed in manifest.json `absent`); their rows read "
                     f"'missing' or 'not run'.")
    lines += [
        "",
        "## How to check it",
        "",
        "1. The numbers follow from the runs (offline, seconds, no GPU, no torch):",
        "",
        "       weince verify THIS_FILE.tar.gz",
        "",
        "   checks every hash, rebuilds every claim table and the summary from the result "
        "files with the installed weince, and prints the cells and verdicts that differ; "
        "exit 0 only when everything matches.",
        "",
        "2. Without weince, the hashes alone (unpack into an empty folder):",
        "",
        f"       mkdir check && tar xzf THIS_FILE.tar.gz -C check && cd check && "
        f"sha256sum -c {meta}/SHA256SUMS",
        "",
        "3. Through the workflow, in a checkout at the commit that produced the results "
        "(`weince verify` prints it; no training job runs). `--extract` unpacks only the "
        "files the manifest lists, and only after every check passed:",
        "",
        "       weince verify THIS_FILE.tar.gz --extract CHECKOUT && cd CHECKOUT",
        f"       {rebuild_command(profile)}",
        f"       diff reports/{profile}/table_c3.md {meta}/reports/table_c3.md",
        "",
        "   Only the report rules run. The tables differ from the shipped ones only in the "
        "line that says when and at which commit the report was built.",
        "",
    ]
    return "\n".join(lines)


def make_bundle(profile: str, out: str | Path, *, reports: str | Path = "reports",
                with_models: bool = False, with_scores: bool = False,
                config_dir: str | Path = "config", sign: str | Path | None = None,
                with_audit: bool = False) -> dict[str, Any]:
    """Write the bundle of ``profile`` to ``out`` (a ``.tar.gz``); returns its manifest.
    ``sign``: an SSH private key that signs the manifest (:mod:`weince.bundle.signing`).
    ``with_audit``: also the training audit states of the runs feeding verdict rows (their
    size printed first, :mod:`weince.bundle.audit`).

    Raises:
        FileNotFoundError: no report for the profile, or no results folder.
    """
    cfg, rep_dir = report_config(profile, reports)
    prof = Profile.of(cfg)
    results_root = prof.results
    res_dir = results_root / profile
    if not res_dir.is_dir():
        raise FileNotFoundError(f"results folder {res_dir} does not exist (the report of "
                                f"profile {profile!r} names results root {str(results_root)!r}); "
                                f"run the command from the workflow's folder")
    if with_models and (bad := model_problems(res_dir)):   # never ships a broken chain
        raise ValueError(f"--with-models: {len(bad)} model(s) missing or not the one their "
                         f"run recorded, nothing written: " + "; ".join(bad)
                         + f". Rebuild each (`snakemake --cores 2{_configfile(profile)} "
                           f"--forcerun <file>`), then bundle again")
    arc_res = f"{_arc_root(str(results_root))}/{profile}"
    meta = f"{arc_res}/{META}"
    claims_src = prof.claims
    if not claims_src.exists():
        raise FileNotFoundError(f"claims registry {claims_src} (named by the report's "
                                f"config) does not exist")

    readers = _report.report_inputs(prof, claims_src)
    wanted = {"result"} | ({"model"} if with_models else set()) | (
        {"scores"} if with_scores else set())
    entries, counts, absent = _result_entries(res_dir, arc_res, readers, wanted)
    if with_audit:
        entries += [Entry(f, f"{arc_res}/{rel}", _audit.ROLE)
                    for f, rel in _audit.audit_files(res_dir, readers)]
    for f in files_under(rep_dir):
        rel = PurePosixPath(f.relative_to(rep_dir).as_posix())
        if classify(rel) == "skip":
            continue
        _plain_file(f)
        entries.append(Entry(f, f"{meta}/reports/{rel}", "report"))
        counts["report"] = counts.get("report", 0) + 1
    entries.append(Entry(claims_src, f"{meta}/claims.yaml", "claims registry"))
    cdir = Path(config_dir)
    if cdir.is_dir():
        for f in sorted(cdir.glob("*.y*ml")):
            entries.append(Entry(f, f"{meta}/config/{f.name}", "config"))
    for e in entries:
        if e.role in ("claims registry", "config") and e.src is not None:
            _plain_file(e.src)
    created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    commit = git_commit()
    opts = {"with_models": with_models, "with_scores": with_scores, "created": created,
            "commit": commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")}
    gen = {
        f"{meta}/resolved.yaml": ("resolved config",
                                  yaml.safe_dump(cfg, sort_keys=False).encode()),
        f"{meta}/environment.json": ("environment",
                                     (json.dumps(environment(), indent=2) + "\n").encode()),
        f"{meta}/README.md": ("readme", _readme(profile, meta, counts, absent, opts).encode()),
    }
    for arc, (role, data) in gen.items():
        entries.append(Entry(None, arc, role, data))

    files = _manifest_files(entries)
    manifest = {
        "format": FORMAT, "profile": profile, "created": created, "weince_commit": commit,
        "results_root": str(results_root), "reports_root": str(prof.reports),
        "meta": meta, "results": arc_res, "claims": f"{meta}/claims.yaml",
        "resolved_config": f"{meta}/resolved.yaml", "reports": f"{meta}/reports",
        "rebuilt": _report.rebuilt_names(prof),
        "options": {"with_models": with_models, "with_scores": with_scores,
                    "with_audit": with_audit},
        "rebuild_command": rebuild_command(profile),
        "sources": sources(files), "site": site_label(),
        "absent": absent, "files": files,
    }
    sums = "".join(f"{f['sha256']}  {f['path']}\n" for f in files).encode()
    man = (json.dumps(manifest, indent=1) + "\n").encode()
    sig = sign_manifest(man, sign) if sign is not None else None

    _write_archive(Path(out), meta, man, sums, entries, sig)
    return manifest


def _manifest_files(entries: list[Entry]) -> list[dict[str, Any]]:
    """The manifest's entry of each file: its SHA-256, size, role, link and provenance;
    the protocols of the results checked to agree (:func:`check_protocols`)."""
    files: list[dict[str, Any]] = []
    protocols: dict[str, dict[str, Any]] = {}
    for e in entries:
        prov = proto = None
        if e.data is not None:
            digest, size = hashlib.sha256(e.data).hexdigest(), len(e.data)
        elif e.link is not None:   # its target's hash (sha256sum -c follows it); no bytes
            assert e.src is not None
            digest, size = sha256_file(e.src), 0
        else:
            assert e.src is not None   # an entry is a file on disk or bytes in memory
            digest, size = sha256_file(e.src), e.src.stat().st_size
            prov, proto = _provenance(e.src)
        if proto is not None and e.role != "report":
            protocols[e.arc] = proto
        files.append({"path": e.arc, "sha256": digest, "bytes": size, "role": e.role,
                      **({"link": e.link} if e.link is not None else {}),
                      **({"provenance": prov} if prov else {})})
    check_protocols(protocols)
    return files


def _result_entries(res_dir: Path, arc_res: str, readers: dict[Path, Any], wanted: set[str]
                    ) -> tuple[list[Entry], dict[str, int], list[str]]:
    """The result files of the kinds ``wanted`` (role: what reads them), their counts per
    kind, and the report inputs that do not exist (``absent``)."""
    entries: list[Entry] = []
    counts: dict[str, int] = {}
    for f in files_under(res_dir):
        rel = PurePosixPath(f.relative_to(res_dir).as_posix())
        if rel.parts[0] == META:
            continue
        kind = classify(rel)
        if kind not in wanted:
            continue
        role = kind
        who = readers.get(f)
        if who:
            role = f"report input ({', '.join(who)})"
        link = _link_of(f, res_dir) if f.is_symlink() else None
        if link is None:
            _plain_file(f)
        entries.append(Entry(f, f"{arc_res}/{rel}", role, link=link))
        counts[kind] = counts.get(kind, 0) + 1
    absent = sorted(f"{arc_res}/{PurePosixPath(p.relative_to(res_dir).as_posix())}"
                    for p in readers if not p.exists() and _is_under(p, res_dir))
    return entries, counts, absent


def _write_archive(out: Path, meta: str, man: bytes, sums: bytes, entries: list[Entry],
                   sig: bytes | None = None) -> None:
    """The ``.tar.gz``: manifest, its signature (when signed) and sums first, then every
    entry (written beside ``out`` and renamed over it; removed on any failure, a full disk
    named in one line). A link entry is stored as the link it is; no link is followed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    free = free_bytes(out.parent)
    try:
        with tarfile.open(tmp, "w:gz", dereference=False) as tar:
            own = [(f"{meta}/manifest.json", man), (f"{meta}/SHA256SUMS", sums)]
            if sig is not None:
                own.insert(1, (f"{meta}/{SIG_NAME}", sig))
            for arc, data in own:
                _add_bytes(tar, arc, data)
            for e in entries:
                if e.data is not None:
                    _add_bytes(tar, e.arc, e.data)
                elif e.link is not None:
                    _add_link(tar, e.arc, e.link)
                else:
                    assert e.src is not None   # an entry is a file on disk or bytes in memory
                    tar.add(e.src, arcname=e.arc, recursive=False, filter=_anonymous)
        tmp.replace(out)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if not is_disk_full(err):
            raise
        raise DiskFullError(errno.ENOSPC, f"{out}: no space left on the device while writing "
                            f"it ({human_bytes(free)} were free in {out.parent or '.'}); free "
                            f"space there or write the archive elsewhere (--out) and re-run; "
                            f"no partial archive was left") from None


def _is_under(p: Path, d: Path) -> bool:
    try:
        p.relative_to(d)
        return True
    except ValueError:
        return False


def _anonymous(ti: tarfile.TarInfo) -> tarfile.TarInfo:
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


def _add_link(tar: tarfile.TarFile, arc: str, link: str) -> None:
    ti = tarfile.TarInfo(arc)
    ti.type, ti.linkname = tarfile.SYMTYPE, link
    ti.mtime = int(_dt.datetime.now().timestamp())
    ti.mode = 0o777
    tar.addfile(ti)


def _add_bytes(tar: tarfile.TarFile, arc: str, data: bytes) -> None:
    ti = tarfile.TarInfo(arc)
    ti.size = len(data)
    ti.mtime = int(_dt.datetime.now().timestamp())
    ti.mode = 0o644
    tar.addfile(ti, io.BytesIO(data))
