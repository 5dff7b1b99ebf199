"""Snakemake adapter: one encoder's steps in one job (`vision_jobs: per_encoder`), each by its
own rule's script (weince.pipeline.fused)."""

from weince.pipeline.fused import run_chain

run_chain(snakemake)
