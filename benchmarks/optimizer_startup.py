"""What building an optimiser costs a fresh interpreter: torch's against weince.train.optim's.

    python benchmarks/optimizer_startup.py [--repeats 7]

Each case is a new process that imports torch, builds a small model's optimiser and takes
one step; the CPU seconds the OS charges to it (user + system, ``os.wait4``) are reported as
the median over ``--repeats`` runs, the cases interleaved (their order alternating), beside
``import torch`` alone. torch's optimisers import ``torch._dynamo`` on their first
``add_param_group``/``step``; :mod:`weince.train.optim`'s do not, outside ``torch.compile``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

STEP = ("m = torch.nn.Linear(8, 8)\no = {cls}(m.parameters())\n"
        "m(torch.ones(2, 8)).sum().backward()\no.step()\no.zero_grad()\n")
CASES = {
    "import torch": "import torch\n",
    "torch.optim.Adam, one step": "import torch\n" + STEP.format(cls="torch.optim.Adam"),
    "weince.train.optim.Adam, one step": ("import torch\nfrom weince.train.optim import Adam\n"
                                          + STEP.format(cls="Adam")),
    "torch.optim.AdamW, one step": "import torch\n" + STEP.format(cls="torch.optim.AdamW"),
    "weince.train.optim.AdamW, one step": ("import torch\nfrom weince.train.optim import AdamW\n"
                                           + STEP.format(cls="AdamW")),
}


def cpu_seconds(code: str) -> float:
    proc = subprocess.Popen([sys.executable, "-c", code])
    _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"python -c failed:\n{code}")
    return ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    times: dict[str, list[float]] = {k: [] for k in CASES}
    for i in range(args.repeats):
        order = list(CASES.items())
        for name, code in (order if i % 2 else order[::-1]):
            times[name].append(cpu_seconds(code))
    base = statistics.median(times["import torch"])
    print(f"{'case':38s} {'CPU-s':>6s} {'over import torch':>18s}")
    for name, t in times.items():
        m = statistics.median(t)
        print(f"{name:38s} {m:6.2f} {m - base:+18.2f}")


if __name__ == "__main__":
    main()
