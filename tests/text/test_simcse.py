"""SimCSE training on the shipped MiniLM-L6: every loss trains, resume continues."""

from __future__ import annotations

import json
import math

import pytest
import torch

from weince.cli import main
from weince.data.text import generate_corpus, generate_sts_pairs
from weince.eval.sts import encode
from weince.models.text import load_text_encoder
from weince.train.simcse import SimCSEConfig, train_simcse
from weince.train.trainlog import read_jsonl
from weince.utils.digest import sha256_path

# a few steps of batch 8 on the synthetic data: seconds on one CPU thread
TINY = dict(n_train=40, batch_size=8, max_length=16, n_sts=20, eval_every=2, log_every=1,
            eval_at_start=False, max_steps=2, eval_batch_size=64)
PROBE = ["A man is playing a guitar on the stage.", "The cat is chasing a mouse.",
         "Two children are building a sandcastle on the beach."]


@pytest.fixture(scope="module")
def base_embeddings():
    model, tok = load_text_encoder("minilm")
    return encode(model, tok, PROBE)


def _embed(folder):
    model, tok = load_text_encoder(folder)
    return encode(model, tok, PROBE)


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["infonce", "weince", "weince_recipe"])
def test_few_steps_train_every_loss(tmp_path, loss, base_embeddings):
    res = train_simcse({**TINY, "loss": loss}, tmp_path)
    log = read_jsonl(tmp_path / "train_log.jsonl")
    losses = [r["loss"] for r in log if "loss" in r]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    assert res["steps"] == 2 and res["best_step"] == 2 and res["synthetic"] is True
    assert math.isfinite(res["best_dev_spearman"])
    if loss != "infonce":  # WEINCE statistics reach the log
        assert all(0.0 <= r["lambda_mean"] <= 1.0 for r in log if "loss" in r)
    if loss == "weince_recipe":
        assert "beta_t" in log[0]
    # the best checkpoint is a transformers folder whose embeddings moved
    assert (tmp_path / "model" / "config.json").is_file()
    assert (tmp_path / "model" / "simcse_mlp.pt").is_file()
    assert (_embed(tmp_path / "model") - base_embeddings).abs().max() > 1e-3
    saved = json.loads((tmp_path / "train.json").read_text())
    assert saved["provenance"]["config"]["loss"] == loss and "SYNTHETIC" in saved["note"]
    # the saved model's identity, which its STS job checks before reading it
    assert saved["model_sha256"] == sha256_path(tmp_path / "model")
    assert not (tmp_path / "checkpoint.pt").exists()  # removed after a finished run


class _Interrupt(Exception):
    pass


@pytest.mark.slow
def test_resume_continues_from_checkpoint(tmp_path):
    cfg = {**TINY, "max_steps": 4, "loss": "weince"}
    full = train_simcse(cfg, tmp_path / "full")

    def stop_at_3(step, loss):
        if step == 3:
            raise _Interrupt

    out = tmp_path / "cut"
    with pytest.raises(_Interrupt):
        train_simcse(cfg, out, on_step=stop_at_3)
    assert (out / "checkpoint.pt").is_file() and not (out / "train.json").exists()
    # a different config must not silently reuse the checkpoint
    with pytest.raises(ValueError, match="keys differ: lr"):
        train_simcse({**cfg, "lr": 1e-5}, out)
    seen = []
    res = train_simcse(cfg, out, on_step=lambda s, _loss: seen.append(s))
    assert seen == [3, 4]                       # continued, not restarted
    assert res["resumed_from_step"] == 2 and res["steps"] == 4
    # same trajectory as the uninterrupted run: log and weights
    log_full = read_jsonl(tmp_path / "full" / "train_log.jsonl")
    log_cut = read_jsonl(out / "train_log.jsonl")
    assert [r["step"] for r in log_cut] == [r["step"] for r in log_full]
    for a, b in zip(log_full, log_cut):
        for k in ("loss", "dev_spearman"):
            if k in a:
                assert b[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6)
    torch.testing.assert_close(_embed(out / "model"), _embed(tmp_path / "full" / "model"),
                               atol=1e-5, rtol=1e-5)
    assert res["best_dev_spearman"] == pytest.approx(full["best_dev_spearman"], abs=1e-4)


def test_config_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown config key 'batchsize'"):
        train_simcse({"batchsize": 8}, tmp_path)
    with pytest.raises(ValueError, match="unknown loss"):
        train_simcse({"loss": "nce"}, tmp_path)
    with pytest.raises(ValueError, match="batch_size"):
        train_simcse({"batch_size": 1}, tmp_path)
    with pytest.raises(FileNotFoundError, match="wiki1m"):
        train_simcse({"train_data": str(tmp_path / "wiki1m_for_simcse.txt")}, tmp_path)
    assert SimCSEConfig().tau == 0.05 and SimCSEConfig().lr == 3e-5
    assert SimCSEConfig().batch_size == 64 and SimCSEConfig().max_length == 32


@pytest.mark.slow
def test_simcse_cli(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("n_train: 16\nbatch_size: 8\nmax_length: 16\nn_sts: 20\n")
    assert main(["simcse", "--config", str(cfg), "--out", str(tmp_path / "run"),
                 "--set", "max_steps=1", "--set", "eval_at_start=false"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["steps"] == 1 and printed["synthetic"] is True
    assert (tmp_path / "run" / "model" / "config.json").is_file()


@pytest.mark.slow
def test_real_data_layout_path(tmp_path):
    """The paper path: a wiki1m-style text file and a SentEval STS-B root on disk."""
    wiki = tmp_path / "wiki1m_for_simcse.txt"
    wiki.write_text("\n".join(generate_corpus(20, seed=9)) + "\n")
    root = tmp_path / "stsbenchmark"
    root.mkdir()
    p = generate_sts_pairs(12, seed=9)
    (root / "sts-dev.csv").write_text("".join(
        f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s:.3f}\t{a}\t{b}\n"
        for i, (a, b, s) in enumerate(zip(p.sentences1, p.sentences2, p.scores))))
    res = train_simcse({**TINY, "train_data": str(wiki), "sts_data": str(tmp_path),
                        "max_steps": 1}, tmp_path / "run")
    assert res["synthetic"] is False and "note" not in res
    assert res["n_sentences"] == 20 and res["dev_n"] == 12 and res["steps"] == 1
