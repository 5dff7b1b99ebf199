"""Synthetic files in the real on-disk formats of every paper data set and model.

    from weince.data.synthetic_formats import write_synthetic_data
    write_synthetic_data("synthetic_data")    # then --config data_root=synthetic_data

For a machine without the paper's data (a laptop, a CI runner), :func:`write_synthetic_data`
writes a few hundred images per split in each layout the loaders of
:mod:`weince.data.vision` read, the two text files of :mod:`weince.data.text.real`, and a
tiny randomly initialised BERT in the Hugging Face layout:

====================================  =====================================================
``cifar-10-batches-py/``              ``data_batch_1..5``, ``test_batch``, ``batches.meta``
``cifar-100-python/``                 ``train``, ``test``, ``meta`` (fine and coarse labels)
``stl10_binary/``                     ``{train,test,unlabeled}_X.bin``, ``{train,test}_y.bin``
``imagenet32/``                       ``train_data_batch_1..10``, ``val_data`` (1-based labels)
``tiny-imagenet-200/``                ``wnids.txt`` (200 wnids), ``train/<wnid>/images/*.JPEG``,
                                      ``val/images/*.JPEG``, ``val/val_annotations.txt``
``wiki1m_for_simcse.txt``             one sentence a line
``stsbenchmark/sts-{train,dev,test}.csv``  SentEval layout (tab-separated, no header)
``models/bert-base-uncased/``         ``config.json``, ``model.safetensors``, ``vocab.txt``,
                                      tokenizer files: a 2-layer, 64-wide random BERT
====================================  =====================================================

Images are a class colour plus noise (so a probe has something to find); sentences come
from :mod:`weince.data.text.synthetic`. Every folder holds :data:`MARKER`
(``WEINCE_SYNTHETIC.json``), and the root holds one too: :func:`synthetic_marker` finds it
from any file below, so every result and report made from these files can say so. Nothing
here is a result about the real data sets.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from weince.data.marker import MARKER, synthetic_marker
from weince.data.text.synthetic import generate_corpus, generate_sts_pairs

__all__ = ["MARKER", "write_synthetic_data", "synthetic_marker", "SIZES"]

_NOTE = ("synthetic files written by `weince synthetic-data` in the real on-disk format; "
         "numbers computed from them mean nothing about the paper's data")

# images per split (train / test, STL-10 also unlabeled) and how many classes carry them
SIZES: dict[str, dict[str, int]] = {
    "cifar10": {"train": 300, "test": 100, "classes": 10},
    "cifar100": {"train": 300, "test": 100, "classes": 20},
    "stl10": {"train": 200, "test": 100, "unlabeled": 300, "classes": 10},
    "imagenet32": {"train": 300, "test": 100, "classes": 20},
    "tinyimagenet": {"train": 300, "test": 100, "classes": 20},
}
N_SENTENCES = 2000
N_STS = {"train": 200, "dev": 100, "test": 100}
BERT_NAME = "bert-base-uncased"


def _mark(folder: Path, what: str, **extra: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text(json.dumps({"synthetic": True, "what": what, "note": _NOTE,
                                             **extra}, indent=2) + "\n")


def _labels(rng: np.random.Generator, n: int, classes: list[int]) -> np.ndarray:
    """``n`` labels cycling over ``classes`` (each class equally often), shuffled."""
    return rng.permutation(np.resize(np.asarray(classes), n))


def _images(rng: np.random.Generator, labels: np.ndarray, size: int) -> np.ndarray:
    """uint8 ``(N, 3, size, size)``: a per-class colour plus uniform noise."""
    palette = np.random.default_rng(1234).integers(30, 226, size=(int(labels.max()) + 1, 3))
    base = palette[labels][:, :, None, None].astype(np.int16)
    noise = rng.integers(-30, 31, size=(len(labels), 3, size, size), dtype=np.int16)
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def _dump(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def _spread(n_total: int, k: int) -> list[int]:
    """``k`` class indices spread over ``0 .. n_total - 1`` (both ends included)."""
    return sorted({int(round(i * (n_total - 1) / max(1, k - 1))) for i in range(k)})


def _write_cifar(root: Path, rng: np.random.Generator) -> None:
    for name in ("cifar10", "cifar100"):
        s = SIZES[name]
        n_classes = 10 if name == "cifar10" else 100
        classes = _spread(n_classes, s["classes"])
        if name == "cifar10":
            folder = root / "cifar-10-batches-py"
            parts = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
            key = "labels"
            _dump(folder / "batches.meta", {"label_names": [f"class{i}" for i in range(10)],
                                            "num_cases_per_batch": s["train"] // 5,
                                            "num_vis": 3072})
        else:
            folder = root / "cifar-100-python"
            parts = {"train": ["train"], "test": ["test"]}
            key = "fine_labels"
            _dump(folder / "meta", {"fine_label_names": [f"fine{i}" for i in range(100)],
                                    "coarse_label_names": [f"coarse{i}" for i in range(20)]})
        for split, files in parts.items():
            y_all = _labels(rng, s[split], classes)
            for f, y in zip(files, np.array_split(y_all, len(files))):
                x = _images(rng, y, 32)
                entry = {"data": x.reshape(len(y), -1), key: [int(v) for v in y],
                         "filenames": [f"synthetic_{i}.png" for i in range(len(y))],
                         "batch_label": f"synthetic {f}"}
                if name == "cifar100":
                    entry["coarse_labels"] = [int(v) // 5 for v in y]
                _dump(folder / f, entry)
        _mark(folder, name)


def _write_stl10(root: Path, rng: np.random.Generator) -> None:
    s = SIZES["stl10"]
    folder = root / "stl10_binary"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test", "unlabeled"):
        y = _labels(rng, s[split], list(range(s["classes"])))
        x = _images(rng, y, 96)
        x.transpose(0, 1, 3, 2).tofile(folder / f"{split}_X.bin")  # channels column-major
        if split != "unlabeled":
            (y + 1).astype(np.uint8).tofile(folder / f"{split}_y.bin")
    (folder / "class_names.txt").write_text("\n".join(
        ["airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship",
         "truck"]) + "\n")
    _mark(folder, "stl10")


def _write_imagenet32(root: Path, rng: np.random.Generator) -> None:
    s = SIZES["imagenet32"]
    folder = root / "imagenet32"
    classes = _spread(1000, s["classes"])
    y_all = _labels(rng, s["train"], classes)
    for i, y in enumerate(np.array_split(y_all, 10), 1):
        x = _images(rng, y, 32)
        _dump(folder / f"train_data_batch_{i}",
              {"data": x.reshape(len(y), -1), "labels": [int(v) + 1 for v in y],
               "mean": np.zeros(3072, dtype=np.float64)})
    y = _labels(rng, s["test"], classes)
    _dump(folder / "val_data", {"data": _images(rng, y, 32).reshape(len(y), -1),
                                "labels": [int(v) + 1 for v in y]})
    _mark(folder, "imagenet32")


def _write_tinyimagenet(root: Path, rng: np.random.Generator) -> None:
    from torchvision.io import encode_jpeg  # noqa: PLC0415 - torchvision's seconds of imports, JPEG sets only

    s = SIZES["tinyimagenet"]
    base = root / "tiny-imagenet-200"
    wnids = [f"n{90000000 + 7919 * i:08d}" for i in range(200)]
    base.mkdir(parents=True, exist_ok=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    order = sorted(wnids)
    used = _spread(200, s["classes"])

    def save(path: Path, img: np.ndarray) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_jpeg(torch.from_numpy(img), quality=95).numpy().tobytes())

    y = _labels(rng, s["train"], used)
    x = _images(rng, y, 64)
    count: dict[str, int] = {}
    for img, label in zip(x, y):
        w = order[int(label)]
        i = count.get(w, 0)
        count[w] = i + 1
        save(base / "train" / w / "images" / f"{w}_{i}.JPEG", img)
    for w in order:  # every wnid has its folder, as in the official archive
        (base / "train" / w / "images").mkdir(parents=True, exist_ok=True)
        n = count.get(w, 0)
        (base / "train" / w / f"{w}_boxes.txt").write_text(
            "".join(f"{w}_{i}.JPEG\t0\t0\t63\t63\n" for i in range(n)))
    y = _labels(rng, s["test"], used)
    x = _images(rng, y, 64)
    ann = []
    for i, (img, label) in enumerate(zip(x, y)):
        save(base / "val" / "images" / f"val_{i}.JPEG", img)
        ann.append(f"val_{i}.JPEG\t{order[int(label)]}\t0\t0\t63\t63")
    (base / "val" / "val_annotations.txt").write_text("\n".join(ann) + "\n")
    _mark(base, "tinyimagenet")


def _write_text(root: Path, seed: int) -> list[str]:
    sentences = generate_corpus(N_SENTENCES, seed)
    (root / "wiki1m_for_simcse.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    folder = root / "stsbenchmark"
    folder.mkdir(parents=True, exist_ok=True)
    for k, (split, n) in enumerate(N_STS.items(), 1):
        pairs = generate_sts_pairs(n, seed + k)
        lines = [f"main-captions\tsynthetic\t2026\t{i:04d}\t{score:.3f}\t{a}\t{b}"
                 for i, (a, b, score) in enumerate(zip(pairs.sentences1, pairs.sentences2,
                                                       pairs.scores))]
        (folder / f"sts-{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        sentences += pairs.sentences1 + pairs.sentences2
    _mark(folder, "stsb")
    return sentences


def _write_bert(folder: Path, sentences: list[str], seed: int) -> None:
    """A tiny random BERT (2 layers, hidden 64) and a WordPiece tokenizer over the words of
    ``sentences``, saved with ``save_pretrained`` so ``AutoModel``/``AutoTokenizer`` read it
    exactly as they read ``bert-base-uncased``."""
    # the text extra, which reads HF_HUB_OFFLINE when first imported (weince.models.text
    # sets it before its own import): imported when the BERT is written
    # (transformers 5's BertTokenizer is the fast, tokenizers-backed one: BertTokenizerFast
    # is the same class under its old name)
    from transformers import BertConfig, BertModel, BertTokenizer  # noqa: PLC0415

    words = sorted({w for s in sentences for w in re.findall(r"[a-z]+|[^\sa-z]", s.lower())})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(vocab)},
                              do_lower_case=True, model_max_length=128)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128,
                        max_position_embeddings=128)
    model = BertModel(config)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    _mark(folder, f"random BERT standing in for {BERT_NAME}", hidden_size=64, layers=2)


def write_synthetic_data(root: str | Path, *, seed: int = 0, overwrite: bool = False) -> Path:
    """Write every synthetic file under ``root`` (see the module docstring); returns it.

    A complete synthetic tree already at ``root`` is left as is unless ``overwrite``.
    Raises ``FileExistsError`` when ``root`` holds files that this function did not write
    (real data is never overwritten)."""
    root = Path(root).expanduser()
    marker = root / MARKER
    if root.exists() and any(root.iterdir()) and not marker.is_file():
        raise FileExistsError(f"{root} exists and is not a folder written by `weince "
                              f"synthetic-data` (no {MARKER}); pick an empty or new folder "
                              f"so that no real data is overwritten")
    if marker.is_file() and not overwrite:
        info = json.loads(marker.read_text())
        if info.get("complete"):
            return root
    root.mkdir(parents=True, exist_ok=True)
    _mark(root, "data root", complete=False)
    rng = np.random.default_rng(seed)
    _write_cifar(root, rng)
    _write_stl10(root, rng)
    _write_imagenet32(root, rng)
    _write_tinyimagenet(root, rng)
    sentences = _write_text(root, seed)
    _write_bert(root / "models" / BERT_NAME, sentences, seed)
    _mark(root, "data root", complete=True, sizes=SIZES, seed=seed)
    return root
