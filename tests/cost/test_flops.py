"""The committed FLOPs table (src/weince/cost/flops.yaml) against a fresh count with torch
(weince.cost.flops): planning reads the table and never imports torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from weince.cost import counts, flops


def test_a_count_is_linear_in_the_batch_and_of_the_known_size(monkeypatch):
    # ResNet-50 at 224 px: 4.1 GMACs forward, so ~8.2 GFLOP forward, ~3x that for a step
    r50 = flops.count_vision("resnet50", 224, 3, "classes1000")
    assert r50["forward"] == pytest.approx(8.2e9, rel=0.02)
    assert r50["train"] == pytest.approx(3 * r50["forward"], rel=0.02)
    monkeypatch.setattr(flops, "COUNT_BATCH", 8)
    assert flops.count_vision("resnet50", 224, 3, "classes1000") == r50
    # bert-base: ~85M parameters outside the embeddings: ~2 x 85M FLOPs per token forward
    per_token = flops.count_text("bert-base", 32)["forward"] / 32
    assert 1.5e8 < per_token < 2.3e8


def test_the_table_s_entries_the_planner_reads_equal_a_fresh_count():
    """The CIFAR ResNet-18 and ViT-S steps and SimCSE's BERT, the most used entries."""
    table = counts.load_counts()
    for model, size in (("resnet18", 32), ("vit_s", 32)):
        fresh = flops.count_vision(model, size, 3, "proj64")
        assert table["vision"][counts.vision_key(model, size, 3, "proj64")] == fresh
    assert table["text"][counts.text_key("bert-base", 32)] == flops.count_text("bert-base", 32)


@pytest.mark.slow
def test_the_whole_table_equals_a_fresh_count():
    """`weince cost --recount` would write the committed table again (a change to a model,
    a data set or torch's counter shows here: rerun the command and commit the table)."""
    table = counts.load_counts()
    fresh = flops.count_entries()
    for part in ("datasets", "vision", "text"):
        assert table[part] == fresh[part], f"{part}: run `weince cost --recount`"


def test_planning_imports_no_torch():
    code = ("import sys; import weince.cost.estimate, weince.cost.pages, weince.cost.plan, "
            "weince.cost.evaljobs, weince.cost.forecast, weince.cli.plan; "
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_a_missing_entry_names_the_command_that_counts_it():
    with pytest.raises(ValueError, match=r"resnet18@40x3/proj64.*weince cost --recount"):
        counts.vision_counts("resnet18", 40)
    with pytest.raises(ValueError, match="unknown data set 'svhn'"):
        counts.dataset_spec("svhn")
