"""Before a run plans or starts a job: its data are on disk (else each missing path and
how to obtain it), its disk has room for its peak (printed, an error when short), and no
live run writes its results (the paper profile used to plan 15,032 jobs without data)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from weince.pipeline.claims import validate_with_defaults
from weince.pipeline.preflight import (DataMissingError, DiskSpaceError, LiveRunError,
                                       check_data, check_no_live_writers, check_space,
                                       missing_data, space_needed)
from weince.pipeline.profile import Profile
from weince.utils.config import deep_merge

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def profile(*names, **top):
    cfg: dict = {}
    for n in ("config.yaml", *names):
        deep_merge(cfg, yaml.safe_load((REPO / "config" / n).read_text()))
    cfg.update(top)
    return dict(Profile.of(cfg).config)


@pytest.mark.parametrize("names", [(), ("smoke.yaml",)], ids=["default", "smoke"])
def test_offline_profiles_need_no_data_on_disk(names):
    assert missing_data(profile(*names)) == []


def test_paper_profile_without_data_names_each_missing_path_and_how(tmp_path):
    cfg = profile("paper.yaml", data_root=str(tmp_path / "data"))
    gone = missing_data(cfg)
    text = "\n".join(gone)
    for name, path in [("cifar100", "cifar-100-python/train"),
                       ("imagenet32", "imagenet32/train_data_batch_1"),
                       ("tinyimagenet", "tiny-imagenet-200/wnids.txt"),
                       ("stl10", "stl10_binary/unlabeled_X.bin")]:
        line = next(g for g in gone if g.startswith(f"{name}:"))
        assert str(tmp_path / "data" / path) in line, line
    assert "image-net.org" in text and "download: true" in text
    assert f"wiki1m corpus not found at {tmp_path / 'data'}/wiki1m_for_simcse.txt" in text
    assert "STS-B test split not found" in text
    with pytest.raises(DataMissingError, match="weince synthetic-data"):
        check_data(cfg)


def test_downloadable_sets_count_as_obtainable_and_present_files_pass(tmp_path):
    root = tmp_path / "data"
    cfg = profile("paper.yaml", data_root=str(root), download=True)
    names = {g.split(":")[0] for g in missing_data(cfg)}
    assert {"cifar10", "cifar100", "stl10"}.isdisjoint(names)
    assert {"imagenet32", "tinyimagenet"} <= names
    # the files a loader reads, present: nothing missing for that pair
    cfg = profile("paper.yaml", data_root=str(root))
    cfg["vision"]["pairs"] = [["cifar100", "resnet18"]]
    cfg["text"]["enabled"] = False
    cfg["norms"]["text"]["enabled"] = False
    assert any(g.startswith("cifar100:") for g in missing_data(cfg))
    for f in ("train", "test", "meta"):
        (root / "cifar-100-python").mkdir(parents=True, exist_ok=True)
        (root / "cifar-100-python" / f).write_bytes(b"")
    assert missing_data(cfg) == []


def test_dry_run_of_the_paper_profile_without_data_stops_before_planning(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                        "config/paper.yaml", "--config", f"data_root={tmp_path / 'none'}"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Job stats" not in out, out[-2000:]
    assert "DataMissingError" in out and "reads data that are not on disk" in out
    assert str(tmp_path / "none" / "imagenet32" / "train_data_batch_1") in out


# ------------------------------------------------------------------ disk space
def test_space_estimate_counts_results_and_the_checkpoints_in_flight():
    cfg = profile("smoke.yaml")
    one, two = space_needed(cfg, parallel=1), space_needed(cfg, parallel=2)
    assert one["final"] == two["final"] > 0
    assert two["checkpoints"] > one["checkpoints"] > 0
    assert two["peak"] == two["final"] + two["checkpoints"]
    # a SimCSE checkpoint is ~3x its model (weights + Adam's two moments): MiniLM's ~273 MB
    assert 200e6 < one["checkpoints"] < 350e6


def test_encoder_size_in_the_estimate_is_the_models(tmp_path):
    import torch

    from weince.models import build_simclr_model
    from weince.pipeline.preflight import _vision_model

    n, feat, head = _vision_model("smallcnn", 16, 1, {"proj_dim": 32})
    m = build_simclr_model("smallcnn", 16, 1, out_dim=32)
    assert n == sum(p.numel() for p in m.parameters()) and head == 32
    assert m(torch.zeros(2, 1, 16, 16))[0].shape[1] == feat


def test_a_disk_too_small_stops_the_run_with_the_numbers(monkeypatch, capsys):
    cfg = profile("smoke.yaml")
    monkeypatch.setattr("weince.utils.diskspace.free_bytes", lambda p: 10_000_000)
    with pytest.raises(DiskSpaceError) as err:
        check_space(cfg, 2)
    msg = str(err.value)
    assert "10.0 MB free" in msg and "needs about" in msg and "results" in msg
    assert "disk: this profile needs about" in capsys.readouterr().err
    monkeypatch.setattr("weince.utils.diskspace.free_bytes", lambda p: 10**13)
    assert check_space(cfg, 2)["peak"] > 0


def test_a_live_writer_in_the_profiles_results_stops_a_second_run(tmp_path):
    cfg = profile("smoke.yaml", results=str(tmp_path / "results"))
    run = tmp_path / "results" / cfg["profile"] / "vision" / "x"
    check_no_live_writers(cfg)
    code = textwrap.dedent(f"""
        import time
        from weince.utils.runlock import run_lock
        with run_lock({str(run)!r}, "train"):
            print("held", flush=True)
            time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(LiveRunError) as err:
            check_no_live_writers(cfg)
        assert f"PID {p.pid}" in str(err.value) and "--unlock" in str(err.value)
    finally:
        p.kill()
        p.wait()
    check_no_live_writers(cfg)


def test_the_skip_variable_plans_without_the_data(tmp_path, monkeypatch):
    cfg = profile("paper.yaml", data_root=str(tmp_path / "none"))
    monkeypatch.setenv("WEINCE_SKIP_PREFLIGHT", "1")
    check_data(cfg)                       # counting the jobs of a profile needs no data
    monkeypatch.delenv("WEINCE_SKIP_PREFLIGHT")
    with pytest.raises(DataMissingError, match="WEINCE_SKIP_PREFLIGHT=1 plans without"):
        check_data(cfg)
