"""The training audit (weince.train.audit): digests committed as training goes, states kept
at the audit points, and segments replayed from them bit for bit or judged by attribution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from weince.bundle.retrain import attributed, distances, replay_segment
from weince.train.audit import (Auditor, audit_hash, audit_points, load_state, state_digest,
                                state_file, weights_digest)
from weince.train.simclr import pretrain

CFG = dict(dataset="digits", loss="weince", epochs=2, batch_size=64, max_train_images=256,
           device="cpu", threads=1, proj_dim=16, lr=1e-3,   # 4 steps per epoch, 8 in all
           keep_states="audit")


class FixedPoints(Auditor):
    """An auditor whose segments start where the test says (step 0, an epoch's end,
    mid-epoch), instead of where the config hash puts them."""

    def __init__(self, out, starts, keep="audit"):
        super().__init__(out, keep)
        self.fixed = starts

    def begin(self, cfg, total_steps, steps_per_epoch):
        super().begin(cfg, total_steps, steps_per_epoch)
        self.starts = list(self.fixed)


def _encoder(run: Path) -> dict:
    """The encoder's weights (its file also records the config, keep_states included)."""
    return torch.load(run / "encoder.pt", weights_only=True)["state_dict"]


def _same(a: dict, b: dict) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if torch.is_tensor(a):
        return torch.equal(a, b)
    return a == b


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One run with segments from step 0, from an epoch's end (4) and from mid-epoch (5)."""
    out = tmp_path_factory.mktemp("audit") / "run"
    summary = pretrain(CFG, out, audit=FixedPoints(out, [0, 4, 5]))
    return out, summary


def test_points_follow_from_the_config_hash_and_fit_the_run():
    h = audit_hash({**CFG, "loss": "weince"})
    starts, span = audit_points(h, 100)
    assert (starts, span) == audit_points(h, 100)          # anyone recomputes them
    assert len(starts) == 2 and all(0 <= s <= 100 - span for s in starts)
    others = {tuple(audit_points(audit_hash({**CFG, "seed": s}), 100)[0]) for s in range(8)}
    assert len(others) > 1                                   # the seed follows the config
    assert audit_hash({**CFG, "threads": 7, "progress": True}) == audit_hash(CFG)
    assert audit_points(h, 1) == ([0], 1) and audit_points(h, 0) == ([], 0)


def test_the_audit_does_not_change_the_training(trained, tmp_path):
    out, _ = trained
    plain = pretrain({**CFG, "keep_states": "none"}, tmp_path / "plain")
    assert _same(_encoder(out), _encoder(tmp_path / "plain"))
    assert not (tmp_path / "plain" / "audit").exists()
    assert plain["audit"]["segments"] and all(s["start_file"] is None
                                              for s in plain["audit"]["segments"])


def test_epoch_digests_are_the_weights_of_the_kept_states(tmp_path):
    out = tmp_path / "run"
    pretrain({**CFG, "keep_states": "epochs"}, out)
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2]
    for rec, step in zip(log, (4, 8)):
        state = load_state(state_file(out, step))
        assert rec["weights_sha256"] == weights_digest(state["model"])
    assert log[0]["weights_sha256"] != log[1]["weights_sha256"]


def test_every_segment_replays_bit_for_bit(trained):
    out, summary = trained
    segs = summary["audit"]["segments"]
    assert [(s["start"], s["end"]) for s in segs] == [(0, 2), (4, 6), (5, 7)]
    for seg in segs:
        start = load_state(out / seg["start_file"])
        assert state_digest(start) == seg["start_sha256"]
        assert state_digest(load_state(out / seg["end_file"])) == seg["end_sha256"]
        end = replay_segment("vision", CFG, start, seg["end"])
        assert state_digest(end) == seg["end_sha256"], seg


def test_another_loss_does_not_reach_the_end_and_attribution_names_the_loss(trained):
    out, summary = trained
    seg = summary["audit"]["segments"][2]
    start, end = load_state(out / seg["start_file"]), load_state(out / seg["end_file"])
    arms = {"weince": CFG, "infonce": {**CFG, "loss": "infonce"},
            "weince_recipe": {**CFG, "loss": "weince_recipe"}}
    for dtype in (torch.float32, torch.float64):
        replayed = {a: replay_segment("vision", c, start, seg["end"], dtype=dtype)
                    for a, c in arms.items()}
        assert state_digest(replayed["infonce"]) != seg["end_sha256"]
        d = distances(replayed, start, end)
        assert attributed(d, "weince"), d
        assert not attributed(d, "infonce") and not attributed(d, "weince_recipe"), d
    # an end state trained with InfoNCE is attributed to InfoNCE, not to the claimed WEINCE
    forged = replayed["infonce"]
    d = distances({a: replay_segment("vision", c, start, seg["end"]) for a, c in arms.items()},
                  start, forged)
    assert not attributed(d, "weince") and attributed(d, "infonce"), d


def test_a_resumed_run_commits_the_same_audit(trained, tmp_path):
    out, summary = trained
    again = tmp_path / "again"
    pretrain(CFG, again, stop_after=1, audit=FixedPoints(again, [0, 4, 5]))
    resumed = pretrain(CFG, again, audit=FixedPoints(again, [0, 4, 5]))
    assert resumed["audit"]["states_sha256"] == summary["audit"]["states_sha256"]
    assert _same(_encoder(out), _encoder(again))


def test_keep_states_is_checked():
    with pytest.raises(ValueError, match="keep_states must be one of none, audit, epochs"):
        Auditor(Path("."), "all")
