"""`weince synthetic-data`: every file in the layout the real loaders read, marked synthetic,
and a tiny BERT that loads through the same transformers path as bert-base-uncased."""

from __future__ import annotations

import json

import pytest

from weince.cli import main
from weince.data.synthetic_formats import (BERT_NAME, MARKER, SIZES, synthetic_marker,
                                           write_synthetic_data)
from weince.data.text import load_sts, load_train_sentences
from weince.data.vision import DATASETS, load_vision
from weince.models.text import load_text_encoder, model_identity


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_synthetic_data(tmp_path_factory.mktemp("syn") / "data")


@pytest.mark.parametrize("name,split", [("cifar10", "train"), ("cifar10", "test"),
                                        ("cifar100", "train"), ("cifar100", "test"),
                                        ("stl10", "train"), ("stl10", "test"),
                                        ("stl10", "unlabeled"), ("imagenet32", "train"),
                                        ("imagenet32", "test"), ("tinyimagenet", "train"),
                                        ("tinyimagenet", "test")])
def test_every_split_loads_through_the_real_loader(root, name, split):
    d = load_vision(name, root, split)
    assert len(d) == SIZES[name][split]
    assert d.image_size == DATASETS[name].image_size and d.channels == 3
    if split == "unlabeled":
        assert (d.labels == -1).all()
    else:
        assert 0 <= int(d.labels.min()) and int(d.labels.max()) < DATASETS[name].num_classes
        assert d.labels.unique().numel() == SIZES[name]["classes"]


def test_text_files_load_through_the_real_readers(root):
    assert len(load_train_sentences(str(root / "wiki1m_for_simcse.txt"))) > 1000
    for split in ("train", "dev", "test"):
        pairs = load_sts(str(root / "stsbenchmark"), split)
        assert len(pairs) > 50 and 0 <= pairs.scores.min() and pairs.scores.max() <= 5


def test_tiny_bert_loads_like_a_hub_model_and_tokenizes_words(root):
    folder = root / "models" / BERT_NAME
    enc, tok = load_text_encoder(str(folder))
    assert type(enc).__name__ == "BertModel" and enc.config.hidden_size == 64
    ids = tok("a man plays a guitar")["input_ids"]
    assert tok.unk_token_id not in ids[1:-1]
    ident = model_identity(enc, BERT_NAME, str(folder), "local copy")
    assert ident["synthetic"] and not ident["named_model"]


def test_every_folder_is_marked_and_found_from_below(root):
    for sub in ("cifar-10-batches-py", "stl10_binary", "imagenet32", "tiny-imagenet-200",
                "stsbenchmark", f"models/{BERT_NAME}"):
        assert (root / sub / MARKER).is_file()
    assert synthetic_marker(root / "cifar-100-python" / "train")["synthetic"]
    assert json.loads((root / MARKER).read_text())["complete"]


def test_refuses_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "cifar-10-batches-py").mkdir()
    with pytest.raises(FileExistsError, match="no real data is overwritten"):
        write_synthetic_data(tmp_path)
    assert synthetic_marker(tmp_path) is None


def test_cli_is_registered_and_idempotent(root, capsys):
    before = (root / "wiki1m_for_simcse.txt").stat().st_mtime_ns
    assert main(["synthetic-data", "--root", str(root)]) == 0
    assert (root / "wiki1m_for_simcse.txt").stat().st_mtime_ns == before  # complete: kept
    assert "config/rehearsal.yaml" in capsys.readouterr().out


def test_sts_pairs_read_from_synthetic_files_say_so(root):
    assert load_sts(str(root / "stsbenchmark"), "dev").synthetic
