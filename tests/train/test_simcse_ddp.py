"""SimCSE on several gloo processes (CPU) == one process on the whole batch.

What is compared, and why. SimCSE's augmentation is dropout: the two views of a sentence
differ only by the encoder's dropout masks, and a rank draws its masks from its own
generator (``seed * 1000 + 1 + rank``), so with dropout on no multi-process run can
reproduce the single-process masks. With ``dropout: 0`` everything else is deterministic:
same data order, same initial weights (the views are then equal, so ``tau: 1`` keeps the
loss and its gradient away from zero), the loss on the full ``B x B`` similarity matrix (the
shards' embeddings are all-gathered with gradient), DDP's averaged gradients, the same
clipping and AdamW steps. So the test trains 4 steps with dropout 0 on 3 processes, with a
batch of 7 (shards of 3/2/2 rows) and an epoch whose last batch has 2 rows (shards 1/1/0:
one rank holds no row), and asserts that the per-step losses, the dev scores and the final
weights equal the single-process run's up to float rounding (the shards' matrix products
are summed in another order than the whole batch's).

With dropout on, 2 processes interrupted after step 3 (checkpoint at step 2) and resumed
reproduce their own uninterrupted run exactly: the checkpoint keeps every rank's RNG state.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
import torch
import torch._dynamo  # DDP imports it on construction: here, once, before any fork
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file

from weince.eval.sts import encode
from weince.models.text import load_text_encoder, minilm_path
from weince.train.ddp import cleanup_distributed
from weince.train.simcse import train_simcse
from weince.train.trainlog import read_jsonl

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not dist.is_available(), reason="torch.distributed missing")]

# 16 sentences in batches of 7: steps of 7, 7 and 2 rows per epoch; 4 steps = 1 epoch + 1
EXACT = dict(n_train=16, batch_size=7, max_length=16, n_sts=20, eval_every=2, log_every=1,
             eval_at_start=True, max_steps=4, eval_batch_size=64, loss="weince_recipe",
             dropout=0.0, tau=1.0, lr=1e-4, epochs=2, device="cpu")
RESUME = dict(n_train=40, batch_size=8, max_length=16, n_sts=20, eval_every=2, log_every=1,
              eval_at_start=False, max_steps=4, eval_batch_size=64, loss="weince",
              device="cpu")
PROBE = ["A man is playing a guitar on the stage.", "The cat is chasing a mouse.",
         "Two children are building a sandcastle on the beach."]


class _Interrupt(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, jobs):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    def stop_at_3(step, loss):
        if step == 3:
            raise _Interrupt

    try:
        for cfg, out, cut in jobs:
            try:
                train_simcse(cfg, out, on_step=stop_at_3 if cut else None)
            except _Interrupt:
                pass
    finally:
        cleanup_distributed()


def _launch(world, jobs):
    mp.start_processes(_worker, args=(world, _free_port(), jobs), nprocs=world, join=True,
                       start_method="fork")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The multi-process runs first (forking after the parent has trained is avoided), then
    the single-process reference."""
    root = tmp_path_factory.mktemp("simcse_ddp")
    _launch(3, [(EXACT, str(root / "ddp3"), False)])
    _launch(2, [(RESUME, str(root / "full2"), False), (RESUME, str(root / "cut2"), True),
                (RESUME, str(root / "cut2"), False)])
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_simcse(EXACT, root / "one")
    finally:
        torch.set_num_threads(before)
    return root


def _log(folder):
    return read_jsonl(folder / "train_log.jsonl")


def _weights(folder):
    sd = load_file(str(folder / "model" / "model.safetensors"))
    mlp = torch.load(folder / "model" / "simcse_mlp.pt", weights_only=True)
    return {**sd, **{f"mlp.{k}": v for k, v in mlp.items()}}


def _embed(folder):
    model, tok = load_text_encoder(folder / "model")
    return encode(model, tok, PROBE)


def test_three_processes_equal_one_process_without_dropout(runs):
    one, ddp = runs / "one", runs / "ddp3"
    s1 = json.loads((one / "train.json").read_text())
    s3 = json.loads((ddp / "train.json").read_text())
    assert (s1["world_size"], s3["world_size"]) == (1, 3)
    assert s1["batch_size"] == s3["batch_size"] == 7 and s1["steps_per_epoch"] == 3
    assert s3["steps"] == 4 and s3["n_sentences"] == 16

    l1, l3 = _log(one), _log(ddp)
    # rank 0 alone wrote the log: one record per step and per evaluation, none twice
    assert [(r["step"], "loss" in r) for r in l3] == [(r["step"], "loss" in r) for r in l1]
    assert [r["step"] for r in l3 if "loss" in r] == [1, 2, 3, 4]
    for a, b in zip(l1, l3):
        for k in ("loss", "lambda_mean", "beta_t", "dev_spearman"):
            if k in a:
                assert b[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6), (k, a, b)
    losses = [r["loss"] for r in l1 if "loss" in r]
    dloss = max(abs(a["loss"] - b["loss"]) for a, b in zip(l1, l3) if "loss" in a)
    assert len(set(round(v, 4) for v in losses)) == 4   # the loss moved: training happened

    w1, w3 = _weights(one), _weights(ddp)
    assert w1.keys() == w3.keys()
    base = _weights_of_minilm()
    keys = [k for k in base if k in w1]

    def norm(d):
        return sum(float((d[k].double() ** 2).sum()) for k in keys) ** 0.5

    update = norm({k: w1[k] - base[k] for k in keys})
    rel = norm({k: w1[k] - w3[k] for k in keys}) / update
    diff = max(float((w1[k] - w3[k]).abs().max()) for k in w1)
    print(f"\nSimCSE 3 ranks vs 1, dropout 0: losses {losses} (max |diff| {dloss:.1e}); "
          f"|w3 - w1| / |w1 - w0| = "
          f"{rel:.2e}, max |w3 - w1| = {diff:.2e} (|w1 - w0| = {update:.3f})")
    # the 4 steps moved the weights (norm ~0.6) and the runs' difference is rounding: its
    # largest entries are attention key biases, whose exact gradient is 0 (softmax ignores a
    # per-query constant), so AdamW turns their rounding-level gradients into +-lr steps
    assert update > 0.1
    assert rel < 1e-3, rel
    assert diff < 2e-5, diff
    torch.testing.assert_close(_embed(ddp), _embed(one), atol=1e-5, rtol=1e-5)


def _weights_of_minilm():
    return load_file(str(minilm_path() / "model.safetensors"))


def test_two_processes_resume_with_their_own_dropout_streams(runs):
    full, cut = runs / "full2", runs / "cut2"
    sf = json.loads((full / "train.json").read_text())
    sc = json.loads((cut / "train.json").read_text())
    assert sf["world_size"] == sc["world_size"] == 2
    assert sc["resumed_from_step"] == 2 and sc["steps"] == 4
    assert not (cut / "checkpoint.pt").exists()
    lf, lc = _log(full), _log(cut)
    # each epoch's end commits its weights' digest (the training audit); the resumed run's
    # records are the uninterrupted run's
    ef = [r for r in lf if "weights_sha256" in r]
    ec = [r for r in lc if "weights_sha256" in r]
    assert [r["step"] for r in ec] == [r["step"] for r in ef] and ef
    lf = [r for r in lf if "weights_sha256" not in r]
    lc = [r for r in lc if "weights_sha256" not in r]
    assert [r["step"] for r in lc] == [r["step"] for r in lf] == [1, 2, 2, 3, 4, 4]
    for a, b in zip(lf, lc):
        for k in ("loss", "dev_spearman"):
            if k in a:
                assert b[k] == pytest.approx(a[k], rel=1e-6, abs=1e-7)
    wf, wc = _weights(full), _weights(cut)
    assert max(float((wf[k] - wc[k]).abs().max()) for k in wf) < 1e-6
