"""The metric declarations (``weince.utils.metrics``) are the one list every reader takes
its metrics from: what the evaluations write is declared, the plausible ranges are the
declarations', and a metric declared with per-example values is written into and
recomputed from the predictions block without any other change."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import weince.utils.metrics as metrics
from weince.eval.knn import knn_eval
from weince.eval.linear import linear_probe
from weince.utils.metrics import METRICS, PerExample, Metric, metric_of, percent_float64
from weince.utils.predictions import knn_block, recheck
from weince.utils.results import RANGES, range_of
from weince.utils.summary import summary


def _features() -> dict:
    g = torch.Generator().manual_seed(3)
    yt, ye = torch.randint(0, 4, (120,), generator=g), torch.randint(0, 4, (50,), generator=g)
    return {"train": {"backbone": torch.randn(120, 6, generator=g) + yt[:, None],
                      "labels": yt},
            "test": {"backbone": torch.randn(50, 6, generator=g) + ye[:, None], "labels": ye}}


def test_every_number_an_evaluation_writes_is_declared_for_it():
    f = _features()
    knn = knn_eval(f, k=5, recall_ks=(1, 3), split_seeds=(1,))
    lin = linear_probe(f, epochs=2, seeds=(1,))
    for res, kind, record in ((knn, "knn", knn["per_seed"][0]["test"]),
                              (lin, "linear", lin["per_seed"][0])):
        keys = [k for k, v in record.items() if isinstance(v, float)]
        assert keys and all(metric_of(k) is not None and metric_of(k).evaluation == kind
                            for k in keys), keys
        assert all(k in res for k in keys)   # each with its summary


def test_the_plausible_ranges_are_the_declarations():
    for m in METRICS:
        assert (m.pattern, m.range) in RANGES
    assert range_of("knn.recall@7") == metric_of("recall@7").range
    assert metric_of("recall@x") is None and metric_of("fit.xi") is None


@pytest.mark.parametrize("m", [m for m in METRICS if m.per_example is not None],
                         ids=lambda m: m.key)
def test_an_entry_names_its_metric_back(m):
    key = m.key.format(n=7)
    assert m.key_of_entry(m.entry(key)) == key


def test_a_new_metric_is_written_and_recomputed_from_its_declaration_alone(monkeypatch):
    """A metric with per-example float values (a per-query score in [0, 1]) goes into the
    block and is recomputed by verify's recheck with no change but its declaration."""
    new = Metric("score@{n}", "a per-query score", metrics.PERCENT, "knn",
                 per_example=PerExample("s@{n}", "values", percent_float64))
    monkeypatch.setattr(metrics, "METRICS", (*METRICS, new))
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 40)
    per_query = [rng.random(40), rng.random(40)]
    hits = [rng.random(40) < 0.5 for _ in per_query]
    records = [{"score@5": s, "recall@1": h} for s, h in zip(per_query, hits)]
    tests = [{"score@5": percent_float64(s), "recall@1": percent_float64(h)}
             for s, h in zip(per_query, hits)]
    data = {"n_test": 40, "per_seed": [{"seed": i, "test": t} for i, t in enumerate(tests)],
            **{k: summary([t[k] for t in tests]) for k in ("score@5", "recall@1")},
            "predictions": knn_block(y, records, [0, 1], 5)}
    assert set(data["predictions"]["per_seed"][0]) == {"seed", "s@5", "hits@1"}
    assert recheck(data, "knn")[:2] == ([], 2 * (2 * 2 + 1))
    data["per_seed"][1]["test"]["score@5"] += 0.5
    assert any("seed 1) test score@5" in p for p in recheck(data, "knn")[0])
    # without its declaration, its number is named as one nothing recomputes
    monkeypatch.setattr(metrics, "METRICS", METRICS)
    problems = recheck({**data, "predictions": {**data["predictions"], "per_seed": [
        {k: v for k, v in p.items() if k != "s@5"} for p in data["predictions"]["per_seed"]]}},
        "knn")[0]
    assert problems == [f"per_seed[{i}]: no predictions for score@5" for i in (0, 1)]


def test_a_metric_without_predictions_is_not_asked_for_them():
    assert dataclasses.asdict(metric_of("val_acc"))["per_example"] is None
    assert metric_of("spearman").per_example is None and metric_of("spearman").test
