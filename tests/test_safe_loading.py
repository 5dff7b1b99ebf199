"""Opening a torch file never runs code: every loader reads with
``weights_only=True``; a crafted ``.pt`` whose unpickling would run a shell command is
refused with an error naming the file, and the command never runs. Old checkpoints and
corrupt files get the same kind of error (no fallback to an unsafe load)."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

from weince.cli import main as weince_main
from weince.utils.checkpoint import (UnreadableFileError, load_checkpoint, load_torch_file,
                                     restore_rng, rng_state, save_checkpoint)


class _Payload:
    """Unpickling this runs ``touch MARKER`` (what an attacker's file would do)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _malicious(path, marker, wrap=None):
    obj = _Payload(marker)
    torch.save(obj if wrap is None else wrap(obj), path)
    return path


def test_the_payload_would_run_under_an_unsafe_load(tmp_path):
    """Sanity check of the test itself: the crafted file does run its command when opened
    the old way, so the tests below would notice a loader that still did."""
    marker = tmp_path / "ran"
    _malicious(tmp_path / "x.pt", marker)
    torch.load(tmp_path / "x.pt", weights_only=False)
    assert marker.exists()


def test_features_cli_refuses_a_malicious_encoder(tmp_path, capsys):
    marker = tmp_path / "ran"
    enc = _malicious(tmp_path / "encoder.pt", marker,
                     wrap=lambda o: {"arch": o, "state_dict": {}, "cfg": {}})
    with pytest.raises(UnreadableFileError, match=r"encoder\.pt.*refusing to load.*pretrain"):
        weince_main(["features", "--encoder", str(enc), "--out",
                     str(tmp_path / "f.pt"), "--device", "cpu"])
    assert not marker.exists()


def test_linear_cli_refuses_malicious_features(tmp_path):
    marker = tmp_path / "ran"
    feats = _malicious(tmp_path / "features.pt", marker, wrap=lambda o: {"train": o})
    with pytest.raises(UnreadableFileError, match=r"features\.pt.*refusing.*weince features"):
        weince_main(["eval", "linear", "--features", str(feats), "--out",
                     str(tmp_path / "linear.json")])
    assert not marker.exists()


def test_pretrain_refuses_a_malicious_checkpoint(tmp_path):
    marker = tmp_path / "ran"
    _malicious(tmp_path / "checkpoint.pt", marker, wrap=lambda o: {"epoch": 1, "rng": o})
    with pytest.raises(UnreadableFileError, match=r"checkpoint\.pt.*refusing.*pretrain"):
        weince_main(["pretrain", "--out", str(tmp_path), "--set", "epochs=1",
                     "--set", "max_train_images=64", "--set", "batch_size=32",
                     "--set", "device=cpu"])
    assert not marker.exists()


def test_simcse_checkpoint_loader_refuses_a_malicious_file(tmp_path):
    marker = tmp_path / "ran"
    _malicious(tmp_path / "checkpoint.pt", marker)
    with pytest.raises(UnreadableFileError, match="refusing"):
        load_checkpoint(tmp_path / "checkpoint.pt", remake="re-run `weince simcse`")
    assert not marker.exists()


def test_an_old_checkpoint_with_numpy_state_is_refused_with_advice(tmp_path):
    """Checkpoints written before this change held numpy's state as a pickled array."""
    path = tmp_path / "checkpoint.pt"
    torch.save({"epoch": 1, "rng": {"numpy": np.random.get_state()}}, path)
    with pytest.raises(UnreadableFileError, match=r"checkpoint\.pt.*Delete it and re-run"):
        load_checkpoint(path, remake="re-run `weince pretrain`")


def test_rng_state_round_trips_through_a_weights_only_file(tmp_path):
    random.seed(11)
    np.random.seed(12)
    torch.manual_seed(13)
    random.gauss(0, 1)  # leaves a cached gaussian in python's state
    np.random.standard_normal()  # ... and in numpy's
    save_checkpoint(tmp_path / "c.pt", rng=rng_state())
    want = (random.random(), random.gauss(0, 1), np.random.standard_normal(3).tolist(),
            torch.rand(3).tolist())
    restore_rng(load_checkpoint(tmp_path / "c.pt")["rng"])
    got = (random.random(), random.gauss(0, 1), np.random.standard_normal(3).tolist(),
           torch.rand(3).tolist())
    assert got == want


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated", os.urandom(300)])
def test_a_corrupt_torch_file_names_the_file_and_the_fix(tmp_path, content):
    path = tmp_path / "encoder.pt"
    path.write_bytes(content)
    with pytest.raises(UnreadableFileError) as exc:
        load_torch_file(path, what="encoder file", remake="re-run the pretrain rule")
    msg = str(exc.value)
    assert str(path) in msg and "re-run the pretrain rule" in msg and "\n" not in msg
