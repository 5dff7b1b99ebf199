"""Everything a profile reads, fetched once before any job (``weince fetch-data``).

A compute job never downloads (a SLURM compute node is often offline, and hundreds of
array tasks downloading one archive at once would race). Instead one command, on a
machine with network (a login node), puts every data set and text model of a profile
under its ``data_root`` in the layout the loaders read (:mod:`weince.data.locations`), one
item after another in one process:

- CIFAR-10/100 and STL-10: the official archive through torchvision's downloader (MD5
  checked), unpacked into the data root (:func:`fetch_vision`);
- a Hugging Face text model (``bert-base-uncased``): a snapshot of its repository, the
  files ``from_pretrained`` reads, into ``{data_root}/models/<name>`` (:func:`fetch_model`),
  the local copy the workflow reads (``weince.pipeline.stages.model_location``);
- ImageNet-32, Tiny-ImageNet, wiki1m and STS-B cannot be downloaded here (a registration
  or a licence to accept): :meth:`Item.missing` says which file to get and where to put it.

An item already on disk is reported present and not touched. This module imports neither
torch nor torchvision nor ``huggingface_hub`` until something is downloaded.

    from weince.data.fetch import Item, fetch
    item = Item("vision", "cifar10", "data", ("train", "test"))
    item.missing()        # None when on disk, else what is missing and how to get it
    fetch(item)           # download it (a downloadable item only)

Which items a profile reads: ``weince.pipeline.preflight.data_items``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from weince.data.locations import (ARCHIVES, CIFAR, DOWNLOADABLE, FETCH, MINILM_ALIASES,
                                   fetchable_model, how_to_obtain, missing_files,
                                   missing_model, model_folder, model_folder_gaps,
                                   shipped_minilm)
from weince.data.marker import synthetic_marker
from weince.data.text.real import missing_stsb, missing_wiki1m

__all__ = ["Item", "KINDS", "fetch", "fetch_vision", "fetch_model", "MODEL_PATTERNS",
           "TORCHVISION_CLASS"]

KINDS = ("vision", "wiki1m", "stsb", "model")
TORCHVISION_CLASS = {"cifar10": "CIFAR10", "cifar100": "CIFAR100", "stl10": "STL10"}
# the files of a model repository that `from_pretrained` reads (config, tokenizer and
# safetensors weights); the other frameworks' weights (TensorFlow, Flax, ONNX, Core ML)
# of a repository such as bert-base-uncased are left out
MODEL_PATTERNS = ["*.json", "*.txt", "*.safetensors", "*.model"]


@dataclass(frozen=True)
class Item:
    """One thing a profile reads from disk.

    Attributes:
        kind: ``"vision"`` (a data set under a root), ``"wiki1m"`` (the corpus file),
            ``"stsb"`` (a folder of STS-B files) or ``"model"`` (a text model).
        name: the data set or model name (``cifar10``, ``wiki1m``, ``stsb``,
            ``bert-base-uncased``).
        where: the data root (vision, model), the file (wiki1m) or the folder (stsb).
        splits: the splits read (vision, stsb).
        location, source: model only, where a job reads it and why
            (``weince.pipeline.stages.model_location``: ``"name"``, ``"local copy"`` or
            ``"model_paths"``).
    """

    kind: str
    name: str
    where: str
    splits: tuple[str, ...] = ()
    location: str = ""
    source: str = "name"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown item kind {self.kind!r}; valid: {', '.join(KINDS)}")

    @property
    def downloadable(self) -> bool:
        """Whether :func:`fetch` can download it (CIFAR, STL-10, a hub model that the
        profile reads by name or from its local copy)."""
        if self.kind == "vision":
            return self.name in DOWNLOADABLE
        return (self.kind == "model" and self.source in ("name", "local copy")
                and fetchable_model(self.name))

    @property
    def target(self) -> Path:
        """Where it lives on disk (the folder a download fills)."""
        if self.kind == "vision":
            folder = CIFAR[self.name]["folder"] if self.name in CIFAR else {
                "stl10": "stl10_binary", "imagenet32": "imagenet32",
                "tinyimagenet": "tiny-imagenet-200"}.get(self.name, "")
            return Path(self.where) / folder
        if self.kind == "model":
            if self.downloadable:
                return model_folder(self.where, self.name)
            if self.source == "name" and self.name.lower() in MINILM_ALIASES:
                return shipped_minilm() or Path(self.name)
            return Path(self.location or self.name).expanduser()
        return Path(self.where)

    @property
    def origin(self) -> str:
        """Where :func:`fetch` downloads it from (empty when it cannot)."""
        if not self.downloadable:
            return ""
        if self.kind == "vision":
            return f"{ARCHIVES[self.name]} (torchvision's downloader)"
        return f"https://huggingface.co/{self.name} (a snapshot of the repository)"

    def missing_paths(self) -> list[Path]:
        """The files of a vision item missing under its root (empty for other kinds)."""
        if self.kind != "vision":
            return []
        out = [p for s in self.splits for p in missing_files(self.name, Path(self.where), s)]
        return list(dict.fromkeys(out))

    def missing(self, fetch: str = FETCH) -> str | None:
        """``None`` when it is on disk, else one sentence: what is missing, and how to get it
        (naming ``fetch``, the fetch command, for what it downloads)."""
        if self.kind == "vision":
            gone = self.missing_paths()
            if not gone:
                return None
            shown = ", ".join(map(str, gone[:4])) + (f" and {len(gone) - 4} more"
                                                      if len(gone) > 4 else "")
            return (f"{self.name}: {shown} {'does' if len(gone) == 1 else 'do'} not exist. "
                    f"{how_to_obtain(self.name, Path(self.where), fetch)}")
        if self.kind == "wiki1m":
            return missing_wiki1m(self.where)
        if self.kind == "stsb":
            gaps = [m for s in self.splits if (m := missing_stsb(self.where, s, sep=", "))]
            return "; ".join(gaps) or None
        return missing_model(self.name, self.where, self.location or None, self.source, fetch)

    def synthetic(self) -> bool:
        """Whether it is a file of ``weince synthetic-data`` (a rehearsal's stand-in)."""
        return bool(synthetic_marker(self.target)) if self.target.exists() else False


def fetch(item: Item) -> Path:
    """Download ``item`` into its place (:attr:`Item.target`); returns it. Raises
    ``ValueError`` for an item that cannot be downloaded (its :meth:`Item.missing` says how
    to get it) and ``RuntimeError`` when the download does not give the expected files."""
    if not item.downloadable:
        raise ValueError(f"{item.name} cannot be downloaded by {FETCH}: {item.missing()}")
    if item.kind == "vision":
        return fetch_vision(item.name, item.where)
    return fetch_model(item.name, model_folder(item.where, item.name))


def fetch_vision(name: str, root: str | os.PathLike) -> Path:
    """Download and unpack CIFAR-10/100 or STL-10 into ``root`` with torchvision's
    downloader (the official archive, MD5-checked; the archive is removed once unpacked);
    returns the data set's folder. Every split of the set is then on disk."""
    if name not in DOWNLOADABLE:
        raise ValueError(f"{name} is not downloadable; downloadable: {', '.join(DOWNLOADABLE)}")
    # torch(vision) only when a data set is fetched: weince.pipeline.preflight reads this
    # module (Item) and imports no torch
    import torchvision.datasets  # noqa: PLC0415
    from torchvision.datasets import utils as tv_utils  # noqa: PLC0415

    cls = getattr(torchvision.datasets, TORCHVISION_CLASS[name])
    root = Path(root).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    tv_utils.download_and_extract_archive(cls.url, str(root), filename=cls.filename,
                                          md5=cls.tgz_md5, remove_finished=True)
    splits = ("train", "test", "unlabeled") if name == "stl10" else ("train", "test")
    gone = [p for s in splits for p in missing_files(name, root, s)]
    if gone:
        raise RuntimeError(f"{name}: the archive {ARCHIVES[name]} was unpacked into {root}/ "
                           f"but {gone[0]} is still missing; remove the partial folder and "
                           f"run {FETCH} again")
    return root / (CIFAR[name]["folder"] if name in CIFAR else "stl10_binary")


def fetch_model(name: str, folder: str | os.PathLike) -> Path:
    """Save a snapshot of the Hugging Face model repository ``name`` into ``folder`` (the
    files ``from_pretrained`` reads: config, tokenizer, safetensors weights, else
    ``pytorch_model.bin``); returns the folder. ``huggingface_hub`` records the commit it
    fetched in ``folder/.cache/huggingface/``."""
    # huggingface_hub (the text extra) reads HF_HUB_OFFLINE when first imported: only here,
    # after `weince fetch-data` has set it. `constants` is a submodule: imported by name, as
    # the package's own attribute list does not hold it in every version
    import huggingface_hub  # noqa: PLC0415
    from huggingface_hub import constants  # noqa: PLC0415

    if constants.HF_HUB_OFFLINE:
        raise RuntimeError(f"{name}: HF_HUB_OFFLINE is set in this process (the container "
                           f"and offline profiles set it), so nothing can be fetched from the "
                           f"Hugging Face hub; run `HF_HUB_OFFLINE=0 {FETCH} ...`")
    folder = Path(folder).expanduser()
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        huggingface_hub.snapshot_download(name, local_dir=str(folder),
                                          allow_patterns=MODEL_PATTERNS)
        if "model.safetensors" in model_folder_gaps(folder):   # an older repository: .bin
            huggingface_hub.snapshot_download(name, local_dir=str(folder),
                                              allow_patterns=["pytorch_model.bin"])
    except OSError as err:   # no network: the hub's LocalEntryNotFoundError, a ConnectError
        if made and not any(folder.iterdir()):
            folder.rmdir()
        raise RuntimeError(f"{name}: could not reach the Hugging Face hub "
                           f"({constants.ENDPOINT}): {_first_line(err)}; run {FETCH} on a "
                           f"machine with network (a login node)") from err
    gaps = model_folder_gaps(folder)
    if gaps:
        raise RuntimeError(f"{name}: the snapshot in {folder} lacks {', '.join(gaps)}; is "
                           f"{name} a transformers model repository on the Hugging Face hub?")
    return folder


def _first_line(err: BaseException) -> str:
    """The cause of a failed download in one line (the hub's message spans several)."""
    cause = err.__cause__ or err.__context__
    text = f"{type(cause).__name__}: {cause}" if cause else str(err)
    return " ".join(text.split())[:300]
