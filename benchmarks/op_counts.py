"""Count the ops of one loss forward+backward: a device-independent proxy for launch overhead.

    python benchmarks/op_counts.py                    # 2N = 512, d = 128, every arm
    python benchmarks/op_counts.py --sizes 512 4096 --no-compiled --json counts.json

Columns (all on CPU, no GPU needed):

- ``eager``: top-level ATen ops of one forward+backward under ``torch.profiler`` (ops whose
  profiler ancestors contain no other ``aten::`` op; the backward's ops count too, the
  preparation of the input leaves does not). This is the eager CPU path as a user runs it,
  including the NumPy top-k selection WEINCE uses on CPU (NumPy work is not an ATen op).
- ``eager_device``: the same count with the CPU selection switched off, i.e. the
  ``torch.topk`` path that CUDA runs. Top-level ops undercount composite ones
  (``cross_entropy`` is one op here, several kernels on a device).
- ``compiled``: ATen nodes (``call_function``) of the forward and the backward graph that
  ``torch.compile(fullgraph=True)`` hands to its backend, after AOTAutograd (functionalised
  ATen IR, before Inductor fuses anything). Device-independent; views count as nodes.
- ``inductor_kernels``: kernels Inductor generates for CPU for the same graphs
  (``torch._inductor.metrics.generated_kernel_count``: fused C++ loops; library calls such
  as ``mm`` or ``topk`` are not counted; on CUDA the fusion, hence the number, may differ)
  -- a count for this CPU only.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch._dynamo
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch._inductor import metrics
from torch.profiler import ProfilerActivity, profile

from weince.losses import _common, build_loss

ARMS = ("infonce", "weince", "weince_recipe", "infonce_topm")


def _inputs(two_n: int, dim: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    n = two_n // 2
    z1 = torch.randn(n, dim, generator=g)
    z2 = z1 + 0.5 * torch.randn(n, dim, generator=g)
    return z1, z2


def _leaves(z1, z2):
    return z1.clone().requires_grad_(True), z2.clone().requires_grad_(True)


def eager_ops(name: str, two_n: int = 512, dim: int = 128, device_path: bool = False):
    """Top-level ATen ops of one forward+backward, and their names in order."""
    z1, z2 = _inputs(two_n, dim)
    fn = build_loss(name, tau=0.5).train()
    old = _common.CPU_SELECTION
    _common.CPU_SELECTION = not device_path
    try:
        a, b = _leaves(z1, z2)
        fn(a, b).backward()  # warm-up: caches, first-call work
        a, b = _leaves(z1, z2)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn(a, b).backward()
    finally:
        _common.CPU_SELECTION = old
    names = []
    for ev in prof.events():
        if not ev.name.startswith("aten::"):
            continue
        par, top = ev.cpu_parent, True
        while par is not None:
            if par.name.startswith("aten::"):
                top = False
                break
            par = par.cpu_parent
        if top:
            names.append(ev.name[len("aten::"):])
    return len(names), names


def compiled_ops(name: str, two_n: int = 512, dim: int = 128, inductor: bool = True):
    """``(aten_nodes, inductor_kernels)`` of the compiled forward+backward (see module doc)."""
    z1, z2 = _inputs(two_n, dim)
    nodes = []

    def counting(gm, example_inputs):
        nodes.append(sum(1 for nd in gm.graph.nodes if nd.op == "call_function"))
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=counting, bw_compiler=counting)
    torch._dynamo.reset()
    fn = torch.compile(build_loss(name, tau=0.5).train(), backend=backend, fullgraph=True)
    a, b = _leaves(z1, z2)
    fn(a, b).backward()
    aten = sum(nodes)
    kernels = None
    if inductor:
        torch._dynamo.reset()
        metrics.reset()
        fn = torch.compile(build_loss(name, tau=0.5).train(), fullgraph=True)
        a, b = _leaves(z1, z2)
        fn(a, b).backward()
        kernels = metrics.generated_kernel_count
    torch._dynamo.reset()
    return aten, kernels


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[512])
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--losses", nargs="+", default=list(ARMS))
    p.add_argument("--no-compiled", action="store_true", help="skip the torch.compile counts")
    p.add_argument("--no-inductor", action="store_true", help="skip the Inductor kernel count")
    p.add_argument("--show", default=None, help="print the eager op names of this loss")
    p.add_argument("--json", default=None, help="also write the rows as JSON")
    args = p.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rows = []
    for two_n in args.sizes:
        base = None
        for name in args.losses:
            n_eager, names = eager_ops(name, two_n, args.dim)
            n_dev, _ = eager_ops(name, two_n, args.dim, device_path=True)
            row = {"2N": two_n, "loss": name, "eager": n_eager, "eager_device": n_dev}
            if not args.no_compiled:
                row["compiled"], row["inductor_kernels"] = compiled_ops(
                    name, two_n, args.dim, inductor=not args.no_inductor)
            if base is None:
                base = dict(row)
            for key in ("eager", "eager_device", "compiled"):
                if key in row:
                    row[f"{key}_extra"] = row[key] - base[key]
            rows.append(row)
            if args.show == name:
                print(" ".join(names), file=sys.stderr)
    keys = list(rows[0])
    print(f"torch {torch.__version__}; forward+backward of one batch, d = {args.dim}; "
          f"extra = over {args.losses[0]}")
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r.get(k, "")) for k in keys))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"torch": torch.__version__, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
