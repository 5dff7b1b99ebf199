"""What a profile costs: FLOPs, GPU throughput, GPU-hours, SLURM requests, the forecast.

One room for cost (docs/cost.md), beside the report layer; importing it for planning
imports no torch:

- :mod:`~weince.cost.counts`: the committed FLOPs table (``flops.yaml``) and the data
  sets' sizes, read without torch;
- :mod:`~weince.cost.flops`: the torch counter that writes that table
  (``weince cost --recount``) and counts a model it lacks; the only module that imports
  torch, used only when counting;
- :mod:`~weince.cost.throughput`: devices, measured training throughputs and the price of
  one step of a named model on a named GPU (``weince cost``); ``devices.yaml``;
- :mod:`~weince.cost.estimate`: a profile's runs, GPU-hours per GPU type and for a mixed
  set, the SLURM runtime, segments and retries of each training job, measured step times
  (``cost.measured``) in place of the estimate;
- :mod:`~weince.cost.evaljobs`: the SLURM runtime of the evaluation jobs from their work;
- :mod:`~weince.cost.forecast`: the rehearsal's forecast of the paper run;
- :mod:`~weince.cost.plan`: the dry-run planner (``weince plan``);
- :mod:`~weince.cost.job_times`: the time and memory per job and rule (``weince job-times``).
"""
