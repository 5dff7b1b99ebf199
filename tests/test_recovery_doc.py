"""docs/recovery.md's commands after a hard kill stop the orphaned jobs of the checkout they
are run in, and leave alone the jobs of another checkout of the same user."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _stop_snippet() -> str:
    text = (REPO / "docs" / "recovery.md").read_text()
    assert "pkill -u" not in text and not re.search(r"^pkill ", text, re.M)
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("here="))
    end = next(i for i, ln in enumerate(lines) if ln.strip() == "done")
    return "\n".join(lines[start:end + 1]) + "\n"


def _fake_job(cwd: Path) -> subprocess.Popen:
    """A process whose command line looks like a Snakemake job's script, running in ``cwd``."""
    (cwd / ".snakemake" / "scripts").mkdir(parents=True)
    script = cwd / ".snakemake" / "scripts" / "tmpabcd.pretrain.py"
    script.write_text("import time\ntime.sleep(60)\n")
    return subprocess.Popen([sys.executable, ".snakemake/scripts/tmpabcd.pretrain.py"], cwd=cwd)


def test_the_recovery_commands_stop_only_this_checkouts_jobs(tmp_path):
    mine, other = tmp_path / "checkout", tmp_path / "other_checkout"
    mine.mkdir()
    other.mkdir()
    jobs = {"mine": _fake_job(mine), "other": _fake_job(other)}
    try:
        time.sleep(0.5)
        out = subprocess.run(["bash", "-c", _stop_snippet()], cwd=mine, capture_output=True,
                             text=True, timeout=30)
        jobs["mine"].wait(timeout=10)             # stopped
        assert jobs["mine"].returncode != 0, out
        assert jobs["other"].poll() is None       # another checkout's job lives on
    finally:
        for p in jobs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
