"""The whole SimCLR step (views, forward, loss, gradients, Adam) as one compiled graph.

``torch.compile(fullgraph=True)`` fails on any graph break, in particular on a
data-dependent Python branch, i.e. on a host synchronisation creeping into the step. The
compiled step must equal the eager one (``torch.optim.Adam`` and ``loss.backward()``) to
float tolerance. One backbone per arm here (smallcnn: seconds); ResNet-18/50 and ViT-S
are compiled by ``benchmarks/gpu_acceptance.sh`` (its CPU mode: tests/test_gpu_acceptance.py).

On the CPU, Inductor is asked for scalar C++ kernels (``cpp.simdlen = 0``): it otherwise
generates and compiles a vectorised twin of each kernel beside the scalar one, which took a
third of this module's time with an empty compile cache (104 s -> 70 s and 132 s -> 84 s
side by side, four arms), and that CPU vectorisation is code the GPU step never runs (it is
Triton's there). Dynamo's graph, AOTAutograd's joint graph with Adam inside it, and
Inductor's lowering, fusion and RNG are the same.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch._inductor.config

from weince.data.augment import build_augment
from weince.losses import build_loss
from weince.models import build_simclr_model
from weince.train.simclr import CompiledStep, SimCLRConfig, eager_step, complete_config

ARMS = ("infonce", "weince", "weince_recipe", "infonce_topm")
# Adam's first steps are ~lr * sign(grad): a gradient of 1e-9 whose sign differs by rounding
# between two correct implementations moves a weight by 2 lr. A larger eps makes the update
# linear in small gradients, so that the comparison is well conditioned.
ADAM_EPS = 0.1


def _setup(loss: str, backbone: str = "smallcnn", size: int = 16, channels: int = 1, seed: int = 0):
    torch.manual_seed(seed)
    model = build_simclr_model(backbone, size, channels, out_dim=16)
    loss_fn = build_loss(loss, tau=0.5).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6, eps=ADAM_EPS)
    dataset = "digits" if channels == 1 else "cifar10"
    aug = build_augment(dataset, image_size=size)
    return model, loss_fn, opt, aug


def _images(n: int, size: int, channels: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, channels, size, size), generator=g, dtype=torch.uint8)


def run_both(loss: str, steps: int = 2, batch: int = 24, backend: str = "inductor", **kw):
    size, channels = kw.get("size", 16), kw.get("channels", 1)
    images = _images(batch, size, channels)
    ref = _setup(loss, **kw)
    got = _setup(loss, **kw)
    got = (copy.deepcopy(ref[0]), got[1], None, got[3])
    got = (got[0], got[1], torch.optim.Adam(got[0].parameters(), lr=1e-3, weight_decay=1e-6,
                                            eps=ADAM_EPS), got[3])
    g_ref, g_got = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    step = CompiledStep(got[0], got[1], got[2], got[3], mode="default", backend=backend)
    losses = []
    # the graph is compiled at the first call: scalar C++ kernels (module docstring)
    with torch._inductor.config.patch({"cpp.simdlen": 0}):
        for _ in range(steps):
            a = eager_step(ref[0], ref[1], ref[2], ref[3], images, g_ref)
            b, stats = step(images, g_got)
            losses.append((float(a), float(b)))
    return ref, got, losses, step


@pytest.mark.slow
@pytest.mark.parametrize("loss", ARMS)
def test_compiled_step_equals_eager(loss):
    ref, got, losses, step = run_both(loss)
    for a, b in losses:
        assert b == pytest.approx(a, rel=1e-4, abs=1e-5)
    for (name, p), q in zip(ref[0].named_parameters(), got[0].parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=f"parameter {name}")
    for a, b in zip(ref[0].buffers(), got[0].buffers()):    # BatchNorm running statistics
        torch.testing.assert_close(b.float(), a.float(), rtol=1e-4, atol=1e-5)
    if loss == "weince_recipe":
        torch.testing.assert_close(got[1].beta_t, ref[1].beta_t, rtol=1e-5, atol=1e-6)
    # the optimiser state is Adam's own: an eager step continues from it
    assert int(got[2].state[next(got[0].parameters())]["step"]) == len(losses)


@pytest.mark.slow
def test_aot_eager_backend_equals_eager_and_takes_the_default_mode_only():
    """``CompiledStep(backend="aot_eager")`` (the acceptance script's CPU check) is the same
    step: one Dynamo graph through AOTAutograd, run without Inductor; Inductor's compile modes
    are refused with it."""
    model, loss_fn, opt, aug = _setup("weince")
    with pytest.raises(ValueError, match="Inductor's"):
        CompiledStep(model, loss_fn, opt, aug, mode="reduce-overhead", backend="aot_eager")
    torch._dynamo.reset()
    ref, got, losses, step = run_both("weince", backend="aot_eager")
    assert step.backend == "aot_eager"
    for a, b in losses:
        assert b == pytest.approx(a, rel=1e-5, abs=1e-6)
    for (name, p), q in zip(ref[0].named_parameters(), got[0].parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6, msg=f"parameter {name}")


@pytest.mark.slow
def test_compiled_step_has_no_graph_break():
    model, loss_fn, opt, aug = _setup("weince_recipe")
    step = CompiledStep(model, loss_fn, opt, aug, mode=None)   # the plain function
    images = _images(16, 16, 1)
    u = aug.draw(32, torch.Generator().manual_seed(0))
    with torch._dynamo.config.patch(trace_autograd_ops=True):
        out = torch._dynamo.explain(step._step)(images, u, step.lr)
    assert out.graph_break_count == 0, out.break_reasons
    assert out.graph_count == 1


def test_compile_step_config_is_checked():
    with pytest.raises(ValueError, match="compile_step"):
        complete_config({"compile_step": "fast"})   # a dict is typed: the mode's Literal
    with pytest.raises(ValueError, match="optimizer: adam"):
        complete_config(SimCLRConfig(compile_step="default", optimizer="lars"))
    assert complete_config(SimCLRConfig(compile_step="reduce-overhead")).compile_step \
        == "reduce-overhead"


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("loss, compiled", [(a, False) for a in ARMS] + [("weince_recipe", True)])
def test_cuda_training_step_does_not_sync(loss, compiled):
    model, loss_fn, opt, aug = _setup(loss, size=32, channels=3)
    model, loss_fn = model.cuda().to(memory_format=torch.channels_last), loss_fn.cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)
    images = _images(64, 32, 3).cuda()
    gen = torch.Generator(device="cuda").manual_seed(0)
    if compiled:
        step = CompiledStep(model, loss_fn, opt, aug, use_amp=True, channels_last=True)
    else:
        def step(batch, g):
            return eager_step(model, loss_fn, opt, aug, batch, g, use_amp=True, channels_last=True)
    step(images, gen)                   # warm-up: lazy init, cuDNN autotuning, compilation
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            out = step(images, gen)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    loss_val = out[0] if isinstance(out, tuple) else out
    assert torch.isfinite(loss_val)
