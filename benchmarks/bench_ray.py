#!/usr/bin/env python
"""The Ray executor against the local one on the same scripted analytics workload.

What is measured (one run, this machine):

1. A generated analytics task set, `--episodes` episodes (default 200: tasks x attempts), each
   making `--calls` execute_code calls (default 5) in the real bubblewrap sandbox before it
   answers, against the scripted model server (tests/fake_openai.py) with a fixed latency per
   call (`--latency`, default 0.05 s).
2. `deskbench run` with the local executor (`--concurrency 4`: 4 episodes in flight) and with
   `--executor ray` on a Ray head this benchmark starts on 127.0.0.1 (`--num-cpus 2`, 2 `sandbox`
   slots: 2 EpisodeWorker processes, 2 episodes each; `--concurrency 4` on both, which means 4
   episodes in flight and 4 model slots on either executor): wall time,
   seconds per episode. Each run is a child process timed from start to exit.
3. The fixed cost of each path: the same command again on the finished run (nothing to do: the
   process start, the prepare, and for Ray joining the cluster).
4. The driver's commit cost per episode (the store write every executor does, serially on the
   driver): the finished run's episodes recorded again into a fresh store.
5. Whether both stores are the same (runs/canonical.py `canonical_dump`).

Results go to benchmarks/results/ray.json; the table in docs/benchmarks.md (Cluster) is updated.

    .venv/bin/python benchmarks/bench_ray.py                    # 200 episodes x 5 calls
    .venv/bin/python benchmarks/bench_ray.py --episodes 20      # smoke run

Needs the `ray` and `bench` extras and bubblewrap.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

import psutil  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from readme_table import update_table  # noqa: E402

from deskbench.runs.canonical import canonical_dump  # noqa: E402
from deskbench.runs.store import RunStore  # noqa: E402

ENV = {"RAY_USAGE_STATS_ENABLED": "0"}
RAY = str(Path(sys.executable).with_name("ray"))
DEFAULT_OUT = REPO / "benchmarks" / "results" / "ray.json"


def script_for(calls: int):  # noqa: ANN201  (the scripted model: `calls` programs, then the answer)
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        called = sum(m["role"] == "tool" for m in body["messages"])
        if called >= calls:
            return {"kind": "text", "text": "Final answer: 42"}
        code = f"import json\nprint(json.dumps({{'round': {called}, 'sum': sum(range(1000))}}))"
        return {"kind": "tool", "id": f"call_{called}", "name": "execute_code",
                "arguments": json.dumps({"code": code})}
    return script


@contextlib.contextmanager
def ray_head(cpus: int) -> Iterator[str]:
    temp_dir = tempfile.mkdtemp(prefix="rb", dir="/tmp")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                           "--num-cpus", str(cpus), "--resources", json.dumps({"sandbox": cpus}),
                           "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", temp_dir],
                          capture_output=True, text=True, env={**os.environ, **ENV}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    try:
        yield f"127.0.0.1:{port}"
    finally:
        procs = [p for p in psutil.process_iter(["cmdline"]) if any(temp_dir in c for c in p.info["cmdline"] or [])]
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        psutil.wait_procs(procs, timeout=10)
        shutil.rmtree(temp_dir, ignore_errors=True)


BUSY: list[float] = []  # the machine's busy CPU-seconds (every process: user + system) of each timed run


def _busy() -> float:
    t = psutil.cpu_times()
    return t.user + t.system + t.nice


def timed_run(args: list[str], cache: Path) -> float:
    started, busy = time.perf_counter(), _busy()
    proc = subprocess.run([sys.executable, "-m", "deskbench.cli", "run", *args, "--quiet"], capture_output=True,
                          text=True, env={**os.environ, **ENV, "DESKBENCH_CACHE_DIR": str(cache)})
    seconds = time.perf_counter() - started
    BUSY.append(_busy() - busy)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return seconds


def commit_seconds(run_dir: Path, scratch: Path) -> float:
    """Per episode: the finished run's episodes recorded again into a fresh store."""
    source = RunStore(run_dir, create=False)
    episodes = source.episodes()
    transcripts = {(e.task_id, e.attempt): source.transcript(e.task_id, e.system, e.attempt) for e in episodes}
    target = RunStore(scratch)
    target.save_tasks(source.all_tasks())
    from deskbench.runs.transcript import Transcript

    started = time.perf_counter()
    for e in episodes:
        doc = transcripts[(e.task_id, e.attempt)]
        t = Transcript()
        if doc is not None:
            t.events = list(doc.events)  # type: ignore[attr-defined]
        target.record(e, transcript=t)
    return (time.perf_counter() - started) / max(1, len(episodes))


def markdown_table(report: dict[str, Any]) -> str:
    """The docs/benchmarks.md table from a results file, with Ray against the anchor (the local executor) as
    ratios."""
    results, p = report["results"], report["params"]
    L, R = results["local"], results["ray"]
    rows = [("local (1 process, 4 in flight)", L, "1.00x", "1.00x"),
            ("ray (head, 2 workers, 4 in flight)", R, f"{R['per_episode_less_fixed'] / L['per_episode_less_fixed']:.2f}x",
             f"{R['cpu_per_episode'] / L['cpu_per_episode']:.2f}x")]
    return "\n".join([
        "| executor | wall (s) | fixed cost (s) | s / episode | s / episode, fixed cost out | CPU-s / episode (machine) "
        "| time vs local | CPU vs local |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {name} | {r['seconds']:.1f} | {r['fixed_seconds']:.1f} | {r['per_episode']:.3f} | "
          f"{r['per_episode_less_fixed']:.3f} | {r['cpu_per_episode']:.3f} | {t} | {c} |" for name, r, t, c in rows),
        "",
        f"{p['episodes']} analytics episodes x {p['execute_code_calls']} execute_code calls (bubblewrap), scripted model "
        f"{p['model_latency_s'] * 1000:.0f} ms per call, {report['machine']['cpus']} cores. Ray overhead per episode: "
        f"{report['ray_overhead_per_episode_s'] * 1000:+.0f} ms; the driver's commit per episode: "
        f"{report['driver_commit_per_episode_s'] * 1000:.1f} ms; stores equal (canonical dump): {report['stores_equal']}.",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--work", type=Path, default=REPO / "benchmarks" / "work" / "ray")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--table", action="store_true", help="only rebuild the docs/benchmarks.md table from the --out file")
    a = ap.parse_args()
    if a.table:
        update_table("ray", "", markdown_table(json.loads(a.out.read_text())))
        return
    from deskbench.tracks.analytics.generate.tasks import generate_analytics

    shutil.rmtree(a.work, ignore_errors=True)
    tasks_n = min(a.episodes, 50)
    attempts = -(-a.episodes // tasks_n)
    generate_analytics(a.work / "tasks", tasks=tasks_n, seed=7)
    tasks = a.work / "tasks" / "tasks.jsonl"
    episodes = tasks_n * attempts
    script = script_for(a.calls)
    results: dict[str, Any] = {}
    with FakeOpenAI(script=script, latency=a.latency) as fake:
        model = f"openai-compat/agent@{fake.base_url}"
        common = ["--agent", "analyst-agent", "--tasks", str(tasks), "--model", model, "--attempts", str(attempts),
                  "--max-rounds", str(a.calls + 1)]
        local = [*common, "--out", str(a.work / "local"), "--concurrency", "4"]
        results["local"] = {"seconds": timed_run(local, a.work / "cache-l"), "cpu_seconds": BUSY[-1],
                            "fixed_seconds": timed_run(local, a.work / "cache-l")}
        with ray_head(2) as address:
            ray = [*common, "--out", str(a.work / "ray"), "--concurrency", "4", "--executor", "ray",
                   "--ray-address", address]
            results["ray"] = {"seconds": timed_run(ray, a.work / "cache-r"), "cpu_seconds": BUSY[-1],
                              "fixed_seconds": timed_run(ray, a.work / "cache-r")}
        results["model_calls"] = len(fake.requests)
    for r in results.values():
        if isinstance(r, dict):
            r["per_episode"] = r["seconds"] / episodes
            r["per_episode_less_fixed"] = (r["seconds"] - r["fixed_seconds"]) / episodes
            r["cpu_per_episode"] = r["cpu_seconds"] / episodes
    overhead = results["ray"]["per_episode_less_fixed"] - results["local"]["per_episode_less_fixed"]
    commit = commit_seconds(a.work / "local", a.work / "commit")
    same = canonical_dump(a.work / "local") == canonical_dump(a.work / "ray")
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "ray": __import__("ray").__version__,
        "params": {"episodes": episodes, "tasks": tasks_n, "attempts": attempts, "execute_code_calls": a.calls,
                   "model_latency_s": a.latency, "concurrency": 4, "ray_workers": 2},
        "results": results, "ray_overhead_per_episode_s": overhead, "driver_commit_per_episode_s": commit,
        "stores_equal": same,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=2) + "\n")
    table = markdown_table(report)
    print(table)
    if a.out == DEFAULT_OUT:  # a smoke run or a variant elsewhere leaves the docs/benchmarks.md table alone
        update_table("ray", "", table)


if __name__ == "__main__":
    main()
