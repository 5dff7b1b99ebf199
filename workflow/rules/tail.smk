# Tail diagnostics (docs/method.md): similarity scores of a frozen encoder, then the POT/GPD fit.


rule collect_scores:
    input:
        encoder=f"{VRUN}/encoder.pt",
    output:
        f"{VRUN}/scores.npz",
    log:
        f"{LOGS}/scores/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/scores/{VRUN_TAG}.tsv"
    threads: threads_for("collect_scores")
    resources:
        **resources_for("collect_scores"),
    params:
        kwargs=scores_settings(PROFILE),
    script:
        "../scripts/collect_scores.py"


rule pot:
    input:
        f"{VRUN}/scores.npz",
    output:
        f"{VRUN}/pot.json",
    log:
        f"{LOGS}/pot/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/pot/{VRUN_TAG}.tsv"
    threads: 1
    resources:
        **resources_for("pot"),
    params:
        kwargs=pot_settings(PROFILE),
    script:
        "../scripts/pot.py"
