"""What a run checks before it plans or starts a job: its data, the disk, other writers.

- :func:`check_data` (Snakefile, before planning): every data file and text model the
  profile's runs read is on disk (:func:`data_items`); otherwise one error naming each
  missing path and how to obtain it: ``weince fetch-data`` (:func:`fetch_command`) on a
  machine with network for what can be downloaded, since compute jobs never download, by
  hand for the rest, or a rehearsal on synthetic files (``weince synthetic-data``). The
  paths and the how-to are the loaders' own (:mod:`weince.data.locations`,
  :mod:`weince.data.text.real`).
- the disk (Snakefile ``onstart``): the peak disk space of the profile against the free space
  and the user's quota, :func:`weince.cost.disk.check_disk` (the cost room prices the disk
  as it prices the GPUs; it raises :class:`DiskSpaceError`, one of the refusals here).
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

    from weince.pipeline.preflight import check_data
    check_data(prof)                   # DataMissingError naming each missing path
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

from weince.data.fetch import Item
from weince.data.locations import FETCH, ON_DISK
from weince.pipeline.ablations import ablation_plan
from weince.pipeline.claims import ClaimsError
from weince.pipeline.config_check import ConfigError
from weince.pipeline.profile import Profile
from weince.pipeline.stages import model_location, pretrain_config
from weince.utils.config import YamlSizeError
from weince.utils.runlock import (RunLockedError, held_locks, hold_run_lock, holder, lock_path,
                                  release_run_lock)

__all__ = ["DataMissingError", "DiskSpaceError", "LiveRunError", "NotWritableError",
           "data_items", "fetch_command", "missing_data", "check_data", "skipped",
           "check_no_live_writers", "check_writable", "hold_profile_lock",
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
        root = Path(str(run.data_root or prof.data_root))
        out.append((dataset, root, run.train_split))
        f, c = v.features, v.evt.collect
        for other, where, extra in ((f.dataset, f.data_root, ("train", "test")),
                                    (c.dataset, c.data_root, ("train",))):
            name = other or dataset
            r = Path(str(where or prof.data_root))
            out += [(name, r, s) for s in extra]
    return list(dict.fromkeys(out))


def _text_needs(prof: Profile) -> list[tuple[str, str, str]]:
    """("wiki1m" | "stsb", path, split) of every text file the runs read."""
    out: list[tuple[str, str, str]] = []
    t = prof.text
    if t.enabled and t.arms and t.models and t.seeds:
        s = t.simcse
        if s.train_data != "synthetic":
            out.append(("wiki1m", s.train_data, ""))
        if s.sts_data != "synthetic":
            out.append(("stsb", s.sts_data, "dev"))
        sts = t.sts
        if sts.data != "synthetic":
            out += [("stsb", sts.data, sp) for sp in sts.splits]
    nt, a = prof.norms.text, prof.norms.analysis
    if nt.enabled and nt.models:
        if a.text_train_data != "synthetic":
            out.append(("wiki1m", a.text_train_data, ""))
        if a.sts_data != "synthetic":
            out += [("stsb", a.sts_data, sp) for sp in ("dev", "test")]
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
    if skipped():
        return
    gone = missing_data(prof)
    if gone:
        raise DataMissingError(
            f"profile {prof.name!r} reads data that are not on disk (nothing was "
            f"planned):\n  - " + "\n  - ".join(gone) + f"\nObtain them as said (`"
            f"{fetch_command(prof)}` on a machine with network fetches what can be "
            f"downloaded and names the rest; compute jobs never download); or, {REHEARSE} "
            f"(WEINCE_SKIP_PREFLIGHT=1 plans without the data, e.g. to count the jobs).")


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
    except (ConfigError, YamlSizeError, ClaimsError, DataMissingError, DiskSpaceError,
            LiveRunError, NotWritableError) as err:
        sys.exit(f"weince: {err}")


def skipped() -> bool:
    """``WEINCE_SKIP_PREFLIGHT=1``: plan and run without the data, writer and disk checks."""
    return bool(os.environ.get("WEINCE_SKIP_PREFLIGHT"))


def on_start(prof: Profile) -> None:
    """The Snakefile's ``onstart`` checks (a real run, not a dry run), each refusal one
    line: this profile's run lock, every output folder writable, and no live writer in the
    profile's results (skipped with ``WEINCE_SKIP_PREFLIGHT=1``). The disk is checked next
    (:func:`weince.cost.disk.check_disk`)."""
    with refusals():
        check_writable(prof)
        hold_profile_lock(prof)
        if not skipped():
            check_no_live_writers(prof)
