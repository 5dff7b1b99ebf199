# Embedding-norm dynamics (claims N1-N3): heat, radial drift, equilibrium norm
# and norm-aware re-scoring per vision encoder and text encoder, then one report page.
# What a profile analyses: its `norms` block (the units: weince.pipeline.layout,
# their files: weince.pipeline.targets.norms_results); the room: weince.norms; docs/norms.md.


rule norms_vision:
    input:
        encoder=f"{VRUN}/encoder.pt",
        features=f"{VRUN}/features.pt",
    output:
        result=f"{VRUN}/norms.json",
        probes=f"{VRUN}/norms_probes.npz",
    log:
        f"{LOGS}/norms/{VRUN_TAG}.log",
    benchmark:
        f"{BENCH}/norms/{VRUN_TAG}.tsv"
    threads: threads_for("norms_vision")
    resources:
        **resources_for("norms_vision"),
    params:
        cfg=norms_settings(PROFILE),
    script:
        "../scripts/norms_vision.py"


rule norms_text:
    input:
        model=lambda wc: (
            [] if wc.arm == PRETRAINED_ARM else f"{TRUN}/model".format(**wc)
        ),
    output:
        result=f"{TRUN}/norms.json",
        probes=f"{TRUN}/norms_probes.npz",
    log:
        f"{LOGS}/norms/{TRUN_TAG}.log",
    benchmark:
        f"{BENCH}/norms/{TRUN_TAG}.tsv"
    threads: threads_for("norms_text")
    resources:
        **resources_for("norms_text"),
    params:
        model=lambda wc: text_model_key(PROFILE, wc.model, wc.arm, TRUN.format(**wc)),
        cfg=lambda wc: norms_settings(
            PROFILE, pooling="mean" if wc.arm == PRETRAINED_ARM else "cls"
        ),
    script:
        "../scripts/norms_text.py"


rule norms_report:
    input:
        results=[str(p) for p in norms_results(PROFILE)],
        claims=str(PROFILE.claims),
    output:
        md=str(NORMS_OUTPUTS["md"]),
        summary=str(NORMS_OUTPUTS["summary"]),
        figures=directory(str(NORMS_OUTPUTS["figures"])),
    log:
        f"{RESULTS}/{NAME}/logs/report/norms.log",
    benchmark:
        f"{RESULTS}/{NAME}/benchmarks/report/norms.tsv"
    threads: 1
    resources:
        **resources_for("report"),
    script:
        "../scripts/norms_report.py"
