"""Snakemake adapter: the profile's summary, LaTeX document, claims.json and figures, from
the claim files the claim tables wrote (no verdict is computed here)."""

from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.pipeline.profile import Profile
    from weince.report.build import build_summary
    from weince.report.html import companion_pages, write_markdown_page

    # each claim's forest plot as the claim tables drew it (a folder per claim, named by its id)
    drawn = {Path(d).name.upper(): Path(d) / f"forest_{Path(d).name}.png"
             for d in snakemake.input.forests}
    # and its training curves, where its rows trained (the table pages show them)
    curves = {Path(d).name.upper(): Path(d) / f"curves_{Path(d).name}.png"
              for d in snakemake.input.forests}
    records = build_summary(Profile.of(snakemake.config),
                            out_dir=Path(snakemake.output.summary).parent,
                            forests=drawn, curves=curves)
    for r in records:
        print(f"{r.id}: {r.verdict} ({r.reason})")
    write_markdown_page(snakemake.output.summary, snakemake.output.summary_html)
    companion_pages([f for f in snakemake.input.companions if str(f).endswith(".md")],
                    snakemake.output.companions_html)
