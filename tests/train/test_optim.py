"""weince.train.optim: torch's optimisers, bit for bit, without importing torch._dynamo."""

from __future__ import annotations

import pytest
import torch

from weince.train.optim import Adam, AdamW
from weince.train.simclr import LARS


def _train(make_opt, steps: int = 12, seed: int = 0, resume_at: int | None = None):
    """Parameters and optimiser state after ``steps`` updates of a small MLP under a
    LambdaLR; ``resume_at``: rebuild model and optimiser from their state dicts there."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    opt = make_opt(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.9 ** s)
    g = torch.Generator().manual_seed(seed)
    for i in range(steps):
        if i == resume_at:
            saved = {k: v.clone() for k, v in model.state_dict().items()}, opt.state_dict()
            model.load_state_dict(saved[0])
            opt = make_opt(model.parameters())
            opt.load_state_dict(saved[1])
            sched.optimizer = opt
        loss = model(torch.randn(16, 6, generator=g)).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    return [p.detach().clone() for p in model.parameters()], opt.state_dict()


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("ours, theirs, kw", [
    (Adam, torch.optim.Adam, {"lr": 1e-2, "weight_decay": 1e-6}),
    (Adam, torch.optim.Adam, {"lr": 3e-3, "amsgrad": True}),
    (AdamW, torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.01}),
])
@pytest.mark.parametrize("resume_at", [None, 5])
def test_updates_and_state_are_torchs_bit_for_bit(ours, theirs, kw, resume_at):
    got = _train(lambda p: ours(p, **kw), resume_at=resume_at)
    want = _train(lambda p: theirs(p, **kw), resume_at=resume_at)
    assert _same(got[0], want[0]) and _same(got[1], want[1])


def test_a_state_dict_loads_across_the_two():
    """A checkpoint written by torch's Adam resumes in ours to the same numbers (a run
    checkpointed before this module existed)."""
    def resumed(first, second):
        torch.manual_seed(1)
        model = torch.nn.Linear(4, 2)
        opt = first(model.parameters(), lr=1e-2)
        for _ in range(2):
            model(torch.ones(5, 4)).sum().backward()
            opt.step()
            opt.zero_grad()
            sd = opt.state_dict()
            opt = second(model.parameters(), lr=1e-2)
            opt.load_state_dict(sd)
        return [p.detach() for p in model.parameters()], opt.state_dict()

    assert _same(resumed(torch.optim.Adam, Adam), resumed(torch.optim.Adam, torch.optim.Adam))


def test_step_runs_without_grad_and_returns_the_closures_loss():
    p = torch.nn.Parameter(torch.ones(3))
    opt = Adam([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        assert torch.is_grad_enabled()
        return loss

    assert float(opt.step(closure)) == 3.0
    assert not p.grad_fn and torch.all(p < 1)


def test_lars_keeps_its_update_and_checkpoint():
    mk = lambda p: LARS(p, lr=0.1, momentum=0.9, weight_decay=1e-4)  # noqa: E731
    a, b = _train(mk, resume_at=4), _train(mk)
    assert _same(a[0], b[0])


def test_none_of_them_imports_dynamo(modules_loaded):
    """Building, stepping, zeroing and checkpointing each optimiser, with a scheduler, in a
    fresh interpreter leaves torch._dynamo unloaded (torch's own optimisers import it)."""
    code = ("import torch\n"
            "from weince.train.optim import Adam, AdamW\n"
            "from weince.train.simclr import LARS\n"
            "for cls in (Adam, AdamW, LARS):\n"
            "    p = torch.nn.Parameter(torch.ones(3))\n"
            "    opt = cls([p], lr=0.1)\n"
            "    s = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)\n"
            "    (p ** 2).sum().backward(); opt.step(); s.step(); opt.zero_grad()\n"
            "    opt.load_state_dict(opt.state_dict())\n")
    assert modules_loaded(code, ["torch._dynamo"]) == {"torch._dynamo": False}
    assert modules_loaded("import torch\np = torch.nn.Parameter(torch.ones(2))\n"
                          "torch.optim.Adam([p]).zero_grad()", ["torch._dynamo"]) == {
        "torch._dynamo": True}, "torch's optimisers no longer import dynamo: drop this module"
