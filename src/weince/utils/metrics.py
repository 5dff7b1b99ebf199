"""The metrics, each declared once: what its values are, which evaluation writes it, and how
``weince verify`` recomputes it from the per-example test predictions.

Everything that handles a metric reads :data:`METRICS` (and :data:`EVALUATIONS`): the
plausible ranges checked on every read (:data:`weince.utils.results.RANGES`), verify's
recheck from the predictions block (:mod:`weince.utils.predictions`), the re-evaluation of
an archive (:mod:`weince.bundle.reevaluate`) and the claims registry's ``readings`` (a
metric a claim's table shows without a verdict). The evaluation computes the metric and
writes it under its key; a claim or an ablation table names the key in ``config/claims.yaml``.

A declaration covers a family of keys: ``"recall@{n}"`` is ``recall@1``, ``recall@5``, ...
(``{n}`` an integer). Where the evaluation keeps per-example predictions, the
declaration names the entry of a per-seed predictions record that holds them (``"hits@{n}"``
for ``recall@{n}``), what the entry holds (``labels``: each example's predicted class,
scored against the test labels; ``flags``: each example's 0/1; ``values``: each example's
value, a float) and how the per-example values make the metric (:attr:`PerExample.score`,
in the evaluation's own float arithmetic, so that the recomputed number is the written one).

    from weince.utils.metrics import metric_of
    metric_of("recall@5").evaluation      # 'knn'
    metric_of("recall@5").entry("recall@5")   # 'hits@5'

Adding a metric: compute it in its evaluation (per seed, under the key), declare it here,
and, to show it, name it in a claim of ``config/claims.yaml`` (``readings`` when the paper
gave no figure for it).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = ["Range", "PerExample", "Metric", "Evaluation", "METRICS", "EVALUATIONS",
           "metric_of", "metric_of_entry", "metrics_of", "evaluation_of", "PERCENT"]


@dataclass(frozen=True)
class Range:
    """The values a metric can take: ``lo``/``hi`` (inclusive unless ``open_lo``/``open_hi``)."""

    what: str
    lo: float = -math.inf
    hi: float = math.inf
    open_lo: bool = False
    open_hi: bool = False

    def holds(self, v: float) -> bool:
        return ((v > self.lo if self.open_lo else v >= self.lo)
                and (v < self.hi if self.open_hi else v <= self.hi))

    def __str__(self) -> str:
        if self.lo == -math.inf and self.hi == math.inf:
            return "finite"
        if self.hi == math.inf:
            return f"{'>' if self.open_lo else '>='} {self.lo:g}"
        return (f"{'(' if self.open_lo else '['}{self.lo:g}, {self.hi:g}"
                f"{')' if self.open_hi else ']'}")


PERCENT = Range("an accuracy/recall in percent", 0.0, 100.0)


def percent_float32(correct: np.ndarray) -> float:
    """The linear probe's arithmetic: a float32 count, times 100, over N, in float32."""
    n = np.float32(correct.sum())
    return float(np.float32(np.float32(100.0) * n) / np.float32(correct.size))


def percent_float64(values: np.ndarray) -> float:
    """The k-NN's arithmetic: the sum (an integer count for 0/1), times 100, over N."""
    total = int(values.sum()) if values.dtype == bool else float(values.sum())
    return 100.0 * total / values.size


@dataclass(frozen=True)
class PerExample:
    """How a metric is recomputed from the per-example predictions its evaluation keeps."""

    entry: str                                   # the per-seed record's entry: "hits@{n}"
    holds: Literal["labels", "flags", "values"]  # what the entry holds (module docstring)
    score: Callable[[np.ndarray], float]         # per-example values -> the metric


@functools.cache
def _template(t: str) -> re.Pattern:
    return re.compile(re.escape(t).replace(re.escape("{n}"), r"(?P<n>\d+)") + r"\Z")


@dataclass(frozen=True)
class Metric:
    """One metric or family of keys (``"acc@{n}"``): its range, direction and evaluation,
    and how it is recomputed from per-example predictions (None: it is not)."""

    key: str                         # the key in result files, "{n}" for a family
    meaning: str                     # in words, for pages and messages
    range: Range
    evaluation: str                  # the name of its :class:`Evaluation`
    higher_is_better: bool = True
    test: bool = True                # a test-set figure (re-evaluated); else validation/training
    per_example: PerExample | None = None

    @property
    def pattern(self) -> re.Pattern:
        """The keys of this declaration, matched whole (``recall@\\d+``)."""
        return _template(self.key)

    def matches(self, key: str) -> bool:
        return bool(self.pattern.match(key))

    def entry(self, key: str) -> str | None:
        """The predictions entry that holds ``key``'s per-example values (None: none)."""
        m = _template(self.key).match(key)
        if m is None or self.per_example is None:
            return None
        return self.per_example.entry.format(**m.groupdict())

    def key_of_entry(self, entry: str) -> str | None:
        """The metric key whose per-example values the predictions entry ``entry`` holds."""
        if self.per_example is None:
            return None
        m = _template(self.per_example.entry).match(entry)
        return self.key.format(**m.groupdict()) if m else None


@dataclass(frozen=True)
class Evaluation:
    """An evaluation that writes metrics: its result file and where a per-seed record of
    that file holds the test numbers (``""``: the record itself)."""

    name: str
    title: str
    file: str
    per_seed_at: str


EVALUATIONS: tuple[Evaluation, ...] = (
    Evaluation("linear", "linear probe", "linear.json", ""),
    Evaluation("knn", "k-NN", "knn.json", "test"),
    Evaluation("sts", "STS (cosine of sentence embeddings against gold scores)", "sts.json",
               ""),
)

#: Every metric an evaluation writes (result keys are matched against ``key`` whole).
METRICS: tuple[Metric, ...] = (
    Metric("test_acc", "linear-probe top-1 accuracy on the test set", PERCENT, "linear",
           per_example=PerExample("pred", "labels", percent_float32)),
    Metric("val_acc", "linear-probe top-1 accuracy on the validation split", PERCENT, "linear",
           test=False),
    Metric("train_acc", "top-1 accuracy on the training set", PERCENT, "linear", test=False),
    Metric("acc@{n}", "k-NN top-1 accuracy of the weighted vote of the n nearest", PERCENT,
           "knn", per_example=PerExample("pred@{n}", "labels", percent_float64)),
    Metric("recall@{n}", "k-NN recall: one of the n nearest shares the query's label", PERCENT,
           "knn", per_example=PerExample("hits@{n}", "flags", percent_float64)),
    Metric("spearman", "Spearman correlation x 100 of cosine and gold similarity", Range(
        "a correlation x 100 (STS)", -100.0, 100.0), "sts"),
    Metric("pearson", "Pearson correlation x 100 of cosine and gold similarity", Range(
        "a correlation x 100 (STS)", -100.0, 100.0), "sts"),
)


def metric_of(key: Any) -> Metric | None:
    """The declaration of a (dotted) metric key, by its last part; None when undeclared."""
    leaf = str(key).rsplit(".", 1)[-1]
    return next((m for m in METRICS if m.matches(leaf)), None)


def metric_of_entry(entry: str) -> tuple[Metric, str] | None:
    """The declaration whose per-example predictions a predictions entry holds
    (``"hits@5"``), and the metric key (``"recall@5"``); None when no declaration does."""
    for m in METRICS:
        key = m.key_of_entry(entry)
        if key is not None:
            return m, key
    return None


def metrics_of(evaluation: str, *, test_only: bool = False) -> list[Metric]:
    """The metrics ``evaluation`` writes (its test figures only with ``test_only``)."""
    return [m for m in METRICS if m.evaluation == evaluation and (m.test or not test_only)]


def evaluation_of(name: str) -> Evaluation:
    """The :class:`Evaluation` named ``name`` (``ValueError`` naming the known ones)."""
    for e in EVALUATIONS:
        if e.name == name:
            return e
    raise ValueError(f"no evaluation {name!r}; known: {', '.join(e.name for e in EVALUATIONS)}")
