# Embedding-norm dynamics (issue 10, claims N1-N3): heat, radial drift, equilibrium norm
# and norm-aware re-scoring per vision encoder and text encoder, then one report page.
# Settings per profile: config/norms.yaml (section config["profile"]); docs/norms.md.
# Uses common.smk (VRUN, TRUN, LOGS, REPORT_DIR, PROFILE, resources_for, threads_for).
# `rule all` adds norms_targets() (the report page and its summary).
from weince.norms import workflow as norms_wf

NORMS_CONFIG = config.get("norms_config", "config/norms.yaml")
NORMS = norms_wf.load_profile(NORMS_CONFIG, PROFILE)
NORMS_RESULTS = norms_wf.vision_targets(
    config, NORMS, VRUN, PROFILE
) + norms_wf.text_targets(config, NORMS, TRUN, PROFILE)
norms_targets = lambda: norms_wf.report_targets(
    config, NORMS, REPORT_DIR, VRUN, TRUN, PROFILE
)


rule norms_vision:
    input:
        encoder=f"{VRUN}/encoder.pt",
        features=f"{VRUN}/features.pt",
        settings=NORMS_CONFIG,
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
        profile=PROFILE,
        device=config["device"],
    shell:
        "weince norms --encoder {input.encoder} --features {input.features}"
        " --out $(dirname {output.result}) --config {input.settings}"
        " --profile {params.profile} --set device={params.device} --set threads={threads}"
        " --meta arm={wildcards.arm} --meta seed={wildcards.seed} > {log} 2>&1"


rule norms_text:
    input:
        model=lambda wc: (
            [] if wc.arm == norms_wf.PRETRAINED_ARM else f"{TRUN}/model".format(**wc)
        ),
        settings=NORMS_CONFIG,
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
        profile=PROFILE,
        device=config["device"],
        model=lambda wc: norms_wf.text_model(
            config, wc.model, wc.arm, TRUN.format(**wc)
        ),
        pooling=lambda wc: "mean" if wc.arm == norms_wf.PRETRAINED_ARM else "cls",
    shell:
        "weince norms --text-model {params.model} --out $(dirname {output.result})"
        " --config {input.settings} --profile {params.profile}"
        " --set device={params.device} --set threads={threads} --set pooling={params.pooling}"
        " --meta arm={wildcards.arm} --meta model_label={wildcards.model}"
        " --meta seed={wildcards.seed} > {log} 2>&1"


rule norms_report:
    input:
        results=NORMS_RESULTS,
        settings=NORMS_CONFIG,
    output:
        md=f"{REPORT_DIR}/norms.md",
        summary=f"{REPORT_DIR}/norms_summary.json",
        figures=directory(f"{REPORT_DIR}/norms_figures"),
    log:
        f"{LOGS}/report/norms.log",
    threads: 1
    resources:
        **resources_for("report"),
    params:
        profile=PROFILE,
    shell:
        "weince norms report {input.results} --out {output.md}"
        " --profile {params.profile} > {log} 2>&1"
