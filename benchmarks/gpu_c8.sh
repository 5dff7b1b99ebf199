#!/usr/bin/env bash
# The GPU checks of claim C8 in one short script (about 6-8 minutes on one recent GPU).
# benchmarks/gpu_acceptance.sh is the wider acceptance run (it includes C8 at the paper's
# setting); this script stays for the C8 numbers alone:
#   1. the CUDA-only tests (loss on CUDA, bf16 autocast, compiled loss);
#   2. the loss alone at 2N in {512, 4096}, eager and compiled;
#   3. the paper's whole step: ResNet-18, CIFAR size, 2 x 256 views, float32 (the paper
#      profile's pretraining precision; the loss outside autocast), losses eager and
#      torch.compile'd, side by side.
# Writes everything under ${OUT:-gpu_c8_out}. Run it from the repository root after
# `pip install -e ".[test]"`:  bash benchmarks/gpu_c8.sh
set -euo pipefail
OUT=${OUT:-gpu_c8_out}
mkdir -p "$OUT"
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device visible'; \
print(torch.__version__, torch.cuda.get_device_name(0))" | tee "$OUT/device.txt"

# a failing test is reported but does not stop the timings
python -m pytest -q -ra tests/losses tests/test_timing.py 2>&1 | tail -n 15 | tee "$OUT/tests.txt" \
    || echo "some CUDA tests failed: see $OUT/tests.txt"

weince bench-loss --device cuda --sizes 512 4096 --reps 50 --losses infonce weince \
    --out "$OUT/bench_loss_eager.json" | tee "$OUT/bench_loss_eager.txt"
weince bench-loss --device cuda --sizes 512 4096 --reps 50 --losses infonce weince --compile \
    --out "$OUT/bench_loss_compiled.json" | tee "$OUT/bench_loss_compiled.txt"

weince timing --set device=cuda --set "losses=[infonce,weince,weince_recipe]" \
    --set "sizes=[256,512,1024,4096]" --set loss_reps=30 --set warmup=5 \
    --set backbone=resnet18 --set step_batch=256 --set step_reps=30 --set compile=both \
    --out "$OUT/timing.json" 2>"$OUT/timing.err" | tee "$OUT/timing.txt"
