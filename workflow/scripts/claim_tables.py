"""Snakemake adapter: every claim's table, claim file and HTML page (weince.report), each
verdict computed once."""

from pathlib import Path

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.pipeline.profile import Profile
    from weince.report import build_report
    from weince.report.html import claim_page

    out = snakemake.output
    # the report folder: that of the first table (every output is named by claim)
    prof = Profile.of(snakemake.config)
    res = build_report(prof, summary=False, out_dir=Path(out[0]).parent)
    for r in res:
        cid = r.claim["id"].lower()
        print(f"{r.claim['id']}: {r.verdict} ({r.reason})")
        claim_page(r, getattr(out, f"{cid}_md"), getattr(out, f"{cid}_html"),
                   prof.name, figure_dir=getattr(out, f"{cid}_forest"))
