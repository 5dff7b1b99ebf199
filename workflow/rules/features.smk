# Frozen features of a pretrained encoder, cached once for every evaluation.


rule features:
    input:
        encoder=f"{VRUN}/encoder.pt",
    output:
        f"{VRUN}/features.pt",
    log:
        f"{LOGS}/features/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/features/{VRUN_TAG}.tsv"
    priority: grid_chain_priority
    threads: threads_for("features")
    resources:
        **resources_for("features"),
    params:
        kwargs=PROFILE.vision.features,
        device=PROFILE.device,
        data_root=PROFILE.data_root,
    script:
        "../scripts/features.py"
