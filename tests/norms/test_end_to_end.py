"""End to end on tiny encoders: `weince norms` (vision and text), then the report."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from weince.cli import main as weince_main
from weince.data.augment import EvalTransform, build_augment
from weince.data.vision import load_vision
from weince.models import build_simclr_model, save_encoder
from weince.models.text import minilm_path
from weince.norms.rules import NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED

VOCAB = {REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_vision(tmp_path_factory):
    """A random smallcnn encoder on digits (its file as `weince pretrain` writes it) and
    its features.pt."""
    d = tmp_path_factory.mktemp("vision")
    torch.manual_seed(0)
    model = build_simclr_model("smallcnn", 16, 1, out_dim=16)
    cfg = {"backbone": "smallcnn", "image_size": 16, "channels": 1, "dataset": "digits",
           "loss": "weince", "tau": 0.5, "loss_kwargs": {"margin": 0.0}, "batch_size": 256,
           "optimizer": "adam", "lr": 3e-4, "weight_decay": 1e-6, "aug_kwargs": {}}
    save_encoder(d / "encoder.pt", model, cfg)
    model.eval()
    aug = build_augment("digits")
    tf = EvalTransform(aug.mean, aug.std)
    feats = {}
    with torch.no_grad():
        for split in ("train", "test"):
            data = load_vision("digits", split=split)
            h, z = model(tf(data.images))
            feats[split] = {"backbone": h, "head": z, "labels": data.labels}
    torch.save(feats, d / "features.pt")
    return d


SMALL = ["n_probes=64", "n_bank=64", "resamples=3", "batch_size=32", "probes_per_batch=8",
         "n_boot=100", "alphas=[0, 0.1, 1.0]"]


def _sets(items):
    out = []
    for it in items:
        out += ["--set", it]
    return out


@pytest.mark.slow
def test_vision_cli_end_to_end(tiny_vision, tmp_path):
    out = tmp_path / "run"
    rc = weince_main(["norms", "--encoder", str(tiny_vision / "encoder.pt"), "--features",
                      str(tiny_vision / "features.pt"), "--out", str(out), *_sets(SMALL),
                      "--meta", "arm=weince", "--meta", "seed=7"])
    assert rc == 0
    res = json.loads((out / "norms.json").read_text())
    assert res["kind"] == "vision" and res["arm"] == "weince" and res["seed"] == 7
    assert res["loss"] == "weince" and res["settings"]["loss_kwargs"] == {"margin": 0.0}
    assert res["settings"]["batch_size"] == 32 and res["n_probes"] == 64
    prem = res["n1"]["premise"]
    assert prem["eta"] == 3e-4 and prem["lambda_rad"] == 1e-6 and prem["decoupled"] is False
    assert "L2-coupled" in prem["note"]
    assert set(res["verdicts"].values()) <= VOCAB
    assert res["checks"]["max_abs_drift_pre"] < 1e-5
    pvm = res["n1"]["predicted_vs_measured"]["pearson"]
    assert pvm["n"] == 64 and pvm["ci"][0] <= pvm["r"] <= pvm["ci"][1]
    assert "provenance" in res
    rows = res["n3"]["rows"]
    assert {(r["norm_feature"], r["subset"]) for r in rows} >= {("head", "frequent"),
                                                                ("backbone", "low_quality")}
    assert sum(r["primary"] for r in rows) == 2
    probes = np.load(out / "norms_probes.npz")
    assert probes["norm_z"].shape == (64,) and np.all(probes["heat"] >= 0)
    assert np.all(np.isfinite(probes["r_eq"]))
    # the other loss of the registry, same encoder: loss kwargs of the training loss dropped
    out2 = tmp_path / "run_infonce"
    assert weince_main(["norms", "--encoder", str(tiny_vision / "encoder.pt"), "--loss",
                        "infonce", "--out", str(out2), *_sets(SMALL)]) == 0
    res2 = json.loads((out2 / "norms.json").read_text())
    assert res2["loss"] == "infonce" and res2["settings"]["loss_kwargs"] == {}
    assert res2["n3"]["verdict"] == NOT_TESTABLE and res2["n3"]["rows"] == []
    # report over both
    md = tmp_path / "rep" / "norms.md"
    assert weince_main(["norms", "report", str(out / "norms.json"), str(out2 / "norms.json"),
                        "--out", str(md), "--profile", "test"]) == 0
    text = md.read_text()
    for head in ("## Verdicts", "## N1", "## N2", "## N3", "L2-coupled"):
        assert head in text
    assert (tmp_path / "rep" / "norms_figures" / "norms_n1.png").stat().st_size > 1000
    summary = json.loads((tmp_path / "rep" / "norms_summary.json").read_text())
    assert set(summary["claims"]) == {"N1", "N2", "N3"}
    assert len(summary["claims"]["N2"]["units"]) == 2


@pytest.fixture(scope="module")
def tiny_text_model(tmp_path_factory):
    """A 2-layer, 32-wide random BERT with MiniLM's tokenizer, saved as a model folder."""
    d = tmp_path_factory.mktemp("text") / "model"
    tok = AutoTokenizer.from_pretrained(str(minilm_path()))
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.mark.slow
def test_text_cli_end_to_end(tiny_text_model, tmp_path):
    out = tmp_path / "text"
    rc = weince_main(["norms", "--text-model", str(tiny_text_model), "--out", str(out),
                      *_sets(["text_probes=40", "text_bank=40", "resamples=3", "batch_size=16",
                              "probes_per_batch=4", "n_boot=100", "sts_pairs=60",
                              "alphas=[0, 0.5]"]),
                      "--meta", "model_label=tiny"])
    assert rc == 0
    res = json.loads((out / "norms.json").read_text())
    assert res["kind"] == "text" and res["loss"] == "infonce"
    assert res["settings"]["tau"] == 0.05 and res["n1"]["premise"]["decoupled"] is True
    assert res["settings"]["settings_from"].startswith("nominal")
    row = res["n3"]["rows"][0]
    assert row["task"] == "sts" and row["n"] == 60 and row["alpha"] in (0.0, 0.5)
    assert set(res["verdicts"].values()) <= VOCAB
    assert res["n_probes"] == 40


def test_cli_refuses_ambiguous_input(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        weince_main(["norms", "--out", str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="weince pretrain"):
        weince_main(["norms", "--encoder", str(tmp_path / "missing.pt"), "--out",
                     str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        weince_main(["norms", "--encoder", "x.pt", "--out", str(tmp_path), "--config",
                     str(REPO / "config" / "nope.yaml")])
