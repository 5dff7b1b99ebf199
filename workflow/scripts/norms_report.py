"""Snakemake adapter: the N1-N3 page (weince.report.norms.write_norms_report)."""

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0]):
    from weince.report.norms import write_norms_report

    cv = write_norms_report(list(snakemake.input.results), snakemake.output.md,
                            profile=snakemake.config["profile"],
                            claims=snakemake.config["claims"])
    for c, v in cv.items():
        print(f"{c}: {v['verdict']} ({v['n_reproduced']}/{v['n_testable']} units)")
