"""Drivers: the norm-dynamics analysis of one vision encoder or one text encoder.

    from weince.norms.run import analyse_vision, analyse_text   # options: NormsConfig
    res = analyse_vision("encoder.pt", "weince", features="features.pt", out_dir="out")
    res = analyse_text("minilm", out_dir="out_text")

Each writes, in ``out_dir``: ``norms.json`` (per-claim numbers, unit verdicts,
settings, provenance) and ``norms_probes.npz`` (per-probe arrays: ``norm_z``, ``norm_h``,
``view_norm``, ``heat``, ``heat_pre``, ``drift``, ``drift_pre``, ``r_eq``) for the figures.

Vision: probes and filler bank are disjoint random subsets of the images the encoder
trained on (its training split, or the ``max_train_images`` subset); views come from
the encoder's own augmentation (``aug_kwargs``), the model runs in ``eval()`` mode
(BatchNorm running statistics), measured norms are those of the clean image under the
evaluation transform. Text: probes and bank are sentences of the training
corpus (``text_train_data``, synthetic by default), the two views are two dropout passes
(SimCSE), the measured norm is that of the eval-mode pooled vector.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from weince.data.augment import EvalTransform, build_augment
from weince.data.text import load_sts, load_train_sentences
from weince.data.vision import load_vision, subset_indices
from weince.losses import build_loss
from weince.models import load_encoder
from weince.models.text import load_text_encoder
from weince.norms.analysis import decay_rate, equilibrium_norm_sq, gradient_statistics
from weince.norms.config import NormsConfig
from weince.norms.files import PROBES_FILE, RESULT_FILE
from weince.norms.rescore import knn_rescore, sts_rescore
from weince.norms.stats import correlation
from weince.norms.rules import combine, correlation_verdict, gain_verdict
from weince.utils.config import apply_overrides, as_config, config_from_dict, to_dict
from weince.utils.device import resolve_device
from weince.utils.diskspace import atomic_write, payload_bytes
from weince.utils.results import read_json, write_json
from weince.utils.verdict_words import NOT_TESTABLE

__all__ = ["NormsConfig", "load_norms_config", "analyse_vision", "analyse_text",
           "training_settings",
           "text_settings", "correlations", "RESULT_FILE", "PROBES_FILE", "TEXT_NOMINAL"]

# all-MiniLM-L6-v2: sentence-transformers MultipleNegativesRankingLoss (InfoNCE with
# scale 20, i.e. tau 0.05), AdamW with fit()'s defaults lr 2e-5, weight decay 0.01
TEXT_NOMINAL = {"loss": "infonce", "tau": 0.05, "lr": 2e-5, "weight_decay": 0.01,
                "optimizer": "adamw"}


def load_norms_config(path: str | os.PathLike | None,
                      overrides: Sequence[str] = ()) -> NormsConfig:
    """:class:`NormsConfig` from a YAML file (flat, or a workflow profile config, whose
    ``norms.analysis`` block is used) and ``key=value`` overrides; unknown keys raise a
    ``ValueError`` naming them."""
    d: dict[str, Any] = {}
    if path:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"config file {p} does not exist")
        d = yaml.safe_load(p.read_text()) or {}
        if "profile" in d:  # a workflow profile config
            d = dict((d.get("norms") or {}).get("analysis") or {})
    return config_from_dict(NormsConfig, apply_overrides(d, overrides))


def _as_cfg(cfg: NormsConfig | dict | None) -> NormsConfig:
    return as_config(NormsConfig, cfg)


def _progress(flag: bool | None) -> bool:
    if flag is not None:
        return bool(flag)
    return sys.stderr.isatty() or os.environ.get("WEINCE_PROGRESS") == "1"


def training_settings(enc_cfg: dict[str, Any], cfg: NormsConfig, loss: str | None
                      ) -> dict[str, Any]:
    """Loss, tau, batch size and decay rate: overrides in ``cfg``, else the encoder's
    training config (``weince.train.simclr.SimCLRConfig`` keys), else the protocol's defaults."""
    name = loss or enc_cfg.get("loss") or "infonce"
    kwargs = dict(enc_cfg.get("loss_kwargs") or {}) if name == enc_cfg.get("loss") else {}
    tau = cfg.tau if cfg.tau is not None else float(enc_cfg.get("tau", 0.5))
    batch = cfg.batch_size or int(enc_cfg.get("batch_size", 64))
    batch = min(batch, cfg.max_batch_size)
    dr = decay_rate(cfg.optimizer or enc_cfg.get("optimizer", "adam"),
                    cfg.lr if cfg.lr is not None else enc_cfg.get("lr", 3e-4),
                    cfg.weight_decay if cfg.weight_decay is not None
                    else enc_cfg.get("weight_decay", 1e-6))
    return {"loss": name, "loss_kwargs": kwargs, "tau": tau, "batch_size": batch, **dr}


def correlations(x: np.ndarray, y: np.ndarray, cfg: NormsConfig, seed_offset: int = 0
                 ) -> dict[str, Any]:
    return {m: correlation(x, y, m, n_boot=cfg.n_boot, seed=cfg.seed + seed_offset)
            for m in ("pearson", "spearman")}


def _batching(batch: int, n_bank: int, probes_per_batch: int) -> dict[str, int]:
    """Minibatch size and probes per minibatch that a bank of ``n_bank`` fillers allows
    (a minibatch needs up to ``batch - 1`` fillers)."""
    if n_bank < 1:
        raise ValueError("the filler bank is empty; the training set is too small (raise "
                         "n_bank or use more training images)")
    batch = max(2, min(batch, n_bank + 1))
    return {"batch_size": batch, "probes_per_batch": max(1, min(probes_per_batch, batch - 1))}


def _dynamics(gs, norm_z: torch.Tensor, norm_h: torch.Tensor | None, settings: dict,
              cfg: NormsConfig) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """N1 and N2 numbers and unit verdicts from gradient statistics and measured norms."""
    heat = gs.heat if cfg.gradient == "unit" else gs.heat_pre
    nz = norm_z.double().numpy()
    arrays = {"norm_z": nz, "view_norm": gs.view_norm.numpy(), "heat": gs.heat.numpy(),
              "heat_pre": gs.heat_pre.numpy(), "drift": gs.drift.numpy(),
              "drift_pre": gs.drift_pre.numpy(), "grad_sq": gs.grad_sq.numpy()}
    if norm_h is not None:
        arrays["norm_h"] = norm_h.double().numpy()
    n1: dict[str, Any] = {"premise": {k: settings[k] for k in
                                      ("optimizer", "eta", "lambda_rad", "decoupled", "note")}}
    if settings["testable"]:
        r_eq = equilibrium_norm_sq(-gs.drift, heat, settings["eta"], settings["lambda_rad"]).sqrt()
        arrays["r_eq"] = r_eq.numpy()
        n1["predicted_vs_measured"] = correlations(arrays["r_eq"], nz, cfg, 1)
        n1["predicted_vs_view_norm"] = correlations(arrays["r_eq"], arrays["view_norm"], cfg, 2)
        n1["verdict"] = correlation_verdict(n1["predicted_vs_measured"]["pearson"], "positive",
                                            cfg.min_n)
    else:
        arrays["r_eq"] = np.full_like(nz, np.nan)
        n1["verdict"] = NOT_TESTABLE
    heat = arrays["heat" if cfg.gradient == "unit" else "heat_pre"]
    n2: dict[str, Any] = {"heat_vs_norm": correlations(heat, nz, cfg, 3),
                          "drift_vs_norm": correlations(arrays["drift"], nz, cfg, 4),
                          "heat_pre_vs_norm": correlations(arrays["heat_pre"], nz, cfg, 5),
                          "heat_unit_vs_norm": correlations(arrays["heat"], nz, cfg, 6)}
    if norm_h is not None:
        n2["heat_vs_backbone_norm"] = correlations(arrays["heat"], arrays["norm_h"], cfg, 7)
        n2["drift_vs_backbone_norm"] = correlations(arrays["drift"], arrays["norm_h"], cfg, 8)
    vh = correlation_verdict(n2["heat_vs_norm"]["pearson"], "positive", cfg.min_n)
    vd = correlation_verdict(n2["drift_vs_norm"]["pearson"], "negative", cfg.min_n)
    n2["verdict_heat"], n2["verdict_drift"] = vh, vd
    n2["verdict"] = combine([vh, vd]) if NOT_TESTABLE not in (vh, vd) else NOT_TESTABLE
    checks = {"max_abs_drift_pre": float(np.abs(arrays["drift_pre"]).max()),
              "mean_abs_drift": float(np.abs(arrays["drift"]).mean())}
    return {"n1": n1, "n2": n2, "checks": checks, "n_probes": int(len(nz))}, arrays


def _write(out_dir: str | os.PathLike | None, result: dict, arrays: dict, cfg: NormsConfig
           ) -> None:
    if out_dir is None:
        return
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / PROBES_FILE, lambda tmp: np.savez(tmp, **arrays),
                 need=payload_bytes(arrays), tmp=out / (PROBES_FILE + ".tmp.npz"))
    write_json(out / RESULT_FILE, result, cfg=to_dict(cfg), seed=cfg.seed)


# --------------------------------------------------------------------------- vision
@torch.no_grad()
def _embed(model, x: torch.Tensor, transform, batch: int,
           device) -> tuple[torch.Tensor, torch.Tensor]:
    hs, zs = [], []
    for i in range(0, len(x), batch):
        h, z = model(transform(x[i:i + batch].to(device)))
        hs.append(h.float().cpu())
        zs.append(z.float().cpu())
    return torch.cat(hs), torch.cat(zs)


def _two_views(model, x: torch.Tensor, aug, gen: torch.Generator, batch: int, device
               ) -> torch.Tensor:
    v1 = _embed(model, x, lambda b: aug(b, gen), batch, device)[1]
    v2 = _embed(model, x, lambda b: aug(b, gen), batch, device)[1]
    return torch.stack([v1, v2], 1)


def analyse_vision(encoder: str | os.PathLike, loss: str | None = None, *,
                   features: str | os.PathLike | dict | None = None,
                   cfg: NormsConfig | dict | None = None,
                   out_dir: str | os.PathLike | None = None,
                   meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """N1-N3 for one SimCLR encoder (``encoder.pt``) under loss ``loss`` (default: the
    loss it was trained with).

    Args:
        encoder: file written by ``weince pretrain``.
        loss: a name of :data:`weince.losses.LOSSES` (the encoder's ``loss_kwargs`` apply
            when it is the training loss).
        features: ``features.pt`` of this encoder for N3 (None: N3 is not run).
        cfg: :class:`NormsConfig` or dict.
        out_dir: where ``norms.json`` and ``norms_probes.npz`` go (None: not written).
        meta: extra identification stored in the result (dataset, backbone, arm, seed).
    Returns:
        the result dict (as written to ``norms.json``, without provenance).
    """
    cfg = _as_cfg(cfg)
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    device = resolve_device(cfg.device)
    model, enc_cfg = load_encoder(encoder, map_location=device)
    st = training_settings(enc_cfg, cfg, loss)
    loss_fn = build_loss(st["loss"], tau=st["tau"], layout="simclr", **st["loss_kwargs"])
    dataset = enc_cfg.get("dataset")
    if not dataset:
        raise ValueError(f"{encoder}: the encoder's config names no dataset; it must come "
                         "from `weince pretrain`")
    data = load_vision(dataset, enc_cfg.get("data_root"), enc_cfg.get("train_split", "train"))
    sub = subset_indices(len(data), enc_cfg.get("max_train_images"))  # what it trained on
    if sub is not None:
        data = data.subset(sub)
    aug = build_augment(dataset, **{"image_size": enc_cfg.get("image_size"),
                                    **(enc_cfg.get("aug_kwargs") or {})})
    eval_tf = EvalTransform(aug.mean, aug.std)
    n = len(data)
    n_probes = min(cfg.n_probes, n // 2)
    n_bank = min(cfg.n_bank, n - n_probes)
    gen = torch.Generator().manual_seed(cfg.seed)
    perm = torch.randperm(n, generator=gen)
    probes, bank = perm[:n_probes], perm[n_probes:n_probes + n_bank]
    xp, xb = data.images[probes], data.images[bank]
    h_clean, z_clean = _embed(model, xp, eval_tf, cfg.embed_batch, device)
    pv = _two_views(model, xp, aug, gen, cfg.embed_batch, device)
    bv = _two_views(model, xb, aug, gen, cfg.embed_batch, device)
    st.update(_batching(st["batch_size"], n_bank, cfg.probes_per_batch))
    gs = gradient_statistics(pv, bv, loss_fn, resamples=cfg.resamples,
                             batch_size=st["batch_size"],
                             probes_per_batch=st["probes_per_batch"],
                             seed=cfg.seed, progress=_progress(cfg.progress))
    dyn, arrays = _dynamics(gs, z_clean.norm(dim=1), h_clean.norm(dim=1), st, cfg)
    arrays["probe_index"] = probes.numpy()
    result: dict[str, Any] = {
        "kind": "vision", "encoder": str(encoder), "dataset": dataset,
        "backbone": enc_cfg.get("backbone"), "train_loss": enc_cfg.get("loss"),
        **(meta or {}), "loss": st["loss"], "settings": {**st, "resamples": cfg.resamples,
                                                         "gradient": cfg.gradient}, **dyn}
    result["n3"] = _knn_n3(features, cfg) if features is not None else {
        "rows": [], "verdict": NOT_TESTABLE, "note": "no features given"}
    result["verdicts"] = {"N1": dyn["n1"]["verdict"], "N2": dyn["n2"]["verdict"],
                          "N3": result["n3"]["verdict"]}
    _write(out_dir, result, arrays, cfg)
    return result


def _knn_n3(features, cfg: NormsConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"by_norm_feature": {}}
    rows = []
    for i, nf in enumerate(cfg.norm_features):
        r = knn_rescore(features, feature=cfg.knn_feature, norm_feature=nf, alphas=cfg.alphas,
                        k=cfg.knn_k, temperature=cfg.knn_temperature, val_frac=cfg.val_frac,
                        split_seed=cfg.split_seed, hub_k=cfg.hub_k, hub_frac=cfg.hub_frac,
                        low_frac=cfg.low_frac, n_boot=cfg.n_boot, seed=cfg.seed,
                        min_n=cfg.min_n)
        for row in r["rows"]:
            row["norm_feature"] = nf
            row["primary"] = (i == 0 and row["metric"] == "recall@1"
                              and row["subset"] in ("frequent", "low_quality"))
            row["verdict"] = gain_verdict(row)
            rows.append(row)
        out["by_norm_feature"][nf] = {k: v for k, v in r.items() if k != "rows"}
    out["rows"] = rows
    out["verdict"] = _primary_verdict(rows)
    return out


def _primary_verdict(rows: list[dict]) -> str:
    prim = [r["verdict"] for r in rows if r.get("primary")]
    if not prim or any(v == NOT_TESTABLE for v in prim):
        # every primary population must be testable for the unit's verdict
        return NOT_TESTABLE if not prim or all(v == NOT_TESTABLE for v in prim) else combine(prim)
    return combine(prim)


# --------------------------------------------------------------------------- text
def _pooled(encoder, tokenizer, sentences: list[str], pooling: str, max_length: int,
            batch: int, device, train: bool) -> torch.Tensor:
    was = encoder.training
    encoder.train(train)
    out = []
    try:
        with torch.no_grad():
            for i in range(0, len(sentences), batch):
                tok = tokenizer(sentences[i:i + batch], padding=True, truncation=True,
                                max_length=max_length, return_tensors="pt").to(device)
                hid = encoder(**tok).last_hidden_state.float()
                if pooling == "cls":
                    out.append(hid[:, 0].cpu())
                else:
                    m = tok["attention_mask"].unsqueeze(-1).to(hid.dtype)
                    out.append(((hid * m).sum(1) / m.sum(1).clamp_min(1.0)).cpu())
    finally:
        encoder.train(was)
    return torch.cat(out)


def text_settings(model: str | os.PathLike, cfg: NormsConfig, loss: str | None
                  ) -> dict[str, Any]:
    """Loss, tau and decay rate of a text encoder: ``cfg.text_*`` overrides, else the
    config of a trained SimCSE run (``train.json`` beside the ``model/`` folder), else
    :data:`TEXT_NOMINAL` (all-MiniLM-L6-v2's own training)."""
    src: dict[str, Any] = dict(TEXT_NOMINAL)
    origin = "nominal all-MiniLM-L6-v2 training settings"
    train_json = Path(str(model)).parent / "train.json"
    if Path(str(model)).is_dir() and train_json.exists():
        run_cfg = (read_json(train_json).get("provenance") or {}).get("config") or {}
        src = {"loss": run_cfg.get("loss", "infonce"), "tau": run_cfg.get("tau", 0.05),
               "lr": run_cfg.get("lr", 3e-5), "weight_decay": run_cfg.get("weight_decay", 0.0),
               "optimizer": "adamw", "loss_kwargs": run_cfg.get("loss_kwargs") or {}}
        origin = f"{train_json}"
    name = loss or cfg.text_loss or src["loss"]
    kwargs = dict(src.get("loss_kwargs") or {}) if name == src["loss"] else {}
    pick = lambda own, key: own if own is not None else src[key]  # noqa: E731
    dr = decay_rate(pick(cfg.text_optimizer, "optimizer"), pick(cfg.text_lr, "lr"),
                    pick(cfg.text_weight_decay, "weight_decay"))
    return {"loss": name, "loss_kwargs": kwargs, "tau": float(pick(cfg.text_tau, "tau")),
            "batch_size": min(cfg.batch_size or 64, cfg.max_batch_size),
            "settings_from": origin, **dr}


def analyse_text(model: str | os.PathLike = "minilm", loss: str | None = None, *,
                 cfg: NormsConfig | dict | None = None,
                 out_dir: str | os.PathLike | None = None,
                 meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """N1-N3 for a ``transformers`` sentence encoder (default: the shipped MiniLM-L6).

    The loss (layout ``pairs``) is evaluated on two dropout views of each sentence; loss,
    tau and decay rate come from :func:`text_settings` (for the shipped MiniLM: nominal
    values of its own training, AdamW; our synthetic corpus is not its training data, the
    report says so). N3 re-scores STS pairs (``sts_data``), alpha chosen on dev.
    """
    cfg = _as_cfg(cfg)
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    device = resolve_device(cfg.device)
    encoder, tok = load_text_encoder(model)
    encoder.to(device)
    st = text_settings(model, cfg, loss)
    loss_fn = build_loss(st["loss"], tau=st["tau"], layout="pairs", **st["loss_kwargs"])
    name = st["loss"]
    sentences = load_train_sentences(cfg.text_train_data, n=cfg.text_probes + cfg.text_bank,
                                     seed=cfg.seed)
    n_probes = min(cfg.text_probes, len(sentences) // 2)
    probes, bank = sentences[:n_probes], sentences[n_probes:n_probes + cfg.text_bank]
    torch.manual_seed(cfg.seed)  # dropout masks
    kw: dict[str, Any] = dict(pooling=cfg.pooling, max_length=cfg.max_length,
                              batch=cfg.embed_batch, device=device)
    clean = _pooled(encoder, tok, probes, train=False, **kw)
    pv = torch.stack([_pooled(encoder, tok, probes, train=True, **kw) for _ in range(2)], 1)
    bv = torch.stack([_pooled(encoder, tok, bank, train=True, **kw) for _ in range(2)], 1)
    st.update(_batching(st["batch_size"], len(bank), cfg.probes_per_batch))
    gs = gradient_statistics(pv, bv, loss_fn, resamples=cfg.resamples,
                             batch_size=st["batch_size"],
                             probes_per_batch=st["probes_per_batch"],
                             seed=cfg.seed, progress=_progress(cfg.progress))
    dyn, arrays = _dynamics(gs, clean.norm(dim=1), None, st, cfg)
    # N3: STS re-scoring
    dev = load_sts(cfg.sts_data, "dev", n_synthetic=cfg.sts_pairs, seed=cfg.seed)
    test = load_sts(cfg.sts_data, "test", n_synthetic=cfg.sts_pairs, seed=cfg.seed)

    def pair_stats(p):
        uniq = sorted(set(p.sentences1) | set(p.sentences2))
        pos = {s: i for i, s in enumerate(uniq)}
        e = _pooled(encoder, tok, uniq, train=False, **kw).double()
        a = e[[pos[s] for s in p.sentences1]]
        b = e[[pos[s] for s in p.sentences2]]
        cos = torch.nn.functional.cosine_similarity(a, b, dim=1).numpy()
        return cos, torch.stack([a.norm(dim=1), b.norm(dim=1)], 1).numpy()

    cd, nd = pair_stats(dev)
    ct, nt = pair_stats(test)
    row = sts_rescore(cd, nd, dev.scores, ct, nt, test.scores, alphas=cfg.alphas,
                      n_boot=cfg.n_boot, seed=cfg.seed, min_n=cfg.min_n)
    row.update(norm_feature="pooled", primary=True, verdict=gain_verdict(row))
    n3 = {"rows": [row], "verdict": _primary_verdict([row]),
          "synthetic": bool(getattr(test, "synthetic", False))}
    result: dict[str, Any] = {
        "kind": "text", "model": str(model), **(meta or {}), "loss": name,
        "settings": {**st, "resamples": cfg.resamples, "gradient": cfg.gradient,
                     "pooling": cfg.pooling, "train_data": cfg.text_train_data,
                     "sts_data": cfg.sts_data},
        **dyn, "n3": n3}
    result["verdicts"] = {"N1": dyn["n1"]["verdict"], "N2": dyn["n2"]["verdict"],
                          "N3": n3["verdict"]}
    _write(out_dir, result, arrays, cfg)
    return result
