# SimCLR pretraining of one encoder, and the choice of a grid arm's point on validation.


rule pretrain:
    input:
        selection=selection_input,
    output:
        encoder=f"{VRUN}/encoder.pt",
        summary=f"{VRUN}/train.json",
        train_log=f"{VRUN}/train_log.jsonl",
    log:
        f"{LOGS}/pretrain/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/pretrain/{VRUN_TAG}.tsv"
    priority: grid_chain_priority
    retries: training_retries("vision")
    threads: threads_for("pretrain")
    resources:
        **resources_for("pretrain"),
    params:
        # what can change the result: the rerun trigger (the script resolves the whole
        # job config by the same function, so run-time settings never retrain)
        cfg=lambda wc: rerun_trigger(PROFILE, wc),
    script:
        "../scripts/pretrain.py"


rule select_grid_point:
    input:
        unpack(grid_linear_files),
        unpack(grid_knn_files),
    output:
        f"{VPAIR}/{{arm}}/selection.json",
    log:
        f"{LOGS}/select/{{dataset}}/{{backbone}}/{{arm}}.log",
    benchmark:
        f"{BENCH}/select/{{dataset}}/{{backbone}}/{{arm}}.tsv"
    priority: 1
    threads: 1
    resources:
        **resources_for("select_grid_point"),
    params:
        metric=PROFILE.vision.grid.metric,
        expected_seeds=len(PROFILE.vision.grid.seeds),
    script:
        "../scripts/select_grid_point.py"


ADOPTED_SEEDS = adopted_seeds(PROFILE)

if ADOPTED_SEEDS:

    # The run named after a final grid arm (`weince`, `weince_recipe`) at a grid seed is
    # NOT trained: it IS the chosen point's run there (same config, same seed), adopted by
    # this rule. Its encoder links to the point's, its training log and linear probe are
    # copies, and its folder's ADOPTED.md names the point, the seed and the selection.json
    # that chose it. Four-seed grid (official): every seed; one-seed grid: seed 7 (rule
    # `pretrain` trains the chosen point at the other seeds).
    ruleorder: adopt_grid_run > pretrain
    ruleorder: adopt_grid_run > linear

    rule adopt_grid_run:
        input:
            unpack(
                grid_run_files(
                    "encoder.pt", "train.json", "train_log.jsonl", "linear.json"
                )
            ),
        output:
            encoder=f"{VRUN}/encoder.pt",
            summary=f"{VRUN}/train.json",
            train_log=f"{VRUN}/train_log.jsonl",
            linear=f"{VRUN}/linear.json",
            note=f"{VRUN}/ADOPTED.md",
        log:
            f"{LOGS}/adopt/{VRUN_TAG}.log",
        benchmark:
            f"{BENCH}/adopt/{VRUN_TAG}.tsv"
        wildcard_constraints:
            arm="|".join(re.escape(a) for a in grid_arms(PROFILE)),
            seed="|".join(str(s) for s in ADOPTED_SEEDS),
        threads: 1
        resources:
            **resources_for("select_grid_point"),
        script:
            "../scripts/adopt_grid_run.py"


if shares_seeds(PROFILE):

    # Four-seed grid (official): the final arm's k-NN takes each metric from that metric's
    # point.
    ruleorder: select_knn > knn

    rule select_knn:
        input:
            unpack(grid_run_files("knn.json")),
        output:
            f"{VRUN}/knn.json",
        log:
            f"{LOGS}/select_knn/{VRUN_TAG}.log",
        benchmark:
            f"{BENCH}/select_knn/{VRUN_TAG}.tsv"
        wildcard_constraints:
            arm="|".join(re.escape(a) for a in grid_arms(PROFILE)),
        threads: 1
        resources:
            **resources_for("select_grid_point"),
        script:
            "../scripts/select_knn.py"
