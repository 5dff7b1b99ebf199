"""Snakemake adapter: a SimCSE run and its STS evaluation in one job (`vision_jobs: per_arm`),
each by its own rule's script (weince.pipeline.fused)."""

from weince.pipeline.fused import run_text_chain

run_text_chain(snakemake)
