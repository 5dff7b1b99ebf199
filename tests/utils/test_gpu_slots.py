"""The GPU slot pool of one machine without a scheduler (weince.utils.gpu_slots), without a
GPU: a fake device list, slots held by other processes (a lock held in this process would
be this process's own), a killed holder's slot free at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from weince.pipeline.joblog import log_to
from weince.utils import gpu_slots
from weince.utils.gpu_slots import environment, pool_devices, take_slot

SRC = str(Path(__file__).resolve().parents[2] / "src")

# a holder: takes a slot, prints it, holds it until killed (or for `hold` seconds)
HOLDER = """
import sys, time
from weince.utils.gpu_slots import take_slot
slot = take_slot(int(sys.argv[1]), int(sys.argv[2]), poll_s=0.05)
print(slot.name if slot else "none", flush=True)
time.sleep(float(sys.argv[3]))
"""


def _env(tmp_path: Path, fake: str = "4") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_JOB_ID",
                                                              "CUDA_VISIBLE_DEVICES")}
    env.update({gpu_slots.FAKE_ENV: fake, gpu_slots.LOCK_DIR_ENV: str(tmp_path / "locks"),
                "PYTHONPATH": SRC})
    return env


def _holder(tmp_path: Path, gpus: int = 1, per: int = 1, hold: float = 60.0,
            fake: str = "4") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(gpus), str(per), str(hold)],
                            env=_env(tmp_path, fake), stdout=subprocess.PIPE, text=True)


def _slot_of(proc: subprocess.Popen, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    line = ""
    while not line and time.monotonic() < deadline and proc.stdout is not None:
        line = proc.stdout.readline().strip()
    return line


@pytest.fixture
def holders():
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


@pytest.fixture(autouse=True)
def _no_slot_held():
    gpu_slots.release()
    yield
    gpu_slots.release()


def test_devices_from_fake_list_node_setting_and_cuda_visible():
    assert pool_devices({"WEINCE_FAKE_GPUS": "3"}) == (("0", "1", "2"), True)
    assert pool_devices({"WEINCE_FAKE_GPUS": "2,5"}) == (("2", "5"), True)
    assert pool_devices({"WEINCE_NODE_GPUS": "4,", "CUDA_VISIBLE_DEVICES": "0"}) == (("4",), False)
    assert pool_devices({"CUDA_VISIBLE_DEVICES": "1,3"}) == (("1", "3"), False)
    assert pool_devices({"CUDA_VISIBLE_DEVICES": ""}) == ((), False)
    # inside a SLURM job the allocation's devices are used as they are: no pool
    assert pool_devices({"SLURM_JOB_ID": "42", "CUDA_VISIBLE_DEVICES": "0,1"}) == ((), False)
    with pytest.raises(ValueError, match="neither a GPU count"):
        pool_devices({"WEINCE_FAKE_GPUS": "two"})


def test_config_exports_the_pool_settings():
    assert environment({"gpus": "auto", "lock_dir": None}) == {}
    assert environment({"gpus": 2, "lock_dir": "/x"}) == {"WEINCE_NODE_GPUS": "2",
                                                          "WEINCE_GPU_LOCK_DIR": "/x"}
    env = environment({"gpus": [3]})
    assert pool_devices(env) == (("3",), False)      # one id, not a count of 3


def test_slot_sets_cuda_visible_devices_and_is_taken_once(tmp_path, monkeypatch):
    for k, v in _env(tmp_path, "2,7").items():
        monkeypatch.setenv(k, v)
    slot = take_slot(1, 1)
    assert slot is not None and slot.devices == ("2",) and not slot.shared
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"
    assert take_slot(1, 1) is slot
    assert slot.record()["slot"] == "gpu2/slot0" and "gpu2/slot0" in slot.line()


def test_no_pool_without_devices_or_gpus(tmp_path, monkeypatch):
    monkeypatch.delenv("WEINCE_FAKE_GPUS", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    assert take_slot(1, 1) is None
    monkeypatch.setenv("WEINCE_FAKE_GPUS", "2")
    assert take_slot(0, 1) is None


def test_too_many_gpus_is_one_line(tmp_path, monkeypatch):
    for k, v in _env(tmp_path, "2").items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match="asks for 3 GPUs but this machine's pool has 2"):
        take_slot(3, 1)


def test_concurrent_jobs_take_distinct_devices(tmp_path, holders):
    holders += [_holder(tmp_path) for _ in range(4)]
    names = sorted(_slot_of(p) for p in holders)
    assert names == ["gpu0/slot0", "gpu1/slot0", "gpu2/slot0", "gpu3/slot0"]


def test_sharing_fills_every_device_first_then_shares(tmp_path, holders):
    holders += [_holder(tmp_path, per=2, fake="2") for _ in range(3)]
    names = sorted(_slot_of(p) for p in holders)
    assert names == ["gpu0/slot0", "gpu0/slot1", "gpu1/slot0"] or \
        names == ["gpu0/slot0", "gpu1/slot0", "gpu1/slot1"]


def test_a_full_pool_waits_and_a_killed_job_frees_its_slot(tmp_path, holders, monkeypatch):
    first = _holder(tmp_path, fake="1")
    holders.append(first)
    assert _slot_of(first) == "gpu0/slot0"
    waiting = _holder(tmp_path, fake="1")
    holders.append(waiting)
    time.sleep(1.0)
    assert waiting.poll() is None          # still waiting: nothing printed yet
    os.kill(first.pid, signal.SIGKILL)     # no clean-up runs: the kernel drops the lock
    first.wait()
    t0 = time.monotonic()
    assert _slot_of(waiting) == "gpu0/slot0"
    assert time.monotonic() - t0 < 10


def test_an_exclusive_job_and_sharing_jobs_exclude_each_other(tmp_path, holders,
                                                              monkeypatch):
    shared = _holder(tmp_path, per=2, fake="1")
    holders.append(shared)
    assert _slot_of(shared) == "gpu0/slot0"
    for k, v in _env(tmp_path, "1").items():
        monkeypatch.setenv(k, v)
    said = []
    monkeypatch.setattr(gpu_slots.time, "sleep", lambda s: (_ for _ in ()).throw(
        TimeoutError("would wait")))
    with pytest.raises(TimeoutError):      # jobs_per_gpu 1 wants the GPU alone: it waits
        take_slot(1, 1, say=said.append)
    assert said and "waiting" in said[0]
    slot = take_slot(1, 2)                 # a second sharing job fits beside it
    assert slot is not None and slot.name == "gpu0/slot1" and slot.shared


def test_two_gpu_job_takes_whole_devices(tmp_path, holders):
    one = _holder(tmp_path, fake="3")
    holders.append(one)
    assert _slot_of(one) == "gpu0/slot0"
    two = _holder(tmp_path, gpus=2, fake="3")
    holders.append(two)
    assert _slot_of(two) == "gpu1+gpu2"


def test_a_job_s_log_names_its_slot_before_torch(tmp_path, monkeypatch):
    for k, v in _env(tmp_path, "2").items():
        monkeypatch.setenv(k, v)
    res = SimpleNamespace(gpu=1, jobs_per_gpu=2)
    with log_to(tmp_path / "job.log", resources=res, device="cpu"):
        print("working")
    text = (tmp_path / "job.log").read_text()
    assert text.startswith("gpu slot: gpu0/slot0 of a pool of 2 GPU(s) x 2 (fake device list")
    assert "shared: up to 2 jobs on this GPU" in text and "working" in text
    assert text.splitlines()[-1].startswith("gpu slot: gpu0/slot0 held until ")
    gpu_slots.release()
    # a CPU job on a real pool takes no GPU: its GPUs are slots asked for on purpose (gloo)
    monkeypatch.delenv("WEINCE_FAKE_GPUS")
    monkeypatch.setenv("WEINCE_NODE_GPUS", "2")
    with log_to(tmp_path / "cpu.log", resources=res, device="cpu"):
        pass
    assert "gpu slot" not in (tmp_path / "cpu.log").read_text() and gpu_slots.held() is None


SPY = """
import sys
from types import SimpleNamespace
import weince.utils.gpu_slots as g
from weince.pipeline.joblog import log_to
real = g.take_slot
def spy(*a, **k):
    print("torch imported before the slot:", "torch" in sys.modules)
    return real(*a, **k)
g.take_slot = spy
with log_to(None, resources=SimpleNamespace(gpu=1, jobs_per_gpu=1), device="cpu"):
    pass   # a job's work, which imports torch, comes here
print("CUDA_VISIBLE_DEVICES", __import__("os").environ["CUDA_VISIBLE_DEVICES"])
"""


def test_the_slot_is_taken_before_torch_is_imported(tmp_path):
    # what every rule script does first (its log set-up), in a fresh interpreter
    for script in sorted((Path(SRC).parent / "workflow" / "scripts").glob("*.py")):
        head = script.read_text().split("with log_to(", 1)[0]
        assert "torch" not in head, script.name
    out = subprocess.run([sys.executable, "-c", SPY], env=_env(tmp_path, "3"),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "torch imported before the slot: False" in out.stdout
    assert "CUDA_VISIBLE_DEVICES 0" in out.stdout
