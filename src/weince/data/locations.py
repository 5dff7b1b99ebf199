"""Where each on-disk vision data set lives under a data root, and how to obtain it.

The loaders of :mod:`weince.data.vision` read these layouts, and a workflow checks them
before it plans any job (:func:`missing_vision`); this module imports no torch, so the
check costs the workflow nothing at start-up. ``digits`` and ``mnist5k`` ship with Python
packages and have no files here.

    missing_vision("cifar100", Path("data"), "train")   # None, or (first missing path, how)
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ON_DISK", "DOWNLOADABLE", "CIFAR", "STL_FILES", "IN32_TRAIN", "IN32_VAL",
           "find_imagenet32", "missing_vision", "how_to_obtain"]

CIFAR = {
    "cifar10": dict(folder="cifar-10-batches-py",
                    train=[f"data_batch_{i}" for i in range(1, 6)], test=["test_batch"],
                    meta="batches.meta", names_key="label_names", label_key="labels",
                    num_classes=10, tv="CIFAR10"),
    "cifar100": dict(folder="cifar-100-python", train=["train"], test=["test"], meta="meta",
                     names_key="fine_label_names", label_key="fine_labels",
                     num_classes=100, tv="CIFAR100"),
}
STL_FILES = {"train": ("train_X.bin", "train_y.bin"), "test": ("test_X.bin", "test_y.bin"),
             "unlabeled": ("unlabeled_X.bin", None)}
IN32_TRAIN = [f"train_data_batch_{i}" for i in range(1, 11)]
IN32_VAL = ["val_data"]
TINY = "tiny-imagenet-200"

ON_DISK = ("cifar10", "cifar100", "stl10", "imagenet32", "tinyimagenet")
DOWNLOADABLE = ("cifar10", "cifar100", "stl10")   # torchvision fetches them (`download: true`)


def how_to_obtain(name: str, root: Path) -> str:
    """How to put data set ``name`` under ``root``, in one sentence or two."""
    if name in CIFAR:
        info = CIFAR[name]
        return (f"Set `download: true` for this data set (torchvision fetches it into "
                f"{root}/) or extract the official python-version archive so that "
                f"{root / info['folder']}/ holds {', '.join(info['train'] + info['test'])} "
                f"and {info['meta']}.")
    if name == "stl10":
        return (f"Set `download: true` for this data set (torchvision fetches "
                f"stl10_binary.tar.gz into {root}/) or extract the official binary archive so "
                f"that {root / 'stl10_binary'}/ holds train_X.bin, train_y.bin, test_X.bin, "
                f"test_y.bin and unlabeled_X.bin.")
    if name == "imagenet32":
        return (f"ImageNet-32 is not downloaded automatically (it needs an image-net.org "
                f"account): download Imagenet32_train.zip and Imagenet32_val.zip "
                f"(downsampled ImageNet, 32x32, pickle format) and extract them so that "
                f"{root / 'imagenet32'}/ holds {', '.join(IN32_TRAIN)} and val_data.")
    if name == "tinyimagenet":
        return ("Tiny-ImageNet is not downloaded automatically: download tiny-imagenet-200.zip "
                "(http://cs231n.stanford.edu/tiny-imagenet-200.zip) and extract it into "
                f"{root}/ so that {root / TINY}/ holds wnids.txt, train/<wnid>/images/*.JPEG, "
                "val/images/*.JPEG and val/val_annotations.txt.")
    return ""


def find_imagenet32(root: Path, files: list[str]) -> Path | None:
    base = root / "imagenet32"
    for d in (base, base / "Imagenet32_train", base / "Imagenet32_val", root):
        if all((d / f).exists() for f in files):
            return d
    return None


def missing_vision(name: str, root: Path, split: str, download: bool = False
                   ) -> tuple[Path, str] | None:
    """The first file of split ``split`` of ``name`` missing under ``root`` and how to
    obtain it; ``None`` when it is there, when ``download`` will fetch it, or when the data
    set has no files (``digits``, ``mnist5k``). Tiny-ImageNet: its index files (the loader
    names any missing image)."""
    root = Path(root)
    if name not in ON_DISK or (download and name in DOWNLOADABLE):
        return None
    if name in CIFAR:
        info = CIFAR[name]
        need = [root / info["folder"] / f for f in info[split]]
    elif name == "stl10":
        need = [root / "stl10_binary" / f for p in split.split("+") for f in STL_FILES[p]
                if f is not None]
    elif name == "imagenet32":
        files = IN32_TRAIN if split == "train" else IN32_VAL
        need = [] if find_imagenet32(root, files) else [root / "imagenet32" / files[0]]
    else:
        base = root / TINY
        need = [base / "wnids.txt", base / "train" if split == "train"
                else base / "val" / "val_annotations.txt"]
    gone = [p for p in need if not p.exists()]
    return (gone[0], how_to_obtain(name, root)) if gone else None
