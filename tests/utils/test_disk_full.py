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
from safetensors import SafetensorError
from transformers import BertConfig, BertModel

from weince.evt.scorefile import save_scores
from weince.models import build_simclr_model
from weince.models.text import SimCSEModel
from weince.models.vision import save_encoder
from weince.train.simcse import _save_best
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


def _tiny_simcse():
    cfg = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16)
    return SimCSEModel(BertModel(cfg))


def test_simcse_model_on_a_full_disk_names_the_folder_and_keeps_the_old_one(tmp_path,
                                                                             monkeypatch):
    """SimCSE's best model goes through the same write as pretraining's files: a full disk
    (safetensors' "No space left on device") names ``model``, the bytes and the space left,
    leaves no ``model.tmp`` and keeps the best model written before."""
    model = _tiny_simcse()
    first = _save_best(model, None, tmp_path)
    assert first == tmp_path / "model" and (first / "config.json").is_file()
    before = {p.name: p.read_bytes() for p in first.iterdir()}

    def full(folder, *a, **k):
        Path(folder, "model.safetensors").write_bytes(b"partial")
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: '
                              'StorageFull, message: "No space left on device" })')

    monkeypatch.setattr(model.encoder, "save_pretrained", full)
    with pytest.raises(DiskFullError) as err:
        _save_best(model, None, tmp_path)
    _check(err, tmp_path / "model")
    _no_tmp(tmp_path)
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before
    monkeypatch.undo()
    with torch.no_grad():
        model.mlp[0].bias.add_(1.0)
    _save_best(model, None, tmp_path)          # a better model replaces the folder whole
    assert (tmp_path / "model" / "simcse_mlp.pt").read_bytes() != before["simcse_mlp.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
