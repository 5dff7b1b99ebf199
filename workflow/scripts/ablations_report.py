"""Snakemake adapter: the ablation page (weince.report.ablations.build_ablation_report)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.pipeline.profile import Profile
    from weince.report.ablations import build_ablation_report

    outs = build_ablation_report(Profile.of(snakemake.config))
    print(f"ablation report: {outs['md']}")
