# Frozen features of a pretrained encoder, cached once for every evaluation. Temporary (the
# largest intermediate file): Snakemake deletes it once every job that reads it is done, and
# extracts it again if one of them reruns; `keep_features: true` keeps it.


rule features:
    input:
        encoder=f"{VRUN}/encoder.pt",
    output:
        f"{VRUN}/features.pt" if PROFILE.keep_features else temp(f"{VRUN}/features.pt"),
    log:
        f"{LOGS}/features/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/features/{VRUN_TAG}.tsv"
    priority: grid_chain_priority
    threads: threads_for("features")
    resources:
        **resources_for("features"),
    params:
        kwargs=features_settings(PROFILE),
    script:
        "../scripts/features.py"
