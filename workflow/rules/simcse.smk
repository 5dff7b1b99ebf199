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


# `vision_jobs: per_arm` (the embedded default): a SimCSE run and its STS evaluation in one
# job, each by its own rule's script (weince.pipeline.fused.run_text_chain), with the files,
# logs and params of the two rules above, which it takes precedence over.
if fused_text(PROFILE):

    rule text_run:
        output:
            simcse__model=directory(f"{TRUN}/model"),
            simcse__summary=f"{TRUN}/train.json",
            simcse__train_log=f"{TRUN}/train_log.jsonl",
            sts__0=f"{TRUN}/sts.json",
        log:
            simcse=f"{LOGS}/simcse/{TRUN_TAG}.log",
            sts=f"{LOGS}/sts/{TRUN_TAG}.log",
        benchmark:
            f"{BENCH}/text_run/{TRUN_TAG}.tsv"
        priority: 1
        retries: training_retries("text")
        threads: max(threads_for("simcse"), threads_for("sts"))
        resources:
            **resources_for("simcse"),
        params:
            settings=lambda wc: {
                "simcse": {"cfg": rerun_trigger(PROFILE, wc)},
                "sts": {"kwargs": sts_settings(PROFILE)},
            },
        script:
            "../scripts/text_run.py"

    ruleorder: text_run > simcse
    ruleorder: text_run > sts
