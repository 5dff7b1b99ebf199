"""``weince verify --reevaluate N``: re-check an archive's probe numbers on the reviewer's
machine, trusting nothing but its encoders (``weince bundle --with-models``).

After the archive passes ``weince verify``, ``N`` of its encoders are picked at random
(seeded, the seed printed); for each, the frozen features are extracted here (CPU is fine;
the expected time, from the archive's own job benchmarks, is printed first), the linear
probe and the k-NN rerun with the settings its result files record, and every per-seed
number compared with the archive's:

- k-NN (acc@k, recall@r): **exact** on the same features. When the archive carries the
  encoder's feature file, the k-NN on it must reproduce the archive's numbers bit for bit;
  on features extracted here, within :data:`TOLERANCE`.
- linear probe (test_acc): within :data:`TOLERANCE` percentage points: features extracted
  on another machine (another BLAS, another CPU) differ in the last bits, which moves a few
  test predictions of a trained probe; on one machine and one commit the rerun is exact.

``data=DIR`` also compares the test labels of each data set in ``DIR`` (the reviewer's
own copy) with those the archive's predictions were scored against.

Imports torch (only this module of :mod:`weince.bundle` does; ``weince verify`` without
``--reevaluate`` never loads it).
"""

from __future__ import annotations

import csv
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from weince.bundle.verify import _load_yaml, verify_bundle
from weince.data.vision import load_vision
from weince.eval.features import extract_features
from weince.eval.knn import knn_eval
from weince.eval.linear import linear_probe
from weince.pipeline.profile import Profile
from weince.utils.predictions import labels_sha256

__all__ = ["reevaluate", "TOLERANCE", "compare"]

TOLERANCE = 1.0      # percentage points, linear probe (and k-NN on re-extracted features)
RUNTIME_FREE = {"device", "threads", "progress", "chunk"}


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


def _settings(result: dict[str, Any]) -> dict[str, Any]:
    cfg = (result.get("provenance") or {}).get("config") or {}
    cfg = cfg.get("eval", cfg)   # the library's `weince eval` nests them; the workflow does not
    return {k: v for k, v in cfg.items() if k not in RUNTIME_FREE}


def _one(run: Path, prof: Profile, data_root: str | None, say: Callable[[str], None]) -> bool:
    ok = True
    t0, w0 = time.process_time(), time.perf_counter()
    f = prof.vision.features
    feats = extract_features(run / "encoder.pt", None, data_root=data_root or prof.data_root,
                             device="cpu", progress=False, batch_size=f.batch_size,
                             max_images=f.max_images)
    for name, fn, keys, where in (("linear.json", linear_probe, ["test_acc"], ""),
                                  ("knn.json", knn_eval, None, "test")):
        if not (run / name).is_file():
            continue
        theirs = json.loads((run / name).read_text())
        mine = fn(feats, **_settings(theirs), device="cpu", threads=None)
        if keys is None:
            keys = [k for k in mine if k.startswith(("acc@", "recall@"))]
        lines, good = compare(mine, theirs, keys, where, TOLERANCE)
        say(f"  {name} on features extracted here: " + ("match" if good else "DIFFER"))
        for ln in lines:
            say(ln)
        ok &= good
        if name == "knn.json" and (run / "features.pt").is_file():
            exact = fn(str(run / "features.pt"), **_settings(theirs), device="cpu")
            lines, good = compare(exact, theirs, keys, where, 0.0)
            say("  knn.json on the archive's own features: "
                + ("exact" if good else "DIFFER (must be exact)"))
            for ln in lines:
                say(ln)
            ok &= good
    say(f"  CPU time {time.process_time() - t0:.1f} s, wall {time.perf_counter() - w0:.1f} s")
    return ok


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


def reevaluate(archive: str | Path, n: int, *, seed: int = 0, data: str | None = None,
               claims: str | Path | None = None, say: Callable[[str], None] = print) -> int:
    """Verify ``archive``, then re-evaluate ``n`` of its encoders (module docstring);
    0 when every number is within its tolerance, 1 when one is not, 2 when the archive
    fails its check or holds no encoder."""
    with tempfile.TemporaryDirectory(prefix="weince-reevaluate-") as tmpd:
        root = Path(tmpd) / "files"
        res = verify_bundle(archive, extract=root, claims=claims)
        res.extracted = ""   # a temporary folder of this check, not the reviewer's
        say(res.render())
        if not res.archive_ok:
            say("not re-evaluated: the archive failed the checks above")
            return 2
        man = json.loads(next(root.glob("**/bundle/manifest.json")).read_text())
        cfg = _load_yaml(root / man["resolved_config"], man["resolved_config"])
        prof = Profile.of(cfg)
        runs = sorted(p.parent for p in (root / man["results"]).rglob("encoder.pt")
                      if (p.parent / "linear.json").is_file() or (p.parent / "knn.json").is_file())
        ok = True
        if data:
            ok &= check_labels(root, man["results"], data, say,
                               prof.vision.features.max_images)
        if n < 1:
            return 0 if ok else 1
        if not runs:
            say("no encoder with a probe result in the archive: it must be made with "
                "`weince bundle --with-models` to be re-evaluated")
            return 2
        picks = random.Random(seed).sample(runs, min(n, len(runs)))
        say(f"re-evaluating {len(picks)} of {len(runs)} encoder(s), picked at random with "
            f"seed {seed} (--seed): " + ", ".join(str(p.relative_to(root)) for p in picks))
        bench = [_bench_seconds(root, man["results"], p) for p in picks]
        known = [b for b in bench if b is not None]
        say("expected time: " + (f"about {sum(known):.0f} CPU seconds for the features, "
                                 f"probes and k-NN of these encoders, as the archive's own "
                                 f"jobs took (their benchmarks; a GPU there, several times "
                                 f"that on a CPU here), plus the check above"
                                 if known else "unknown (the archive holds no job benchmarks)"))
        for p in picks:
            say(f"{p.relative_to(root)}:")
            ok &= _one(p, prof, data, say)
        say("REEVALUATED: every number matches within its tolerance" if ok
            else "FAILED: a re-evaluated number differs from the archive's (see above)")
        return 0 if ok else 1
