"""A bad value is not a missing one: NaN, inf or null where the report
needs a number is an error naming the file and the rule to re-run, never `missing` /
`not run at this profile`."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from weince import cli
from weince.pipeline import layout
from weince.report import build_report
from weince.utils.results import InvalidResultError, encoder_value
from weince.pipeline.profile import Profile


def _linear(cfg, seed=21):
    return layout.run_dir(Profile.of(cfg),
                          layout.VisionRun("cifar100", "resnet18", "infonce", seed)) / "linear.json"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), None])
def test_non_finite_mean_in_linear_json_is_an_error_not_missing(fx, bad):
    """The issue's probe: NaN as test_acc.mean made the row `missing` and exit 0."""
    p = _linear(fx)
    d = json.loads(p.read_text())
    d["test_acc"]["mean"] = bad
    p.write_text(json.dumps(d))  # json writes NaN/Infinity literals, as a foreign tool might
    with pytest.raises(InvalidResultError) as err:
        build_report(Profile.of(fx), with_figures=False)
    msg = str(err.value)
    assert str(p) in msg and "test_acc.mean" in msg and "--forcerun" in msg
    assert "not a missing one" in msg


def test_non_finite_seed_value_is_an_error(fx):
    p = _linear(fx, seed=63)
    d = json.loads(p.read_text())
    d["test_acc"]["values"][1] = None  # write_json's form of a NaN
    p.write_text(json.dumps(d))
    with pytest.raises(InvalidResultError, match=r"test_acc\.values\[1\]' is null"):
        build_report(Profile.of(fx), with_figures=False)


def _report_fails(fx, tmp_path, monkeypatch, capsys) -> list[str]:
    """``weince report`` on ``fx``: it must fail; the lines it printed to stderr."""
    cfg = tmp_path / "fx.yaml"
    cfg.write_text(yaml.safe_dump(fx))
    monkeypatch.delenv("WEINCE_DEBUG", raising=False)
    monkeypatch.setattr("sys.argv", ["weince", "report", "--config", str(cfg), "--no-figures"])
    assert cli.main() == 1
    return capsys.readouterr().err.strip().splitlines()


def test_report_cli_fails_with_one_line_naming_the_file(fx, tmp_path, monkeypatch, capsys):
    p = _linear(fx)
    d = json.loads(p.read_text())
    d["test_acc"] = float("nan")
    p.write_text(json.dumps(d))
    err = _report_fails(fx, tmp_path, monkeypatch, capsys)
    assert len(err) == 1 and str(p) in err[0] and "nan" in err[0]


@pytest.mark.parametrize("value, expect", [(3.0, 3.0), ({"mean": 2.0}, 2.0),
                                           ({"mean": 2.0, "values": [1.0, 3.0]}, 2.0)])
def test_finite_values_still_read(value, expect):
    assert encoder_value(value, "f.json", "k") == expect


@pytest.mark.parametrize("value", [math.nan, {"values": []}, {"mean": None},
                                   {"mean": 1.0, "values": [1.0, math.inf]}])
def test_encoder_value_rejects_non_finite(value):
    with pytest.raises(InvalidResultError, match="f.json"):
        encoder_value(value, "f.json", "k")


# ------------------------------------------------------------------ impossible values
@pytest.mark.parametrize("bad", [150.0, -5.0])
def test_an_impossible_accuracy_is_refused_not_tabled(fx, bad):
    """A linear.json with test_acc 150 (or -5) used to print "gain +120.19 pts"."""
    p = _linear(fx)
    d = json.loads(p.read_text())
    d["test_acc"] = bad
    p.write_text(json.dumps(d))
    with pytest.raises(InvalidResultError) as err:
        build_report(Profile.of(fx), with_figures=False)
    msg = str(err.value)
    assert str(p) in msg and "'test_acc'" in msg and repr(bad) in msg and "[0, 100]" in msg


def test_a_mean_that_contradicts_its_values_is_refused(fx):
    p = _linear(fx)
    d = json.loads(p.read_text())
    d["test_acc"]["mean"] = 90.0          # the values say ~50
    p.write_text(json.dumps(d))
    with pytest.raises(InvalidResultError, match=r"'test_acc\.mean' = 90\.0 but the mean of "
                                                 r"'test_acc\.values' is"):
        build_report(Profile.of(fx), with_figures=False)


def test_report_cli_refuses_an_impossible_value_in_one_line(fx, tmp_path, monkeypatch,
                                                             capsys):
    p = layout.run_dir(Profile.of(fx),
                       layout.VisionRun("cifar100", "resnet18", "infonce", 7)) / "link.json"
    d = json.loads(p.read_text())
    d["fit"]["lam"] = 1.7
    p.write_text(json.dumps(d))
    err = _report_fails(fx, tmp_path, monkeypatch, capsys)
    assert len(err) == 1 and str(p) in err[0] and "'fit.lam' = 1.7" in err[0]
    assert "[0, 1]" in err[0]
