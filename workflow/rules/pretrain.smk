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
    threads: threads_for("pretrain")
    resources:
        **resources_for("pretrain"),
    params:
        cfg=lambda wc: pretrain_config(config, wc.dataset, wc.backbone, wc.arm, wc.seed),
    script:
        "../scripts/pretrain.py"


rule select_grid_point:
    input:
        unpack(grid_linear_files),
    output:
        f"{VPAIR}/{{arm}}/selection.json",
    log:
        f"{LOGS}/select/{{dataset}}/{{backbone}}/{{arm}}.log",
    threads: 1
    resources:
        **resources_for("select_grid_point"),
    params:
        metric=config["vision"]["grid"]["metric"],
    script:
        "../scripts/select_grid_point.py"
