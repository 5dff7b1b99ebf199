#!/usr/bin/env bash
# The GPU acceptance checks of issue 17 in one script (under 8 minutes on one H200, no network,
# no data sets): pytest -m cuda; eager and compiled pretraining steps per backbone and arm in
# float32 and bf16 (img/s, peak memory); one end-to-end pretrain epoch from synthetic
# cifar-100-python pickles; C8 at the paper's setting (weince timing, ResNet-18, 2 x 256 views);
# a bert-base-sized SimCSE step. Writes ONE Markdown report: the path given, else
# ${OUT:-gpu_acceptance_out}/gpu_acceptance.md.
#   bash benchmarks/gpu_acceptance.sh [REPORT.md] [--full] [--compiled-arms A B]
#   bash benchmarks/gpu_acceptance.sh --cpu REPORT.md     # tiny sizes on CPU (the test suite runs it)
# Run from the repository root after `pip install -e ".[test]"`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
exec python benchmarks/gpu_acceptance.py "$@"
