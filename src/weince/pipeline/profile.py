"""One profile, resolved once: its runs, settings and options, built from the workflow config.

    from weince.pipeline.profile import Profile
    prof = Profile.of(cfg)                   # cfg: the workflow config of one profile (a dict)
    settings, arms = prof.settings("vision") # what a claim of that stage reads
    paths = prof.files(setting, arm, "linear.json")

Everything here is derived from :mod:`weince.pipeline.layout` (the one enumeration of runs
and paths); a :class:`Profile` only does it once, so that a page builder passes one object
down instead of the raw dict that each callee would re-derive its runs from. ``config`` is
the dict as given, unchanged: it is what provenance hashes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from weince.pipeline import layout
from weince.pipeline.layout import Setting, TextRun, VisionRun
from weince.pipeline.protocol import protocol_options
from weince.pipeline.rehearsal import is_rehearsal
from weince.utils.provenance import config_hash

__all__ = ["Profile"]


@dataclass(frozen=True)
class Profile:
    """A workflow profile's runs, settings and options (see the module docstring)."""

    config: Mapping[str, Any]
    name: str
    results: Path                          # the results root (``results``), above the profile
    report_dir: Path                       # ``{reports}/{profile}``
    claims: Path                           # the claims registry the profile names
    vision_pairs: list[tuple[str, str]]    # (dataset, backbone), every dataset x backbone
    evt_arms: list[str]                    # vision arms with score files and tail/link fits
    norms_vision: list[VisionRun]          # the norms analysis' units (N1-N3)
    norms_text: list[TextRun]
    options: list[str]                     # the options off the official protocol, in words
    config_hash: str
    rehearsal: bool                        # config/rehearsal.yaml is on (``rehearsal.enabled``)
    data_root: str | None                  # ``data_root`` (its data may be synthetic files)
    files: Callable[[Setting, str, str], list[Path]] = field(repr=False)
    _stages: dict[str, tuple[list[Setting], list[str]]] = field(repr=False)

    @classmethod
    def of(cls, cfg: Mapping[str, Any]) -> "Profile":
        """The profile of a workflow config."""
        if "profile" not in cfg:
            raise ValueError("config has no 'profile' key (e.g. profile: default)")
        c = dict(cfg)
        v = c.get("vision") or {}
        return cls(
            config=cfg, name=str(c["profile"]), results=Path(c.get("results", "results")),
            report_dir=layout.report_dir(c), claims=Path(c.get("claims", "config/claims.yaml")),
            vision_pairs=layout.vision_pairs(c),
            evt_arms=list((v.get("evt") or {}).get("arms", [])),
            norms_vision=layout.norms_vision_runs(c), norms_text=layout.norms_text_runs(c),
            options=protocol_options(c), config_hash=config_hash(cfg),
            rehearsal=is_rehearsal(c),
            data_root=None if c.get("data_root") is None else str(c["data_root"]),
            files=layout.files_for(c),
            _stages={s: layout.settings_for(c, s) for s in layout.STAGES})

    def settings(self, stage: str) -> tuple[list[Setting], list[str]]:
        """The settings of ``stage`` the profile runs, and the arms it runs there."""
        if stage not in self._stages:
            raise ValueError(f"unknown stage {stage!r}; valid: {', '.join(layout.STAGES)}")
        return self._stages[stage]

    def block(self, name: str) -> dict[str, Any]:
        """A stage block of the config (``vision``, ``text``, ``timing``, ``norms``...), ``{}``
        when the profile has none."""
        return dict(self.config.get(name) or {})

    def run_dir(self, run: VisionRun | TextRun) -> Path:
        return run.dir(self.results, self.name)

    def summary_logs(self) -> dict[str, dict[str, list[Path]]]:
        """The training logs of the summary's lambda-over-training figures
        (:func:`weince.pipeline.layout.summary_logs`)."""
        return layout.summary_logs(dict(self.config))
