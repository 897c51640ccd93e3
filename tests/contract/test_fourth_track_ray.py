"""A fourth track's own Ray resource reaches the Ray executor with no edit outside its folder:
tests/echo_track says (`ray_resources`) that each worker of an echo run holds one `echo_lane`
and no sandbox (it runs no code). On a Ray cluster with `echo_lane` and no `sandbox`, installed
on its nodes as a plugin is (an entry point), `deskbench run --executor ray` runs the echo
episodes and stores what the local executor stores; the pool is sized by the track's resource,
a cluster without it is one line naming it, and a track that says nothing gets the core's
default, a sandbox."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import needs
from echo_track import RAY_RESOURCE, TRACK, EchoTask

from deskbench.contract.registry import get_track
from deskbench.errors import UserError
from deskbench.runs.canonical import canonical_dump
from deskbench.runs.ray_executor import SANDBOX, pool_size, worker_resources
from deskbench.runs.track import RunRequest

REPO = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
TASKS = [EchoTask(id=f"e{i}", text=text, expected=expected) for i, (text, expected) in enumerate(
    [("abc", "ABC"), ("Mixed", "MIXED"), ("x", "X"), ("Q", "q")])]


def _request(tmp_path: Path, *agents: str) -> RunRequest:
    return RunRequest(tasks=tmp_path / "tasks.jsonl", out=tmp_path / "run", agents=list(agents), models=[])


def test_each_track_says_what_its_ray_workers_hold(tmp_path: Path) -> None:
    assert worker_resources(TRACK, _request(tmp_path, "echo-upper")) == {RAY_RESOURCE: 1.0}
    assert worker_resources(get_track("docqa"), _request(tmp_path, "bm25-agent")) == {}  # it searches, runs no code
    assert worker_resources(get_track("docqa"), _request(tmp_path, "rlm")) == {SANDBOX: 1.0}
    for name in ("analytics", "deliverables"):  # no hook of their own: the core's default
        assert worker_resources(get_track(name), _request(tmp_path, "external")) == {SANDBOX: 1.0}


def test_the_pool_is_sized_by_the_tracks_resource() -> None:
    needs = {RAY_RESOURCE: 1.0}
    assert pool_size({"CPU": 4, RAY_RESOURCE: 2}, needs, pending=10) == 2  # two lanes: two workers
    assert pool_size({"CPU": 4, RAY_RESOURCE: 9}, needs, pending=3) == 3  # never more than the episodes
    assert pool_size({"CPU": 2}, {}, pending=5) == 2  # no resource: one worker per CPU
    with pytest.raises(UserError) as refused:
        pool_size({"CPU": 4, SANDBOX: 4}, needs, pending=1)
    assert str(refused.value) == ("this run needs 1 'echo_lane' per worker but the Ray cluster has no 'echo_lane' "
                                  "resource; start each node with ray start ... --resources '{\"echo_lane\": N}' "
                                  "(N echo_lane on that node)")
    with pytest.raises(UserError, match="executes code but the Ray cluster has no 'sandbox' resource"):
        pool_size({"CPU": 4}, {SANDBOX: 1.0}, pending=1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _processes_of(temp_dir: str) -> list[Any]:
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if any(temp_dir in part for part in p.info["cmdline"] or []):
                found.append(p)
    return found


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a machine where tests/echo_track is installed: a .dist-info declaring
    its `deskbench.tracks` entry point (what an install leaves), on the Python path."""
    site_dir = tmp_path_factory.mktemp("site")
    info = site_dir / "deskbench_echo_track-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: deskbench-echo-track\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[deskbench.tracks]\necho = echo_track:TRACK\n")
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": os.pathsep.join([str(site_dir), str(REPO / "tests")])}


@pytest.fixture(scope="module")
@needs("ray", "slow")
def echo_cluster(plugin_env: dict[str, str]) -> Iterator[str]:
    """A Ray head on 127.0.0.1 with 2 CPUs, one `echo_lane` and no `sandbox`, the echo track
    installed (its workers start with the plugin environment); its address. Its processes (found
    by its own temp folder) are killed at the end."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'deskbench[ray]')")
    pytest.importorskip("psutil", reason="psutil finds the cluster's processes")
    import psutil

    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: the sockets' path limit
    port = _free_port()
    proc = subprocess.run(
        [RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "2",
         "--resources", json.dumps({RAY_RESOURCE: 1}), "--include-dashboard", "false", "--disable-usage-stats",
         "--temp-dir", temp_dir], capture_output=True, text=True, env=plugin_env, timeout=120)
    try:
        assert proc.returncode == 0, proc.stderr[-2000:]
        yield f"127.0.0.1:{port}"
    finally:
        for p in _processes_of(temp_dir):
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        psutil.wait_procs(_processes_of(temp_dir), timeout=10)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _run(env: dict[str, str], tasks: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deskbench.cli", "run", "--tasks", str(tasks), "--agent", "echo-upper",
                           "--agent", "echo-lower", "--attempts", "2", "--out", str(out), "--quiet", "--json", *extra],
                          capture_output=True, text=True, timeout=300, env={**env, "DESKBENCH_CACHE_DIR": str(out.parent)},
                          cwd=out.parent)


def test_a_fourth_track_runs_on_ray_holding_its_own_resource(echo_cluster: str, plugin_env: dict[str, str],
                                                             tmp_path: Path) -> None:
    """Without its hook the core's default (a sandbox) would refuse this cluster, which has none."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    (tmp_path / "local").mkdir()
    (tmp_path / "ray").mkdir()
    local = _run(plugin_env, tasks, tmp_path / "local" / "run")
    assert local.returncode == 0, local.stderr[-3000:]
    on_ray = _run(plugin_env, tasks, tmp_path / "ray" / "run", "--executor", "ray", "--ray-address", echo_cluster)
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    assert json.loads(on_ray.stdout) == json.loads(local.stdout)  # upper right on 3 of 4, lower on 1
    assert {s: row["accuracy"] for s, row in json.loads(on_ray.stdout).items()} == {"echo-upper": 0.75,
                                                                                     "echo-lower": 0.25}
    assert canonical_dump(tmp_path / "ray" / "run") == canonical_dump(tmp_path / "local" / "run")
