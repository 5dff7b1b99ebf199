"""Score collection from a frozen encoder (tail diagnostics) and the two-view link batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from weince.evt.collect import collect_link_batches, collect_scores
from weince.evt.scorefile import load_scores, save_scores


def _images(n=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 1, 4, 4), dtype=torch.uint8, generator=g)


def _identity(x):
    return x.float() / 255.0


def _noisy(x):
    return x.float() / 255.0 + 0.1 * torch.randn(x.shape)


W = torch.randn(16, 6, generator=torch.Generator().manual_seed(1))


def _embed(x):
    return x.flatten(1) @ W


def _gram(images):
    z = torch.nn.functional.normalize(_embed(_identity(images)), dim=1)
    return (z @ z.T).numpy()


def test_scores_are_the_lower_triangle_of_each_batch_gram():
    imgs = _images(20)
    s = collect_scores(_embed, imgs, _identity, batch_size=20, n_batches=3)
    assert s.dtype == np.float32 and s.shape == (3 * 20 * 19 // 2,)
    # batch = all 20 images in some order: the multiset of pairs is the full gram's
    g = _gram(imgs)
    pairs = np.sort(g[np.tril_indices(20, -1)])
    for b in range(3):
        np.testing.assert_allclose(np.sort(s[b * 190:(b + 1) * 190]), pairs, atol=1e-6)


def test_batches_draw_distinct_images_and_are_seeded():
    imgs = _images(50)
    a = collect_scores(_embed, imgs, _noisy, batch_size=10, n_batches=4, seed=3)
    b = collect_scores(_embed, imgs, _noisy, batch_size=10, n_batches=4, seed=3)
    c = collect_scores(_embed, imgs, _noisy, batch_size=10, n_batches=4, seed=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # identical views: no pair may have similarity 1 unless two images coincide
    d = collect_scores(_embed, imgs, _identity, batch_size=10, n_batches=4)
    assert d.max() < 1 - 1e-6
    # the caller's RNG is left alone
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    collect_scores(_embed, imgs, _noisy, batch_size=10, n_batches=2)
    np.testing.assert_array_equal(before, torch.rand(3))


def test_batch_size_above_n_uses_n_with_a_warning():
    with pytest.warns(UserWarning, match="exceeds the 12 images; using batch_size=12"):
        s = collect_scores(_embed, _images(12), _identity, batch_size=256, n_batches=2)
    assert s.shape == (2 * 12 * 11 // 2,)


def test_link_batches_follow_the_simclr_layout():
    imgs = _images(20)
    out = collect_link_batches(_embed, imgs, _identity, batch_size=8, n_batches=3)
    sim, t, mask = out["sim"], out["targets"], out["mask"]
    assert sim.shape == (48, 16) and t.shape == (48,) and mask.shape == (48, 16)
    rows = np.arange(48)
    np.testing.assert_array_equal(t, np.tile((np.arange(16) + 8) % 16, 3))
    assert not mask[rows, rows % 16].any() and mask.sum() == 48 * 15
    # identical views: the positive's similarity is 1, and the block is the gram of the
    # 8 chosen images repeated in a 2 x 2 pattern
    np.testing.assert_allclose(sim[rows, t], 1.0, atol=1e-6)
    blk = sim[:16]
    np.testing.assert_allclose(blk[:8, :8], blk[8:, 8:], atol=1e-6)
    np.testing.assert_allclose(blk[:8, 8:], blk[:8, :8], atol=1e-6)


def test_bad_inputs():
    imgs = _images(10)
    with pytest.raises(ValueError, match="uint8"):
        collect_scores(_embed, imgs.float(), _identity, batch_size=4, n_batches=1)
    with pytest.raises(ValueError, match="not a tuple"):
        collect_scores(lambda x: (x, _embed(x)), imgs, _identity, batch_size=4, n_batches=1)
    with pytest.raises(ValueError, match="zero"):
        collect_scores(lambda x: torch.zeros(x.shape[0], 3), imgs, _identity, batch_size=4,
                       n_batches=1)


def test_save_load_roundtrip(tmp_path):
    imgs = _images(20)
    s = collect_scores(_embed, imgs, _noisy, batch_size=8, n_batches=2)
    link = collect_link_batches(_embed, imgs, _noisy, batch_size=8, n_batches=2)
    p = save_scores(tmp_path / "scores.npz", s, link, meta={"tau": 0.2, "dataset": "x"})
    d = load_scores(p)
    np.testing.assert_array_equal(d["scores"], s)
    for k in ("sim", "targets", "mask"):
        np.testing.assert_array_equal(d[k], link[k])
    assert d["meta"] == {"tau": 0.2, "dataset": "x"}
    d2 = load_scores(save_scores(tmp_path / "only.npz", s))
    assert "sim" not in d2 and d2["meta"] == {}
    with pytest.raises(FileNotFoundError, match="collect-scores"):
        load_scores(tmp_path / "missing.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="no 'scores'"):
        load_scores(tmp_path / "other.npz")
