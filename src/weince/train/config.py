"""The SimCLR pretraining's options, importable without torch: the one source of their
defaults (the training loop, the workflow's stage configs and the protocol table read them).

    from weince.train.config import SimCLRConfig
    SimCLRConfig().epochs        # 100: the official protocol (docs/protocol.md)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["SimCLRConfig", "RUNTIME_KEYS"]


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
    dataset: str = "digits"             # a name of weince.data.vision.DATASETS
    data_root: str | None = None     # None: $WEINCE_DATA or ./data (offline sets ignore it)
    download: bool = False              # no effect: loaders never download (weince fetch-data)
    train_split: str = "train"          # e.g. "train+unlabeled" for STL-10
    max_train_images: int | None = None  # seeded subset (seed 0: the same for every run)
    image_size: int | None = None    # view size; None: the data set's size
    channels: int | None = None      # None: the data set's channels (must match if given)
    aug: Literal["batch", "per_image"] = "batch"  # on-device batched views / per-image CPU path
    aug_kwargs: dict = field(default_factory=dict)  # overrides of weince.data.augment.build_augment
    num_workers: int = 0                # DataLoader workers (aug: per_image only)
    # model
    backbone: str = "smallcnn"          # resnet18 | resnet50 | vit_s | smallcnn
    proj_dim: int = 64                  # projection output (docs/protocol.md)
    proj_hidden: int | None = None   # None: the backbone's feature width (official code)
    proj_batch_norm: bool = False
    conv1_init: Literal["default", "kaiming"] = "default"  # ResNet stem conv: PyTorch's default
    #                                     (official) or Kaiming normal (fan_out, as torchvision)
    forward: Literal["per_view", "joint"] = "per_view"  # one forward per view (official; BN
    #                                     per view) or one over both views (BN over 2N; faster)
    # loss
    loss: str = "infonce"               # infonce | weince | weince_recipe | infonce_topm | ...
    tau: float = 0.5
    loss_kwargs: dict = field(default_factory=dict)  # e.g. {margin: 2, kappa_rho: 10}
    # optimisation
    batch_size: int = 256               # global batch (all ranks together)
    epochs: int = 100
    optimizer: Literal["adam", "lars"] = "adam"
    lr: float = 3e-4
    weight_decay: float = 0.0           # official runs: torch.optim.Adam(params, lr=3e-4)
    momentum: float = 0.9               # LARS only
    schedule: Literal["none", "cosine"] = "none"  # per-step cosine decay to 0 after warmup
    warmup_epochs: int = 0
    seed: int = 0
    # hardware
    device: str = "auto"                # auto | cpu | cuda | cuda:N
    amp: bool = False                   # bf16 autocast, CUDA only (official: float32)
    tf32: bool = False                  # TF32 float32 matmuls on CUDA (official: off)
    channels_last: bool | None = None  # None: on for CUDA, off for CPU
    compile: bool = False               # torch.compile the model
    # torch.compile(fullgraph=True) the whole step (views, forward, loss, gradients, Adam
    # update) as one graph: None (eager; the default, best on CPU) or a torch.compile mode:
    # "default", "reduce-overhead" (CUDA graphs) or "max-autotune" (paper profile on GPUs)
    compile_step: str | None = None
    sync_bn: bool = True                # SyncBatchNorm in multi-GPU runs
    threads: int | None = None       # torch.set_num_threads on CPU (None: torch default)
    progress: bool | None = None     # tqdm bar; None: only on a TTY or WEINCE_PROGRESS=1
    timing_warmup: int = 1              # steps not counted in train.json's step_timing
    keep_checkpoint: bool = False       # keep checkpoint.pt after a finished run
    tensorboard: bool = False           # TensorBoard event files beside train_log.jsonl


# Keys that never change a run's result (where and how fast it runs, what it prints, what it
# keeps): a checkpoint resumes under other values of these, and the workflow leaves them out
# of what decides a rerun.
RUNTIME_KEYS = frozenset({"progress", "timing_warmup", "num_workers", "threads", "compile",
                          "compile_step", "data_root", "download", "keep_checkpoint",
                          "tensorboard"})
