"""Per-example test predictions beside a probe's numbers, and the metrics recomputed
from them (numpy only: ``weince verify`` reads them without torch).

A probe's result file (``linear.json``, ``knn.json``) carries a ``predictions`` block:

    {"format": "weince-predictions/1", "n_test": N,
     "test_labels": ARRAY, "test_labels_sha256": HEX,
     "per_seed": [{"seed": 1, "pred": ARRAY}, ...]}                    # linear probe
     "per_seed": [{"seed": 1, "pred@50": ARRAY, "hits@1": BITS, ...}]}  # k-NN

An ARRAY is the labels as little-endian ``uint16`` (``uint32`` past 65,535 classes), a BITS
the per-query 0/1 as a bit field (``numpy.packbits``), a VALUES the per-example floats
(``float64``); each zlib-compressed and base64 encoded, as ``{"dtype", "n", "zlib_b64"}``:
a CIFAR-sized test set is a few kB per seed. Which entry holds which metric, and how the
metric follows from it, is the metric's declaration (:data:`weince.utils.metrics.METRICS`).

:func:`recheck` recomputes every per-seed number of a result from its block, in the same
float arithmetic the evaluation used (float32 for the linear probe, float64 for the k-NN),
and the seed summaries from those, and names each number that does not follow.
"""

from __future__ import annotations

import base64
import hashlib
import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from weince.utils.metrics import evaluation_of, metric_of, metric_of_entry

__all__ = ["FORMAT", "encode_labels", "encode_bits", "encode_values", "decode",
           "labels_sha256", "linear_block", "knn_block", "recheck"]

FORMAT = "weince-predictions/1"


def _pack(raw: bytes, dtype: str, n: int) -> dict[str, Any]:
    return {"dtype": dtype, "n": int(n),
            "zlib_b64": base64.b64encode(zlib.compress(raw, 9)).decode("ascii")}


def encode_labels(labels: Any) -> dict[str, Any]:
    """Integer labels ``(N,)`` as a compressed block (uint16, or uint32 when needed)."""
    a = np.asarray(labels).astype(np.int64).ravel()
    if a.size and (a.min() < 0 or a.max() >= 1 << 32):
        raise ValueError("labels must be non-negative class indices")
    dtype = "<u2" if not a.size or a.max() < 1 << 16 else "<u4"
    return _pack(a.astype(dtype).tobytes(), dtype, a.size)


def encode_bits(flags: Any) -> dict[str, Any]:
    """A 0/1 vector ``(N,)`` as a compressed bit field."""
    a = np.asarray(flags).astype(bool).ravel()
    return _pack(np.packbits(a).tobytes(), "bits", a.size)


def encode_values(values: Any) -> dict[str, Any]:
    """Per-example floats ``(N,)`` as a compressed ``float64`` block."""
    a = np.asarray(values, dtype="<f8").ravel()
    return _pack(a.tobytes(), "<f8", a.size)


_ENCODE = {"labels": encode_labels, "flags": encode_bits, "values": encode_values}

# the most values one block may hold (a test set of 100 million examples)
MAX_PREDICTIONS = 100_000_000


def decode(block: Any, what: str = "predictions") -> np.ndarray:
    """The array of a block written by :func:`encode_labels` / :func:`encode_bits`
    (``ValueError`` naming ``what`` for anything else)."""
    if not isinstance(block, dict) or not isinstance(block.get("zlib_b64"), str) \
            or not isinstance(block.get("n"), int) or block.get("dtype") not in ("<u2", "<u4",
                                                                                  "<f8", "bits"):
        raise ValueError(f"{what}: not a predictions array (dtype, n, zlib_b64)")
    n = block["n"]
    if not 0 <= n <= MAX_PREDICTIONS:
        raise ValueError(f"{what}: n = {n} is outside 0-{MAX_PREDICTIONS:,}")
    # an archive is someone else's file: decompress no more than the block's n values can
    # need, so a small string cannot expand into gigabytes
    need = (n + 7) // 8 if block["dtype"] == "bits" else n * int(block["dtype"][-1])
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.b64decode(block["zlib_b64"], validate=True), need)
    except (ValueError, zlib.error) as err:
        raise ValueError(f"{what}: the array does not decode ({err})") from None
    if inflate.unconsumed_tail:
        raise ValueError(f"{what}: the array decodes to more than the {need} bytes of its "
                         f"{n} values")
    if block["dtype"] == "bits":
        if len(raw) != (n + 7) // 8:
            raise ValueError(f"{what}: {len(raw)} bytes for {n} bits")
        return np.unpackbits(np.frombuffer(raw, np.uint8))[:n].astype(bool)
    a = np.frombuffer(raw, block["dtype"])
    if a.size != n:
        raise ValueError(f"{what}: {a.size} values, the block says {n}")
    return a.astype(np.float64) if block["dtype"] == "<f8" else a.astype(np.int64)


def labels_sha256(labels: Any) -> str:
    """SHA-256 of the labels as little-endian int64: the test set's fingerprint."""
    return hashlib.sha256(np.asarray(labels).astype("<i8").tobytes()).hexdigest()


def _head(labels: Any) -> dict[str, Any]:
    y = np.asarray(labels)
    return {"format": FORMAT, "n_test": int(y.size), "test_labels": encode_labels(y),
            "test_labels_sha256": labels_sha256(y)}


def linear_block(labels: Any, preds: Sequence[Any], seeds: Sequence[int]) -> dict[str, Any]:
    """The block of a linear probe: the test labels and each seed's predicted labels."""
    return {**_head(labels), "per_seed": [{"seed": int(s), **_entries({"test_acc": p})}
                                          for s, p in zip(seeds, preds)]}


def _entries(record: dict[str, Any]) -> dict[str, Any]:
    """A per-seed record ``{metric key: per-example values}`` as its predictions entries,
    each named and encoded as the metric's declaration says."""
    out = {}
    for key, values in record.items():
        m = metric_of(key)
        entry = m.entry(key) if m is not None else None
        if m is None or m.per_example is None or entry is None:
            raise ValueError(f"metric {key!r} declares no per-example predictions; declare "
                             f"them in weince.utils.metrics.METRICS")
        out[entry] = _ENCODE[m.per_example.holds](values)
    return out


def knn_block(labels: Any, records: Sequence[dict[str, Any]], seeds: Sequence[int],
              k: int) -> dict[str, Any]:
    """The block of a k-NN evaluation: per split seed, each metric's per-example values
    (``records[i] = {"acc@50": (N,) voted labels, "recall@1": (N,) bool, ...}``), in the
    entries their declarations name (``pred@50``, ``hits@1``, ...)."""
    return {**_head(labels), "k": int(k),
            "per_seed": [{"seed": int(s), **_entries(r)} for s, r in zip(seeds, records)]}


def _close(a: Any, b: float) -> bool:
    return isinstance(a, (int, float)) and not isinstance(a, bool) and math.isclose(
        float(a), b, rel_tol=1e-9, abs_tol=1e-9)


def _summary_problems(data: dict[str, Any], key: str, values: list[float]) -> list[str]:
    """Whether summary ``data[key]`` holds exactly ``values`` and their mean."""
    s = data.get(key)
    if not isinstance(s, dict):
        return [f"{key}: no summary to check"]
    out = []
    got = s.get("values")
    if not isinstance(got, list) or len(got) != len(values) or not all(
            _close(a, b) for a, b in zip(got, values)):
        out.append(f"{key}.values {got!r} do not follow from the predictions "
                   f"({[round(v, 6) for v in values]})")
    mean = sum(values) / len(values) if values else float("nan")
    if values and not _close(s.get("mean"), mean):
        out.append(f"{key}.mean {s.get('mean')!r} does not follow from the predictions "
                   f"({mean:.6f})")
    return out


def recheck(data: dict[str, Any], kind: str) -> tuple[list[str], int, str | None]:
    """``(problems, numbers checked, test-label SHA-256)`` of a result ``data`` of the
    evaluation ``kind`` (``"linear"`` or ``"knn"``: :data:`weince.utils.metrics.EVALUATIONS`)
    against its ``predictions`` block; no block: no problems, 0 checked. Each per-seed
    number, each summary's values and its mean count as checked."""
    block = data.get("predictions")
    if block is None:
        return [], 0, None
    if not isinstance(block, dict) or block.get("format") != FORMAT:
        return [f"predictions: not a {FORMAT} block"], 0, None
    try:
        y = decode(block.get("test_labels"), "predictions.test_labels")
        if labels_sha256(y) != block.get("test_labels_sha256"):
            return ["predictions.test_labels do not match their SHA-256"], 0, None
        if data.get("n_test") is not None and y.size != data.get("n_test"):
            return [f"predictions hold {y.size} test labels, n_test says "
                    f"{data.get('n_test')}"], 0, None
        problems, n = _recheck(data, block, y, evaluation_of(kind).per_seed_at)
    except ValueError as err:
        return [str(err)], 0, None
    return problems, n, str(block["test_labels_sha256"])


def _seeds(block: dict[str, Any], data: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    ps, rs = block.get("per_seed"), data.get("per_seed")
    if not isinstance(ps, list) or not isinstance(rs, list) or len(ps) != len(rs) or not all(
            isinstance(p, dict) and isinstance(r, dict) and p.get("seed") == r.get("seed")
            for p, r in zip(ps, rs)):
        raise ValueError("predictions.per_seed does not name the result's seeds in order")
    return ps, rs


def _per_example(name: str, blk: Any, y: np.ndarray, where: str) -> tuple[str, float]:
    """The metric key the predictions entry ``name`` holds and its value recomputed."""
    found = metric_of_entry(name)
    if found is None:
        raise ValueError(f"{where}: no declared metric keeps its predictions in {name!r}")
    m, key = found
    assert m.per_example is not None   # an entry is a declaration's per-example values
    values = decode(blk, f"{where}.{name}")
    if values.size != y.size:
        raise ValueError(f"{where} {key}: {values.size} values for {y.size} test labels")
    if m.per_example.holds == "labels":
        values = values == y
    elif m.per_example.holds == "flags":
        values = values.astype(bool)
    return key, m.per_example.score(values)


def _unrecomputed(test: dict[str, Any], got: dict[str, float], at: str) -> list[str]:
    """The numbers of a per-seed record that should have predictions and have none: a
    metric declared with per-example predictions, or (in a record of metrics only) any
    number no declaration covers."""
    out = []
    for key, v in test.items():
        if key in got or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        m = metric_of(key)
        if (m is not None and m.per_example is not None) or (m is None and at):
            out.append(key)
    return sorted(out)


def _recheck(data, block, y, at: str) -> tuple[list[str], int]:
    """Each per-seed number that the block's entries hold (the per-seed record itself, or
    its part ``at``) and each summary of those, against the recomputed values."""
    ps, rs = _seeds(block, data)
    out: list[str] = []
    per_key: dict[str, list[float]] = {}
    for i, (p, r) in enumerate(zip(ps, rs)):
        test: dict[str, Any] = r if not at else r[at] if isinstance(r.get(at), dict) else {}
        got = dict(_per_example(name, blk, y, f"predictions.per_seed[{i}]")
                   for name, blk in p.items() if name != "seed")
        for key, value in got.items():
            per_key.setdefault(key, []).append(value)
            if not _close(test.get(key), value):
                out.append(f"per_seed[{i}] (seed {r.get('seed')}) {f'{at} ' if at else ''}"
                           f"{key} {test.get(key)!r}: its predictions give {value:.6f}")
        missing = _unrecomputed(test, got, at)
        if missing:
            out.append(f"per_seed[{i}]: no predictions for {', '.join(missing)}")
    for key, vals in per_key.items():
        out += _summary_problems(data, key, vals)
    return out, sum(2 * len(v) + 1 for v in per_key.values())
