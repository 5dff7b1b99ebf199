"""The pieces of the training skeleton (weince.train.loop) on their own; the loops that use
them are tested end to end in test_simclr.py, test_preempt.py, ../text/test_simcse.py and
../test_divergence.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from weince.train.loop import (DivergedError, EpochStats, check_same_config, diverged,
                               progress_enabled)


def test_config_check_names_each_differing_key_with_both_values():
    with pytest.raises(ValueError, match=r"keys differ: lr \(0\.1 -> 0\.2\), tau \(0\.5 -> 1\.0\)"
                                         r".*delete checkpoint\.pt"):
        check_same_config({"lr": 0.1, "tau": 0.5, "seed": 1}, {"lr": 0.2, "tau": 1.0, "seed": 1},
                          Path("run/checkpoint.pt"))


def test_config_check_ignores_free_keys_and_fills_keys_added_since():
    check_same_config({"lr": 0.1, "threads": 1}, {"lr": 0.1, "threads": 8}, Path("c.pt"),
                      free={"threads"})
    # a checkpoint from before ``dropout`` existed ran with the model's dropout (None)
    check_same_config({"lr": 0.1}, {"lr": 0.1, "dropout": None}, Path("c.pt"),
                      defaults={"dropout": None})
    with pytest.raises(ValueError, match=r"dropout \(None -> 0\.0\)"):
        check_same_config({"lr": 0.1}, {"lr": 0.1, "dropout": 0.0}, Path("c.pt"),
                          defaults={"dropout": None})


def test_epoch_stats_remember_the_first_non_finite_step_and_survive_a_checkpoint():
    stats = EpochStats()
    for x in (1.0, 2.0, float("nan"), 4.0, float("inf")):
        stats.update({"loss": torch.tensor(x), "lambda_mean": 0.5})
    assert stats.bad_step() == 2
    assert stats.counts == {"loss": 5, "lambda_mean": 5}
    again = EpochStats()
    again.load_state(stats.state(), "cpu")
    assert again.bad_step() == 2 and again.means()["lambda_mean"] == 0.5
    fresh = EpochStats()
    fresh.update({"loss": 1.0})
    assert fresh.bad_step() == -1 and EpochStats().bad_step() == -1


def test_divergence_error_says_where_what_was_kept_and_the_fix():
    err = diverged("SimCLR", "non-finite loss at epoch 2, step 3 of 4", "lr 1", "no checkpoint "
                   "was written", "Lower lr.")
    assert isinstance(err, DivergedError) and isinstance(err, RuntimeError)
    assert str(err) == ("SimCLR training diverged: non-finite loss at epoch 2, step 3 of 4 "
                        "(lr 1); no checkpoint was written. Lower lr.")


def test_progress_bar_switch(monkeypatch):
    assert progress_enabled(True) and not progress_enabled(False)
    monkeypatch.setenv("WEINCE_PROGRESS", "1")
    assert progress_enabled()
    monkeypatch.setenv("WEINCE_PROGRESS", "0")
    monkeypatch.setattr("sys.stderr.isatty", lambda: False)
    assert not progress_enabled()
