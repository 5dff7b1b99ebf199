"""``weince verify --reevaluate N``: re-check an archive's numbers on the reviewer's
machine, trusting nothing but its encoders and text models (``weince bundle
--with-models``).

After the archive passes ``weince verify``, ``N`` of its runs are picked (seeded, the seed
printed; :mod:`weince.bundle._pick`): one of every kind and arm first (a plain run, a grid
point's run, a grid arm's adopted run, a SimCSE run with its model), then more at random,
so that ``N`` smaller than the number of kinds and arms still covers each. For each vision
run the frozen features are extracted here (CPU is fine; the expected time, from the
archive's own job benchmarks, is printed first), the linear probe and the k-NN rerun with
the settings its result files record, and every per-seed number compared with the
archive's; a grid arm's ``knn.json`` assembled from several points' runs is re-evaluated
metric by metric on the encoder of the point each metric names. For a SimCSE run, its STS
numbers are recomputed from the shipped model (``model/``) on the pairs its ``sts.json``
records (generated ones, or ``--data DIR`` for STS-B):

- k-NN (acc@k, recall@r): **exact** on the same features. When the archive carries the
  encoder's feature file, the k-NN on it must reproduce the archive's numbers bit for bit;
  on features extracted here, within :data:`TOLERANCE`.
- linear probe (test_acc) and STS (Spearman, Pearson x 100): within :data:`TOLERANCE`
  points: features or embeddings computed on another machine (another BLAS, another CPU)
  differ in the last bits; on one machine and one commit the rerun is exact.

A run whose result file records a setting the installed code does not take is named
(``CANNOT RE-EVALUATE``, exit 3), never a crash and never the exit of a real difference.
The runs left out and every number nothing re-checked are listed as taken on trust, and
the CPU time per encoder and per STS model is printed.

``data=DIR`` also compares the test labels of each data set in ``DIR`` (the reviewer's
own copy) with those the archive's predictions were scored against.

Imports torch (only this module of :mod:`weince.bundle` does; ``weince verify`` without
``--reevaluate`` never loads it).
"""

from __future__ import annotations

import csv
import inspect
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from weince.bundle._pick import Unit, find_units, pick_units
from weince.bundle.verify import checked_archive
from weince.data.vision import load_vision
from weince.eval.features import extract_features
from weince.eval.knn import knn_eval
from weince.eval.linear import linear_probe
from weince.eval.sts import run_sts
from weince.pipeline.profile import Profile
from weince.utils.metrics import EVALUATIONS, metric_of, metrics_of
from weince.utils.predictions import labels_sha256

__all__ = ["reevaluate", "TOLERANCE", "compare"]

TOLERANCE = 1.0      # percentage points, linear probe (and k-NN on re-extracted features)
RUNTIME_FREE = {"device", "threads", "progress", "chunk", "offline"}


def _bench_seconds(root: Path, results: str, run: Path) -> float | None:
    """What the archive's own jobs took for this encoder's features, probe and k-NN (the
    workflow's benchmark files, ``benchmarks/<rule>/<dataset>/<backbone>/<arm>/seedN.tsv``),
    or None when the archive has none."""
    tag = run.relative_to(root / results / "vision")
    total, found = 0.0, False
    for rule in ("features", "linear", "knn"):
        f = (root / results / "benchmarks" / rule / tag).with_suffix(".tsv")
        if not f.is_file():
            continue
        with open(f) as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        value = (rows[0].get("cpu_time") or rows[0].get("s") or "") if rows else ""
        try:
            total += float(value)   # CPU seconds (wall seconds where none are recorded)
            found = True
        except ValueError:
            continue
    return total if found else None


def compare(mine: dict[str, Any], theirs: dict[str, Any], keys: list[str], where: str,
            tol: float) -> tuple[list[str], bool]:
    """One line per per-seed number of ``keys`` (``where``: ``""`` for the linear probe's
    per-seed records, ``"test"`` for the k-NN's) and whether all are within ``tol``."""
    lines, ok = [], True
    for a, b in zip(mine.get("per_seed") or [], theirs.get("per_seed") or []):
        for key in keys:
            x = (a.get(where) or {}).get(key) if where else a.get(key)
            y = (b.get(where) or {}).get(key) if where else b.get(key)
            if not isinstance(y, (int, float)) or not isinstance(x, (int, float)):
                continue
            d = abs(float(x) - float(y))
            good = d == 0.0 if tol == 0 else d <= tol
            ok &= good
            bound = "must be exact" if tol == 0 else f"tolerance {tol} pts"
            lines.append(f"    seed {a.get('seed')} {key}: here {x:.4f}, archive {y:.4f}, "
                         f"|diff| {d:.4f}: "
                         f"{'exact' if d == 0 else 'within' if good else 'OVER'} ({bound})")
    return lines, ok


def _settings(result: dict[str, Any], fn: Callable[..., Any]) -> tuple[dict[str, Any], list[str]]:
    """The settings a result file records for ``fn`` (less the run-time ones), and those
    ``fn`` does not take (a run the installed code cannot re-evaluate as recorded)."""
    cfg = (result.get("provenance") or {}).get("config") or {}
    cfg = cfg.get("eval", cfg)   # the library's `weince eval` nests them; the workflow does not
    takes = inspect.signature(fn).parameters
    kept = {k: v for k, v in cfg.items() if k not in RUNTIME_FREE}
    return ({k: v for k, v in kept.items() if k in takes},
            sorted(k for k in kept if k not in takes))


class _Run:
    """One run's re-evaluation: its outcome (``ok``, ``differ``, ``cannot``) and lines."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say, self.outcome = say, "ok"

    def judge(self, what: str, lines: list[str], good: bool, bad: str = "DIFFER") -> None:
        self.say(f"  {what}: " + ("match" if good else bad))
        for ln in lines:
            self.say(ln)
        if not good and self.outcome == "ok":
            self.outcome = "differ"

    def cannot(self, why: str) -> None:
        self.say(f"  CANNOT RE-EVALUATE: {why}")
        self.outcome = "cannot" if self.outcome != "differ" else "differ"


def _features(run: Path, prof: Profile, data_root: str | None) -> dict[str, Any]:
    f = prof.vision.features
    return extract_features(run / "encoder.pt", None, data_root=data_root or prof.data_root,
                            device="cpu", progress=False, batch_size=f.batch_size,
                            max_images=f.max_images)


def _summaries(mine: dict[str, Any], theirs: dict[str, Any], metric: str,
               tol: float) -> tuple[list[str], bool]:
    """One line per split-seed value of ``metric`` (a summary's ``values``)."""
    a = (mine.get(metric) or {}).get("values") or []
    b = (theirs.get(metric) or {}).get("values") or []
    if len(a) != len(b) or not a:
        return [f"    {metric}: {len(a)} value(s) here, {len(b)} in the archive"], False
    lines, ok = [], True
    for i, (x, y) in enumerate(zip(a, b)):
        d = abs(float(x) - float(y))
        good = d <= tol
        ok &= good
        lines.append(f"    {metric} [{i}]: here {x:.4f}, archive {y:.4f}, |diff| {d:.4f}: "
                     f"{'exact' if d == 0 else 'within' if good else 'OVER'} "
                     f"(tolerance {tol} pts)")
    return lines, ok


def _assembled_knn(run: Path, theirs: dict[str, Any], prof: Profile, data_root: str | None,
                   feats: dict[str, Any], r: _Run) -> None:
    """A grid arm's ``knn.json`` assembled from its points' runs: each metric re-evaluated
    on the encoder of the point it names, with that run's k-NN settings."""
    by_point: dict[str, list[str]] = {}
    for metric, point in sorted(theirs["selected_point"].items()):
        by_point.setdefault(str(point), []).append(metric)
    own = json.loads((run / "linear.json").read_text()).get("selected_point") \
        if (run / "linear.json").is_file() else None
    for point, metrics in sorted(by_point.items()):
        src = run.parent.parent / f"{run.parent.name}@{point}" / run.name
        if not ((src / "knn.json").is_file() and (src / "encoder.pt").is_file()):
            r.cannot(f"knn.json names grid point {point} for {', '.join(metrics)}, whose run "
                     f"{src.name} (encoder and knn.json) the archive does not hold")
            continue
        point_knn = json.loads((src / "knn.json").read_text())
        kw, unknown = _settings(point_knn, knn_eval)
        if unknown:
            r.cannot(f"{src.parent.name}/{src.name}/knn.json records setting(s) "
                     f"{', '.join(unknown)} that the installed knn_eval does not take")
            continue
        here = feats if point == own else _features(src, prof, data_root)
        mine = knn_eval(here, **kw, device="cpu", threads=None)
        for metric in metrics:
            lines, good = _summaries(mine, theirs, metric, TOLERANCE)
            r.judge(f"knn.json {metric} (assembled: grid point {point}'s run, on its encoder "
                    f"extracted here)", lines, good)


def _probe(run: Path, name: str, fn: Callable[..., Any], feats: dict[str, Any],
           r: _Run) -> None:
    theirs = json.loads((run / name).read_text())
    kw, unknown = _settings(theirs, fn)
    if unknown:
        r.cannot(f"{name} records setting(s) {', '.join(unknown)} that the installed "
                 f"{fn.__name__} does not take")
        return
    mine = fn(feats, **kw, device="cpu", threads=None)
    ev = next(e for e in EVALUATIONS if e.file == name)
    keys, where = _scored_keys(mine, ev.name), ev.per_seed_at
    lines, good = compare(mine, theirs, keys, where, TOLERANCE)
    r.judge(f"{name} on features extracted here", lines, good)
    if name == "knn.json" and (run / "features.pt").is_file():
        exact = fn(str(run / "features.pt"), **kw, device="cpu")
        lines, good = compare(exact, theirs, keys, where, 0.0)
        r.judge("knn.json on the archive's own features", lines, good, "DIFFER (must be exact)")


def _one_vision(run: Path, prof: Profile, data_root: str | None, r: _Run) -> None:
    feats = _features(run, prof, data_root)
    if (run / "linear.json").is_file():
        _probe(run, "linear.json", linear_probe, feats, r)
    if (run / "knn.json").is_file():
        theirs = json.loads((run / "knn.json").read_text())
        if isinstance(theirs.get("selected_point"), dict):
            _assembled_knn(run, theirs, prof, data_root, feats, r)
        else:
            _probe(run, "knn.json", knn_eval, feats, r)


STS_KEYS = tuple(m.key for m in metrics_of("sts", test_only=True))


def _scored_keys(result: dict[str, Any], evaluation: str) -> list[str]:
    """The keys of ``result`` that are test metrics of ``evaluation`` (its declarations in
    :data:`weince.utils.metrics.METRICS`), in the file's order."""
    return [k for k in result if (m := metric_of(k)) is not None and m.test
            and m.evaluation == evaluation]


def _sts_data(recorded: str, data_dir: str | None, prof: Profile) -> str | None:
    """Where the STS pairs are read here: generated (``synthetic``), else the recorded
    folder under ``data_dir`` (its path below the profile's data root), None when absent."""
    if recorded == "synthetic":
        return recorded
    if data_dir is None:
        return None
    rel = Path(recorded)
    try:
        rel = rel.relative_to(prof.data_root)
    except ValueError:
        rel = Path(rel.name)
    here = Path(data_dir) / rel
    return str(here) if here.exists() else None


def _one_sts(run: Path, prof: Profile, data_dir: str | None, r: _Run) -> None:
    theirs = json.loads((run / "sts.json").read_text())
    cfg = (theirs.get("provenance") or {}).get("config") or {}
    data = _sts_data(str(cfg.get("data", theirs.get("data", ""))), data_dir, prof)
    if data is None:
        r.cannot(f"its STS pairs ({cfg.get('data')!r}) are not on this machine: pass --data "
                 f"DIR holding them")
        return
    kw = {k: cfg[k] for k in ("n_synthetic", "seed", "pooling", "max_length", "splits")
          if k in cfg}
    mine = run_sts(run / "model", data, None, device="cpu", offline=True, **kw)
    lines, ok = [], True
    for split in kw.get("splits") or ("dev", "test"):
        for key in STS_KEYS:
            x, y = (mine.get(split) or {}).get(key), (theirs.get(split) or {}).get(key)
            if not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
                continue
            d = abs(float(x) - float(y))
            ok &= d <= TOLERANCE
            lines.append(f"    {split} {key}: here {x:.4f}, archive {y:.4f}, |diff| {d:.4f}: "
                         f"{'exact' if d == 0 else 'within' if d <= TOLERANCE else 'OVER'} "
                         f"(tolerance {TOLERANCE} pts)")
    r.judge("sts.json from the shipped model, evaluated here", lines, ok and bool(lines))


def check_labels(root: Path, results: str, data_dir: str, say: Callable[[str], None],
                 max_images: int | None) -> bool:
    """The test labels of each data set in ``data_dir`` against those the archive's
    predictions were scored against."""
    ok, seen = True, {}
    for f in sorted((root / results).rglob("linear.json")) + sorted(
            (root / results).rglob("knn.json")):
        d = json.loads(f.read_text())
        parts = f.relative_to(root / results).parts
        ds = parts[1] if parts[0] == "vision" and len(parts) > 2 else \
            (d.get("meta") or {}).get("dataset")
        block = d.get("predictions") or {}
        if ds and block.get("test_labels_sha256") and ds not in seen:
            seen[ds] = block["test_labels_sha256"]
    for ds, sha in seen.items():
        data = load_vision(ds, data_dir, "test")
        labels = data.labels
        if max_images is not None and int(max_images) < len(data):
            g = torch.Generator().manual_seed(0)
            labels = labels[torch.randperm(len(data), generator=g)[:int(max_images)].sort().values]
        same = labels_sha256(labels.numpy()) == sha
        ok &= same
        say(f"test labels of {ds} in {data_dir}: "
            + ("the same as the archive's" if same else "DIFFER from the archive's"))
    return ok


def _expected(root: Path, results: str, picks: list[Unit], say: Callable[[str], None]) -> None:
    bench = [_bench_seconds(root, results, root / u.path) for u in picks if u.kind != "sts"]
    known = [b for b in bench if b is not None]
    say("expected time: " + (f"about {sum(known):.0f} CPU seconds for the features, "
                             f"probes and k-NN of these encoders, as the archive's own "
                             f"jobs took (their benchmarks; a GPU there, several times "
                             f"that on a CPU here), plus the check above"
                             if known else "unknown (the archive holds no job benchmarks)"))


def _times(spent: dict[str, list[float]], say: Callable[[str], None]) -> None:
    for what, label in (("vision", "encoder (features, probe and k-NN)"),
                        ("sts", "STS model")):
        t = spent.get(what) or []
        if t:
            say(f"CPU time per {label}: {sum(t) / len(t):.1f} s on average over {len(t)}, "
                f"{sum(t):.1f} s in all")


def _left(units: list[Unit], picks: list[Unit], on_trust: list[str],
          say: Callable[[str], None]) -> None:
    """What nothing re-checked: the runs not picked, and the archive's numbers that nothing
    recomputes (from the archive's check)."""
    rest = [u for u in units if u not in picks]
    if rest:
        say(f"not re-evaluated here: {len(rest)} run(s) (their probe numbers are recomputed "
            f"from their predictions above; --reevaluate {len(units)} re-evaluates every run)"
            + ("; STS numbers of the runs left out are taken on trust"
               if any(u.kind == "sts" for u in rest) else ""))
    picked_sts = {u.path for u in picks if u.kind == "sts"}
    trust = [p for p in on_trust if p.rsplit("/", 1)[0] not in picked_sts]
    if trust:
        say(f"taken on trust (nothing here re-checks them): {len(trust)} file(s): "
            + ", ".join(trust[:12]) + (" ..." if len(trust) > 12 else ""))


def reevaluate(archive: str | Path, n: int, *, seed: int = 0, data: str | None = None,
               claims: str | Path | None = None, say: Callable[[str], None] = print,
               allowed_signers: str | Path | None = None) -> int:
    """Verify ``archive``, then re-evaluate ``n`` of its runs (module docstring): 0 when
    every number is within its tolerance, 1 when one is not, 2 when the archive fails its
    check or holds no encoder or model, 3 when a picked run cannot be re-evaluated as its
    files record (and none differs)."""
    with checked_archive(archive, say, claims=claims, allowed_signers=allowed_signers,
                         refused="not re-evaluated: the archive failed the checks above") as got:
        if got is None:
            return 2
        root, man, prof, res = got
        ok = check_labels(root, man["results"], data, say, prof.vision.features.max_images) \
            if data else True
        if n < 1:
            return 0 if ok else 1
        units = find_units(root, man["results"])
        if not units:
            say("no encoder with a probe result and no text model with an STS result in the "
                "archive: it must be made with `weince bundle --with-models` to be "
                "re-evaluated")
            return 2
        picks, strata = pick_units(units, n, seed)
        say(f"re-evaluating {len(picks)} of {len(units)} run(s), picked with seed {seed} "
            f"(--seed): one of each of the {strata} kind-and-arm strata, the rest at random"
            + (f" ({len(picks)} > {n}: every stratum is covered)" if len(picks) > n else ""))
        _expected(root, man["results"], picks, say)
        spent: dict[str, list[float]] = {}
        outcomes = []
        for u in picks:
            say(f"{u.path} ({u.kind}, {u.arm}):")
            r = _Run(say)
            t0, w0 = time.process_time(), time.perf_counter()
            if u.kind == "sts":
                _one_sts(root / u.path, prof, data, r)
            else:
                _one_vision(root / u.path, prof, data, r)
            cpu = time.process_time() - t0
            spent.setdefault("sts" if u.kind == "sts" else "vision", []).append(cpu)
            say(f"  CPU time {cpu:.1f} s, wall {time.perf_counter() - w0:.1f} s")
            outcomes.append(r.outcome)
        _times(spent, say)
        _left(units, picks, res.on_trust, say)
        if not ok or "differ" in outcomes:
            say("FAILED: a re-evaluated number differs from the archive's (see above)")
            return 1
        if "cannot" in outcomes:
            say("INCOMPLETE: a picked run cannot be re-evaluated as its files record (see "
                "CANNOT RE-EVALUATE above); every number that was re-evaluated matches")
            return 3
        say("REEVALUATED: every number matches within its tolerance")
        return 0
