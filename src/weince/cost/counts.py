"""The committed FLOPs table (``flops.yaml`` beside this file), read without torch.

    from weince.cost.counts import vision_counts, text_counts, dataset_spec
    vision_counts("resnet18", 32, 3, "proj64")["train"]    # FLOPs per image, fwd + bwd
    text_counts("bert-base", 32)["forward"]                # FLOPs per sequence, forward
    dataset_spec("stl10")                                  # image_size 96, channels 3, ...

The table holds, per example, the FLOPs of the project's backbones at every data set's
size with the SimCLR projection head (``proj64``), of the named benchmark models with a
1,000-class head (``classes1000``), and of BERT geometries at several sequence lengths.
``weince cost --recount`` rewrites it with torch (:mod:`weince.cost.flops`, the only
module of this package that imports torch); a setting it lacks raises an error that says
so, never a silent guess.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

__all__ = ["COUNTS_FILE", "PROJ_DIMS", "BERT_GEOMETRIES", "TEXT_LENGTHS", "NAMED_SIZES",
           "VISION_MODELS",
           "TEXT_MODELS", "vision_key", "text_key", "load_counts", "vision_counts",
           "text_counts", "dataset_spec", "text_geometry", "canonical_model", "model_kind"]

COUNTS_FILE = Path(__file__).with_name("flops.yaml")

# BertConfig arguments of each text geometry (bert-base-uncased, bert-large-uncased and
# sentence-transformers' all-MiniLM-L6-v2, the norms analysis' text encoder)
BERT_GEOMETRIES: dict[str, dict[str, Any]] = {   # BertConfig's keyword arguments
    "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                  "intermediate_size": 3072},
    "bert-large": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                   "intermediate_size": 4096},
    "minilm-l6": {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
                  "intermediate_size": 1536},
}
# the sequence lengths the table counts: SimCSE's 32, pre-training's 128, SQuAD's 384
TEXT_LENGTHS: dict[str, tuple[int, ...]] = {"bert-base": (32, 128, 384, 512),
                                            "bert-large": (128, 384),
                                            "minilm-l6": (32, 128)}
# the SimCLR projection sizes the table counts the backbones with (the shipped profiles': the
# smoke profile's 32, the protocol's 64)
PROJ_DIMS = (32, 64)
# named benchmark models (a 1,000-class head) and the sizes the table counts them at
NAMED_SIZES: dict[str, tuple[int, ...]] = {"resnet18": (224,), "resnet50": (224,),
                                           "vit_small_patch16": (224,)}
# `weince cost --model` names: the project's backbones and ViT-S/16; then the text models
VISION_MODELS = ("resnet18", "resnet50", "vit_s", "smallcnn", "vit_small_patch16")
TEXT_MODELS = tuple(BERT_GEOMETRIES)
_ALIASES = {"vit_small_patch16_224": "vit_small_patch16", "vit-s/16": "vit_small_patch16",
            "deit_small_patch16_224": "vit_small_patch16", "bert-base-uncased": "bert-base",
            "bert-large-uncased": "bert-large", "minilm": "minilm-l6",
            "all-minilm-l6-v2": "minilm-l6"}
RECOUNT = "run `weince cost --recount` (it needs torch) to count it into the table"


def vision_key(model: str, image_size: int, channels: int, head: str) -> str:
    return f"{model}@{int(image_size)}x{int(channels)}/{head}"


def text_key(geometry: str, seq_len: int) -> str:
    return f"{geometry}@{int(seq_len)}"


@lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"the FLOPs table {p} is missing: {RECOUNT}")
    return yaml.safe_load(p.read_text()) or {}


def load_counts(path: str | Path | None = None) -> dict[str, Any]:
    """The whole table: ``datasets``, ``vision``, ``text`` and ``counted_with``."""
    return _load(str(path or COUNTS_FILE))


def vision_counts(model: str, image_size: int, channels: int = 3, head: str = "proj64"
                  ) -> dict[str, Any]:
    """``train``, ``forward`` FLOPs per image and ``feat_dim`` of one vision entry."""
    key = vision_key(canonical_model(model), image_size, channels, head)
    found = load_counts()["vision"].get(key)
    if found is None:
        raise ValueError(f"no counted FLOPs for {key} in {COUNTS_FILE.name}: {RECOUNT} (or "
                         f"`weince cost --model {model} --image-size {image_size}` counts one)")
    return found


def text_counts(geometry: str, seq_len: int) -> dict[str, Any]:
    """``train``, ``forward`` FLOPs per sequence of one text entry."""
    key = text_key(canonical_model(geometry), seq_len)
    found = load_counts()["text"].get(key)
    if found is None:
        raise ValueError(f"no counted FLOPs for {key} in {COUNTS_FILE.name}: {RECOUNT}")
    return found


def dataset_spec(name: str) -> dict[str, int]:
    """``image_size``, ``channels``, ``classes`` of a vision data set (as counted)."""
    specs = load_counts()["datasets"]
    if name not in specs:
        raise ValueError(f"unknown data set {name!r} for the cost model: choose one of "
                         f"{', '.join(specs)} ({RECOUNT} after adding one)")
    return specs[name]


def canonical_model(name: str) -> str:
    """``vit_small_patch16_224`` -> ``vit_small_patch16``, ``bert-base-uncased`` ->
    ``bert-base``; other names unchanged."""
    return _ALIASES.get(str(name).lower(), str(name).lower())


def model_kind(name: str) -> str:
    """``vision`` or ``text``; a clear error for a name the cost model does not know."""
    m = canonical_model(name)
    if m in VISION_MODELS:
        return "vision"
    if m in TEXT_MODELS:
        return "text"
    raise ValueError(f"unknown model {name!r}: choose one of "
                     f"{', '.join(VISION_MODELS + TEXT_MODELS)}")


def text_geometry(model: str) -> str:
    """The BERT geometry a text model of the config is priced as: ``minilm`` -> MiniLM-L6,
    a name with ``large`` -> bert-large, anything else (bert-base-uncased, a local copy of
    it) -> bert-base."""
    m = canonical_model(Path(str(model)).name)
    if m in BERT_GEOMETRIES:
        return m
    return "bert-large" if "large" in m else "bert-base"
