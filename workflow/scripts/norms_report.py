"""Snakemake adapter: the N1-N3 page (weince.norms.page.write_norms_report)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.norms.page import write_norms_report
    from weince.pipeline.claims import load_claims
    from weince.pipeline.profile import Profile
    from weince.report.rehearsal import rehearsal_note

    prof = Profile.of(snakemake.config)
    note = rehearsal_note(prof.data_root) if prof.rehearsal.enabled else None
    cv = write_norms_report(list(snakemake.input.results), snakemake.output.md,
                            profile=prof.name, claims=load_claims(prof.claims)["claims"],
                            rehearsal_note=note)
    for c, v in cv.items():
        print(f"{c}: {v['verdict']} ({v['n_reproduced']}/{v['n_testable']} units)")
