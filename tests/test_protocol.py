"""The paper profile runs the authors' protocol, step for step (docs/protocol.md): each
decision pinned on the configuration that `snakemake --configfile config/paper.yaml`
resolves to (config/config.yaml merged under it, then the library defaults)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
from pathlib import Path

import pytest
import torch
import yaml

import weince.models as models
import weince.train.simclr as simclr
from weince.eval.config import KNNConfig, LinearProbeConfig
from weince.eval.knn import knn_eval
from weince.eval.linear import linear_probe
from weince.models import build_simclr_model
from weince.pipeline.profile import Profile
from weince.pipeline.protocol import OFFICIAL, probe_kwargs, protocol_options, shares_seeds
from weince.pipeline.stages import pretrain_config
from weince.train.simclr import SimCLRConfig, pretrain, complete_config
from weince.utils import write_json

REPO = Path(__file__).resolve().parents[1]


def _merge(base: dict, over: dict) -> dict:
    """Snakemake's merge of --configfile over the default config (recursive update)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
            else copy.deepcopy(v)
    return out


def _profile(name: str) -> dict:
    default = yaml.safe_load((REPO / "config/config.yaml").read_text())
    if name == "config.yaml":
        return default
    return _merge(default, yaml.safe_load((REPO / "config" / name).read_text()))


@pytest.fixture(scope="module")
def paper():
    return _profile("paper.yaml")


def _resolved_pretrain(cfg, dataset="cifar100", arm="weince@m0_kr5_ka1"):
    return complete_config(dataclasses.replace(pretrain_config(Profile.of(cfg), dataset, "resnet18",
                                                              arm, 7),
                                              threads=None))


def _call_kwargs(fn, given: dict) -> dict:
    defaults = {k: p.default for k, p in inspect.signature(fn).parameters.items()
                if p.default is not inspect.Parameter.empty}
    return {**defaults, **given}


def test_pretraining_has_no_weight_decay_float32_per_view_default_conv1(paper):
    for arm in ("infonce", "weince", "weince@m6_kr20_ka2", "weince_recipe"):
        c = _resolved_pretrain(paper, arm=arm)
        assert c.optimizer == "adam" and c.lr == 3e-4 and c.weight_decay == 0.0
        assert c.amp is False and c.tf32 is False          # float32 throughout
        assert c.forward == "per_view"                     # BatchNorm per view
        assert c.conv1_init == "default"                   # PyTorch's default init
        assert (c.batch_size, c.epochs, c.tau, c.proj_dim) == (256, 100, 0.5, 64)
    # the library defaults are the official ones too (a config that omits the keys)
    d = SimCLRConfig()
    assert (d.weight_decay, d.amp, d.tf32, d.forward, d.conv1_init) == (
        0.0, False, False, "per_view", "default")
    # the official values the protocol table states are the library's defaults
    for key in OFFICIAL["pretrain"]:
        assert getattr(d, key) == OFFICIAL["pretrain"][key], key
    for cls, block in ((LinearProbeConfig, "linear"), (KNNConfig, "knn")):
        for key, value in OFFICIAL[block].items():
            if hasattr(cls, key):
                got = getattr(cls(), key)
                assert (list(got) if isinstance(got, tuple) else got) == value, (block, key)


def test_stl10_pretrains_on_unlabeled(paper):
    assert _resolved_pretrain(paper, dataset="stl10").train_split == "unlabeled"


def test_linear_probe_final_epoch_on_80_20_split_seed_1_one_probe_seed(paper):
    kw = _call_kwargs(linear_probe, paper["vision"]["linear"])
    assert kw["select"] == "final" and kw["split_seed"] == 1 and kw["val_frac"] == 0.2
    assert list(kw["seeds"]) == [1]
    assert (kw["epochs"], kw["batch_size"], kw["lr"], kw["weight_decay"]) == (100, 256, 3e-4, 0)


def test_knn_bank_is_80_percent_with_split_seeds_1_to_5(paper):
    kw = _call_kwargs(knn_eval, paper["vision"]["knn"])
    assert kw["val_frac"] == 0.2 and list(kw["split_seeds"]) == [1, 2, 3, 4, 5]
    assert (kw["k"], kw["temperature"]) == (50, 0.1)


def test_grid_every_point_at_all_four_seeds_chosen_per_metric(paper):
    v = paper["vision"]
    assert v["seeds"] == OFFICIAL["encoder_seeds"] == v["grid"]["seeds"]
    for key in ("margin", "kappa_rho", "kappa_aic"):
        assert v["grid"][key] == OFFICIAL["grid"][key]
    # four-seed grid: the final arm adopts the chosen runs; k-NN chooses per metric
    assert shares_seeds(Profile.of(paper))
    assert v["grid"]["metric"] == "val_acc"


def test_paper_profile_lists_no_option_off_the_protocol_and_cheap_profiles_say_theirs(paper):
    assert protocol_options(Profile.of(paper)) == []
    for name in ("config.yaml", "smoke.yaml"):
        opts = protocol_options(Profile.of(_profile(name)))
        assert any("weight decay" in o for o in opts), opts
    assert any("grid at encoder seed(s) 7 only" in o for o in protocol_options(
        Profile.of(_profile("config.yaml"))))
    assert any("InfoNCE probed with seeds [1]" in o for o in protocol_options(
        Profile.of(_profile("smoke.yaml"))))
    cheap = copy.deepcopy(paper)
    cheap["vision"]["pretrain"].update(amp=True, forward="joint")
    cheap["vision"]["linear"].update(select="best_epoch", seeds=[0, 1, 2, 3, 4])
    cheap["vision"]["grid"]["seeds"] = [7]
    opts = " | ".join(protocol_options(Profile.of(cheap)))
    for word in ("bf16", "forward: joint", "best validation epoch", "5 probe seeds",
                 "grid at encoder seed(s) 7"):
        assert word in opts, opts


def test_conv1_default_init_is_pytorchs_and_kaiming_is_an_option():
    torch.manual_seed(0)
    w = build_simclr_model("resnet18", 32, 3).backbone.conv1.weight
    bound = 1.0 / (3 * 3 * 3) ** 0.5           # kaiming_uniform(a=sqrt(5)): U(-1/sqrt(fan_in), .)
    assert w.abs().max() <= bound and w.std() > 0.8 * bound / 3 ** 0.5
    torch.manual_seed(0)
    wk = build_simclr_model("resnet18", 32, 3, conv1_init="kaiming").backbone.conv1.weight
    assert wk.std().item() == pytest.approx((2.0 / (64 * 9)) ** 0.5, rel=0.1)
    with pytest.raises(ValueError, match="conv1_init"):
        build_simclr_model("resnet18", 32, 3, conv1_init="xavier")


@pytest.mark.parametrize("forward,sizes", [("per_view", [32, 32]), ("joint", [64])])
def test_training_step_runs_one_forward_per_view(tmp_path, monkeypatch, forward, sizes):
    """Official default: the backbone sees each view's batch on its own (BatchNorm statistics
    per view); ``forward: joint`` is the one-pass option over both views."""
    seen: list[int] = []
    build = simclr.build_simclr_model

    def spy(*a, **k):
        m = build(*a, **k)
        m.backbone.register_forward_pre_hook(lambda mod, inp: seen.append(inp[0].shape[0]))
        return m

    monkeypatch.setattr(simclr, "build_simclr_model", spy)   # the name the loop calls
    out = pretrain({"epochs": 1, "batch_size": 32, "max_train_images": 32, "threads": 1,
                    "device": "cpu", "forward": forward, "progress": False}, tmp_path)
    assert seen == sizes and out["forward"] == forward


def test_probe_seeds_follow_the_official_scripts_per_arm(paper):
    """slurm/submit_cifar100_r18_baseline.slurm probes each InfoNCE encoder with seeds 1-5
    (averaged within the encoder), the WEINCE script with seed 1."""
    assert probe_kwargs(Profile.of(paper), "infonce")["seeds"] == [1, 2, 3, 4, 5]
    for arm in ("weince", "weince_recipe@m2_kr10_ka1", "infonce_topm"):
        kw = probe_kwargs(Profile.of(paper), arm)
        assert kw["seeds"] == [1] and "seeds_by_arm" not in kw


def test_views_are_scaled_to_unit_range_as_the_official_transform(paper):
    c = _resolved_pretrain(paper)
    assert c.aug_kwargs == {"mean": None, "std": None}


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the precision options "
                    "only act on a GPU (on CPU there is no autocast and no TF32)")
def test_cuda_pretraining_is_float32_without_tf32_matmuls(tmp_path, monkeypatch):
    """Default (official): no autocast, full-precision float32 matmuls; the backbone's
    output is float32 at every step."""
    dtypes: list[torch.dtype] = []
    build = models.build_simclr_model

    def spy(*a, **k):
        m = build(*a, **k)
        m.backbone.register_forward_hook(lambda mod, inp, out: dtypes.append(out.dtype))
        return m

    monkeypatch.setattr(simclr, "build_simclr_model", spy)   # the name the loop calls
    before = torch.get_float32_matmul_precision()
    try:
        out = pretrain({"epochs": 1, "batch_size": 32, "max_train_images": 64,
                        "device": "cuda", "progress": False}, tmp_path)
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(before)
    assert out["amp_bf16"] is False and out["tf32_matmul"] is False
    # convolutions stay at PyTorch's default (TF32 on Ampere+), as the official runs: recorded
    assert out["tf32_cudnn_conv"] is torch.backends.cudnn.allow_tf32
    assert dtypes and set(dtypes) == {torch.float32}


def test_provenance_records_matmul_and_convolution_precision(tmp_path, monkeypatch):
    """"float32 throughout" leaves cuDNN convolutions in TF32 (PyTorch's default): every
    result file says so, read when it is written (not cached), beside the matmul setting."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    write_json(tmp_path / "a.json", {"x": 1})
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    write_json(tmp_path / "b.json", {"x": 1})
    a, b = (json.loads((tmp_path / f"{n}.json").read_text())["provenance"]["float32_precision"]
            for n in "ab")
    assert a["cudnn_conv_tf32"] is True and b["cudnn_conv_tf32"] is False
    assert a["matmul"] == torch.get_float32_matmul_precision()
    assert "cudnn_conv_tf32" in (Path(__file__).parents[1] / "docs" / "protocol.md").read_text()


def test_the_probe_and_knn_defaults_come_from_their_config_classes():
    """One source of every default: each option of the library functions takes its default
    from the config class the workflow, `weince eval` and the protocol table read."""
    for cls, fn in ((LinearProbeConfig, linear_probe), (KNNConfig, knn_eval)):
        params = inspect.signature(fn).parameters
        names = [f.name for f in dataclasses.fields(cls)]
        assert set(names) == set(params) - {"features"}, (cls.__name__, fn.__name__)
        for name in names:
            assert params[name].default is getattr(cls, name), (fn.__name__, name)
