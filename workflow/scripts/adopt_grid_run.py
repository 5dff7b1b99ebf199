"""Snakemake adapter: in the four-seed grid, the final grid arm's run at one encoder seed
is the chosen point's run at that seed (weince.pipeline.selection); copy its files."""

import json
import shutil

from weince.pipeline.logs import log_to
from weince.utils import write_json

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    sel = json.loads(open(snakemake.input.selection).read())
    point = sel["chosen"]
    print(f"adopting point {point} (chosen by mean {sel['metric']})")
    for key in ("encoder", "summary", "train_log"):
        name = {"encoder": "encoder.pt", "summary": "train.json",
                "train_log": "train_log.jsonl"}[key]
        shutil.copyfile(snakemake.input[f"{name}@{point}"], snakemake.output[key])
    lin = json.loads(open(snakemake.input[f"linear.json@{point}"]).read())
    lin["selected_point"] = point
    lin["selected_by"] = sel["metric"]
    write_json(snakemake.output.linear, lin)  # keeps the grid run's provenance
