#!/usr/bin/env python
"""Transcripts benchmark: what keeping every episode's transcript costs on disk and in CPU.

bm25-agent episodes of 10 steps (9 searches, each with its own query so different pages come
back, then the answer; top_k 5) run against a fake OpenAI-compatible model in its own process
(tests/fake_openai.py `serve_async`), with real tantivy searches, OpenAIChat on the wire (the
openai SDK client, the POST on aiohttp) and the run store committing every episode with its
transcript. Measured, in one run:

1. Store size. The growth of the run's SQLite file (the db file + its WAL after
   `PRAGMA wal_checkpoint(TRUNCATE)`) per episode and per 1,000 episodes; the mean compressed
   transcript per episode (length(body) in `transcripts`) and its raw JSON size (the ratio is
   what zlib saves). Page text in the messages (view "text") was the worst case for size; it is
   measured on two corpora: the sample corpus (9 short pages, 160-300 characters of text) and a
   corpus of full text pages (bench_corpus.py's generator: 300-500 words, ~2.7 KB of text a
   page). A page's text, like a page image (view "image"), is stored by reference to the corpus
   (`pagetext:<doc>#<page>` with its sha256; runs/transcript.py `expand` shows it again). The
   same runs without transcripts (the anchor below) give the store's growth without them. The
   growth is counted in SQLite pages (4 KB), so a small transcript costs a page or more.
2. CPU. The harness process's CPU time (time.process_time: every thread; the fake model's
   process is not counted) per model call with transcripts as shipped, against the anchor: the
   same run with transcript collection switched off (in this process only: Transcript.model_call
   and .tool are no-ops, and the store encodes and writes no transcript), runs alternating,
   median of --repeats. The absolute CPU per call is set against Inspect AI's 7.5-14 ms per call,
   measured elsewhere on the same fake model (not in this run).

KB and MB are 1,000 and 1,000,000 bytes, so KB per episode and MB per 1,000 episodes are the
same number.

Run: .venv/bin/python benchmarks/bench_transcripts.py   (writes benchmarks/results/transcripts.json)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import re
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from bench_corpus import BUSINESS_WORDS, write_document  # noqa: E402
from fake_openai import serve_async  # noqa: E402
from readme_table import update_table  # noqa: E402

import deskbench.runs.store as run_store  # noqa: E402
from deskbench.agents.base import AgentContext, AgentSettings  # noqa: E402
from deskbench.corpus.extract import OcrSettings  # noqa: E402
from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest  # noqa: E402
from deskbench.models.openai_chat import OpenAIChat  # noqa: E402
from deskbench.models.resilient import ResilientModel  # noqa: E402
from deskbench.runs.store import RunStore  # noqa: E402
from deskbench.runs.transcript import CODEC, Transcript, decode, encode, expand  # noqa: E402
from deskbench.tracks.docqa.agents.bm25 import Bm25Agent  # noqa: E402
from deskbench.tracks.docqa.episodes import run_episodes  # noqa: E402
from deskbench.tracks.docqa.generate.sample import build_sample_corpus  # noqa: E402
from deskbench.tracks.docqa.tasks import DocQATask  # noqa: E402

DEFAULT_OUT = REPO / "benchmarks" / "results" / "transcripts.json"
STEPS = 10  # 9 searches, then the answer (bm25-agent's T)
TOP_K = 5
TARGET_KB = 50.0
INSPECT_LOW_MS, INSPECT_HIGH_MS = 7.5, 14.0
TARGET_CPU_MS = INSPECT_LOW_MS / 5
# The sample corpus answers these with different pages (1-5 of its 9); an episode takes 9 in a
# row from its own offset, so consecutive episodes differ too.
SAMPLE_QUERIES = ["library renovation", "riverton", "parks", "permit", "salmon OR risotto", "staff",
                  '"capital projects"', "report 2023", "town", "budget NOT 2022", "perm*", "council",
                  "menu", "overtime", "annual report 2022"]
# single words of its vocabulary, those that match at least TOP_K pages (so every search shows 5)
FULL_WORDS = list(dict.fromkeys(BUSINESS_WORDS))
FULL_DOCS, FULL_PAGES_PER_DOC = 20, 10


def make_script(queries: list[str]) -> Callable[[dict[str, Any], int], dict[str, Any]]:
    """The model's side: search STEPS - 1 times, then answer. The episode number comes from the
    question ("... (episode 17)")."""

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        searches = sum(1 for m in body["messages"] if m["role"] == "tool")
        if searches < STEPS - 1:
            question = next(m["content"] for m in body["messages"] if m["role"] == "user")
            match = re.search(r"episode (\d+)", question if isinstance(question, str) else json.dumps(question))
            episode = int(match.group(1)) if match else 0
            query = queries[(episode * 3 + searches) % len(queries)]
            return {"kind": "tool", "name": "search_documents", "arguments": json.dumps({"query": query})}
        answer = {"answer": ["420"], "citations": [{"file": "riverton-annual-report-2023.pdf", "page": 2}]}
        return {"kind": "tool", "name": "provide_answer", "arguments": json.dumps(answer)}

    return script


def _serve(script: Callable[..., Any], latency: float, port_out: Any, calls_out: Any, stop: Any) -> None:
    """The fake model in its own process (its own core, its own GIL), on one event loop."""

    async def go() -> None:
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        threading.Thread(target=lambda: (stop.wait(), loop.call_soon_threadsafe(done.set)), daemon=True).start()
        await serve_async(script, latency, port_out.put, done, counter)

    counter = [0]
    asyncio.run(go())
    calls_out.put(counter[0])


class _Server:
    """The fake model in a forked process, started and stopped around a block."""

    def __init__(self, script: Callable[..., Any], latency: float) -> None:
        ctx = multiprocessing.get_context("fork")
        self._urls, self._counts, self._stop = ctx.Queue(), ctx.Queue(), ctx.Event()
        self._proc = ctx.Process(target=_serve, args=(script, latency, self._urls, self._counts, self._stop),
                                 daemon=True)
        self.calls = 0

    def __enter__(self) -> str:
        self._proc.start()
        return str(self._urls.get(timeout=30))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.calls = int(self._counts.get(timeout=30))
        self._proc.join(timeout=10)


@contextmanager
def transcripts_off() -> Iterator[None]:
    """The anchor: no transcript collected, encoded or written (this process only, this block only).
    The store skips the transcript's row when the encoded body is None."""
    saved = (Transcript.model_call, Transcript.tool, Transcript.doc, run_store.encode)
    Transcript.model_call = lambda self, *a, **k: None  # type: ignore[method-assign]
    Transcript.tool = lambda self, *a, **k: None  # type: ignore[method-assign]
    Transcript.doc = lambda self: None  # type: ignore[method-assign,assignment,return-value]
    run_store.encode = lambda doc: None  # type: ignore[assignment,return-value]
    try:
        yield
    finally:
        Transcript.model_call, Transcript.tool, Transcript.doc, run_store.encode = saved  # type: ignore[method-assign]


def disk_bytes(path: Path) -> int:
    """The run's SQLite file and its WAL, after the WAL is checkpointed into the file."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    con.close()
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _kind(message: dict[str, Any]) -> str:
    role = message["role"]
    if role == "user" and isinstance(message["content"], list):
        return "page results (user message: label + page text refs or image refs)"
    return {"system": "system prompt", "user": "question / repair (user text)", "tool": "tool messages (result lists)",
            "assistant": "assistant messages in requests"}.get(role, role)


def breakdown(bodies: list[bytes]) -> dict[str, dict[str, float]]:
    """Where a transcript's bytes go: raw JSON bytes per episode by kind, and each kind compressed
    on its own (an upper bound of its share: zlib finds fewer repeats in a part alone)."""
    raw: dict[str, list[bytes]] = {}
    for body in bodies:
        doc = json.loads(zlib.decompress(body))
        parts: dict[str, list[bytes]] = {}
        for event in doc["events"]:
            if event["kind"] == "model_call":
                for m in event["messages"]:
                    parts.setdefault(_kind(m), []).append(json.dumps(m).encode())
                rest = {k: v for k, v in event.items() if k != "messages"}
                reply = rest.pop("reply", None)
                parts.setdefault("replies (message, usage, finish)", []).append(json.dumps(reply).encode())
                parts.setdefault("call envelope (options, model, times)", []).append(json.dumps(rest).encode())
            else:
                parts.setdefault("tool events (search hits with scores)", []).append(json.dumps(event).encode())
        for k, v in parts.items():
            raw.setdefault(k, []).append(b"".join(v))
    n = len(bodies)
    return {k: {"raw_kb": sum(map(len, v)) / n / 1000, "alone_compressed_kb": sum(len(zlib.compress(b, 6)) for b in v) / n / 1000}
            for k, v in sorted(raw.items(), key=lambda kv: -sum(map(len, kv[1])))}


def expanded(bodies: list[bytes], corpus: Any) -> dict[str, float]:
    """The transcripts as shown (`expand`: page texts read back from the corpus, sha256 checked):
    their raw JSON size per episode, and how many page texts could not be restored (must be 0)."""
    sizes, missing, restored = [], 0, 0
    for body in bodies:
        doc = expand(decode(CODEC, body), corpus)
        raw = doc.model_dump_json()
        sizes.append(len(raw.encode()))
        missing += raw.count('"missing":')
        restored += raw.count('"ref":"pagetext:')
    return {"raw_json_kb_per_episode": sum(sizes) / len(sizes) / 1000, "page_texts_restored": restored,
            "page_texts_missing": missing}


def encode_cost(bodies: list[bytes]) -> dict[str, float]:
    """CPU ms per episode of writing its transcript as the store does (encode: the JSON dump, then
    zlib), and of the zlib step alone, re-encoding the stored documents."""
    docs = [decode(CODEC, b) for b in bodies]
    raws = [zlib.decompress(b) for b in bodies]
    c0 = time.process_time()
    for doc in docs:
        encode(doc)
    c1 = time.process_time()
    for raw in raws:
        zlib.compress(raw, 6)
    c2 = time.process_time()
    return {"encode": (c1 - c0) / len(docs) * 1000, "zlib_only": (c2 - c1) / len(docs) * 1000}


def one_run(corpus: Any, queries: list[str], episodes: int, view: str, root: Path, *, on: bool, latency: float,
            concurrency: int, dpi: int, detail: bool = False) -> dict[str, Any]:
    tasks = [DocQATask(id=f"t{i}", question=f"What was the 2023 library renovation budget? (episode {i})",
                       answer_variants=[["420"]]) for i in range(episodes)]
    RunStore(root).close()
    path = root / RunStore.FILENAME
    before = disk_bytes(path)
    store = RunStore(root)
    server = _Server(make_script(queries), latency)
    with server as base_url:
        model = ResilientModel(OpenAIChat("fake", base_url=base_url, api_key="k", id="openai-compat/fake"),
                               concurrency=concurrency)
        ctx = AgentContext(model=model, corpus=corpus,
                           settings=AgentSettings(view=view, max_steps=STEPS, top_k=TOP_K, dpi=dpi))  # type: ignore[arg-type]

        async def go() -> tuple[float, float]:
            started, cpu_started = time.perf_counter(), time.process_time()
            with nullcontext() if on else transcripts_off():
                await run_episodes(tasks, Bm25Agent(), ctx, store, "bm25-agent:fake", concurrency=concurrency)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            await model.aclose()
            return wall, cpu

        wall, cpu = asyncio.run(go())
    eps = store.episodes()
    store.close()
    after = disk_bytes(path)
    con = sqlite3.connect(path)
    bodies = [r[0] for r in con.execute("SELECT body FROM transcripts")]
    blobs = con.execute("SELECT count(*), coalesce(sum(length(data)), 0) FROM blobs").fetchone()
    con.close()
    searches = [sum(1 for s in e.trajectory if s.kind == "tool_call") for e in eps]
    shown = [[tuple(p) for s in e.trajectory if s.kind == "tool_call" for p in s.result.get("pages", [])] for e in eps]
    pages, distinct = [len(x) for x in shown], [len(set(x)) for x in shown]
    out: dict[str, Any] = {
        "view": view, "transcripts": on, "episodes": episodes, "episodes_ok": sum(e.status == "ok" for e in eps),
        "model_calls": server.calls, "wall_s": wall, "cpu_s": cpu, "cpu_ms_per_call": cpu / server.calls * 1000,
        "searches_per_episode": statistics.mean(searches), "pages_shown_per_episode": statistics.mean(pages),
        "distinct_pages_per_episode": statistics.mean(distinct),
        "store_growth_bytes": after - before, "store_kb_per_episode": (after - before) / episodes / 1000,
        "transcripts_stored": len(bodies), "blobs": blobs[0], "blob_bytes": blobs[1],
    }
    if bodies:
        raw = [len(zlib.decompress(b)) for b in bodies]
        out |= {"transcript_kb_per_episode": sum(map(len, bodies)) / len(bodies) / 1000,
                "transcript_raw_json_kb_per_episode": sum(raw) / len(raw) / 1000,
                "transcript_kb_max": max(map(len, bodies)) / 1000,
                "compression_ratio": sum(raw) / sum(map(len, bodies))}
    if detail and bodies:
        out["breakdown_per_episode"] = breakdown(bodies)
        out["encode_cpu_ms_per_episode"] = encode_cost(bodies)
        out["expanded"] = expanded(bodies, corpus)
    return out


def build_corpus(root: Path, name: str) -> Any:
    pdfs = root / f"{name}-pdfs"
    if name == "sample":
        build_sample_corpus(pdfs)
    else:
        pdfs.mkdir(parents=True)
        for i in range(FULL_DOCS):
            write_document(0, 4000, i, FULL_PAGES_PER_DOC, str(pdfs))
    corpus = open_or_create(root / f"{name}-corpus")
    run_ingest(corpus, plan_ingest(corpus, [pdfs]), OcrSettings(mode="never"))
    return corpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=200, help="episodes per text-view run")
    ap.add_argument("--image-episodes", type=int, default=40,
                    help="episodes of the image-view run (every request carries its page images: slower)")
    ap.add_argument("--repeats", type=int, default=5, help="runs with and without transcripts, alternating")
    ap.add_argument("--latency", type=float, default=0.05, help="the fake model's seconds per call")
    ap.add_argument("--concurrency", type=int, default=32, help="episodes in flight")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="results JSON (the docs/benchmarks.md table is updated only for the default)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    common = {"latency": args.latency, "concurrency": args.concurrency, "dpi": 200}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpora = {"sample": build_corpus(root, "sample"), "full": build_corpus(root, "full")}
        full_queries = [w for w in FULL_WORDS if len(corpora["full"].search(w, TOP_K, snippets=False)) == TOP_K][:60]
        queries = {"sample": SAMPLE_QUERIES, "full": full_queries}
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {"on": [], "off": []} for name in corpora}
        for i in range(args.repeats):  # with and without transcripts alternate: both see the same machine state
            for name, corpus in corpora.items():
                for on in (True, False):
                    key = "on" if on else "off"
                    r = one_run(corpus, queries[name], args.episodes, "text", root / f"{name}-{key}{i}", on=on,
                                detail=on and i == 0, **common)  # type: ignore[arg-type]
                    runs[name][key].append(r)
                    print(f"{name} text transcripts {key} #{i}: {r['cpu_ms_per_call']:.3f} CPU ms/call, "
                          f"{r['store_kb_per_episode']:.1f} KB/episode, {r['wall_s']:.1f} s", file=sys.stderr)
        image = one_run(corpora["sample"], SAMPLE_QUERIES, args.image_episodes, "image", root / "image-on", on=True,
                        detail=True, **common)  # type: ignore[arg-type]
        image_off = one_run(corpora["sample"], SAMPLE_QUERIES, args.image_episodes, "image", root / "image-off",
                            on=False, **common)  # type: ignore[arg-type]
        full_page_chars = statistics.mean(len(t) for t in corpora["full"].page_texts(
            [(d, p) for d in sorted(p.name for p in (root / "full-pdfs").iterdir()) for p in range(1, FULL_PAGES_PER_DOC + 1)]))
        sample_page_chars = statistics.mean(len(t) for t in corpora["sample"].page_texts(
            [(d, p) for d, n in (("riverton-annual-report-2022.pdf", 3), ("riverton-annual-report-2023.pdf", 3),
                                 ("harbor-bistro-menu.pdf", 1), ("building-permit-BP-1043.pdf", 1),
                                 ("council-minutes-2023-02-scan.pdf", 1)) for p in range(1, n + 1)]))
    total_s = time.perf_counter() - t_start

    def med(rs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    summary: dict[str, Any] = {}
    for name in corpora:
        on, off = runs[name]["on"], runs[name]["off"]
        summary[name] = {
            "store_kb_per_episode": med(on, "store_kb_per_episode"),
            "store_kb_per_episode_without_transcripts": med(off, "store_kb_per_episode"),
            "transcript_kb_per_episode": med(on, "transcript_kb_per_episode"),
            "transcript_raw_json_kb_per_episode": med(on, "transcript_raw_json_kb_per_episode"),
            "compression_ratio": med(on, "compression_ratio"),
            "cpu_ms_per_call": med(on, "cpu_ms_per_call"), "cpu_ms_per_call_without_transcripts": med(off, "cpu_ms_per_call"),
            "cpu_ms_per_call_range": [min(r["cpu_ms_per_call"] for r in on), max(r["cpu_ms_per_call"] for r in on)],
            # runs alternate: the ratio of each pair, then the median (the machine's drift cancels within a pair)
            "cpu_ratio_on_off": statistics.median(a["cpu_ms_per_call"] / b["cpu_ms_per_call"] for a, b in zip(on, off, strict=True)),
            "pages_shown_per_episode": med(on, "pages_shown_per_episode"),
            "distinct_pages_per_episode": med(on, "distinct_pages_per_episode"),
            "breakdown_per_episode": on[0].get("breakdown_per_episode"),
            "encode_cpu_ms_per_episode": on[0].get("encode_cpu_ms_per_episode"),
            "expanded": on[0].get("expanded"),
        }
    summary["sample"]["page_text_chars_mean"] = sample_page_chars
    summary["full"]["page_text_chars_mean"] = full_page_chars
    summary["image"] = {k: image.get(k) for k in ("store_kb_per_episode", "transcript_kb_per_episode",
                                                  "transcript_raw_json_kb_per_episode", "compression_ratio",
                                                  "pages_shown_per_episode", "distinct_pages_per_episode", "blobs",
                                                  "breakdown_per_episode")}
    summary["image"]["store_kb_per_episode_without_transcripts"] = image_off["store_kb_per_episode"]
    s, f, im = summary["sample"], summary["full"], summary["image"]
    worst_kb = max(s["store_kb_per_episode"], f["store_kb_per_episode"], im["store_kb_per_episode"])
    cpu_on, cpu_full = s["cpu_ms_per_call"], f["cpu_ms_per_call"]
    result = {
        "benchmark": "transcripts", "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(), "cpus": os.cpu_count(), "load_average_after": os.getloadavg()[1], "episodes": args.episodes,
        "image_episodes": args.image_episodes, "steps_per_episode": STEPS, "top_k": TOP_K,
        "latency_s": args.latency, "concurrency": args.concurrency, "repeats": args.repeats, "total_s": total_s,
        "units": "KB = 1,000 bytes, MB = 1,000,000 bytes",
        "inspect_reference_cpu_ms_per_call": [INSPECT_LOW_MS, INSPECT_HIGH_MS],
        "summary": summary,
        "targets": {"store_kb_per_text_episode_lt_50": {"sample": s["store_kb_per_episode"] < TARGET_KB,
                                                        "full_pages": f["store_kb_per_episode"] < TARGET_KB},
                    "store_kb_per_image_episode_lt_50": im["store_kb_per_episode"] < TARGET_KB,
                    "cpu_ms_per_call_le_1.5": {"sample": cpu_on <= TARGET_CPU_MS, "full_pages": cpu_full <= TARGET_CPU_MS}},
        "runs": {"text": runs, "image": [image, image_off]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")

    def met(flag: bool) -> str:
        return "yes" if flag else "**no**"

    def size_rows(label: str, r: dict[str, Any], n: int) -> list[str]:
        return [
            f"| store size per episode (KB), {label}, {n} episodes; anchor: without transcripts | "
            f"{r['store_kb_per_episode']:.1f} | {r['store_kb_per_episode_without_transcripts']:.1f} | "
            f"{r['store_kb_per_episode'] / r['store_kb_per_episode_without_transcripts']:.1f}x | < 50 KB | "
            f"{met(r['store_kb_per_episode'] < TARGET_KB)} |",
            f"| of which the transcript, compressed (KB); anchor: its raw JSON | {r['transcript_kb_per_episode']:.1f} | "
            f"{r['transcript_raw_json_kb_per_episode']:.1f} | {r['compression_ratio']:.1f}x smaller | - | - |",
            *([f"| the transcript as shown (`expand`: page texts read back from the corpus, sha256 checked; "
               f"{x['page_texts_restored'] / n:.0f} an episode, {x['page_texts_missing']} not restored), raw JSON (KB); "
               f"anchor: as stored | {x['raw_json_kb_per_episode']:.1f} | {r['transcript_raw_json_kb_per_episode']:.1f} | "
               f"{x['raw_json_kb_per_episode'] / r['transcript_raw_json_kb_per_episode']:.1f}x | - | - |"]
              if (x := r.get("expanded")) and x["page_texts_restored"] else []),
        ]

    table = "\n".join([
        "| metric | deskbench | anchor | ratio | target | met |", "|---|--:|--:|--:|---|---|",
        *size_rows(f"text view, sample corpus ({s['page_text_chars_mean']:.0f} characters a page, "
                   f"{s['pages_shown_per_episode']:.0f} pages shown)", s, args.episodes),
        *size_rows(f"text view, full text pages ({f['page_text_chars_mean']:,.0f} characters a page, "
                   f"{f['pages_shown_per_episode']:.0f} pages shown, {f['distinct_pages_per_episode']:.0f} distinct)", f, args.episodes),
        *size_rows(f"image view, pages by reference ({im['pages_shown_per_episode']:.0f} pages shown)", im,
                   args.image_episodes),
        f"| store size per 1,000 episodes (MB): text sample / text full pages / image | "
        f"{s['store_kb_per_episode']:.1f} / {f['store_kb_per_episode']:.1f} / {im['store_kb_per_episode']:.1f} | "
        f"{s['store_kb_per_episode_without_transcripts']:.1f} / {f['store_kb_per_episode_without_transcripts']:.1f} / "
        f"{im['store_kb_per_episode_without_transcripts']:.1f} | - | - | - |",
        f"| harness CPU ms per model call, text view, sample corpus (median of {args.repeats}); anchor: transcripts "
        f"switched off (ratio: median over the alternating pairs) | {s['cpu_ms_per_call']:.2f} | "
        f"{s['cpu_ms_per_call_without_transcripts']:.2f} | {s['cpu_ratio_on_off']:.2f}x | - | - |",
        f"| the same, full text pages | {f['cpu_ms_per_call']:.2f} | {f['cpu_ms_per_call_without_transcripts']:.2f} | "
        f"{f['cpu_ratio_on_off']:.2f}x | - | - |",
        *[f"| harness CPU ms per model call with transcripts, {label} (range over the runs) | {r['cpu_ms_per_call']:.2f} "
          f"({r['cpu_ms_per_call_range'][0]:.2f}-{r['cpu_ms_per_call_range'][1]:.2f}) | Inspect AI "
          f"{INSPECT_LOW_MS:g}-{INSPECT_HIGH_MS:g} ms per call (measured elsewhere on the same fake model) | "
          f"{INSPECT_LOW_MS / r['cpu_ms_per_call']:.1f}x less | <= 1/5 of Inspect's lower bound (1.5 ms) | "
          f"{met(r['cpu_ms_per_call'] <= TARGET_CPU_MS)} |" for label, r in (("sample corpus", s), ("full text pages", f))],
    ])
    print(table)
    print(f"worst store size per episode: {worst_kb:.1f} KB; total {total_s:.0f} s", file=sys.stderr)
    if args.out != DEFAULT_OUT:  # a trial run: leave the docs/benchmarks.md table alone
        return 0
    ok = sum(r["episodes_ok"] for rs in runs.values() for k in rs.values() for r in k) + image["episodes_ok"] + \
        image_off["episodes_ok"]
    total = sum(r["episodes"] for rs in runs.values() for k in rs.values() for r in k) + 2 * args.image_episodes
    update_table("transcripts", f"Run of {result['timestamp'][:10]}, {os.cpu_count()} CPUs, {args.episodes} episodes "
                  f"a text-view run, {args.concurrency} in flight, {args.latency * 1000:.0f} ms model "
                  f"({ok}/{total} episodes ok), load average {result['load_average_after']:.1f} over the last 5 minutes "
                  "of the run. KB = 1,000 bytes.", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
