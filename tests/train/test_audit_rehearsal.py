"""The training audit on the paper's code path at the rehearsal's sizes: a CIFAR-100
ResNet-18 run (synthetic files in the real format, the paper profile's protocol with the
rehearsal overlay's CPU sizes) replays its audit segments bit for bit, and a float64 replay
attributes a segment to the run's loss. Slow tier (a ResNet-18 on a CPU)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import yaml

from weince.bundle.retrain import attributed, distances, replay_segment
from weince.data.synthetic_formats import write_synthetic_data
from weince.pipeline.profile import Profile
from weince.pipeline.stages import pretrain_config
from weince.train.audit import load_state, state_digest
from weince.train.simclr import pretrain
from weince.utils.config import deep_merge, to_dict

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _rehearsal(data: Path) -> Profile:
    cfg: dict = {}
    for name in ("config.yaml", "paper.yaml", "rehearsal.yaml"):
        cfg = deep_merge(cfg, yaml.safe_load((REPO / "config" / name).read_text()))
    cfg["rehearsal"]["gpu"] = False       # the CPU sizes of the overlay
    cfg["rehearsal"]["paper_config"] = str(REPO / "config" / "paper.yaml")
    cfg["data_root"] = str(data)
    return Profile.of(cfg)


def _config(prof: Profile, arm: str) -> dict:
    cfg = pretrain_config(prof, "cifar100", "resnet18", arm, 7)
    return to_dict(dataclasses.replace(cfg, device="cpu", threads=1, progress=False,
                                       data_root=prof.data_root, tensorboard=False))


def test_a_rehearsal_cifar100_resnet18_segment_replays(tmp_path):
    prof = _rehearsal(write_synthetic_data(tmp_path / "data", seed=0))
    cfg = _config(prof, "weince")
    assert cfg["backbone"] == "resnet18" and cfg["forward"] == "per_view"   # the paper's path
    out = tmp_path / "run"
    summary = pretrain(cfg, out)
    segs = summary["audit"]["segments"]
    assert segs and all(s["end"] - s["start"] == 2 for s in segs)
    for seg in segs:
        start = load_state(out / seg["start_file"])
        assert state_digest(replay_segment("vision", cfg, start, seg["end"])) == \
            seg["end_sha256"]
    seg = segs[-1]
    start, end = load_state(out / seg["start_file"]), load_state(out / seg["end_file"])
    replayed = {arm: replay_segment("vision", _config(prof, arm), start, seg["end"],
                                    dtype=torch.float64) for arm in ("weince", "infonce")}
    d = distances(replayed, start, end)
    assert attributed(d, "weince") and not attributed(d, "infonce"), d
