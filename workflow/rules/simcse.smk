# Unsupervised SimCSE (C7) and its STS evaluation.


rule simcse:
    output:
        model=directory(f"{TRUN}/model"),
        summary=f"{TRUN}/train.json",
        train_log=f"{TRUN}/train_log.jsonl",
    log:
        f"{LOGS}/simcse/{TRUN_TAG}.log",
    benchmark:
        f"{BENCH}/simcse/{TRUN_TAG}.tsv"
    priority: 1  # the longest jobs: started early, not left for the end
    retries: training_retries("text")
    threads: threads_for("simcse")
    resources:
        **resources_for("simcse"),
    params:
        # the rerun trigger; the script resolves the whole job config (job_config)
        cfg=lambda wc: rerun_trigger(PROFILE, wc),
    script:
        "../scripts/simcse.py"


rule sts:
    input:
        model=f"{TRUN}/model",
    output:
        f"{TRUN}/sts.json",
    log:
        f"{LOGS}/sts/{TRUN_TAG}.log",
    benchmark:
        f"{BENCH}/sts/{TRUN_TAG}.tsv"
    priority: 1  # the longest jobs: started early, not left for the end
    threads: threads_for("sts")
    resources:
        **resources_for("sts"),
    params:
        kwargs=sts_settings(PROFILE),
    script:
        "../scripts/sts.py"
