"""Snakemake adapter: in the four-seed grid, the final grid arm's run at one encoder seed
is the chosen point's run at that seed (weince.pipeline.grid): its encoder is a relative
symbolic link to the point's (no second copy of an encoder on disk; Snakemake dates a link
by the link itself), its small files are copies."""

import json
import os
import shutil

from weince.pipeline.joblog import log_to
from weince.utils import write_json

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    sel = json.loads(open(snakemake.input.selection).read())
    point = sel["chosen"]
    print(f"adopting point {point} (chosen by mean {sel['metric']})")
    enc = snakemake.output.encoder
    os.symlink(os.path.relpath(snakemake.input[f"encoder.pt@{point}"], os.path.dirname(enc)),
               enc)
    for key, name in (("summary", "train.json"), ("train_log", "train_log.jsonl")):
        shutil.copyfile(snakemake.input[f"{name}@{point}"], snakemake.output[key])
    lin = json.loads(open(snakemake.input[f"linear.json@{point}"]).read())
    lin["selected_point"] = point
    lin["selected_by"] = sel["metric"]
    write_json(snakemake.output.linear, lin)  # keeps the grid run's provenance
