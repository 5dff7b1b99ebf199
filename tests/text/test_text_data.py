"""Text data: STS-B loaders in both real layouts, wiki1m, and the synthetic generators."""

from __future__ import annotations

import re

import numpy as np
import pytest

from weince.data.text import (generate_corpus, generate_sts_pairs, load_sts, load_stsb,
                              load_train_sentences, load_wiki1m)

# SentEval / STS Benchmark rows: genre, file, year, id, score, s1, s2 [, source cols]
SENTEVAL_DEV = [
    ("main-captions", "MSRvid", "2012test", "0000", "5.000", "A man with a hard hat is dancing.",
     "A man wearing a hard hat is dancing."),
    ("main-news", "headlines", "2013", "0005", "0.600", 'He said "no" to the "deal".',
     "Stocks fell on Monday.", "src1", "src2"),
    ("main-forums", "answers-forums", "2015", "0011", "3.25", "It depends on the context.",
     "That depends on the situation."),
]
GLUE_HEADER = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
               "sentence1", "sentence2", "score"]
GLUE_DEV = [
    ["0", "main-captions", "MSRvid", "2012test", "0000", "none", "none",
     "A man is playing a flute.", "A man is playing a bamboo flute.", "3.800"],
    ["1", "main-news", "headlines", "2013", "0001", "none", "none",
     'Obama says "yes".', "Markets rallied.", "0.000"],
]


def _write_senteval(folder, split, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"sts-{split}.csv").write_text("".join("\t".join(r) + "\n" for r in rows))


def _write_glue(folder, split, header, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.tsv").write_text(
        "\t".join(header) + "\n" + "".join("\t".join(r) + "\n" for r in rows))


@pytest.mark.parametrize("sub", ["", "stsbenchmark", "STSBenchmark"])
def test_senteval_layout(tmp_path, sub):
    _write_senteval(tmp_path / sub if sub else tmp_path, "dev", SENTEVAL_DEV)
    p = load_stsb(tmp_path, "dev")
    assert len(p) == 3
    assert p.sentences1[0] == "A man with a hard hat is dancing."
    assert p.sentences2[1] == "Stocks fell on Monday."      # extra source columns ignored
    assert p.sentences1[1] == 'He said "no" to the "deal".'  # bare quotes kept verbatim
    np.testing.assert_array_equal(p.scores, [5.0, 0.6, 3.25])
    assert not p.synthetic and p.source.endswith("sts-dev.csv")


def test_glue_layout(tmp_path):
    _write_glue(tmp_path / "STS-B", "dev", GLUE_HEADER, GLUE_DEV)
    p = load_stsb(tmp_path, "dev")
    assert p.sentences1 == ["A man is playing a flute.", 'Obama says "yes".']
    assert p.sentences2 == ["A man is playing a bamboo flute.", "Markets rallied."]
    np.testing.assert_array_equal(p.scores, [3.8, 0.0])
    # the STS-B folder itself may be the root
    assert load_stsb(tmp_path / "STS-B", "dev").sentences2 == p.sentences2


def test_glue_test_split_has_no_gold(tmp_path):
    _write_glue(tmp_path / "STS-B", "test", GLUE_HEADER[:-1], [r[:-1] for r in GLUE_DEV])
    with pytest.raises(ValueError, match="sts-test.csv"):
        load_stsb(tmp_path, "test")


def test_senteval_preferred_over_glue(tmp_path):
    _write_senteval(tmp_path, "dev", SENTEVAL_DEV)
    _write_glue(tmp_path / "STS-B", "dev", GLUE_HEADER, GLUE_DEV)
    assert len(load_stsb(tmp_path, "dev")) == 3


def test_missing_stsb_names_files_and_source(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_stsb(tmp_path, "test")
    msg = str(err.value)
    assert str(tmp_path / "sts-test.csv") in msg
    assert str(tmp_path / "STS-B" / "test.tsv") in msg
    assert "Stsbenchmark.tar.gz" in msg and "STS-B.zip" in msg


def test_bad_split_and_malformed(tmp_path):
    with pytest.raises(ValueError, match="valid: train, dev, test"):
        load_stsb(tmp_path, "validation")
    (tmp_path / "sts-dev.csv").write_text("a\tb\tc\n")
    with pytest.raises(ValueError, match="7 tab-separated"):
        load_stsb(tmp_path, "dev")
    (tmp_path / "sts-dev.csv").write_text("g\tf\t2012\t1\tfive\tx\ty\n")
    with pytest.raises(ValueError, match="not a number"):
        load_stsb(tmp_path, "dev")


def test_wiki1m(tmp_path):
    f = tmp_path / "wiki1m_for_simcse.txt"
    f.write_text("First sentence.\n\n  Second one.  \nThird.\n")
    assert load_wiki1m(f) == ["First sentence.", "Second one.", "Third."]
    assert load_wiki1m(f, limit=2) == ["First sentence.", "Second one."]
    assert load_train_sentences(f, n=1) == ["First sentence."]
    with pytest.raises(FileNotFoundError, match="wiki1m_for_simcse.txt"):
        load_wiki1m(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(ValueError, match="no sentence"):
        load_wiki1m(tmp_path / "empty.txt")


# ---------------------------------------------------------------- synthetic generators
def test_corpus_deterministic_distinct():
    a = generate_corpus(3000, seed=3)
    assert a == generate_corpus(3000, seed=3)
    assert len(set(a)) == 3000
    assert a != generate_corpus(3000, seed=4)
    assert all(s[0].isupper() and s.endswith(".") for s in a)
    with pytest.raises(ValueError):
        generate_corpus(0)


def test_pairs_deterministic_and_labelled():
    a, b = generate_sts_pairs(300, seed=5), generate_sts_pairs(300, seed=5)
    assert a.sentences1 == b.sentences1 and a.sentences2 == b.sentences2
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.synthetic and "synthetic" in a.source
    c = generate_sts_pairs(300, seed=6)
    assert c.sentences1 != a.sentences1
    # synthetic dev and test differ; both are synthetic
    dev, test = load_sts("synthetic", "dev", n_synthetic=50), load_sts("synthetic", "test",
                                                                      n_synthetic=50)
    assert dev.synthetic and test.synthetic and dev.sentences1 != test.sentences1


_STOP = {"a", "an", "the", "is", "are", "being", "by", "not", "does", "do", "some", "my",
         "two", "of", "in", "on", "at", "for", "this", "near", "to"}


def _stem(w: str) -> str:
    for suf in ("ing", "ed", "es", "s"):
        if w.endswith(suf) and len(w) > len(suf) + 2:
            return w[: -len(suf)]
    return w


def _content(s: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z]+", s.lower()) if w not in _STOP}


def test_gold_follows_construction_and_is_monotone():
    p = generate_sts_pairs(3000, seed=0)
    levels = np.array([m["level"] for m in p.meta])
    neg = np.array([m["negated"] for m in p.meta])
    # gold is exactly level - 2 * negated, within 0..5, every level present
    np.testing.assert_array_equal(p.scores, levels - 2 * neg)
    assert p.scores.min() == 0 and p.scores.max() == 5
    assert set(levels) == set(range(6))
    assert not neg[levels < 3].any() and neg[levels >= 3].mean() > 0.05
    # negation is visible in exactly one sentence of a negated pair
    for s1, s2, n in zip(p.sentences1, p.sentences2, neg):
        assert ((" not " in s1) + (" not " in s2) == 1) == n or not n
    # level 5: a different rendering of the same content words
    for s1, s2, lv, n in zip(p.sentences1, p.sentences2, levels, neg):
        if lv == 5 and not n:
            assert s1 != s2
    # each level shares exactly the slots its construction says
    expected = {5: [{"topic", "subject", "verb", "object", "detail"}],
                4: [{"topic", "subject", "verb", "object"}],
                3: [{"topic", "subject", "verb"}],
                2: [{"topic", "subject"}, {"topic", "object"}],
                1: [{"topic"}], 0: [set()]}
    for m in p.meta:
        assert set(m["shared"]) in expected[m["level"]], m
    # so gold (non-negated) is monotone in the number of shared slots
    n_shared = np.array([len(m["shared"]) for m in p.meta])
    order = np.argsort(n_shared[~neg], kind="stable")
    assert np.all(np.diff(p.scores[~neg][order]) >= 0)
    # and shared content words grow strictly with the level from 1 to 5 (0 and 1 share
    # none: they differ by topic only)
    jac = np.array([len(_content(a) & _content(b)) / len(_content(a) | _content(b))
                    for a, b in zip(p.sentences1, p.sentences2)])
    means = [jac[(levels == lv) & ~neg].mean() for lv in range(6)]
    assert all(x < y for x, y in zip(means[1:], means[2:])), means
    assert means[0] < 0.02 and means[1] < 0.02 and means[5] > 0.85
