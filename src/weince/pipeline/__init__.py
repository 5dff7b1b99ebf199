"""What a profile asks for: the workflow's glue, tested like the rest of the library.

- :mod:`~weince.pipeline.layout`: where every result lives (path templates) and the one
  enumeration of runs (:func:`~weince.pipeline.layout.vision_runs`,
  :func:`~weince.pipeline.layout.text_runs`, :func:`~weince.pipeline.layout.files_for`);
- :mod:`~weince.pipeline.stages`: the resolved config each rule passes to the library
  (``pretrain_config``, ``simcse_config``, ``norms_config``, ``apply_selection``);
- :mod:`~weince.pipeline.arms`: every named training arm of the ``{arm}`` slot (``ARMS``,
  ``resolve_arm``, grid point names), a loss name with its options;
- :mod:`~weince.pipeline.grid`: the grid point chosen on validation (four-seed
  means, complete points first, one k-NN point per metric);
- :mod:`~weince.pipeline.protocol`: the official protocol's values and the cheaper
  options a profile turns on;
- :mod:`~weince.pipeline.ablations`: the ablation plan of a profile (its norms units, from
  its ``norms`` block, are :mod:`~weince.pipeline.layout`'s ``norms_vision_runs`` and
  ``norms_text_runs``);
- :mod:`~weince.pipeline.profile`: ``Profile.of(config)``, a profile's runs, settings,
  options and paths resolved once (what the report builder passes down);
- :mod:`~weince.pipeline.claims`: the claims registry (``config/claims.yaml``, checked
  against ``claims.schema.yaml``), ``load_claims``;
- :mod:`~weince.pipeline.targets`: ``all_targets(config)``, the input of ``rule all``, and
  the files of each page (``report_outputs``, ``norms_results``, ``norms_outputs``);
- :mod:`~weince.pipeline.config_check`: the profile config's check against the schema;
- :mod:`~weince.pipeline.joblog`: ``log_to``, the log redirection of the rules' scripts.

What the runs cost (FLOPs, GPU-hours, SLURM requests, the benchmark files per rule) is
:mod:`weince.cost`'s.

Nothing is imported here, so a rule's script imports only what it uses.
"""
