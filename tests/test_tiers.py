"""The suite's tiers and its machinery (tests/conftest.py): a slow fixture cannot leak into the
fast tier, the tiers are disjoint, the longest-first list names real modules, and each test
process gets its share of the cores."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
TIERS = ("slow", "cluster", "rehearsal")


@pytest.fixture(scope="module")
def suite(pytestconfig):
    """tests/conftest.py, as pytest loaded it."""
    path = REPO / "tests" / "conftest.py"
    for plugin in pytestconfig.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) and Path(plugin.__file__).resolve() == path:
            return plugin
    pytest.fail("tests/conftest.py is not among pytest's plugins")


def test_every_slow_fixture_is_defined_in_the_suite(suite):
    defined = set()
    for path in (REPO / "tests").rglob("*.py"):
        defined |= set(re.findall(r"@pytest\.fixture[^\n]*\ndef (\w+)\(", path.read_text()))
    assert suite.SLOW_FIXTURES and suite.SLOW_FIXTURES <= defined, \
        sorted(suite.SLOW_FIXTURES - defined)


def test_a_test_using_a_slow_fixture_is_slow_even_through_another_fixture(pytester, suite):
    """A mini suite under the real conftest: a fast-looking test that uses a slow fixture,
    directly or through a fixture of its own, is deselected by the fast tier's -m and
    selected by -m slow; a cluster test stays in its own tier."""
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    slow = sorted(suite.SLOW_FIXTURES)[0]
    pytester.makepyfile(test_mini=f"""
        import pytest

        @pytest.fixture(scope="module")
        def {slow}():
            return 1

        @pytest.fixture
        def wrapper({slow}):
            return {slow}

        def test_direct({slow}):
            assert {slow} == 1

        def test_through_a_fixture(wrapper):
            assert wrapper == 1

        def test_plain():
            pass

        @pytest.mark.cluster
        def test_on_the_cluster({slow}):
            pass
        """)
    pytester.makeini("[pytest]\nmarkers =\n    slow: s\n    cluster: c\n    rehearsal: r\n"
                     "    cuda: g\n")
    fast = pytester.runpytest("-p", "no:xdist", "-p", "no:cacheprovider",
                              "-m", "not slow and not cluster and not rehearsal")
    fast.assert_outcomes(passed=1, deselected=3)
    slow_tier = pytester.runpytest("-p", "no:xdist", "-p", "no:cacheprovider", "-m", "slow")
    slow_tier.assert_outcomes(passed=2, deselected=2)


def test_the_fast_tier_is_the_default_and_each_tier_is_a_ci_step():
    """pyproject.toml's addopts deselect every tier; .ci/run runs each one as its own step."""
    text = (REPO / "pyproject.toml").read_text()
    addopts = re.search(r"^addopts = (.*)$", text, re.M).group(1)
    assert "-m 'not slow and not cluster and not rehearsal'" in addopts
    ci = (REPO / ".ci" / "run").read_text()
    for tier in TIERS:
        assert re.search(rf"python -m pytest\b[^\n]*-m {tier}\b", ci), tier


def test_the_suite_s_longest_first_list_names_modules_that_exist(suite):
    """tests/conftest.py hands these modules out first; a renamed one would silently fall back
    to the ordinary order."""
    assert suite.LONGEST_FIRST
    missing = [m for m in suite.LONGEST_FIRST if not (REPO / m).is_file()]
    assert not missing, missing


def test_each_test_process_runs_torch_on_its_share_of_the_cores(suite):
    """With ``-n N`` (``pyproject.toml``) tests/conftest.py gives each test process
    ``cores // N`` OpenMP threads through the environment, so it must be set before torch
    loads in the process: torch's thread count is that number here."""
    share = suite.threads_per_process
    assert (share(2, 2), share(16, 2), share(3, 2), share(1, 2), share(None, 2)) == (1, 8, 1, 1, 1)
    assert share(8, 0) == 8
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 2:
        pytest.skip("one test process (-n 0): torch keeps its own thread count")
    assert "OMP_NUM_THREADS" in os.environ
    assert torch.get_num_threads() == int(os.environ["OMP_NUM_THREADS"])
