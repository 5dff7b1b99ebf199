"""Snakemake adapter: linear probe on projection-head features (the `features` ablation),
extracted in memory like the linear probe's (workflow/scripts/linear.py says why)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from pathlib import Path

    import torch

    from weince.eval.features import extract_features
    from weince.eval.linear import linear_probe
    from weince.pipeline.digests import check_encoder
    from weince.pipeline.profile import Profile
    from weince.pipeline.protocol import probe_kwargs
    from weince.pipeline.stages import extraction_kwargs, job_config, job_settings
    from weince.utils import write_json
    from weince.utils.checkpoint import release_checkpoint
    from weince.utils.results import reading

    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    full = probe_kwargs(prof, snakemake.wildcards.arm)
    kwargs = job_settings(snakemake.params.kwargs, full, device=prof.vision.linear.device)
    kwargs["feature"] = "head"
    inputs = check_encoder(snakemake.input.encoder, prof)
    features = extract_features(snakemake.input.encoder, None,
                                **extraction_kwargs(prof, snakemake.params.features))
    with reading(inputs):
        write_json(snakemake.output[0], linear_probe(features, **kwargs), cfg=kwargs)
    # the encoder is stored: like the features job, the first reader of a finished training
    # releases its resume state (a run whose only evaluation is its probe has no features job)
    if not job_config(prof, snakemake.wildcards).keep_checkpoint:
        release_checkpoint(Path(snakemake.input.encoder).parent)
