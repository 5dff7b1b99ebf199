"""JSON-lines epoch log and per-epoch running means."""
from __future__ import annotations

import math

import pytest
import torch

from weince.train.trainlog import JsonlLogger, StatsMeter, read_jsonl


def test_append_reset_read(tmp_path):
    path = tmp_path / "log.jsonl"
    log = JsonlLogger(path)
    log.append({"epoch": 1, "loss": torch.tensor(0.5), "bad": float("nan")})
    log.append({"epoch": 2, "loss": 0.25})
    recs = read_jsonl(path)
    assert recs == [{"epoch": 1, "loss": 0.5, "bad": None}, {"epoch": 2, "loss": 0.25}]
    # resume: rewrite from the checkpoint's records (epoch 2 was never checkpointed)
    log2 = JsonlLogger(path, records=recs[:1])
    assert read_jsonl(path) == recs[:1] and log2.records == recs[:1]


def test_read_missing(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "x.jsonl")


def test_stats_meter_skips_missing_and_nonfinite():
    m = StatsMeter()
    m.update({"loss": 1.0, "beta_t": 4.0})
    m.update(loss=torch.tensor(3.0), beta_t=float("nan"), vec=torch.ones(3))
    assert m.means() == {"loss": 2.0, "beta_t": 4.0}
    assert m.mean("missing") is None
    assert math.isclose(m.mean("loss"), 2.0)
