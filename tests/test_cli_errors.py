"""Errors a user can act on: a corrupt file's error names the file, what
is wrong and the rule that remakes it (no numpy advice to allow pickles); on the command
line an error is one line, the traceback only under ``--debug`` or ``WEINCE_DEBUG=1``."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from weince import cli
from weince.evt.scorefile import load_scores, save_scores
from weince.models import build_simclr_model, save_encoder
from weince.train.simclr import pretrain
from weince.utils.checkpoint import UnreadableFileError


def _console(monkeypatch, capsys, *argv, debug_env=None):
    """``weince ARGV`` as the console script runs it (``main()`` reads ``sys.argv``)."""
    if debug_env is None:
        monkeypatch.delenv("WEINCE_DEBUG", raising=False)
    else:
        monkeypatch.setenv("WEINCE_DEBUG", debug_env)
    monkeypatch.setattr(sys, "argv", ["weince", *argv])
    rc = cli.main()
    return rc, capsys.readouterr().err


@pytest.fixture
def truncated_encoder(tmp_path):
    model = build_simclr_model("smallcnn", 16, 1)
    path = tmp_path / "encoder.pt"
    save_encoder(path, model, {"backbone": "smallcnn", "image_size": 16, "channels": 1,
                               "dataset": "digits"})
    path.write_bytes(path.read_bytes()[:4000])
    return path


def test_truncated_encoder_is_one_line_naming_file_and_rule(truncated_encoder, tmp_path,
                                                           monkeypatch, capsys):
    rc, err = _console(monkeypatch, capsys, "features", "--encoder", str(truncated_encoder),
                       "--out", str(tmp_path / "f.pt"), "--device", "cpu")
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith("weince features: error: ")
    assert str(truncated_encoder) in lines[0] and "truncated or corrupt" in lines[0]
    assert f"snakemake --forcerun {truncated_encoder}" in lines[0] and "Traceback" not in err


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback(truncated_encoder, tmp_path, monkeypatch, capsys, how):
    argv = ["features", "--encoder", str(truncated_encoder), "--out", str(tmp_path / "f.pt")]
    with pytest.raises(UnreadableFileError, match="encoder.pt"):
        if how == "flag":
            _console(monkeypatch, capsys, *argv, "--debug")
        else:
            _console(monkeypatch, capsys, *argv, debug_env="1")


def test_the_installed_command_prints_one_line(tmp_path):
    """End to end through a fresh interpreter, as a user sees it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("WEINCE_DEBUG", None)
    missing = tmp_path / "nope.pt"
    proc = subprocess.run([sys.executable, "-m", "weince.cli", "eval", "linear", "--features",
                           str(missing), "--out", str(tmp_path / "l.json")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"weince eval: error: feature file {missing} does not exist; make it with "
        f"`weince features --encoder ENCODER.pt --out {missing}`"]


@pytest.mark.parametrize("content", [os.urandom(500), b"PK\x03\x04" + os.urandom(100), b""])
def test_corrupt_score_file_names_file_and_rule(tmp_path, monkeypatch, capsys, content):
    scores = tmp_path / "scores.npz"
    scores.write_bytes(content)
    rc, err = _console(monkeypatch, capsys, "evt", "--scores", str(scores), "--out",
                       str(tmp_path / "evt"))
    line = err.strip()
    assert rc == 1 and "\n" not in line
    assert str(scores) in line and "collect_scores rule" in line
    assert "allow_pickle" not in line and "pickle" not in line


def test_a_valid_score_file_still_loads(tmp_path):
    path = save_scores(tmp_path / "s.npz", np.linspace(-0.5, 0.9, 50), meta={"tau": 0.5})
    got = load_scores(path)
    assert got["meta"] == {"tau": 0.5} and got["scores"].shape == (50,)


def test_explicit_argv_still_raises_for_python_callers(truncated_encoder, tmp_path):
    with pytest.raises(UnreadableFileError):
        cli.main(["features", "--encoder", str(truncated_encoder), "--out",
                  str(tmp_path / "f.pt")])


def test_truncated_checkpoint_tells_how_to_start_over(tmp_path):
    torch.save({"epoch": 1}, tmp_path / "checkpoint.pt")
    data = (tmp_path / "checkpoint.pt").read_bytes()
    (tmp_path / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(UnreadableFileError, match=r"checkpoint\.pt: not a readable checkpoint "
                                                  r"\(truncated or corrupt.*starts over"):
        pretrain({"epochs": 1, "max_train_images": 64, "batch_size": 32, "device": "cpu"},
                 tmp_path)
