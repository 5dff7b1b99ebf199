"""``cuda:N`` in a single process makes device N the current one (no GPU needed: the CUDA
calls are recorded)."""

import pytest
import torch

from weince.train.ddp import setup_distributed
from weince.utils.device import resolve_device


@pytest.fixture
def two_gpus(monkeypatch):
    chosen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: chosen.append(torch.device(d)))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return chosen


def test_single_process_on_cuda_n_sets_the_current_device(two_gpus):
    assert setup_distributed("cuda:1").device == torch.device("cuda", 1)
    assert two_gpus == [torch.device("cuda", 1)]
    assert resolve_device("cuda") == torch.device("cuda") and len(two_gpus) == 1  # no index: as is


def test_an_invisible_cuda_index_is_a_clear_error(two_gpus):
    with pytest.raises(ValueError, match=r"'cuda:2'.*only 2 CUDA device\(s\) are visible"):
        resolve_device("cuda:2")
    assert two_gpus == []
