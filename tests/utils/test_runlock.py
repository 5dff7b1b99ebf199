"""One writer per run folder: a second process that wants to write the same run refuses
at once, naming the holder's PID; a killed holder's lock is gone with it (the kernel
releases it), so no lock goes stale."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from weince.eval.features import extract_features
from weince.train.simclr import pretrain
from weince.train.simcse import train_simcse
from weince.utils.runlock import RunLockedError, held_locks, lock_path, locks_output, run_lock

SRC = Path(__file__).resolve().parents[2] / "src"


def _holder(folder: Path, name: str) -> subprocess.Popen:
    """Another process holding run_lock(folder, name) until killed."""
    code = textwrap.dedent(f"""
        import sys, time
        from weince.utils.runlock import run_lock
        with run_lock({str(folder)!r}, {name!r}):
            print("held", flush=True)
            time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.fixture
def holder(tmp_path):
    procs = []

    def start(folder, name):
        procs.append(_holder(folder, name))
        return procs[-1]
    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_a_second_writer_refuses_at_once_naming_the_holder(tmp_path, holder):
    p = holder(tmp_path, "train")
    t0 = time.monotonic()
    with pytest.raises(RunLockedError) as err:
        with run_lock(tmp_path, "train", wait_s=0.2):
            pass
    assert time.monotonic() - t0 < 5
    msg = str(err.value)
    assert f"PID {p.pid}" in msg and str(tmp_path) in msg and "kill" in msg
    assert "never `snakemake --unlock` a live run" in msg and "\n" not in msg
    assert held_locks(tmp_path) == [(lock_path(tmp_path, "train"),
                                     held_locks(tmp_path)[0][1])]
    assert f"PID {p.pid}" in held_locks(tmp_path)[0][1]
    with run_lock(tmp_path, "linear.json"):   # another output of the same run is free
        pass


def test_kill_9_of_the_holder_releases_the_lock(tmp_path, holder):
    p = holder(tmp_path, "train")
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert held_locks(tmp_path) == []
    with run_lock(tmp_path, "train", wait_s=0):
        assert lock_path(tmp_path, "train").read_text().split()[0] == str(os.getpid())


def test_the_decorator_locks_the_folder_argument(tmp_path, monkeypatch):
    calls = []

    @locks_output("out_dir", "train")
    def train(cfg, out_dir):
        calls.append(out_dir)
        with pytest.raises(RunLockedError):      # a second writer, even in this process
            with run_lock(out_dir, "train", wait_s=0):
                pass
        return "done"

    assert train({}, out_dir=tmp_path) == "done" and calls == [tmp_path]
    with run_lock(tmp_path, "train", wait_s=0):   # released on return
        pass
    monkeypatch.setenv("RANK", "1")               # other torchrun ranks lock nothing

    @locks_output("out_dir", "train")
    def rank1(out_dir):
        with run_lock(out_dir, "train", wait_s=0):
            return "free"
    assert rank1(tmp_path) == "free"


def test_hold_run_lock_keeps_the_lock_for_the_process(tmp_path):
    code = textwrap.dedent(f"""
        from weince.utils.runlock import hold_run_lock, run_lock, RunLockedError
        hold_run_lock({str(tmp_path / 'linear.json')!r})
        try:
            with run_lock({str(tmp_path)!r}, "linear.json", wait_s=0):
                print("free")
        except RunLockedError:
            print("held")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=60)
    assert r.stdout.strip() == "held", r.stderr
    with run_lock(tmp_path, "linear.json", wait_s=0):   # released when it exited
        pass


def test_training_and_features_refuse_a_folder_another_process_writes(tmp_path, holder):
    """The entry points lock before doing anything: the second pretraining of one run
    folder stops at once instead of training beside the first."""
    p = holder(tmp_path, "train")
    for fn in (pretrain, train_simcse):
        with pytest.raises(RunLockedError, match=f"PID {p.pid}"):
            fn({"dataset": "digits", "backbone": "smallcnn", "epochs": 1}
               if fn is pretrain else {}, tmp_path)
    holder(tmp_path, "features.pt")
    with pytest.raises(RunLockedError, match="features.pt"):
        extract_features(tmp_path / "encoder.pt", tmp_path / "features.pt")
