# Link selection (docs/method.md): softmax vs Weibull-shortfall link on two-view batches.


rule link:
    input:
        f"{VRUN}/scores.npz",
    output:
        f"{VRUN}/link.json",
    log:
        f"{LOGS}/link/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/link/{VRUN_TAG}.tsv"
    threads: 1
    resources:
        **resources_for("link"),
    params:
        kwargs=link_settings(PROFILE),
    script:
        "../scripts/link.py"
