"""Per-example test predictions beside a probe's numbers, and the accuracies recomputed
from them (numpy only: ``weince verify`` reads them without torch).

A probe's result file (``linear.json``, ``knn.json``) carries a ``predictions`` block:

    {"format": "weince-predictions/1", "n_test": N,
     "test_labels": ARRAY, "test_labels_sha256": HEX,
     "per_seed": [{"seed": 1, "pred": ARRAY}, ...]}                    # linear probe
     "per_seed": [{"seed": 1, "pred@50": ARRAY, "hits@1": BITS, ...}]}  # k-NN

An ARRAY is the labels as little-endian ``uint16`` (``uint32`` past 65,535 classes), a BITS
the per-query 0/1 as a bit field (``numpy.packbits``); both zlib-compressed and base64
encoded, as ``{"dtype", "n", "zlib_b64"}``: a CIFAR-sized test set is a few kB per seed.

:func:`recheck` recomputes every per-seed accuracy of a result from its block, in the same
float arithmetic the probe used (float32 for the linear probe, float64 for the k-NN), and
the seed summaries from those, and names each number that does not follow.
"""

from __future__ import annotations

import base64
import hashlib
import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["FORMAT", "encode_labels", "encode_bits", "decode", "labels_sha256",
           "linear_block", "knn_block", "recheck"]

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


# the most values one block may hold (a test set of 100 million examples)
MAX_PREDICTIONS = 100_000_000


def decode(block: Any, what: str = "predictions") -> np.ndarray:
    """The array of a block written by :func:`encode_labels` / :func:`encode_bits`
    (``ValueError`` naming ``what`` for anything else)."""
    if not isinstance(block, dict) or not isinstance(block.get("zlib_b64"), str) \
            or not isinstance(block.get("n"), int) or block.get("dtype") not in ("<u2", "<u4",
                                                                                  "bits"):
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
    return a.astype(np.int64)


def labels_sha256(labels: Any) -> str:
    """SHA-256 of the labels as little-endian int64: the test set's fingerprint."""
    return hashlib.sha256(np.asarray(labels).astype("<i8").tobytes()).hexdigest()


def _head(labels: Any) -> dict[str, Any]:
    y = np.asarray(labels)
    return {"format": FORMAT, "n_test": int(y.size), "test_labels": encode_labels(y),
            "test_labels_sha256": labels_sha256(y)}


def linear_block(labels: Any, preds: Sequence[Any], seeds: Sequence[int]) -> dict[str, Any]:
    """The block of a linear probe: the test labels and each seed's predicted labels."""
    return {**_head(labels), "per_seed": [{"seed": int(s), "pred": encode_labels(p)}
                                          for s, p in zip(seeds, preds)]}


def knn_block(labels: Any, records: Sequence[dict[str, Any]], seeds: Sequence[int],
              k: int) -> dict[str, Any]:
    """The block of a k-NN evaluation: per split seed, the voted label at ``k`` and the
    recall hits (``records[i] = {"pred": (N,), "hits": {r: (N,) bool}}``)."""
    return {**_head(labels), "k": int(k),
            "per_seed": [{"seed": int(s), f"pred@{k}": encode_labels(r["pred"]),
                          **{f"hits@{q}": encode_bits(h) for q, h in r["hits"].items()}}
                         for s, r in zip(seeds, records)]}


def _linear_acc(pred: np.ndarray, y: np.ndarray) -> float:
    # the probe's arithmetic: a float32 count, times 100, over N, in float32
    correct = np.float32((pred == y).sum())
    return float(np.float32(np.float32(100.0) * correct) / np.float32(y.size))


def _knn_acc(hit: np.ndarray) -> float:
    return 100.0 * int(hit.sum()) / hit.size


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
    """``(problems, numbers checked, test-label SHA-256)`` of a result ``data`` of ``kind``
    (``"linear"`` or ``"knn"``) against its ``predictions`` block; no block: no problems,
    0 checked."""
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
        if kind == "linear":
            problems, n = _recheck_linear(data, block, y)
        else:
            problems, n = _recheck_knn(data, block, y)
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


def _recheck_linear(data, block, y) -> tuple[list[str], int]:
    ps, rs = _seeds(block, data)
    out, accs = [], []
    for i, (p, r) in enumerate(zip(ps, rs)):
        pred = decode(p.get("pred"), f"predictions.per_seed[{i}].pred")
        if pred.size != y.size:
            raise ValueError(f"predictions.per_seed[{i}]: {pred.size} predictions for "
                             f"{y.size} test labels")
        acc = _linear_acc(pred, y)
        accs.append(acc)
        if not _close(r.get("test_acc"), acc):
            out.append(f"per_seed[{i}] (seed {r.get('seed')}) test_acc {r.get('test_acc')!r}: "
                       f"its predictions give {acc:.6f}")
    out += _summary_problems(data, "test_acc", accs)
    return out, 2 * len(accs) + 1


def _recheck_knn(data, block, y) -> tuple[list[str], int]:
    ps, rs = _seeds(block, data)
    k = block.get("k")
    out: list[str] = []
    per_key: dict[str, list[float]] = {}
    for i, (p, r) in enumerate(zip(ps, rs)):
        test: dict[str, Any] = r["test"] if isinstance(r.get("test"), dict) else {}
        got = {f"acc@{k}": decode(p.get(f"pred@{k}"), f"predictions.per_seed[{i}].pred@{k}")
               == y}
        for name, blk in p.items():
            if name.startswith("hits@"):
                got[f"recall@{name[5:]}"] = decode(blk, f"predictions.per_seed[{i}].{name}")
        for key, hit in got.items():
            if hit.size != y.size:
                raise ValueError(f"predictions.per_seed[{i}] {key}: {hit.size} values for "
                                 f"{y.size} test labels")
            acc = _knn_acc(hit)
            per_key.setdefault(key, []).append(acc)
            if not _close(test.get(key), acc):
                out.append(f"per_seed[{i}] (seed {r.get('seed')}) test {key} "
                           f"{test.get(key)!r}: its predictions give {acc:.6f}")
        missing = sorted(set(test) - set(got))
        if missing:
            out.append(f"per_seed[{i}]: no predictions for {', '.join(missing)}")
    for key, vals in per_key.items():
        out += _summary_problems(data, key, vals)
    return out, sum(len(v) for v in per_key.values()) + len(per_key)
