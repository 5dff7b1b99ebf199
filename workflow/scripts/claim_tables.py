"""Snakemake adapter: one claim's table, claim file and HTML page (weince.report), its verdict
computed once."""

from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.pipeline.profile import Profile
    from weince.report import build_report
    from weince.report.curves import claim_curves
    from weince.report.html import claim_page

    out = snakemake.output
    prof = Profile.of(snakemake.config)
    cid = snakemake.wildcards.cid.upper()
    (r,) = build_report(prof, summary=False, only=[cid], out_dir=Path(out.md).parent)
    print(f"{cid}: {r.verdict} ({r.reason})")
    claim_page(r, out.md, out.html, prof.name, figure_dir=out.forest,
               curves=claim_curves(prof, r.claim, out.forest))
