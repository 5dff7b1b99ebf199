"""``weince verify --retrain N``: replay training segments of an archive on the reviewer's
machine (an archive made with ``weince bundle --with-audit``; ``docs/reviewing.md``, "What
the training audit proves").

After the archive passes ``weince verify``, ``N`` of its runs that feed verdict rows and ship
their audit states are picked (seeded with ``--seed``, stratified over arms: one run of each
arm in turn, the arms in sorted order; the pick is printed), the expected time is printed
(the runs' own measured step times), and every audit segment of each run is replayed from
its shipped start state with the run's claimed settings: its ``train.json`` config, with the
loss of the arm its place in the archive names (``vision/<dataset>/<backbone>/<arm>/seedN``,
``text/<model>/<arm>/seedN``), on this machine's CPU.

- **Bit for bit** when the replay runs as the run did: a CPU run, the same torch version and
  thread count, float32, no ``--attribution``. The replayed state's digest
  (:func:`weince.train.audit.state_digest`) must equal the end state's that ``train.json``
  committed. A difference fails, and the attribution below is printed to say what the
  shipped end looks like.
- **Attribution** otherwise (another device kind, torch, thread count, ``--replay-dtype
  float64``, or ``--attribution``): the segment is replayed under the claimed arm and under
  every other arm of the setting; with ``d(arm) = ||w_replay(arm) - w_end|| / ||w_end -
  w_start||`` over the trained weights, the segment passes when the claimed arm is nearest
  and ``d(claimed) <= MARGIN * min d(other)``. Every distance is printed.

Also checked: the shipped start and end states are those ``train.json`` committed (their
digests), and the audit points are those the run's config fixes
(:func:`weince.train.audit.audit_points`). A run without its states, or whose data set is not
on this machine (the message names it and how to fetch it), is listed as not checked.

A run trained on a GPU keeps its augmentation generator on the GPU; a CPU replay cannot
continue that generator and draws its views from its own, so such a segment is judged by
attribution over different views than the run saw: weaker, and not calibrated here.

Imports torch (``weince verify`` without ``--retrain`` never loads it).
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from weince.bundle.audit import state_folder
from weince.bundle.verify import checked_archive
from weince.pipeline.arms import resolve_arm, split_arm
from weince.pipeline.profile import Profile
from weince.pipeline.stages import model_location
from weince.train.audit import (Replay, SegmentDone, audit_hash, audit_points, load_state,
                                state_digest, weights_of)
from weince.train.config import SimCLRConfig, SimCSEConfig

__all__ = ["MARGIN", "retrain", "RunPick", "replay_segment", "distances", "attributed",
           "pick_runs", "claimed_config", "other_configs"]

#: the attribution margin: the claimed arm's distance must be at most this fraction of the
#: nearest other arm's (calibrated on the smoke and rehearsal profiles, docs/reviewing.md)
MARGIN = 0.5


@dataclass
class RunPick:
    """One run of the archive that can be replayed (its states in ``states``: its folder,
    or the adopted grid point's, :func:`weince.bundle.audit.state_folder`)."""

    folder: Path
    kind: str                 # "vision" | "text"
    setting: str              # "digits/smallcnn", "minilm"
    arm: str                  # the arm its place names (with a grid point: "weince@m2")
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def states(self) -> Path:
        return state_folder(self.folder)

    @property
    def base_arm(self) -> str:
        return split_arm(self.arm)[0]


def _run_of(root: Path, folder: Path) -> RunPick | None:
    parts = folder.relative_to(root).parts
    try:
        summary = json.loads((folder / "train.json").read_text())
    except (OSError, ValueError):
        return None
    if parts[0] == "vision" and len(parts) == 5:
        return RunPick(folder, "vision", f"{parts[1]}/{parts[2]}", parts[3], summary)
    if parts[0] == "text" and len(parts) == 4:
        return RunPick(folder, "text", parts[1], parts[2], summary)
    return None


def _segments(run: RunPick) -> list[dict[str, Any]]:
    return list(((run.summary.get("audit") or {}).get("segments")) or [])


def _states_missing(run: RunPick) -> list[str]:
    out = []
    for seg in _segments(run):
        for key in ("start_file", "end_file"):
            name = seg.get(key)
            if not name or not (run.states / name).is_file():
                out.append(str(name or f"step {seg.get(key[:-5])}"))
    return out


def pick_runs(runs: list[RunPick], n: int, seed: int) -> list[RunPick]:
    """``n`` runs, seeded, stratified over arms: the runs of each arm shuffled, then one of
    each arm in turn (arms in sorted order) until ``n``."""
    rng = random.Random(seed)
    groups: dict[str, list[RunPick]] = {}
    for r in sorted(runs, key=lambda r: str(r.folder)):
        groups.setdefault(r.base_arm, []).append(r)
    for g in groups.values():
        rng.shuffle(g)
    picks: list[RunPick] = []
    while len(picks) < n and any(groups.values()):
        for arm in sorted(groups):
            if groups[arm] and len(picks) < n:
                picks.append(groups[arm].pop(0))
    return picks


# ------------------------------------------------------------------------- configs
def _recorded(run: RunPick) -> dict[str, Any]:
    return dict(((run.summary.get("provenance") or {}).get("config")) or {})


def _arm_loss(prof: Profile, run: RunPick, arm: str) -> dict[str, Any]:
    """``{"loss", "loss_kwargs"[, "tau"]}`` of ``arm`` in the run's setting."""
    if run.kind == "text":
        t = prof.text
        return {"loss": split_arm(arm)[0],
                "loss_kwargs": {**dict(t.simcse.loss_kwargs), **dict(t.losses.get(arm) or {})}}
    s = resolve_arm(arm, prof.vision.losses, None)
    out = {"loss": s["loss"], "loss_kwargs": dict(s["loss_kwargs"])}
    if s.get("tau") is not None:
        out["tau"] = float(s["tau"])
    return out


def _threads(run: RunPick) -> int | None:
    """The thread count the run trained with (its audit block's, else its summary's)."""
    n = (run.summary.get("audit") or {}).get("torch_threads") or run.summary.get(
        "torch_threads")
    return int(n) if n else None


def _runtime(run: RunPick, cfg: dict[str, Any], prof: Profile, data: str | None,
             threads: int | None, dtype: torch.dtype) -> dict[str, Any]:
    cfg = {**cfg, "device": "cpu", "keep_checkpoint": False, "keep_states": "none",
           "tensorboard": False}
    if run.kind == "vision":
        cfg.pop("norm_mean", None)
        cfg.pop("norm_std", None)
        cfg.update(progress=False, data_root=data or prof.data_root,
                   threads=threads or _threads(run))
        if dtype == torch.float64:
            cfg.update(compile=False, compile_step=None)
    else:
        name = cfg.get("model_name") or cfg.get("model")
        if name:
            cfg["model"] = model_location(prof, str(name))
        if threads or _threads(run):      # the loop takes the process's thread count
            torch.set_num_threads(int(threads or _threads(run) or 1))
    return cfg


def claimed_config(prof: Profile, run: RunPick) -> tuple[dict[str, Any], list[str]]:
    """The run's claimed config (its ``train.json`` config with the loss of the arm its
    place names) and what contradicts that place."""
    cfg = _recorded(run)
    arm = _arm_loss(prof, run, run.arm)
    problems = []
    if cfg.get("loss") != arm["loss"]:
        problems.append(f"train.json records loss {cfg.get('loss')!r}, its place in the "
                        f"archive names arm {run.arm!r} (loss {arm['loss']!r})")
    else:   # the recorded options win: a final grid arm's chosen point is among them
        arm["loss_kwargs"] = {**arm["loss_kwargs"], **dict(cfg.get("loss_kwargs") or {})}
        arm.pop("tau", None)
    return {**cfg, **arm}, problems


def other_configs(prof: Profile, run: RunPick, claimed: dict[str, Any]
                  ) -> dict[str, dict[str, Any]]:
    """arm -> config of every other arm of the run's setting (the same start state)."""
    arms = prof.text.arms if run.kind == "text" else prof.vision.arms
    return {a: {**claimed, **_arm_loss(prof, run, a)} for a in arms
            if split_arm(a)[0] != run.base_arm}


# ------------------------------------------------------------------------- replays
def replay_segment(kind: str, cfg: dict[str, Any], start: dict[str, Any], end: int, *,
                   dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """The training state after replaying from ``start`` to step ``end`` under ``cfg``."""
    from weince.train.simclr import pretrain        # noqa: PLC0415 - heavy, only here
    from weince.train.simcse import train_simcse    # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="weince-retrain-") as tmp:
        try:
            if kind == "vision":
                pretrain(SimCLRConfig(**cfg), tmp, audit=Replay(start, end, dtype=dtype))
            else:
                train_simcse(SimCSEConfig(**cfg), tmp, audit=Replay(start, end, dtype=dtype))
        except SegmentDone as done:
            return done.state
    raise RuntimeError(f"the replay ended before step {end} (the run's config has fewer "
                       f"steps than its audit segment)")


def distances(replayed: dict[str, dict[str, Any]], start: dict[str, Any], end: dict[str, Any]
              ) -> dict[str, float]:
    """``d(arm) = ||w_replay(arm) - w_end|| / ||w_end - w_start||`` (trained weights)."""
    w0, w1 = weights_of(start), weights_of(end)

    def norm(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
        return float(sum(float(((a[k] - b[k]) ** 2).sum()) for k in w1)) ** 0.5

    span = norm(w1, w0)
    return {arm: norm(weights_of(st), w1) / span if span > 0 else float("inf")
            for arm, st in replayed.items()}


def attributed(d: dict[str, float], claimed: str, margin: float = MARGIN) -> bool:
    """The claimed arm is nearest, by at least the margin."""
    others = [v for a, v in d.items() if a != claimed]
    if not others:
        return False
    return d[claimed] <= margin * min(others) and d[claimed] < min(others)


# ------------------------------------------------------------------------- one run
def _mode(run: RunPick, threads: int | None, dtype: torch.dtype, attribution: bool
          ) -> tuple[bool, str]:
    """(bit for bit?, why)."""
    dev = str(run.summary.get("device") or "")
    theirs = str(((run.summary.get("provenance") or {}).get("versions") or {}).get("torch"))
    why = []
    if attribution:
        why.append("--attribution")
    if not dev.startswith("cpu"):
        why.append(f"the run trained on {dev or 'an unrecorded device'}, this replay on cpu")
    if theirs != torch.__version__:
        why.append(f"torch {theirs} there, {torch.__version__} here")
    if _threads(run) is None:
        why.append("the run did not record its thread count")
    elif threads and threads != _threads(run):
        why.append(f"{threads} threads here, {_threads(run)} there")
    if dtype != torch.float32:
        why.append("a float64 replay")
    if why:
        return False, "attribution (" + "; ".join(why) + ")"
    return True, "bit for bit (cpu, the same torch and thread count, float32)"


def _check_points(run: RunPick) -> str | None:
    cfg, audit = _recorded(run), run.summary.get("audit") or {}
    total = (int(run.summary.get("epochs") or 0) * int(run.summary.get("steps_per_epoch") or 0)
             if run.kind == "vision" else int(run.summary.get("total_steps") or 0))
    starts, span = audit_points(audit_hash(cfg), total)
    shipped = [int(s["start"]) for s in _segments(run)]
    if audit.get("audit_hash") != audit_hash(cfg) or shipped != starts or any(
            int(s["end"]) - int(s["start"]) != span for s in _segments(run)):
        return (f"its audit segments start at {shipped}, its config fixes {starts} "
                f"(span {span})")
    return None


def _segment(run: RunPick, seg: dict[str, Any], cfgs: dict[str, dict[str, Any]],
             exact: bool, dtype: torch.dtype, say: Callable[[str], None]) -> bool:
    start = load_state(run.states / seg["start_file"])
    end = load_state(run.states / seg["end_file"])
    where = f"  segment {seg['start']} -> {seg['end']}"
    for name, st, key in (("start", start, "start_sha256"), ("end", end, "end_sha256")):
        if state_digest(st) != seg.get(key):
            say(f"{where}: FAILED: the shipped {name} state is not the one train.json "
                f"committed ({key})")
            return False
    claimed = run.arm
    if exact:
        mine = replay_segment(run.kind, cfgs[claimed], start, int(seg["end"]))
        if state_digest(mine) == seg["end_sha256"]:
            say(f"{where}: replayed bit for bit (state digest {seg['end_sha256'][:12]}...)")
            return True
        say(f"{where}: FAILED: the replay under {claimed} does not reach the committed end "
            f"state ({state_digest(mine)[:12]}... here, {seg['end_sha256'][:12]}... committed)"
            f"; the attribution of the shipped end:")
        replayed = {claimed: mine}
    else:
        replayed = {}
    for arm, cfg in cfgs.items():
        if arm not in replayed:
            replayed[arm] = replay_segment(run.kind, cfg, start, int(seg["end"]), dtype=dtype)
    d = distances(replayed, start, end)
    good = attributed(d, claimed)
    nearest = min(d, key=lambda a: d[a])
    for arm in sorted(d, key=lambda a: d[a]):
        say(f"{where}:   d({arm}) = {d[arm]:.3g}" + ("   (claimed)" if arm == claimed else ""))
    rule = f"d(claimed) <= {MARGIN} x min d(other)"
    if exact:
        say(f"{where}: FAILED (not bit for bit); by attribution the shipped end is "
            + (f"{claimed}'s" if good else f"not {claimed}'s, nearest: {nearest}")
            + f" ({rule})")
        return False
    say(f"{where}: " + (f"attributed to {claimed} ({rule})" if good else
                        f"FAILED: not attributed to {claimed}; nearest: {nearest} "
                        f"({rule})"))
    return good


def _one(run: RunPick, prof: Profile, data: str | None, threads: int | None,
         dtype: torch.dtype, attribution: bool, say: Callable[[str], None]) -> bool | None:
    """True: passed; False: failed; None: not checked (its data set is not here)."""
    claimed, problems = claimed_config(prof, run)
    for p in problems:
        say(f"  {p}")
    exact, why = _mode(run, threads, dtype, attribution)
    say(f"  mode: {why}")
    cfgs = {run.arm: claimed, **other_configs(prof, run, claimed)}   # others: when needed
    cfgs = {a: _runtime(run, c, prof, data, threads, dtype) for a, c in cfgs.items()}
    bad_points = _check_points(run)
    if bad_points:
        say(f"  FAILED: {bad_points}")
    ok = not bad_points and not problems
    t0, w0 = time.process_time(), time.perf_counter()
    try:
        for seg in _segments(run):
            ok &= _segment(run, seg, cfgs, exact, dtype, say)
    except FileNotFoundError as err:
        say(f"  not checked: its data are not on this machine: {str(err).splitlines()[0]} "
            f"Fetch them (`weince fetch-data`, docs/data.md) and pass --data DIR.")
        return None
    say(f"  CPU time {time.process_time() - t0:.1f} s, wall {time.perf_counter() - w0:.1f} s")
    return ok


def _estimate(picks: list[RunPick], prof: Profile) -> str:
    total = 0.0
    for r in picks:
        arms = len(prof.text.arms if r.kind == "text" else prof.vision.arms)
        step = ((r.summary.get("step_timing") or {}).get("step_s_median")) or 0.0
        steps = sum(int(s["end"]) - int(s["start"]) for s in _segments(r))
        total += float(step) * steps * arms
    return (f"expected time: about {total:.0f} s of replayed steps at the runs' own measured "
            f"step times (every arm replayed, as attribution does; a bit-for-bit replay "
            f"needs one arm), plus a few seconds per replay to load the data and model; a "
            f"run measured on a GPU takes several times longer on this CPU")


def retrain(archive: str | Path, n: int, *, seed: int = 0, data: str | None = None,
            claims: str | Path | None = None, attribution: bool = False,
            dtype: str = "float32", threads: int | None = None,
            say: Callable[[str], None] = print) -> int:
    """Verify ``archive``, then replay the audit segments of ``n`` of its runs (module
    docstring); 0 when every checked run passes (and one was checked), 1 otherwise, 2 when
    the archive fails its check."""
    torch_dtype = {"float32": torch.float32, "float64": torch.float64}[dtype]
    with checked_archive(archive, say, claims=claims,
                         refused="not retrained: the archive failed the checks above") as got:
        if got is None:
            return 2
        root, man, prof, _ = got
        results = root / man["results"]
        feeding = {str(Path(f["path"]).parent) for f in man["files"]
                   if str(f.get("role", "")).startswith("report input")}
        runs = [r for p in sorted(results.rglob("train.json"))
                if str(p.parent.relative_to(root)) in feeding
                and (r := _run_of(results, p.parent)) is not None and _segments(r)]
        ready = [r for r in runs if not _states_missing(r)]
        for r in runs:
            if r not in ready:
                say(f"not checked (its audit states are not in the archive: "
                    f"{', '.join(_states_missing(r))}): {r.folder.relative_to(root)}")
        if not ready:
            say("no run of the archive ships its audit states: make it with "
                "`weince bundle --with-audit`")
            return 1
        picks = pick_runs(ready, n, seed)
        say(f"retraining {len(picks)} of {len(ready)} run(s) with audit states, picked with "
            f"seed {seed} (--seed), stratified over arms: "
            + ", ".join(str(p.folder.relative_to(root)) for p in picks))
        say(_estimate(picks, prof))
        outcome = []
        for p in picks:
            say(f"{p.folder.relative_to(root)} (arm {p.arm}):")
            outcome.append(_one(p, prof, data, threads, torch_dtype, attribution, say))
        checked = [o for o in outcome if o is not None]
        ok = bool(checked) and all(checked)
        say("RETRAINED: every replayed segment passed" if ok else
            "FAILED: a replayed segment did not pass (see above)" if checked else
            "FAILED: nothing could be replayed here (see above)")
        return 0 if ok else 1


def main(args: Any) -> int:
    """``weince verify ARCHIVE --retrain N`` (:mod:`weince.cli.verify`'s options)."""
    if args.retrain < 0 or (args.replay_threads is not None and args.replay_threads < 1):
        raise SystemExit("weince verify: --retrain N needs N >= 0 and --replay-threads N >= 1")
    return retrain(args.bundle, args.retrain, seed=args.seed, data=args.data,
                   claims=getattr(args, "claims", None), attribution=args.attribution,
                   dtype=args.replay_dtype, threads=args.replay_threads)
