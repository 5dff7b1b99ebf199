"""The norms room: everything about the embedding-norm dynamics claims N1-N3
(``docs/norms.md``), from the analysis of one encoder to the claims' verdicts and the page.

- :mod:`weince.norms.run`: the analysis of one vision or text encoder (``analyse_vision``,
  ``analyse_text``, ``load_norms_config``), one ``norms.json`` and
  ``norms_probes.npz`` per unit; built from :mod:`~weince.norms.analysis` (heat, radial
  drift, equilibrium norm), :mod:`~weince.norms.rescore` (norm-aware re-scoring, N3) and
  :mod:`~weince.norms.stats` (correlations and paired gains with bootstrap intervals);
- :mod:`weince.norms.config`: the analysis' options (``NormsConfig``, importable without
  torch; the workflow config's ``norms.analysis`` block is generated from it);
- :mod:`weince.norms.files`: the files' names, and a ``norms.json`` read back and checked
  (``load_results``, ``check_norms_result``);
- :mod:`weince.norms.rules`: every norms rule: each unit's verdicts, and N1-N3 as claims
  of the registry (``evaluate_norms_claim``, the report's kind ``norms``, and its rule in
  words ``RULE``);
- :mod:`weince.norms.page`: the per-unit page ``norms.md`` and ``norms_summary.json``
  (``write_norms_report``), with its figures (:mod:`weince.norms.figures`).

Callers import the submodules (only ``run``, ``analysis`` and ``rescore`` import torch):

    from weince.norms.run import analyse_vision, analyse_text
    analyse_vision("encoder.pt", "weince", features="features.pt", out_dir="out")
    analyse_text("minilm", out_dir="out_text")

Command line: ``weince norms --encoder encoder.pt --features features.pt --out DIR``,
``weince norms --text-model minilm --out DIR``, ``weince norms report RESULTS... --out MD``
(:mod:`weince.cli.norms`); the workflow's rules are ``workflow/rules/norms.smk``. The room
imports only the building blocks below it (``weince.utils``, ``weince.data``,
``weince.models``, ``weince.losses``, ``weince.eval``), never the report or the pipeline.
"""
