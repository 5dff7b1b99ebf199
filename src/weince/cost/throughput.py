"""How fast a GPU trains: achieved FLOP/s per device, model family and precision, from
published MEASURED training throughputs (``devices.yaml`` beside this file; docs/cost.md).

    from weince.cost.throughput import price_step, step_time
    price_step("resnet50", 224, 256, "tf32", "a100-80gb")["per_second"]   # (low, high) img/s
    step_time(4.0e12, "h100-sxm", "vit", "fp32")        # (fast, slow) seconds of one step

The model: a step of ``F`` FLOPs takes ``F / rate`` seconds, ``rate`` the achieved FLOP/s
of its device, family (``cnn``, ``vit``, ``bert``) and precision (``fp32``, ``tf32``,
``bf16``), as a range: the calibrated rate times the band of ``devices.yaml``. The
calibrated rate of a cell is, in this order:

1. **measured**: a published throughput on that device, family and precision times the
   counted FLOPs of its model per example (the median when several);
2. **stand-in**: a device without measurements (``stand_in``) takes the fraction of its
   peak that the stand-in reaches;
3. **ViT from BERT**: ViT-S is measured on the A100 in mixed precision only; on another
   device or in TF32 it keeps its measured ratio to BERT-base there, scaled as BERT-base
   scales (the measured device ratio and the measured AMP speed-up, never a datasheet's);
4. **FP32** (no tensor cores): the fraction of the FP32 peak the V100 reaches (the one
   GPU whose FP32 training is published), on this GPU's FP32 peak, never above its own
   TF32 rate.

Every figure is an estimate; ``weince cost`` prints one step's, the planner uses the same
function for every training job.
"""

from __future__ import annotations

import statistics
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from weince.cost.counts import (canonical_model, model_kind, text_counts, vision_counts)

__all__ = ["DEVICES_FILE", "PRECISIONS", "FAMILIES", "load_devices", "device",
           "device_names", "device_for_name", "family_of", "rates", "rate", "step_time",
           "example_flops", "price_step", "calibration_rows", "amp_speedups", "thin_evidence"]

DEVICES_FILE = Path(__file__).with_name("devices.yaml")
PRECISIONS = ("fp32", "tf32", "bf16")
FAMILIES = ("cnn", "vit", "bert")
FP32_REFERENCE = "v100-16gb"   # the GPU whose pure-FP32 training is measured


@lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text()) or {}


def load_devices() -> dict[str, Any]:
    """``devices.yaml``: ``devices``, ``families``, ``band``, ``measurements``, ``sources``."""
    return _load(str(DEVICES_FILE))


def device_names(listed_only: bool = True) -> list[str]:
    """The ``--gpu`` names (without the calibration-only devices unless asked)."""
    return [k for k, d in load_devices()["devices"].items()
            if not listed_only or d.get("listed", True)]


def device(name: str) -> dict[str, Any]:
    devs = load_devices()["devices"]
    key = str(name).lower()
    if key not in devs:
        raise ValueError(f"unknown GPU {name!r}: choose one of {', '.join(device_names())} "
                         f"(--gpu, or cost.gpu in the config; a new GPU is an entry of "
                         f"{DEVICES_FILE})")
    return devs[key]


def device_for_name(cuda_name: str | None) -> str | None:
    """The devices.yaml key of a ``torch.cuda.get_device_name()`` string, None if none
    matches (e.g. an A100 PCIe, whose clocks differ from the SXM part's)."""
    text = str(cuda_name or "").lower()
    for key, d in load_devices()["devices"].items():
        if any(n.lower() in text for n in d.get("names", [])):
            return key
    return None


def family_of(model: str) -> str:
    """``cnn`` (ResNets, the small CNN), ``vit`` (ViT-S) or ``bert`` (text models)."""
    m = canonical_model(model)
    if model_kind(m) == "text" or m == "text":
        return "bert"
    for fam, spec in load_devices()["families"].items():
        if m in spec["models"]:
            return fam
    return "vit" if m.startswith("vit") else "cnn"


def example_flops(model: str, size: int, channels: int = 3, head: str = "classes1000"
                  ) -> float:
    """Counted FLOPs of one training example (forward and backward) from the table:
    ``size`` is the image side for a vision model, the sequence length for a text one."""
    if model_kind(model) == "text":
        return float(text_counts(model, size)["train"])
    return float(vision_counts(model, size, channels, head)["train"])


def _peak(gpu: str, precision: str) -> float:
    p = device(gpu).get(precision)
    if p is None:
        raise ValueError(f"{gpu} has no {precision.upper()} arithmetic "
                         f"({device(gpu)['name']}): price it at another precision")
    return float(p) * 1e12


def _measured_rate(m: dict[str, Any]) -> float:
    """Achieved FLOP/s per GPU of one measurement."""
    if "flops_total" in m:
        return float(m["flops_total"]) / float(m["seconds"]) / int(m.get("gpus", 1))
    size = m.get("image_size") or m.get("seq_len")
    if size is None:
        raise ValueError(f"measurement of {m.get('model')!r} gives neither image_size nor "
                         f"seq_len: add the one its rate was measured at to devices.yaml")
    return float(m["per_second"]) * example_flops(m["model"], int(size))


def _family_of_measurement(m: dict[str, Any]) -> str:
    return m.get("family") or family_of(m["model"])


@lru_cache(maxsize=1)
def rates() -> dict[tuple[str, str, str], dict[str, Any]]:
    """``(gpu, family, precision) -> {"rate": FLOP/s, "how": text, "from": [ids]}`` for
    every device and cell the model can price (steps 1-4 of the module docstring)."""
    data = load_devices()
    cells: dict[tuple[str, str, str], dict[str, Any]] = {}
    by_cell: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
    for m in data["measurements"]:
        if m["use"] == "calibration":
            key = (m["gpu"], _family_of_measurement(m), m["precision"])
            by_cell.setdefault(key, []).append((m["id"], _measured_rate(m)))
    for key, found in by_cell.items():
        cells[key] = {"rate": statistics.median(r for _, r in found),
                      "how": "measured", "from": [i for i, _ in found]}
    _stand_ins(cells, data["devices"])
    _vit_from_bert(cells, data["devices"])
    _fp32_from_reference(cells, data["devices"])
    return cells


def _stand_ins(cells: dict, devices: dict) -> None:
    for gpu, d in devices.items():
        other = d.get("stand_in")
        if not other:
            continue
        for (g, fam, prec), c in list(cells.items()):
            if g == other and (gpu, fam, prec) not in cells:
                scale = _peak(gpu, prec) / _peak(other, prec)
                cells[(gpu, fam, prec)] = {"rate": c["rate"] * scale, "from": c["from"],
                                           "how": f"stand-in: {other}'s fraction of the peak"}


def _vit_from_bert(cells: dict, devices: dict) -> None:
    refs = [(g, c) for (g, f, p), c in cells.items()
            if f == "vit" and p == "bf16" and c["how"] == "measured"]
    if not refs:
        return
    ref, vit = refs[0]
    bert_ref = cells[(ref, "bert", "bf16")]["rate"]
    for gpu in devices:
        for prec in ("tf32", "bf16"):
            bert = cells.get((gpu, "bert", prec))
            if bert is None or (gpu, "vit", prec) in cells:
                continue
            cells[(gpu, "vit", prec)] = {
                "rate": vit["rate"] * bert["rate"] / bert_ref, "from": vit["from"] + bert["from"],
                "how": f"ViT-S measured on {ref} (AMP), scaled as BERT-base scales"}


def _fp32_from_reference(cells: dict, devices: dict) -> None:
    peak_ref = _peak(FP32_REFERENCE, "fp32")
    eff = {fam: cells[(FP32_REFERENCE, src, "fp32")]["rate"] / peak_ref
           for fam, src in (("cnn", "cnn"), ("bert", "bert"), ("vit", "bert"))
           if (FP32_REFERENCE, src, "fp32") in cells}
    src_ids = {fam: cells[(FP32_REFERENCE, "bert" if fam == "vit" else fam, "fp32")]["from"]
               for fam in eff}
    for gpu in devices:
        for fam, e in eff.items():
            if (gpu, fam, "fp32") in cells:
                continue
            rate = e * _peak(gpu, "fp32")
            tf32 = cells.get((gpu, fam, "tf32"))
            how = f"{FP32_REFERENCE}'s fraction of its FP32 peak ({e:.0%})"
            if tf32 is not None and tf32["rate"] < rate:
                rate, how = tf32["rate"], how + ", capped at this GPU's TF32 rate"
            cells[(gpu, fam, "fp32")] = {"rate": rate, "how": how, "from": src_ids[fam]}


def rate(gpu: str, family: str, precision: str) -> tuple[float, float]:
    """(low, high) achieved FLOP/s of a training step on ``gpu``."""
    cell = rates().get((str(gpu).lower(), family, precision))
    if cell is None:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}: choose one of "
                             f"{', '.join(PRECISIONS)}")
        _peak(gpu, precision)             # an unknown GPU or precision: its own message
        raise ValueError(f"no measured or derived {family} rate on {gpu} in {precision}: "
                         f"add a measurement to {DEVICES_FILE}")
    band = load_devices()["band"]
    return cell["rate"] * float(band["low"]), cell["rate"] * float(band["high"])


def step_time(flops: float, gpu: str, family: str, precision: str) -> tuple[float, float]:
    """(fast, slow) seconds of a step of ``flops`` FLOPs: the one function every price goes
    through (``weince cost``, the planner, the SLURM runtimes)."""
    lo, hi = rate(gpu, family, precision)
    return flops / hi, flops / lo


def price_step(model: str, size: int, batch: int, precision: str, gpu: str,
               channels: int = 3, classes: int = 1000, flops_per_example: float | None = None
               ) -> dict[str, Any]:
    """One plain supervised training step (forward, backward, optimiser) of a named model,
    as public benchmarks measure it: ``per_second`` (low, high) images or sequences per
    second and ``step_s`` (fast, slow) at ``batch``. ``flops_per_example``: a count the
    table lacks (``weince cost`` counts it with torch)."""
    kind = model_kind(model)
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if int(batch) < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    per = flops_per_example if flops_per_example is not None else example_flops(
        model, size, channels, f"classes{classes}")
    fam = family_of(model)
    fast, slow = step_time(per * int(batch), gpu, fam, precision)
    cell = rates()[(str(gpu).lower(), fam, precision)]
    return {"model": canonical_model(model), "kind": kind,
            ("seq_len" if kind == "text" else "image_size"): int(size), "batch": int(batch),
            "precision": precision, "gpu": str(gpu).lower(), "device": device(gpu)["name"],
            "family": fam, "flops_per_example": per,
            "per_second": [int(batch) / slow, int(batch) / fast],
            "step_s": [fast, slow], "unit": "sequences/s" if kind == "text" else "images/s",
            "basis": cell["how"], "calibrated_on": cell["from"],
            "band": [load_devices()["band"]["low"], load_devices()["band"]["high"]]}


def amp_speedups() -> list[dict[str, Any]]:
    """The measured AMP speed-up over TF32 of each measured device and family."""
    out = []
    for (gpu, fam, prec), c in sorted(rates().items()):
        if prec != "bf16" or c["how"] != "measured" or (gpu, fam, "tf32") not in rates():
            continue
        tf32 = rates()[(gpu, fam, "tf32")]
        if tf32["how"] == "measured":
            out.append({"gpu": gpu, "family": fam, "speedup": c["rate"] / tf32["rate"]})
    return out


def thin_evidence() -> list[str]:
    """Where the calibration rests on little: said on the page."""
    return [
        "ViT-S: one measured run (DeiT-S/16, 224 px, AMP, 4x A100), a whole training run with "
        "data loading and evaluation; no ViT-S measurement at the project's 32-96 px (8x8 "
        "tokens), none in TF32 or FP32 and none on another GPU: those cells follow BERT-base.",
        "Pure FP32 (the paper profile's ViT-S and BERT matmuls): no published FP32 training "
        "throughput on an A100, H100, H200 or L40S was found; the V100's measured fraction of "
        "its FP32 peak is applied to each GPU's FP32 peak (at most its TF32 rate).",
        "H200: one machine (Lambda's), no independent second measurement.",
        "L40S: no measurement; the RTX 6000 Ada (same AD102 chip) stands in.",
    ]


def calibration_rows() -> list[dict[str, Any]]:
    """Every measurement with the model's range for it and whether it falls inside."""
    data = load_devices()
    rows = []
    for m in data["measurements"]:
        fam = _family_of_measurement(m)
        src = data["sources"][m["source"]]
        if "flops_total" in m:
            measured, unit = _measured_rate(m) / 1e12, "TFLOP/s"
            lo, hi = (r / 1e12 for r in rate(m["gpu"], fam, m["precision"]))
            what = (f"{fam}, {m['precision'].upper()}, {m.get('gpus', 1)} GPU "
                    "(counted by the source)")
        else:
            size = m.get("image_size") or m.get("seq_len")
            p = price_step(m["model"], size, m.get("batch") or 1, m["precision"], m["gpu"])
            measured, unit = float(m["per_second"]), p["unit"]
            lo, hi = p["per_second"]
            shape = f"{size} px" if "image_size" in m else f"{size} tokens"
            what = (f"{m['model']} {shape}, batch {m['batch'] or 'not stated'}, "
                    f"{m['precision'].upper()}, {m['gpus']} GPU{'s' if m['gpus'] > 1 else ''}")
        rows.append({"id": m["id"], "use": m["use"], "gpu": m["gpu"], "what": what,
                     "measured": measured, "unit": unit, "low": lo, "high": hi,
                     "inside": lo <= measured <= hi, "source": src["title"], "url": src["url"],
                     "family": fam})
    return rows
