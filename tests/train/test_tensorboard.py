"""TensorBoard event files beside train_log.jsonl (weince.train.trainlog): the log's scalars
under their own names at each record's epoch or step, read back with TensorBoard's own
event reader; a resume rewrites them as it rewrites the log; off, nothing is imported."""

from __future__ import annotations

import pytest

from weince.train.simclr import pretrain
from weince.train.trainlog import EVENTS_GLOB, JsonlLogger, read_jsonl

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator)


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
    ea = EventAccumulator(str(folder))
    ea.Reload()
    return {t: [(s.step, s.value) for s in ea.Scalars(t)] for t in ea.Tags()["scalars"]}


def test_the_records_scalars_are_read_back_by_tensorboard(tmp_path):
    log = JsonlLogger(tmp_path / "train_log.jsonl", tensorboard=True)
    log.append({"epoch": 1, "loss": 2.5, "lambda_mean": 0.25, "note": "x", "flag": True})
    log.append({"epoch": 2, "loss": 2.0, "lambda_mean": 0.5})
    got = _scalars(tmp_path)
    assert got == {"loss": [(1, 2.5), (2, 2.0)], "lambda_mean": [(1, 0.25), (2, 0.5)]}


def test_simcse_records_use_their_step(tmp_path):
    log = JsonlLogger(tmp_path / "train_log.jsonl", tensorboard=True)
    log.append({"step": 0, "dev_spearman": 60.0})
    log.append({"step": 10, "loss": 0.5, "lr": 3e-5})
    log.append({"step": 10, "dev_spearman": 70.0, "best": True})
    got = _scalars(tmp_path)
    assert got["dev_spearman"] == [(0, 60.0), (10, 70.0)]
    assert got["loss"] == [(10, 0.5)] and "best" not in got


def test_a_resume_rewrites_the_events_as_the_log(tmp_path):
    first = JsonlLogger(tmp_path / "train_log.jsonl", tensorboard=True)
    for e in (1, 2, 3):
        first.append({"epoch": e, "loss": float(e)})
    first.tensorboard.close()
    # resumed from a checkpoint that holds epochs 1-2: epoch 3 is trained again
    again = JsonlLogger(tmp_path / "train_log.jsonl", first.records[:2], tensorboard=True)
    again.append({"epoch": 3, "loss": 30.0})
    assert len(list(tmp_path.glob(EVENTS_GLOB))) == 1
    assert _scalars(tmp_path)["loss"] == [(1, 1.0), (2, 2.0), (3, 30.0)]


def test_off_writes_no_events(tmp_path):
    log = JsonlLogger(tmp_path / "train_log.jsonl")
    log.append({"epoch": 1, "loss": 1.0})
    assert log.tensorboard is None and not list(tmp_path.glob(EVENTS_GLOB))


@pytest.mark.slow
def test_pretraining_writes_the_logs_scalars_for_tensorboard(tmp_path):
    pretrain(dict(dataset="digits", max_train_images=64, batch_size=32, epochs=2,
                  loss="weince_recipe", loss_kwargs={"top_m": 20}, seed=3, threads=1,
                  progress=False, tensorboard=True), tmp_path)
    got = _scalars(tmp_path)
    log = read_jsonl(tmp_path / "train_log.jsonl")
    assert got["loss"] == [(r["epoch"], pytest.approx(r["loss"])) for r in log]
    assert {"lambda_mean", "lambda_q10", "lambda_q90", "beta_t", "lr"} <= set(got)
