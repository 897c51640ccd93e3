#!/usr/bin/env python
"""Agent runtime benchmark: harness overhead per step and throughput under concurrency.

64 bm25-agent episodes run at once against a fake OpenAI-compatible model in its own process
(tests/fake_openai.py `serve_async`: one event loop, ~0.3 ms of CPU per request) answering every
call after a fixed 200 ms: each episode searches 4 times and then answers (5 model calls,
"steps"), with real tantivy searches on the sample corpus, page text shown (--view text), the
retry/usage wrapper, OpenAIChat on the wire (the openai SDK client, the POST on aiohttp) and the
run store committing every episode.
Measured, as the median of --repeats runs:

- throughput: model calls per second over the run, against the ideal 64 / latency (every call
  starting the moment the previous one of its episode ended; target >= 90%);
- harness overhead per step: the harness process's CPU time (all threads) per model call: the
  time the harness itself spends on a step, outside the model (target <= 2 ms);
- wall overhead per step (information): wall / steps - latency. On one event loop the 64
  episodes' CPU work is serialised, so this is about 64 x the CPU per step spread over the run;
- the CPU per request (sequential calls, same conversation size) of OpenAIChat as shipped (the
  POST on aiohttp directly, models/openai_wire.py) and of the same call through the openai SDK's
  generic POST (what OpenAIChat sent before, and still sends for a client the SDK must handle
  itself), against the anchor of a bare aiohttp POST of the same body in the same run;
- the throughput anchor: the same runs, alternating with the measured ones, with each model call
  a bare aiohttp POST instead of OpenAIChat (BareAiohttpChat): what the adapter costs the run;
- the throughput with 16 and 32 episodes in flight (where one event loop keeps up here).

Run: .venv/bin/python benchmarks/bench_runtime.py   (writes benchmarks/results/runtime.json)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fake_openai import serve_async  # noqa: E402
from readme_table import update_table  # noqa: E402

from deskbench.agents.base import AgentContext, AgentSettings  # noqa: E402
from deskbench.corpus.extract import OcrSettings  # noqa: E402
from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest  # noqa: E402
from deskbench.models.capabilities import capabilities  # noqa: E402
from deskbench.models.openai_chat import OpenAIChat, parse_completion, request_kwargs  # noqa: E402
from deskbench.models.resilient import ResilientModel  # noqa: E402
from deskbench.models.types import ChatRequest, ChatResponse  # noqa: E402
from deskbench.runs.store import RunStore  # noqa: E402
from deskbench.tracks.docqa.agents.bm25 import Bm25Agent  # noqa: E402
from deskbench.tracks.docqa.episodes import run_episodes  # noqa: E402
from deskbench.tracks.docqa.generate.sample import build_sample_corpus  # noqa: E402
from deskbench.tracks.docqa.tasks import DocQATask  # noqa: E402

DEFAULT_OUT = REPO / "benchmarks" / "results" / "runtime.json"
SCALING = (16, 32)  # fewer episodes in flight, to show where one event loop keeps up
QUERIES = ["library renovation", '"capital projects"', "parks NOT 2022", "perm*"]


def script(body: dict[str, Any], n: int) -> dict[str, Any]:
    searches = sum(1 for m in body["messages"] if m["role"] == "tool")
    if searches < len(QUERIES):
        return {"kind": "tool", "name": "search_documents", "arguments": json.dumps({"query": QUERIES[searches]})}
    answer = {"answer": ["420"], "citations": [{"file": "riverton-annual-report-2023.pdf", "page": 2}]}
    return {"kind": "tool", "name": "provide_answer", "arguments": json.dumps(answer)}


def _serve(latency: float, port_out: Any, calls_out: Any, stop: Any) -> None:
    """The fake model in its own process (its own core, its own GIL), on one event loop."""

    async def go() -> None:
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        threading.Thread(target=lambda: (stop.wait(), loop.call_soon_threadsafe(done.set)), daemon=True).start()
        await serve_async(script, latency, port_out.put, done, counter)

    counter = [0]
    asyncio.run(go())
    calls_out.put(counter[0])


async def _request_cpu(base_url: str, n: int = 300) -> tuple[float, float, float]:
    """CPU ms per request: through OpenAIChat (its direct POST), through OpenAIChat on the SDK's
    generic POST, and a bare aiohttp POST (the anchor)."""
    import aiohttp

    from deskbench.models.types import Message, TextPart

    pages = [TextPart(text="Town of Riverton budget line " * 12) for _ in range(10)]
    req = ChatRequest(messages=[Message(role="system", content="s" * 2000), Message(role="user", content="q"),
                                *[Message(role="user", content=pages) for _ in range(2)]], temperature=0.0)
    per_request: list[float] = []
    for direct in (True, False):
        model = OpenAIChat("fake", base_url=base_url, api_key="k")
        if not direct:
            model._direct = None  # the SDK's path
        for _ in range(20):
            await model.complete(req)
        c0 = time.process_time()
        for _ in range(n):
            await model.complete(req)
        per_request.append((time.process_time() - c0) / n * 1000)
        await model.aclose()
    async with aiohttp.ClientSession() as session:
        async def bare() -> None:
            body = json.dumps({"model": "fake", **request_kwargs(req, model.caps, model.id)}).encode()
            async with session.post(f"{base_url}/chat/completions", data=body,
                                    headers={"Authorization": "Bearer k", "Content-Type": "application/json"}) as r:
                json.loads(await r.read())
        for _ in range(20):
            await bare()
        c0 = time.process_time()
        for _ in range(n):
            await bare()
        anchor = (time.process_time() - c0) / n * 1000
    return per_request[0], per_request[1], anchor


class BareAiohttpChat:
    """The anchor for the throughput: the same harness with OpenAIChat taken out, each call a bare
    aiohttp POST of the same body parsed by the same `parse_completion` (no SDK client, headers,
    proxy or error mapping). Not a deskbench adapter; it measures what the adapter costs the run."""

    def __init__(self, base_url: str) -> None:
        self.id = "openai-compat/fake"
        self.caps = capabilities(self.id)
        self._url = f"{base_url}/chat/completions"
        self._session: Any = None

    async def complete(self, request: ChatRequest) -> ChatResponse:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession()
        body = json.dumps({"model": "fake", **request_kwargs(request, self.caps, self.id)}).encode()
        async with self._session.post(self._url, data=body, headers={"Authorization": "Bearer k",
                                                                     "Content-Type": "application/json"}) as r:
            return parse_completion(json.loads(await r.read()), "fake")

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None


class _Server:
    """The fake model in a forked process, started and stopped around a block."""

    def __init__(self, latency: float) -> None:
        ctx = multiprocessing.get_context("fork")
        self._urls, self._counts, self._stop = ctx.Queue(), ctx.Queue(), ctx.Event()
        self._proc = ctx.Process(target=_serve, args=(latency, self._urls, self._counts, self._stop), daemon=True)
        self.calls = 0

    def __enter__(self) -> str:
        self._proc.start()
        return str(self._urls.get(timeout=30))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.calls = int(self._counts.get(timeout=30))
        self._proc.join(timeout=10)


def _one_run(corpus: Any, episodes: int, latency: float, root: Path, profile: Path | None,
             anchor: bool = False) -> dict[str, Any]:
    tasks = [DocQATask(id=f"t{i}", question="What was the 2023 library renovation budget?",
                       answer_variants=[["420"]]) for i in range(episodes)]
    store = RunStore(root)
    server = _Server(latency)
    with server as base_url:
        inner: Any = BareAiohttpChat(base_url) if anchor else OpenAIChat(
            "fake", base_url=base_url, api_key="k", id="openai-compat/fake")
        model = ResilientModel(inner, concurrency=episodes)
        ctx = AgentContext(model=model, corpus=corpus, settings=AgentSettings(view="text", max_steps=10))

        async def go() -> tuple[float, float]:
            started, cpu_started = time.perf_counter(), time.process_time()
            await run_episodes(tasks, Bm25Agent(), ctx, store, "bm25-agent:fake", concurrency=episodes)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            await model.aclose()
            return wall, cpu

        if profile:
            import cProfile

            # CPU time of the event loop's thread, not wall time: on a shared machine a wall-clock
            # profile charges time spent preempted to whatever syscall was running (a connect, a send)
            with cProfile.Profile(time.thread_time) as prof:
                wall, cpu = asyncio.run(go())
            prof.dump_stats(profile)
        else:
            wall, cpu = asyncio.run(go())
    eps = store.episodes()
    store.close()
    by_step: dict[int, list[float]] = {}
    for e in eps:
        for i, s in enumerate(x for x in e.trajectory if x.kind == "model_call"):
            by_step.setdefault(i + 1, []).append(s.seconds)
    return {"wall_s": wall, "cpu_s": cpu, "model_calls": server.calls, "episodes_ok": sum(e.status == "ok" for e in eps),
            "model_call_seconds_p50_by_step": {k: sorted(v)[len(v) // 2] for k, v in sorted(by_step.items())}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", type=Path,
                    help="write a cProfile (CPU time of the event-loop thread) of the (last) run phase of the harness here")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results JSON (the docs/benchmarks.md table is updated only for the default)")
    args = ap.parse_args()
    steps = len(QUERIES) + 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_sample_corpus(root / "pdfs")
        corpus = open_or_create(root / "corpus")
        run_ingest(corpus, plan_ingest(corpus, [root / "pdfs"]), OcrSettings(mode="never"))
        runs, anchors = [], []
        for i in range(args.repeats):  # OpenAIChat and anchor alternate: both see the same machine state
            runs.append(_one_run(corpus, args.episodes, args.latency, root / f"run{i}", args.profile))
            anchors.append(_one_run(corpus, args.episodes, args.latency, root / f"anchor{i}", None, anchor=True))
        scaling = {n: [_one_run(corpus, n, args.latency, root / f"scale{n}-{i}", None) for i in range(args.repeats)]
                   for n in SCALING if n != args.episodes}
        with _Server(0.0) as base_url:
            direct_ms, sdk_ms, anchor_ms = asyncio.run(_request_cpu(base_url))
    ideal = args.episodes / args.latency

    def median_share(rs: list[dict[str, Any]], episodes: int) -> float:
        return statistics.median(r["model_calls"] / r["wall_s"] / (episodes / args.latency) for r in rs)

    anchor_share = median_share(anchors, args.episodes)
    anchor_cpu = statistics.median(r["cpu_s"] / r["model_calls"] * 1000 for r in anchors)
    scaling_shares = {n: median_share(rs, n) for n, rs in scaling.items()}
    shares = sorted(r["model_calls"] / r["wall_s"] / ideal for r in runs)
    cpus = sorted(r["cpu_s"] / r["model_calls"] * 1000 for r in runs)
    walls = sorted((r["wall_s"] / steps - args.latency) * 1000 for r in runs)
    mid = len(runs) // 2
    share, cpu_ms, wall_ms = shares[mid], cpus[mid], walls[mid]
    ok = min(r["episodes_ok"] for r in runs)
    result = {
        "benchmark": "agent runtime", "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(), "cpus": os.cpu_count(), "load_average_after": os.getloadavg()[1], "episodes": args.episodes,
        "steps_per_episode": steps, "latency_s": args.latency, "repeats": args.repeats,
        "ideal_calls_per_s": ideal, "throughput_calls_per_s": share * ideal, "throughput_share_of_ideal": share,
        "harness_cpu_ms_per_step": cpu_ms, "wall_overhead_ms_per_step": wall_ms,
        "request_cpu_ms": direct_ms, "sdk_request_cpu_ms": sdk_ms, "bare_aiohttp_request_cpu_ms": anchor_ms,
        "anchor_bare_post": {"throughput_share_of_ideal": anchor_share, "harness_cpu_ms_per_step": anchor_cpu,
                             "runs": anchors},
        "scaling_share_of_ideal_by_episodes": {str(n): v for n, v in scaling_shares.items()},
        "runs": runs,
        "targets": {"throughput_share_ge_0.9": share >= 0.9, "harness_cpu_per_step_le_2ms": cpu_ms <= 2.0},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")

    def met(flag: bool) -> str:
        return "yes" if flag else "**no**"

    table = "\n".join([
        "| metric | deskbench | ideal / anchor | share / ratio | target | met |", "|---|--:|--:|--:|---|---|",
        f"| throughput, {args.episodes} bm25-agent episodes x {steps} steps, {args.latency * 1000:.0f} ms model "
        f"(calls/s, median of {args.repeats}) | {share * ideal:.0f} | {ideal:.0f} | {share:.0%} | >= 90% | "
        f"{met(share >= 0.9)} |",
        f"| harness overhead per step: CPU ms per model call (all threads) | {cpu_ms:.2f} | 0 | - | <= 2 ms | "
        f"{met(cpu_ms <= 2.0)} |",
        f"| wall time per step beyond the model's latency (ms; ~64 x the CPU per step, serialised) | "
        f"{wall_ms:.0f} | 0 | - | - | - |",
        f"| CPU ms per request through OpenAIChat (its direct POST), anchor a bare aiohttp POST | {direct_ms:.2f} | "
        f"{anchor_ms:.2f} | {direct_ms / anchor_ms:.1f}x | - | - |",
        f"| the same request through the openai SDK's generic POST (OpenAIChat's path before), anchor a bare "
        f"aiohttp POST | {sdk_ms:.2f} | {anchor_ms:.2f} | {sdk_ms / anchor_ms:.1f}x | - | - |",
        f"| throughput share, anchor: the same run with a bare aiohttp POST in place of OpenAIChat "
        f"(CPU {cpu_ms:.2f} vs {anchor_cpu:.2f} ms a step) | {share:.0%} | {anchor_share:.0%} | "
        f"{share / anchor_share:.2f}x | - | - |",
        *[f"| throughput share with {n} episodes in flight (OpenAIChat, median of {args.repeats}) | {v:.0%} | - | - | "
          f">= 90% | {met(v >= 0.9)} |" for n, v in sorted(scaling_shares.items())],
    ])
    print(table)
    if args.out != DEFAULT_OUT:  # a trial run: leave the docs/benchmarks.md table alone
        return 0
    update_table("runtime", f"Run of {result['timestamp'][:10]}, {os.cpu_count()} CPUs, load average "
                  f"{result['load_average_after']:.1f} over the last 5 minutes of the run (other work on the machine "
                  f"slows the wall-time rows) ({ok}/{args.episodes} episodes ok in every run).", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
