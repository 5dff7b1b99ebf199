"""Snakemake adapter: N1-N3 of one sentence encoder (weince.norms.run.analyse_text)."""

from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.norms.run import analyse_text
    from weince.pipeline.digests import check_model
    from weince.pipeline.layout import PRETRAINED_ARM
    from weince.pipeline.profile import Profile
    from weince.pipeline.stages import job_settings, norms_config, text_model
    from weince.utils.results import reading

    wc = snakemake.wildcards
    prof = Profile.of(snakemake.config)
    out = Path(snakemake.output.result).parent
    # the device and the model's path come from the profile (params lack them)
    cfg = dict(job_settings(snakemake.params.cfg, norms_config(prof)), threads=snakemake.threads)
    model = text_model(prof, wc.model, wc.arm, str(out))
    # a trained model as its SimCSE run recorded it (a shipped one has no run to check)
    inputs = {} if wc.arm == PRETRAINED_ARM else check_model(model, prof)
    with reading(inputs):
        res = analyse_text(model, cfg=cfg, out_dir=out,
                           meta={"arm": wc.arm, "model_label": wc.model, "seed": int(wc.seed)})
    print(f"{snakemake.output.result}: {res['verdicts']}")
