"""``weince timing``: overhead timing of WEINCE against InfoNCE (claim C8).

    weince timing --out results/timing.json                      # CPU defaults
    weince timing --set device=cuda --set step_batch=256 --set compile=both --out timing.json

Parses ``--config``/``--set`` into :class:`weince.timing.TimingConfig`, runs
:func:`weince.timing.run_timing`, prints a table of the ratios and writes the JSON.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from tabulate import tabulate

from weince.timing import TimingConfig, loss_label, run_timing
from weince.utils import write_json
from weince.utils.config import load_config

__all__ = ["add_arguments", "main"]


def _print(result: dict) -> None:
    def lines(what, size, block):
        for mode, summ in (block.get("modes") or {block["mode"]: block["losses"]}).items():
            for name, s in summ.items():
                yield [what, size, loss_label(name, mode), s["median_ms"], s["ratio"],
                       f"[{s['ratio_ci'][0]:.3f}, {s['ratio_ci'][1]:.3f}]"]

    rows = []
    for r in result["loss_alone"]:
        rows += lines("loss alone", f"2N={r['2N']}", r)
    st = result["whole_step"]
    if st:
        rows += lines("whole step", f"{st['backbone']} {st['batch']}", st)
    print(f"device {result['device']} ({result['device_name']}), threads {result['threads']}; "
          f"trainable parameters per loss: {result['trainable_parameters']}")
    print(tabulate(rows, headers=["what", "size", "loss", "median ms", "ratio to infonce",
                                  "95% CI"],
                   floatfmt=".3f"))
    if st:
        base = next(iter(st["losses"]))
        att = ", ".join(f"{n} {a['overhead_pct']:+.3f}% ({a['extra_ms']:+.2f} ms)"
                        for n, a in st["attributed"].items() if n != base)
        print(f"whole step ({st['mode']}, {st.get('runs', 1)} run(s)): measured overhead "
              + ", ".join(f"{n} {s['overhead_pct']:+.2f}% [{iv[0]:+.2f}, {iv[1]:+.2f}]"
                          for n, s in st["losses"].items() if n != base
                          for iv in [s.get("overhead_ci_runs") or s["overhead_ci"]])
              + f"; attributed from the loss alone on the step's embeddings: {att}")
    for r in [*result["loss_alone"], *([st] if st else [])]:
        if "compiled_vs_eager" in r:
            where = f"2N={r['2N']}" if "2N" in r else "whole step"
            print(f"compiled / eager time, {where}: "
                  + ", ".join(f"{n} {v['ratio']:.3f}" for n, v in r["compiled_vs_eager"].items()))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, metavar="FILE",
                   help="YAML file of timing options (losses, sizes, dim, loss_reps, backbone, "
                        "step_batch, device, compile, ...: the fields of "
                        "weince.timing.TimingConfig); defaults when omitted")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one TimingConfig field (repeatable; default: none), "
                        "e.g. --set sizes=[512]")
    p.add_argument("--out", default=None, help="write the result JSON here")


def main(args: argparse.Namespace) -> int:
    cfg = load_config(TimingConfig, args.config, args.overrides)
    result = run_timing(cfg)
    _print(result)
    if args.out:
        write_json(args.out, result, cfg=asdict(cfg), seed=cfg.seed)
    return 0
