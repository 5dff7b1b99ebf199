"""The workflow's side of the digest chain (``weince.utils.digest``): what a job checks
before it reads a file another job wrote, what a training job records of its run, and the
command that rebuilds a broken file.

- a job reading an encoder (a model) checks it against its run's ``train.json``
  (``encoder_sha256``, ``model_sha256``); one reading a feature or score file checks it
  against its writer's record (:func:`weince.utils.digest.record_file`); each returns the
  ``provenance.inputs`` entries its results record (:func:`weince.utils.results.reading`);
- a training job adds its run's identity to ``train.json``: ``arm``, ``point`` (the grid
  point, or ``None``) and ``seed`` (:func:`record_identity`), which ``weince verify``
  matches with the run's folder and the profile;
- the rebuild command of a broken file is complete for the run: its ``--configfile`` files
  and ``--config`` settings as the Snakemake run that started the job was given them (the
  Snakefile records them for its jobs: :func:`weince.utils.rerun.record_run_args`, an
  environment variable every job inherits).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any


from weince.pipeline.profile import Profile
from weince.utils.digest import (RUN_RECORD, DigestMismatch, check_recorded, check_run_file,
                                 input_entry, record_file)
from weince.utils.rerun import run_args
from weince.utils.results import load_result, write_json

__all__ = ["rebuild_command", "check_encoder",
           "check_model", "check_derived", "record_derived", "run_identity",
           "record_identity", "output_problem"]

def rebuild_command(path: str | os.PathLike, prof: Profile | None = None) -> str:
    """The command that makes ``path`` again and re-runs what reads it: ``--forcerun`` the
    file, with this run's ``--cores``, ``--configfile`` and ``--config``
    (:func:`weince.utils.rerun.run_args`; outside a run, ``prof``'s own config file)."""
    known = run_args(path)
    if known is None:
        known = "--cores 2" + ("" if prof is None or prof.name == "default"
                               else f" --configfile config/{prof.name}.yaml")
    return f"snakemake --forcerun {shlex.quote(str(path))} {known}"


def check_encoder(path: str | os.PathLike, prof: Profile | None = None) -> dict[str, Any]:
    """Check a run's ``encoder.pt`` against its ``train.json``; its ``provenance.inputs``
    entries (``{"encoder": ...}``). A broken file: one line naming it and its rebuild."""
    return {"encoder": input_entry(path, check_run_file(
        path, "encoder_sha256", rebuild=rebuild_command(path, prof)))}


def check_model(path: str | os.PathLike, prof: Profile | None = None) -> dict[str, Any]:
    """Check a SimCSE run's ``model`` folder against its ``train.json``; ``{"model": ...}``."""
    return {"model": input_entry(path, check_run_file(
        path, "model_sha256", rebuild=rebuild_command(path, prof)))}


def check_derived(path: str | os.PathLike, role: str, prof: Profile | None = None
                  ) -> dict[str, Any]:
    """Check a file another job made from an encoder (``features.pt``, ``scores.npz``)
    against its writer's record; ``{role: ..., **what it was made from}``."""
    rec = check_recorded(path, rebuild=rebuild_command(path, prof))
    return {**rec["inputs"], role: input_entry(path, rec["sha256"])}


def record_derived(path: str | os.PathLike, inputs: Mapping[str, Any]) -> None:
    """Record the digest of a file this job wrote and what it was made from."""
    record_file(path, inputs)


def run_identity(wildcards: Any, selection: str | os.PathLike | None = None) -> dict[str, Any]:
    """``arm``, ``point`` and ``seed`` of a training run from its job's wildcards: the point
    of a grid point's arm (``weince@m2_kr10``), or the one ``selection`` chose for a final
    grid arm; ``None`` for any other arm."""
    arm = str(wildcards.arm)
    point = arm.split("@", 1)[1] if "@" in arm else None
    if selection:
        point = str(load_result(selection).get("chosen"))
    return {"arm": arm, "point": point, "seed": int(wildcards.seed)}


def record_identity(run: str | os.PathLike, identity: Mapping[str, Any]) -> None:
    """Add the run's identity to its ``train.json`` (kept as written otherwise, provenance
    included); a file already holding it is left alone."""
    path = Path(run) / RUN_RECORD
    summary = load_result(path)
    if any(summary.get(k) != v for k, v in identity.items()):
        write_json(path, {**summary, **identity})


def output_problem(run: str | os.PathLike, stage: str, prof: Profile | None = None
                   ) -> str | None:
    """Why a finished training run's output (``encoder.pt``; a SimCSE run's ``model/``) is
    not the one its ``train.json`` records (missing, truncated, edited), or ``None``."""
    name, key = ("encoder.pt", "encoder_sha256") if stage == "vision" else ("model",
                                                                           "model_sha256")
    path = Path(run) / name
    record = Path(run) / RUN_RECORD
    if not record.is_file() or load_result(record).get(key) is None:
        return None   # a run trained before digests were recorded: nothing to check
    if not path.exists():
        return f"{path}: missing; rebuild it: {rebuild_command(path, prof)}"
    try:
        check_run_file(path, key, rebuild=rebuild_command(path, prof))
    except DigestMismatch as err:
        return str(err)
    return None
