"""The forecast that learns: the step times a profile's finished runs measured replace the
counted-FLOPs prior for the runs still to come (``weince plan``, ``weince progress``).

    from weince.cost.learned import learned_profile, learned_note
    prof = learned_profile(prof)        # cost.measured += this profile's own step times
    est = estimate(prof, "h100-sxm")    # each setting's source: "measured (...)" or "estimated"

Each finished pretraining or SimCSE run of the profile keeps, in its ``train.json``, the
median wall time per optimiser step on its GPU (``step_timing``; :mod:`weince.cost.forecast`
reads the same files for the rehearsal). Per GPU type (devices.yaml's key of the CUDA
device name), setting (``dataset/backbone``, ``text/<model>``), precision and arm the
median over its runs becomes a ``cost.measured`` entry, which :func:`weince.cost.estimate.
estimate` prefers to its estimate for that GPU, setting and precision (scaled to the
profile's batch). An entry the config itself carries for the same GPU, setting and
precision gives way to the profile's own measurement. CPU runs, and GPUs devices.yaml does
not list, teach nothing.
"""

from __future__ import annotations

from typing import Any

from weince.cost.estimate import Estimate, with_overlay
from weince.cost.forecast import measured_entries, timed_runs
from weince.pipeline.profile import Profile

__all__ = ["learned_entries", "learned_profile", "learned_note"]


def learned_entries(prof: Profile) -> list[dict[str, Any]]:
    """The ``cost.measured`` entries of ``prof``'s own finished runs on a listed GPU."""
    vis, txt = timed_runs(prof)
    return measured_entries(vis + txt, by=f"finished runs of profile {prof.name}")


def learned_profile(prof: Profile) -> Profile:
    """``prof`` with its finished runs' step times in ``cost.measured`` (module docstring);
    ``prof`` itself when none of its runs was timed on a listed GPU."""
    new = learned_entries(prof)
    if not new:
        return prof
    keys = {(e["gpu"], e["setting"], e["precision"]) for e in new}
    old = [dict(e) for e in prof.cost.get("measured") or ()
           if (str(e["gpu"]).lower(), e["setting"], e["precision"]) not in keys]
    return with_overlay(prof, {"cost": {"measured": old + new}})


def learned_note(prof: Profile, est: Estimate) -> str | None:
    """One line for a page: which settings of ``est`` (an estimate of the learned
    profile) take measured step times of ``prof``'s finished runs, which stay estimated;
    None when no run of ``prof`` was timed on a listed GPU."""
    new = learned_entries(prof)
    if not new:
        return None
    mine = {(e["gpu"], e["setting"]) for e in new}
    measured = sorted({k for k, s in est.settings.items()
                       for g in s.per_gpu if (g, k) in mine})
    estimated = sorted(k for k in est.settings if k not in measured)
    return (f"measured step times of {prof.name}'s finished runs ({len(new)} entries) "
            f"replace the estimate for: {', '.join(measured) or 'none of these GPUs'}; "
            f"estimated: {', '.join(estimated) or 'none'}")
