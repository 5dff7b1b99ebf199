"""One SimCLR pretraining loop for every image data set, backbone and loss.

    weince pretrain --config cfg.yaml --out runs/digits-weince --set epochs=2
    torchrun --nproc_per_node 8 -m weince.cli pretrain --config cfg.yaml --out DIR

    from weince.train.simclr import SimCLRConfig, pretrain
    summary = pretrain(SimCLRConfig(dataset="digits", loss="weince", epochs=2), "out")

Data path (no DataLoader): the whole uint8 training split is put on the training device
once; every epoch shuffles the indices with a seeded generator and cuts full batches
(``drop_last``); each batch gets two SimCLR views on the device with per-image random
parameters (:class:`weince.data.augment.SimCLRAugment`, ``aug: batch``). ``aug:
per_image`` is the classic CPU path instead (torchvision ops image by image in a
``DataLoader`` with ``num_workers`` workers), kept for comparison.

Each step embeds the two views in one forward pass each (``forward: per_view``, the
official code: BatchNorm statistics per view; ``forward: joint`` is the faster option of one
pass over ``cat(v1, v2)``, BatchNorm over all ``2N`` views), evaluates the loss
(``weince.losses.build_loss(cfg.loss, tau=cfg.tau, **cfg.loss_kwargs)``) in float32, and
steps Adam (``docs/protocol.md``: lr 3e-4, **no** weight decay, constant) or, as an option,
LARS with a
cosine schedule. Precision defaults to the official float32 throughout: no autocast and
full-float32 matmuls; ``amp: true`` (bf16 autocast) and ``tf32: true`` (TF32 matmuls) are
the faster CUDA options. On CUDA: ``channels_last`` and optional ``torch.compile``.
The protocol decisions and their official sources: ``docs/protocol.md``.

Files written in ``out_dir``:

- ``checkpoint.pt`` after every epoch: model, optimiser, scheduler, loss module state (the
  recipe's ``beta_t`` buffer), every random generator, the epoch and the log so far; removed
  once the run has finished and written ``encoder.pt`` (``keep_checkpoint: true`` keeps it). A
  call with an existing checkpoint **resumes** from it; on CPU a resumed run ends with
  exactly the weights of an uninterrupted one (``tests/train/test_simclr.py``). On
  ``SIGTERM`` (SLURM's preemption or time-limit signal) it is also written after the step
  in flight, with the position in the epoch, and the run exits with 143
  (:mod:`weince.train.preempt`); resuming continues at that step with the same batches
  and random draws, so a preemption loses at most one step.
- ``train_log.jsonl``: one record per epoch: ``loss``, ``lambda_mean/q10/q50/q90``, ``rho0``,
  ``daic_mean``, ``beta_t`` (whatever the loss reports in ``last_stats``, averaged over the
  epoch's steps), ``img_s`` (images, each seen as two views, per second), ``lr`` (the
  learning rate of the next step), ``epoch_s``, ``weights_sha256`` (the weights' digest at
  the epoch's end: the chain of :mod:`weince.train.audit`).
- ``audit/step-<n>.pt``: the training states of the audit segments (``keep_states``).
- ``encoder.pt`` (:func:`weince.models.save_encoder`) and ``train.json`` (summary with
  provenance) at the end.

Multi-GPU (``torchrun``): ``batch_size`` is the *global* batch; every rank shuffles with the
same seed and takes its slice of each global batch, embeddings are all-gathered with
gradient (:func:`weince.train.ddp.gather_with_grad`) and every rank evaluates the
same global loss, so the gradient equals the single-process one (see that module).
BatchNorm layers become ``SyncBatchNorm`` on CUDA (``sync_bn``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from weince.losses import modules as loss_modules   # build_loss looked up at each build
from weince.data.augment import PerImageTwoViews, build_augment
from weince.data.vision import DATASETS, load_vision, subset_indices
from weince.models.vision import BACKBONES, SimCLRModel, build_simclr_model, save_encoder
from weince.train import ddp as D
from weince.train.audit import Auditor
from weince.train.loop import (DivergedError, EpochStats, TrainingRun, check_same_config,
                               diverged, progress_bar, progress_enabled, progress_note,
                               unwrap_model, weights_finite)
from weince.train.config import RUNTIME_KEYS, SimCLRConfig
from weince.train.optim import LARS, build_optimizer, build_scheduler
from weince.train.preempt import PreemptionGuard
from weince.utils.checkpoint import (check_resume_device, restore_generator, restore_rng,
                                     rng_state)
from weince.utils.config import as_config, to_dict
from weince.utils.digest import sha256_file
from weince.utils.results import load_result
from weince.utils.runlock import locks_output

__all__ = ["SimCLRConfig", "pretrain", "complete_config", "LARS", "DivergedError", "CompiledStep",
           "eager_step", "embed_views", "COMPILE_MODES"]


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def complete_config(cfg: SimCLRConfig | dict) -> SimCLRConfig:
    """Check what the types cannot say and fill ``image_size``/``channels`` from the data set
    registry. A dict is typed first (:func:`~weince.utils.config.config_from_dict`: unknown
    keys, types and the fields' ranges); a :class:`SimCLRConfig` is taken as typed (the
    workflow's comes from a config checked against the schema generated from it)."""
    cfg = dataclasses.replace(as_config(SimCLRConfig, cfg))  # never mutate the caller's
    name = cfg.dataset.lower()
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {cfg.dataset!r}; valid: {', '.join(DATASETS)}")
    if cfg.backbone not in BACKBONES:
        raise ValueError(f"unknown backbone {cfg.backbone!r}; valid: {', '.join(BACKBONES)}")
    known = loss_modules.LOSSES
    if cfg.loss not in known:
        raise ValueError(f"unknown loss {cfg.loss!r}; valid: {', '.join(sorted(known))}")
    if "gather_distributed" in cfg.loss_kwargs:   # twice would repeat every process's rows
        raise ValueError("loss_kwargs.gather_distributed: the training loop already gathers the "
                         "embeddings of every process; remove the key from the config")
    spec = DATASETS[name]
    if cfg.channels is not None and cfg.channels != spec.channels:
        raise ValueError(f"channels={cfg.channels} but {name} has {spec.channels}; "
                         f"leave channels unset")
    if cfg.warmup_epochs and cfg.warmup_epochs >= cfg.epochs:
        raise ValueError(f"warmup_epochs must be in [0, epochs), got {cfg.warmup_epochs}")
    if cfg.compile_step is not None and (cfg.optimizer != "adam" or cfg.aug != "batch"):
        raise ValueError("compile_step needs optimizer: adam and aug: batch (the compiled "
                         "step holds Adam's update and the batched views); set "
                         "compile_step: null for the other settings")
    if cfg.max_train_images is not None and cfg.max_train_images < cfg.batch_size:
        raise ValueError(f"max_train_images={cfg.max_train_images} is below batch_size="
                         f"{cfg.batch_size}: no full batch")
    cfg.dataset = name
    cfg.channels = spec.channels
    if cfg.image_size is None:
        cfg.image_size = spec.image_size
    return cfg


# ------------------------------------------------------------------------- one step
def embed_views(fwd, v1: torch.Tensor, v2: torch.Tensor, *, forward: str = "per_view",
                channels_last: bool = False, use_amp: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Projections ``z1, z2`` (float32) of the two views: one forward per view (``per_view``,
    the official code: BatchNorm statistics per view) or one over both (``joint``)."""
    views = [torch.cat([v1, v2])] if forward == "joint" else [v1, v2]
    if channels_last:
        views = [x.contiguous(memory_format=torch.channels_last) for x in views]
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_amp):
        z = torch.cat([fwd(x)[1] for x in views])
    z1, z2 = z.float().chunk(2)
    return z1, z2


def eager_step(model, loss_fn, opt, aug, batch, generator, *, use_amp=False, channels_last=False,
               fwd=None, distributed=False, forward="per_view", views=None):
    """One eager training step on ``batch`` (uint8 images): two views drawn with
    ``generator`` (or the given ``views``), forward, loss, backward, optimiser step. Returns
    the detached loss; ``loss_fn.last_stats`` holds the loss's statistics. Nothing here waits
    for the device."""
    v1, v2 = views if views is not None else aug.two_views(batch, generator=generator)
    z1, z2 = embed_views(fwd or model, v1, v2, forward=forward, channels_last=channels_last,
                         use_amp=use_amp)
    if distributed:
        z1, z2 = D.gather_with_grad(z1), D.gather_with_grad(z2)
    loss = loss_fn(z1, z2)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


class CompiledStep:
    """The whole training step as one ``torch.compile(fullgraph=True)`` graph: views from
    the step's uniforms, forward, loss, gradients (``torch.autograd.grad``, traced with
    ``trace_autograd_ops``) and Adam's update on the optimiser's own state (so checkpoints
    and the learning-rate scheduler work as in eager mode); the graph returns the new
    parameters and moments, copied into place by four multi-tensor copies after it.

    ``torch.optim.Adam.step`` cannot be traced (it breaks the graph on purpose), hence the
    update below; it is ``torch.optim.Adam``'s (L2 weight decay, no amsgrad), with the step
    count and the learning rate as tensors so that neither recompiles nor syncs. The random
    uniforms of the views are drawn outside with the run's generator, one ``torch.rand``
    call, exactly the draw of the eager step: both consume the same random stream.

    ``mode=None`` runs the same function eagerly (no compile), for comparison. ``backend``:
    torch.compile's backend, Inductor unless asked; ``"aot_eager"`` traces the same single
    graph (Dynamo, AOTAutograd) and runs it without generating code, a quicker check of the
    capture (docs/performance.md, "The compiled training step").
    """

    def __init__(self, model, loss_fn, opt, aug, *, use_amp=False, channels_last=False,
                 mode: str | None = "default", forward: str = "per_view",
                 backend: str = "inductor"):
        if not isinstance(opt, torch.optim.Adam) or len(opt.param_groups) != 1:
            raise ValueError("CompiledStep needs a torch.optim.Adam with one parameter group")
        g = opt.param_groups[0]
        if g.get("amsgrad") or g.get("maximize") or g.get("decoupled_weight_decay"):
            raise ValueError("CompiledStep supports plain Adam (no amsgrad/maximize/AdamW)")
        self.model, self.loss_fn, self.opt, self.aug = model, loss_fn, opt, aug
        self.use_amp, self.channels_last = bool(use_amp), bool(channels_last)
        if forward not in ("per_view", "joint"):
            raise ValueError(f"forward must be 'per_view' or 'joint', got {forward!r}")
        self.forward = forward
        self.params = [p for p in g["params"] if p.requires_grad]
        dev = self.params[0].device
        for p in self.params:  # Adam's lazily created state, created now (step on the device)
            st = opt.state[p]
            if "step" not in st:
                st["step"] = torch.zeros((), dtype=torch.float32, device=dev)
                st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            elif st["step"].device != dev:
                st["step"] = st["step"].to(dev)
        self.lr = torch.tensor(float(g["lr"]), dtype=torch.float32, device=dev)
        self.mode, self.backend = mode, backend
        if mode is None:
            self.fn = self._step
        else:
            if mode not in COMPILE_MODES:
                raise ValueError(f"mode must be one of {COMPILE_MODES} or None, got {mode!r}")
            if backend != "inductor" and mode != "default":
                raise ValueError(f"compile mode {mode!r} is Inductor's; backend {backend!r} "
                                 "takes mode 'default' only")
            self.fn = torch.compile(self._step, fullgraph=True, backend=backend,
                                    mode=None if mode == "default" else mode)

    def _step(self, batch: torch.Tensor, u: torch.Tensor, lr: torch.Tensor):
        v1, v2 = self.aug.two_views(batch, u=u)
        z1, z2 = embed_views(self.model, v1, v2, forward=self.forward,
                             channels_last=self.channels_last, use_amp=self.use_amp)
        loss = self.loss_fn(z1, z2)
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():
            new = self._adam(grads, lr)
        # the gradients are returned too (unused): kept as graph outputs, the step equals
        # eager under Inductor on CPU (docs/performance.md, "The compiled training step")
        return loss.detach(), dict(self.loss_fn.last_stats), new, grads

    def _adam(self, grads, lr):
        """``torch.optim.Adam``'s update as new tensors: ``(params, exp_avg, exp_avg_sq, step)``
        lists. They are copied into place after the graph (four multi-tensor copies), not
        mutated inside the graph that differentiates through them (docs/performance.md,
        "The compiled training step")."""
        g0 = self.opt.param_groups[0]
        (b1, b2), eps, wd = g0["betas"], g0["eps"], g0["weight_decay"]
        out: tuple[list[torch.Tensor], ...] = ([], [], [], [])
        for p, grad in zip(self.params, grads):
            st = self.opt.state[p]
            if wd:
                grad = grad.add(p, alpha=wd)
            step = st["step"] + 1
            m = torch.lerp(st["exp_avg"], grad, 1 - b1)
            v = torch.addcmul(st["exp_avg_sq"] * b2, grad, grad, value=1 - b2)
            bc1 = 1 - torch.pow(b1, step)
            bc2 = 1 - torch.pow(b2, step)
            denom = (v.sqrt() / bc2.sqrt()).add_(eps)
            for lst, val in zip(out, (p - m / denom * (lr / bc1), m, v, step)):
                lst.append(val)
        return out

    def __call__(self, batch: torch.Tensor, generator: torch.Generator | None = None):
        """One step on ``batch`` (uint8 images); returns ``(loss, last_stats)`` (detached)."""
        u = self.aug.draw(2 * batch.shape[0], generator, batch.device)
        self.lr.fill_(float(self.opt.param_groups[0]["lr"]))   # scheduler's value; no sync
        if self.mode == "reduce-overhead":  # CUDA graphs: the previous step's outputs are consumed
            torch.compiler.cudagraph_mark_step_begin()
        with torch._dynamo.config.patch(trace_autograd_ops=True):
            loss, stats, new, _ = self.fn(batch, u, self.lr)
        st = [self.opt.state[p] for p in self.params]
        with torch.no_grad():
            for dst, src in zip((self.params, [s["exp_avg"] for s in st],
                                 [s["exp_avg_sq"] for s in st], [s["step"] for s in st]), new):
                torch._foreach_copy_(dst, src)
        self.loss_fn.last_stats = stats
        return loss, stats


# ------------------------------------------------------------------------- main loop
@locks_output("out_dir", "train")   # one writer per run folder
def pretrain(cfg: SimCLRConfig | dict, out_dir: str | os.PathLike, *,
             stop_after: int | None = None,
             on_step: Callable[[int, int], None] | None = None,
             audit: Auditor | None = None) -> dict[str, Any]:
    """Run (or resume) SimCLR pretraining; write the files listed in the module docstring.

    Args:
        cfg: a :class:`SimCLRConfig` or a dict of its keys (unknown keys raise ``ValueError``).
        out_dir: output folder; an existing ``checkpoint.pt`` there is resumed.
        stop_after: stop once this many epochs are done (as if the run were killed after
            that epoch's checkpoint); no ``encoder.pt``/``train.json`` is written then.
        on_step: called as ``on_step(epoch, step)`` (1-based, within the epoch) after every
            optimiser step (monitoring; the tests send a signal from it).
        audit: the run's training audit (:mod:`weince.train.audit`; None: an
            :class:`~weince.train.audit.Auditor` with ``cfg.keep_states``); a
            :class:`~weince.train.audit.Replay` replays one audit segment instead.

    Returns:
        The summary also written to ``train.json`` (``{"stopped_at": epoch}`` when stopped
        early).

    Raises:
        weince.train.preempt.Preempted: on ``SIGTERM`` (SLURM's preemption or time-limit
            signal): ``checkpoint.pt`` was written after the step in flight, with the
            position in the epoch; the next call resumes there with the same data order
            and random state (the process exits with 143).
    """
    with PreemptionGuard() as guard:
        cfg = complete_config(cfg)
        if cfg.threads:
            torch.set_num_threads(int(cfg.threads))
        job = _Pretraining(cfg, TrainingRun(out_dir, cfg.device, guard), audit)
        done = _finished_run(job.run.out, job.cfg_dict)
        if done is not None:        # finished before (its checkpoint removed): not retrained,
            return done             # and its data set is not loaded
        job.load_data()
        job.build()
        job.resume()
        job.wrap()
        end_epoch = cfg.epochs if stop_after is None else min(cfg.epochs, int(stop_after))
        job.start_clock()
        for epoch in range(job.start_epoch, end_epoch):
            job.train_epoch(epoch, end_epoch, on_step)
        return job.finish(end_epoch)


class _Pretraining:
    """The state of one SimCLR run, built in the named steps :func:`pretrain` calls in
    order (hardware, data, model, resume, wrappers, epochs, summary)."""

    def __init__(self, cfg: SimCLRConfig, run: TrainingRun, audit: Auditor | None = None
                 ) -> None:
        self.cfg, self.run = cfg, run
        info = run.info
        self.audit = audit or Auditor(run.out, cfg.keep_states, main=info.is_main)
        dev, ws = info.device, info.world_size
        if cfg.batch_size % ws:
            raise ValueError(f"batch_size={cfg.batch_size} must be divisible by the number of "
                             f"processes ({ws})")
        self.dev, self.ws, self.rank = dev, ws, info.rank
        self.local_bs = cfg.batch_size // ws
        self.cuda = cuda = dev.type == "cuda"
        self.use_amp = bool(cfg.amp and cuda)
        self.channels_last = cuda if cfg.channels_last is None else bool(cfg.channels_last)
        if cuda:
            torch.backends.cudnn.benchmark = True      # fixed shapes: pick the fastest kernels
            # TF32 float32 matmuls only as an option (official runs: PyTorch's default, full
            # float32 matmuls; cuDNN convolutions keep PyTorch's default, TF32 on Ampere or
            # newer, in both cases: train.json's tf32_cudnn_conv and provenance record it)
            torch.set_float32_matmul_precision("high" if cfg.tf32 else "highest")
        self.cfg_dict = to_dict(cfg)
        self.aug = build_augment(cfg.dataset, **{"image_size": cfg.image_size, **cfg.aug_kwargs})
        self.cfg_dict["norm_mean"], self.cfg_dict["norm_std"] = self.aug.mean, self.aug.std
        self.show = progress_enabled(cfg.progress) and info.is_main

    def load_data(self) -> None:
        """The training split (its seeded subset), full batches per epoch."""
        cfg = self.cfg
        train = load_vision(cfg.dataset, cfg.data_root, cfg.train_split, download=cfg.download)
        sub = subset_indices(len(train), cfg.max_train_images)
        if sub is not None:
            train = train.subset(sub)
        self.train, self.n_train = train, len(train)
        self.steps_per_epoch = self.n_train // cfg.batch_size
        if self.steps_per_epoch < 1:
            raise ValueError(f"{cfg.dataset}/{cfg.train_split} has {self.n_train} images, fewer "
                             f"than one batch of {cfg.batch_size}; lower batch_size")
        self.images = train.images.to(self.dev) if cfg.aug == "batch" else train.images

    def build(self) -> None:
        """Model, loss, optimiser, schedule and generators (the same init on every rank:
        seeded before building)."""
        cfg, dev = self.cfg, self.dev
        torch.manual_seed(cfg.seed)
        random.seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        assert cfg.image_size is not None and cfg.channels is not None   # complete_config set them
        model = build_simclr_model(cfg.backbone, cfg.image_size, cfg.channels,
                                   hidden_dim=cfg.proj_hidden, out_dim=cfg.proj_dim,
                                   batch_norm=cfg.proj_batch_norm,
                                   conv1_init=cfg.conv1_init).to(dev)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model: nn.Module = model   # wrap() puts DDP around it under torchrun
        self.loss_fn = loss_modules.build_loss(cfg.loss, tau=cfg.tau, **cfg.loss_kwargs).to(dev)
        self.opt = build_optimizer(cfg, model)
        self.sched = build_scheduler(cfg, self.opt, self.steps_per_epoch)
        self.audit.begin(self.cfg_dict, cfg.epochs * self.steps_per_epoch, self.steps_per_epoch)
        self.shuffle_gen = torch.Generator().manual_seed(cfg.seed)
        self.aug_gen = torch.Generator(device=dev).manual_seed(cfg.seed * 1000 + 1 + self.rank)

    def resume(self) -> None:
        """Continue from ``checkpoint.pt`` when there is one (at an epoch's end or, after a
        signal, inside an epoch), then open the log."""
        run, dev = self.run, self.dev
        self.start_epoch, self.wall_before, self.resume_in_epoch = 0, 0.0, None
        log_records: list[dict] = []
        self.ckpt = ckpt = self.audit.start_state(
            self.cfg_dict, lambda: self.training_state(0, None, self.shuffle_gen.get_state())
        ) or run.load_checkpoint(
            map_location="cpu", remake="re-run `weince pretrain` (the pretrain rule): it starts "
                                       "over from epoch 0")
        if ckpt is not None:
            _check_resumable(ckpt.get("cfg", {}), self.cfg_dict, run.out)
            check_resume_device(ckpt.get("device"), dev, run.checkpoint_path)
            self.model.load_state_dict(ckpt["model"])
            self.opt.load_state_dict(ckpt["optimizer"])
            self.sched.load_state_dict(ckpt["scheduler"])
            self.loss_fn.load_state_dict(ckpt["loss"])
            restore_rng(ckpt["rng"], dev)
            self.shuffle_gen.set_state(ckpt["shuffle_gen"])
            states = ckpt.get("aug_gen", [])
            if len(states) == self.ws:
                restore_generator(self.aug_gen, states[self.rank], run.checkpoint_path)
            self.start_epoch = int(ckpt["epoch"])
            self.resume_in_epoch = ckpt.get("in_epoch")  # written mid-epoch (SIGTERM)
            run.preemptions = list(ckpt.get("preempted", []))
            log_records = list(ckpt.get("log", []))
            self.wall_before = float(ckpt.get("wall_s", 0.0))
            self.audit.restore(ckpt.get("audit"))
        run.open_log(log_records, tensorboard=self.cfg.tensorboard)

    def wrap(self) -> None:
        """DDP and SyncBatchNorm under torchrun, ``torch.compile`` of the model or of the
        whole step, the per-image data set."""
        cfg, info = self.cfg, self.run.info
        model = self.model
        if info.distributed:
            if self.cuda and cfg.sync_bn:
                model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
            model = nn.parallel.DistributedDataParallel(
                model, device_ids=[self.dev.index] if self.cuda else None)
        self.model = model
        self.fwd = torch.compile(model) if cfg.compile else model
        self.step_fn = None
        if cfg.compile_step is not None:
            if info.distributed:
                raise ValueError("compile_step runs single-process only; set compile_step: "
                                 "null for torchrun")
            self.step_fn = CompiledStep(model, self.loss_fn, self.opt, self.aug,
                                        use_amp=self.use_amp, channels_last=self.channels_last,
                                        mode=cfg.compile_step, forward=cfg.forward)
        if cfg.aug == "per_image":
            self.per_image = PerImageTwoViews(self.train.images, self.train.labels, self.aug)
        self.audit.prepare(self)    # a replay in float64 converts here

    def start_clock(self) -> None:
        self.t_run = time.perf_counter()
        self.last: dict[str, Any] = {}
        self.run.start_timer(self.cfg.timing_warmup)  # step time + peak memory (forecast)
        if self.ckpt is None and self.audit.wants(0):   # an audit segment from the start
            self.audit.record(0, lambda: self.training_state(0, None, self.shuffle_gen.get_state()))

    def training_state(self, epoch: int, step: int | None, shuffle_state: torch.Tensor,
                       stats: EpochStats | None = None) -> dict[str, Any]:
        """What resume uses, at ``epoch`` epochs done (``step``: steps done inside the next
        one; ``shuffle_state``: the generator that epoch's order is drawn from): the audit's
        state (:mod:`weince.train.audit`; every rank gathers its generator)."""
        aug_states = self.run.gather(self.aug_gen.get_state())
        state = dict(model=unwrap_model(self.model).state_dict(),
                     optimizer=self.opt.state_dict(), scheduler=self.sched.state_dict(),
                     loss=self.loss_fn.state_dict(), rng=rng_state(self.dev),
                     device=str(self.dev), shuffle_gen=shuffle_state, aug_gen=aug_states,
                     epoch=epoch, cfg=self.cfg_dict)
        if step is not None:
            state["in_epoch"] = {"step": step, "epoch_s": 0.0,
                                 "stats": (stats or EpochStats()).state()}
        return state

    def audit_after(self, epoch: int, step: int, epoch_shuffle: torch.Tensor,
                    stats: EpochStats) -> None:
        """The audit's look at the state after ``step`` steps of epoch ``epoch`` (0-based)."""
        done = epoch * self.steps_per_epoch + step
        if not self.audit.wants(done):
            return
        if step == self.steps_per_epoch:   # an epoch's end: the next epoch's order is next
            self.audit.record(done, lambda: self.training_state(
                epoch + 1, None, self.shuffle_gen.get_state()))
        else:
            self.audit.record(done, lambda: self.training_state(epoch, step, epoch_shuffle,
                                                                stats))

    def write_checkpoint(self, epochs_done: int, shuffle_state: torch.Tensor, **extra) -> None:
        """checkpoint.pt (rank 0; every rank takes part in gathering the generators):
        ``shuffle_gen`` is the state the epoch after ``epochs_done`` draws its order from."""
        run = self.run
        # every rank's augmentation generator, so a resumed multi-GPU run continues exactly
        aug_states = run.gather(self.aug_gen.get_state())
        run.save_checkpoint(lambda: dict(
            model=unwrap_model(self.model).state_dict(), optimizer=self.opt.state_dict(),
            scheduler=self.sched.state_dict(), loss=self.loss_fn.state_dict(),
            rng=rng_state(self.dev), device=str(self.dev), shuffle_gen=shuffle_state,
            aug_gen=aug_states, epoch=epochs_done, log=run.log.records, cfg=self.cfg_dict,
            wall_s=self.wall_before + time.perf_counter() - self.t_run,
            preempted=run.preemptions, audit=self.audit.records(), **extra))

    def epoch_batches(self, epoch: int):
        """This epoch's batches of this rank (minus the steps done before a mid-epoch
        stop): ``(source, skip, done_s, stats, epoch_shuffle)``."""
        cfg, rank = self.cfg, self.rank
        stats = EpochStats()
        epoch_shuffle = self.shuffle_gen.get_state()   # this epoch's order is drawn from it
        perm = torch.randperm(self.n_train, generator=self.shuffle_gen)
        spe = self.steps_per_epoch
        batches = perm[:spe * cfg.batch_size].view(spe, cfg.batch_size)
        local = batches[:, rank * self.local_bs:(rank + 1) * self.local_bs]
        skip, done_s = 0, 0.0   # resumed mid-epoch: the same order, minus the steps done
        if self.resume_in_epoch is not None and epoch == self.start_epoch:
            skip, done_s = int(self.resume_in_epoch["step"]), float(self.resume_in_epoch["epoch_s"])
            stats.load_state(self.resume_in_epoch["stats"], self.dev)
            local = local[skip:]
        if cfg.aug == "per_image":
            loader_gen = torch.Generator().manual_seed(
                int(torch.randint(0, 2**62, (1,), generator=self.shuffle_gen)) + rank)
            source: torch.utils.data.DataLoader | torch.Tensor = torch.utils.data.DataLoader(
                self.per_image, batch_sampler=local.tolist(), num_workers=cfg.num_workers,
                generator=loader_gen, persistent_workers=False, pin_memory=self.cuda)
        else:
            source = local.to(self.dev) if self.cuda else local
        return source, skip, done_s, stats, epoch_shuffle

    def step(self, item) -> torch.Tensor:
        """One optimiser step (compiled or eager) and the schedule's step; the detached loss."""
        cfg = self.cfg
        if self.step_fn is not None:
            loss, _ = self.step_fn(self.images[item], self.aug_gen)
        else:
            views = None
            if cfg.aug == "per_image":
                views = (item[0].to(self.dev, non_blocking=True),
                         item[1].to(self.dev, non_blocking=True))
            loss = eager_step(self.model, self.loss_fn, self.opt, self.aug,
                              None if views else self.images[item], self.aug_gen,
                              use_amp=self.use_amp, channels_last=self.channels_last,
                              fwd=self.fwd, distributed=self.run.info.distributed,
                              forward=cfg.forward, views=views)
        self.sched.step()
        return loss

    def train_epoch(self, epoch: int, end_epoch: int, on_step) -> None:
        cfg, run, spe = self.cfg, self.run, self.steps_per_epoch
        self.model.train()
        self.loss_fn.train()
        source, skip, done_s, stats, epoch_shuffle = self.epoch_batches(epoch)
        if self.cuda:
            torch.cuda.synchronize(self.dev)
        t0 = time.perf_counter() - done_s
        bar = progress_bar(source, show=self.show, total=spe, initial=skip, leave=False,
                           desc=f"epoch {epoch + 1}/{cfg.epochs}")
        for step, item in enumerate(bar, start=skip):
            run.timer.start()
            loss = self.step(item)
            run.timer.stop()
            # every loss of the registry keeps its last_stats dict
            last = cast(dict[str, torch.Tensor], self.loss_fn.last_stats)
            stats.update({"loss": loss.detach(), **last})
            self.audit_after(epoch, step + 1, epoch_shuffle, stats)
            if on_step is not None:
                on_step(epoch + 1, step + 1)
            if step + 1 < spe and run.should_stop():
                bar.close()
                run.note_preemption(epoch=epoch + 1, step=step + 1)
                self.write_checkpoint(epoch, epoch_shuffle, in_epoch={
                    "step": step + 1, "stats": stats.state(),
                    "epoch_s": time.perf_counter() - t0})
                raise run.preempted(f"checkpoint.pt at epoch {epoch + 1}, step {step + 1} "
                                    f"of {spe}")
            if self.show and (step % 10 == 0 or step == spe - 1):
                self.show_progress(bar, stats, step, t0)
        bar.close()
        if self.cuda:
            torch.cuda.synchronize(self.dev)
        self.end_epoch(epoch, end_epoch, stats, time.perf_counter() - t0)

    def show_progress(self, bar, stats: EpochStats, step: int, t0: float) -> None:
        m = stats.means()
        el = time.perf_counter() - t0
        post = {"loss": f"{m['loss']:.4f}",
                "img/s": f"{(step + 1) * self.cfg.batch_size / max(el, 1e-9):.0f}"}
        if "lambda_mean" in m:
            post["lambda"] = f"{m['lambda_mean']:.3f}"
        bar.set_postfix(post)

    def end_epoch(self, epoch: int, end_epoch: int, stats: EpochStats, epoch_s: float) -> None:
        """The divergence check, the epoch's log record, the checkpoint; a stop signal
        that arrived during the epoch's last step ends the run here."""
        cfg, run, spe = self.cfg, self.run, self.steps_per_epoch
        means = stats.means()
        _check_diverged(stats, self.model, cfg, epoch, spe, run.out)  # before any write
        rec = {"epoch": epoch + 1, **means,
               "img_s": spe * cfg.batch_size / max(epoch_s, 1e-9),
               "lr": self.opt.param_groups[0]["lr"], "epoch_s": epoch_s,
               **self.audit.epoch_end(unwrap_model(self.model).state_dict())}
        self.last = rec
        if run.is_main:
            run.log.append(rec)
            if self.show:
                progress_note(f"epoch {epoch + 1}/{cfg.epochs}: loss {means['loss']:.4f} "
                              f"{rec['img_s']:.0f} img/s")
        stopping = epoch + 1 < end_epoch and run.should_stop()
        if stopping:
            run.note_preemption(epoch=epoch + 1, step=spe)
        self.write_checkpoint(epoch + 1, self.shuffle_gen.get_state())
        if stopping:
            raise run.preempted(f"checkpoint.pt at the end of epoch {epoch + 1}")

    def finish(self, end_epoch: int) -> dict[str, Any]:
        """``encoder.pt`` and ``train.json`` once every epoch is done (rank 0)."""
        cfg, run = self.cfg, self.run
        wall_s = self.wall_before + time.perf_counter() - self.t_run
        done = end_epoch if end_epoch > self.start_epoch else self.start_epoch
        if done < cfg.epochs:
            return {"stopped_at": done}
        summary: dict[str, Any] = {}
        if run.is_main:
            enc = save_encoder(run.out / "encoder.pt",
                               cast(SimCLRModel, unwrap_model(self.model)), self.cfg_dict)
            # the encoder's identity, which every job reading it checks (weince.utils.digest)
            summary = {**self.summary(wall_s), "encoder_sha256": sha256_file(enc)}
        # the resume state goes now unless keep_checkpoint (its size: docs/cluster.md)
        run.finish(summary, self.cfg_dict, seed=cfg.seed, keep_checkpoint=cfg.keep_checkpoint)
        return summary

    def summary(self, wall_s: float) -> dict[str, Any]:
        cfg, run, cuda = self.cfg, self.run, self.cuda
        records = run.log.records
        rie = self.resume_in_epoch
        return {
            "dataset": cfg.dataset, "backbone": cfg.backbone, "loss": cfg.loss,
            "seed": cfg.seed, "epochs": cfg.epochs, "n_train": self.n_train,
            "batch_size": cfg.batch_size, "steps_per_epoch": self.steps_per_epoch,
            "final": records[-1] if records else self.last,
            "img_s_mean": float(np.mean([r["img_s"] for r in records])) if records else None,
            "wall_s": wall_s,
            "resumed_from_epoch": self.start_epoch if self.ckpt is not None else None,
            "resumed_in_epoch_at_step": int(rie["step"]) if rie is not None else None,
            "preempted": run.preemptions,
            "device": str(self.dev), "world_size": self.ws, "amp_bf16": self.use_amp,
            "tf32_matmul": bool(cuda and cfg.tf32),
            "tf32_cudnn_conv": bool(cuda and torch.backends.cudnn.allow_tf32),
            "forward": cfg.forward,
            "channels_last": self.channels_last, "compile": cfg.compile,
            "compile_step": cfg.compile_step,
            "n_params": sum(p.numel() for p in unwrap_model(self.model).parameters()),
            "torch_threads": torch.get_num_threads(),
            "augment": self.aug.config(),
            "step_timing": run.timer.result(),  # steps of this process after timing_warmup
            "audit": self.audit.summary(),   # the audit segments' digests (weince.train.audit)
        }


def _check_diverged(stats: EpochStats, model: nn.Module, cfg: SimCLRConfig, epoch: int,
                    steps_per_epoch: int, out: Path) -> None:
    """Raise :class:`DivergedError` when the epoch had a non-finite loss or left non-finite
    weights. Called once per epoch, where the loop syncs anyway (the loss sums are already
    read); the per-step bookkeeping stays on the device (:class:`EpochStats`)."""
    bad_step = stats.bad_step()
    params_ok = weights_finite(model)
    if bad_step < 0 and params_ok:
        return
    where = (f"non-finite loss at epoch {epoch + 1}, step {bad_step + 1} of {steps_per_epoch}"
             if bad_step >= 0 else f"non-finite weights after epoch {epoch + 1}")
    ckpt = out / "checkpoint.pt"
    kept = (f"the last good checkpoint ({ckpt}, epoch {epoch}) is kept" if epoch > 0 and
            ckpt.exists() else "no checkpoint was written")
    kept += " and nothing of this epoch was saved"
    raise diverged(
        "SimCLR", where, f"loss {cfg.loss}, lr {cfg.lr:g}, tau {cfg.tau:g}, batch "
        f"{cfg.batch_size}, optimizer {cfg.optimizer}", kept,
        f"Likely cause: a learning rate too high for this optimizer/batch (or no warmup for "
        f"LARS), else a very small tau or bf16 overflow (try amp: false). Lower lr; to "
        f"restart with a changed config delete {ckpt} or use another --out folder.")


def _finished_run(out: Path, cfg_dict: dict[str, Any]) -> dict[str, Any] | None:
    """The summary of a run already finished in ``out`` with this config (``encoder.pt`` and
    ``train.json`` there, its checkpoint removed), or None; a different config is refused as
    a checkpoint's would be."""
    summary_path = out / "train.json"
    if (out / "checkpoint.pt").exists() or not (out / "encoder.pt").exists() \
            or not summary_path.exists():
        return None
    summary = load_result(summary_path)
    saved = (summary.get("provenance") or {}).get("config") or {}
    now = json.loads(json.dumps(cfg_dict, default=str))   # as train.json stored it
    _check_resumable(saved, now, out, source=summary_path)
    return {**summary, "already_finished": True}


def _check_resumable(saved: dict[str, Any], now: dict[str, Any], out: Path,
                     source: Path | None = None) -> None:
    free = set(RUNTIME_KEYS)
    if now.get("schedule") == "none" and now.get("warmup_epochs", 0) == 0:
        free.add("epochs")      # a constant rate: more epochs continue the same run
    check_same_config(saved, now, source or out / "checkpoint.pt", free=free)
