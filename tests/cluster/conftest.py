"""Fixtures for the tests that need the local SLURM cluster.

Start the cluster first (as root; installs the Debian packages if missing):

    bash tests/cluster/setup_slurm.sh
    python -m pytest -m cluster tests/cluster -v
    bash tests/cluster/teardown_slurm.sh

Without a reachable cluster the `cluster` tests are skipped with the reason; with
``WEINCE_REQUIRE_CLUSTER=1`` (set by CI) they fail instead, so a broken cluster can
never pass as a skip.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from weince.cost import plan as planner

REPO = Path(__file__).resolve().parents[2]
TEST_PROFILE = REPO / "tests" / "cluster" / "profile"
STATE = Path(os.environ.get("WEINCE_SLURM_STATE", "/var/tmp/weince-slurm"))
SETUP_HINT = "start it with `sudo bash tests/cluster/setup_slurm.sh`"


def _run(cmd: list[str], timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def read_cluster_env(path: Path = STATE / "cluster.env") -> dict[str, str]:
    """KEY=VALUE lines written by setup_slurm.sh (cluster, account, partition, node...)."""
    env = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            env[k.strip()] = v.strip()
    return env


def cluster_problem() -> str | None:
    """Why the test cluster cannot be used right now, or None when it can."""
    missing = [t for t in ("sinfo", "sbatch", "sacct", "scancel") if shutil.which(t) is None]
    if missing:
        return f"SLURM client tools not installed ({', '.join(missing)}); {SETUP_HINT}"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return ("snakemake-executor-plugin-slurm is not installed in this Python; "
                "`pip install -e '.[slurm]'`")
    env_file = STATE / "cluster.env"
    if not env_file.exists():
        return f"{env_file} not found: the test cluster is not running; {SETUP_HINT}"
    env = read_cluster_env(env_file)
    try:
        st = _run(["sinfo", "-h", "-n", env.get("WEINCE_SLURM_NODE", ""), "-o", "%t"])
        if st.returncode != 0:
            return f"`sinfo` failed ({st.stderr.strip()[:300]}); {SETUP_HINT}"
        state = st.stdout.strip()
        if not re.fullmatch(r"(idle|mix|alloc)", state):
            return f"test node state is {state!r}, not idle/mix/alloc; {SETUP_HINT} --fresh"
        acct = _run(["sacct", "-X", "-n", "-S", "now-1minutes"])
        if acct.returncode != 0:
            return (f"`sacct` failed ({acct.stderr.strip()[:300]}): accounting (slurmdbd) "
                    f"is down; {SETUP_HINT} --fresh")
    except subprocess.TimeoutExpired as err:
        return f"`{' '.join(err.cmd)}` timed out: the cluster does not answer; {SETUP_HINT} --fresh"
    return None


@pytest.fixture(scope="session")
def slurm_cluster() -> dict[str, str]:
    """The running test cluster's facts (cluster.env), or skip/fail with the reason."""
    problem = cluster_problem()
    if problem:
        if os.environ.get("WEINCE_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"WEINCE_REQUIRE_CLUSTER=1 but the SLURM test cluster is unusable: "
                        f"{problem}")
        pytest.skip(problem)
    return read_cluster_env()


def copy_repo(dst: Path) -> Path:
    """Copy the checkout's tracked and untracked-but-not-ignored files to ``dst`` (no
    results/, reports/<profile>/, .snakemake/ or virtual environments)."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO, capture_output=True, check=True).stdout.decode()
        files = [f for f in listing.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = None
    if files is None:
        ignore = shutil.ignore_patterns(".git", ".venv", "venv", "results", ".snakemake",
                                        "__pycache__", ".pytest_cache", "*.egg-info")
        shutil.copytree(REPO, dst, ignore=ignore)
        return dst
    for rel in files:
        src = REPO / rel
        if not src.is_file():
            continue            # deleted in the working tree
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out)
    return dst


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """A private copy of the checkout to run the workflow in."""
    return copy_repo(tmp_path / "repo")


@pytest.fixture(scope="session")
def plan():
    """The dry-run planner of ``weince plan`` (weince.cost.plan)."""
    return planner
