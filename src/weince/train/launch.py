"""Launch a training run of the workflow on several processes with ``torchrun``.

A rule whose ``gpu`` resource is above 1 (``resources: {pretrain: {gpu: 4}}`` or
``{simcse: {gpu: 4}}`` in the workflow config) trains one model on that many processes of
one node:

    torchrun --standalone --nproc_per_node=<gpu> -m weince.cli pretrain --config CFG --out DIR
    torchrun --standalone --nproc_per_node=<gpu> -m weince.cli simcse --config CFG --out DIR

(run as ``python -m torch.distributed.run``, the module behind the ``torchrun`` command, so
the interpreter of the workflow is used). ``batch_size`` stays the config's *global* batch:
:mod:`weince.train.simclr` and :mod:`weince.train.simcse` give every rank its slice and
all-gather the embeddings with gradient. Each rank uses ``cuda:LOCAL_RANK`` (NCCL) when the
config's device is CUDA, else the CPU (gloo) — which is how the tests run it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from weince.utils.config import to_dict

__all__ = ["torchrun_command", "run_torchrun"]


def torchrun_command(nproc: int, command: str, config: str | Path, out: str | Path) -> list[str]:
    """The ``torchrun --standalone --nproc_per_node=N -m weince.cli <command>`` argv."""
    if int(nproc) < 2:
        raise ValueError(f"torchrun needs nproc >= 2, got {nproc}")
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={int(nproc)}", "-m", "weince.cli", command,
            "--config", str(config), "--out", str(out)]


def run_torchrun(command: str, cfg: Any, out: str | Path, nproc: int,
                 threads: int = 1) -> None:
    """Write ``cfg`` (a dict or a config dataclass) next to the run
    (``<out>/launch_config.yaml``, JSON is YAML) and train it with ``torchrun`` on ``nproc``
    processes, ``threads // nproc`` CPU threads each. The processes' output goes to this
    process's stdout/stderr (the rule's log)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / "launch_config.yaml"
    plain = to_dict(cfg) if dataclasses.is_dataclass(cfg) else cfg
    cfg_path.write_text(json.dumps(plain, indent=1, default=str))
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, int(threads) // int(nproc)))}
    argv = torchrun_command(nproc, command, cfg_path, out)
    print("launching: " + " ".join(argv), flush=True)
    proc = subprocess.run(argv, env=env, stdout=sys.stdout, stderr=sys.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun exited with {proc.returncode}: {' '.join(argv)}")
