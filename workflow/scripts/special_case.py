"""Snakemake adapter: C9, WEINCE with lambda = 0 equals InfoNCE (weince.eval.special_case)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.eval.special_case import DEFAULT_CASES, special_case_check
    from weince.utils import write_json

    cases = snakemake.params.cases or DEFAULT_CASES
    result = special_case_check(cases)
    print(f"max |diff| = {result['max_abs_diff']:.3e}")
    write_json(snakemake.output[0], result, cfg={"cases": [list(c) for c in cases]})
