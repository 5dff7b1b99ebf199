"""Warm start (weince.pipeline.warm): a job handed to a fork of the warm server behaves as
the same script started cold: exit status, streams, working directory, environment,
signals, a dead launcher, and outputs bit for bit."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from weince.pipeline import warm

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="Linux only")


def _wait_for(pred, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def server(tmp_path_factory):
    """A warm server owned by this test process, importing only what these tests use."""
    d = Path(tmp_path_factory.mktemp("warm"))
    sock = f"/tmp/weince-warm-test-{os.getpid()}-{os.urandom(3).hex()}.sock"
    log = open(d / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "weince.pipeline.warm", sock,
                             str(os.getpid()), "--preload", "json,weince.pipeline.logs",
                             "--extras", "colorsys,no_such_module_here"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for(lambda: os.path.exists(sock) or proc.poll() is not None, what="server")
        assert proc.poll() is None, (d / "server.log").read_text()
        yield SimpleNamespace(sock=sock, proc=proc, log=d / "server.log")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


JOB = textwrap.dedent("""
    import json, os, sys
    from weince.pipeline.logs import log_to
    from weince.pipeline.warm import in_worker

    log = sys.argv[1]
    with log_to(log):
        print(json.dumps({"pid": os.getpid(), "worker": in_worker(), "cwd": os.getcwd(),
                          "env": os.environ.get("JOB_SETTING"), "argv": sys.argv[1:],
                          "extra": "colorsys" in sys.modules}))
    print("after the log")                     # the job's own stdout
    print("to stderr", file=sys.stderr)
    sys.exit(int(sys.argv[2]))
""")


def _job(tmp_path: Path, body: str = JOB) -> Path:
    script = tmp_path / "job.py"
    script.write_text(body)
    return script


def _launch(script: Path, args: list[str], cwd: Path, sock: str | None, **kw):
    env = {**os.environ, "JOB_SETTING": "from the launcher"}
    env.pop(warm.ENV, None)
    if sock:
        env[warm.ENV] = sock
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, **kw)


def test_a_handed_off_job_keeps_its_status_streams_cwd_env_and_argv(server, tmp_path):
    # the extras are imported between jobs; one that does not exist is named and skipped
    _wait_for(lambda: "no_such_module_here not imported" in server.log.read_text(),
              what="the extras")
    assert "colorsys imported" in server.log.read_text()
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "job.log"
    out = _launch(_job(tmp_path), [str(log), "3"], work, server.sock)
    assert out.returncode == 3, out.stderr
    assert out.stdout == "after the log\n"     # once: the launcher printed nothing itself
    assert out.stderr == "to stderr\n"
    lines = log.read_text().splitlines()
    rec = json.loads(lines[0])
    assert rec["worker"] is True and rec["cwd"] == str(work)
    assert rec["env"] == "from the launcher" and rec["argv"] == [str(log), "3"]
    assert rec["extra"] is True                 # forked after the server imported it
    assert lines[-1].startswith("[warm start: the job ran in process ")
    assert f"process {rec['pid']}," in lines[-1]


def test_without_a_server_the_job_starts_cold(tmp_path):
    log = tmp_path / "job.log"
    out = _launch(_job(tmp_path), [str(log), "0"], tmp_path,
                  f"/tmp/weince-warm-none-{os.getpid()}.sock")
    assert out.returncode == 0, out.stderr
    rec = json.loads(log.read_text().splitlines()[0])
    assert rec["worker"] is False and "[warm start" not in log.read_text()


def test_a_server_of_another_python_refuses_and_the_job_starts_cold(server, tmp_path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(server.sock)
    warm._send(s, {"executable": "/some/other/python", "argv": ["x.py"], "cwd": "/",
                   "env": {}, "path": []}, fds=[0, 1, 2])
    assert "refuse" in warm._recv(s)
    s.close()


def test_a_launcher_that_gives_up_before_go_never_gets_a_twin(server, tmp_path):
    """A launcher that timed out waiting (a busy server) starts cold: the server, reading
    the request later, must not run the job as well."""
    marker = tmp_path / "ran"
    script = _job(tmp_path, f"open({str(marker)!r}, 'w').write('twice')\n")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(server.sock)
    warm._send(s, {"executable": sys.executable, "argv": [str(script)], "cwd": str(tmp_path),
                   "env": dict(os.environ), "path": sys.path}, fds=[0, 1, 2])
    assert "ready" in warm._recv(s)
    s.close()                                 # gave up: no "go"
    time.sleep(1.0)
    assert not marker.exists()


def test_sigterm_reaches_the_job_which_can_still_write_its_checkpoint(server, tmp_path):
    body = textwrap.dedent("""
        import signal, sys, time
        from pathlib import Path
        from weince.pipeline.logs import log_to

        d = Path(sys.argv[1])
        def on_term(signum, frame):
            (d / "checkpoint").write_text("saved")
            sys.exit(5)
        with log_to(d / "job.log"):
            signal.signal(signal.SIGTERM, on_term)
            (d / "ready").write_text("")
            time.sleep(60)
    """)
    env = {**os.environ, warm.ENV: server.sock}
    proc = subprocess.Popen([sys.executable, str(_job(tmp_path, body)), str(tmp_path)],
                            env=env)
    _wait_for(lambda: (tmp_path / "ready").exists(), what="the job to start")
    proc.send_signal(signal.SIGTERM)          # what Snakemake sends a job it cancels
    assert proc.wait(timeout=30) == 5
    assert (tmp_path / "checkpoint").read_text() == "saved"
    assert "[warm start" in (tmp_path / "job.log").read_text()


def test_kill_9_of_the_launcher_kills_the_job_and_its_children(server, tmp_path):
    body = textwrap.dedent("""
        import os, subprocess, sys, time
        from pathlib import Path
        from weince.pipeline.logs import log_to

        d = Path(sys.argv[1])
        with log_to(d / "job.log"):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            (d / "pids").write_text(f"{os.getpid()} {child.pid}")
            time.sleep(60)
    """)
    env = {**os.environ, warm.ENV: server.sock}
    proc = subprocess.Popen([sys.executable, str(_job(tmp_path, body)), str(tmp_path)],
                            env=env)
    _wait_for(lambda: (tmp_path / "pids").exists(), what="the job to start")
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert proc.pid not in pids               # the job is a fork of the server
    proc.kill()
    proc.wait(timeout=30)

    def gone(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().split(")")[-1].split()[0] == "Z"
        except FileNotFoundError:
            return True
    _wait_for(lambda: all(gone(p) for p in pids), timeout=15, what="the job to be killed")


def test_the_server_stops_with_its_owner_and_removes_its_socket(tmp_path):
    owner = subprocess.Popen(["sleep", "60"])
    sock = f"/tmp/weince-warm-test-{os.getpid()}-owner.sock"
    srv = subprocess.Popen([sys.executable, "-m", "weince.pipeline.warm", sock,
                            str(owner.pid), "--preload", "json", "--extras", ""],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(lambda: os.path.exists(sock), what="server")
        assert oct(os.stat(sock).st_mode & 0o777) == "0o600"   # only its user may connect
        owner.kill()
        owner.wait()
        assert srv.wait(timeout=15) == 0
        assert not os.path.exists(sock)
        assert "stopped after 0 jobs" in srv.stdout.read()
    finally:
        for p in (owner, srv):
            if p.poll() is None:
                p.kill()


def test_a_torch_job_writes_the_same_bytes_warm_and_cold(tmp_path):
    """Forked from a process that imported torch (and its thread pools untouched), a
    seeded training writes the same weights as in a fresh interpreter."""
    body = textwrap.dedent("""
        import sys
        from weince.pipeline.logs import log_to

        with log_to(sys.argv[1] + ".log"):
            import torch
            torch.set_num_threads(2)
            torch.manual_seed(0)
            net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                      torch.nn.Linear(64, 8))
            opt = torch.optim.Adam(net.parameters(), lr=1e-2)
            x = torch.randn(256, 32)
            for _ in range(20):
                opt.zero_grad()
                net(x).pow(2).mean().backward()
                opt.step()
            torch.save(net.state_dict(), sys.argv[1])
    """)
    script = _job(tmp_path, body)
    sock = f"/tmp/weince-warm-test-{os.getpid()}-torch.sock"
    srv = subprocess.Popen([sys.executable, "-m", "weince.pipeline.warm", sock,
                            str(os.getpid()), "--preload", "numpy,torch,weince.pipeline.logs",
                            "--extras", ""],
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        _wait_for(lambda: os.path.exists(sock), timeout=120, what="server")
        cold = _launch(script, [str(tmp_path / "cold.pt")], tmp_path, None)
        hot = _launch(script, [str(tmp_path / "warm.pt")], tmp_path, sock)
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    assert cold.returncode == 0 and hot.returncode == 0, cold.stderr + hot.stderr
    assert "[warm start" in (tmp_path / "warm.pt.log").read_text()
    assert "[warm start" not in (tmp_path / "cold.pt.log").read_text()

    def digest(name: str) -> str:
        import torch
        sd = torch.load(tmp_path / name)
        return hashlib.sha256(b"".join(v.numpy().tobytes() for v in sd.values())).hexdigest()
    assert digest("cold.pt") == digest("warm.pt")


def _workflow(**kw):
    base = dict(local_exec=True, is_main_process=True, use_threads=False,
                deployment_settings=SimpleNamespace(deployment_method=frozenset()),
                dag=[None] * warm.MIN_JOBS)
    return SimpleNamespace(**{**base, **kw})


def test_the_server_is_wanted_only_for_local_cold_capable_runs():
    on = {"warm_start": True}
    assert warm.wanted(on, _workflow())
    assert not warm.wanted({"warm_start": False}, _workflow())
    assert not warm.wanted(on, _workflow(local_exec=False))          # a cluster's executor
    assert not warm.wanted(on, _workflow(is_main_process=False))     # a job on a node
    assert not warm.wanted(on, _workflow(use_threads=True))
    assert not warm.wanted(on, _workflow(dag=[None] * (warm.MIN_JOBS - 1)))   # a few jobs
    assert not warm.wanted(on, _workflow(deployment_settings=SimpleNamespace(
        deployment_method=frozenset({"apptainer"}))))                # the container's Python
    assert not warm.wanted(on, object())
