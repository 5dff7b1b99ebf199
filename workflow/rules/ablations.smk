# Ablations: extra arms trained by the same pretrain / features / linear rules as
# the main arms (an ablation arm is just another value of the {arm} wildcard; its loss, tau
# and options come from weince.pipeline.arms.ARMS through pretrain_config), a probe on the
# projection-head features, and reports/{profile}/ablations.md.
# Which groups a profile runs: its `ablations` block (weince.pipeline.ablations).


rule linear_head:
    input:
        encoder=f"{VRUN}/encoder.pt",
    output:
        f"{VRUN}/linear_head.json",
    log:
        f"{LOGS}/linear_head/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/linear_head/{VRUN_TAG}.tsv"
    threads: threads_for("linear")
    resources:
        **resources_for("linear"),
    params:
        kwargs=lambda wc: probe_settings(PROFILE, wc.arm),
        features=features_settings(PROFILE),
    script:
        "../scripts/linear_head.py"


rule ablations_report:
    input:
        [str(p) for p in ablation_inputs(ABLATION_PLAN)],
    output:
        md=str(ABLATION_OUTPUTS["md"]),
        json=str(ABLATION_OUTPUTS["json"]),
        figures=directory(str(ABLATION_OUTPUTS["figures"])),
    log:
        f"{RESULTS}/{NAME}/logs/report/ablations.log",
    benchmark:
        f"{RESULTS}/{NAME}/benchmarks/report/ablations.tsv"
    threads: 1
    resources:
        **resources_for("report"),
    script:
        "../scripts/ablations_report.py"
