"""Counting FLOPs with torch: the one module of :mod:`weince.cost` that imports torch.

Planning never imports it: it reads the committed table ``flops.yaml`` beside this file
(:mod:`weince.cost.counts`). This module writes that table (``weince cost --recount``)
and counts a model the table lacks (``weince cost --model ... --image-size 200``);
``tests/cost/test_flops.py`` checks the table against a fresh count.

Every count is ``torch.utils.flop_counter.FlopCounterMode`` over one forward (and
backward) pass on the meta device: shapes only, no memory, no arithmetic. A batch of
:data:`COUNT_BATCH` examples is counted and divided by it (the count is linear in the
batch; ``tests/cost/test_flops.py`` checks it).

    from weince.cost.flops import recount
    recount()                        # rewrites src/weince/cost/flops.yaml
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
import torchvision
import yaml
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
from torchvision.models.vision_transformer import VisionTransformer
from transformers import BertConfig, BertModel

from weince.cost.counts import (BERT_GEOMETRIES, COUNTS_FILE, NAMED_SIZES, PROJ_DIMS,
                                TEXT_LENGTHS,
                                text_key, vision_key)
from weince.data.vision import DATASETS
from weince.models.vision import BACKBONES, build_backbone, build_simclr_model

__all__ = ["COUNT_BATCH", "count_vision", "count_text", "count_entries", "table",
           "recount"]

COUNT_BATCH = 4


def _count(run: Callable[[], None]) -> float:
    counter = FlopCounterMode(display=False)
    with counter:
        run()
    return float(counter.get_total_flops())


def _supervised(model: str, image_size: int, channels: int, classes: int
                ) -> tuple[nn.Module, nn.Module, int]:
    """(backbone, classifier head, feature width) of a plain supervised model."""
    if model == "vit_small_patch16":       # ViT-S/16 (DeiT-S geometry) at any size
        vit = VisionTransformer(image_size=image_size, patch_size=16, num_layers=12,
                                num_heads=6, hidden_dim=384, mlp_dim=1536)
        vit.heads = nn.Identity()
        return vit, nn.Linear(384, classes), 384
    net, feat = build_backbone(model, image_size, channels)
    return net, nn.Linear(feat, classes), feat


def count_vision(model: str, image_size: int, channels: int = 3, head: str = "proj64"
                 ) -> dict[str, Any]:
    """Per image: ``train`` (forward + backward of backbone and head), ``forward`` (the
    backbone alone, as feature extraction runs it), ``feat_dim``, and the model's
    ``params`` (what its encoder file and checkpoint hold). ``head``:
    ``proj<d>`` (the project's SimCLR projection head to ``d`` dims) or ``classes<k>``
    (a linear classifier over ``k`` classes: a plain supervised step)."""
    n = COUNT_BATCH
    with torch.device("meta"):
        if head.startswith("proj"):
            simclr = build_simclr_model(model, image_size, channels, out_dim=int(head[4:]))
            full: nn.Module = simclr
            backbone, feat = simclr.backbone, simclr.head.dims()["in_dim"]
        elif head.startswith("classes"):
            backbone, cls, feat = _supervised(model, image_size, channels, int(head[7:]))
            full = nn.Sequential(backbone, cls)
        else:
            raise ValueError(f"head {head!r}: use proj<dims> or classes<count>")
        x = torch.empty(n, channels, image_size, image_size)

    def train():
        out = full(x)
        (out[1] if isinstance(out, tuple) else out).sum().backward()

    def forward():
        with torch.no_grad():
            backbone(x)

    return {"model": model, "image_size": int(image_size), "channels": int(channels),
            "head": head, "train": _count(train) / n, "forward": _count(forward) / n,
            "feat_dim": int(feat), "params": sum(p.numel() for p in full.parameters())}


def count_text(geometry: str, seq_len: int) -> dict[str, Any]:
    """Per sequence of ``seq_len`` tokens through a randomly initialised BERT of that
    geometry (:data:`weince.cost.counts.BERT_GEOMETRIES`): ``train`` (forward and backward,
    as a fine-tuning or SimCSE step) and ``forward`` (an evaluation)."""
    if geometry not in BERT_GEOMETRIES:
        raise ValueError(f"unknown text model geometry {geometry!r}: choose one of "
                         f"{', '.join(BERT_GEOMETRIES)}")
    n = COUNT_BATCH
    cfg = BertConfig(**BERT_GEOMETRIES[geometry])
    with torch.device("meta"):
        model = BertModel(cfg, add_pooling_layer=False)
        ids = torch.zeros(n, int(seq_len), dtype=torch.long)

    def train():
        model(input_ids=ids).last_hidden_state[:, 0].sum().backward()

    def forward():
        with torch.no_grad():
            model(input_ids=ids)

    return {"model": geometry, "seq_len": int(seq_len), "train": _count(train) / n,
            "forward": _count(forward) / n, "feat_dim": int(cfg.hidden_size),
            "params": sum(p.numel() for p in model.parameters())}


def _vision_wanted(proj_dims: Iterable[int]) -> list[tuple[str, int, int, str]]:
    """Every project backbone at every data set's size (SimCLR heads of ``proj_dims``),
    and the named models at their benchmark sizes (1,000-class heads)."""
    sizes = sorted({(s.image_size, s.channels) for s in DATASETS.values()})
    out = [(b, size, ch, f"proj{d}") for b in BACKBONES for size, ch in sizes
           for d in sorted(set(proj_dims))]
    for model, model_sizes in NAMED_SIZES.items():
        out += [(model, size, 3, "classes1000") for size in model_sizes]
    return out


def count_entries(proj_dims: Iterable[int] = PROJ_DIMS) -> dict[str, Any]:
    """The whole table: the data sets' sizes, the vision and text counts."""
    datasets = {name: {"image_size": s.image_size, "channels": s.channels,
                       "classes": s.num_classes} for name, s in sorted(DATASETS.items())}
    vision = {vision_key(m, s, c, h): count_vision(m, s, c, h)
              for m, s, c, h in _vision_wanted(proj_dims)}
    text = {text_key(g, n): count_text(g, n) for g, lengths in TEXT_LENGTHS.items()
            for n in lengths}
    return {"datasets": datasets, "vision": vision, "text": text}


def table(proj_dims: Iterable[int] = PROJ_DIMS) -> dict[str, Any]:
    """The table as ``flops.yaml`` holds it, with the versions that counted it."""
    head = {"counted_with": {"torch": str(torch.__version__),
                             "torchvision": str(torchvision.__version__),
                             "python": platform.python_version()}}
    return {**head, **count_entries(proj_dims)}


def recount(path: str | Path | None = None, proj_dims: Iterable[int] = PROJ_DIMS) -> Path:
    """Count every entry and rewrite the table (default: the committed ``flops.yaml``)."""
    out = Path(path or COUNTS_FILE)
    text = ("# FLOPs per example, counted by torch's FlopCounterMode on the meta device.\n"
            "# Generated by `weince cost --recount`; do not edit by hand\n"
            "# (tests/cost/test_flops.py checks it against a fresh count).\n")
    out.write_text(text + yaml.safe_dump(table(proj_dims), sort_keys=True, width=100))
    return out
