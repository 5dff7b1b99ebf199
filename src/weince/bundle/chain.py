"""The digest chain of a results tree or an archive: every evaluation to the encoder (model)
it read, that encoder to its training run's record, the record to its run folder and the
profile (``docs/reviewing.md``, "Checking an archive (the reviewer)").

A training run's ``train.json`` records its encoder's SHA-256 (``encoder_sha256``; a SimCSE
run its model folder's, ``model_sha256``), its loss, arm, grid point and seed; each
evaluation result records what it read in ``provenance.inputs`` (role -> ``{path,
sha256}``: ``encoder``, ``model``, ``features``, ``scores``; a final grid arm's assembled
k-NN, ``encoder@<point>`` for each point it took a metric from). :func:`chain_breaks` walks

    result -> provenance.inputs.encoder -> train.json encoder_sha256 -> encoder.pt (shipped)
    train.json loss / arm / point / seed -> its folder and the profile

and names both files of every link that does not hold. It catches swapped, mixed-up, edited
or truncated files, not a forger who rewrites every file of the chain consistently.
:func:`model_problems` is ``weince bundle --with-models``' check of the models it ships.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from weince.pipeline.profile import Profile
from weince.pipeline.stages import pretrain_config
from weince.utils.digest import folder_digest, sha256_path

__all__ = ["ChainRun", "chain_runs", "chain_breaks", "model_problems"]

_VISION = re.compile(r"(?:.*/)?vision/(?P<dataset>[^/]+)/(?P<backbone>[^/]+)/(?P<arm>[^/]+)"
                     r"/seed(?P<seed>\d+)")
_TEXT = re.compile(r"(?:.*/)?text/(?P<model>[^/]+)/(?P<arm>[^/]+)/seed(?P<seed>\d+)")
# the run's output its record holds the digest of, per kind of run
_OUTPUT = {"vision": ("encoder.pt", "encoder_sha256", "encoder"),
           "text": ("model", "model_sha256", "model")}


@dataclass(frozen=True)
class ChainRun:
    """A training run's folder (relative to the tree or archive), its kind and wildcards."""

    folder: str
    kind: str                      # vision | text
    wc: Mapping[str, str]

    @property
    def record(self) -> str:
        return f"{self.folder}/train.json"

    @property
    def output(self) -> str:
        return f"{self.folder}/{_OUTPUT[self.kind][0]}"


def chain_runs(paths: list[str]) -> list[ChainRun]:
    """The training runs among ``paths`` (relative paths of a tree or an archive): every
    ``.../vision/<dataset>/<backbone>/<arm>/seed<N>/`` or ``.../text/<model>/<arm>/seed<N>/``
    folder that holds a ``train.json``."""
    out = []
    for p in sorted(paths):
        if not p.endswith("/train.json"):
            continue
        folder = p[: -len("/train.json")]
        for kind, pat in (("vision", _VISION), ("text", _TEXT)):
            m = pat.fullmatch(folder)
            if m:
                out.append(ChainRun(folder, kind, m.groupdict()))
                break
    return out


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _short(sha: Any) -> str:
    return f"{str(sha)[:12]}..." if sha else "none"


def _profile(manifest: Mapping[str, Any], root: Path) -> Profile | None:
    """The archive's resolved profile (what its runs were asked to be), when readable."""
    try:
        cfg = yaml.safe_load((root / manifest["resolved_config"]).read_text())
        return Profile.of(cfg, checked=True) if isinstance(cfg, dict) else None
    except Exception:   # noqa: BLE001 - a profile this code cannot type: the identity's
        return None     # profile check is skipped (said in a note), the digests still run


def _identity(run: ChainRun, train: Mapping[str, Any], prof: Profile | None,
              selection: Mapping[str, Any] | None) -> list[str]:
    """What in the run's record contradicts its folder or the profile's run there."""
    wc, out = run.wc, []
    seed = train.get("seed", (train.get("provenance") or {}).get("seed"))
    if seed is not None and str(seed) != wc["seed"]:
        out.append(f"seed {seed}, not the folder's {wc['seed']}")
    if "arm" in train and train["arm"] != wc["arm"]:
        out.append(f"arm {train['arm']!r}, not the folder's {wc['arm']!r}")
    point = wc["arm"].split("@", 1)[1] if "@" in wc["arm"] else None
    if selection is not None:
        point = selection.get("chosen")
    if "point" in train and point is not None and train["point"] != point:
        out.append(f"grid point {train['point']!r}, not {point!r}"
                   + (" (chosen in selection.json)" if selection is not None else ""))
    if run.kind == "text":
        if "loss" in train and train["loss"] != wc["arm"]:
            out.append(f"loss {train['loss']!r}, not the arm's {wc['arm']!r}")
        return out
    if prof is None:
        return out
    try:
        want = pretrain_config(prof, wc["dataset"], wc["backbone"], wc["arm"], int(wc["seed"]))
    except (KeyError, ValueError):
        return out + [f"arm {wc['arm']!r} is not one the profile resolves"]
    cfg = (train.get("provenance") or {}).get("config") or {}
    if train.get("loss", cfg.get("loss")) != want.loss:
        out.append(f"loss {train.get('loss', cfg.get('loss'))!r}, where the profile's arm "
                   f"{wc['arm']!r} trains {want.loss!r}")
    kwargs = json.loads(json.dumps({**want.loss_kwargs, **((selection or {}).get("params")
                                                            or {})}, default=str))
    got = cfg.get("loss_kwargs")
    if isinstance(got, dict) and any(got.get(k) != v for k, v in kwargs.items()):
        out.append(f"loss options {got}, where the profile's arm {wc['arm']!r} sets {kwargs}")
    return out


def _evaluations(run: ChainRun, paths: list[str]) -> list[str]:
    """The result files in the run's folder other than its training record."""
    return [p for p in paths if p.rsplit("/", 1)[0] == run.folder and p.endswith(".json")
            and not p.endswith("/train.json")]


def _linked(role: str, run: ChainRun, digest_of: Callable[[str, str], Any]) -> tuple[str, Any]:
    """The record a result's input ``role`` must agree with, and the digest it holds there:
    the run's own ``train.json``; for ``encoder@<point>``, that grid point's run's."""
    if "@" not in role:
        return run.record, digest_of(run.record, _OUTPUT[run.kind][1])
    base = run.wc["arm"].split("@", 1)[0]
    folder = run.folder.rsplit("/", 2)
    other = f"{folder[0]}/{base}@{role.split('@', 1)[1]}/{folder[2]}/train.json"
    return other, digest_of(other, _OUTPUT[run.kind][1])


def chain_breaks(root: Path, paths: list[str], *, manifest: Mapping[str, Any] | None = None,
                 shipped: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Every broken link of the digest chain among the files ``paths`` under ``root``, each
    one line naming both files, and notes (what carries no chain: taken on trust).

    Args:
        manifest: an archive's manifest (its resolved profile checks each run's loss and
            options); ``None`` for a results tree (its profile is not checked).
        shipped: archive path -> SHA-256 of the files the archive lists (the encoders are
            not hashed again); ``None``: hash the shipped encoders and models under ``root``.
    """
    prof = _profile(manifest, root) if manifest is not None else None
    records: dict[str, dict[str, Any] | None] = {}

    def record(path: str) -> dict[str, Any] | None:
        if path not in records:
            records[path] = _json(root / path) if path in listed else None
        return records[path]

    def digest_of(path: str, key: str) -> Any:
        return (record(path) or {}).get(key)

    listed = set(paths)
    breaks: list[str] = []
    bare: list[str] = []
    unlinked: list[str] = []
    n_links = 0
    runs = chain_runs(paths)
    for run in runs:
        train = record(run.record)
        if train is None:
            breaks.append(f"{run.record}: not a readable training record")
            continue
        sel_path = f"{run.folder.rsplit('/', 1)[0]}/selection.json"
        sel = _json(root / sel_path) if sel_path in listed and "@" not in run.wc["arm"] else None
        breaks += [f"{run.record}: {p} ({run.folder})" for p in _identity(run, train, prof, sel)]
        name, key, role = _OUTPUT[run.kind]
        own = train.get(key)
        if own is None:
            bare.append(run.record)
        breaks += _shipped_output(run, own, root, listed, shipped)
        for res in _evaluations(run, paths):
            inputs = ((record(res) or {}).get("provenance") or {}).get("inputs") or {}
            links = {r: v for r, v in inputs.items() if r == role or r.startswith(f"{role}@")}
            if not links and own is not None:
                unlinked.append(res)
            for r, entry in links.items():
                n_links += 1
                where, want = _linked(r, run, digest_of)
                got = (entry or {}).get("sha256") if isinstance(entry, dict) else None
                if want is not None and got != want:
                    breaks.append(f"{res} -> {where}: the result evaluated the {role} "
                                  f"{_short(got)}, the run's record holds {_short(want)}")
    notes = [f"digest chain: {len(runs)} training run(s), {n_links} result link(s) to the "
             f"encoder or model they read" + (", all hold" if not breaks else
                                               f", {len(breaks)} broken")] if runs else []
    if bare:
        notes.append(f"{len(bare)} training record(s) hold no encoder_sha256/model_sha256 "
                     f"(made before digests were recorded): their runs' results are taken on "
                     f"trust, e.g. {bare[0]}")
    if unlinked:
        notes.append(f"{len(unlinked)} result(s) record no input digest (made before "
                     f"digests were recorded): taken on trust, e.g. {unlinked[0]}")
    if manifest is not None and prof is None:
        notes.append("the archive's resolved config could not be read as a profile: each "
                     "run's loss and options were not matched with it")
    return breaks, notes


def _shipped_output(run: ChainRun, own: Any, root: Path, listed: set[str],
                    shipped: Mapping[str, str] | None) -> list[str]:
    """The run's encoder (model folder), where shipped, against its record."""
    if own is None:
        return []
    if run.kind == "vision":
        if run.output not in listed:
            return []
        got = shipped.get(run.output) if shipped is not None else sha256_path(root / run.output)
    else:
        inside = {p[len(run.output) + 1:]: p for p in listed if p.startswith(f"{run.output}/")}
        if not inside:
            return []
        got = (folder_digest({rel: shipped[p] for rel, p in inside.items()})
               if shipped is not None else sha256_path(root / run.output))
    if got == own:
        return []
    return [f"{run.output} -> {run.record}: the shipped {_OUTPUT[run.kind][2]} has SHA-256 "
            f"{_short(got)}, its training record holds {_short(own)} (swapped, edited or "
            f"truncated)"]


def model_problems(res_dir: Path) -> list[str]:
    """What ``weince bundle --with-models`` refuses in a results folder: each training run
    whose encoder (model folder) is missing, or is not the one its ``train.json`` records."""
    out = []
    files = [p.relative_to(res_dir).as_posix() for p in res_dir.rglob("train.json")]
    for run in chain_runs(files):
        train = _json(res_dir / run.record) or {}
        path = res_dir / run.output
        name, key, _ = _OUTPUT[run.kind]
        if train.get(key) is None:
            continue   # trained before digests were recorded: nothing to check it against
        if not path.exists():
            out.append(f"{path}: missing (its run's {run.record} is there)")
        elif sha256_path(path) != train[key]:
            out.append(f"{path}: its SHA-256 {_short(sha256_path(path))} is not the "
                       f"{_short(train[key])} that {res_dir / run.record} records (truncated, "
                       f"edited or swapped)")
    return out


def check_archive(manifest: Mapping[str, Any], root: Path, skip: list[str]
                  ) -> tuple[list[str], list[str]]:
    """:func:`chain_breaks` of an unpacked archive: its listed files (less ``skip``, those
    already failing their manifest hash) with the manifest's digests of them."""
    files = [f for f in manifest["files"] if f.get("role") != "report"]
    shipped = {f["path"]: f["sha256"] for f in files}
    return chain_breaks(root, [p for p in shipped if p not in set(skip)], manifest=manifest,
                        shipped=shipped)
