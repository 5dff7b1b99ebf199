# The paper's synthetic noise-floor experiment (claim C11): numpy only, seconds on a CPU,
# run by every profile (weince.evt.noise_floor).


rule noise_floor:
    output:
        json=f"{SYNTHETIC_DIR}/noise_floor.json",
        csv=f"{SYNTHETIC_DIR}/noise_floor.csv",
    log:
        f"{LOGS}/synthetic/noise_floor.log",
    benchmark:
        f"{BENCH}/synthetic/noise_floor.tsv"
    threads: 1
    resources:
        **resources_for("noise_floor"),
    params:
        kwargs={
            "replicates": PROFILE.noise_floor.replicates,
            "sample_sizes": list(PROFILE.noise_floor.sample_sizes),
            "seed": PROFILE.noise_floor.seed,
        },
    script:
        "../scripts/noise_floor.py"
