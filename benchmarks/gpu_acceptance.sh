#!/usr/bin/env bash
# The GPU acceptance run: six sections, most important first, each with its own timeout,
# in 8 minutes on one H200 (--budget SECONDS, default 480, counted from this script's
# start), a report rewritten after every section (Markdown + JSON twin, and
# measured_steps.yaml beside them): the CUDA tests, the GPU's training, features, probe and
# k-NN against the CPU's, the step time of every backbone x arm x precision of the paper
# profile, C8 at the paper's setting, the rehearsal of one pair, two jobs on one GPU.
# benchmarks/gpu_acceptance.py says what each section does and why the plan fits
# (python benchmarks/gpu_acceptance.py --plan prints it).
#
# On a GPU machine with its own PyTorch (>= 2.11; torch/triton never travel) and no network:
#   1. here, with PyPI:   python benchmarks/gpu_wheels.py build .whl      # ~27 MiB, < 64 MiB
#                         echo /.whl/ >> .git/info/exclude
#   2. there, in the checkout (the .whl folder carried beside it):
#        bash benchmarks/gpu_acceptance.sh --wheels .whl "$OUT/gpu_acceptance.md"
#      --wheels installs, without network and without dependencies, the wheels of the
#      distributions that machine lacks (pip install --no-index --no-deps --target
#      $TMPDIR/weince-site) and puts them on PYTHONPATH; the project runs from src/.
#      On the workplace's device tool: run(command="bash benchmarks/gpu_acceptance.sh
#      --wheels .whl $OUT/gpu_acceptance.md", carry=[".whl"], timeout_s=600).
#   Where the pinned environment is installed (pip install -e ".[all,test]"), no --wheels.
#
#   bash benchmarks/gpu_acceptance.sh [REPORT.md] [--budget S] [--sections NAME...] [--wheels DIR]
#   bash benchmarks/gpu_acceptance.sh --cpu REPORT.md    # tiny sizes on CPU (the tests run it)
# Default report: ${OUT:-gpu_acceptance_out}/gpu_acceptance.md. Exit 0: every section passed
# or was skipped with its reason; 1: a section failed or timed out; 143: interrupted.
set -euo pipefail
export WEINCE_ACCEPTANCE_T0="${WEINCE_ACCEPTANCE_T0:-$(date +%s.%N)}"   # the budget's start
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=""
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --wheels) WHEELS="$2"; shift 2 ;;
        *) ARGS+=("$1"); shift ;;
    esac
done
if [ -n "$WHEELS" ]; then
    SITE="${TMPDIR:-/tmp}/weince-site"
    LOG="${OUT:-gpu_acceptance_out}/wheels_install.txt"
    mkdir -p "$(dirname "$LOG")"
    "$PY" benchmarks/gpu_wheels.py install "$WHEELS" --target "$SITE" > "$LOG"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    export WEINCE_WHEELS_LOG="$PWD/$LOG"
    [ "${LOG#/}" != "$LOG" ] && export WEINCE_WHEELS_LOG="$LOG"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "$PY" benchmarks/gpu_acceptance.py ${ARGS[@]+"${ARGS[@]}"}
