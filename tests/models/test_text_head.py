"""C7's training-only MLP head starts as SimCSE's: SimCSE's ``cl_init`` ends in the
encoder's ``init_weights``, so the head's weights are normal(0, initializer_range) and its
bias is zero (PyTorch's own ``nn.Linear`` default is uniform with a non-zero bias)."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel

from weince.models.text import SimCSEModel


@pytest.mark.parametrize("std", [0.02, 0.2])
def test_the_mlp_head_is_initialised_from_the_encoders_initializer_range(std):
    torch.manual_seed(0)
    hidden = 256
    cfg = BertConfig(vocab_size=30, hidden_size=hidden, num_hidden_layers=1,
                     num_attention_heads=4, intermediate_size=32, initializer_range=std)
    model = SimCSEModel(BertModel(cfg))
    dense = model.mlp[0]
    assert isinstance(dense, torch.nn.Linear) and isinstance(model.mlp[1], torch.nn.Tanh)
    assert dense.weight.shape == (hidden, hidden)
    assert torch.equal(dense.bias, torch.zeros(hidden))
    w = dense.weight.detach().flatten()
    # 65,536 draws: the sample sd within 2% of std, the mean within 5 standard errors of 0
    assert abs(w.std().item() / std - 1) < 0.02
    assert abs(w.mean().item()) < 5 * std / w.numel() ** 0.5
    # normal, not uniform: a uniform of that sd never reaches 2 sd (its bound is 1.73 sd)
    assert (w.abs() > 2 * std).float().mean().item() > 0.03


def test_without_the_mlp_the_head_is_the_identity():
    cfg = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16)
    assert isinstance(SimCSEModel(BertModel(cfg), mlp=False).mlp, torch.nn.Identity)
