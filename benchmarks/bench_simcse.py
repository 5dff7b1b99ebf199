"""SimCSE training throughput (sentences/s) and the wall time of the embedded text runs.

    python benchmarks/bench_simcse.py                       # steps: MiniLM on CPU (+GPU)
    python benchmarks/bench_simcse.py --arch bert-base      # paper-sized BERT (random init)
    python benchmarks/bench_simcse.py --full-run --n-train 640 --seeds 0,1 --n-sts 200
    python benchmarks/bench_simcse.py --out bench_simcse.json

Part 1 times whole SimCSE training steps (tokenise, encode the batch twice with dropout,
loss, backward, AdamW) at batch 64, max length 32, on the synthetic corpus, for each loss,
on the CPU and on every visible GPU. ``--arch bert-base`` uses a randomly initialised
``BertModel`` with bert-base-uncased's shape (12 layers, 768 wide; the MiniLM tokenizer
shares its uncased 30,522-token vocabulary), so the paper-scale step time can be measured
offline. Throughput = sentences per second (each sentence is encoded twice); the process
CPU time is printed too, since wall time on a shared machine includes waiting.

Part 2 (``--full-run``) runs what the embedded profile runs for text: ``train_simcse`` for
each loss and seed with the given sizes, then ``run_sts`` (dev + test) of each best model,
and reports the total wall time (the budget is 4 minutes on a 2-core CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from weince.data.text import generate_corpus
from weince.eval.sts import run_sts
from weince.losses import build_loss
from weince.models.text import SimCSEModel, load_text_encoder
from weince.train.simcse import train_simcse
from weince.utils import write_json


def _model(arch: str, device: torch.device):
    enc, tok = load_text_encoder("minilm")
    if arch == "bert-base":
        # after load_text_encoder: transformers reads HF_HUB_OFFLINE when first imported
        from transformers import BertConfig, BertModel  # noqa: PLC0415
        torch.manual_seed(0)
        enc = BertModel(BertConfig())  # bert-base-uncased shape, random weights
    elif arch != "minilm":
        raise ValueError(f"arch must be minilm or bert-base, got {arch!r}")
    return SimCSEModel(enc).to(device), tok


def bench_steps(device: torch.device, arch: str, loss_name: str, batch: int, max_length: int,
                steps: int, warmup: int) -> dict:
    model, tok = _model(arch, device)
    model.train()
    loss_fn = build_loss(loss_name, tau=0.05, layout="pairs").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5)
    sents = generate_corpus(batch * (steps + warmup), seed=0)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    wall = cpu = 0.0
    for i in range(steps + warmup):
        sync()
        t0, c0 = time.perf_counter(), time.process_time()
        enc = tok(sents[i * batch:(i + 1) * batch], padding=True, truncation=True,
                  max_length=max_length, return_tensors="pt")
        twice = {k: torch.cat([v, v]).to(device) for k, v in enc.items()}
        _, z = model(**twice)
        loss = loss_fn(z[:batch].float(), z[batch:].float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync()
        if i >= warmup:
            wall += time.perf_counter() - t0
            cpu += time.process_time() - c0
    return {"device": str(device), "arch": arch, "loss": loss_name, "batch": batch,
            "max_length": max_length, "steps": steps, "s_per_step": wall / steps,
            "cpu_s_per_step": cpu / steps, "sentences_per_s": batch * steps / wall}


def full_run(args) -> dict:
    seeds = [int(s) for s in args.seeds.split(",")]
    losses = args.losses.split(",")
    runs = []
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for loss in losses:
            for seed in seeds:
                out = Path(tmp) / f"{loss}_s{seed}"
                t0, c0 = time.perf_counter(), time.process_time()
                cfg = {"loss": loss, "seed": seed, "n_train": args.n_train, "n_sts": args.n_sts,
                       "eval_every": args.eval_every, "batch_size": args.batch,
                       "max_length": args.max_length, "device": "cpu"}
                tr = train_simcse(cfg, out)
                t1 = time.perf_counter()
                sts = run_sts(out / "model", "synthetic", out / "sts.json",
                              n_synthetic=args.n_sts, device="cpu")
                t2 = time.perf_counter()
                runs.append({"loss": loss, "seed": seed, "train_s": t1 - t0, "sts_s": t2 - t1,
                             "cpu_s": time.process_time() - c0,
                             "train_sentences_per_s": tr["sentences_per_s"],
                             "steps": tr["steps"], "dev_init": tr["dev_spearman_init"],
                             "best_dev": tr["best_dev_spearman"],
                             "test_spearman": sts["test"]["spearman"]})
                print(json.dumps(runs[-1]), flush=True)
    return {"total_s": time.perf_counter() - t_all, "runs": runs,
            "total_cpu_s": sum(r["cpu_s"] for r in runs),
            "sizes": {"n_train": args.n_train, "n_sts": args.n_sts, "seeds": seeds,
                      "losses": losses, "eval_every": args.eval_every, "batch": args.batch,
                      "max_length": args.max_length},
            "note": "SYNTHETIC data: wall time of the embedded text runs, not an STS-B result"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", default="minilm", choices=("minilm", "bert-base"))
    p.add_argument("--losses", default="infonce,weince")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--max-length", type=int, default=32)
    p.add_argument("--steps", type=int, default=5, help="timed steps per (device, loss)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    p.add_argument("--no-cpu", action="store_true", help="skip the CPU step timing")
    p.add_argument("--full-run", action="store_true", help="also time the embedded runs")
    p.add_argument("--n-train", type=int, default=640)
    p.add_argument("--n-sts", type=int, default=200)
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--eval-every", type=int, default=125)
    p.add_argument("--out", default=None, help="write the results as JSON (with provenance)")
    args = p.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = [] if args.no_cpu else [torch.device("cpu")]
    devices += [torch.device(f"cuda:{i}") for i in range(torch.cuda.device_count())]
    rows = []
    for dev in devices:
        for loss in args.losses.split(","):
            r = bench_steps(dev, args.arch, loss, args.batch, args.max_length,
                            args.steps if dev.type == "cpu" else max(args.steps, 20),
                            args.warmup if dev.type == "cpu" else 5)
            rows.append(r)
            print(f"{r['device']:>7} {r['arch']:>9} {loss:>14}: {r['sentences_per_s']:8.1f} "
                  f"sentences/s  ({r['s_per_step'] * 1e3:.0f} ms/step wall, "
                  f"{r['cpu_s_per_step'] * 1e3:.0f} ms/step CPU)", flush=True)
    result = {"steps": rows, "torch_threads": torch.get_num_threads(),
              "cpus": os.cpu_count(),
              "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    if args.full_run:
        result["full_run"] = full_run(args)
        fr = result["full_run"]
        print(f"embedded text runs: {fr['total_s']:.1f} s wall, {fr['total_cpu_s']:.1f} s CPU "
              f"(all threads) in total", flush=True)
    if args.out:
        write_json(args.out, result, cfg=vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
