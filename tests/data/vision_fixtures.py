"""Tiny data sets written in their real on-disk formats, for the loader tests.

Each writer puts a handful of images under ``root`` exactly where and how the official
archives put them, and returns the arrays it wrote (``(N, 3, H, W)`` uint8 and 0-based
labels) so the tests can compare what the loaders read back.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np


def _images(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    return rng.integers(0, 256, size=(n, 3, size, size), dtype=np.uint8)


def _dump(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def write_cifar(root: Path, name: str = "cifar10", per_batch: int = 3, seed: int = 0
                ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """CIFAR python version: ``cifar-10-batches-py/data_batch_1..5, test_batch,
    batches.meta`` or ``cifar-100-python/train, test, meta`` (rows of 3072 bytes,
    R plane then G then B, each row-major)."""
    rng = np.random.default_rng(seed)
    if name == "cifar10":
        folder, ncls = Path(root) / "cifar-10-batches-py", 10
        parts = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
        key = "labels"
        _dump(folder / "batches.meta", {"label_names": [f"class{i}" for i in range(10)],
                                        "num_cases_per_batch": per_batch, "num_vis": 3072})
    else:
        folder, ncls = Path(root) / "cifar-100-python", 100
        parts = {"train": ["train"], "test": ["test"]}
        key = "fine_labels"
        _dump(folder / "meta", {"fine_label_names": [f"fine{i}" for i in range(100)],
                                "coarse_label_names": [f"coarse{i}" for i in range(20)]})
    out = {}
    for split, files in parts.items():
        xs, ys = [], []
        for f in files:
            x = _images(rng, per_batch, 32)
            y = rng.integers(0, ncls, size=per_batch)
            entry = {"data": x.reshape(per_batch, -1), key: [int(v) for v in y],
                     "filenames": [f"img{i}.png" for i in range(per_batch)],
                     "batch_label": f}
            if name == "cifar100":
                entry["coarse_labels"] = [int(v) // 5 for v in y]
            _dump(folder / f, entry)
            xs.append(x)
            ys.append(y)
        out[split] = (np.concatenate(xs), np.concatenate(ys))
    return out


def write_stl10(root: Path, n: dict[str, int] | None = None, seed: int = 0
                ) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """STL-10 binary version: ``stl10_binary/{train,test,unlabeled}_X.bin`` (uint8,
    each channel stored column-major, i.e. as (N, C, W, H)) and ``*_y.bin`` (1-based)."""
    n = n or {"train": 3, "test": 2, "unlabeled": 4}
    rng = np.random.default_rng(seed)
    folder = Path(root) / "stl10_binary"
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, k in n.items():
        x = _images(rng, k, 96)
        x.transpose(0, 1, 3, 2).tofile(folder / f"{split}_X.bin")
        y = None
        if split != "unlabeled":
            y = rng.integers(0, 10, size=k)
            (y + 1).astype(np.uint8).tofile(folder / f"{split}_y.bin")
        out[split] = (x, y)
    (folder / "class_names.txt").write_text("\n".join(
        ["airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck"]))
    return out


def write_imagenet32(root: Path, per_batch: int = 2, n_val: int = 3, seed: int = 0,
                     folder: str = "imagenet32") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Downsampled ImageNet 32x32 pickles: ``train_data_batch_1..10`` and ``val_data``,
    dicts with ``data`` ``(N, 3072)`` uint8 and 1-based ``labels`` (a list), plus ``mean``
    in the train batches."""
    rng = np.random.default_rng(seed)
    base = Path(root) / folder
    out = {}
    xs, ys = [], []
    for i in range(1, 11):
        x = _images(rng, per_batch, 32)
        y = rng.integers(0, 1000, size=per_batch)
        if i == 1:
            y[0], y[-1] = 0, 999  # the label range ends
        _dump(base / f"train_data_batch_{i}",
              {"data": x.reshape(per_batch, -1), "labels": [int(v) + 1 for v in y],
               "mean": np.zeros(3072, dtype=np.float64)})
        xs.append(x)
        ys.append(y)
    out["train"] = (np.concatenate(xs), np.concatenate(ys))
    x = _images(rng, n_val, 32)
    y = rng.integers(0, 1000, size=n_val)
    _dump(base / "val_data", {"data": x.reshape(n_val, -1), "labels": [int(v) + 1 for v in y]})
    out["test"] = (x, y)
    return out


TINY_WNIDS = ["n03444034", "n01443537", "n02124075"]  # deliberately not sorted


def _flat_jpeg(path: Path, rgb: tuple[int, int, int], gray: bool = False) -> None:
    import torch
    from torchvision.io import encode_jpeg, write_file

    path.parent.mkdir(parents=True, exist_ok=True)
    c = 1 if gray else 3
    img = torch.empty((c, 64, 64), dtype=torch.uint8)
    for k in range(c):
        img[k] = rgb[k]
    write_file(str(path), encode_jpeg(img, quality=100))


def write_tinyimagenet(root: Path, per_class: int = 2, n_val: int = 4
                       ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Tiny-ImageNet folder layout: ``tiny-imagenet-200/wnids.txt``,
    ``train/<wnid>/images/<wnid>_<i>.JPEG`` (+ ``<wnid>_boxes.txt``),
    ``val/images/val_<i>.JPEG`` and ``val/val_annotations.txt`` (tab-separated: file,
    wnid, box). Images are flat colours (JPEG keeps them within a grey level or two);
    returns the expected colours ``(N, 3)`` and labels (index in sorted wnids) in the
    loader's order. The first val image is stored as a grey-scale JPEG."""
    base = Path(root) / "tiny-imagenet-200"
    base.mkdir(parents=True, exist_ok=True)
    (base / "wnids.txt").write_text("\n".join(TINY_WNIDS) + "\n")
    order = sorted(TINY_WNIDS)
    colours, labels = [], []
    for w in order:
        boxes = []
        for i in range(per_class):
            rgb = (40 * order.index(w) + 10, 20 * i + 30, 200 - 30 * i)
            _flat_jpeg(base / "train" / w / "images" / f"{w}_{i}.JPEG", rgb)
            boxes.append(f"{w}_{i}.JPEG\t0\t0\t63\t63")
            colours.append(rgb)
            labels.append(order.index(w))
        (base / "train" / w / f"{w}_boxes.txt").write_text("\n".join(boxes) + "\n")
    train = (np.array(colours, dtype=np.int64), np.array(labels))
    ann, vcol, vlab = [], [], []
    for i in range(n_val):
        w = TINY_WNIDS[i % len(TINY_WNIDS)]
        gray = i == 0
        rgb = (90, 90, 90) if gray else (10 * i + 50, 100, 30 * i)
        _flat_jpeg(base / "val" / "images" / f"val_{i}.JPEG", rgb, gray=gray)
        ann.append(f"val_{i}.JPEG\t{w}\t0\t0\t63\t63")
        vcol.append(rgb)
        vlab.append(order.index(w))
    (base / "val" / "val_annotations.txt").write_text("\n".join(ann) + "\n")
    return {"train": train, "test": (np.array(vcol, dtype=np.int64), np.array(vlab))}
