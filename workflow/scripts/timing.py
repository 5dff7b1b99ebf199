"""Snakemake adapter: overhead timing, WEINCE vs InfoNCE (weince.timing, C8)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.pipeline.profile import Profile
    from weince.timing import run_timing
    from weince.utils.config import to_dict
    from weince.utils import write_json

    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    cfg = prof.timing.config   # the params (its result settings) are these fields
    write_json(snakemake.output[0], run_timing(cfg), cfg=to_dict(cfg))
