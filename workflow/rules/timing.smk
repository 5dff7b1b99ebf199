# Overhead timing (C8): WEINCE vs InfoNCE, loss alone and whole step.


rule timing:
    output:
        f"{TIMING_DIR}/timing.json",
    log:
        f"{LOGS}/timing.log",
    benchmark:
        f"{BENCH}/timing.tsv"
    threads: threads_for("timing")
    resources:
        **resources_for("timing"),
    params:
        cfg=timing_settings(PROFILE),
    script:
        "../scripts/timing.py"
