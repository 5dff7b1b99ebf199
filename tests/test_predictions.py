"""Per-example test predictions beside the probe numbers, recomputed by ``weince verify``;
where a result was made (GPU, container image, site); protocols of one setting."""

from __future__ import annotations

import copy
import importlib
import json
import sys
import types

import numpy as np
import pytest
import torch

from weince.bundle._protocol import first_difference, protocol_of, setting_of
from weince.bundle.make import check_protocols
from weince.bundle.verify import VerifyResult, _recheck_numbers
from weince.eval.knn import knn_eval
from weince.eval.linear import linear_probe
from weince.utils.metrics import metric_of
from weince.utils.predictions import decode, encode_bits, encode_labels, recheck

prov = importlib.import_module("weince.utils.provenance")   # the package exports a function


def _features(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    yt, ye = torch.randint(0, 5, (240,), generator=g), torch.randint(0, 5, (130,), generator=g)
    xt = torch.randn(240, 8, generator=g) + yt[:, None] * 0.4
    xe = torch.randn(130, 8, generator=g) + ye[:, None] * 0.4
    return {"train": {"backbone": xt, "labels": yt}, "test": {"backbone": xe, "labels": ye},
            "meta": {"dataset": "toy"}}



def test_a_block_cannot_expand_past_its_values():
    # a hostile archive: 8 MB of zeros under n = 10 decodes no further than its 20 bytes
    bomb = encode_labels(np.zeros(4_000_000, int))
    with pytest.raises(ValueError, match="more than the 20 bytes of its 10 values"):
        decode({**bomb, "n": 10})
    with pytest.raises(ValueError, match="outside"):
        decode({**bomb, "n": 10**12})
    with pytest.raises(ValueError, match="outside"):
        decode({**bomb, "n": -1})

@pytest.fixture(scope="module")
def results() -> tuple[dict, dict]:
    f = _features()
    return (json.loads(json.dumps(linear_probe(f, epochs=3, seeds=(1, 2)))),
            json.loads(json.dumps(knn_eval(f, k=10, recall_ks=(1, 5), split_seeds=(1, 2)))))


def test_arrays_round_trip_small():
    y = np.arange(1000) % 100
    assert (decode(encode_labels(y)) == y).all()
    assert (decode(encode_labels([70000, 3])) == [70000, 3]).all()
    bits = np.arange(13) % 3 == 0
    assert (decode(encode_bits(bits)) == bits).all()
    assert len(encode_labels(np.zeros(10000, int))["zlib_b64"]) < 200
    with pytest.raises(ValueError, match="does not decode"):
        decode({**encode_labels(y), "zlib_b64": "bm90IHpsaWI="})


def test_the_probes_numbers_follow_from_their_predictions(results):
    lin, knn = results
    # every per-seed number of every metric with predictions, its summary's values and mean
    for res, kind in ((lin, "linear"), (knn, "knn")):
        keys = [k for k in res if (m := metric_of(k)) is not None and m.evaluation == kind
                and m.per_example is not None]
        assert keys
        problems, n, labels = recheck(res, kind)
        assert problems == [] and n == len(keys) * (2 * len(res["per_seed"]) + 1)
        assert len(labels) == 64 and labels == recheck(lin, "linear")[2]
    # the predictions are the probe's own: they give its accuracy exactly
    pred = decode(lin["predictions"]["per_seed"][0]["pred"])
    y = decode(lin["predictions"]["test_labels"])
    assert lin["per_seed"][0]["test_acc"] == pytest.approx(100 * (pred == y).mean(), abs=1e-4)


def test_a_consistently_edited_accuracy_does_not_follow(results):
    lin, knn = (copy.deepcopy(r) for r in results)
    lin["per_seed"][0]["test_acc"] += 1.0
    lin["test_acc"]["values"][0] += 1.0
    lin["test_acc"]["mean"] += 0.5
    problems, _, _ = recheck(lin, "linear")
    assert any("per_seed[0] (seed 1) test_acc" in p for p in problems)
    assert any("test_acc.values" in p for p in problems) and any("test_acc.mean" in p
                                                                 for p in problems)
    knn["per_seed"][1]["test"]["recall@5"] -= 2.0
    problems, _, _ = recheck(knn, "knn")
    assert problems and "seed 2) test recall@5" in problems[0]
    assert recheck({"test_acc": {}}, "linear") == ([], 0, None)   # no block: unchecked


def test_verify_names_the_file_whose_numbers_do_not_follow(results, tmp_path):
    lin = copy.deepcopy(results[0])
    good, bad = "r/p/vision/toy/a/seed1/linear.json", "r/p/vision/toy/a/seed2/linear.json"
    (tmp_path / good).parent.mkdir(parents=True)
    (tmp_path / good).write_text(json.dumps(lin))
    lin["per_seed"][1]["test_acc"] = 99.0
    (tmp_path / bad).parent.mkdir(parents=True)
    (tmp_path / bad).write_text(json.dumps(lin))
    old = "r/p/vision/toy/a/seed3/linear.json"
    (tmp_path / old).parent.mkdir(parents=True)
    (tmp_path / old).write_text(json.dumps({"test_acc": lin["test_acc"]}))
    res = VerifyResult("x.tar.gz")
    _recheck_numbers({"files": [{"path": p, "role": "result"} for p in (good, bad, old)]},
                     tmp_path, res)
    assert res.recheck_files == 2 and res.unchecked == [old]
    assert res.recheck_failed and all(f.startswith(bad) for f in res.recheck_failed)
    assert not res.archive_ok and "NUMBER MISMATCH " + bad in res.render()


def test_where_a_result_was_made(monkeypatch):
    monkeypatch.delenv(prov.SITE_VARIABLE, raising=False)
    monkeypatch.delenv(prov.DIGEST_VARIABLE, raising=False)
    block = prov.provenance()
    assert block["site"] is None
    assert block["gpu"] == ("cpu" if not torch.cuda.is_initialized() else
                            torch.cuda.get_device_name(torch.cuda.current_device()))
    monkeypatch.setenv(prov.SITE_VARIABLE, "lab-a")
    monkeypatch.setenv(prov.DIGEST_VARIABLE, "weince@sha256:" + "ab" * 32)
    block = prov.provenance()
    assert block["site"] == "lab-a" and block["container"] == "weince@sha256:" + "ab" * 32
    monkeypatch.setenv(prov.SITE_VARIABLE, "lab a; rm")
    with pytest.raises(ValueError, match="not a site label.*--config site="):
        prov.site_label()
    monkeypatch.setenv(prov.DIGEST_VARIABLE, "latest")
    with pytest.raises(ValueError, match="not an image digest"):
        prov.container_digest()


def test_a_protocol_leaves_out_where_and_which_replicate():
    cfg = {"eval": {"epochs": 5, "device": "cuda", "threads": 4, "seeds": [1]},
           "features": "results/p/x/seed7/features.pt",
           "encoder_cfg": {"epochs": 2, "seed": 7, "loss": "weince"}}
    assert protocol_of(cfg) == {"eval.epochs": 5, "eval.seeds": [1],
                                "encoder_cfg.epochs": 2, "encoder_cfg.loss": "weince"}
    other = copy.deepcopy(cfg)
    other["encoder_cfg"].update(epochs=3, seed=21)
    assert first_difference(protocol_of(cfg), protocol_of(other)) == ("encoder_cfg.epochs", 2, 3)
    assert setting_of("r/p/vision/d/b/infonce/seed21/linear.json") == \
        "r/p/vision/d/b/infonce/seed*/linear.json"


def test_bundle_refuses_one_setting_under_two_protocols():
    a = {"encoder_cfg.epochs": 2, "eval.epochs": 5}
    check_protocols({"r/p/d/infonce/seed7/linear.json": a,
                     "r/p/d/infonce/seed21/linear.json": dict(a),
                     "r/p/d/weince/seed7/linear.json": {**a, "encoder_cfg.epochs": 9}})
    with pytest.raises(ValueError, match=r"encoder_cfg.epochs is 2 in r/p/d/infonce/seed21/"
                                         r"linear.json and 3 in r/p/d/infonce/seed7/linear.json"):
        check_protocols({"r/p/d/infonce/seed7/linear.json": {**a, "encoder_cfg.epochs": 3},
                         "r/p/d/infonce/seed21/linear.json": a})


def test_an_assembled_grid_knn_must_be_its_grid_runs(results, tmp_path):
    knn = results[1]
    src = "r/p/vision/toy/b/weince@m0/seed7/knn.json"
    dst = "r/p/vision/toy/b/weince/seed7/knn.json"
    assembled = {"selected_point": {"acc@10": "m0"}, "acc@10": knn["acc@10"],
                 "val": {"acc@10": knn["val"]["acc@10"]}}
    for p, d in ((src, knn), (dst, assembled)):
        (tmp_path / p).parent.mkdir(parents=True)
        (tmp_path / p).write_text(json.dumps(d))
    files = {"files": [{"path": p, "role": "result"} for p in (src, dst)]}
    res = VerifyResult("x.tar.gz")
    _recheck_numbers(files, tmp_path, res)
    assert res.recheck_files == 2 and not res.recheck_failed and not res.unchecked
    assembled["acc@10"] = {**knn["acc@10"], "mean": 99.0}
    (tmp_path / dst).write_text(json.dumps(assembled))
    res = VerifyResult("x.tar.gz")
    _recheck_numbers(files, tmp_path, res)
    assert res.recheck_failed == [f"{dst}: acc@10 is not that of {src}, the grid point it names"]


def test_the_gpu_is_the_one_cuda_computed_on(monkeypatch):
    class Cuda:
        used = True

        def is_available(self):
            return True

        def is_initialized(self):
            return self.used

        def current_device(self):
            return 0

        def get_device_name(self, i):
            return "NVIDIA H200"

    cuda = Cuda()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert prov.gpu_model() == "NVIDIA H200"
    cuda.used = False          # a GPU in the machine, never used by this process
    assert prov.gpu_model() == "cpu"
    monkeypatch.delitem(sys.modules, "torch")
    assert prov.gpu_model() == "cpu"
