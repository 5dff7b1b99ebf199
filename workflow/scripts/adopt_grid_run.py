"""Snakemake adapter: in the four-seed grid, the final grid arm's run at one encoder seed
is the chosen point's run at that seed (weince.pipeline.grid): its encoder is a relative
symbolic link to the point's (no second copy of an encoder on disk; Snakemake dates a link
by the link itself), its small files are copies, and ADOPTED.md says so to whoever opens
the folder (weince.pipeline.grid.adoption_note)."""

import json
import os
import shutil

from weince.pipeline.grid import adoption_note
from weince.pipeline.joblog import log_to
from weince.utils import write_json
from weince.utils.diskspace import write_text
from weince.utils.results import load_result

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    sel = json.loads(open(snakemake.input.selection).read())
    point = sel["chosen"]
    print(f"adopting point {point} (chosen by mean {sel['metric']})")
    enc = snakemake.output.encoder
    os.symlink(os.path.relpath(snakemake.input[f"encoder.pt@{point}"], os.path.dirname(enc)),
               enc)
    shutil.copyfile(snakemake.input[f"train_log.jsonl@{point}"], snakemake.output.train_log)
    # the point's training record (its encoder digest, loss, seed) as this arm's run at the
    # chosen point
    src = snakemake.input[f"train.json@{point}"]
    write_json(snakemake.output.summary, {**load_result(src), "arm": snakemake.wildcards.arm,
                                          "point": point, "adopted_from": str(src)})
    lin = json.loads(open(snakemake.input[f"linear.json@{point}"]).read())
    lin["selected_point"] = point
    lin["selected_by"] = sel["metric"]
    write_json(snakemake.output.linear, lin)  # keeps the grid run's provenance
    # the folder's own account of where it comes from (no result: the bundle ships it as a
    # page)
    write_text(snakemake.output.note, adoption_note(
        os.path.dirname(enc), os.path.dirname(src), snakemake.input.selection, sel["metric"]))
