"""The protocol reference of ``weince merge``: what the installed code would have run, so
that no archive's settings, and no order of the archives on the command line, decide which
rows are refused.

For an archive of profile ``P``, the reference is the installed checkout's profile of that
name (``config/config.yaml`` with ``config/P.yaml`` over it, as Snakemake reads them; the
rehearsal over the paper profile), resolved by :class:`weince.pipeline.profile.Profile`.
The reference protocol of a result file is the settings the installed workflow's rules
would record in its ``provenance.config``:

- ``vision/{dataset}/{backbone}/{arm}/seed{N}/linear.json``: the linear probe's settings of
  that arm (:func:`weince.pipeline.stages.probe_settings`); ``knn.json``: the k-NN's;
- ``text/{model}/{arm}/seed{N}/sts.json``: the STS evaluation's;
- under ``pretrain.``: the run's training config (:func:`~weince.pipeline.stages.job_config`;
  a grid arm's adopted run at the point it names).

A row is compared on the reference's keys only; a file kind without one (timings, tail
fits, norms) and a profile the installed code does not have are compared across the
archives instead: when they disagree, no reference says which is right, and every row of
that setting is refused. Either way the outcome does not depend on the archives' order.

Nothing here imports torch.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import weince
from weince.bundle._protocol import protocol_of
from weince.pipeline.profile import Profile
from weince.pipeline.stages import job_config, knn_settings, probe_settings, sts_settings
from weince.utils.config import deep_merge, parse_yaml, to_dict

__all__ = ["reference_profile", "reference_protocol", "installed_config_dir"]

_OVERLAYS = {"default": [], "rehearsal": ["paper.yaml", "rehearsal.yaml"]}


def installed_config_dir() -> Path:
    """``config/`` of the checkout weince is imported from."""
    return Path(weince.__file__).resolve().parents[2] / "config"


def reference_profile(name: str, config_dir: Path | None = None) -> Profile | None:
    """The installed code's profile ``name`` (None when the checkout has none, or it does
    not resolve)."""
    d = config_dir or installed_config_dir()
    files = ["config.yaml", *_OVERLAYS.get(name, [f"{name}.yaml"])]
    if not all((d / f).is_file() for f in files):
        return None
    cfg: dict[str, Any] = {}
    try:
        for f in files:
            deep_merge(cfg, parse_yaml((d / f).read_text(), str(d / f)) or {})
        if cfg.get("profile") != name:
            return None
        return Profile.of(cfg)
    except Exception:  # noqa: BLE001 - an unreadable installed profile gives no reference
        return None


def _stage(prof: Profile, parts: list[str]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the evaluation's settings, the wildcards of its training run) of a result file at
    ``parts`` (its path below ``{results}/{profile}/``), or None for another kind."""
    name = parts[-1]
    if parts[0] == "vision" and len(parts) == 6 and parts[4].startswith("seed"):
        _, dataset, backbone, arm, seed, _ = parts
        wc = {"dataset": dataset, "backbone": backbone, "arm": arm, "seed": int(seed[4:])}
        if name == "linear.json":
            return probe_settings(prof, arm.split("@")[0]), wc
        if name == "knn.json":
            return knn_settings(prof), wc
    if parts[0] == "text" and len(parts) == 5 and parts[3].startswith("seed"):
        _, model, arm, seed, _ = parts
        if name == "sts.json":
            return sts_settings(prof), {"model": model, "arm": arm, "seed": int(seed[4:])}
    return None


def reference_protocol(prof: Profile | None, path: str, results: str,
                       point: str | None = None) -> dict[str, Any] | None:
    """The protocol the installed ``prof`` gives the result file at archive path ``path``
    (under ``results``), with its training run's under ``pretrain.``; ``point``: the grid
    point an adopted run names. None when there is no reference for it."""
    if prof is None or not path.startswith(results + "/"):
        return None
    parts = path[len(results) + 1:].split("/")
    try:
        found = _stage(prof, parts)
        if found is None:
            return None
        settings, wc = found
        if point and "@" not in str(wc["arm"]):
            wc = {**wc, "arm": f"{wc['arm']}@{point}"}
        out = protocol_of(copy.deepcopy(dict(settings)))
        out.update(protocol_of(to_dict(job_config(prof, wc)), "pretrain"))
    except Exception:  # noqa: BLE001 - an arm or data set the installed profile lacks
        return None
    return out
