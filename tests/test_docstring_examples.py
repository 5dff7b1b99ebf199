"""The examples in the public losses' and fits' docstrings run as copied and print what they
show.

Each module's docstrings are run by :mod:`doctest` (the suite collects only the test files:
this test names the modules whose examples are part of the documentation), each example in
an empty namespace: a name it uses without importing it fails, as it would for a reader
who pastes it."""

from __future__ import annotations

import doctest
import importlib
import inspect
import warnings

import pytest

from weince.losses import InfoNCELoss, WEINCELoss, WEINCERecipeLoss

MODULES = ["weince.losses.modules", "weince.losses.recipe", "weince.losses.infonce",
           "weince.losses.weince",
           "weince.losses._common", "weince.losses.baselines", "weince.losses.bank",
           "weince.losses.dual",
           "weince.evt.gpd", "weince.evt.link", "weince.utils.distributed"]

# the objects whose help() an adopter reads: each must carry a runnable example
DOCUMENTED = {
    "weince.losses.modules": ["InfoNCELoss", "WEINCELoss", "build_loss", "register_loss"],
    "weince.losses.recipe": ["InfoNCETopMLoss", "WEINCERecipeLoss", "WEINCERecipeNoWeibLoss"],
    "weince.losses.infonce": ["info_nce"],
    "weince.losses.weince": ["weince", "weince_statistics", "tail_size"],
    "weince.losses._common": ["pair_similarities", "queue_similarities"],
    "weince.losses.baselines": ["hcl", "dcl"],
    "weince.losses.bank": ["MemoryBank"],
    "weince.losses.dual": ["dual_encoder_loss", "DualEncoderLoss"],
    "weince.evt.gpd": ["fit_gpd_pot"],
    "weince.evt.link": ["fit_link_selection"],
}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    mod = importlib.import_module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # fits' small-sample notes are not output
        res = doctest.testmod(mod, globs={}, report=True, verbose=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0, f"{res.failed} docstring example(s) of {name} failed (output above)"
    assert res.attempted or name not in DOCUMENTED, f"{name} has no docstring example"


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_public_objects_carry_examples_and_arguments(name):
    mod = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    for attr in DOCUMENTED[name]:
        obj = getattr(mod, attr)
        doc = obj.__doc__ or ""
        assert ">>>" in doc, f"{name}.{attr} has no runnable example"
        tests = [t for t in finder.find(obj, attr, module=mod) if t.name == attr]
        assert tests and tests[0].examples, f"{name}.{attr}: doctest finds no example"
        if callable(obj) and attr not in {"register_loss", "WEINCERecipeNoWeibLoss", "tail_size",
                                          "MemoryBank"}:
            assert "Raises:" in doc, f"{name}.{attr} does not say what it raises"


def test_help_of_the_loss_modules_is_complete():
    """``help(WEINCELoss)``: paper, shapes, every argument of the constructor, the
    statistics it logs, an example; ``forward`` has its own docstring."""
    for cls in (InfoNCELoss, WEINCELoss, WEINCERecipeLoss):
        doc = cls.__doc__
        assert "Shape:" in doc and "(N, d)" in doc and "Example:" in doc, cls.__name__
        assert cls.forward.__doc__, f"{cls.__name__}.forward has no docstring"
        params = [p for p in inspect.signature(cls.__init__).parameters
                  if p not in {"self", "kwargs"}]
        for p in params:
            assert f"{p}:" in doc or f"{p}," in doc or f", {p}:" in doc, \
                f"{cls.__name__}: {p} undocumented"
    doc = WEINCELoss.__doc__
    assert "arXiv 2606.00262" in doc and "docs/method.md" in doc
    for key in ("lambda_mean", "lambda_q10", "lambda_q50", "lambda_q90", "rho0", "daic_mean",
                "beta_w_mean"):
        assert f"``{key}``" in doc, key
