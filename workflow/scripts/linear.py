"""Snakemake adapter: linear probe on the frozen features of one encoder (weince.eval.linear).

The probe extracts its features in memory (weince.eval.features, with the features rule's
settings) instead of reading the temporary features.pt: a probe-only setting then reruns the
probes alone, where re-extracting the shared file would rerun every k-NN and norms job too."""

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
    from weince.utils.runlock import hold_run_lock

    hold_run_lock(snakemake.output[0])   # one writer per output file
    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    # what vision.linear sets, as written, with its device (linear_probe's defaults fill the rest)
    full = probe_kwargs(prof, snakemake.wildcards.arm)
    kwargs = job_settings(snakemake.params.kwargs, full, device=prof.vision.linear.device)
    # the encoder as its training recorded it (a truncated or swapped file stops here), its
    # features extracted here as the features job extracts them, its digest in the result
    inputs = check_encoder(snakemake.input.encoder, prof)
    features = extract_features(snakemake.input.encoder, None,
                                **extraction_kwargs(prof, snakemake.params.features))
    result = linear_probe(features, **kwargs)
    with reading(inputs):
        write_json(snakemake.output[0], result, cfg=kwargs)
    # the encoder is stored: like the features job, the first reader of a finished training
    # releases its resume state (a run whose only evaluation is its probe has no features job)
    if not job_config(prof, snakemake.wildcards).keep_checkpoint:
        release_checkpoint(Path(snakemake.input.encoder).parent)
