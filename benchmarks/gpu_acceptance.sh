#!/usr/bin/env bash
# The GPU acceptance run: five sections, each with its own timeout, under
# 8 minutes on one H200 (--budget SECONDS, default 480), a report rewritten after every
# section (Markdown + JSON twin): the rehearsal of the paper profile, the CUDA tests, img/s
# and peak memory per backbone x arm (eager and compiled, CUDA-graph skips counted), the
# compiled step against the eager one, C8 at the paper's setting. benchmarks/gpu_acceptance.py
# says what each section does.
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
#   bash benchmarks/gpu_acceptance.sh [REPORT.md] [--budget S] [--sections NAME...]
#        [--compiled-arms ARM...] [--full] [--compile-mode MODE]
#        [--compile-backend inductor|aot_eager] [--wheels DIR]
#   bash benchmarks/gpu_acceptance.sh --cpu REPORT.md    # tiny sizes on CPU (the tests run it)
# Default report: ${OUT:-gpu_acceptance_out}/gpu_acceptance.md. Exit 0: every section passed
# or was skipped with its reason; 1: a section failed or timed out; 143: interrupted.
set -euo pipefail
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
