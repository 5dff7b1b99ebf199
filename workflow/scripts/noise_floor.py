"""Snakemake adapter: the synthetic noise-floor experiment of C11 (weince.evt.noise_floor)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.evt.noise_floor import simulate_noise_floor, write_noise_floor

    kw = dict(snakemake.params.kwargs)
    result = simulate_noise_floor(**kw)
    for r in result.rows:
        print(f"n={r['n']:>6}  MSE Weibit {r['mse_weibit']:.3e} (c/n {r['theory_weibit']:.3e})"
              f"  softmax {r['mse_softmax']:.3e} (floor {r['softmax_floor']:.3e})"
              f"  degenerate {r['degenerate']}")
    write_noise_floor(result, snakemake.output.json, snakemake.output.csv, cfg=kw)
