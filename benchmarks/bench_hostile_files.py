#!/usr/bin/env python
"""Hostile inputs, file rows (issue 22 item 1): each probe before and after untrusted files were
parsed under limits (deskbench/untrusted).

Every probe meets the bomb where a user does, the CLI or the server in a subprocess, watched by
tests/hostile_watch.py (wall time, peak RSS of the largest process of the tree, sampled every
20 ms). "before" runs the same probes against another checkout's src/ (--before-src, e.g.
`git archive 769866e src | tar -x -C /tmp/before`), stopped at 60 s or a 5 GB tree; "after"
against this one. The bombs are tests/hostile_bombs.py's, generated here.

Run: .venv/bin/python benchmarks/bench_hostile_files.py [--before-src /tmp/before/src]
Writes benchmarks/results/hostile_files.json (rows: probe, before, after with verdict, seconds,
peak RSS MB and whether the bound held, and the bound).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import hostile_bombs as bombs  # noqa: E402
from hostile_common import Env, print_rows, run_identity, run_probes  # noqa: E402
from hostile_watch import RSS_MB, SECONDS, Bounded, Server, bounded_cli  # noqa: E402

Probe = Callable[[Path, Env], dict[str, Any]]
KILL_SECONDS = 60.0
KILL_TREE_MB = 5120.0
BOUND = f"< {SECONDS:g} s; every process < {RSS_MB / 1024:g} GB"


def _cli(env: Env, *args: str) -> Bounded:
    return bounded_cli(*args, kill_after=KILL_SECONDS, env=env, kill_rss_mb=KILL_TREE_MB)


def _figures(run: Bounded, verdict: str, ok: bool) -> dict[str, Any]:
    if run.killed:
        verdict = f"still running, stopped by the bench at {run.seconds:.0f} s / {run.peak_tree_mb:,.0f} MB"
    held = ok and not run.killed and run.seconds < SECONDS and run.peak_rss_mb < RSS_MB
    return {"verdict": verdict, "seconds": round(run.seconds, 2), "peak_mb": round(run.peak_rss_mb, 1), "held": held}


def _last_line(run: Bounded) -> str:
    lines = (run.stdout.strip() or run.stderr.strip()).splitlines()
    return f"exit {run.returncode}: " + (lines[-1][:400] if lines else "(no output)")


def _compare(make: Callable[[Path], Path], expect: str) -> Probe:
    def probe(work: Path, env: Env) -> dict[str, Any]:
        ref = bombs.xlsx_small_total(work / "ref.xlsx")
        run = _cli(env, "compare-sheets", str(ref), str(make(work / "out.xlsx")))
        return _figures(run, _last_line(run).replace(str(work) + "/", ""), expect in run.stdout)
    return probe


def _score(work: Path, env: Env) -> dict[str, Any]:
    from test_hostile_files import _analytics_run

    run_dir, bad = _analytics_run(work, bombs.xlsx_whole_sheet_sum(work / "bomb.xlsx"))
    items = work / "items.jsonl"
    run = _cli(env, "score", str(run_dir), "--items-out", str(items), "--json")
    rows = {r["task_id"]: r for r in map(json.loads, items.read_text().splitlines())} if items.exists() else {}
    row = rows.get(bad)
    verdict = (f"item score {row['score']}: {row['reason'].split(': ', 1)[-1]}".replace(str(work) + "/", "")
               if row else _last_line(run))
    return _figures(run, verdict[:220], row is not None and "formula-range limit" in row["reason"])


def _verify(package: str, output: str, make: Callable[[Path], Path]) -> Probe:
    def probe(work: Path, env: Env) -> dict[str, Any]:
        from test_hostile_files import _package

        pkg, response, out = _package(work, package, output, make(work / ("bomb" + Path(output).suffix)))
        run = _cli(env, "verify", str(pkg), str(response), "--outputs", str(out), "--json")
        try:
            results = [r for r in json.loads(run.stdout)["results"] if output in r["evidence"]]
        except (ValueError, KeyError):
            results = []
        verdict = f"{results[0]['status']}: {results[0]['evidence']}" if results else _last_line(run)
        return _figures(run, verdict, any("limit" in r["evidence"] for r in results))
    return probe


def _ingest(work: Path, env: Env) -> dict[str, Any]:
    bomb = bombs.pdf_content_bomb(work / "bomb.pdf")
    plain = bombs.pdf_plain(work / "plain.pdf")
    run = _cli(env, "ingest", str(bomb), str(plain), "--corpus", str(work / "corpus"), "--json")
    try:
        summary = json.loads(run.stdout)
        failed = summary["files_failed"]
        verdict = f"{summary['files_new']} ingested; bomb.pdf failed: {failed[0]['reason']}" if failed else "no failure"
    except (ValueError, KeyError, IndexError):
        failed, verdict = [], _last_line(run)
    return _figures(run, verdict, bool(failed) and "limit" in failed[0]["reason"])


def _page(side: float) -> Probe:
    def probe(work: Path, env: Env) -> dict[str, Any]:
        pdf = bombs.pdf_media_box(work / "page.pdf", side)
        subprocess.run([sys.executable, "-m", "deskbench.cli", "ingest", str(pdf), "--corpus", str(work / "c")],
                       env={**os.environ, **env}, capture_output=True, check=True)
        run = _cli(env, "page", "--corpus", str(work / "c"), "page.pdf", "1", "--dpi", "110", "--output", str(work / "p.png"))
        verdict = _last_line(run).replace(str(work) + "/", "")
        return _figures(run, verdict, run.returncode == 2 and "page-image limit" in run.stderr)
    return probe


def _served(run: Server, statuses: list[tuple[int, str, float]], verdict: str, ok: bool) -> dict[str, Any]:
    seconds = max((s for _, _, s in statuses), default=0.0)
    dead = any(status in (0, -1) for status, _, _ in statuses)
    held = ok and not dead and seconds < SECONDS and run.watch.peak < RSS_MB
    return {"verdict": verdict, "seconds": round(seconds, 2), "peak_mb": round(run.watch.peak, 1), "held": held}


def _grading(work: Path, env: Env) -> dict[str, Any]:
    """Two loads of the grading page of an episode whose output is a 40k-paragraph docx."""
    import hashlib

    from test_web import Client
    from test_web_grading import make_run

    from deskbench.runs.store import Episode, RunStore
    from deskbench.tasks.outputs import OutputFileRecord
    from deskbench.tracks.deliverables.tasks import DeliverableSubmission

    run_dir = work / "run"
    task, tokens = make_run(run_dir)
    files_dir = Path("outputs") / "sys-b" / task.id / "0"
    (run_dir / files_dir).mkdir(parents=True)
    data = bombs.docx_paragraphs(run_dir / files_dir / "memo.docx", 40_000, styled=True).read_bytes()
    store = RunStore(run_dir, create=False)
    store.record(Episode(task_id=task.id, system="sys-b", status="ok", submission=DeliverableSubmission(
        id=task.id, response="# Memo\nsee memo.docx", files_dir=files_dir.as_posix(),
        files=[OutputFileRecord(name="memo.docx", size=len(data), sha256=hashlib.sha256(data).hexdigest())])))
    store.close()
    server = Server("serve", "--out", str(run_dir), env=env)
    try:
        client = Client(server.port)
        client.login(tokens["alice"])
        q = urlencode({"task": task.id, "system": "sys-b", "attempt": 0})
        loads = [server.get(client, f"/grade?{q}", kill_after=KILL_SECONDS) for _ in range(2)]
    finally:
        server.stop()
    verdict = "; ".join(f"HTTP {s} in {t:.1f} s" if s > 0 else f"no answer within {t:.0f} s (the client gave up)"
                        for s, _, t in loads)
    return _served(server, loads, f"two page loads: {verdict}", all(s == 200 for s, _, _ in loads))


def _web_page(side: float) -> Probe:
    def probe(work: Path, env: Env) -> dict[str, Any]:
        from test_web import Client

        pdf = bombs.pdf_media_box(work / "page.pdf", side)
        run = {**os.environ, **env}
        subprocess.run([sys.executable, "-m", "deskbench.cli", "ingest", str(pdf), "--corpus", str(work / "c")],
                       env=run, capture_output=True, check=True)
        tasks = work / "tasks.jsonl"
        tasks.write_text(json.dumps({"id": "h/1", "question": "?", "answer_variants": [["x"]],
                                     "evidence": [{"document": "page.pdf", "page": 1}]}) + "\n")
        out = work / "run"
        subprocess.run([sys.executable, "-m", "deskbench.cli", "serve", "batches", "--out", str(out), "--tasks",
                        str(tasks)], env=run, capture_output=True, check=True)
        token = subprocess.run([sys.executable, "-m", "deskbench.cli", "serve", "add-user", "hal", "--out", str(out)],
                               env=run, capture_output=True, text=True, check=True).stdout.strip()
        server = Server("serve", "--corpus", str(work / "c"), "--tasks", str(tasks), "--out", str(out), env=env)
        try:
            client = Client(server.port)
            client.login(token)
            got = [server.get(client, "/page-image?doc=page.pdf&page=1&size=view", kill_after=KILL_SECONDS)]
            alive = server.proc.poll() is None
        finally:
            server.stop()
        status, body, seconds = got[0]
        try:
            said = json.loads(body)["detail"]
        except (ValueError, KeyError, TypeError):
            said = body.strip()[:200]
        verdict = f"HTTP {status} in {seconds:.1f} s" + (f": {said}" if status not in (200, 0) else "")
        if not alive:
            verdict += "; the server died"
        return _served(server, got, verdict, status == 413 and alive)
    return probe


PROBES: dict[str, Probe] = {
    "xlsx =SUM(A3:XFD1048576) (1.6 KB): compare-sheets":
        _compare(bombs.xlsx_whole_sheet_sum, "formula-range limit"),
    "xlsx =SUM(A3:XFD1048576): analytics scoring (deskbench score)": _score,
    "xlsx zip bomb, 3M rows (190 KB): compare-sheets": _compare(bombs.xlsx_rows_bomb, "-cell limit"),
    "xlsx zip bomb, 3M rows: verify": _verify("dl-0002-rcp", "benchmark_table.xlsx", bombs.xlsx_rows_bomb),
    "docx zip bomb, 3M paragraphs (298 KB): verify":
        _verify("dl-0005-fsp", "zbb_memo.docx", lambda p: bombs.docx_paragraphs(p, 3_000_000)),
    "docx of 40k paragraphs (38 KB, Word's styles): grading page": _grading,
    "PDF content-stream bomb (1 MB): ingest": _ingest,
    "PDF page of 14,400 pt: page --dpi 110": _page(14_400),
    "PDF page of 3,000,000 pt: page --dpi 110": _page(3_000_000),
    "PDF page of 14,400 pt: web page-image route": _web_page(14_400),
    "PDF page of 3,000,000 pt: web page-image route": _web_page(3_000_000),
}


def run_all(src: Path | None, only: str | None) -> dict[str, dict[str, Any]]:
    return run_probes({name: probe for name, probe in PROBES.items() if not only or only in name}, src)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before-src", type=Path, help="src/ of a checkout without the limits")
    ap.add_argument("--only", help="run only the probes whose name contains this (the file's other rows are kept)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "hostile_files.json")
    args = ap.parse_args()
    before = run_all(args.before_src.resolve(), args.only) if args.before_src else {}
    after = run_all(None, args.only)
    rows = [{"probe": name, "before": before.get(name), "after": after[name], "bound": BOUND} for name in after]
    if args.only and args.out.exists():  # re-measured rows replace theirs; the others are kept
        fresh = {r["probe"]: r for r in rows}
        kept = {r["probe"]: r for r in json.loads(args.out.read_text())["rows"]}
        rows = [fresh.get(name) or kept[name] for name in PROBES if name in fresh or name in kept]
    result = {"benchmark": "hostile inputs: files", **run_identity(),
              "before_stopped_at": {"seconds": KILL_SECONDS, "tree_mb": KILL_TREE_MB}, "rows": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_rows(rows)


if __name__ == "__main__":
    main()
