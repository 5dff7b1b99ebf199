"""SIGTERM during training (SLURM preemption / time limit): checkpoint at the next step,
exit 143, and the resumed run ends exactly where an uninterrupted one does (CPU)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from weince.eval.sts import encode
from weince.models.text import load_text_encoder
from weince.train.preempt import PREEMPT_EXIT_CODE, Preempted, PreemptionGuard
from weince.train.simclr import pretrain
from weince.train.simcse import train_simcse
from weince.train.trainlog import read_jsonl

# 64 digits, batches of 16 -> 4 steps per epoch, 2 epochs
TINY = dict(dataset="digits", max_train_images=64, batch_size=16, epochs=2,
            loss="weince_recipe", loss_kwargs={"top_m": 8}, seed=5, threads=1,
            progress=False)
_TIMING = {"img_s", "epoch_s"}


def _load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def _sigterm_at(epoch, step):
    def hook(e, s):
        if (e, s) == (epoch, step):
            os.kill(os.getpid(), signal.SIGTERM)
    return hook


def _assert_same_run(a: Path, b: Path):
    ea, eb = _load(a / "encoder.pt")["state_dict"], _load(b / "encoder.pt")["state_dict"]
    assert ea.keys() == eb.keys()
    for k in ea:
        assert torch.equal(ea[k], eb[k]), k

    def strip(rs):
        return [{k: v for k, v in r.items() if k not in _TIMING} for r in rs]

    la, lb = read_jsonl(a / "train_log.jsonl"), read_jsonl(b / "train_log.jsonl")
    assert strip(la) == strip(lb)


def test_guard_records_the_signal_and_restores_the_handler():
    before = signal.getsignal(signal.SIGTERM)
    with PreemptionGuard() as guard:
        assert not guard.stop()
        os.kill(os.getpid(), signal.SIGTERM)        # would end pytest without the guard
        assert guard.requested and guard.stop()
        err = guard.preempted("checkpoint.pt at step 3")
    assert signal.getsignal(signal.SIGTERM) is before
    assert isinstance(err, SystemExit) and err.code == PREEMPT_EXIT_CODE == 143
    assert "SIGTERM" in str(err) and "step 3" in str(err) and err.waited_s >= 0


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    pretrain(dict(TINY), out)
    return out


def test_sigterm_mid_epoch_resumes_at_that_step(tmp_path, uninterrupted):
    part = tmp_path / "part"
    seen = []
    with pytest.raises(Preempted) as info:
        pretrain(dict(TINY), part, on_step=lambda e, s: (seen.append((e, s)),
                                                         _sigterm_at(1, 2)(e, s)))
    assert info.value.code == PREEMPT_EXIT_CODE
    assert seen[-1] == (1, 2), "training went on after the step in flight"
    ck = _load(part / "checkpoint.pt")
    assert ck["epoch"] == 0 and ck["in_epoch"]["step"] == 2
    assert not (part / "encoder.pt").exists()
    # the resumed run starts at the third step of epoch 1, not at the epoch's start
    resumed = []
    s = pretrain(dict(TINY), part, on_step=lambda e, st: resumed.append((e, st)))
    assert resumed[0] == (1, 3) and len(resumed) == 2 * 4 - 2
    assert s["resumed_from_epoch"] == 0 and s["resumed_in_epoch_at_step"] == 2
    (event,) = s["preempted"]                  # train.json records where it stopped
    assert (event["signal"], event["epoch"], event["step"]) == ("SIGTERM", 1, 2)
    assert 0 <= event["signal_to_checkpoint_s"] < 60
    _assert_same_run(uninterrupted, part)


def test_sigterm_at_an_epoch_end_and_again_after_resume(tmp_path, uninterrupted):
    part = tmp_path / "part"
    with pytest.raises(Preempted):          # last step of epoch 1: the epoch's checkpoint
        pretrain(dict(TINY), part, on_step=_sigterm_at(1, 4))
    ck = _load(part / "checkpoint.pt")
    assert ck["epoch"] == 1 and "in_epoch" not in ck
    with pytest.raises(Preempted):          # preempted again, mid-epoch 2
        pretrain(dict(TINY), part, on_step=_sigterm_at(2, 1))
    assert _load(part / "checkpoint.pt")["in_epoch"]["step"] == 1
    s = pretrain(dict(TINY), part)
    assert [(e["epoch"], e["step"]) for e in s["preempted"]] == [(1, 4), (2, 1)]
    _assert_same_run(uninterrupted, part)


@pytest.mark.slow
def test_cli_process_exits_143_soon_after_sigterm_and_resumes(tmp_path, uninterrupted):
    """The real thing: `weince pretrain` in its own process gets SIGTERM while training;
    it exits with 143 within a step, and the same command then finishes the run."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({**TINY, "epochs": 40}))
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "weince.cli", "pretrain", "--config", str(cfg),
           "--out", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        end = time.monotonic() + 300
        while not (out / "checkpoint.pt").exists():     # training is under way
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < end, "no checkpoint after 300 s"
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = proc.stdout.read()
    assert rc == PREEMPT_EXIT_CODE, log
    assert "received SIGTERM" in log and "Traceback" not in log, log
    ck = _load(out / "checkpoint.pt")
    assert 1 <= ck["epoch"] < 40
    print(f"SIGTERM to exit: {took:.2f} s (checkpoint at epoch {ck['epoch']}, "
          f"step {ck.get('in_epoch', {}).get('step', 4)} of 4)")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(read_jsonl(out / "train_log.jsonl")) == 40


@pytest.mark.slow
def test_simcse_sigterm_between_evaluations_resumes_at_that_step(tmp_path):
    cfg = dict(n_train=48, batch_size=8, max_length=16, n_sts=20, eval_every=4, log_every=1,
               eval_at_start=False, max_steps=6, eval_batch_size=64, loss="weince")
    full = train_simcse(cfg, tmp_path / "full")
    out = tmp_path / "cut"

    def term_at_3(step, loss):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Preempted):        # step 3 is no evaluation step: written for SIGTERM
        train_simcse(cfg, out, on_step=term_at_3)
    assert _load(out / "checkpoint.pt")["step"] == 3
    seen = []
    res = train_simcse(cfg, out, on_step=lambda s, _loss: seen.append(s))
    assert seen == [4, 5, 6] and res["resumed_from_step"] == 3
    la, lb = read_jsonl(tmp_path / "full" / "train_log.jsonl"), read_jsonl(out / "train_log.jsonl")
    assert [r["step"] for r in la] == [r["step"] for r in lb]
    for a, b in zip(la, lb):
        for k in ("loss", "dev_spearman"):
            if k in a:
                assert b[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6)
    probe = ["A man is playing a guitar.", "The cat chases a mouse."]

    def emb(d):
        return encode(*load_text_encoder(d), probe)

    torch.testing.assert_close(emb(out / "model"), emb(tmp_path / "full" / "model"),
                               atol=1e-5, rtol=1e-5)
    assert res["best_dev_spearman"] == pytest.approx(full["best_dev_spearman"], abs=1e-4)
