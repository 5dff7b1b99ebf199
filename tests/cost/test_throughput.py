"""GPU throughput from published measurements (weince.cost.throughput, devices.yaml) and
`weince cost`, the price of one step of a named model on a named GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from weince.cli import main as cli
from weince.cost import throughput as tp
from weince.cost.counts import text_counts, vision_counts

LISTED = ("a100-80gb", "a100-40gb", "h100-sxm", "h100-pcie", "h200", "l40s")


def _measurement(mid):
    return next(m for m in tp.load_devices()["measurements"] if m["id"] == mid)


def test_a_measured_cell_is_its_throughput_times_the_counted_flops():
    m = _measurement("lambda-h100-sxm-rn50-tf32")
    flops = vision_counts("resnet50", 224, 3, "classes1000")["train"]
    cell = tp.rates()[("h100-sxm", "cnn", "tf32")]
    assert cell["how"] == "measured" and cell["rate"] == m["per_second"] * flops
    band = tp.load_devices()["band"]
    assert tp.rate("h100-sxm", "cnn", "tf32") == (cell["rate"] * band["low"],
                                                 cell["rate"] * band["high"])


def test_the_price_of_a_calibration_model_is_its_measurement_times_the_band():
    """The FLOPs cancel: ResNet-50 at 224 px in TF32 on an A100 80GB is priced at Lambda's
    1,066 images/s x [0.5, 1.5], in mixed precision at 1,582 (the measured AMP speed-up,
    1.48x, not the datasheet's 2x)."""
    tf32 = tp.price_step("resnet50", 224, 256, "tf32", "a100-80gb")
    bf16 = tp.price_step("resnet50", 224, 256, "bf16", "a100-80gb")
    assert tf32["per_second"] == pytest.approx([533.0, 1599.0])
    assert bf16["per_second"][0] / tf32["per_second"][0] == pytest.approx(1582 / 1066)
    bert = tp.price_step("bert-base", 384, 32, "bf16", "h200")
    assert bert["unit"] == "sequences/s" and bert["per_second"][1] == pytest.approx(932 * 1.5)
    assert bert["step_s"][1] == pytest.approx(32 / bert["per_second"][0])


def test_every_listed_gpu_prices_every_family_and_precision_within_3x():
    for gpu in LISTED:
        for fam in tp.FAMILIES:
            for prec in tp.PRECISIONS:
                lo, hi = tp.rate(gpu, fam, prec)
                assert 0 < lo < hi <= 3.0 * lo * (1 + 1e-12), (gpu, fam, prec)
                # never above the GPU's datasheet peak at that precision
                assert hi <= float(tp.device(gpu)[prec]) * 1e12, (gpu, fam, prec)


def test_the_derived_cells_follow_their_rules():
    r = tp.rates()
    # a stand-in device keeps the stand-in's fraction of the peak
    l40s, ada = r[("l40s", "cnn", "bf16")], r[("rtx6000-ada", "cnn", "bf16")]
    assert l40s["rate"] == pytest.approx(ada["rate"] * 362.05 / 364.2)
    # ViT-S, measured only on the A100 in AMP, scales as BERT-base does on each GPU
    vit = r[("a100-80gb", "vit", "bf16")]["rate"]
    assert r[("h100-sxm", "vit", "tf32")]["rate"] == pytest.approx(
        vit * r[("h100-sxm", "bert", "tf32")]["rate"] / r[("a100-80gb", "bert", "bf16")]["rate"])
    # FP32: the V100's measured fraction of its FP32 peak, never above the GPU's TF32 rate
    eff = r[("v100-16gb", "bert", "fp32")]["rate"] / 15.7e12
    assert r[("a100-80gb", "bert", "fp32")]["rate"] == pytest.approx(eff * 19.5e12)
    for gpu in LISTED:
        for fam in tp.FAMILIES:
            assert r[(gpu, fam, "fp32")]["rate"] <= r[(gpu, fam, "tf32")]["rate"] * (1 + 1e-12)


def test_every_measurement_names_its_source_and_what_was_measured():
    data = tp.load_devices()
    for m in data["measurements"]:
        src = data["sources"][m["source"]]
        assert src["title"] and src["url"] and src["what"], m["id"]
        assert m["use"] in ("calibration", "check") and m["gpus"] >= 1, m["id"]
        assert ("per_second" in m) != ("flops_total" in m), m["id"]
    rows = tp.calibration_rows()
    assert all(r["inside"] for r in rows if r["use"] == "calibration")
    checks = [r for r in rows if r["use"] == "check"]
    assert {r["gpu"] for r in checks} >= {"a100-80gb", "a100-40gb", "h100-sxm", "h100-pcie"}
    # the independent A100 40GB and earlier H100 runs fall inside the model's range
    assert all(r["inside"] for r in checks if r["id"].startswith(("lambda-a100-40gb",
                                                                   "lambda-h100-sxm-early")))


def test_a_cuda_device_name_finds_its_devices_yaml_key():
    assert tp.device_for_name("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert tp.device_for_name("NVIDIA H200") == "h200"
    assert tp.device_for_name("NVIDIA A100-SXM4-40GB") == "a100-40gb"
    assert tp.device_for_name("NVIDIA A100 80GB PCIe") is None
    assert tp.device_for_name(None) is None


@pytest.mark.parametrize("gpu", LISTED)
def test_weince_cost_answers_for_every_listed_gpu(gpu, capsys):
    assert cli(["cost", "--model", "resnet50", "--image-size", "224", "--batch", "256",
                "--precision", "tf32", "--gpu", gpu, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    lo, hi = out["per_second"]
    assert 0 < lo < hi and out["unit"] == "images/s" and out["gpu"] == gpu
    assert out["step_s"] == pytest.approx([256 / hi, 256 / lo])


def test_weince_cost_prices_text_and_the_project_s_backbones(capsys):
    assert cli(["cost", "--model", "bert-base-uncased", "--seq-len", "384", "--precision",
                "bf16", "--gpu", "h100-sxm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "bert-base" and out["unit"] == "sequences/s"
    assert out["flops_per_example"] == text_counts("bert-base", 384)["train"]
    assert cli(["cost", "--model", "vit_s", "--image-size", "32", "--precision", "fp32",
                "--gpu", "h200"]) == 0
    text = capsys.readouterr().out
    assert "vit_s at 32 px" in text and "images/s" in text and "family vit" in text


def test_weince_cost_refuses_what_it_cannot_price():
    with pytest.raises(ValueError, match="needs --image-size"):
        cli(["cost", "--model", "resnet50", "--gpu", "h100-sxm"])
    with pytest.raises(ValueError, match="unknown model 'alexnet'"):
        cli(["cost", "--model", "alexnet", "--image-size", "224"])
    with pytest.raises(ValueError, match="unknown GPU 'tpu'"):
        cli(["cost", "--model", "resnet50", "--image-size", "224", "--gpu", "tpu"])
    with pytest.raises(ValueError, match="v100-16gb has no TF32"):
        tp.price_step("resnet50", 224, 8, "tf32", "v100-16gb")


def test_the_schema_s_gpu_names_are_the_listed_devices():
    schema = yaml.safe_load((Path(__file__).resolve().parents[2] / "workflow" / "schemas"
                             / "config.schema.yaml").read_text())
    assert schema["$defs"]["gpu"]["enum"] == tp.device_names() == list(LISTED)
    ref = {"$ref": "#/$defs/gpu"}
    c = schema["properties"]["cost"]["properties"]
    one, many = c["gpu"]["oneOf"]
    assert one == ref and many["items"] == ref
    assert c["measured"]["items"]["properties"]["gpu"]["$ref"] == ref["$ref"]
