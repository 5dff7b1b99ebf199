"""A diverged run is never accepted as a result: SimCLR stops at the
first non-finite loss naming the epoch and step, keeps the last good checkpoint, and the
stages downstream (features, linear probe, k-NN, score collection) refuse non-finite
weights or features, naming the file."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import weince.losses
from weince.cli import main as weince_main
from weince.models import build_simclr_model, save_encoder
from weince.train.simclr import DivergedError, pretrain
from weince.utils.finite import NonFiniteError

TINY = dict(dataset="digits", max_train_images=64, batch_size=32, epochs=2, loss="infonce",
            seed=3, threads=1, progress=False, device="cpu")


def test_replay_lr_1e30_fails_clearly(tmp_path):
    """The issue's probe: `weince pretrain --set lr=1e30 --set epochs=2` exited 0. It is now
    refused before training, naming the key and its bound, and writes nothing."""
    with pytest.raises(ValueError, match=r"lr must be <= 10, got 1e\+30"):
        weince_main(["pretrain", "--out", str(tmp_path), "--set", "lr=1e30",
                     "--set", "epochs=2", "--set", "device=cpu", "--set", "threads=1"])
    assert not (tmp_path / "encoder.pt").exists()
    assert not (tmp_path / "checkpoint.pt").exists()
    assert not (tmp_path / "train.json").exists()


class _NanAfter(nn.Module):
    """InfoNCE whose loss turns NaN from its ``n``-th call on (1-based), like a run that
    diverges mid-way."""

    def __init__(self, inner, n):
        super().__init__()
        self.inner, self.n, self.calls = inner, n, 0
        self.last_stats = {}

    def forward(self, z1, z2):
        self.calls += 1
        loss = self.inner(z1, z2)
        return loss * float("nan") if self.calls >= self.n else loss


def test_divergence_in_epoch_2_keeps_epoch_1_checkpoint(tmp_path, monkeypatch):
    ref = tmp_path / "ref"
    pretrain(dict(TINY), ref, stop_after=1)  # the good state after epoch 1
    build = weince.losses.modules.build_loss
    monkeypatch.setattr(weince.losses.modules, "build_loss",
                        lambda *a, **k: _NanAfter(build(*a, **k), 4))
    out = tmp_path / "run"
    with pytest.raises(DivergedError, match=r"epoch 2, step 2 of 2.*last good checkpoint.*"
                                            r"epoch 1\) is kept"):
        pretrain(dict(TINY), out)
    assert not (out / "encoder.pt").exists()
    a = torch.load(ref / "checkpoint.pt", weights_only=True)
    b = torch.load(out / "checkpoint.pt", weights_only=True)
    assert b["epoch"] == 1
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    assert [r["epoch"] for r in b["log"]] == [1]


@pytest.fixture
def nan_encoder(tmp_path):
    torch.manual_seed(0)
    model = build_simclr_model("smallcnn", 16, 1)
    with torch.no_grad():
        next(model.parameters())[0].fill_(float("nan"))
    path = tmp_path / "encoder.pt"
    save_encoder(path, model, {"backbone": "smallcnn", "image_size": 16, "channels": 1,
                               "dataset": "digits", "seed": 0, "loss": "infonce"})
    return path


def test_features_refuse_a_diverged_encoder(nan_encoder, tmp_path):
    with pytest.raises(NonFiniteError, match=r"encoder\.pt \(encoder weights\): \d+ of \d+ "
                                             r"values are NaN.*pretrain rule"):
        weince_main(["features", "--encoder", str(nan_encoder), "--out",
                     str(tmp_path / "f.pt"), "--device", "cpu"])
    assert not (tmp_path / "f.pt").exists()


def test_score_collection_refuses_a_diverged_encoder(nan_encoder, tmp_path):
    with pytest.raises(NonFiniteError, match=r"encoder\.pt"):
        weince_main(["collect-scores", "--encoder", str(nan_encoder), "--out",
                     str(tmp_path / "s.npz"), "--device", "cpu", "--n-batches", "1",
                     "--link-batches", "0", "--batch-size", "16"])
    assert not (tmp_path / "s.npz").exists()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("command", ["linear", "knn"])
def test_probe_and_knn_refuse_non_finite_features(tmp_path, command, bad):
    g = torch.Generator().manual_seed(0)
    y = torch.arange(30) % 3
    feats = {s: {"backbone": torch.randn(30, 4, generator=g), "head": torch.randn(30, 2),
                 "labels": y} for s in ("train", "test")}
    feats["test"]["backbone"][5, 1] = bad
    path = tmp_path / "features.pt"
    torch.save(feats, path)
    with pytest.raises(NonFiniteError, match=r"features\.pt: 1 of \d+ values.*'test/backbone'"):
        weince_main(["eval", command, "--features", str(path), "--out",
                     str(tmp_path / "r.json")])
    assert not (tmp_path / "r.json").exists()
