"""Text tests run the small shipped MiniLM-L6 on one CPU thread (the CI machine is shared,
and one thread avoids oversubscription); the previous setting is restored afterwards."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
