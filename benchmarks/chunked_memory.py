"""Peak memory and time of one loss forward+backward on CPU, with and without ``chunk_size``.

    python benchmarks/chunked_memory.py                       # B = 4096, 16384; chunk 1024
    python benchmarks/chunked_memory.py --sizes 4096 --chunks 512 2048 --losses weince

Each case runs in a fresh interpreter (``tracemalloc`` does not see torch's CPU
allocations): the child builds ``z1``, ``z2`` ``(B, d)`` (``layout="pairs"``: a ``B x B``
similarity matrix, the dual-encoder shape), runs one forward+backward of ``InfoNCELoss`` or
``WEINCELoss`` and reports its peak resident memory (``resource.getrusage``'s
``ru_maxrss``), the resident memory just before the loss (the interpreter, torch, the
inputs) and the wall time of the forward+backward. ``peak - before`` is what the loss
itself needed. An unchunked case whose estimate (its smaller size's measured need, scaled
by ``B^2``; without one, eight ``B x B`` float32 matrices) exceeds the memory available
(``MemAvailable`` of ``/proc/meminfo``, less a reserve) is not started: the table says so.
Times on a shared machine are indicative only; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch

from weince.losses import build_loss

GIB = 1024 ** 3


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` (``None`` where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def run_case(B: int, loss: str, chunk: int | None, d: int, threads: int) -> dict:
    """One forward+backward in this process (the child's work)."""
    torch.set_num_threads(threads)
    build_loss(loss, tau=0.1, layout="pairs", chunk_size=chunk)(
        torch.randn(64, d, requires_grad=True), torch.randn(64, d)).backward()   # warm-up
    g = torch.Generator().manual_seed(0)
    z1 = torch.randn(B, d, generator=g).requires_grad_()
    z2 = (z1.detach() + 0.5 * torch.randn(B, d, generator=g)).requires_grad_()
    fn = build_loss(loss, tau=0.1, layout="pairs", chunk_size=chunk)
    before = _rss_bytes()
    t0 = time.perf_counter()
    fn(z1, z2).backward()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # KiB on Linux
    return {"B": B, "loss": loss, "chunk": chunk, "seconds": seconds, "peak": peak,
            "before": before, "need": peak - before}


def child(args) -> None:
    chunk = None if args.case[2] == "none" else int(args.case[2])
    print(json.dumps(run_case(int(args.case[0]), args.case[1], chunk, args.dim, args.threads)))


def spawn(B: int, loss: str, chunk: int | None, args) -> dict:
    cmd = [sys.executable, __file__, "--case", str(B), loss,
           "none" if chunk is None else str(chunk), "--dim", str(args.dim),
           "--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"B": B, "loss": loss, "chunk": chunk,
                "note": f"failed (exit {proc.returncode}): {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def estimate(B: int, loss: str, chunk: int | None, done: list[dict]) -> float:
    """Bytes the case is expected to need: a smaller measured case of the same loss and
    chunking scaled by ``B^2`` (by ``B`` when chunked), else eight ``B x B`` matrices."""
    same = [r for r in done if r["loss"] == loss and r["chunk"] == chunk and "need" in r]
    if same:
        r = max(same, key=lambda r: r["B"])
        return r["need"] * (B / r["B"]) ** (1 if chunk else 2)
    return 8.0 * B * (chunk or B) * 4


def table(rows: list[dict]) -> str:
    out = ["| B | loss | chunk_size | peak RSS (GiB) | peak - before (GiB) | time (s) | note |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "need" in r:
            out.append(f"| {r['B']} | {r['loss']} | {r['chunk'] or 'none'} | "
                       f"{r['peak'] / GIB:.2f} | {r['need'] / GIB:.2f} | {r['seconds']:.1f} | |")
        else:
            out.append(f"| {r['B']} | {r['loss']} | {r['chunk'] or 'none'} | - | - | - | "
                       f"{r['note']} |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--chunks", type=int, nargs="+", default=[1024])
    p.add_argument("--losses", nargs="+", default=["infonce", "weince"],
                   choices=["infonce", "weince"])
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--reserve-gib", type=float, default=2.0,
                   help="memory left free when deciding whether a case fits (default 2)")
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--case", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.case:
        child(args)
        return 0
    print(f"# {os.cpu_count()} cores, {args.threads} threads, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, d = {args.dim}, layout pairs")
    rows: list[dict] = []
    for B in sorted(args.sizes):
        for loss in args.losses:
            for chunk in [None, *args.chunks]:
                avail = available_bytes()
                need = estimate(B, loss, chunk, rows)
                if avail is not None and need > avail - args.reserve_gib * GIB:
                    rows.append({"B": B, "loss": loss, "chunk": chunk,
                                 "note": f"not run: needs about {need / GIB:.1f} GiB, "
                                         f"{avail / GIB:.1f} GiB available"})
                else:
                    rows.append(spawn(B, loss, chunk, args))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    print(f"# load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
