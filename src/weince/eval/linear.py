"""Linear probe on frozen features (``docs/protocol.md``, the protocol behind claims C3-C5).

A multinomial logistic regression (one linear layer) on the frozen backbone features:
Adam, lr 3e-4, no weight decay, 100 epochs, batch 256, trained on the training part of a
*stratified* 80/20 train/validation split of the training set drawn with split seed 1 (the
same split for every probe seed), one probe seed (1); the **final** weights (after the last
epoch) are scored on validation and test, as the official ``linear_evaluation.py`` does.
Named options: ``select="best_epoch"`` scores the test set with the weights of the epoch
with the best validation accuracy instead; ``split_seed=None`` draws one split per probe
seed; ``seeds`` may name several probe seeds. Test labels never influence any choice.

All probe seeds train at once as a batch of independent linear layers (``torch.bmm``
over a leading seed axis; Adam is element-wise, so the seeds do not interact), which
keeps a 100-epoch probe on CIFAR-sized feature sets to seconds on a CPU.

    from weince.eval.linear import linear_probe
    res = linear_probe("features.pt")        # or the dict written by extract_features
    res["test_acc"]                          # {"mean", "std", "n", "values"} in percent

Command line: ``weince eval linear --features features.pt --out linear.json``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from weince.eval.config import LinearProbeConfig
from weince.utils import write_json
from weince.utils.checkpoint import load_torch_file, torch_threads
from weince.utils.config import as_config, to_dict
from weince.utils.device import resolve_device
from weince.utils.finite import check_finite
from weince.utils.predictions import linear_block
from weince.utils.runlock import locks_output
from weince.utils.summary import summary as summarize  # the one format

__all__ = ["linear_probe", "stratified_split", "summarize", "load_features", "features_of"]


def load_features(features: str | os.PathLike | dict) -> dict:
    """The feature dict written by :func:`weince.eval.features.extract_features`
    (given as the dict itself or the path of its torch file)."""
    source = "the feature dict"
    if isinstance(features, dict):
        feats = features
    else:
        path = Path(features)
        if not path.exists():
            raise FileNotFoundError(f"feature file {path} does not exist; make it with "
                                    f"`weince features --encoder ENCODER.pt --out {path}`")
        feats = load_torch_file(path, what="feature file", map_location="cpu",
                                remake="re-run `weince features` (the workflow's features "
                                       "rule) that writes it")
        source = str(path)
    for split in ("train", "test"):
        if not isinstance(feats, dict) or split not in feats or "labels" not in feats[split]:
            raise ValueError(f"{source} lacks '{split}' with 'labels'; expected the file "
                             f"written by `weince features`")
    check_finite(((f"{s}/{k}", v) for s in ("train", "test") for k, v in feats[s].items()),
                 source, "the encoder that made it diverged or is broken: re-run the pretrain "
                 "rule (lower lr), then the features rule")
    return feats


def features_of(feats: dict, split: str, feature: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The float features ``(N, D)`` named ``feature`` and the labels ``(N,)`` of one split
    (``"train"``/``"test"``) of a loaded feature file (:func:`load_features`)."""
    part = feats[split]
    if feature not in part:
        valid = sorted(k for k in part if k != "labels")
        raise ValueError(f"feature {feature!r} not in the feature file; valid: {valid}")
    x = torch.as_tensor(part[feature]).float()
    y = torch.as_tensor(part["labels"]).long()
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ValueError(f"{split}/{feature}: expected features (N, D) and labels (N,), "
                         f"got {tuple(x.shape)} and {tuple(y.shape)}")
    return x, y


def stratified_split(labels: torch.Tensor, val_frac: float, seed: int
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded stratified split of indices ``0..N-1`` into ``(train_idx, val_idx)``.

    Each class contributes ``round(val_frac * n_class)`` examples to validation (at least
    one when ``val_frac > 0`` and the class has two or more), so every seed gives splits
    of the same sizes. Both index tensors are sorted.
    """
    if not 0.0 <= val_frac < 1.0:
        raise ValueError(f"val_frac must be in [0, 1), got {val_frac}")
    labels = torch.as_tensor(labels).long()
    g = torch.Generator().manual_seed(int(seed))
    val_parts = []
    for c in torch.unique(labels).tolist():
        idx = torch.nonzero(labels == c).flatten()
        n_val = int(round(val_frac * len(idx)))
        if val_frac > 0 and len(idx) >= 2:
            n_val = min(max(n_val, 1), len(idx) - 1)
        perm = idx[torch.randperm(len(idx), generator=g)]
        val_parts.append(perm[:n_val])
    val = torch.cat(val_parts).sort().values if val_parts else torch.empty(0, dtype=torch.long)
    is_val = torch.zeros(len(labels), dtype=torch.bool)
    is_val[val] = True
    return torch.nonzero(~is_val).flatten(), val


class _Adam:
    """Adam (Kingma & Ba; the update of ``torch.optim.Adam`` with L2 ``weight_decay``).

    Written out because constructing any ``torch.optim`` optimiser imports
    ``torch._dynamo`` (about 2.5 s of CPU per process), which is most of the start-up of
    a ``weince eval linear`` call in the CPU workflow."""

    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1.0 - b1 ** self.t, 1.0 - b2 ** self.t
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad if not self.wd else p.grad.add(p, alpha=self.wd)
            m.lerp_(g, 1.0 - b1)
            v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
            denom = (v.sqrt() / math.sqrt(c2)).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / c1)


@torch.no_grad()
def _accuracy(W: torch.Tensor, b: torch.Tensor, X: torch.Tensor, y: torch.Tensor,
              chunk: int = 8192, preds: list[torch.Tensor] | None = None) -> torch.Tensor:
    """Accuracy in percent per seed. ``W`` (S, D, C), ``b`` (S, 1, C), ``X`` (S, N, D),
    ``y`` (N,) or (S, N). ``preds``, when given, receives the predicted labels (S, N)."""
    S, N = X.shape[0], X.shape[1]
    if N == 0:
        return torch.full((S,), float("nan"))
    yy = y.expand(S, N) if y.ndim == 1 else y
    correct = torch.zeros(S)
    for i in range(0, N, chunk):
        pred = (torch.bmm(X[:, i:i + chunk], W) + b).argmax(-1)
        correct += (pred == yy[:, i:i + chunk]).sum(1).cpu().float()
        if preds is not None:
            preds.append(pred.cpu())
    if preds is not None:
        preds[:] = [torch.cat(preds, 1)]
    return 100.0 * correct / N


_L = LinearProbeConfig   # the one source of the defaults below


def linear_probe(features: str | os.PathLike | dict, *, feature: str = _L.feature,
                 seeds: Sequence[int] = _L.seeds, epochs: int = _L.epochs, lr: float = _L.lr,
                 batch_size: int = _L.batch_size, val_frac: float = _L.val_frac,
                 split_seed: int | None = _L.split_seed, select: str = _L.select,
                 weight_decay: float = _L.weight_decay, standardize: bool = _L.standardize,
                 device: str = _L.device, progress: bool | None = _L.progress,
                 threads: int | None = _L.threads) -> dict[str, Any]:
    """Linear probe on frozen features (official protocol by default: final weights).

    Args:
        features: dict (or path) with ``train``/``test`` -> ``{feature: (N, D), "labels": (N,)}``.
        feature: which features to probe, ``"backbone"`` (``h``, the official protocol) or
            ``"head"`` (``z``).
        seeds: probe seeds; each fixes the initialisation and the minibatch order (and
            the split when ``split_seed`` is None).
        epochs, lr, batch_size, weight_decay: Adam training of the linear layer (the last
            partial batch of an epoch is kept).
        val_frac: fraction of each class of the training set held out for validation
            (official: 0.2).
        split_seed: seed of the stratified split, shared by every probe seed (official: 1);
            ``None``: each probe seed draws its own split.
        select: ``"final"`` (official): the weights after the last epoch are scored;
            ``"best_epoch"``: the weights of the epoch with the best validation accuracy
            (first on ties).
        standardize: z-score the features with the training-part mean/std (off by
            default: the official protocol probes raw features).
        device: where to train (``"cpu"`` or ``"cuda"``).
        threads: CPU threads for torch during the probe; ``None`` picks 1 for small
            problems (under 1e7 multiply-adds per step, e.g. digits/MNIST features: more
            threads only spin on such tiny matrices, 10x the CPU time on a busy machine)
            and leaves torch's setting otherwise.

    Returns:
        ``{"test_acc", "val_acc", "best_epoch"}`` summaries over seeds (accuracy in
        percent; ``test_acc`` and ``val_acc`` belong to the scored weights: the final ones,
        or the best validation epoch's), ``"per_seed"`` records and the settings used.
    """
    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"need epochs >= 1, batch_size >= 1, lr > 0; got {epochs}, "
                         f"{batch_size}, {lr}")
    if not 0.0 < val_frac < 1.0:
        raise ValueError(f"val_frac must be in (0, 1) (the validation split selects the grid "
                         f"point and, with select='best_epoch', the epoch), got {val_frac}")
    if select not in ("final", "best_epoch"):
        raise ValueError(f"select must be 'final' (official) or 'best_epoch', got {select!r}")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds must name at least one probe seed")
    feats = load_features(features)
    x_train, y_train = features_of(feats, "train", feature)
    x_test, y_test = features_of(feats, "test", feature)
    num_classes = int(max(y_train.max(), y_test.max()).item()) + 1
    S, D = len(seeds), x_train.shape[1]
    if threads is None and S * batch_size * D * num_classes < 1e7:
        threads = 1
    with torch_threads(threads):
        return _probe(x_train, y_train, x_test, y_test, num_classes, feature=feature,
                      seeds=seeds, epochs=epochs, lr=lr, batch_size=batch_size,
                      val_frac=val_frac, split_seed=split_seed, select=select,
                      weight_decay=weight_decay, standardize=standardize,
                      device=device, progress=progress)


def _probe(x_train, y_train, x_test, y_test, num_classes, *, feature, seeds, epochs, lr,
           batch_size, val_frac, split_seed, select, weight_decay, standardize, device,
           progress) -> dict[str, Any]:
    dev = resolve_device(device)   # 'auto' (the paper profile) -> CUDA when visible
    S, D = len(seeds), x_train.shape[1]

    splits = [stratified_split(y_train, val_frac, s if split_seed is None else split_seed)
              for s in seeds]
    tr_idx = torch.stack([t for t, _ in splits])           # (S, n_tr): equal sizes by design
    va_idx = torch.stack([v for _, v in splits])           # (S, n_va)
    Xtr, Ytr = x_train[tr_idx].to(dev), y_train[tr_idx].to(dev)   # (S, n_tr, D), (S, n_tr)
    Xva, Yva = x_train[va_idx].to(dev), y_train[va_idx].to(dev)
    Xte = x_test.to(dev).unsqueeze(0).expand(S, -1, -1)
    Yte = y_test.to(dev)
    if standardize:
        mu = Xtr.mean(1, keepdim=True)
        sd = Xtr.std(1, keepdim=True).clamp_min(1e-6)
        Xtr, Xva, Xte = (Xtr - mu) / sd, (Xva - mu) / sd, (Xte - mu) / sd

    # init like nn.Linear, one generator per seed
    W = torch.empty(S, D, num_classes)
    b = torch.empty(S, 1, num_classes)
    bound = 1.0 / math.sqrt(D)
    gens = []
    for i, s in enumerate(seeds):
        g = torch.Generator().manual_seed(10_000 + s)
        W[i].uniform_(-bound, bound, generator=g)
        b[i].uniform_(-bound, bound, generator=g)
        gens.append(g)
    W = W.to(dev).requires_grad_()
    b = b.to(dev).requires_grad_()
    opt = _Adam([W, b], lr=lr, weight_decay=weight_decay)

    n_tr = Xtr.shape[1]
    best_val = torch.full((S,), -1.0)
    best_epoch = torch.zeros(S, dtype=torch.long)
    best_W, best_b = W.detach().clone(), b.detach().clone()
    ar = torch.arange(S, device=dev).unsqueeze(1)
    disable = (not os.environ.get("WEINCE_PROGRESS")) if progress is None else not progress
    for epoch in tqdm(range(1, epochs + 1), desc="linear probe", disable=disable):
        perm = torch.stack([torch.randperm(n_tr, generator=g) for g in gens]).to(dev)
        for i in range(0, n_tr, batch_size):
            j = perm[:, i:i + batch_size]                       # (S, b)
            logits = torch.bmm(Xtr[ar, j], W) + b               # (S, b, C)
            # sum over seeds of each seed's mean loss: gradients stay per seed
            loss = F.cross_entropy(logits.reshape(-1, num_classes), Ytr[ar, j].reshape(-1),
                                   reduction="sum") / j.shape[1]
            W.grad = b.grad = None
            loss.backward()
            opt.step()
        if select == "final" and epoch < epochs:
            continue
        val_acc = _accuracy(W.detach(), b.detach(), Xva, Yva)
        better = val_acc > best_val if select == "best_epoch" else torch.ones(S, dtype=torch.bool)
        if better.any():
            best_val = torch.where(better, val_acc, best_val)
            best_epoch[better] = epoch
            m = better.to(dev)
            best_W[m] = W.detach()[m]
            best_b[m] = b.detach()[m]
    # the test set is scored once: final weights, or those chosen on validation
    test_pred: list[torch.Tensor] = []
    test_acc = _accuracy(best_W, best_b, Xte, Yte, preds=test_pred)
    per_seed = [{"seed": s, "best_epoch": int(best_epoch[i]), "val_acc": float(best_val[i]),
                 "test_acc": float(test_acc[i])} for i, s in enumerate(seeds)]
    return {
        "test_acc": summarize(test_acc.tolist()),
        "val_acc": summarize(best_val.tolist()),
        "best_epoch": summarize(best_epoch.tolist()),
        "per_seed": per_seed,
        "feature": feature,
        "n_train": int(n_tr), "n_val": int(Xva.shape[1]), "n_test": int(x_test.shape[0]),
        "num_classes": num_classes, "dim": int(D),
        "settings": {"epochs": epochs, "lr": lr, "batch_size": batch_size, "val_frac": val_frac,
                     "split_seed": split_seed, "select": select,
                     "weight_decay": weight_decay, "standardize": standardize, "seeds": seeds,
                     "optimizer": "adam"},
        # per-example test predictions: `weince verify` recomputes test_acc from them
        "predictions": linear_block(y_test.numpy(), list(test_pred[0].numpy()), seeds),
    }


def provenance_cfg(cfg, feats_path, meta) -> dict:
    """The config a probe's result file records: the options, the feature file, the encoder's."""
    return {"eval": to_dict(cfg), "features": str(feats_path),
            "encoder_cfg": (meta or {}).get("encoder_cfg")}


def feature_meta(feats: dict) -> dict:
    """What a result file records of the encoder its features came from."""
    m = feats.get("meta") or {}
    enc = m.get("encoder_cfg") or {}
    return {"dataset": m.get("dataset"), "encoder": m.get("encoder"),
            "backbone": enc.get("backbone"), "loss": enc.get("loss"), "seed": enc.get("seed"),
            "epochs": enc.get("epochs")}


def probe_feature_file(probe: Callable[..., dict], cfg, features_path, out_path) -> dict:
    """Run ``probe(features, **cfg)`` on a feature file and write its result to ``out_path``
    with the encoder's description and the provenance (the linear probe's and k-NN's files)."""
    feats = load_features(features_path)
    res = probe(feats, **to_dict(cfg))
    res["meta"] = feature_meta(feats)
    write_json(out_path, res, cfg=provenance_cfg(cfg, features_path, feats.get("meta")),
               seed=(feats.get("meta") or {}).get("encoder_cfg", {}).get("seed"))
    return res


@locks_output("out_path", parent=True)   # one writer per output file
def run_linear(features_path, out_path, cfg: LinearProbeConfig | dict | None = None) -> dict:
    """Linear probe on a feature file; write ``out_path`` (JSON with provenance)."""
    return probe_feature_file(linear_probe, as_config(LinearProbeConfig, cfg), features_path,
                              out_path)
