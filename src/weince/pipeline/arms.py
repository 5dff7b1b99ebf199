"""Every named training arm of the workflow (torch-free: the report and ``weince verify``
read it without the losses).

An *arm* is a name in the workflow's ``{arm}`` slot. It resolves to a registered loss (a
:func:`weince.losses.build_loss` name), its keyword arguments and, for temperature arms, a
temperature:

- main and ablation arms are entries of :data:`ARMS` (``infonce``, ``weince``,
  ``weince_recipe``, ``weince_lam0p5``, ``infonce_tau0p2``, ``hcl``, ...);
- a grid point of an arm is spelled ``{arm}@{point}`` (``weince@m2_kr10_ka0.5``,
  :func:`point_name` / :func:`parse_point`); its values override the arm's loss options;
- any other name is taken as a registered loss name with the profile's options.

    from weince.pipeline.arms import resolve_arm
    resolve_arm("weince_lam0p5", losses={"weince": {"margin": 2.0}}, tau=0.5)
    # {"loss": "weince", "tau": 0.5, "loss_kwargs": {"margin": 2.0, "lam": 0.5}}
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Arm", "ARMS", "DEFAULT_TAU", "GRID_KEYS", "arm_settings", "apply_arm",
           "canonical_arm", "resolve_arm", "tau_arm_name", "TAUS",
           "point_name", "parse_point", "split_arm", "grid_points"]

DEFAULT_TAU = 0.5  # weince.train.simclr.SimCLRConfig.tau (docs/protocol.md)
TAUS = (0.1, 0.2, 0.5, 1.0)  # the temperature arms


@dataclass(frozen=True)
class Arm:
    """One training arm: a registered loss (``weince.losses.build_loss`` name), its keyword
    arguments, and a temperature (``None``: the profile's ``vision.pretrain.tau``)."""

    name: str
    loss: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    tau: float | None = None
    note: str = ""

    def setting(self) -> str:
        parts = [f"{k}={v!r}" if isinstance(v, str) else f"{k}={v:g}"
                 for k, v in self.kwargs.items()]
        if self.tau is not None:
            parts.append(f"tau={self.tau:g}")
        return f"{self.loss}" + (f"({', '.join(parts)})" if parts else "")


def tau_arm_name(loss: str, tau: float) -> str:
    """``("infonce", 0.2)`` -> ``"infonce_tau0p2"``."""
    return f"{loss}_tau{tau:g}".replace(".", "p")


_ARM_LIST = [
    Arm("infonce", "infonce", note="InfoNCE / NT-Xent"),
    Arm("infonce_topm", "infonce_topm", note="InfoNCE + 0.5 softmax top-50 term"),
    Arm("weince", "weince", note="WEINCE core"),
    Arm("weince_recipe", "weince_recipe", note="WEINCE + both top-M terms (authors' recipe)"),
    Arm("weince_recipe_no_weib", "weince_recipe_no_weib",
        note="WEINCE + softmax top-M term only"),
    *[Arm(f"weince_lam{lam:g}".replace(".", "p"), "weince", {"lam": lam},
          note=f"every anchor's lambda fixed at {lam:g}") for lam in (0.25, 0.5, 1.0)],
    Arm("weince_gate_rho", "weince", {"gate": "rho"}, note="cap-proximity factor of the gate only"),
    Arm("weince_gate_aic", "weince", {"gate": "aic"}, note="AIC factor of the gate only"),
    Arm("weince_beta_anchor", "weince", {"beta": "anchor"},
        note="per-anchor Weibull slope (paper's printed formula)"),
    *[Arm(tau_arm_name(loss, t), loss, tau=t, note=f"{loss} at tau={t:g}")
      for loss in ("infonce", "weince") for t in TAUS],
    Arm("hcl", "hcl", {"beta": 1.0, "tau_plus": 0.1},
        note="hard-negative loss, Robinson et al. ICLR 2021"),
    Arm("dcl", "dcl", note="decoupled contrastive loss, Yeh et al. ECCV 2022"),
    Arm("dclw", "dclw", {"sigma": 0.5}, note="DCL with von Mises-Fisher weights"),
]
ARMS: dict[str, Arm] = {a.name: a for a in _ARM_LIST}


def _check_arm(name: str) -> Arm:
    if name not in ARMS:
        raise ValueError(f"unknown ablation arm {name!r}; valid: {sorted(ARMS)}")
    return ARMS[name]


def canonical_arm(name: str, losses: Mapping[str, Any] | None, tau: float) -> str:
    """The arm whose run gives ``name``'s result: a temperature arm at the profile's own
    ``tau`` (its main arms' temperature) with no other option (none in the arm, none under its
    name in the profile's ``losses``) *is* the main arm (``infonce_tau0p5`` -> ``infonce``
    when the profile trains at 0.5), so it is not trained twice."""
    arm = _check_arm(name)
    own = (losses or {}).get(name)
    if (arm.tau is not None and not arm.kwargs and not own and arm.loss in ARMS
            and math.isclose(arm.tau, tau)):
        return arm.loss
    return name


def arm_settings(name: str, losses: Mapping[str, Any] | None = None,
                 tau: float | None = None) -> dict[str, Any]:
    """``{"loss", "tau", "loss_kwargs"}`` of arm ``name``.

    ``loss_kwargs``: the profile's options of the underlying loss (``losses[arm.loss]``,
    e.g. ``vision.losses.weince`` for ``weince_lam0p5``), then the arm's own options, then
    the profile's options under the arm's name (``losses[name]``, e.g.
    ``vision.losses.hcl``), later ones winning. ``tau``: the arm's own, else
    the given default.
    """
    arm = _check_arm(name)
    losses = losses or {}
    kwargs: dict[str, Any] = {}
    if name != arm.loss:
        kwargs.update(copy.deepcopy(dict(losses.get(arm.loss) or {})))
    kwargs.update(copy.deepcopy(dict(arm.kwargs)))
    kwargs.update(copy.deepcopy(dict(losses.get(name) or {})))
    return {"loss": arm.loss, "tau": arm.tau if arm.tau is not None else tau,
            "loss_kwargs": kwargs}


def apply_arm(run_cfg: Mapping[str, Any], arm: str,
              losses: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A ``SimCLRConfig`` dict for ablation arm ``arm``: ``run_cfg`` (the profile's run
    config, e.g. from ``weince.pipeline.stages.pretrain_config``) with ``loss``,
    ``loss_kwargs`` and, for temperature arms, ``tau`` replaced (:func:`arm_settings`).
    Names that are not ablation arms raise ``ValueError`` listing the valid ones."""
    out = copy.deepcopy(dict(run_cfg))
    s = arm_settings(arm, losses, out.get("tau"))
    out["loss"] = s["loss"]
    out["loss_kwargs"] = s["loss_kwargs"]
    if s["tau"] is not None:
        out["tau"] = float(s["tau"])
    return out


# ---------------------------------------------------------------- grid points
# grid keys in the order they appear in a point name, with their short tags
GRID_KEYS: dict[str, str] = {"margin": "m", "kappa_rho": "kr", "kappa_aic": "ka"}
_TAG_TO_KEY = {v: k for k, v in GRID_KEYS.items()}


def _fmt(v: float) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else repr(v)


def point_name(point: dict[str, float]) -> str:
    """``{"margin": 2, "kappa_rho": 10, "kappa_aic": 0.5}`` -> ``"m2_kr10_ka0.5"``."""
    unknown = set(point) - set(GRID_KEYS)
    if unknown:
        raise ValueError(f"unknown grid key(s) {sorted(unknown)}; valid: {list(GRID_KEYS)}")
    return "_".join(f"{GRID_KEYS[k]}{_fmt(point[k])}" for k in GRID_KEYS if k in point)


def parse_point(name: str) -> dict[str, float]:
    """Inverse of :func:`point_name`."""
    out: dict[str, float] = {}
    for part in name.split("_"):
        m = re.fullmatch(r"(kr|ka|m)(-?[0-9.]+(?:e-?[0-9]+)?)", part)
        if not m:
            raise ValueError(f"bad grid point {name!r}: part {part!r} is not <tag><number> "
                             f"with tag in {list(_TAG_TO_KEY)}")
        out[_TAG_TO_KEY[m.group(1)]] = float(m.group(2))
    return out


def split_arm(arm: str) -> tuple[str, dict[str, float] | None]:
    """``"weince@m2_kr10_ka1"`` -> ``("weince", {...})``; ``"weince"`` -> ``("weince", None)``."""
    if "@" in arm:
        base, point = arm.split("@", 1)
        return base, parse_point(point)
    return arm, None


def grid_points(grid: dict[str, Any] | None) -> list[str]:
    """All point names of a grid config ``{"margin": [...], "kappa_rho": [...], ...}``
    (the product of the lists present), in a fixed order; ``[]`` without a grid."""
    if not grid:
        return []
    keys = [k for k in GRID_KEYS if grid.get(k)]
    if not keys:
        return []
    return [point_name(dict(zip(keys, vals)))
            for vals in itertools.product(*(grid[k] for k in keys))]


def resolve_arm(arm: str, losses: Mapping[str, Any] | None = None,
                tau: float | None = None) -> dict[str, Any]:
    """``{"loss", "tau", "loss_kwargs"}`` of any arm name of the ``{arm}`` slot.

    A name of :data:`ARMS` resolves through :func:`arm_settings`; any other name is a
    registered loss with the options ``losses[name]``. A grid point (``weince@m2_kr10``)
    overrides the resolved loss options with its values. ``tau``: the arm's own
    temperature, else the given default.
    """
    base, point = split_arm(arm)
    if base in ARMS:
        out = arm_settings(base, losses, tau)
    else:
        out = {"loss": base, "tau": tau,
               "loss_kwargs": copy.deepcopy(dict((losses or {}).get(base) or {}))}
    if point:
        out["loss_kwargs"].update(point)
    return out
