"""Config paths given by someone else: a file passed as the claims registry that is not
one is refused in one line quoting none of it; an alias bomb is refused from its YAML event
stream before any object is built, by ``weince plan --configfile`` (before Snakemake's own
loading would grow it) and by the Snakefile before its ``configfile:`` line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from weince import cli
from weince.pipeline.claims import ClaimsError, load_claims
from weince.utils.config import (YamlSizeError, check_yaml_file, event_size, expanded_size,
                                 parse_yaml, value_children)

REPO = Path(__file__).resolve().parents[2]
SECRET = "root:x:0:0:SECRET-LINE-7f3a:/root:/bin/bash"


def mapping_bomb(levels: int = 10) -> str:
    """Nine keys per mapping, each the mapping before: 9**levels values once copied."""
    lines = ["m0: &m0 {" + ", ".join(f"k{j}: {j}" for j in range(9)) + "}"]
    for i in range(1, levels):
        lines.append(f"m{i}: &m{i} {{" + ", ".join(f"k{j}: *m{i - 1}" for j in range(9))
                     + "}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("content", [
    f"{SECRET}\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n",     # /etc/passwd
    f"{SECRET}\nsecret: [1\n",                                    # not YAML
    f"claims:\n  - id: C1\n    kind: {SECRET.replace(':', '-')}\n",  # schema
    f"- {SECRET}\n",
])
def test_a_file_that_is_not_a_registry_is_one_line_quoting_none_of_it(tmp_path, content):
    p = tmp_path / "passwd"
    p.write_text(content)
    with pytest.raises(ClaimsError) as err:
        load_claims(p)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"claims registry {p} ")
    assert "SECRET-LINE" not in msg and "daemon" not in msg and "bin/bash" not in msg, msg
    assert "config/claims.yaml" in msg   # the fix


def test_a_binary_file_is_not_a_registry(tmp_path):
    p = tmp_path / "blob"
    p.write_bytes(b"\xff\xfe\x00SECRET")
    with pytest.raises(ClaimsError, match=r"not a claims registry \(not UTF-8 text\)"):
        load_claims(p)


@pytest.mark.parametrize("text", [
    "a: &x {b: 1}\nc: *x\n",
    "a: &x [1, 2, &y [3, 4]]\nb: [*x, *y, *x]\n",
    "- &s hello\n- *s\n- {k: *s}\n",
])
def test_the_event_stream_counts_what_the_loaded_value_holds(text):
    assert event_size(text) == expanded_size(yaml.safe_load(text), value_children)


def test_a_mapping_bomb_is_refused_from_its_events_before_anything_is_built():
    t0 = time.process_time()
    with pytest.raises(YamlSizeError, match="bomb.yaml: refused before loading: it expands"):
        parse_yaml(mapping_bomb(), "bomb.yaml")
    assert time.process_time() - t0 < 1.0


def test_plan_refuses_a_config_bomb_before_snakemake_reads_it(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(mapping_bomb())
    t0 = time.process_time()
    with pytest.raises(YamlSizeError) as err:   # the console prints it as one line
        cli.main(["plan", "--configfile", str(bomb)])
    assert time.process_time() - t0 < 2.0
    assert str(err.value).startswith(f"config file {bomb}: refused before loading: it expands")
    assert "\n" not in str(err.value)


@pytest.mark.slow   # two Snakemake starts (~15 s)
def test_the_snakefile_refuses_a_bad_registry_and_a_bomb_in_one_line(tmp_path, copy_workflow,
                                                                      run_snakemake):
    wf = copy_workflow(tmp_path / "wf")
    secret = tmp_path / "passwd"
    secret.write_text(f"{SECRET}\n")
    proc = run_snakemake(wf, "-n", "--cores", "1", "--configfile", "config/smoke.yaml",
                         "--config", f"claims={secret}")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"weince: claims registry {secret} is not a claims registry" in out, out
    assert "SECRET-LINE" not in out and "Traceback" not in out, out
    (wf / "config" / "config.yaml").write_text(mapping_bomb())
    proc = run_snakemake(wf, "-n", "--cores", "1", timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "weince: config file config/config.yaml: refused before loading: it expands" in out


def test_plan_refuses_a_config_snakemake_would_run_as_a_template(tmp_path):
    """A top-level ``__use_yte__`` key makes Snakemake's own loader evaluate the Python
    expressions of the file (YTE templating) before any code of the workflow runs."""
    cfg = tmp_path / "yte.yaml"
    planted = tmp_path / "PWNED"
    cfg.write_text(f"__use_yte__: true\nx: ?__import__('os').system('touch {planted}')\n")
    with pytest.raises(YamlSizeError, match=r"asks Snakemake to run it as a YTE template"):
        cli.main(["plan", "--configfile", str(cfg)])
    assert not planted.exists()
    (tmp_path / "plain.yaml").write_text("a: {__use_yte__: 1}\n")   # not at its top level
    check_yaml_file(tmp_path / "plain.yaml")
