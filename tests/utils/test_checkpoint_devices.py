"""Checkpoints resume across machines: the CUDA random state of the device the run used,
never one state per visible GPU, and a clear refusal where a device-bound generator cannot
move (a CPU run resumed on a GPU, or the reverse).

No GPU is needed: the CUDA calls are replaced by recorders where a test needs a machine
"with" GPUs; the states themselves are plain byte tensors."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from weince.train.simclr import pretrain
from weince.utils import checkpoint as C


def _draws():
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def _fake_cuda_state(seed: int) -> torch.Tensor:
    # a Philox generator's state: 16 bytes (seed and offset)
    return torch.tensor([seed] + [0] * 15, dtype=torch.uint8)


@pytest.fixture
def fake_gpus(monkeypatch):
    """A machine with ``n`` visible GPUs whose CUDA generator calls are recorded."""
    calls = {"set": [], "get": []}

    def install(n: int):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)

        def set_state(state, device="cuda"):
            index = torch.device(device).index
            if index is None or index >= n:   # torch: IndexError in default_generators
                raise IndexError("list index out of range")
            calls["set"].append((index, bytes(state.tolist())))

        def get_state(device="cuda"):
            calls["get"].append(torch.device(device).index)
            return _fake_cuda_state(10 + torch.device(device).index)

        monkeypatch.setattr(torch.cuda, "set_rng_state", set_state)
        monkeypatch.setattr(torch.cuda, "get_rng_state", get_state)
        monkeypatch.setattr(torch.cuda, "get_rng_state_all",
                            lambda: [_fake_cuda_state(10 + i) for i in range(n)])
        return calls

    return install


def test_checkpoint_with_two_cuda_states_loads_on_a_machine_without_gpu(tmp_path):
    C.seed_everything(3)
    state = C.rng_state("cpu")
    assert "cuda" not in state           # a CPU run keeps no CUDA state
    state["cuda"] = [_fake_cuda_state(1), _fake_cuda_state(2)]   # written on a 2-GPU machine
    expected = _draws()
    C.save_checkpoint(tmp_path / "checkpoint.pt", rng=state, device="cuda:0")
    ckpt = C.load_checkpoint(tmp_path / "checkpoint.pt")
    C.seed_everything(99)
    C.restore_rng(ckpt["rng"], "cpu")     # no IndexError, no CUDA call
    assert _draws() == expected           # the CPU-side generators are back exactly
    # the new format too
    state["cuda"] = {"device": "cuda:1", "state": _fake_cuda_state(1)}
    C.restore_rng(state, "cpu")


def test_only_the_run_device_state_is_saved(fake_gpus):
    calls = fake_gpus(4)
    state = C.rng_state("cuda:2")
    assert state["cuda"]["device"] == "cuda:2"
    assert calls["get"] == [2]            # not get_rng_state_all(): one device, the run's
    assert C.rng_state("cpu").get("cuda") is None


def test_resume_where_fewer_gpus_are_visible(fake_gpus):
    calls = fake_gpus(1)
    base = C.rng_state("cpu")
    # legacy: one state per GPU of an 8-GPU machine; resumed on the only GPU here
    legacy = {**base, "cuda": [_fake_cuda_state(i) for i in range(8)]}
    C.restore_rng(legacy, "cuda")
    assert calls["set"] == [(0, bytes(_fake_cuda_state(0).tolist()))]
    # new format: a state saved on cuda:5 continues on this run's device, cuda:0
    calls["set"].clear()
    C.restore_rng({**base, "cuda": {"device": "cuda:5", "state": _fake_cuda_state(5)}}, "cuda:0")
    assert calls["set"] == [(0, bytes(_fake_cuda_state(5).tolist()))]


def test_cpu_checkpoint_resumed_on_gpu_is_refused_clearly(tmp_path):
    with pytest.raises(C.ResumeDeviceError, match=r"written by a run on cpu.*this run is on "
                                                  r"cuda.*device: cpu.*delete the checkpoint"):
        C.check_resume_device("cpu", "cuda", tmp_path / "checkpoint.pt")
    with pytest.raises(C.ResumeDeviceError, match=r"on a machine with a GPU"):
        C.check_resume_device("cuda:0", "cpu", tmp_path / "checkpoint.pt")
    C.check_resume_device("cuda:1", "cuda:0", tmp_path / "checkpoint.pt")   # same kind: fine
    C.check_resume_device(None, "cuda", tmp_path / "checkpoint.pt")        # older files


def test_generator_state_of_another_device_kind_is_refused_clearly(tmp_path):
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(C.ResumeDeviceError, match=r"16 bytes saved.*another kind of device"):
        C.restore_generator(gen, _fake_cuda_state(1), tmp_path / "checkpoint.pt")
    other = torch.Generator().manual_seed(5)
    C.restore_generator(gen, other.get_state(), tmp_path / "checkpoint.pt")
    assert torch.equal(torch.rand(3, generator=gen), torch.rand(3, generator=other))


def test_pretrain_refuses_a_checkpoint_of_another_device(tmp_path):
    """End to end: a CPU checkpoint whose recorded device is a GPU (as a GPU run would
    leave) stops the resumed CPU run with the clear error, before any state is touched."""
    cfg = dict(dataset="digits", backbone="smallcnn", loss="infonce", epochs=2, batch_size=32,
               max_train_images=64, device="cpu", progress=False, threads=1)
    pretrain(cfg, tmp_path, stop_after=1)
    ckpt = C.load_checkpoint(tmp_path / "checkpoint.pt")
    assert ckpt["device"] == "cpu" and "cuda" not in ckpt["rng"]
    ckpt["device"] = "cuda:0"
    C.save_checkpoint(tmp_path / "checkpoint.pt", **ckpt)
    with pytest.raises(C.ResumeDeviceError, match="written by a run on cuda:0"):
        pretrain(cfg, tmp_path)
