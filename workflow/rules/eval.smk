# Linear probe and k-NN / recall@k on cached features (docs/protocol.md).


rule linear:
    input:
        f"{VRUN}/features.pt",
    output:
        f"{VRUN}/linear.json",
    log:
        f"{LOGS}/linear/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/linear/{VRUN_TAG}.tsv"
    priority: grid_chain_priority
    threads: threads_for("linear")
    resources:
        **resources_for("linear"),
    params:
        kwargs=lambda wc: probe_settings(PROFILE, wc.arm),
    script:
        "../scripts/linear.py"


rule knn:
    input:
        f"{VRUN}/features.pt",
    output:
        f"{VRUN}/knn.json",
    log:
        f"{LOGS}/knn/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/knn/{VRUN_TAG}.tsv"
    threads: threads_for("knn")
    resources:
        **resources_for("knn"),
    params:
        kwargs=knn_settings(PROFILE),
    script:
        "../scripts/knn.py"
