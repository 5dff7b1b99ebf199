"""The Snakemake command an error message suggests, complete for the run at hand.

A hint such as "re-run the rule that writes it" is only useful if the command it prints runs
as printed: ``snakemake results/smoke/.../linear.json`` without the smoke profile's
``--configfile`` finds no rule for that path. The Snakefile records its own configuration
arguments (``--configfile`` and ``--config``) in :data:`ARGS_VARIABLE` before any job starts
(:func:`record_run_args`); every job inherits it, and :func:`snakemake_command` puts them in
each command it writes::

    snakemake_command("--forcerun", "results/smoke/vision/.../encoder.pt")
    # '`snakemake --forcerun results/smoke/... --cores 2 --configfile config/smoke.yaml`'

Outside a workflow run (``weince report`` and the other commands) nothing is recorded: the
profile is then read from the path (``results/<profile>/...``: ``config/<profile>.yaml``
where that file exists), else the command says to add the run's own arguments.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["ARGS_VARIABLE", "record_run_args", "run_args", "snakemake_command"]

#: the environment variable that carries a run's configuration arguments to its jobs
ARGS_VARIABLE = "WEINCE_SNAKEMAKE_ARGS"
_PROFILE_IN_PATH = re.compile(r"(?:^|/)(?:results|reports)/([A-Za-z0-9_.-]+)/")


def _value(v: Any, top: bool) -> str:
    if isinstance(v, bool) and top:   # Snakemake reads a top-level boolean as True/False
        return str(v)
    if isinstance(v, str):
        return v
    return json.dumps(v)


def record_run_args(configfiles: Iterable[str | os.PathLike], overrides: Mapping[str, Any],
                    cores: int | None = None, cwd: str | os.PathLike | None = None) -> str:
    """Record this run's ``--cores``, ``--configfile`` and ``--config`` arguments for its jobs
    (:data:`ARGS_VARIABLE`), the config files relative to ``cwd`` where they lie under it;
    returns them. A job started by another Snakemake process (a cluster job) keeps what its
    submitting run recorded."""
    if os.environ.get(ARGS_VARIABLE):
        return os.environ[ARGS_VARIABLE]
    base = Path(cwd or os.getcwd()).resolve()
    files = []
    for f in configfiles:
        p = Path(f).resolve()
        files.append(str(p.relative_to(base)) if p.is_relative_to(base) else str(p))
    parts: list[str] = ["--cores", str(cores)] if cores else []
    if files:
        parts += ["--configfile", *files]
    if overrides:
        parts += ["--config", *(f"{k}={_value(v, True)}" for k, v in overrides.items())]
    text = shlex.join(parts)
    os.environ[ARGS_VARIABLE] = text
    return text


def run_args(path: str | os.PathLike | None = None) -> str | None:
    """The recorded arguments of this run, else the shipped profile that ``path`` belongs to
    (``--configfile config/<profile>.yaml``; none for the embedded default), else None."""
    given = os.environ.get(ARGS_VARIABLE)
    if given is not None:
        return given
    m = _PROFILE_IN_PATH.search(Path(path).as_posix()) if path is not None else None
    if m is None:
        return None
    if m.group(1) == "default":
        return "--cores 2"
    cfg = Path("config") / f"{m.group(1)}.yaml"
    return f"--cores 2 --configfile {cfg}" if cfg.is_file() else None


def snakemake_command(*args: str | os.PathLike, path: str | os.PathLike | None = None) -> str:
    """The hint, in backquotes: ``snakemake`` with this run's arguments (:func:`run_args`, read
    from ``path`` outside a run; ``path`` defaults to the last argument) and ``args``, as one
    shell line; where the run's arguments cannot be known, it says to add them."""
    words = [str(a) for a in args]
    known = run_args(path if path is not None else (words[-1] if words else None))
    # the hint's own words first: --configfile and --config take every word after them, so
    # a target after the run's arguments would be read as one more config file
    cmd = " ".join(["snakemake", *map(shlex.quote, words), *([known] if known else [])])
    return f"`{cmd}`" if known is not None else \
        f"`{cmd}` with the run's --cores, --configfile and --config"
