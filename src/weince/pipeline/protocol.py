"""The official protocol behind Tables 2-3, as values, and the options a profile takes
away from it.

``docs/protocol.md`` lists every step of the authors' pipeline with the file it comes from;
this module holds the values that a workflow config can set, so that a report can say which
cheaper or different options a profile used (:func:`protocol_options`) and the tests can pin
the paper profile to the official protocol.

    from weince.pipeline.protocol import protocol_options
    protocol_options(prof)  # [] for the paper profile; e.g. ["grid at one encoder seed", ...]
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from weince.eval.config import LinearProbeConfig
from weince.pipeline.profile import Profile

__all__ = ["OFFICIAL", "protocol_options", "probe_config", "probe_kwargs", "shares_seeds",
           "adopted_seeds"]

# Values of the official CIFAR-100 ResNet-18 runs (hsme98/weince: slurm/submit_cifar100_r18_*,
# main_hard_select.py, linear_evaluation.py, knn_eval.py, scripts/aggregate_table23_r18.py)
OFFICIAL: dict[str, Any] = {
    "pretrain": {"optimizer": "adam", "lr": 3e-4, "weight_decay": 0.0, "batch_size": 256,
                 "epochs": 100, "tau": 0.5, "proj_dim": 64, "amp": False, "tf32": False,
                 "forward": "per_view", "conv1_init": "default"},
    "stl10_train_split": "unlabeled",
    "normalise_views": False,   # TransformsSimCLR: ToTensor only, images in [0, 1]
    "encoder_seeds": [7, 21, 63, 84],
    "linear": {"epochs": 100, "batch_size": 256, "lr": 3e-4, "val_frac": 0.2, "split_seed": 1,
               "select": "final", "seeds": [1],
               # the baseline script probes InfoNCE encoders with seeds 1-5, WEINCE with 1
               "seeds_by_arm": {"infonce": [1, 2, 3, 4, 5]}},
    "knn": {"k": 50, "temperature": 0.1, "val_frac": 0.2, "split_seeds": [1, 2, 3, 4, 5]},
    "grid": {"margin": [0, 2, 6], "kappa_rho": [5, 10, 20], "kappa_aic": [0.5, 1, 2]},
}


def protocol_options(prof: Profile) -> list[str]:
    """The options of a workflow config that differ from the official protocol, in words
    (scale settings such as epochs, data sets and seeds are the scale line's, not listed).

    The profile's typed blocks hold the library's defaults for the keys the config leaves
    out (:class:`weince.train.config.SimCLRConfig`,
    :class:`weince.eval.config.LinearProbeConfig`, :class:`~weince.eval.config.KNNConfig`)."""
    v = prof.vision
    if not v.enabled or not v.datasets:
        return []
    out: list[str] = []
    pre = v.pretrain
    if pre.weight_decay > 0:
        out.append(f"Adam weight decay {pre.weight_decay:g} (official: none)")
    if pre.amp:
        out.append("bf16 autocast (amp, CUDA only)")
    if pre.tf32:
        out.append("TF32 matmuls (tf32)")
    if pre.forward == "joint":
        out.append("one forward over both views (forward: joint; BatchNorm over 2N)")
    aug = pre.aug_kwargs
    if aug.get("mean", "dataset") is not None:
        out.append("views normalised with the data set's mean/std (official: [0, 1] scaling; "
                   "aug_kwargs mean/std null)")
    if pre.conv1_init == "kaiming":
        out.append("Kaiming conv1 init (conv1_init: kaiming)")
    if "stl10" in v.datasets:
        split = v.pretrain_for("stl10").train_split
        if split != OFFICIAL["stl10_train_split"]:
            out.append(f"STL-10 pretrains on {split} (official: unlabeled)")
    g = v.grid
    if g.arms and g.seeds and not shares_seeds(prof):
        out.append(f"grid at encoder seed(s) {', '.join(map(str, g.seeds))} only, then the "
                   f"chosen point trained at the other seeds (official: every point at every "
                   f"seed; k-NN then uses the linear point for every metric)")
    lin = v.linear
    if lin.select != "final":
        out.append(f"probe scored at its best validation epoch (select: {lin.select})")
    if lin.split_seed != 1:
        out.append("one probe split per probe seed (split_seed: null)"
                   if lin.split_seed is None else f"probe split seed {lin.split_seed}")
    if lin.val_frac != 0.2:
        out.append(f"probe validation fraction {lin.val_frac:g} (official: 0.2)")
    if len(lin.seeds) != 1:
        out.append(f"{len(lin.seeds)} probe seeds (official: 1)")
    # seeds_by_arm is a workflow key, not a linear_probe default: absent means `seeds`
    infonce = list(v.linear_seeds_by_arm.get("infonce", lin.seeds))
    if "infonce" in v.arms and infonce != [1, 2, 3, 4, 5]:
        out.append(f"InfoNCE probed with seeds {infonce} (official baseline script: 1-5)")
    knn = v.knn
    if knn.val_frac != 0.2:
        out.append(f"k-NN validation fraction {knn.val_frac:g} (official: 0.2)")
    if list(knn.split_seeds) != OFFICIAL["knn"]["split_seeds"]:
        out.append(f"k-NN split seeds {', '.join(map(str, knn.split_seeds))} "
                   f"(official: 1-5)")
    return out


def _arm_seeds(prof: Profile, arm: str) -> tuple[int, ...] | None:
    """The probe seeds ``linear.seeds_by_arm`` gives the run's arm (``weince@point`` counts
    as ``weince``), or None."""
    return prof.vision.linear_seeds_by_arm.get(arm.split("@", 1)[0])


def probe_config(prof: Profile, arm: str) -> LinearProbeConfig:
    """The linear probe's settings of one run: ``vision.linear`` (typed) with the probe
    seeds of ``linear.seeds_by_arm`` for the run's arm in place of ``seeds``."""
    seeds = _arm_seeds(prof, arm)
    lin = prof.vision.linear
    return lin if seeds is None else dataclasses.replace(lin, seeds=seeds)


def probe_kwargs(prof: Profile, arm: str) -> dict[str, Any]:
    """The ``linear_probe`` keyword arguments the config sets for one run, as written:
    ``vision.linear`` less ``seeds_by_arm``, with the run arm's probe seeds in place of
    ``seeds`` (:func:`probe_config` types them; the library's defaults fill the rest)."""
    lin = copy.deepcopy(prof.vision.linear_given)
    seeds = _arm_seeds(prof, arm)
    if seeds is not None:
        lin["seeds"] = list(seeds)
    return lin


def shares_seeds(prof: Profile) -> bool:
    """True when the grid runs every point at every encoder seed (the official four-seed
    grid): the final arm then reuses the chosen point's runs."""
    v = prof.vision
    return bool(v.grid.arms) and bool(v.seeds) and set(v.seeds) <= set(v.grid.seeds)


def adopted_seeds(prof: Profile) -> list[int]:
    """The encoder seeds at which a final grid arm adopts the chosen point's run instead of
    training it: the grid's seeds among the vision seeds (all of them in the four-seed grid;
    seed 7 of the one-seed grid, whose point ran there with the very same config, so that a
    second training would repeat it bit for bit). Empty without a grid."""
    v = prof.vision
    if not v.grid.arms:
        return []
    return [s for s in v.seeds if s in set(v.grid.seeds)]
