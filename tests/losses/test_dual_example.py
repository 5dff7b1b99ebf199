"""The dual-encoder example of docs/using-the-loss.md ("Two encoders (CLIP-style)") runs as
printed, offline: two small encoders trained with InfoNCE and with WEINCE on scikit-learn's
digits against synthetic captions embedded by the shipped MiniLM, and text-to-image recall
well above chance for both. A check of the pipeline, not of which loss is better."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "using-the-loss.md"

pytestmark = pytest.mark.slow     # transformers, MiniLM and 2 x 100 training steps: minutes


def dual_example() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), flags=re.S | re.M)
    (code,) = [b for b in blocks if "DualEncoderLoss" in b and b.startswith("# needs the extras")]
    return code


def test_the_dual_encoder_example_runs_offline_and_retrieves(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("transformers")
    code = dual_example()
    assert code.startswith("# needs the extras"), "the core-install tests skip it by this line"
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", str(script)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    n = int(re.search(r"on (\d+) held-out pairs", lines[0]).group(1))
    rows = {m.group(1): (float(m.group(2)), float(m.group(3))) for line in lines[1:]
            if (m := re.fullmatch(r"(\w+)\s+R@1 ([\d.]+)\s+R@5 ([\d.]+)", line))}
    assert set(rows) == {"infonce", "weince"}, out.stdout
    for loss, (r1, r5) in rows.items():
        # chance is 1/n and 5/n; both encoders learn the captions' content
        assert r1 >= 20 / n and r5 >= 5 * 10 / n and r5 >= r1, (loss, r1, r5, n)
