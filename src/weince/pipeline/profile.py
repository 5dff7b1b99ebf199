"""One profile, resolved once: the workflow config of one profile as a typed object.

    from weince.pipeline.profile import Profile
    prof = Profile.of(cfg)            # cfg: the workflow config of one profile (a dict)
    prof.vision.grid.seeds            # (7, 21, 63, 84)
    prof.vision.pretrain.epochs       # a stage's settings: its dataclass (SimCLRConfig)

The Snakefile resolves its config once (``PROFILE = Profile.of(config)``, after the config
check), and everything below it (rules, planner, cost, preflight, selection, report, bundle)
takes the :class:`Profile` or the few fields it needs: nothing below the workflow layer reads
the raw dict (``tests/pipeline/test_profile.py`` scans the library for it).

:meth:`Profile.of` resolves a copy of the dict: it validates it against the config schema
(``config.schema.yaml`` beside this module; ``workflow/schemas/`` links to it) and fills the
schema's defaults (the schema is the one source of every workflow default), replaces
``{data_root}`` in every string by the ``data_root`` key, and applies a rehearsal's CPU sizes
when no GPU is used (:func:`resolve_config`). Resolving is idempotent: ``Profile.of(p.config)``
is ``p`` again, which is how a job's script gets the profile the Snakefile resolved.

Every stage block is typed, as the dataclass the library takes or whose fields are the
library function's keyword arguments (the schema's blocks are generated from these,
:data:`weince.pipeline.schema.GENERATED`). The training blocks: ``vision.pretrain`` is a
:class:`~weince.train.config.SimCLRConfig` (its defaults, the profile's ``device``,
``threads``, ``data_root`` and ``download`` unless the block sets them, then the block's
keys), :meth:`Vision.pretrain_for` a data set's (``vision.pretrain_by_dataset`` over it),
``text.simcse`` a :class:`~weince.train.config.SimCSEConfig` (the profile's ``device`` and
``offline`` unless it sets them), and ``timing.config`` a
:class:`~weince.train.config.TimingConfig` (the profile's ``device`` unless it sets one).
The evaluation blocks, each with the profile's ``device`` unless it sets one:
``vision.features`` a :class:`~weince.eval.config.FeaturesConfig` (and the profile's
``data_root``), ``vision.linear`` a :class:`~weince.eval.config.LinearProbeConfig` (its
workflow key ``seeds_by_arm`` is :attr:`Vision.linear_seeds_by_arm`), ``vision.knn`` a
:class:`~weince.eval.config.KNNConfig`, ``vision.evt.collect`` a
:class:`~weince.eval.config.ScoresConfig` (and the profile's ``data_root``),
``norms.analysis`` a :class:`~weince.norms.config.NormsConfig` and ``text.sts`` a
:class:`~weince.eval.config.STSConfig` (and the profile's ``offline``); the fits
``vision.evt.pot`` and ``vision.evt.link`` (:class:`~weince.evt.config.PotConfig`,
:class:`~weince.evt.config.LinkConfig`) inherit nothing. Each typed block keeps the block as
written beside it (``pretrain_given``, ``features_given``, ``linear_given``, ``knn_given``,
``Evt.collect_given``, ``sts_given``, ``analysis_given``, ...): what a job's params list
(its rerun trigger, :func:`weince.pipeline.stages.trigger_settings`) and its script passes
on, so the library's defaults, which are the dataclass's, fill the rest (an sts job's
params always list ``data``, :func:`weince.pipeline.stages.sts_settings`). ``config`` is
the resolved dict, unchanged: what provenance hashes and a results bundle ships.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weince.pipeline.arms import grid_points, resolve_arm
from weince.pipeline.claims import validate_with_defaults
from weince.eval.config import (FeaturesConfig, KNNConfig, LinearProbeConfig, ScoresConfig,
                                STSConfig)
from weince.evt.config import LinkConfig, PotConfig
from weince.norms.config import NormsConfig
from weince.pipeline.schema import fill_defaults, read_schema
from weince.train.config import SimCLRConfig, SimCSEConfig, TimingConfig
from weince.utils.config import config_from_dict, deep_merge, expand_data_root
from weince.utils.provenance import config_hash
from weince.utils.results import get_key, load_result

__all__ = ["Profile", "Vision", "with_selection", "Grid", "Evt", "Text", "Timing", "Checks",
           "NoiseFloor", "Ablations", "Norms", "NormsVision", "NormsText", "Rehearsal", "Disk",
           "CONFIG_SCHEMA", "config_schema", "resolve_config"]

CONFIG_SCHEMA = Path(__file__).with_name("config.schema.yaml")
_SCHEMA: dict[str, Any] = {}


def config_schema() -> dict[str, Any]:
    """The workflow config's schema (read once per process)."""
    if not _SCHEMA:
        _SCHEMA.update(read_schema(CONFIG_SCHEMA))
    return _SCHEMA


def _cuda_visible() -> bool:
    """Whether torch sees a GPU here: the one question a rehearsal with ``gpu: auto`` asks the
    machine, so torch is imported only then (planning a profile never needs it)."""
    import torch  # noqa: PLC0415 - planning never needs torch; this one question does

    return bool(torch.cuda.is_available())


def resolve_config(cfg: Mapping[str, Any], checked: bool = False) -> dict[str, Any]:
    """A resolved copy of a workflow config: validated, the schema's defaults filled,
    ``{data_root}`` placeholders replaced, and a rehearsal's CPU sizes applied.
    ``checked``: the config passed the config check already (the Snakefile's
    ``check_config``), so its defaults are only filled, not validated again.

    A rehearsal (``rehearsal.enabled``) decides once whether its jobs get GPUs
    (``rehearsal.gpu`` true/false, or ``auto``: CUDA visible where the config is resolved)
    and records it as ``rehearsal.gpu_used``; without GPUs ``rehearsal.cpu`` is merged over
    the config (CPU-sized batches), every rule's ``resources.gpu`` becomes 0, and
    ``rehearsal.cpu_pairs`` (when ``vision.pairs`` is not set) narrows the pairs to a
    covering subset (``rehearsal.cpu_pairs_used``). A config already resolved is returned
    equal (``gpu_used`` is set, so nothing is applied twice)."""
    if "profile" not in cfg:
        raise ValueError("config has no 'profile' key (e.g. profile: default)")
    c = copy.deepcopy(dict(cfg))
    if checked:
        fill_defaults(c, config_schema())
    else:
        validate_with_defaults(c, config_schema(), f"the workflow config of {c['profile']!r}")
    root = c["data_root"]
    for key in list(c):
        c[key] = expand_data_root(c[key], root)
    r = c["rehearsal"]
    if not r["enabled"] or r["gpu_used"] is not None:
        return c
    r["gpu_used"] = bool(r["gpu"]) if r["gpu"] in (True, False) else _cuda_visible()
    if not r["gpu_used"]:
        deep_merge(c, expand_data_root(copy.deepcopy(r["cpu"]), root))
        for res in c["resources"].values():
            if isinstance(res, dict) and res.get("gpu"):
                res["gpu"] = 0
        if r["cpu_pairs"] and c["vision"]["pairs"] is None:
            c["vision"]["pairs"] = copy.deepcopy(r["cpu_pairs"])   # a `vision.pairs` set wins
            r["cpu_pairs_used"] = True
        validate_with_defaults(c, config_schema(), f"the workflow config of {c['profile']!r} "
                                                   f"with rehearsal.cpu merged over it")
    return c


def _ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in xs or ())


def _strs(xs: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in xs or ())


def _block(x: Any) -> dict[str, Any]:
    return copy.deepcopy(dict(x or {}))


@dataclass(frozen=True)
class Grid:
    """``vision.grid``: the WEINCE points each grid arm trains, at which encoder seeds, and
    the validation metric that chooses one."""

    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    margin: tuple[float, ...]
    kappa_rho: tuple[float, ...]
    kappa_aic: tuple[float, ...]
    metric: str
    points: tuple[str, ...]        # the product of the lists given (weince.pipeline.arms)

    @property
    def active_arms(self) -> tuple[str, ...]:
        """The arms whose final runs use a point chosen on validation (none without points
        or seeds)."""
        return self.arms if self.points and self.seeds else ()

    def values(self) -> dict[str, list[float]]:
        return {"margin": list(self.margin), "kappa_rho": list(self.kappa_rho),
                "kappa_aic": list(self.kappa_aic)}


@dataclass(frozen=True)
class Evt:
    """``vision.evt``: the arms with score files and tail/link fits, and their options
    (typed; ``collect`` with the profile's ``device`` and ``data_root`` unless the block sets
    them), each beside its block as written."""

    arms: tuple[str, ...]
    collect: ScoresConfig
    pot: PotConfig
    link: LinkConfig
    collect_given: dict[str, Any] = field(default_factory=dict)
    pot_given: dict[str, Any] = field(default_factory=dict)
    link_given: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Vision:
    """``vision``: SimCLR pretraining and its evaluations. ``pairs``: the (dataset, backbone)
    pairs the profile runs (every dataset x backbone, or ``vision.pairs``; none when
    disabled)."""

    enabled: bool
    datasets: tuple[str, ...]
    backbones: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    pretrain: SimCLRConfig
    pretrain_by_dataset: dict[str, SimCLRConfig]   # data set -> its whole config
    losses: dict[str, Any]
    grid: Grid
    features: FeaturesConfig        # the profile's device and data_root unless the block sets them
    linear: LinearProbeConfig       # the profile's device unless the block sets one
    knn: KNNConfig                  # the profile's device unless the block sets one
    evt: Evt
    # vision.linear.seeds_by_arm: an arm's probe seeds in place of `linear.seeds`
    # (weince.pipeline.protocol.probe_config)
    linear_seeds_by_arm: dict[str, tuple[int, ...]] = field(default_factory=dict)

    # what the config sets, as written: vision.pretrain, each vision.pretrain_by_dataset
    # entry, vision.features, vision.linear (less seeds_by_arm) and vision.knn
    pretrain_given: dict[str, Any] = field(default_factory=dict)
    pretrain_given_by_dataset: dict[str, dict[str, Any]] = field(default_factory=dict)
    features_given: dict[str, Any] = field(default_factory=dict)
    linear_given: dict[str, Any] = field(default_factory=dict)
    knn_given: dict[str, Any] = field(default_factory=dict)

    @property
    def tau(self) -> float:
        """The temperature of the profile's main arms (``vision.pretrain.tau``)."""
        return self.pretrain.tau

    def pretrain_given_for(self, dataset: str) -> dict[str, Any]:
        """The pretraining settings ``dataset``'s runs have from the config, as written
        (``vision.pretrain``, its ``vision.pretrain_by_dataset`` entry over it): what their
        rerun trigger lists."""
        return {**self.pretrain_given, **self.pretrain_given_by_dataset.get(dataset, {})}

    def pretrain_for(self, dataset: str) -> SimCLRConfig:
        """The pretraining settings of ``dataset``'s runs (``vision.pretrain``, with
        ``vision.pretrain_by_dataset[dataset]`` over it)."""
        return self.pretrain_by_dataset.get(dataset, self.pretrain)

    def run_config(self, dataset: str, backbone: str, arm: str, seed: int | str,
                   selection: str | os.PathLike | None = None) -> SimCLRConfig:
        """The whole ``SimCLRConfig`` of one pretraining run: :meth:`pretrain_for` its data
        set, with its backbone, seed and arm (:func:`~weince.pipeline.arms.resolve_arm`:
        the arm's loss, loss options and temperature; a grid point's values,
        ``weince@m2_kr10_ka1``, over the options), then the point chosen in ``selection``
        (a final grid arm's ``selection.json``, :func:`with_selection`) when given."""
        base = self.pretrain_for(dataset)
        s = resolve_arm(arm, self.losses, base.tau)
        cfg = dataclasses.replace(base, dataset=dataset, backbone=backbone, loss=s["loss"],
                                  seed=int(seed), loss_kwargs=s["loss_kwargs"],
                                  tau=float(s["tau"]), aug_kwargs=copy.deepcopy(base.aug_kwargs))
        return with_selection(cfg, selection) if selection else cfg


def with_selection(run_cfg: SimCLRConfig, selection_path: str | os.PathLike) -> SimCLRConfig:
    """Put the grid point chosen in ``selection.json`` into a run config's loss kwargs."""
    sel = load_result(selection_path)
    params = get_key(sel, "params", selection_path, needed_by="the final run of a grid arm")
    return dataclasses.replace(run_cfg, loss_kwargs={**run_cfg.loss_kwargs, **params})


@dataclass(frozen=True)
class Text:
    """``text``: SimCSE training and STS evaluation."""

    enabled: bool
    models: tuple[str, ...]
    model_paths: dict[str, Any]
    losses: dict[str, Any]
    corpus: str
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    simcse: SimCSEConfig            # the profile's device and offline unless the block sets them
    sts: STSConfig                  # the profile's device and offline unless the block sets them
    simcse_given: dict[str, Any] = field(default_factory=dict)   # text.simcse as written
    sts_given: dict[str, Any] = field(default_factory=dict)      # text.sts as written


@dataclass(frozen=True)
class Timing:
    enabled: bool
    config: TimingConfig            # the profile's device unless the block sets one
    given: dict[str, Any] = field(default_factory=dict)   # timing.config as written


@dataclass(frozen=True)
class Checks:
    enabled: bool
    cases: tuple[Any, ...]


@dataclass(frozen=True)
class NoiseFloor:
    """``synthetic.noise_floor``: the paper's synthetic experiment (C11)."""

    enabled: bool
    replicates: int
    sample_sizes: tuple[int, ...]
    seed: int


@dataclass(frozen=True)
class Ablations:
    """``ablations``: which groups run (names, or ``"all"``), on which pairs and seeds
    (``None``: the profile's first pair, its seeds); :mod:`weince.pipeline.ablations`."""

    enabled: bool
    groups: tuple[str, ...] | str
    pairs: tuple[tuple[str, str], ...] | None
    seeds: tuple[int, ...] | None


@dataclass(frozen=True)
class NormsVision:
    enabled: bool
    arms: tuple[str, ...] | None    # None: the profile's vision arms
    seeds: tuple[int, ...] | None   # None: the profile's vision seeds


@dataclass(frozen=True)
class NormsText:
    enabled: bool
    models: tuple[str, ...]
    simcse_runs: bool


@dataclass(frozen=True)
class Norms:
    """``norms``: the norms analysis' units (N1-N3) and its options."""

    vision: NormsVision
    text: NormsText
    analysis: NormsConfig           # the profile's device unless the block sets one
    analysis_given: dict[str, Any] = field(default_factory=dict)   # norms.analysis as written


@dataclass(frozen=True)
class Rehearsal:
    """``rehearsal`` (config/rehearsal.yaml): the paper DAG at one-batch sizes."""

    enabled: bool
    safety_factor: float
    gpu: Any                        # auto | True | False
    gpu_used: bool | None           # decided when the workflow resolved the config
    cpu_pairs_used: bool
    paper_config: str


@dataclass(frozen=True)
class Disk:
    """``disk``: the user's quota (bytes or a size such as "2TB"; None: only the free space
    counts) and how many runs' temporaries the estimate counts at once."""

    quota: str | float | None
    concurrent_runs: int


@dataclass(frozen=True)
class Profile:
    """A workflow profile, resolved (module docstring)."""

    name: str
    results: Path                   # the results root, above the profile
    reports: Path                   # the reports root, above the profile
    claims: Path                    # the claims registry
    container: str
    device: str
    threads: int
    offline: bool
    data_root: str
    download: bool
    keep_features: bool             # features.pt kept (else temporary: deleted once read)
    disk: Disk
    vision: Vision
    text: Text
    timing: Timing
    checks: Checks
    noise_floor: NoiseFloor
    ablations: Ablations
    norms: Norms
    rehearsal: Rehearsal
    cost: dict[str, Any]            # the cost model's block (weince.cost)
    resources: dict[str, Any]       # rule -> SLURM/local resources
    config: Mapping[str, Any] = field(repr=False)   # the resolved config (provenance)
    config_hash: str = field(repr=False, default="")

    @classmethod
    def of(cls, cfg: Mapping[str, Any] | Profile, checked: bool = False) -> Profile:
        """The profile of a workflow config, resolved on a copy (:func:`resolve_config`;
        ``cfg`` is left as it is; ``checked``: it passed the config check, which validated
        it). A :class:`Profile` is returned as is."""
        if isinstance(cfg, Profile):
            return cfg
        c = resolve_config(cfg, checked)
        v, t, n = c["vision"], c["text"], c["norms"]
        return cls(
            name=str(c["profile"]), results=Path(c["results"]), reports=Path(c["reports"]),
            claims=Path(c["claims"]), container=str(c["container"]), device=str(c["device"]),
            threads=int(c["threads"]), offline=bool(c["offline"]),
            data_root=str(c["data_root"]), download=bool(c["download"]),
            keep_features=bool(c["keep_features"]),
            disk=Disk(c["disk"]["quota"], int(c["disk"]["concurrent_runs"])),
            vision=_vision(v, c), text=_text(t, c),
            timing=Timing(bool(c["timing"]["enabled"]),
                          _typed(TimingConfig, c, c["timing"]["config"]),
                          given=_block(c["timing"]["config"])),
            checks=Checks(bool(c["checks"]["enabled"]), tuple(c["checks"]["cases"])),
            noise_floor=_noise_floor(c["synthetic"]["noise_floor"]),
            ablations=_ablations(c["ablations"]),
            norms=Norms(
                vision=NormsVision(bool(n["vision"]["enabled"]),
                                   None if n["vision"]["arms"] is None
                                   else _strs(n["vision"]["arms"]),
                                   None if n["vision"]["seeds"] is None
                                   else _ints(n["vision"]["seeds"])),
                text=NormsText(bool(n["text"]["enabled"]), _strs(n["text"]["models"]),
                               bool(n["text"]["simcse_runs"])),
                analysis=_typed(NormsConfig, c, n["analysis"]),
                analysis_given=_block(n["analysis"])),
            rehearsal=_rehearsal(c["rehearsal"]),
            cost=_block(c["cost"]), resources=_block(c["resources"]),
            config=c, config_hash=config_hash(c))

    @property
    def report_dir(self) -> Path:
        """``{reports}/{profile}``: every page of the profile's report."""
        return self.reports / self.name


def _pairs(v: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    if not v["enabled"]:
        return ()
    pairs = [(d, b) for d in v["datasets"] for b in v["backbones"]]
    if v["pairs"] is None:
        return tuple(pairs)
    only = [(str(p[0]), str(p[1])) for p in v["pairs"]]
    unknown = [p for p in only if p not in pairs]
    if unknown:
        raise ValueError(f"vision.pairs names {unknown}, not among vision.datasets x "
                         f"vision.backbones; add the data set / backbone there or drop the pair")
    return tuple(p for p in pairs if p in only)


# the profile's keys a pretraining block inherits unless it sets them
_INHERITED = ("device", "threads", "data_root", "download")


def _typed(cls: type, c: Mapping[str, Any], *blocks: Mapping[str, Any] | None,
           inherited: tuple[str, ...] = ("device",)) -> Any:
    """A stage block typed as its dataclass ``cls``: the profile's ``inherited`` keys (its
    ``device``), then ``blocks`` in turn (the config was validated against the schema
    generated from ``cls``, so this only types the values: ``lr: 1`` is the float 1.0)."""
    merged = {k: c[k] for k in inherited}
    for b in blocks:
        merged.update(_block(b))
    return config_from_dict(cls, merged, checked=True)


def _pretrain(c: Mapping[str, Any], *blocks: Mapping[str, Any] | None) -> SimCLRConfig:
    """The typed pretraining settings: the profile's :data:`_INHERITED` keys, then
    ``blocks`` (``vision.pretrain``, a data set's ``vision.pretrain_by_dataset`` entry)."""
    return _typed(SimCLRConfig, c, *blocks, inherited=_INHERITED)


def _vision(v: Mapping[str, Any], c: Mapping[str, Any]) -> Vision:
    g, e = v["grid"], v["evt"]
    linear = _block(v["linear"])
    by_arm = linear.pop("seeds_by_arm", None) or {}
    grid = Grid(arms=_strs(g["arms"]), seeds=_ints(g["seeds"]),
                margin=tuple(float(x) for x in g["margin"]),
                kappa_rho=tuple(float(x) for x in g["kappa_rho"]),
                kappa_aic=tuple(float(x) for x in g["kappa_aic"]), metric=str(g["metric"]),
                points=tuple(grid_points(g)))
    return Vision(
        enabled=bool(v["enabled"]), datasets=_strs(v["datasets"]),
        backbones=_strs(v["backbones"]), pairs=_pairs(v), arms=_strs(v["arms"]),
        seeds=_ints(v["seeds"]), pretrain=_pretrain(c, v["pretrain"]),
        pretrain_by_dataset={d: _pretrain(c, v["pretrain"], over)
                             for d, over in (v["pretrain_by_dataset"] or {}).items()},
        losses=_block(v["losses"]),
        grid=grid,
        features=_typed(FeaturesConfig, c, v["features"], inherited=("device", "data_root")),
        linear=_typed(LinearProbeConfig, c, linear), knn=_typed(KNNConfig, c, v["knn"]),
        evt=Evt(_strs(e["arms"]),
                collect=_typed(ScoresConfig, c, e["collect"], inherited=("device", "data_root")),
                pot=_typed(PotConfig, c, e["pot"], inherited=()),
                link=_typed(LinkConfig, c, e["link"], inherited=()),
                collect_given=_block(e["collect"]), pot_given=_block(e["pot"]),
                link_given=_block(e["link"])),
        linear_seeds_by_arm={str(arm): _ints(seeds) for arm, seeds in by_arm.items()},
        pretrain_given=_block(v["pretrain"]),
        pretrain_given_by_dataset={d: _block(over)
                                   for d, over in (v["pretrain_by_dataset"] or {}).items()},
        features_given=_block(v["features"]), linear_given=linear, knn_given=_block(v["knn"]))


def _text(t: Mapping[str, Any], c: Mapping[str, Any]) -> Text:
    return Text(enabled=bool(t["enabled"]), models=_strs(t["models"]),
                model_paths=_block(t["model_paths"]), losses=_block(t["losses"]),
                corpus=str(t["corpus"]), arms=_strs(t["arms"]), seeds=_ints(t["seeds"]),
                simcse=_typed(SimCSEConfig, c, t["simcse"], inherited=("device", "offline")),
                sts=_typed(STSConfig, c, t["sts"], inherited=("device", "offline")),
                simcse_given=_block(t["simcse"]), sts_given=_block(t["sts"]))


def _noise_floor(nf: Mapping[str, Any]) -> NoiseFloor:
    return NoiseFloor(bool(nf["enabled"]), int(nf["replicates"]), _ints(nf["sample_sizes"]),
                      int(nf["seed"]))


def _ablations(a: Mapping[str, Any]) -> Ablations:
    groups = a["groups"]
    return Ablations(
        enabled=bool(a["enabled"]),
        groups=groups if isinstance(groups, str) else _strs(groups),
        pairs=None if a["pairs"] is None else tuple((str(p[0]), str(p[1])) for p in a["pairs"]),
        seeds=None if a["seeds"] is None else _ints(a["seeds"]))


def _rehearsal(r: Mapping[str, Any]) -> Rehearsal:
    return Rehearsal(enabled=bool(r["enabled"]), safety_factor=float(r["safety_factor"]),
                     gpu=r["gpu"], gpu_used=r["gpu_used"],
                     cpu_pairs_used=bool(r["cpu_pairs_used"]),
                     paper_config=str(r["paper_config"]))
