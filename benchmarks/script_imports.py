"""What each workflow script's imports cost a job, beside ``python -c "import torch"``.

    python benchmarks/script_imports.py [--repeats 3] [--scripts knn pretrain ...]

Every Snakemake ``script:`` job is a fresh interpreter: it unpickles its ``snakemake``
object (which imports part of Snakemake) and then imports what the script imports. For
each script under ``workflow/scripts`` this runs, in a new process, the script's
unconditional import statements (module level and the ``with log_to(...)`` block; an
import under ``if`` is left out, as a job need not reach it) after the Snakemake
modules the preamble loads, and reports the CPU seconds the OS charges to that process
(user + system, ``os.wait4``; median of ``--repeats``), its wall seconds, and the CPU
ratio to ``python -c "import torch"`` timed in the same run. It also says whether the
process loaded ``torchvision``, ``torch._dynamo``, ``transformers``, ``matplotlib`` or
``scipy``.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"
PREAMBLE = ("import pickle\nfrom snakemake.logging import logger\n"
            "from snakemake.iocontainers import Snakemake\n")
HEAVY = ("torchvision", "torch._dynamo", "transformers", "matplotlib", "scipy")


def script_imports(path: Path) -> list[str]:
    """The import statements a run of the script always executes, in order."""
    tree = ast.parse(path.read_text())
    out: list[str] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append(ast.unparse(node))
            elif isinstance(node, (ast.With, ast.Try)):
                walk(node.body)

    walk(tree.body)
    return out


def timed(code: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of ``python -c code``; raises on failure."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"python -c failed:\n{code}\n{err}")
    return wall, ru.ru_utime + ru.ru_stime, out


def measure(code: str, repeats: int) -> tuple[float, float, str]:
    probe = code + f"\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    runs = [timed(probe) for _ in range(repeats)]
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
            runs[-1][2].strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scripts", nargs="*", help="script names (default: all)")
    args = ap.parse_args()
    names = args.scripts or sorted(p.stem for p in SCRIPTS.glob("*.py"))
    wall_t, cpu_t, _ = measure("import torch", args.repeats)
    print(f"python -c 'import torch': {cpu_t:.2f} CPU-s, {wall_t:.2f} s wall "
          f"(median of {args.repeats})\n")
    print(f"{'script':<20} {'CPU-s':>6} {'wall-s':>7} {'x torch':>8}  heavy modules loaded")
    total = 0.0
    for name in names:
        code = PREAMBLE + "\n".join(script_imports(SCRIPTS / f"{name}.py"))
        wall, cpu, heavy = measure(code, args.repeats)
        total += cpu
        print(f"{name:<20} {cpu:6.2f} {wall:7.2f} {cpu / cpu_t:8.2f}  {heavy or '-'}")
    print(f"\nsum over {len(names)} scripts: {total:.1f} CPU-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
