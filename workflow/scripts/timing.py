"""Snakemake adapter: overhead timing, WEINCE vs InfoNCE (weince.timing, C8)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.pipeline.profile import Profile
    from weince.timing import TimingConfig, run_timing
    from weince.utils.config import as_config, to_dict
    from weince.utils import write_json

    torch.set_num_threads(snakemake.threads)
    prof = Profile.of(snakemake.config)
    cfg = as_config(TimingConfig, {"device": prof.device, **prof.timing.config,
                                   **snakemake.params.cfg})
    write_json(snakemake.output[0], run_timing(cfg), cfg=to_dict(cfg))
