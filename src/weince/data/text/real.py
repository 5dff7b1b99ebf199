"""Real text data: the wiki1m corpus and STS-B (paper profile), and the pair type.

- **wiki1m**: ``wiki1m_for_simcse.txt``, one sentence a line (1,000,000 lines), from the
  SimCSE authors (``data/download_wiki.sh`` in princeton-nlp/SimCSE, or
  https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse). Read with
  :func:`load_wiki1m`.
- **STS-B**, in either standard distribution, under one root folder (:func:`load_stsb`):

  * SentEval / original STS Benchmark: ``sts-train.csv``, ``sts-dev.csv``, ``sts-test.csv``,
    tab-separated without header: genre, file, year, id, score, sentence1, sentence2
    (some lines carry two more source columns). From
    http://ixa2.si.ehu.eus/stswiki/images/4/48/Stsbenchmark.tar.gz (unpacks to
    ``stsbenchmark/``) or SentEval's ``data/downstream/STS/STSBenchmark``. Looked for in
    ``ROOT``, ``ROOT/stsbenchmark`` and ``ROOT/STSBenchmark``.
  * GLUE: ``STS-B/train.tsv``, ``STS-B/dev.tsv`` with a header naming ``sentence1``,
    ``sentence2`` and ``score`` (https://dl.fbaipublicfiles.com/glue/data/STS-B.zip). Looked
    for in ``ROOT/STS-B`` and ``ROOT``. GLUE's ``test.tsv`` has no gold scores, so the test
    split must come from the SentEval files (a clear error says so).

  Lines are split on tabs only (no CSV quoting: the STS files contain bare quotes).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from weince.data.marker import synthetic_marker

__all__ = ["STSPairs", "SPLITS", "load_wiki1m", "load_stsb", "missing_wiki1m", "missing_stsb"]

SPLITS = ("train", "dev", "test")
WIKI1M_HELP = (
    "download wiki1m_for_simcse.txt (one sentence a line) from "
    "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/"
    "wiki1m_for_simcse.txt (princeton-nlp/SimCSE data/download_wiki.sh), or use "
    "train_data: synthetic for the embedded offline default"
)
STSB_HELP = (
    "get the SentEval files from http://ixa2.si.ehu.eus/stswiki/images/4/48/"
    "Stsbenchmark.tar.gz (unpacks to stsbenchmark/sts-{train,dev,test}.csv) or the GLUE copy "
    "from https://dl.fbaipublicfiles.com/glue/data/STS-B.zip (STS-B/{train,dev}.tsv; GLUE's "
    "test.tsv has no gold scores), or use sts_data: synthetic for the embedded offline default"
)


@dataclass
class STSPairs:
    """Sentence pairs with gold similarity scores.

    Attributes:
        sentences1, sentences2: lists of ``n`` strings.
        scores: float64 array ``(n,)``, gold similarity on the 0-5 scale.
        source: where the pairs came from (a file path, or ``synthetic(seed=..)``).
        synthetic: True for pairs made by :func:`generate_sts_pairs`.
        meta: per-pair construction record for synthetic pairs
            (``{"level", "negated", "topic", "shared"}``), else empty.
    """

    sentences1: list[str]
    sentences2: list[str]
    scores: np.ndarray
    source: str = ""
    synthetic: bool = False
    meta: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.scores = np.asarray(self.scores, dtype=np.float64)
        if not (len(self.sentences1) == len(self.sentences2) == len(self.scores)):
            raise ValueError(
                f"STSPairs: lengths differ (sentences1 {len(self.sentences1)}, sentences2 "
                f"{len(self.sentences2)}, scores {len(self.scores)})"
            )

    def __len__(self) -> int:
        return len(self.scores)


# --------------------------------------------------------------------------- real data
def load_wiki1m(path: str | Path, limit: int | None = None) -> list[str]:
    """Sentences of a one-sentence-a-line text file (wiki1m), blank lines skipped.

    Args:
        path: the ``wiki1m_for_simcse.txt`` file.
        limit: keep only the first ``limit`` sentences (None or 0: all).
    Raises:
        FileNotFoundError: the file is missing (the message says where to get it).
        ValueError: the file holds no sentence.
    """
    path = Path(path)
    gone = missing_wiki1m(path)
    if gone:
        raise FileNotFoundError(gone)
    out: list[str] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                out.append(line)
                if limit and len(out) >= limit:
                    break
    if not out:
        raise ValueError(f"{path} holds no sentence (expected one sentence a line)")
    return out


def missing_wiki1m(path: str | Path) -> str | None:
    """``None`` when the wiki1m file exists, else what is missing and how to get it."""
    path = Path(path)
    return None if path.is_file() else f"wiki1m corpus not found at {path}; {WIKI1M_HELP}"


def missing_stsb(root: str | Path, split: str, sep: str = "\n  ") -> str | None:
    """``None`` when an STS-B file of ``split`` exists under ``root`` (:func:`load_stsb`'s
    search), else the paths looked for and how to get them."""
    candidates = _stsb_candidates(Path(root), split)
    if any(p.is_file() for p in candidates):
        return None
    listed = sep.join(str(p) for p in candidates)
    lead = sep if "\n" in sep else " "
    return (f"STS-B {split} split not found under {root}; expected one of:{lead}{listed}"
            f"{chr(10) if sep.startswith(chr(10)) else '; '}{STSB_HELP}")


def _stsb_candidates(root: Path, split: str) -> list[Path]:
    senteval = [root / f"sts-{split}.csv", root / "stsbenchmark" / f"sts-{split}.csv",
                root / "STSBenchmark" / f"sts-{split}.csv"]
    glue = [root / "STS-B" / f"{split}.tsv", root / f"{split}.tsv"]
    return senteval + glue


def _read_senteval(path: Path) -> STSPairs:
    s1, s2, scores = [], [], []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) < 7:
                raise ValueError(
                    f"{path}:{lineno}: expected at least 7 tab-separated columns "
                    f"(genre, file, year, id, score, sentence1, sentence2), got {len(cols)}"
                )
            try:
                score = float(cols[4])
            except ValueError:
                raise ValueError(f"{path}:{lineno}: score column (5th) is not a number: "
                                 f"{cols[4]!r}") from None
            scores.append(score)
            s1.append(cols[5].strip())
            s2.append(cols[6].strip())
    return STSPairs(s1, s2, np.array(scores), source=str(path))


def _read_glue(path: Path, split: str) -> STSPairs:
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows:
        raise ValueError(f"{path} is empty")
    header = [h.strip() for h in rows[0]]
    for col in ("sentence1", "sentence2"):
        if col not in header:
            raise ValueError(f"{path}: GLUE header lacks {col!r} (header: {header})")
    if "score" not in header:
        raise ValueError(
            f"{path} has no 'score' column: GLUE's STS-B {split} split hides its gold scores; "
            f"use the SentEval file sts-{split}.csv instead ({STSB_HELP})"
        )
    i1, i2, isc = header.index("sentence1"), header.index("sentence2"), header.index("score")
    s1, s2, scores = [], [], []
    for lineno, row in enumerate(rows[1:], 2):
        if not any(c.strip() for c in row):
            continue
        if len(row) <= max(i1, i2, isc):
            raise ValueError(f"{path}:{lineno}: expected {len(header)} columns, got {len(row)}")
        s1.append(row[i1].strip())
        s2.append(row[i2].strip())
        scores.append(float(row[isc]))
    return STSPairs(s1, s2, np.array(scores), source=str(path))


def load_stsb(root: str | os.PathLike, split: str) -> STSPairs:
    """STS-B pairs of one split from a local root, in SentEval or GLUE layout.

    Looks, in order, for ``ROOT/sts-{split}.csv``, ``ROOT/stsbenchmark/sts-{split}.csv``,
    ``ROOT/STSBenchmark/sts-{split}.csv`` (SentEval, no header) and
    ``ROOT/STS-B/{split}.tsv``, ``ROOT/{split}.tsv`` (GLUE, with header).

    Args:
        root: the data folder.
        split: ``"train"``, ``"dev"`` or ``"test"``.
    Returns:
        :class:`STSPairs` with gold scores on the 0-5 scale.
    Raises:
        ValueError: unknown split, malformed file, or GLUE test file (no gold scores).
        FileNotFoundError: none of the expected files exists (all are named).
    """
    if split not in SPLITS:
        raise ValueError(f"unknown STS-B split {split!r}; valid: {', '.join(SPLITS)}")
    root = Path(root)
    candidates = _stsb_candidates(root, split)
    for path in candidates:
        if path.is_file():
            pairs = _read_senteval(path) if path.suffix == ".csv" else _read_glue(path, split)
            pairs.synthetic = bool(synthetic_marker(path))   # `weince synthetic-data` files
            return pairs
    raise FileNotFoundError(missing_stsb(root, split))
