"""Choice of a grid arm's WEINCE point on validation, as the official aggregation makes it.

The official ``scripts/aggregate_table23_r18.py`` (hsme98/weince) picks, per arm and per
(dataset, backbone): the point with the best **mean validation value over encoder seeds**
(probe or split seeds averaged within each encoder first), looking only at **complete**
points (a value at every encoder seed) when there is at least one; and for k-NN **one
choice per metric** (acc@50, recall@1 ... recall@50), each on that metric's validation
value. Test values never enter a choice. Exact ties go where the official aggregator's
pandas ``groupby`` + ``idxmax`` puts them: to the first point in ascending order of
(margin, kappa_aic, kappa_rho), the alphabetical order of the keys ``yaml.dump`` writes
into each run's ``config.yaml``.

    from weince.pipeline.grid import choose_point, select_grid
    choose_point({"m0": {7: 50.1, 21: 49.8}, "m2": {7: 51.0}}, expected=2)["chosen"]  # "m0"
    sel = select_grid(linear_files, knn_files, expected_seeds=4)   # selection.json

Two grid modes follow from the profile (:func:`shares_seeds`):

- **four-seed grid** (official, the paper profile): every point is trained at every encoder
  seed; the final arm's runs ARE the chosen point's runs (no retraining), its ``knn.json``
  takes each metric from that metric's chosen point (:func:`assemble_knn`);
- **one-seed grid** (the cheap option ``grid.seeds: [7]``): the points are compared at one
  seed, the linear-probe point is then trained at every other encoder seed (at seed 7 the
  final arm adopts the point's own run, which has the very same config) and serves every
  k-NN metric too.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from weince.pipeline import layout
from weince.pipeline.arms import parse_point
from weince.pipeline.profile import Profile
from weince.utils.results import encoder_value, get_key, load_result

__all__ = ["choose_point", "OFFICIAL_TIE_ORDER", "read_values", "select_grid", "assemble_knn",
           "knn_metric_names", "seed_of", "selection_paths", "ADOPTED_NOTE", "adoption_note"]

PathLike = str | os.PathLike


def seed_of(path: PathLike) -> int:
    """The encoder seed of a run file ``.../seed{n}/<file>``."""
    m = re.fullmatch(r"seed([0-9]+)", Path(path).parent.name)
    if not m:
        raise ValueError(f"{path}: expected a run file inside a 'seed<N>' folder")
    return int(m.group(1))


# the official aggregator's row order: pandas groupby sorts the runs by their config
# columns, which yaml.dump wrote in alphabetical order (select_aic_margin,
# select_kappa_aic, select_kappa_rho), and idxmax takes the first of equal maxima
OFFICIAL_TIE_ORDER = ("margin", "kappa_aic", "kappa_rho")


def _official_order(names: Sequence[str]):
    """Sort key of point names in the official aggregator's order: ascending (margin,
    kappa_aic, kappa_rho); a name that is not a grid point keeps its place, after them."""
    def key(name: str) -> tuple:
        try:
            p = parse_point(name.rsplit("@", 1)[-1])
        except ValueError:
            return (1, names.index(name))
        return (0, tuple(p.get(k, 0.0) for k in OFFICIAL_TIE_ORDER))

    return key


def choose_point(values: Mapping[str, Mapping[int, float | None]], expected: int
                 ) -> dict[str, Any]:
    """The point with the best mean over encoder seeds, complete points first.

    Args:
        values: point name -> {encoder seed: validation value (None: missing or NaN)}.
            An exact tie of means goes, as in the official aggregator, to the first point
            in ascending order of (margin, kappa_aic, kappa_rho) (:data:`OFFICIAL_TIE_ORDER`;
            ``m0_kr10_ka0.5`` before ``m0_kr5_ka1``), whatever the order of ``values``.
        expected: number of encoder seeds a complete point has.
    Returns:
        ``{"chosen", "complete_only", "expected_seeds", "points": {name: {"mean", "n",
        "seeds", "values", "complete"}}}``; ``complete_only`` says whether the choice was
        restricted to complete points (False: none was complete, every point competed).
    Raises:
        ValueError: no point has any finite value.
    """
    table: dict[str, dict[str, Any]] = {}
    for name, per_seed in values.items():
        finite = {s: v for s, v in per_seed.items() if v is not None and math.isfinite(v)}
        seeds = sorted(finite)
        vals = [float(finite[s]) for s in seeds]
        table[name] = {"mean": sum(vals) / len(vals) if vals else None, "n": len(vals),
                       "seeds": seeds, "values": vals, "complete": len(vals) >= expected}
    scored = [n for n, t in table.items() if t["mean"] is not None]
    if not scored:
        raise ValueError("no grid point has a finite validation value; check the grid runs' "
                         "result files")
    complete = [n for n in scored if table[n]["complete"]]
    pool = sorted(complete or scored, key=_official_order(list(values)))
    best = pool[0]
    for n in pool[1:]:   # strictly better only: an exact tie keeps the earlier point
        if table[n]["mean"] > table[best]["mean"]:
            best = n
    return {"chosen": best, "complete_only": bool(complete), "expected_seeds": int(expected),
            "points": table}


def read_values(files: Mapping[str, Sequence[PathLike]], key: str
                ) -> dict[str, dict[int, float | None]]:
    """point -> {seed: value of ``key``} from result files (a summary is averaged over its
    probe/split seeds first, as the official aggregation does within an encoder)."""
    if "test" in key.lower().split(".")[0] or key.lower().startswith("test"):
        raise ValueError(f"grid selection key {key!r} is a test metric; the WEINCE "
                         f"configuration is chosen on a validation split only")
    out: dict[str, dict[int, float | None]] = {}
    for name, paths in files.items():
        out[name] = {}
        for p in paths:
            v = get_key(load_result(p), key, p, needed_by="grid selection")
            out[name][seed_of(p)] = encoder_value(v, p, key)
    return out


def knn_metric_names(path: PathLike) -> list[str]:
    """The metrics a ``knn.json`` reports on its validation queries (``acc@50``, ...)."""
    data = load_result(path)
    val = get_key(data, "val", path, needed_by="the per-metric k-NN grid choice (run the "
                  "k-NN with a validation split, val_frac > 0)")
    return list(val)


def _with_params(choice: dict[str, Any], metric: str) -> dict[str, Any]:
    return {"chosen": choice["chosen"], "params": parse_point(choice["chosen"]),
            "metric": metric, **{k: v for k, v in choice.items() if k != "chosen"}}


def select_grid(linear_files: Mapping[str, Sequence[PathLike]],
                knn_files: Mapping[str, Sequence[PathLike]] | None = None, *,
                metric: str = "val_acc", expected_seeds: int | None = None
                ) -> dict[str, Any]:
    """The content of a grid arm's ``selection.json``.

    Args:
        linear_files: point -> the ``linear.json`` of its runs (one per encoder seed).
        knn_files: point -> the ``knn.json`` of its runs; given in the four-seed grid, where
            each k-NN metric gets its own point. None: the linear point serves k-NN too.
        metric: validation key of ``linear.json`` (never a test key).
        expected_seeds: encoder seeds of a complete point (default: the most files any
            point has).
    Returns:
        ``{"chosen", "params", "metric", "points", "complete_only", "expected_seeds",
        "knn": {metric: {"chosen", "params", "metric", "points", ...}} | None}``.
    """
    if not linear_files:
        raise ValueError("select_grid needs at least one grid point")
    expected = int(expected_seeds or max(len(p) for p in linear_files.values()))
    out = _with_params(choose_point(read_values(linear_files, metric), expected), metric)
    out["knn"] = None
    if knn_files:
        first = next(p for ps in knn_files.values() for p in ps)
        out["knn"] = {m: _with_params(choose_point(read_values(knn_files, f"val.{m}"), expected),
                                      f"val.{m}")
                      for m in knn_metric_names(first)}
    return out


def assemble_knn(selection: Mapping[str, Any], grid_knn: Mapping[str, PathLike]
                 ) -> dict[str, Any]:
    """A final grid arm's ``knn.json`` at one encoder seed in the four-seed grid: each
    metric's test and validation summaries from the run of that metric's chosen point.

    Args:
        selection: the arm's ``selection.json`` content (with a ``knn`` part).
        grid_knn: point -> the ``knn.json`` of that point's run at this encoder seed.
    """
    knn = selection.get("knn")
    if not knn:
        raise ValueError("selection has no per-metric k-NN choice (a one-seed grid); the "
                         "final arm's k-NN is then run on its own encoder")
    out: dict[str, Any] = {"val": {}, "selected_point": {}}
    settings = None
    for m, choice in knn.items():
        point = choice["chosen"]
        if point not in grid_knn:
            raise ValueError(f"k-NN metric {m!r} chose point {point!r}, which has no knn.json "
                             f"among the given files {sorted(grid_knn)}")
        data = load_result(grid_knn[point])
        out[m] = get_key(data, m, grid_knn[point], needed_by="the final arm's k-NN")
        out["val"][m] = get_key(data, f"val.{m}", grid_knn[point], needed_by="the final arm")
        out["selected_point"][m] = point
        settings = settings or data.get("settings")
    out["settings"] = settings
    out["selection"] = "per k-NN metric: the point with the best mean validation value over " \
                       "encoder seeds (complete points first)"
    return out


#: the note in an adopted run's folder (written by the workflow's ``adopt_grid_run``)
ADOPTED_NOTE = "ADOPTED.md"


def adoption_note(run: PathLike, source: PathLike, selection: PathLike, metric: str) -> str:
    """The text of :data:`ADOPTED_NOTE` in a final grid arm's run folder ``run``: that
    folder was not trained; it is the run of the grid point chosen in ``selection`` (by the
    mean ``metric`` over encoder seeds), at the same seed, in the folder ``source``."""
    run, source = Path(run), Path(source)
    point = source.parent.name.split("@", 1)[-1]
    seed = seed_of(source / "train.json")
    return (f"# {run.parent.name}, {run.name}: adopted, not retrained\n\n"
            f"This run is grid point {point}'s run at seed {seed}, adopted, not retrained: "
            f"its encoder.pt links to `{source}/encoder.pt`, and train.json, train_log.jsonl "
            f"and linear.json are copies of that run's (train.json's `adopted_from` and "
            f"`point`, linear.json's `selected_point` say so).\n\n"
            f"The point was chosen by `{selection}` (best mean {metric} over encoder seeds on "
            f"validation). The workflow's rule `adopt_grid_run` "
            f"(workflow/rules/pretrain.smk) made this folder; docs/protocol.md says why.\n")


_SELECTED_FILES = ("linear.json", "knn.json")


def selection_paths(prof: Profile, claim: Mapping[str, Any]) -> dict[str, Path]:
    """label -> ``selection.json`` of every grid arm a linear/k-NN claim table shows, for
    the claim's (dataset, backbone) rows that the profile runs (all pairs for ``any``)."""
    if claim.get("stage") != "vision" or claim.get("file") not in _SELECTED_FILES:
        return {}
    v = prof.vision
    if not v.grid.active_arms:
        return {}
    a = claim.get("arms") or {}
    shown = [x for x in [a.get("baseline"), a.get("primary"), *a.get("others", [])]
             if x in v.grid.arms and x in v.arms]
    pairs = list(v.pairs)
    rows = claim.get("rows")
    if isinstance(rows, list):
        wanted = {(r.get("dataset"), r.get("backbone")) for r in rows}
        pairs = [p for p in pairs if p in wanted] or pairs
    return {f"{d}/{b} {arm}": Path(layout.VISION_PAIR.format(results=prof.results,
                                                            profile=prof.name,
                                                            dataset=d, backbone=b))
            / arm / "selection.json"
            for d, b in pairs for arm in dict.fromkeys(shown)}
