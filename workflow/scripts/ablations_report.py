"""Snakemake adapter: the ablation report (weince.ablations.build_ablation_report)."""

from weince.report.workflow import log_to

with log_to(snakemake.log[0]):
    import yaml

    from weince.ablations import ablation_plan, build_ablation_report

    with open(snakemake.input.ablations) as fh:
        plan = ablation_plan(snakemake.config, yaml.safe_load(fh))
    outs = build_ablation_report(snakemake.config, plan)
    print(f"ablation report: {outs['md']}")
