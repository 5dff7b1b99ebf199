"""``device: auto`` (every device setting of the paper profile) reaches torch only through
``weince.utils.device.resolve_device`` (the probe and k-NN passed "auto" straight
to ``torch.device`` and 6,792 paper jobs would have failed), and a job given a GPU that
sees none fails at once."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from weince.data.augment import SimCLRAugment
from weince.eval.features import embed_images
from weince.eval.knn import knn_eval
from weince.eval.linear import linear_probe
from weince.evt.collect import _rng_context
from weince.models import build_simclr_model
from weince.pipeline.joblog import log_to
from weince.pipeline.profile import Profile
from weince.pipeline.stages import norms_config, pretrain_config, simcse_config
from weince.utils.device import require_gpu, resolve_device

ROOT = Path(__file__).resolve().parents[2]


def _feats(n_train=60, n_test=20, d=8, classes=3):
    g = torch.Generator().manual_seed(0)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        y = torch.arange(n) % classes
        x = torch.randn(n, d, generator=g) + 3 * torch.nn.functional.one_hot(y, d).float()
        out[split] = {"backbone": x, "head": x[:, :4], "labels": y}
    out["meta"] = {"dataset": "toy"}
    return out


def test_linear_probe_takes_auto():
    r = linear_probe(_feats(), device="auto", epochs=2, batch_size=16)
    assert 0.0 <= r["test_acc"]["mean"] <= 100.0 and r["n_test"] == 20


def test_linear_head_probe_takes_auto():
    r = linear_probe(_feats(), device="auto", epochs=2, batch_size=16, feature="head")
    assert r["feature"] == "head" and r["dim"] == 4


def test_knn_takes_auto():
    r = knn_eval(_feats(), device="auto", k=5, recall_ks=(1, 5), split_seeds=(1, 2))
    assert r["acc@5"]["n"] == 2 and 0.0 <= r["acc@5"]["mean"] <= 100.0


def test_embed_images_takes_auto():
    model = build_simclr_model("smallcnn", 16, 1, out_dim=8)
    imgs = torch.randint(0, 256, (5, 1, 16, 16), dtype=torch.uint8)
    h, z = embed_images(model, imgs, mean=(0.5,), std=(0.5,), image_size=16, device="auto")
    assert h.shape[0] == 5 and z.shape == (5, 8)


def test_score_collection_rng_and_augment_take_auto():
    with _rng_context("auto"):
        pass
    u = SimCLRAugment.draw(3, device="auto")
    assert u.shape[0] == 3 and u.device == resolve_device("auto")


def test_paper_profile_sets_every_device_to_auto():
    cfg = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    found = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "device":
                    found.append((".".join(path + [k]), v))
                walk(v, path + [k])

    walk(cfg, [])
    assert found, "paper.yaml sets no device"
    assert all(v == "auto" for _, v in found), found


def test_stage_configs_of_the_paper_profile_carry_auto():
    cfg = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    assert pretrain_config(Profile.of(cfg), "cifar100", "resnet18", "infonce",
                           7).device == "auto"
    assert simcse_config(Profile.of(cfg), "bert-base-uncased", "infonce", 7).device == "auto"
    assert norms_config(Profile.of(cfg)).device == "auto"
    for name in ("pretrain", "simcse", "norms"):   # and each resolves on this machine
        assert resolve_device("auto").type in ("cpu", "cuda"), name


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_job_given_a_gpu_that_sees_none_fails_at_once():
    require_gpu(0)                                  # no GPU asked: nothing to check
    with pytest.raises(RuntimeError, match="no CUDA device"):
        require_gpu(1, "the pretrain job")
    class Res:
        gpu = 1

    ran = []
    with pytest.raises(RuntimeError, match="resources: gpu"):
        with log_to(None, resources=Res()):
            ran.append(1)
    assert not ran                                  # the job's body never started
    with pytest.raises(RuntimeError, match="resources: gpu"):
        with log_to(None, resources=Res(), device="auto"):   # auto would fall back to the CPU
            ran.append(1)
    assert not ran
    with log_to(None, resources=Res(), device="cpu"):        # CPU asked for on purpose (gloo)
        ran.append(1)
    assert ran == [1]
