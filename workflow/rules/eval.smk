# Linear probe (features extracted in memory) and k-NN / recall@k on the cached features
# (docs/protocol.md).


rule linear:
    input:
        # its features in memory, not the shared features.pt (workflow/scripts/linear.py)
        encoder=f"{VRUN}/encoder.pt",
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
        features=features_settings(PROFILE),
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
