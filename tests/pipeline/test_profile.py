"""The resolved profile: built once from a workflow config, it gives the same settings,
files and paths as the layout functions it is made from, for every profile file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from weince.pipeline import layout
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import protocol_options
from weince.utils.provenance import config_hash

REPO = Path(__file__).resolve().parents[2]
PROFILES = ["config.yaml", "smoke.yaml", "paper.yaml"]


def _cfg(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / name).read_text())


@pytest.mark.parametrize("name", PROFILES)
def test_profile_matches_the_layout_it_is_built_from(name):
    cfg = _cfg(name)
    prof = Profile.of(cfg)
    assert prof.config is cfg and prof.name == cfg["profile"]
    assert prof.report_dir == layout.report_dir(cfg)
    assert prof.vision_pairs == layout.vision_pairs(cfg)
    assert prof.norms_vision == layout.norms_vision_runs(cfg)
    assert prof.norms_text == layout.norms_text_runs(cfg)
    assert prof.options == protocol_options(cfg)
    assert prof.config_hash == config_hash(cfg)
    assert prof.summary_logs() == layout.summary_logs(cfg)
    files = layout.files_for(cfg)
    for stage in layout.STAGES:
        settings, arms = prof.settings(stage)
        assert (settings, arms) == layout.settings_for(cfg, stage)
        for s in settings:
            for arm in arms:
                for name in ("linear.json", "pot.json", "sts.json", "timing.json", "norms.json"):
                    assert prof.files(s, arm, name) == files(s, arm, name)


def test_resolving_a_profile_leaves_the_config_unchanged():
    cfg = _cfg("smoke.yaml")
    before = yaml.safe_dump(cfg)
    Profile.of(cfg)
    assert yaml.safe_dump(cfg) == before


def test_bad_profile_input_names_the_problem():
    with pytest.raises(ValueError, match="no 'profile' key"):
        Profile.of({"vision": {}})
    with pytest.raises(ValueError, match="unknown stage 'audio'.*vision"):
        Profile.of(_cfg("smoke.yaml")).settings("audio")
