#!/usr/bin/env python
"""Agent runtime benchmark: harness overhead per step and throughput under concurrency.

64 bm25-agent episodes run at once against the fault-injection server (tests/fake_openai.py)
answering every call after a fixed 200 ms: each episode searches 4 times and then answers (5
model calls, "steps"), with real tantivy searches on a small generated corpus, page text shown
(--view text), the retry/usage wrapper and the run store committing every episode. Measured:

- throughput: model calls per second over the run, against the ideal 64 x steps / (steps x latency),
  i.e. 64 / latency (target >= 90%);
- harness overhead per step: (wall time / steps per episode) - latency, the time an episode spends
  per step outside the model call (target <= 2 ms).

Run: .venv/bin/python benchmarks/bench_runtime.py   (writes benchmarks/results/runtime.json)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fake_openai import FakeOpenAI  # noqa: E402

from deskbench.agents.base import AgentContext, AgentSettings  # noqa: E402
from deskbench.agents.bm25 import Bm25Agent  # noqa: E402
from deskbench.corpus.extract import OcrSettings  # noqa: E402
from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest  # noqa: E402
from deskbench.generate.sample import build_sample_corpus  # noqa: E402
from deskbench.models.openai_chat import OpenAIChat  # noqa: E402
from deskbench.models.resilient import ResilientModel  # noqa: E402
from deskbench.runs.runner import run_episodes  # noqa: E402
from deskbench.runs.store import RunStore  # noqa: E402
from deskbench.tasks.docqa import DocQATask  # noqa: E402

QUERIES = ["library renovation", '"capital projects"', "parks NOT 2022", "perm*"]


def script(body: dict[str, Any], n: int) -> dict[str, Any]:
    searches = sum(1 for m in body["messages"] if m["role"] == "tool")
    if searches < len(QUERIES):
        return {"kind": "tool", "name": "search_documents", "arguments": json.dumps({"query": QUERIES[searches]})}
    answer = {"answer": ["420"], "citations": [{"file": "riverton-annual-report-2023.pdf", "page": 2}]}
    return {"kind": "tool", "name": "provide_answer", "arguments": json.dumps(answer)}


def _serve(latency: float, port_out: Any, calls_out: Any, stop: Any) -> None:
    """The fake model in its own process, so its threads do not share the harness's GIL."""
    with FakeOpenAI(script=script, latency=latency) as fake:
        port_out.put(fake.base_url)
        stop.wait()
        calls_out.put(len(fake.requests))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--profile", type=Path, help="write a cProfile of the run phase (the harness process) here")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "runtime.json")
    args = ap.parse_args()
    steps = len(QUERIES) + 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_sample_corpus(root / "pdfs")
        corpus = open_or_create(root / "corpus")
        run_ingest(corpus, plan_ingest(corpus, [root / "pdfs"]), OcrSettings(mode="never"))
        tasks = [DocQATask(id=f"t{i}", question="What was the 2023 library renovation budget?",
                           answer_variants=[["420"]]) for i in range(args.episodes)]
        store = RunStore(root / "run")
        ctx_mp = multiprocessing.get_context("fork")
        urls, counts, stop = ctx_mp.Queue(), ctx_mp.Queue(), ctx_mp.Event()
        server = ctx_mp.Process(target=_serve, args=(args.latency, urls, counts, stop), daemon=True)
        server.start()
        base_url = urls.get(timeout=30)
        try:
            model = ResilientModel(OpenAIChat("fake", base_url=base_url, api_key="k", id="openai-compat/fake"),
                                   concurrency=args.episodes)
            ctx = AgentContext(model=model, corpus=corpus, settings=AgentSettings(view="text", max_steps=10))

            async def go() -> tuple[float, float]:
                started, cpu_started = time.perf_counter(), time.process_time()
                await run_episodes(tasks, Bm25Agent(), ctx, store, "bm25-agent:fake", concurrency=args.episodes)
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
                await model.aclose()
                return wall, cpu

            if args.profile:
                import cProfile

                with cProfile.Profile() as prof:
                    wall, cpu = asyncio.run(go())
                prof.dump_stats(args.profile)
            else:
                wall, cpu = asyncio.run(go())
        finally:
            stop.set()
            calls = counts.get(timeout=30)
            server.join(timeout=10)
        episodes = store.episodes()
    ok = sum(e.status == "ok" for e in episodes)
    call_seconds = sorted(s.seconds for e in episodes for s in e.trajectory if s.kind == "model_call")
    ideal_throughput = args.episodes / args.latency
    throughput = calls / wall
    overhead_ms = (wall / steps - args.latency) * 1000
    result = {
        "benchmark": "agent runtime", "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(), "episodes": args.episodes, "steps_per_episode": steps,
        "latency_s": args.latency, "model_calls": calls, "episodes_ok": ok, "wall_s": wall,
        "throughput_calls_per_s": throughput, "ideal_calls_per_s": ideal_throughput,
        "throughput_share_of_ideal": throughput / ideal_throughput,
        "overhead_ms_per_step": overhead_ms,
        "harness_cpu_ms_per_step": cpu / calls * 1000,
        "model_call_seconds_p50": call_seconds[len(call_seconds) // 2] if call_seconds else None,
        "model_call_seconds_max": call_seconds[-1] if call_seconds else None,
        "targets": {"throughput_share_ge_0.9": throughput / ideal_throughput >= 0.9,
                    "overhead_le_2ms": overhead_ms <= 2.0},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    table = "\n".join([
        "| metric | deskbench | ideal | share | target | met |", "|---|--:|--:|--:|---|---|",
        f"| throughput, {args.episodes} bm25-agent episodes x {steps} steps, {args.latency * 1000:.0f} ms model "
        f"(calls/s) | {throughput:.0f} | {ideal_throughput:.0f} | {throughput / ideal_throughput:.0%} | >= 90% | "
        f"{'yes' if result['targets']['throughput_share_ge_0.9'] else '**no**'} |",
        f"| harness overhead per step (ms) | {overhead_ms:.1f} | 0 | - | <= 2 ms | "
        f"{'yes' if result['targets']['overhead_le_2ms'] else '**no**'} |",
    ])
    print(table)
    readme = REPO / "README.md"
    text = readme.read_text()
    begin, end = "<!-- bench:runtime -->", "<!-- /bench:runtime -->"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        readme.write_text(f"{head}{begin}\nRun of {result['timestamp'][:10]} ({ok}/{args.episodes} episodes ok).\n\n"
                          f"{table}\n{end}{rest.split(end, 1)[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
