"""Snakemake adapter: N1-N3 of one sentence encoder (weince.norms.run.analyse_text)."""

from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.norms.run import analyse_text

    wc = snakemake.wildcards
    res = analyse_text(snakemake.params.model,
                       cfg=dict(snakemake.params.cfg, threads=snakemake.threads),
                       out_dir=Path(snakemake.output.result).parent,
                       meta={"arm": wc.arm, "model_label": wc.model, "seed": int(wc.seed)})
    print(f"{snakemake.output.result}: {res['verdicts']}")
