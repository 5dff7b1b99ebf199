"""The loss API refuses what it cannot use: integer, bool, non-tensor and
``d = 0`` inputs, and a ``tau`` that is not a finite positive number usable in the input's
dtype, raise a ``ValueError`` naming the argument (before: ``torch.finfo``/``amax`` errors
from deep inside, NaN for ``tau=1e-300``, a constant loss for ``tau=inf``). A NumPy scalar
or a 0-d tensor ``tau`` is a number like any other."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from weince.losses import LOSSES, build_loss, info_nce, pair_similarities, topm_softmax, weince
from weince.losses.baselines import dcl, hcl
from weince.losses.recipe import fit_batch_beta, topm_weibull

G = torch.Generator().manual_seed(0)
Z1, Z2 = torch.randn(8, 4, generator=G), torch.randn(8, 4, generator=G)
SIM, T, M = pair_similarities(Z1, Z2, "simclr")
FUNCTIONS = {"info_nce": info_nce, "weince": weince, "hcl": hcl, "dcl": dcl,
             "topm_softmax": topm_softmax}

# (what, z1, z2, the message)
VIEWS = [
    ("int64 embeddings", Z1.long(), Z2.long(), r"z1 must be a floating-point tensor.*int64"),
    ("bool embeddings", Z1 > 0, Z2 > 0, r"z1 must be a floating-point tensor.*bool"),
    ("a list", Z1.tolist(), Z2, r"z1 must be a tensor of embeddings.*got list"),
    ("a NumPy array", Z1, Z2.numpy(), r"z2 must be a tensor of embeddings.*got ndarray"),
    ("d = 0", torch.zeros(8, 0), torch.zeros(8, 0), r"d = 0 dimensions.*d >= 1"),
]

# (what, sim, the message)
SIMS = [
    ("int64 similarities", SIM.long(), r"sim must be a floating-point tensor.*int64"),
    ("bool similarities", SIM > 0, r"sim must be a floating-point tensor.*bool"),
    ("a list", SIM.tolist(), r"sim must be a 2-D tensor.*got list"),
]

# (what, tau, the message)
BAD_TAU = [
    ("tau = 1e-300", 1e-300, r"tau=1e-300 cannot be used with torch.float32.*overflow"),
    ("tau = 1e300", 1e300, r"tau=1e\+300 cannot be used with torch.float32.*vanish"),
    ("tau = inf", float("inf"), r"tau must be a finite positive number.*inf"),
    ("tau = nan", float("nan"), r"tau must be a finite positive number.*nan"),
    ("tau = 0", 0.0, r"tau must be a finite positive number"),
    ("tau = -0.5", -0.5, r"tau must be a finite positive number"),
    ("tau = True", True, r"tau must be a real number.*bool"),
    ("tau = '0.5'", "0.5", r"tau must be a real number.*str"),
    ("tau = a 1-d tensor", torch.tensor([0.5]), r"tau must be a real number or a 0-d.*\(1,\)"),
]

GOOD_TAU = [("float", 0.5), ("int", 1), ("numpy float32", np.float32(0.5)),
            ("numpy float64", np.float64(0.5)), ("0-d tensor", torch.tensor(0.5)),
            ("0-d float64 tensor", torch.tensor(0.5, dtype=torch.float64))]


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("what, z1, z2, msg", VIEWS, ids=[v[0] for v in VIEWS])
def test_modules_refuse_unusable_embeddings(name, what, z1, z2, msg):
    with pytest.raises(ValueError, match=msg):
        build_loss(name)(z1, z2)


@pytest.mark.parametrize("what, z1, z2, msg", VIEWS, ids=[v[0] for v in VIEWS])
def test_pair_similarities_refuses_unusable_embeddings(what, z1, z2, msg):
    with pytest.raises(ValueError, match=msg):
        pair_similarities(z1, z2, "simclr")


@pytest.mark.parametrize("fn", [*FUNCTIONS.values(), topm_weibull, fit_batch_beta],
                         ids=[*FUNCTIONS, "topm_weibull", "fit_batch_beta"])
@pytest.mark.parametrize("what, sim, msg", SIMS, ids=[s[0] for s in SIMS])
def test_functional_api_refuses_unusable_similarities(fn, what, sim, msg):
    with pytest.raises(ValueError, match=msg):
        fn(sim, T, M)


@pytest.mark.parametrize("fn", list(FUNCTIONS.values()), ids=list(FUNCTIONS))
@pytest.mark.parametrize("what, tau, msg", BAD_TAU, ids=[b[0] for b in BAD_TAU])
def test_functional_api_refuses_unusable_tau(fn, what, tau, msg):
    with pytest.raises(ValueError, match=msg):
        fn(SIM, T, M, tau=tau)


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("what, tau, msg", [b for b in BAD_TAU if "float32" not in b[2]],
                         ids=[b[0] for b in BAD_TAU if "float32" not in b[2]])
def test_modules_refuse_unusable_tau(name, what, tau, msg):
    with pytest.raises(ValueError, match=msg):
        build_loss(name, tau=tau)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_a_tau_too_small_for_the_input_dtype_is_refused_at_the_call(name):
    """1e-300 is usable in float64 (the module accepts it) but overflows float32: the
    float32 call says so instead of returning NaN."""
    loss = build_loss(name, tau=1e-300)
    with pytest.raises(ValueError, match=r"tau=1e-300 cannot be used with torch.float32"):
        loss(Z1, Z2)
    # bf16 views are cast to float32 first (the loss computes in float32): the same refusal
    with pytest.raises(ValueError, match=r"torch.float32 inputs.*overflow in torch.float32"):
        loss(Z1.bfloat16(), Z2.bfloat16())


@pytest.mark.parametrize("what, tau", GOOD_TAU, ids=[g[0] for g in GOOD_TAU])
def test_numpy_and_0d_tensor_tau_equal_the_float(what, tau):
    ref = float(tau)
    for fn in FUNCTIONS.values():
        assert torch.equal(fn(SIM, T, M, tau=tau), fn(SIM, T, M, tau=ref)), fn.__name__
    for name in sorted(LOSSES):
        got = build_loss(name, tau=tau)
        assert isinstance(got.tau, float) and got.tau == ref
        assert torch.equal(got(Z1, Z2), build_loss(name, tau=ref)(Z1, Z2)), name


# ---------------------------------------------------------------- temperature = tau
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_modules_take_temperature_as_tau(name):
    """lightly's users write ``temperature``: the same option, the same loss."""
    got, ref = build_loss(name, temperature=0.2), build_loss(name, tau=0.2)
    assert got.tau == 0.2 and repr(got) == repr(ref)
    assert torch.equal(got(Z1, Z2), ref(Z1, Z2))
    assert build_loss(name).tau == 0.5                        # neither: the default
    with pytest.raises(ValueError, match=r"got tau=0.2 and temperature=0.3: .*only one"):
        build_loss(name, tau=0.2, temperature=0.3)
    with pytest.raises(ValueError, match=r"tau must be a finite positive number"):
        build_loss(name, temperature=-1.0)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions_take_temperature_as_tau(name):
    fn = FUNCTIONS[name]
    assert torch.equal(fn(SIM, T, M, temperature=0.2), fn(SIM, T, M, tau=0.2))
    assert torch.equal(fn(SIM, T, M), fn(SIM, T, M, tau=0.5))
    with pytest.raises(ValueError, match=r"got tau=0.2 and temperature=0.2: .*only one"):
        fn(SIM, T, M, tau=0.2, temperature=0.2)


# ---------------------------------------------------------------- repr
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_repr_shows_every_constructor_option(name):
    """``repr(loss_fn)`` names each option of the constructor (``temperature`` is ``tau``),
    with its value: a non-default value shows up."""
    params: set[str] = set()
    for c in (c for c in LOSSES[name].__mro__ if "__init__" in vars(c)):
        sig = inspect.signature(c.__init__).parameters
        params |= set(sig) - {"self", "kwargs", "temperature"}
        if not any(p.kind is p.VAR_KEYWORD for p in sig.values()):
            break                           # **kwargs: the parent's options come too
    text = repr(build_loss(name))
    missing = sorted(p for p in params if f"{p}=" not in text)
    assert not missing, f"{name}: repr {text} lacks {missing}"
    assert "tau=0.25" in repr(build_loss(name, tau=0.25))


def test_the_recipe_repr_shows_its_own_options():
    text = repr(build_loss("weince_recipe", top_m=7, w_weib=0.1, w_soft=0.2, momentum=0.5))
    for part in ("top_m=7", "w_weib=0.1", "w_soft=0.2", "momentum=0.5", "beta_t_init=4.0",
                 "memory_bank_size=0", "gather_distributed=False"):
        assert part in text, part
