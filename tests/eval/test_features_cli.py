"""Feature extraction from an encoder file, and the `weince features` / `weince eval` CLIs."""
from __future__ import annotations

import json

import pytest
import torch

from weince.cli import main as weince_main
from weince.data.augment import EvalTransform
from weince.data.vision import load_vision
from weince.eval.features import extract_features
from weince.models import build_simclr_model, save_encoder


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    torch.manual_seed(0)
    model = build_simclr_model("smallcnn", 16, 1)
    path = tmp_path_factory.mktemp("enc") / "encoder.pt"
    cfg = {"backbone": "smallcnn", "image_size": 16, "channels": 1, "dataset": "digits",
           "seed": 5, "loss": "infonce", "norm_mean": [0.3055], "norm_std": [0.3187]}
    save_encoder(path, model, cfg)
    return path, model.eval()


def test_features_match_direct_forward(encoder, tmp_path):
    path, model = encoder
    out = tmp_path / "features.pt"
    assert weince_main(["features", "--encoder", str(path), "--out", str(out),
                        "--device", "cpu"]) == 0
    feats = torch.load(out, weights_only=True)
    test = load_vision("digits", split="test")
    assert torch.equal(feats["test"]["labels"], test.labels)
    assert feats["train"]["backbone"].shape == (1438, 128)
    with torch.no_grad():
        h, z = model(EvalTransform([0.3055], [0.3187])(test.images[:10]))
    assert torch.allclose(feats["test"]["backbone"][:10], h, atol=1e-5)
    assert torch.allclose(feats["test"]["head"][:10], z, atol=1e-5)
    assert feats["meta"]["dataset"] == "digits" and feats["meta"]["provenance"]["seed"] == 5


def test_eval_clis_write_summaries(encoder, tmp_path):
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(3, 4, generator=g) * 3
    ytr, yte = torch.arange(90) % 3, torch.arange(30) % 3
    feats = {"train": {"backbone": centers[ytr] + torch.randn(90, 4, generator=g),
                       "head": torch.randn(90, 2, generator=g), "labels": ytr},
             "test": {"backbone": centers[yte] + torch.randn(30, 4, generator=g),
                      "head": torch.randn(30, 2, generator=g), "labels": yte},
             "meta": {"dataset": "toy", "encoder_cfg": {"seed": 7, "loss": "weince"}}}
    fpath = tmp_path / "f.pt"
    torch.save(feats, fpath)
    lin = tmp_path / "linear.json"
    assert weince_main(["eval", "linear", "--features", str(fpath), "--out", str(lin),
                        "--set", "epochs=3", "--set", "seeds=[0,1]", "--set", "lr=1e-2"]) == 0
    res = json.loads(lin.read_text())
    assert res["test_acc"]["n"] == 2 and set(res["test_acc"]) == {"mean", "std", "n", "values"}
    assert res["provenance"]["seed"] == 7 and res["meta"]["loss"] == "weince"
    knn = tmp_path / "knn.json"
    assert weince_main(["eval", "knn", "--features", str(fpath), "--out", str(knn),
                        "--set", "k=5", "--set", "recall_ks=[1,2]",
                        "--set", "split_seeds=[0]"]) == 0
    res = json.loads(knn.read_text())
    assert {"acc@5", "recall@1", "recall@2", "val", "per_seed"} <= set(res)
    with pytest.raises(ValueError, match="'kk'"):
        weince_main(["eval", "knn", "--features", str(fpath), "--out", str(knn), "--set", "kk=5"])


def test_features_missing_encoder(tmp_path):
    with pytest.raises(FileNotFoundError, match="weince pretrain"):
        extract_features(tmp_path / "nope.pt", None)
