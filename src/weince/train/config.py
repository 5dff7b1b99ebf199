"""The training loops' options (SimCLR pretraining, SimCSE) and the training step's timing
(:mod:`weince.timing`), importable without torch: the one source of their types, defaults and
ranges (the loops, the workflow's stage configs and the protocol table read them; the workflow
config schema's ``$defs/pretrain``, ``text.simcse`` and ``timing.config`` blocks are
generated from them, :mod:`weince.utils.settings`).

    from weince.train.config import SimCLRConfig
    SimCLRConfig().epochs        # 100: the official protocol (docs/protocol.md)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from weince.utils.settings import bound_problems, setting

__all__ = ["SimCLRConfig", "SimCSEConfig", "TimingConfig", "MODES", "RUNTIME_KEYS",
           "AUDIT_POINTS", "SEGMENT_STEPS", "audit_states_per_run"]

# The training audit (weince.train.audit): segments per run and optimiser steps per segment.
AUDIT_POINTS = 2
SEGMENT_STEPS = 2


def audit_states_per_run(keep_states: str, epochs: int = 0) -> int:
    """At most how many training states a run keeps in ``audit/`` (the disk estimate):
    the start and end of each segment, plus one per epoch with ``epochs``."""
    if keep_states == "none":
        return 0
    return 2 * AUDIT_POINTS + (int(epochs) if keep_states == "epochs" else 0)


@dataclass
class SimCLRConfig:
    """Options of :func:`pretrain` (YAML keys of ``weince pretrain --config``).

    Defaults are the official protocol (``docs/protocol.md``: batch 256, 100 epochs, Adam 3e-4
    without weight decay,
    tau 0.5, 64-d projection, float32, one forward per view, PyTorch's default ``conv1``
    init) except the data set and backbone, which default to the offline CPU setting
    (``digits``, ``smallcnn``). Cheaper options: ``amp``, ``tf32``, ``forward: joint``.
    """

    # data
    # a name of weince.data.vision.DATASETS (per_run: each run's own, in its rerun trigger)
    dataset: str = setting("digits", ref="dataset", per_run=True)
    data_root: str | None = None        # None: $WEINCE_DATA or ./data (offline sets ignore it)
    download: bool = False              # no effect: loaders never download (weince fetch-data)
    train_split: str = "train"          # e.g. "train+unlabeled" for STL-10
    # a seeded subset (seed 0: the same for every run)
    max_train_images: int | None = setting(None, ge=1)
    image_size: int | None = setting(None, ge=1)  # view size; None: the data set's size
    channels: int | None = setting(None, ge=1)  # None: the data set's (must match if given)
    aug: Literal["batch", "per_image"] = "batch"  # on-device batched views / per-image CPU path
    aug_kwargs: dict = setting(factory=dict)  # overrides of weince.data.augment.build_augment
    num_workers: int = setting(0, ge=0)  # DataLoader workers (aug: per_image only)
    # model
    backbone: str = setting("smallcnn", ref="backbone", per_run=True)  # resnet18 | vit_s | ...
    proj_dim: int = setting(64, ge=1)   # projection output (docs/protocol.md)
    proj_hidden: int | None = setting(None, ge=1)  # None: the backbone's width (official)
    proj_batch_norm: bool = False
    conv1_init: Literal["default", "kaiming"] = "default"  # ResNet stem conv: PyTorch's default
    #                                     (official) or Kaiming normal (fan_out, as torchvision)
    forward: Literal["per_view", "joint"] = "per_view"  # one forward per view (official; BN
    #                                     per view) or one over both views (BN over 2N; faster)
    # loss
    loss: str = setting("infonce", ref="loss", per_run=True)  # infonce | weince | ...
    tau: float = setting(0.5, gt=0, le=10)
    loss_kwargs: dict = setting(factory=dict, per_run=True)  # e.g. {margin: 2, kappa_rho: 10}
    # optimisation
    batch_size: int = setting(256, ge=2)  # global batch (all ranks); 2+: a batch has negatives
    epochs: int = setting(100, ge=1)
    optimizer: Literal["adam", "lars"] = "adam"
    lr: float = setting(3e-4, gt=0, le=10)
    weight_decay: float = setting(0.0, ge=0, le=1)  # official: torch.optim.Adam(params, lr=3e-4)
    momentum: float = setting(0.9, ge=0, lt=1)  # LARS only
    schedule: Literal["none", "cosine"] = "none"  # per-step cosine decay to 0 after warmup
    warmup_epochs: int = setting(0, ge=0)  # fewer than epochs (weince.train.simclr.complete_config)
    seed: int = setting(0, ge=0, per_run=True)
    # hardware
    device: str = "auto"                # auto | cpu | cuda | cuda:N
    amp: bool = False                   # bf16 autocast, CUDA only (official: float32)
    tf32: bool = False                  # TF32 float32 matmuls on CUDA (official: off)
    channels_last: bool | None = None   # None: on for CUDA, off for CPU
    compile: bool = False               # torch.compile the model
    # torch.compile(fullgraph=True) the whole step (views, forward, loss, gradients, Adam
    # update) as one graph: None (eager; the default, best on CPU) or a torch.compile mode:
    # "default", "reduce-overhead" (CUDA graphs) or "max-autotune" (paper profile on GPUs)
    compile_step: Literal["default", "reduce-overhead", "max-autotune"] | None = None
    sync_bn: bool = True                # SyncBatchNorm in multi-GPU runs
    threads: int | None = setting(None, ge=1)  # torch.set_num_threads on CPU (None: torch's)
    progress: bool | None = None        # tqdm bar; None: only on a TTY or WEINCE_PROGRESS=1
    timing_warmup: int = setting(1, ge=0)  # steps not counted in train.json's step_timing
    keep_checkpoint: bool = False       # keep checkpoint.pt after a finished run
    tensorboard: bool = setting(False, description="TensorBoard event files beside "
                                "train_log.jsonl (needs the tensorboard package)")
    keep_states: Literal["none", "audit", "epochs"] = setting(
        "none", ref="keep_states", description="training states kept in audit/ of the run folder "
        "(weince.train.audit): none (digests only), audit (the start and end of each audit "
        "segment, what `weince bundle --with-audit` ships) or epochs (also every epoch end)")



@dataclass
class SimCSEConfig:
    """Options of :func:`weince.train.simcse.train_simcse` (defaults: SimCSE unsup-BERT
    recipe, embedded data)."""

    # "minilm" (shipped MiniLM-L6), a folder, bert-base-uncased (per_run: set for each run)
    model: str = setting("minilm", per_run=True)
    model_name: str | None = setting(None, per_run=True)  # the run's model (None: `model`)
    # name | local copy | model_paths (a stand-in: scale model)
    model_source: Literal["name", "local copy", "model_paths"] = setting("name", per_run=True)
    train_data: str = "synthetic"    # "synthetic" or the path of wiki1m_for_simcse.txt
    n_train: int = setting(0, ge=0)  # file: first n (0: all); synthetic: n (0: 2000)
    sts_data: str = "synthetic"      # "synthetic" or an STS-B root (weince.data.text.load_stsb)
    n_sts: int = setting(500, ge=0)  # synthetic pairs per split (ignored for real STS-B)
    data_seed: int = setting(0, ge=0)  # seed of the synthetic corpus and pairs (fixed)
    loss: str = setting("infonce", ref="loss", per_run=True)  # a name of weince.losses.LOSSES
    loss_kwargs: dict[str, Any] = setting(factory=dict)  # extra loss options (margin, ...)
    tau: float = setting(0.05, gt=0, le=10)  # temperature (SimCSE)
    batch_size: int = setting(64, ge=2)  # sentences per step (each encoded twice); 2+: negatives
    lr: float = setting(3e-5, gt=0, le=10)  # AdamW peak learning rate, linear decay to 0
    weight_decay: float = setting(0.0, ge=0, le=1)  # AdamW (HF Trainer default, as SimCSE)
    warmup_steps: int = setting(0, ge=0)  # linear warmup steps (SimCSE: none)
    grad_clip: float = setting(1.0, ge=0, le=1000)  # max gradient norm (HF default); 0: off
    max_length: int = setting(32, ge=1)  # training truncation in tokens (SimCSE)
    epochs: int = setting(1, ge=1)   # passes over the corpus
    max_steps: int = setting(0, ge=0)  # > 0: stop after this many steps (schedule follows it)
    eval_every: int = setting(125, ge=1)  # dev evaluation + checkpoint interval in steps
    eval_at_start: bool = True       # log the untrained model's dev Spearman (not a candidate)
    eval_batch_size: int = setting(128, ge=1)  # sentences per forward pass in evaluation
    eval_max_length: int = setting(0, ge=0)  # evaluation truncation (0: none up to 512)
    log_every: int = setting(10, ge=1)  # steps per train_log.jsonl record (interval means)
    mlp: bool = True                 # the SimCSE MLP over [CLS] in training
    dropout: float | None = setting(None, ge=0, lt=1)  # every dropout (None: the model's)
    seed: int = setting(42, ge=0, per_run=True)  # model init (MLP), dropout and data order
    offline: bool = True             # set HF_HUB_OFFLINE=1: never download
    device: str = "auto"             # "auto" (cuda if available), "cpu", "cuda", "cuda:1"
    amp: bool = False                # bfloat16 autocast of the encoder on CUDA
    keep_checkpoint: bool = False    # keep checkpoint.pt after a finished run
    tensorboard: bool = setting(False, description="TensorBoard event files beside "
                                "train_log.jsonl (needs the tensorboard package)")
    keep_states: Literal["none", "audit", "epochs"] = setting(
        "none", ref="keep_states", description="training states kept in audit/ of the run folder "
        "(weince.train.audit): none (digests only), audit (the start and end of each audit "
        "segment, what `weince bundle --with-audit` ships) or epochs (also every epoch end)")

    def validate(self, bounds: bool = True) -> None:
        """Refuse a value outside its range (``bounds``: skipped for a config typed from a
        checked dict), and what the types cannot say: a loss that is not registered, a loss
        that would gather across processes twice, a device that is not one."""
        import weince.losses as losses  # noqa: PLC0415 - the registry needs torch; the class not

        problems = bound_problems(self, "SimCSEConfig.") if bounds else []
        if problems:
            raise ValueError("; ".join(problems))
        if self.loss not in losses.LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; valid names: {sorted(losses.LOSSES)}")
        if "gather_distributed" in self.loss_kwargs:  # twice would repeat every process's rows
            raise ValueError("loss_kwargs.gather_distributed: the training loop already gathers "
                             "the embeddings of every process; remove the key from the config")
        if self.device != "auto" and not self.device.startswith(("cpu", "cuda")):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:i]', got {self.device!r}")


#: the loss-timing modes of TimingConfig.compile
MODES = ("eager", "compiled", "both")


@dataclass
class TimingConfig:
    """Options of ``weince timing`` (:mod:`weince.timing`) and of the workflow's timing
    rule (``timing.config``, whose schema block is generated from these fields)."""

    losses: list[str] = setting(factory=lambda: ["infonce", "weince", "weince_recipe"],
                                ref="loss")
    sizes: list[int] = setting(factory=lambda: [256, 512, 1024, 4096], ge=2)  # 2N, loss alone
    dim: int = setting(128, ge=1)       # embedding width d
    loss_reps: int = setting(30, ge=1)  # repetitions (each runs every loss once)
    warmup: int = setting(5, ge=0)
    backbone: str = setting("resnet18", ref="backbone")  # whole step; "" skips it
    image_size: int = setting(32, ge=1)
    channels: int = setting(3, ge=1)
    step_batch: int = setting(64, ge=1)  # images per view in the whole step (2 x step_batch)
    step_reps: int = setting(10, ge=1)  # timed repetitions per run
    # independent whole-step runs (fresh model, optimiser and batch each): the interval of
    # the overhead is across them, so it covers the machine's run-to-run variation
    runs: int = setting(5, ge=1, le=100)
    device: str = "auto"
    # bf16 autocast of the backbone on CUDA (ignored on CPU); the default is the paper
    # profile's pretraining precision, float32 (vision.pretrain.amp: false). The loss always
    # runs outside autocast on float32 embeddings, as in training (embed_views).
    amp: bool = False
    channels_last: bool = True
    # "eager", "compiled" (torch.compile of every loss module) or "both" (eager and compiled
    # timed side by side; the headline ratios are then the compiled ones). true/false are
    # read as "compiled"/"eager".
    compile: str | bool = "eager"
    tau: float = setting(0.5, gt=0, le=10)
    seed: int = setting(0, ge=0)
    n_boot: int = setting(2000, ge=0)

    def __post_init__(self):
        if isinstance(self.compile, bool):
            self.compile = "compiled" if self.compile else "eager"
        if self.compile not in MODES:
            raise ValueError(f"timing.config.compile must be one of {MODES} (or true/false), "
                             f"got {self.compile!r}")
        if not self.losses or self.losses[0] != "infonce":
            raise ValueError("the first loss of timing.config.losses is the baseline of the ratios "
                             f"and must be 'infonce', got {self.losses!r}")
        if self.loss_reps < 2 or self.step_reps < 2:
            raise ValueError("timing.config.loss_reps and step_reps must be >= 2 (paired ratios "
                             f"need repetitions), got {self.loss_reps}, {self.step_reps}")
        if self.runs < 1:
            raise ValueError(f"timing.config.runs must be >= 1 (2 or more give an interval "
                             f"across runs), got {self.runs}")
        bad = [n for n in self.sizes if int(n) < 4 or int(n) % 2]
        if bad:
            raise ValueError(f"timing.config.sizes are batch sizes 2N: even numbers >= 4, "
                             f"got {bad}")

    @property
    def modes(self) -> list[str]:
        return ["eager", "compiled"] if self.compile == "both" else [str(self.compile)]

# Keys that never change a run's result (where and how fast it runs, what it prints, what it
# keeps): a checkpoint resumes under other values of these, and the workflow leaves them out
# of what decides a rerun.
RUNTIME_KEYS = frozenset({"progress", "timing_warmup", "num_workers", "threads", "compile",
                          "compile_step", "data_root", "download", "keep_checkpoint",
                          "tensorboard", "keep_states"})
