# The rehearsal (config/rehearsal.yaml): the cost forecast of the full paper run.
# Reads every pretraining and SimCSE run's step_timing (train.json) and the paper profile's
# sizes; writes reports/rehearsal/forecast.md and the resources.yaml overlay
# (weince.cost.forecast). Only a rehearsal profile (rehearsal.enabled) has this rule.

from weince.pipeline.rehearsal import forecast_inputs, forecast_outputs

FORECAST_OUTPUTS = forecast_outputs(PROFILE)

if FORECAST_OUTPUTS:

    rule forecast:
        input:
            [str(p) for p in forecast_inputs(PROFILE)],
        output:
            md=str(FORECAST_OUTPUTS["md"]),
            resources=str(FORECAST_OUTPUTS["resources"]),
        log:
            f"{RESULTS}/{NAME}/logs/report/forecast.log",
        benchmark:
            f"{RESULTS}/{NAME}/benchmarks/forecast.tsv"
        threads: 1
        resources:
            **resources_for("report"),
        script:
            "../scripts/forecast.py"
