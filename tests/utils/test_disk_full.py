"""A full disk says so: a write that fails for lack of space raises one line naming the
file, the space it needed and the space left, and leaves no ``*.tmp`` behind (torch's
"unexpected pos 1823168 vs 1823060" and a bare "[Errno 28]" used to be all one saw)."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from weince.evt.scorefile import save_scores
from weince.models import build_simclr_model
from weince.models.vision import save_encoder
from weince.train.trainlog import JsonlLogger
from weince.utils import write_json
from weince.utils.checkpoint import save_checkpoint
from weince.utils.diskspace import DiskFullError, atomic_write, is_disk_full, payload_bytes


def _full(*_a, **_k):
    raise OSError(errno.ENOSPC, "No space left on device")


def _torch_full(obj, f, *a, **k):
    Path(f).write_bytes(b"partial")   # torch leaves a torn archive behind
    raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1823168 "
                       "vs 1823060")


def _no_tmp(folder: Path) -> None:
    left = [p for p in folder.rglob("*") if ".tmp" in p.name]
    assert left == [], left


def _check(err, path: Path, need: bool = True) -> None:
    msg = str(err.value)
    assert str(path) in msg and "no space left" in msg and "were free in" in msg, msg
    assert ("needs about" in msg) == need, msg
    assert "\n" not in msg and "unexpected pos" not in msg
    assert is_disk_full(err.value)


def test_write_json_on_a_full_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(Path, "write_text", _full)
    p = tmp_path / "run" / "linear.json"
    with pytest.raises(DiskFullError) as err:
        write_json(p, {"test_acc": 50.0})
    _check(err, p)
    _no_tmp(tmp_path)
    assert not p.exists()


@pytest.mark.parametrize("fault", [_full, _torch_full], ids=["ENOSPC", "torch enforce"])
def test_checkpoint_encoder_and_features_on_a_full_disk(tmp_path, monkeypatch, fault):
    monkeypatch.setattr(torch, "save", fault)
    state = {"model": {"w": torch.zeros(1000)}, "epoch": 3}
    p = tmp_path / "checkpoint.pt"
    with pytest.raises(DiskFullError) as err:
        save_checkpoint(p, **state)
    _check(err, p)
    assert "4.0 KB" in str(err.value)       # 1000 float32
    model = build_simclr_model("smallcnn", 16, 1, out_dim=8)
    enc = tmp_path / "encoder.pt"
    with pytest.raises(DiskFullError) as err:
        save_encoder(enc, model, {"backbone": "smallcnn", "image_size": 16, "channels": 1,
                                  "proj_dim": 8, "proj_hidden": None,
                                  "proj_batch_norm": True})
    _check(err, enc)
    _no_tmp(tmp_path)


def test_score_files_and_the_training_log_on_a_full_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(np, "savez", _full)
    p = tmp_path / "scores.npz"
    with pytest.raises(DiskFullError) as err:
        save_scores(p, np.zeros(100, dtype=np.float32))
    _check(err, p)
    monkeypatch.setattr(Path, "write_text", _full)
    with pytest.raises(DiskFullError):
        JsonlLogger(tmp_path / "train_log.jsonl", [{"epoch": 1}])
    _no_tmp(tmp_path)


def test_other_errors_pass_unchanged_and_leave_no_tmp(tmp_path):
    def bad(tmp):
        tmp.write_text("half")
        raise ValueError("not a disk problem")

    with pytest.raises(ValueError, match="not a disk problem"):
        atomic_write(tmp_path / "x.json", bad)
    _no_tmp(tmp_path)
    d = tmp_path / "model"

    def folder(tmp):   # a folder written whole (a model directory)
        tmp.mkdir()
        (tmp / "w.bin").write_bytes(b"1")
        raise OSError(errno.EDQUOT, "Disk quota exceeded")
    with pytest.raises(DiskFullError, match="model: no space left"):
        atomic_write(d, folder)
    assert not d.exists() and not (tmp_path / "model.tmp").exists()


def test_payload_bytes_counts_tensors_and_arrays():
    assert payload_bytes({"a": torch.zeros(10, dtype=torch.float64),
                          "b": [np.zeros(4, dtype=np.int32)], "c": 3}) == 80 + 16
    assert shutil.disk_usage(".").free > 0
