"""What a run checks before it plans or starts a job: its data, the disk, other writers.

- :func:`check_data` (Snakefile, before planning): every data file and text model the
  profile's runs read is on disk (:func:`data_items`); otherwise one error naming each
  missing path and how to obtain it: ``weince fetch-data`` (:func:`fetch_command`) on a
  machine with network for what can be downloaded, since compute jobs never download, by
  hand for the rest, or a rehearsal on synthetic files (``weince synthetic-data``). The
  paths and the how-to are the loaders' own (:mod:`weince.data.locations`,
  :mod:`weince.data.text.real`).
- :func:`space_needed` / :func:`check_space` (Snakefile ``onstart``): the peak disk space
  of the profile's result files, training checkpoints included, against the free space of
  the results folder; printed, and an error when short.
- :func:`check_no_live_writers` (``onstart``): no job of another live run holds a lock in
  this profile's results (:mod:`weince.utils.runlock`), e.g. after ``snakemake --unlock``
  of a run that is still going.
- :func:`hold_profile_lock` (``onstart``): one live Snakemake run per profile, held by the
  kernel for the run's process (``{results}/{profile}/.snakemake-run.lock``). Snakemake's
  own locks in ``.snakemake/locks`` are shared by every profile of a clone, and a run that
  ends removes that whole folder, the locks of a run of another profile still going
  included; this lock is the profile's own, so runs of two profiles side by side never
  release each other's, and a second run of one profile is refused in one line.
- :func:`check_writable` (``onstart``, before Snakemake deletes any output of a job it is
  about to re-run): every folder the run writes is writable.
- :func:`refusals`: the Snakefile's checks end the run with their one-line (or one-list)
  reason, not a traceback.

``WEINCE_SKIP_PREFLIGHT=1`` skips the data, disk and writer checks (to plan a profile
without its data, e.g. to count its jobs; or when the disk estimate is wrong); the profile
lock and the writable check always run.

    from weince.pipeline.preflight import check_data, space_needed
    check_data(prof)                   # DataMissingError naming each missing path
    space_needed(prof, parallel=2)     # {"peak": bytes, "final": ..., "lines": [...]}
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Iterator

from weince.data.fetch import Item
from weince.data.locations import FETCH, ON_DISK
from weince.pipeline import layout
from weince.pipeline.ablations import ablation_plan
from weince.pipeline.config import ConfigError
from weince.pipeline.profile import Profile
from weince.pipeline.stages import model_location, pretrain_config, simcse_config
from weince.utils.config import YamlSizeError
from weince.utils.diskspace import free_bytes, human_bytes
from weince.utils.runlock import (RunLockedError, held_locks, hold_run_lock, holder, lock_path,
                                  release_run_lock)

__all__ = ["DataMissingError", "DiskSpaceError", "LiveRunError", "NotWritableError",
           "data_items", "fetch_command", "missing_data", "check_data", "space_needed",
           "check_space", "check_no_live_writers", "check_writable", "hold_profile_lock",
           "release_profile_lock", "profile_lock_path", "refusals", "on_start"]

REHEARSE = ("to rehearse the run without the data first: `weince synthetic-data --root "
            "synthetic_data`, then add `--config data_root=synthetic_data` (with "
            "config/rehearsal.yaml for the one-batch sizes)")


class DataMissingError(FileNotFoundError):
    """A data set the profile reads is not on disk."""


class DiskSpaceError(OSError):
    """The results folder has less free space than the profile needs."""


class LiveRunError(RuntimeError):
    """Another live run writes this profile's results."""


class NotWritableError(PermissionError):
    """A folder the run writes is not writable by this user."""


# ------------------------------------------------------------------ data
def _vision_needs(prof: Profile) -> list[tuple[str, Path, str]]:
    """(dataset, root, split) of every split the vision runs (and the ablations) read."""
    v = prof.vision
    if not v.enabled or not v.arms or not v.seeds:
        return []
    arm, seed = v.arms[0], v.seeds[0]
    pairs = list(v.pairs)
    if prof.ablations.enabled:
        pairs += [p for p in ablation_plan(prof).pairs if p not in pairs]
    out = []
    for dataset, backbone in pairs:
        run = pretrain_config(prof, dataset, backbone, arm, seed)
        root = Path(str(run.get("data_root") or prof.data_root))
        out.append((dataset, root, str(run.get("train_split") or "train")))
        for other, extra in ((v.features, ("train", "test")), (v.evt.collect, ("train",))):
            name = other.get("dataset") or dataset
            r = Path(str(other.get("data_root") or prof.data_root))
            out += [(name, r, s) for s in extra]
    return list(dict.fromkeys(out))


def _text_needs(prof: Profile) -> list[tuple[str, str, str]]:
    """("wiki1m" | "stsb", path, split) of every text file the runs read."""
    out: list[tuple[str, str, str]] = []
    t = prof.text
    if t.enabled and t.arms and t.models and t.seeds:
        s = t.simcse
        if s.get("train_data", "synthetic") != "synthetic":
            out.append(("wiki1m", str(s["train_data"]), ""))
        if s.get("sts_data", "synthetic") != "synthetic":
            out.append(("stsb", str(s["sts_data"]), "dev"))
        sts = t.sts
        if str(sts.get("data", "synthetic")) != "synthetic":
            out += [("stsb", str(sts["data"]), sp) for sp in sts.get("splits", ["dev", "test"])]
    nt, a = prof.norms.text, prof.norms.analysis
    if nt.enabled and nt.models:
        if a.get("text_train_data", "synthetic") != "synthetic":
            out.append(("wiki1m", str(a["text_train_data"]), ""))
        if a.get("sts_data", "synthetic") != "synthetic":
            out += [("stsb", str(a["sts_data"]), sp) for sp in ("dev", "test")]
    return list(dict.fromkeys(out))


def _model_needs(prof: Profile) -> list[str]:
    """The text models the runs read: SimCSE's and the text norms units'."""
    t, nt = prof.text, prof.norms.text
    out = list(t.models) if t.enabled and t.arms and t.models and t.seeds else []
    out += list(nt.models) if nt.enabled else []
    return list(dict.fromkeys(out))


def data_items(prof: Profile) -> list[Item]:
    """Every data set and text model the profile reads from disk, one :class:`Item` each
    (:mod:`weince.data.fetch`): what ``weince fetch-data`` fetches or names, and what
    :func:`check_data` checks."""
    vision: dict[tuple[str, str], list[str]] = {}
    for name, root, split in _vision_needs(prof):
        vision.setdefault((name, str(root)), []).append(split)
    items = [Item("vision", n, r, tuple(s)) for (n, r), s in vision.items() if n in ON_DISK]
    stsb: dict[str, list[str]] = {}
    for kind, path, split in _text_needs(prof):
        if kind == "wiki1m":
            items.append(Item("wiki1m", "wiki1m", path))
        else:
            stsb.setdefault(path, []).append(split)
    items += [Item("stsb", "stsb", path, tuple(dict.fromkeys(s))) for path, s in stsb.items()]
    for model in _model_needs(prof):
        location, source = model_location(prof, model, with_source=True)
        items.append(Item("model", model, prof.data_root, location=location, source=source))
    return list(dict.fromkeys(items))


def fetch_command(prof: Profile) -> str:
    """The ``weince fetch-data`` command of this profile (its config file, when it is
    ``config/<profile>.yaml``, and its data root)."""
    files = ([prof.rehearsal.paper_config, "config/rehearsal.yaml"] if prof.rehearsal.enabled
             else [f"config/{prof.name}.yaml"])
    if all(Path(f).is_file() for f in files):
        cmd = f"{FETCH} --configfile {' '.join(shlex.quote(f) for f in files)}"
    else:
        cmd = f"{FETCH} --configfile <this run's config files>"
    if prof.data_root != "data":
        cmd += f" --config data_root={shlex.quote(prof.data_root)}"
    return cmd


def missing_data(prof: Profile) -> list[str]:
    """One sentence per data set or text model the profile reads that is not on disk
    (empty: all present). Nothing is downloaded at run time, whatever ``download`` says:
    a downloadable one is named with :func:`fetch_command`, which fetches it beforehand."""
    cmd = fetch_command(prof)
    return list(dict.fromkeys(m for item in data_items(prof) if (m := item.missing(cmd))))


def check_data(prof: Profile) -> None:
    """Raise :class:`DataMissingError` listing every missing data file and text model of
    the profile (``WEINCE_SKIP_PREFLIGHT=1``: plan without them, e.g. to count a profile's
    jobs)."""
    if os.environ.get("WEINCE_SKIP_PREFLIGHT"):
        return
    gone = missing_data(prof)
    if gone:
        raise DataMissingError(
            f"profile {prof.name!r} reads data that are not on disk (nothing was "
            f"planned):\n  - " + "\n  - ".join(gone) + f"\nObtain them as said (`"
            f"{fetch_command(prof)}` on a machine with network fetches what can be "
            f"downloaded and names the rest; compute jobs never download); or, {REHEARSE} "
            f"(WEINCE_SKIP_PREFLIGHT=1 plans without the data, e.g. to count the jobs).")


# ------------------------------------------------------------------ disk space
SPLIT_SIZES = {   # images per split (train, test) of each data set, for the estimate
    "cifar10": (50_000, 10_000), "cifar100": (50_000, 10_000), "stl10": (5_000, 8_000),
    "imagenet32": (1_281_167, 50_000), "tinyimagenet": (100_000, 10_000),
    "digits": (1_438, 359), "mnist5k": (4_000, 1_000)}
TEXT_PARAMS = {"minilm": 22_713_216, "bert-base-uncased": 109_482_240}
OPT_STATES = {"adam": 2, "lars": 1}   # per-parameter optimiser buffers in a checkpoint
PER_RUN = 2_000_000                   # JSON results, logs, benchmarks, figures per run


def _vision_model(backbone: str, image_size: int, channels: int, run: dict[str, Any]
                  ) -> tuple[int, int, int]:
    """(parameters, backbone feature size, head size) of the SimCLR model (built once on
    the CPU: the meta device would import a good part of torch first)."""
    import torch

    from weince.models import build_simclr_model

    with torch.no_grad():
        m = build_simclr_model(backbone, image_size, channels,
                               hidden_dim=run.get("proj_hidden"),
                               out_dim=int(run.get("proj_dim", 128)))
    dims = m.head.dims()
    return sum(p.numel() for p in m.parameters()), int(dims["in_dim"]), int(dims["out_dim"])


def _text_params(prof: Profile, model: str) -> tuple[int, bool]:
    """(parameters, known) of a text model: its weight files' size / 4 where it is on
    disk, else a table, else bert-base's (``known`` False)."""
    loc = model_location(prof, model)
    try:
        from weince.models.text import resolve_model

        folder = Path(resolve_model(loc))
    except Exception:   # noqa: BLE001 - a hub name, or not installed: the table
        folder = Path(loc)
    if folder.is_dir():
        size = sum(p.stat().st_size for p in folder.rglob("*")
                   if p.suffix in (".safetensors", ".bin", ".pt"))
        if size:
            return size // 4, True
    if model in TEXT_PARAMS:
        return TEXT_PARAMS[model], True
    return TEXT_PARAMS["bert-base-uncased"], False


def space_needed(prof: Profile, parallel: int = 1) -> dict[str, Any]:
    """The profile's disk use, estimated: ``final`` (bytes of the files that stay),
    ``checkpoints`` (of the ``parallel`` largest trainings at once, or every one kept with
    ``keep_checkpoint``), ``peak`` (their sum) and ``lines`` (what each part holds)."""
    runs = {layout.run_dir(prof, r): r
            for r in [*layout.vision_runs(prof), *layout.vision_runs(prof, grid=True)]}
    plan = ablation_plan(prof)
    for d, b in plan.pairs:
        for arm in plan.run_arms():
            for s in plan.seeds:
                runs.setdefault(plan.run_dir(d, b, arm, s), layout.VisionRun(d, b, arm, s))
    feats = prof.vision.features
    evt_arms = set(prof.vision.evt.arms)
    col = prof.vision.evt.collect
    final, ckpts, kept = 0, [], 0
    models: dict[tuple, tuple[int, int, int]] = {}
    n_vis = 0
    from weince.data.vision import DATASETS

    for run in runs.values():
        rc = pretrain_config(prof, run.dataset, run.backbone, run.arm.split("@")[0], run.seed)
        spec = DATASETS[run.dataset]
        size = int(rc.get("image_size") or spec.image_size)
        key = (run.backbone, size, spec.channels, rc.get("proj_hidden"), rc.get("proj_dim"))
        if key not in models:
            models[key] = _vision_model(run.backbone, size, spec.channels, rc)
        n, feat, head = models[key]
        n_img = sum(min(k, int(feats.get("max_images") or k))
                    for k in SPLIT_SIZES.get(run.dataset, (50_000, 10_000)))
        final += 4 * n + n_img * (4 * (feat + head) + 8) + PER_RUN
        if run.arm in evt_arms:
            b = int(col.get("batch_size", 256))
            lb = int(col.get("link_batch_size") or b)
            final += 4 * int(col.get("n_batches", 64)) * b * (2 * b - 2) \
                + 5 * int(col.get("link_batches", 40)) * (2 * lb) ** 2
        ck = 4 * n * (1 + OPT_STATES.get(str(rc.get("optimizer", "adam")), 2))
        (ckpts.append(ck) if not rc.get("keep_checkpoint") else None)
        kept += ck if rc.get("keep_checkpoint") else 0
        n_vis += 1
    n_text, guessed = 0, []
    for run in layout.text_runs(prof):
        sc = simcse_config(prof, run.model, run.arm, run.seed)
        n, known = _text_params(prof, run.model)
        if not known:
            guessed.append(run.model)
        final += 4 * n + PER_RUN   # the model folder
        ck = 4 * n * 3             # weights + Adam's two moments
        (ckpts.append(ck) if not sc.get("keep_checkpoint") else None)
        kept += ck if sc.get("keep_checkpoint") else 0
        n_text += 1
    live = sum(sorted(ckpts, reverse=True)[:max(1, int(parallel))])

    lines = [f"{n_vis} vision and {n_text} text runs: {human_bytes(final)} of results",
             f"checkpoints while training ({min(len(ckpts), max(1, parallel))} at once): "
             f"{human_bytes(live)}" + (f", kept: {human_bytes(kept)}" if kept else "")]
    if guessed:
        lines.append(f"size of {', '.join(sorted(set(guessed)))} not known here: taken as "
                     f"bert-base's")
    return {"final": final, "checkpoints": live + kept, "peak": final + live + kept,
            "lines": lines}


def check_space(prof: Profile, parallel: int = 1, *, out=None) -> dict:
    """Print the estimate of :func:`space_needed`; raise :class:`DiskSpaceError` when the
    results folder has less free space than its peak."""
    est = space_needed(prof, parallel)
    root = prof.results
    free = free_bytes(root)
    print(f"disk: this profile needs about {human_bytes(est['peak'])} at its peak in "
          f"{root}/ ({'; '.join(est['lines'])}); {human_bytes(free)} free there",
          file=out or sys.stderr)
    if free < est["peak"]:
        raise DiskSpaceError(
            f"{root}/ has {human_bytes(free)} free but profile {prof.name!r} needs "
            f"about {human_bytes(est['peak'])} at its peak ({'; '.join(est['lines'])}); free "
            f"{human_bytes(est['peak'] - free)} or more there, or set `results:` to a folder "
            f"on a larger disk (WEINCE_SKIP_PREFLIGHT=1 skips this check)")
    return est


# ------------------------------------------------------------------ other writers
def check_no_live_writers(prof: Profile) -> None:
    """Raise :class:`LiveRunError` when a live process holds a run lock in this profile's
    results (another run is still writing them); this run's own profile lock aside."""
    root = prof.results / prof.name
    own = profile_lock_path(prof)
    held = [(p, who) for p, who in held_locks(root) if p != own]
    if held:
        shown = "; ".join(f"{p.parent} ({who})" for p, who in held[:3])
        raise LiveRunError(
            f"{len(held)} job(s) of another live run are writing {root}/ ({shown}"
            f"{'; ...' if len(held) > 3 else ''}); wait for that run, or stop it (see "
            f"`ps -ef | grep 'weince\\|snakemake'`, then `kill PID`) before starting this one. "
            f"Never `snakemake --unlock` while such a run is alive")


# ------------------------------------------------------------------ one run per profile
PROFILE_LOCK = "snakemake-run"   # {results}/{profile}/.snakemake-run.lock


def profile_lock_path(prof: Profile) -> Path:
    return lock_path(prof.results / prof.name, PROFILE_LOCK)


def hold_profile_lock(prof: Profile) -> Path:
    """Hold the profile's run lock for the rest of this process (the Snakemake run), or
    raise :class:`LiveRunError` naming the live run that holds it."""
    path = profile_lock_path(prof)
    try:
        return hold_run_lock(path.parent / PROFILE_LOCK, wait_s=0.2)
    except RunLockedError:
        raise LiveRunError(
            f"another Snakemake run of profile {prof.name!r} is live ({holder(path)}); "
            f"two runs of one profile would write the same files: wait for it, or stop it "
            f"(`kill PID`, never `snakemake --unlock`); runs of other profiles are not "
            f"affected") from None


def release_profile_lock(prof: Profile) -> None:
    """Let go of :func:`hold_profile_lock` (the end of the process does it too)."""
    release_run_lock(profile_lock_path(prof))


# ------------------------------------------------------------------ writable folders
def _run_folders(prof: Profile) -> list[Path]:
    """The folders a run of the profile writes: its results and reports folders (every
    folder already under them, too: a job re-run there writes it)."""
    roots = [prof.results / prof.name, prof.report_dir]
    out = []
    for root in roots:
        if not root.exists():   # created by the run: its nearest existing parent counts
            parent = root.parent
            while not parent.exists() and parent != parent.parent:
                parent = parent.parent
            out.append(parent)
            continue
        out.append(root)
        out += [Path(d) for d, _, _ in os.walk(root) if Path(d) != root]
    return out


def check_writable(prof: Profile) -> None:
    """Raise :class:`NotWritableError` naming the folders of the run that this user cannot
    write (read-only mount or permissions), before any job starts: Snakemake deletes a
    job's old outputs before running it, so a run that fails later would already have
    removed them."""
    bad = [d for d in _run_folders(prof) if d.is_dir() and not os.access(d, os.W_OK | os.X_OK)]
    if bad:
        shown = ", ".join(f"{d}/" for d in bad[:3]) + (f" and {len(bad) - 3} more"
                                                      if len(bad) > 3 else "")
        raise NotWritableError(
            f"profile {prof.name!r} cannot write {shown} (read-only or not this "
            f"user's); nothing was deleted or run: make them writable (`chmod -R u+w`, or "
            f"remount), or set `results:` / `reports:` to folders this user can write")


# ------------------------------------------------------------------ one-line refusals
@contextlib.contextmanager
def refusals() -> Iterator[None]:
    """End the Snakemake run with the reason alone when a check of the Snakefile (config,
    data, disk, writers, permissions) refuses it: Snakemake would print the exception with
    its file, line and traceback lines around it."""
    try:
        yield
    except (ConfigError, YamlSizeError, DataMissingError, DiskSpaceError, LiveRunError,
            NotWritableError) as err:
        sys.exit(f"weince: {err}")


def on_start(prof: Profile, parallel: int = 1) -> None:
    """The Snakefile's ``onstart`` checks (a real run, not a dry run), each refusal one
    line: this profile's run lock, every output folder writable, no live writer in the
    profile's results, and the disk estimate printed and checked (the last two skipped
    with ``WEINCE_SKIP_PREFLIGHT=1``)."""
    with refusals():
        check_writable(prof)
        hold_profile_lock(prof)
        if os.environ.get("WEINCE_SKIP_PREFLIGHT"):
            return
        check_no_live_writers(prof)
        check_space(prof, parallel)
