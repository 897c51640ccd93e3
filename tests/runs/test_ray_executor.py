"""`deskbench run --executor ray` on a Ray cluster this module starts on 127.0.0.1 (a head with
2 CPUs and 2 `sandbox` slots, so two EpisodeWorker processes), against the scripted model
server: the run store equals the local executor's (runs/canonical.py), the per-model limit holds
across workers, a kill -9 of the driver resumes, and a worker process killed mid-episode is
restarted and its episode run again and stored once."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import needs, run_cli
from fake_openai import FakeOpenAI

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'deskbench[ray]')")
psutil = pytest.importorskip("psutil", reason="psutil finds the worker processes")

from deskbench.corpus import Corpus  # noqa: E402
from deskbench.runs.canonical import canonical_dump  # noqa: E402
from deskbench.tracks.docqa.tasks import DocQATask  # noqa: E402

RAY = str(Path(sys.executable).with_name("ray"))
# GIT_DIR to no repository: a run stores the checkout's commit (runs/identity.py git_sha), and a
# commit made while this module runs (a working tree that is being worked in) would make a later
# run's store differ from the module's local run in that alone; every run here stores none.
ENV = {"RAY_USAGE_STATS_ENABLED": "0", "GIT_DIR": "/nonexistent/deskbench-no-git"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster_processes(temp_dir: str) -> list[Any]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(temp_dir in part for part in p.info["cmdline"] or []):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


TEMP_DIRS: dict[str, str] = {}  # a cluster's address -> its temp folder, to find its own processes


def _workers_of(address: str) -> list[Any]:
    """The EpisodeWorker processes of this cluster only (descendants of the processes started with
    its temp folder): another test's Ray cluster may run on the other xdist worker."""
    found = {}
    for root in _cluster_processes(TEMP_DIRS[address]):
        with contextlib.suppress(psutil.NoSuchProcess):
            for p in root.children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    if (p.cmdline() or [""])[0].startswith("ray::EpisodeWorker"):  # Ray titles it by its class
                        found[p.pid] = p
    return list(found.values())


@pytest.fixture(scope="module")
@needs("ray", "slow")
def cluster() -> Iterator[str]:
    """A Ray head on 127.0.0.1 (no dashboard, no usage stats), its address; its processes
    (found by its own temp folder, short for the sockets' path limit) are killed at the end."""
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    port = _free_port()
    proc = subprocess.run(
        [RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "2",
         "--resources", json.dumps({"sandbox": 2}), "--include-dashboard", "false", "--disable-usage-stats",
         "--temp-dir", temp_dir],
        capture_output=True, text=True, env={**os.environ, **ENV}, timeout=120)
    try:
        assert proc.returncode == 0, proc.stderr[-2000:]
        TEMP_DIRS[f"127.0.0.1:{port}"] = temp_dir
        yield f"127.0.0.1:{port}"
    finally:
        for p in _cluster_processes(temp_dir):
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        psutil.wait_procs(_cluster_processes(temp_dir), timeout=10)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _deskbench(*args: str, cache: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "deskbench.cli", *args, "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **ENV, "DESKBENCH_CACHE_DIR": str(cache)})


def _finish(proc: subprocess.Popen[str], timeout: float = 300) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return err


def _stored(out: Path) -> list[tuple[str, int]]:
    db = out / "run.sqlite"
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute("SELECT task_id, attempt FROM episodes").fetchall()
    except sqlite3.OperationalError:  # the run has not made its tables yet
        return []
    finally:
        con.close()


# -- analytics: 2 execute_code calls (the real bubblewrap sandbox), an output file, an answer ----------


def analytics_script(body: dict[str, Any], n: int) -> dict[str, Any]:
    """Deterministic per request (tool-call ids too), so two runs' stores can be compared."""
    called = sum(m["role"] == "tool" for m in body["messages"])
    if called >= 2:
        return {"kind": "text", "text": "Final answer: 42 ✓"}
    code = f"print('round', {called}, 6 * 7)\nopen('/mnt/result/out-{called}.txt', 'w').write('x' * {called + 1})"
    return {"kind": "tool", "id": f"call_{called}", "name": "execute_code", "arguments": json.dumps({"code": code})}


def first_two_together() -> Callable[[dict[str, Any], int], dict[str, Any]]:
    """analytics_script, with the run's first two requests answered together (a barrier): two
    episodes' calls are in flight at once however the machine schedules them, so a run that
    bounds them to one (not two) is caught by a timeout, not by chance."""
    two = threading.Barrier(2, timeout=120)

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if n <= 2:
            two.wait()
        return analytics_script(body, n)

    return script


@pytest.fixture(scope="module")
def analytics_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from deskbench.tracks.analytics.generate.tasks import generate_analytics

    out = tmp_path_factory.mktemp("analytics")
    generate_analytics(out, tasks=6, seed=5)
    return out / "tasks.jsonl"


def analytics_run(tasks: Path, out: Path, *extra: str, latency: float = 0.0,
                  script: Callable[[dict[str, Any], int], dict[str, Any]] = analytics_script,
                  concurrency: int = 2) -> FakeOpenAI:
    with FakeOpenAI(script=script, latency=latency) as fake:
        _finish(_deskbench("run", "--agent", "analyst-agent", "--tasks", str(tasks), "--out", str(out),
                           "--model", f"openai-compat/agent@{fake.base_url}", "--concurrency", str(concurrency),
                           *extra, cache=out.parent / "cache"))
    return fake


@pytest.fixture(scope="module")
def local_analytics(bwrap: str, analytics_tasks: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local") / "run"
    fake = analytics_run(analytics_tasks, out, script=first_two_together())
    assert fake.max_in_flight == 2  # this workload overlaps model calls when nothing bounds them to 1
    return out


def test_ray_run_equals_local_and_concurrency_means_the_same(cluster: str, analytics_tasks: Path,
                                                            local_analytics: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # --concurrency 2 on two worker processes: 2 episodes in flight in all, as the local run has
    fake = analytics_run(analytics_tasks, out, "--executor", "ray", "--ray-address", cluster,
                         script=first_two_together())
    assert fake.max_in_flight == 2
    a, b = canonical_dump(local_analytics), canonical_dump(out)
    assert a == b
    assert len(a["episodes"]) == 6 and len(a["transcripts"]) == 6 and len(a["outputs/"]) == 6 * 4  # calls/1, calls/2 (2 files), result/ (2 files)
    # the raw files are not byte-identical: the wall clock is in them (why the canonical dump exists)
    assert (local_analytics / "run.sqlite").read_bytes() != (out / "run.sqlite").read_bytes()
    assert len(list((out / "outputs").rglob("result/out-*.txt"))) == 6 * 2  # each episode's files came back


LIMIT_PROBE = """
import asyncio, json, os, sys, time
from deskbench.runs.ray_executor import connect
ray = connect(sys.argv[1])
from deskbench.runs.ray_limits import RemoteSlots, limiter_actor
limiter = limiter_actor().options(name="test-limit").remote(1)

@ray.remote(num_cpus=1)
def hold(holder):
    async def inside():
        async with RemoteSlots(limiter, holder):
            start = time.monotonic()
            await asyncio.sleep(0.5)
            return start, time.monotonic(), os.getpid()
    return asyncio.run(inside())

spans = ray.get([hold.remote("a"), hold.remote("b")], timeout=120)
print(json.dumps({"spans": spans, "left": ray.get(limiter.forget.remote("a"))}))
ray.shutdown()
"""


def test_the_model_limit_holds_across_worker_processes(cluster: str) -> None:
    """The limiter actor a run makes per model: two worker processes, one slot, never both inside
    (a driver of its own, as `deskbench run` is: Ray reads its auth settings when imported)."""
    proc = subprocess.run([sys.executable, "-c", LIMIT_PROBE, cluster], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **ENV})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    a, b = got["spans"]
    assert a[2] != b[2]  # two processes
    assert a[1] <= b[0] or b[1] <= a[0]  # one after the other: the slot is the cluster's
    assert got["left"] == 0  # released on the way out


def test_a_killed_driver_resumes(cluster: str, analytics_tasks: Path, local_analytics: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    held = threading.Event()  # past 3 episodes' requests, answers wait for the kill: the run cannot end first

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if n > 9:
            held.wait(300)
        return analytics_script(body, n)

    with FakeOpenAI(script=script) as fake:
        args = ("run", "--agent", "analyst-agent", "--tasks", str(analytics_tasks), "--out", str(out),
                "--model", f"openai-compat/agent@{fake.base_url}", "--concurrency", "1",
                "--executor", "ray", "--ray-address", cluster)
        first = _deskbench(*args, cache=tmp_path / "cache")
        deadline = time.monotonic() + 240
        while len(_stored(out)) < 2:
            assert first.poll() is None, first.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no episode stored in time"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait()
        held.set()
        before = _stored(out)
        assert 2 <= len(before) < 6
        err = _finish(_deskbench(*args, cache=tmp_path / "cache"))
    after = _stored(out)
    assert sorted(after) == sorted(set(after)) and len(after) == 6
    assert f"{6 - len(before)} episodes run (0 errors), {len(before)} already done" in err
    assert canonical_dump(out) == canonical_dump(local_analytics)


def test_a_worker_killed_mid_episode_is_run_again_and_stored_once(cluster: str, analytics_tasks: Path,
                                                                   local_analytics: Path, tmp_path: Path) -> None:
    killed: list[int] = []

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        # While the 4th request waits here, its episode is mid-way on its worker: kill every worker
        # (which one sends it is not known here, and an earlier test's worker may still be going
        # away: killing only the first one found once hit an idle process, and nothing ran again).
        # Only this cluster's: another test's Ray cluster may run on the other xdist worker.
        if n == 4 and not killed:
            workers = _workers_of(cluster)
            assert workers
            for worker in workers:
                killed.append(worker.pid)
                with contextlib.suppress(psutil.NoSuchProcess):
                    worker.kill()
        return analytics_script(body, n)

    out = tmp_path / "run"
    fake = analytics_run(analytics_tasks, out, "--executor", "ray", "--ray-address", cluster, script=script,
                         latency=0.1)
    assert killed and not any(psutil.pid_exists(pid) for pid in killed)
    # the dead workers' scratch folders were swept when they were restarted; the others removed at the end
    assert not [p for pid in killed for p in Path(tempfile.gettempdir()).glob(f"deskbench-ray-{pid}-*")]
    stored = _stored(out)
    assert len(stored) == 6 and len(set(stored)) == 6
    assert len(fake.requests) > 6 * 3  # the killed worker's episodes were run again
    assert canonical_dump(out) == canonical_dump(local_analytics)


# -- docqa: bm25-agent searches the corpus (opened once per worker) then answers --------------------


def docqa_script(body: dict[str, Any], n: int) -> dict[str, Any]:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {"kind": "tool", "id": "call_search", "name": "search_documents",
                "arguments": json.dumps({"query": "mountain car"})}
    answer = {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]}
    return {"kind": "tool", "id": "call_answer", "name": "provide_answer", "arguments": json.dumps(answer)}


def test_docqa_on_ray_equals_local(cluster: str, operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(DocQATask(id=f"q{i}", question=f"Which car is rented? ({i})",
                                       answer_variants=[["Mountain car"]],
                                       evidence=[{"document": "alpha.pdf", "page": 1}]).model_dump_json() + "\n"  # type: ignore[list-item]
                             for i in range(4)), encoding="utf-8")
    outs = {}
    for executor in ("local", "ray"):
        out = tmp_path / executor / "run"
        extra = ["--ray-address", cluster] if executor == "ray" else []
        with FakeOpenAI(script=docqa_script) as fake:
            _finish(_deskbench("run", "--agent", "bm25-agent", "--tasks", str(tasks), "--corpus",
                               str(operator_corpus.root), "--view", "text", "--out", str(out), "--model",
                               f"openai-compat/agent@{fake.base_url}", "--executor", executor, *extra,
                               "--concurrency", "1",  # one worker process opens the corpus (two Ray workers: the analytics tests)
                               cache=tmp_path / executor / "cache"))
        outs[executor] = canonical_dump(out)
    assert outs["ray"] == outs["local"]
    assert len(outs["ray"]["episodes"]) == 4
    assert all('"status": "ok"' in row for row in outs["ray"]["episodes"])
    assert '"ref": "pagetext:alpha.pdf#1"' in "".join(outs["ray"]["transcripts"])  # the worker searched the corpus


def test_unknown_executor_and_a_stray_ray_address_are_one_line(tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"  # a tasks file that exists: a missing one is named first
    from deskbench.generate.demo import bundled_dir

    tasks.write_text((bundled_dir() / "docqa" / "tasks.jsonl").read_text().splitlines()[0] + "\n")
    for extra, words in ((["--executor", "spark"], "--executor 'spark' is not known"),
                         (["--ray-address", "127.0.0.1:1"], "--ray-address is for --executor ray")):
        proc = run_cli("run", "--agent", "guess", "--tasks", str(tasks), "--out", str(tmp_path / "run"), *extra)
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr
        assert not (tmp_path / "run").exists()


def test_a_provider_refusal_on_a_worker_stops_the_run_in_one_line(bwrap: str, cluster: str, analytics_tasks: Path,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeOpenAI(script=lambda body, n: {"kind": "status", "status": 401}) as fake:
        proc = _deskbench("run", "--agent", "analyst-agent", "--tasks", str(analytics_tasks), "--out", str(out),
                          "--model", f"openai-compat/agent@{fake.base_url}", "--executor", "ray",
                          "--ray-address", cluster, cache=tmp_path / "cache")
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err[-2000:]
    assert "refused the request" in err and "Traceback" not in err
    assert _stored(out) == []  # nothing recorded for the episodes the refusal stopped


def test_limits_hold_on_ray_each_episode_on_its_worker_the_run_on_the_driver(cluster: str, tmp_path: Path) -> None:
    """runs/budget.py on Ray: an episode's token limit stops it on its worker (a stored "limit");
    the run's is counted as episodes are stored, so no episode starts once it is reached."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "question": f"Which year, {i}?", "answer_variants": ["2020"]})
                             + "\n" for i in range(5)), encoding="utf-8")

    def answer(body: dict[str, Any], n: int) -> dict[str, Any]:  # 100 input + 20 output tokens a reply
        return {"kind": "text", "text": json.dumps({"answer": ["2020"], "citations": []})}

    with FakeOpenAI(script=answer) as fake:
        model = f"openai-compat/agent@{fake.base_url}"
        base = ["run", "--agent", "guess", "--tasks", str(tasks), "--model", model, "--executor", "ray",
                "--ray-address", cluster, "--concurrency", "1"]
        _finish(_deskbench(*base, "--out", str(tmp_path / "episode"), "--token-budget", "episode=100",
                           cache=tmp_path / "cache"))
        err = _finish(_deskbench(*base, "--out", str(tmp_path / "run"), "--token-budget", "250",
                                 cache=tmp_path / "cache"))
    con = sqlite3.connect(tmp_path / "episode" / "run.sqlite")
    assert con.execute("SELECT DISTINCT status, error FROM episodes").fetchall() == [
        ("limit", "episode token limit reached: 120 tokens of --token-budget episode=100")]
    assert len(_stored(tmp_path / "run")) == 3  # 120 tokens an episode: the third starts at 240 and ends at 360
    assert ("budget reached: spent 360 tokens of --token-budget 250 (run total ? (360 tokens)); 3 of 5 episodes "
            "stored, 1 in flight finished, 2 not started") in err
    refused = run_cli("run", "--agent", "guess", "--tasks", str(tasks), "--out", str(tmp_path / "cancel"),
                      "--executor", "ray", "--token-budget", "250", "--on-budget", "cancel")
    assert refused.returncode == 2 and "--on-budget cancel is for --executor local" in refused.stderr
