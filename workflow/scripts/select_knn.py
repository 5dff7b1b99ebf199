"""Snakemake adapter: the final grid arm's knn.json at one encoder seed, each k-NN metric
from the run of that metric's chosen point (weince.pipeline.grid.assemble_knn)."""

from weince.pipeline.joblog import log_to
from weince.utils import write_json

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.pipeline.grid import assemble_knn
    from weince.utils.digest import sha256_file
    from weince.utils.results import load_result, reading

    sel = load_result(snakemake.input.selection)
    grid = {k[len("knn.json@"):]: v for k, v in snakemake.input.items()
            if k.startswith("knn.json@")}
    out = assemble_knn(sel, grid)
    print(f"per-metric points: {out['selected_point']}")
    # each metric's source (the point's knn.json) and the encoder it evaluated
    inputs = {}
    for point in sorted(set(out["selected_point"].values())):
        src = grid[point]
        used = (load_result(src).get("provenance") or {}).get("inputs") or {}
        inputs[f"knn@{point}"] = {"path": str(src), "sha256": sha256_file(src)}
        if "encoder" in used:
            inputs[f"encoder@{point}"] = used["encoder"]
    with reading(inputs):
        write_json(snakemake.output[0], out, cfg={"selection": snakemake.input.selection})
