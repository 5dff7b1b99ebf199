"""Snakemake adapter: one claim's Markdown and LaTeX table (weince.report)."""

from pathlib import Path

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.report import build_report

    cid = snakemake.wildcards.cid.upper()
    res = build_report(snakemake.config, only=[cid], summary=False,
                       out_dir=Path(snakemake.output.md).parent)
    print(f"{cid}: {res[0].verdict} ({res[0].reason})")
    from weince.report.html import claim_page

    claim_page(res[0], snakemake.output.md, snakemake.output.html, snakemake.config["profile"],
               figure_dir=snakemake.output.forest)
