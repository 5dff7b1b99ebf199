"""Resolved stage configs: the dict each rule passes to a library entry point, built from
the profile's config, so that the rules hold no logic and the glue is tested.

    from weince.pipeline.stages import job_config, pretrain_config
    pretrain_config(prof, "digits", "smallcnn", "weince@m2_kr10", 7)   # a SimCLRConfig
    job_config(prof, snakemake.wildcards, snakemake.input.selection)   # the same, by job
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from weince.norms.config import NormsConfig
from weince.pipeline.layout import PRETRAINED_ARM
from weince.pipeline.profile import Profile, with_selection
from weince.pipeline.protocol import probe_config, probe_kwargs
from weince.train.config import RUNTIME_KEYS, SimCLRConfig, SimCSEConfig
from weince.utils.config import to_dict
from weince.utils.settings import listed_fields

__all__ = ["job_config", "pretrain_config", "simcse_config", "apply_selection", "grid_arms",
           "norms_config", "norms_settings", "probe_settings", "knn_settings", "PRETRAINED_ARM",
           "features_settings", "scores_settings", "pot_settings", "link_settings",
           "sts_settings",
           "text_model", "text_model_key", "timing_settings",
           "model_location", "RERUN_FREE", "result_settings", "runtime_settings", "job_settings",
           "rerun_trigger", "trigger_settings", "extraction_kwargs"]

# Settings of a stage config that never change a result: where and how fast a job runs,
# what it prints and keeps, where its data are (SimCLR's RUNTIME_KEYS, the device, the
# offline switch, the k-NN's chunk and SimCSE's evaluation batch). A rule's params hold the
# rest (Snakemake reruns a job when its params change), and its script takes these from the
# profile at run time, so changing them never retrains a finished run (docs/cluster.md).
RERUN_FREE = RUNTIME_KEYS | {"device", "offline", "chunk", "eval_batch_size"}


def _rerun_free(cfg: Mapping[str, Any], key: str) -> bool:
    # a text model's local copy lies under data_root: its path is where, not what (the
    # model is named by `model_name` and `model_source`, which stay in the params)
    return key in RERUN_FREE or (key == "model" and cfg.get("model_source") == "local copy")


def result_settings(cfg: Any) -> dict[str, Any]:
    """The settings of a stage config (a mapping or a settings dataclass, every field) that
    can change a result (a rule's params)."""
    if dataclasses.is_dataclass(cfg):
        cfg = to_dict(cfg)
    return {k: copy.deepcopy(v) for k, v in cfg.items() if not _rerun_free(cfg, k)}


# the fields a run sets over its block's settings, in the order the trigger lists them (a
# finished run's recorded params list them in this order: keep it)
_VISION_RUN_ORDER = ("tau", "dataset", "backbone", "loss", "seed", "loss_kwargs")
_TEXT_RUN_ORDER = ("model", "model_name", "model_source", "loss", "seed", "loss_kwargs")


def trigger_settings(cfg: Any, given: Mapping[str, Any], order: Iterable[str] = (),
                     free: Callable[[Mapping[str, Any], str], bool] = _rerun_free
                     ) -> dict[str, Any]:
    """The rerun trigger of a typed config ``cfg``: the fields its config block sets
    (``given``), the per-run ones and any other off its default
    (:func:`~weince.utils.settings.listed_fields`), less the run-time ones (``free``). A
    value is the one the block wrote when equal to the typed one (``lr: 1``, not 1.0)."""
    d = to_dict(cfg)
    return {k: copy.deepcopy(given[k] if k in given and given[k] == d[k] else d[k])
            for k in listed_fields(cfg, given, order) if not free(d, k)}


def rerun_trigger(prof: Profile, wildcards: Any) -> dict[str, Any]:
    """A training job's params, Snakemake's rerun trigger: :func:`trigger_settings` of its
    :func:`job_config` (the grid point a final grid arm adopts is an input of its own)."""
    cfg = job_config(prof, wildcards)
    if isinstance(cfg, SimCSEConfig):
        return trigger_settings(cfg, prof.text.simcse_given, _TEXT_RUN_ORDER)
    return trigger_settings(cfg, prof.vision.pretrain_given_for(cfg.dataset), _VISION_RUN_ORDER)


def runtime_settings(cfg: Any) -> dict[str, Any]:
    """The settings of a stage config (a mapping or a settings dataclass, every field) that
    cannot change a result (:data:`RERUN_FREE`, and the path of a text model's local
    copy)."""
    if dataclasses.is_dataclass(cfg):
        cfg = to_dict(cfg)
    return {k: copy.deepcopy(v) for k, v in cfg.items() if _rerun_free(cfg, k)}


def job_settings(params: Mapping[str, Any], full: Any, **defaults: Any) -> dict[str, Any]:
    """What a rule's script passes to the library: ``defaults`` (e.g. the profile's device),
    then the run-time settings of ``full`` (the stage config the script resolves again from
    the profile), then the rule's ``params`` (the result settings)."""
    return {**defaults, **runtime_settings(full), **params}


def _wildcard(wildcards: Any, name: str) -> Any:
    """A wildcard's value (Snakemake's ``Wildcards`` by attribute, or a mapping), or None."""
    if isinstance(wildcards, Mapping):
        return wildcards.get(name)
    return getattr(wildcards, name, None)


def job_config(prof: Profile, wildcards: Any, selection: str | os.PathLike | None = None
               ) -> SimCLRConfig | SimCSEConfig:
    """The whole config of one training job, resolved once, from the job's wildcards: a
    SimCSE run (``model``, ``arm``, ``seed``: :func:`simcse_config`) or a pretraining run
    (``dataset``, ``backbone``, ``arm``, ``seed``:
    :meth:`~weince.pipeline.profile.Vision.run_config`), with the grid point chosen in
    ``selection`` (a final grid arm's ``selection.json``) put in.

    A rule's params hold ``rerun_trigger(PROFILE, wc)``, the rerun trigger (the selection
    file is an input of its own); the pretrain rule's script calls ``Vision.run_config``
    itself, the function this one calls."""
    arm, seed = _wildcard(wildcards, "arm"), _wildcard(wildcards, "seed")
    model = _wildcard(wildcards, "model")
    if model is not None:
        return simcse_config(prof, model, arm, seed)
    return prof.vision.run_config(_wildcard(wildcards, "dataset"),
                                  _wildcard(wildcards, "backbone"), arm, seed, selection)


def grid_arms(prof: Profile) -> list[str]:
    """The vision arms whose final runs use a point chosen on validation."""
    return list(prof.vision.grid.active_arms)


def pretrain_config(prof: Profile, dataset: str, backbone: str, arm: str,
                    seed: int) -> SimCLRConfig:
    """The ``SimCLRConfig`` of one run (:meth:`~weince.pipeline.profile.Vision.run_config`,
    without a selection). ``arm`` may carry a grid point (``weince@m2_kr10_ka1``); its
    values override the arm's loss keyword arguments. A final grid arm gets the chosen point
    later (:func:`apply_selection`)."""
    return prof.vision.run_config(dataset, backbone, arm, seed)


#: put the grid point chosen in ``selection.json`` into a run config's loss kwargs
apply_selection = with_selection


def simcse_config(prof: Profile, model: str, arm: str, seed: int) -> SimCSEConfig:
    """The ``SimCSEConfig`` of one text run: ``text.simcse`` with the run's model (where it
    is read, :func:`model_location`), loss (``text.losses[arm]`` over the block's
    ``loss_kwargs``) and seed."""
    t = prof.text
    location, source = model_location(prof, model, with_source=True)
    return dataclasses.replace(
        t.simcse, model=location, model_name=model, model_source=source, loss=arm,
        seed=int(seed), loss_kwargs={**copy.deepcopy(t.simcse.loss_kwargs),
                                     **copy.deepcopy(dict(t.losses.get(arm) or {}))})


def norms_config(prof: Profile, **overrides: Any) -> NormsConfig:
    """The ``NormsConfig`` of a norms run: the profile's ``norms.analysis`` (typed, with the
    profile's device unless the block sets one), then ``overrides``."""
    return dataclasses.replace(prof.norms.analysis, **overrides)


def norms_settings(prof: Profile, **overrides: Any) -> dict[str, Any]:
    """A norms rule's ``cfg`` param: :func:`trigger_settings` of :func:`norms_config` (the
    keys ``norms.analysis`` sets, as written, and ``overrides``, less the run-time ones)."""
    return trigger_settings(norms_config(prof, **overrides),
                            {**prof.norms.analysis_given, **overrides})


def probe_settings(prof: Profile, arm: str) -> dict[str, Any]:
    """A linear probe rule's params (the run's arm picks its probe seeds):
    :func:`trigger_settings` of :func:`~weince.pipeline.protocol.probe_config`, the keys
    ``vision.linear`` sets as written (:func:`~weince.pipeline.protocol.probe_kwargs`)."""
    return trigger_settings(probe_config(prof, arm), probe_kwargs(prof, arm))


def knn_settings(prof: Profile) -> dict[str, Any]:
    """The k-NN rule's params: :func:`trigger_settings` of ``vision.knn``."""
    return trigger_settings(prof.vision.knn, prof.vision.knn_given)


def features_settings(prof: Profile) -> dict[str, Any]:
    """The features rule's params: :func:`trigger_settings` of ``vision.features`` (the keys
    it sets, as written, less the run-time ones)."""
    return trigger_settings(prof.vision.features, prof.vision.features_given)


def extraction_kwargs(prof: Profile, params: Mapping[str, Any]) -> dict[str, Any]:
    """What a job passes to ``weince.eval.features.extract_features``: the features rule's
    params (``params``: :func:`features_settings`), the run-time keys of ``vision.features``
    and its device and data root (the profile's unless it sets them). The features rule and
    the probes, which extract their own features in memory, call it alike."""
    f = prof.vision.features
    return job_settings(params, prof.vision.features_given, device=f.device,
                        data_root=f.data_root)


def scores_settings(prof: Profile) -> dict[str, Any]:
    """The score collection rule's params: :func:`trigger_settings` of
    ``vision.evt.collect``."""
    return trigger_settings(prof.vision.evt.collect, prof.vision.evt.collect_given)


def _never_free(_cfg: Mapping[str, Any], _key: str) -> bool:
    return False


def pot_settings(prof: Profile) -> dict[str, Any]:
    """The POT fit rule's params, which its script passes on as they are: every key
    ``vision.evt.pot`` sets, as written (:func:`trigger_settings`, nothing left out)."""
    return trigger_settings(prof.vision.evt.pot, prof.vision.evt.pot_given, free=_never_free)


def link_settings(prof: Profile) -> dict[str, Any]:
    """The link fit rule's params, which its script passes on as they are: every key
    ``vision.evt.link`` sets, as written."""
    return trigger_settings(prof.vision.evt.link, prof.vision.evt.link_given, free=_never_free)


def sts_settings(prof: Profile) -> dict[str, Any]:
    """The sts rule's params: :func:`trigger_settings` of ``text.sts``, with ``data`` always
    (``run_sts`` takes it as a required argument, so the script must pass it; a block that
    leaves it out gets its default, listed last)."""
    t = prof.text
    given = t.sts_given if "data" in t.sts_given else {**t.sts_given, "data": t.sts.data}
    return trigger_settings(t.sts, given)


def text_model(prof: Profile, model: str, arm: str, trun_dir: str) -> str:
    """The model a text norms unit analyses: the shipped model (``text.model_paths`` or its
    name) for ``pretrained``, else the trained run's ``model/`` folder."""
    if arm == PRETRAINED_ARM:
        return model_location(prof, model)
    return f"{trun_dir}/model"


def text_model_key(prof: Profile, model: str, arm: str, trun_dir: str) -> str:
    """What names the model a text norms unit analyses in its rule's params: the path of
    :func:`text_model`, except a local copy under ``data_root``, named ``local copy:<name>``
    (moving the data folder reruns nothing)."""
    if arm == PRETRAINED_ARM:
        location, source = model_location(prof, model, with_source=True)
        return f"local copy:{model}" if source == "local copy" else location
    return text_model(prof, model, arm, trun_dir)


def timing_settings(prof: Profile) -> dict[str, Any]:
    """The timing rule's params: :func:`trigger_settings` of the profile's ``timing.config``
    without the device (the script takes it from the profile at run time)."""
    return trigger_settings(prof.timing.config, prof.timing.given,
                            free=lambda _cfg, key: key == "device")


def model_location(prof: Profile, model: str, with_source: bool = False):
    """Where a text model's weights are read: ``text.model_paths[model]`` (a stand-in: its
    rows are scale models), else the folder ``{data_root}/models/{model}`` when it exists (a
    local copy, e.g. the tiny BERT of ``weince synthetic-data``), else the name itself (the
    Hugging Face cache, or a shipped model such as ``minilm``). ``with_source``: also the
    source, ``"model_paths"``, ``"local copy"`` or ``"name"``
    (:data:`weince.models.text.MODEL_SOURCES`)."""
    paths = prof.text.model_paths
    local = os.path.join(prof.data_root, "models", model)
    if model in paths:
        found = (str(paths[model]), "model_paths")
    elif os.path.isdir(local):
        found = (local, "local copy")
    else:
        found = (model, "name")
    return found if with_source else found[0]
