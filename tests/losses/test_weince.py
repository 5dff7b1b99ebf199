"""WEINCE and InfoNCE against slow float64 per-row references and exact special cases."""

import math

import numpy as np
import pytest
import torch

import weince.losses._common as common
from weince.losses import LOSSES, build_loss, info_nce, pair_similarities, tail_size, weince
from weince.losses._common import negative_values
from weince.losses.modules import _quantiles
from weince.losses.recipe import _largest
from weince.losses.weince import _top_negatives_cpu, blended_logits


# ---------------------------------------------------------------- slow references
def ref_info_nce(sim, targets, mask, tau):
    sim = sim.double().numpy()
    total = 0.0
    for i in range(sim.shape[0]):
        cols = range(sim.shape[1]) if mask is None else np.flatnonzero(mask[i].numpy())
        logits = np.array([sim[i, j] / tau for j in cols])
        pos = list(cols).index(int(targets[i]))
        mx = logits.max()
        total += -(logits[pos] - mx - math.log(np.exp(logits - mx).sum()))
    return total / sim.shape[0]


def ref_stats_row(negs, K, *, tail_frac=0.10, min_tail=32, eps=1e-6):
    """The per-anchor statistics for one row, written out literally in float64."""
    k = max(min_tail, round(tail_frac * K))
    k = min(k, K)
    k = max(10, k)
    k = min(k, K)
    top = sorted(negs, reverse=True)[:k]
    delta = [max(1.0 - s, eps) for s in top]  # ascending
    rho = max(1.0 - top[0], eps)
    b = max(1, k // 20)
    n = k - b
    if n < 2:
        return dict(k=k, n=n, rho=rho, beta_w=0.0, daic=0.0, ok=False)
    xs = [math.log(delta[m - 1]) for m in range(b + 1, k + 1)]
    Fs = [m / (k + 1) for m in range(b + 1, k + 1)]

    def ols(ys):
        xbar, ybar = sum(xs) / n, sum(ys) / n
        sxx = max(sum((x - xbar) ** 2 for x in xs), 1e-12)
        slope = sum((x - xbar) * (y - ybar) for x, y in zip(xs, ys)) / sxx
        a = ybar - slope * xbar
        sse = max(sum((y - a - slope * x) ** 2 for x, y in zip(xs, ys)), 1e-12)
        return slope, sse

    bw, sse_w = ols([math.log(F) for F in Fs])
    g, sse_g = ols([math.log(-math.log(F)) for F in Fs])
    if bw <= 0:
        sse_w += 1e6
    if g >= 0:
        sse_g += 1e6
    aic_w = n * math.log(sse_w / n) + 4
    aic_g = n * math.log(sse_g / n) + 4
    return dict(k=k, n=n, rho=rho, beta_w=bw, daic=aic_g - aic_w, ok=True)


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def ref_weince(sim, targets, mask, tau, *, q=0.2, margin=2.0, kappa_rho=10.0, kappa_aic=1.0,
               eps=1e-6, beta="one", gate="both", lam=None, beta_min=0.5, beta_max=16.0):
    S = sim.double().numpy()
    B, C = S.shape
    cols = [list(range(C)) if mask is None else list(np.flatnonzero(mask[i].numpy()))
            for i in range(B)]
    negs = [[S[i, j] for j in cols[i] if j != int(targets[i])] for i in range(B)]
    K = len(negs[0])
    rows = [ref_stats_row(negs[i], K, eps=eps) for i in range(B)]
    rhos = sorted(r["rho"] for r in rows)
    rho0 = max(rhos[round(q * (B - 1))], eps)
    lams = []
    for r in rows:
        if lam is not None:
            lams.append(lam)
        elif not r["ok"]:
            lams.append(0.0)
        else:
            lr = sigmoid(kappa_rho * (math.log(rho0) - math.log(r["rho"])))
            la = sigmoid(kappa_aic * (r["daic"] - margin))
            lams.append({"both": lr * la, "rho": lr, "aic": la}[gate])
    total = 0.0
    for i in range(B):
        bet = 1.0 if beta == "one" else min(max(rows[i]["beta_w"], beta_min), beta_max)
        logits = []
        for j in cols[i]:
            s = S[i, j]
            logits.append((1 - lams[i]) * s / tau
                          + lams[i] * (-bet * math.log(1 - min(s, 1 - eps))))
        logits = np.array(logits)
        pos = cols[i].index(int(targets[i]))
        mx = logits.max()
        total += -(logits[pos] - mx - math.log(np.exp(logits - mx).sum()))
    stats = dict(rho0=rho0, k=rows[0]["k"], lam=np.array(lams),
                 rho=np.array([r["rho"] for r in rows]),
                 daic=np.array([r["daic"] for r in rows]),
                 beta_w=np.array([r["beta_w"] for r in rows]))
    return total / B, stats


# ---------------------------------------------------------------- batches
def simclr_batch(n=40, d=16, seed=0, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n, d, generator=g)
    z1 = base + spread * 0.5 * torch.randn(n, d, generator=g)
    z2 = base + spread * 0.5 * torch.randn(n, d, generator=g)
    return pair_similarities(z1, z2, "simclr")


def simcse_batch(n=48, d=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n, d, generator=g)
    return pair_similarities(base + 0.3 * torch.randn(n, d, generator=g),
                             base + 0.3 * torch.randn(n, d, generator=g), "pairs")


BATCHES = {"simclr": simclr_batch, "simcse": simcse_batch}


# ---------------------------------------------------------------- tests
@pytest.mark.parametrize("kind", list(BATCHES))
def test_lambda_zero_is_infonce(kind):
    sim, t, m = BATCHES[kind]()
    a = info_nce(sim, t, m, tau=0.5)
    b = weince(sim, t, m, tau=0.5, lam=0.0)
    assert torch.allclose(a, b, rtol=1e-6, atol=0)
    assert float(a) == pytest.approx(ref_info_nce(sim, t, m, 0.5), rel=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("tau", [0.5, 0.3, 0.07])
def test_lambda_zero_is_infonce_bit_for_bit_in_either_dtype(dtype, tau):
    """A forced ``lam`` is held in the compute dtype: ``1 / tau`` keeps float64's precision
    for float64 input (it was rounded to float32 before, so ``tau=0.3`` differed)."""
    sim, t, m = simclr_batch()
    sim = sim.to(dtype)
    assert torch.equal(weince(sim, t, m, tau=tau, lam=0.0), info_nce(sim, t, m, tau=tau))


@pytest.mark.parametrize("kind", list(BATCHES))
@pytest.mark.parametrize("opts", [
    {}, {"gate": "rho"}, {"gate": "aic"}, {"beta": "anchor"}, {"lam": 0.7},
    {"q": 0.5, "margin": 0.0, "kappa_rho": 5.0, "kappa_aic": 2.0},
])
def test_matches_slow_reference(kind, opts):
    sim, t, m = BATCHES[kind](seed=3)
    sim64 = sim.double()
    loss, st = weince(sim64, t, m, tau=0.5, return_stats=True, **opts)
    ref_loss, ref = ref_weince(sim64, t, m, 0.5, **opts)
    assert float(loss) == pytest.approx(ref_loss, rel=1e-5)
    assert st["k"] == ref["k"]
    assert float(st["rho0"]) == pytest.approx(ref["rho0"], rel=1e-6)
    np.testing.assert_allclose(st["rho"].numpy(), ref["rho"], rtol=1e-6)
    np.testing.assert_allclose(st["lambda"].numpy(), ref["lam"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(st["daic"].numpy(), ref["daic"], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(st["beta_w"].numpy(), ref["beta_w"], rtol=1e-4, atol=1e-5)
    assert st["n"] == st["k"] - max(1, st["k"] // 20)


def test_float32_matches_float64_reference():
    sim, t, m = simclr_batch(n=64, seed=5)
    loss = weince(sim.float(), t, m, tau=0.5)
    assert float(loss) == pytest.approx(ref_weince(sim, t, m, 0.5)[0], rel=1e-5)


def test_gate_is_active_on_realistic_batches():
    # the test above would pass trivially if lambda were always ~0; check it is not
    sim, t, m = simclr_batch(n=64, seed=5)
    _, st = weince(sim, t, m, return_stats=True)
    assert 0.05 < float(st["lambda"].mean()) < 0.95
    assert float(st["lambda"].max()) - float(st["lambda"].min()) > 0.05


def test_tail_size_rule():
    assert tail_size(510) == 51          # 2N = 512
    assert tail_size(100) == 32          # min_tail dominates
    assert tail_size(20) == 20           # capped at K
    assert tail_size(8) == 8             # max(10, k) then capped at K
    assert tail_size(15, min_tail=4, tail_frac=0.1) == 10


def test_too_few_negatives_falls_back_to_infonce():
    # K = 2 negatives: k = 2, burn-in 1, n = 1 < 2 -> lambda = 0 for every row
    sim, t, m = pair_similarities(torch.randn(3, 4), torch.randn(3, 4), "pairs")
    loss, st = weince(sim, t, m, return_stats=True)
    assert st["n"] < 2 and torch.all(st["lambda"] == 0)
    assert torch.allclose(loss, info_nce(sim, t, m), rtol=1e-6)


@pytest.mark.parametrize("name", ["weince", "weince_recipe", "infonce", "infonce_topm"])
def test_finite_at_similarity_extremes(name):
    # duplicate embeddings (s = 1) and antipodal ones (s = -1)
    z = torch.randn(16, 8)
    z[1] = z[0]
    z[2] = -z[0]
    z1 = z.clone().requires_grad_(True)
    z2 = z.clone()
    loss = build_loss(name)(z1, z2)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(z1.grad).all()


def test_finite_on_raw_sim_of_exact_ones():
    sim = torch.full((6, 6), -1.0)
    sim.fill_diagonal_(1.0)
    sim[0, 1] = 1.0
    sim.requires_grad_(True)
    loss = weince(sim, torch.arange(6))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(sim.grad).all()


@pytest.mark.parametrize("kind", list(BATCHES))
def test_permutation_invariance(kind):
    sim, t, m = BATCHES[kind](seed=7)
    perm = torch.randperm(sim.shape[0], generator=torch.Generator().manual_seed(0))
    a = weince(sim.double(), t, m)
    b = weince(sim.double()[perm], t[perm], None if m is None else m[perm])
    assert float(a) == pytest.approx(float(b), rel=1e-10)


def test_two_view_module_permutation_invariance():
    g = torch.Generator().manual_seed(2)
    z1, z2 = torch.randn(32, 8, generator=g).double(), torch.randn(32, 8, generator=g).double()
    perm = torch.randperm(32, generator=g)
    f = build_loss("weince")
    assert float(f(z1, z2)) == pytest.approx(float(f(z1[perm], z2[perm])), rel=1e-9)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_no_trainable_parameters(name):
    assert sum(p.numel() for p in build_loss(name).parameters()) == 0


def test_statistics_carry_no_gradient():
    sim, t, m = simclr_batch(n=32, seed=11)
    sim = sim.clone().requires_grad_(True)
    _, st = weince(sim, t, m, return_stats=True)
    for key in ("lambda", "rho", "daic", "beta_w", "rho0"):
        assert not st[key].requires_grad, key
    # the gradient equals that of the blended logits with lambda held constant
    loss = weince(sim, t, m)
    (g_auto,) = torch.autograd.grad(loss, sim)
    sim2 = sim.detach().clone().requires_grad_(True)
    lam = st["lambda"].detach().double()[:, None]
    s = sim2.double()
    logits = (1 - lam) * s / 0.5 + lam * (-torch.log1p(-s.clamp(max=1 - 1e-6)))
    logits = logits.masked_fill(~m, float("-inf"))
    loss2 = torch.nn.functional.cross_entropy(logits, t)
    (g_const,) = torch.autograd.grad(loss2, sim2)
    torch.testing.assert_close(g_auto.double(), g_const.double(), rtol=1e-4, atol=1e-7)


def test_bf16_autocast_gives_finite_float32_loss():
    z1, z2 = torch.randn(32, 16), torch.randn(32, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sim, t, m = pair_similarities(z1, z2)
        loss, st = weince(sim, t, m, return_stats=True)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert st["lambda"].dtype == torch.float32


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    sim, t, m = simclr_batch(n=64, seed=4)
    a = weince(sim, t, m)
    b = weince(sim.cuda(), t.cuda(), m.cuda())
    assert float(a) == pytest.approx(float(b), rel=1e-4)


# ---------------------------------------------------------------- errors
def test_bad_arguments_raise_clear_errors():
    sim, t, m = simclr_batch(n=8)
    with pytest.raises(ValueError, match="tau"):
        weince(sim, t, m, tau=0)
    with pytest.raises(ValueError, match="tau"):
        info_nce(sim, t, m, tau=-1.0)
    with pytest.raises(ValueError, match="q "):
        weince(sim, t, m, q=1.5)
    with pytest.raises(ValueError, match="gate"):
        weince(sim, t, m, gate="x")
    with pytest.raises(ValueError, match="beta"):
        weince(sim, t, m, beta="two")
    with pytest.raises(ValueError, match="lam"):
        weince(sim, t, m, lam=2.0)
    bad = m.clone()
    bad[0, t[0]] = False
    with pytest.raises(ValueError, match="positive column is masked out"):
        weince(sim, t, bad)
    lonely = m.clone()                  # unequal counts are fine; no negative at all is not
    lonely[0] = False
    lonely[0, t[0]] = True
    with pytest.raises(ValueError, match="at least one negative"):
        weince(sim, t, lonely)
    with pytest.raises(ValueError, match="targets must have shape"):
        weince(sim, t[:-1], m)
    with pytest.raises(ValueError, match="mask must be a boolean"):
        weince(sim, t, m[:, :-1])
    with pytest.raises(ValueError, match="2-D"):
        weince(sim[0], t, m)
    with pytest.raises(ValueError, match="unknown loss"):
        build_loss("nope")
    with pytest.raises(ValueError, match="z1 and z2"):
        build_loss("infonce")(torch.randn(4, 3), torch.randn(5, 3))


@pytest.mark.parametrize("beta", ["one", "anchor"])
def test_fused_backward_passes_gradcheck(beta):
    # the blended logits have a hand-written backward; check it against finite differences
    sim, t, m = simclr_batch(n=8, d=4, seed=9)
    sim = sim.double().clamp(-0.99, 0.99).requires_grad_(True)
    lam = torch.linspace(0.1, 0.9, sim.shape[0], dtype=torch.float64)
    def f(s):
        bet = 1.0 if beta == "one" else torch.linspace(0.5, 3.0, s.shape[0], dtype=torch.float64)
        out = blended_logits(s, lam, 0.5, bet, 1e-6, ~m)
        return out.masked_fill(~m, 0.0)

    assert torch.autograd.gradcheck(f, (sim,), eps=1e-6, atol=1e-5)


def test_cpu_selection_equals_torch_topk():
    g = torch.Generator().manual_seed(0)
    # (B, C) = (150, 4096) runs through several row blocks; (64, 200) through one
    for B, C, dtype in ((64, 200, torch.float32), (150, 4096, torch.float32),
                        (40, 300, torch.float64)):
        x = torch.randn(B, C, generator=g, dtype=dtype)
        x[5, 10:20] = 0.25                # ties
        targets = torch.randint(0, C, (B,), generator=g)
        invalid = torch.rand(B, C, generator=g) < 0.05
        invalid[torch.arange(B), targets] = False
        for inv in (None, invalid):
            neg = negative_values(x, targets, inv)
            for k in (1, 10, 51, min(197, C - 60)):
                ref = torch.topk(neg, k, dim=1).values
                got = _top_negatives_cpu(x, targets, inv, k)
                assert got.dtype == dtype and got.is_contiguous()
                torch.testing.assert_close(got, ref, rtol=0, atol=0)
                vals, idx = _top_negatives_cpu(x, targets, inv, k, with_indices=True)
                torch.testing.assert_close(vals, ref, rtol=0, atol=0)
                torch.testing.assert_close(neg.gather(1, idx), ref, rtol=0, atol=0)
                assert all(len(set(r)) == k for r in idx.tolist())   # k distinct columns a row


def test_pooled_cpu_selection_equals_torch_topk():
    g = torch.Generator().manual_seed(1)
    v = torch.randn(5000, generator=g)
    v[:100] = float("-inf")
    v[200:210] = 1.5                      # ties
    for k in (1, 10, 250, 4900):
        ref = torch.topk(v, k).values
        torch.testing.assert_close(_largest(v, k), ref, rtol=0, atol=0)
        w = v.clone()
        torch.testing.assert_close(_largest(w, k, inplace=True), ref, rtol=0, atol=0)
    before = v.clone()
    _largest(v, 250)
    assert torch.equal(v, before)         # not in place unless asked


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_blended_logits_gradient_at_the_clamp(dtype):
    """The written-out backward equals autograd through the plain formula, including the
    entries at and above ``1 - eps`` (where the clamp holds and the Weibull slope is 0)."""
    eps, tau = 1e-3, 0.2
    g = torch.Generator().manual_seed(3)
    s0 = torch.rand(6, 7, generator=g, dtype=dtype) * 1.6 - 0.8
    s0[3, :4] = torch.tensor([1.0, 1.0 - eps / 2, 1.0 + eps, 1.0 - 2 * eps], dtype=dtype)
    lam = torch.tensor([0.0, 0.3, 1.0, 0.5, 0.9, 0.1], dtype=dtype)
    beta = torch.linspace(0.5, 3.0, 6, dtype=dtype)
    w = torch.randn(6, 7, generator=g, dtype=dtype)

    s1 = s0.clone().requires_grad_(True)
    (blended_logits(s1, lam, tau, beta, eps) * w).sum().backward()
    s2 = s0.clone().requires_grad_(True)
    ref = ((1 - lam[:, None]) * s2 / tau
           - (lam * beta)[:, None] * torch.log1p(-s2.clamp(max=1 - eps)))
    (ref * w).sum().backward()
    torch.testing.assert_close(blended_logits(s0, lam, tau, beta, eps), ref.detach())
    torch.testing.assert_close(s1.grad, s2.grad)
    flat = s1.grad[3, :3]             # clamped entries: the softmax part only
    torch.testing.assert_close(flat, (1 - lam[3]) / tau * w[3, :3])
    assert torch.isfinite(s1.grad).all()


@pytest.mark.parametrize("n", [1, 2, 7, 256])
def test_module_lambda_quantiles_match_torch_quantile(n):
    x = torch.rand(n, generator=torch.Generator().manual_seed(n))
    got = _quantiles(x)
    ref = torch.quantile(x, torch.tensor([0.1, 0.5, 0.9]))
    for i, key in enumerate(("lambda_q10", "lambda_q50", "lambda_q90")):
        torch.testing.assert_close(got[key], ref[i])
    assert got["lambda_mean"] == x.mean()


def test_weince_module_records_lambda_quantiles():
    m = build_loss("weince", tau=0.5)
    g = torch.Generator().manual_seed(1)
    m(torch.randn(40, 16, generator=g), torch.randn(40, 16, generator=g))
    st = m.last_stats
    assert float(st["lambda_q10"]) <= float(st["lambda_q50"]) <= float(st["lambda_q90"])
    assert 0.0 <= float(st["lambda_mean"]) <= 1.0


# ---------------------------------------------------------------- no host sync
def test_check_false_gives_the_same_loss_and_keeps_free_checks():
    sim, t, m = simclr_batch(n=32, seed=2)
    K = sim.shape[1] - 2
    assert torch.equal(weince(sim, t, m, check=False, num_negatives=K), weince(sim, t, m))
    assert torch.equal(weince(sim, t, m, check=False), weince(sim, t, m))
    assert torch.equal(info_nce(sim, t, m, check=False), info_nce(sim, t, m))
    with pytest.raises(ValueError, match="targets must have shape"):
        weince(sim, t[:-1], m, check=False)
    with pytest.raises(ValueError, match="num_negatives"):
        weince(sim, t, m, check=False, num_negatives=sim.shape[1])


def test_device_selection_path_equals_cpu_path():
    # the torch.topk path (what CUDA and compiled code run) against the NumPy CPU path
    g = torch.Generator().manual_seed(7)
    z1, z2 = torch.randn(48, 16, generator=g), torch.randn(48, 16, generator=g)
    for name in ("weince", "weince_recipe"):
        out = {}
        for flag in (True, False):
            common.CPU_SELECTION = flag
            try:
                f = build_loss(name, tau=0.5).train()
                out[flag] = (f(z1, z2), {k: float(v) for k, v in f.last_stats.items()})
            finally:
                common.CPU_SELECTION = True
        torch.testing.assert_close(out[False][0], out[True][0], rtol=1e-6, atol=1e-7)
        for key, val in out[True][1].items():
            assert out[False][1][key] == pytest.approx(val, rel=1e-6, abs=1e-9), key


@pytest.mark.parametrize("name", ["infonce", "weince", "weince_recipe", "infonce_topm"])
@pytest.mark.slow
def test_loss_modules_compile_fullgraph(name):
    g = torch.Generator().manual_seed(3)
    z1, z2 = torch.randn(24, 8, generator=g), torch.randn(24, 8, generator=g)
    eager = build_loss(name, tau=0.5).train()
    comp = torch.compile(build_loss(name, tau=0.5).train(), fullgraph=True, backend="aot_eager")
    a, b = eager(z1, z2), comp(z1, z2)
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_functional_api_without_checks_does_not_sync():
    sim, t, m = simclr_batch(n=64, seed=4)
    sim, t, m = sim.cuda(), t.cuda(), m.cuda()
    K = sim.shape[1] - 2
    weince(sim, t, m, check=False, num_negatives=K)           # warm-up (lazy CUDA init)
    torch.cuda.set_sync_debug_mode("error")
    try:
        a = weince(sim, t, m, check=False, num_negatives=K)
        b = info_nce(sim, t, m, check=False)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert float(a) == pytest.approx(float(weince(sim.cpu(), t.cpu(), m.cpu())), rel=1e-4)
    assert float(b) == pytest.approx(float(info_nce(sim.cpu(), t.cpu(), m.cpu())), rel=1e-5)
