"""Augmentation and model throughput: per-image torchvision path vs the batched path.

    python benchmarks/bench_augment.py                  # ~1-2 min on a 2-core CPU
    python benchmarks/bench_augment.py --quick          # fewer repetitions
    python benchmarks/bench_augment.py --threads 1      # steadier on a shared machine
    python benchmarks/bench_augment.py --out results/bench/bench_augment.json

Measures images per second of wall-clock time and per CPU-second of this process (one
"image" = one augmented view, or one image through the model):

1. SimCLR augmentation of 32 px RGB (CIFAR recipe) and 28 px grey (MNIST-5k recipe):
   - ``per-image``: ``weince.data.augment.reference_transform`` (torchvision
     ``transforms.v2``) applied image by image in one process, as a ``DataLoader`` worker
     does (k workers scale this by at most k);
   - ``batched-cpu``: ``SimCLRAugment`` on whole batches on the CPU;
   - ``batched-cuda``: the same on the GPU, when one is present.
2. SimCLR model forward + backward (``smallcnn`` and ``resnet18``, 32 px, CPU; plus bf16
   autocast + ``channels_last`` on CUDA when present).

Threads: torch's default (all cores); the load average is recorded beside the numbers,
since other processes on a shared machine slow every path. Written with provenance
(``weince.utils.write_json``) when ``--out`` is given.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from tabulate import tabulate

from weince.data.augment import build_augment, reference_transform
from weince.models import build_simclr_model
from weince.utils import write_json


def _timeit(fn, n_items: int, min_time: float, sync=None) -> dict[str, float]:
    """Items per wall-clock second and per CPU-second of this process (robust to other
    load on a shared machine) of ``fn``: one warm-up call, then repeats for ``min_time``."""
    fn()
    if sync:
        sync()
    reps, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        reps += 1
        if sync:
            sync()
        dt = time.perf_counter() - t0
        if dt >= min_time:
            return {"per_s": reps * n_items / dt,
                    "per_cpu_s": reps * n_items / max(time.process_time() - c0, 1e-9)}


def bench_augment(name: str, n_per_image: int, batch: int, min_time: float,
                  devices: list[str]) -> dict[str, dict[str, float]]:
    aug = build_augment(name)
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (batch, aug.channels, aug.image_size, aug.image_size),
                           dtype=torch.uint8, generator=g)
    ref = reference_transform(aug)
    sub = images[:n_per_image]

    def per_image():
        for img in sub:
            ref(img)

    out = {"per-image": _timeit(per_image, len(sub), min_time)}
    for dev in devices:
        x = images.to(dev)
        sync = torch.cuda.synchronize if dev == "cuda" else None
        out[f"batched-{dev}"] = _timeit(lambda x=x: aug(x), batch, min_time, sync)
    return out


def bench_model(backbone: str, batch: int, min_time: float, device: str) -> dict[str, float]:
    torch.manual_seed(0)
    model = build_simclr_model(backbone, 32, 3).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    x = torch.randn(batch, 3, 32, 32, device=device)
    cuda = device == "cuda"
    if cuda:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            _, z = model(x)
            loss = torch.nn.functional.normalize(z.float(), dim=1).sum(0).square().sum()
        loss.backward()
        opt.step()

    return _timeit(step, batch, min_time, torch.cuda.synchronize if cuda else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter timings")
    ap.add_argument("--out", default=None, help="write the numbers as JSON here")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads (default: torch's choice); 1 is steadier on a "
                         "machine shared with other jobs")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    min_time = 1.0 if args.quick else 3.0
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows, results = [], {"threads": torch.get_num_threads(), "augment": {}, "model": {},
                         "loadavg_before": os.getloadavg()}
    for name, label in (("cifar10", "32px RGB"), ("mnist5k", "28px gray")):
        r = bench_augment(name, n_per_image=256, batch=512, min_time=min_time, devices=devices)
        results["augment"][label] = r
        for path, ips in r.items():
            rows.append(("augment " + label, path, ips["per_s"], ips["per_cpu_s"]))
    for backbone, batch in (("smallcnn", 256), ("resnet18", 64)):
        ips = bench_model(backbone, batch, min_time, "cpu")
        results["model"][f"{backbone} cpu fwd+bwd"] = ips
        rows.append((f"{backbone} 32px fwd+bwd", f"cpu (batch {batch})", ips["per_s"],
                     ips["per_cpu_s"]))
        if "cuda" in devices:
            ips = bench_model(backbone, 512, min_time, "cuda")
            results["model"][f"{backbone} cuda bf16 fwd+bwd"] = ips
            rows.append((f"{backbone} 32px fwd+bwd", "cuda bf16 channels_last (batch 512)",
                         ips["per_s"], None))
    results["loadavg_after"] = os.getloadavg()
    print(f"torch threads: {results['threads']}; 1-min load average before/after: "
          f"{results['loadavg_before'][0]:.1f}/{results['loadavg_after'][0]:.1f} "
          f"(a shared machine inflates every number)")
    print(tabulate(rows, headers=["what", "path", "images/s", "images/CPU-s"],
                   floatfmt=",.0f", missingval="-"))
    if args.out:
        write_json(args.out, results, cfg={"quick": args.quick, "devices": devices,
                                           "threads": args.threads})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
