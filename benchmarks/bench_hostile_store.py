#!/usr/bin/env python
"""Hostile inputs, store and filesystem rows (issue 22 item 3): each probe before and after.

Every probe runs the real CLI in subprocesses (tests/hostile_watch.py bounded_cli: wall time and
the peak RSS of the command's process tree), with the fake OpenAI server of the tests where a model
is called. "before" runs the same probes against another checkout's src/ (--before-src, e.g.
`git archive 9050a5c src | tar -x -C /tmp/before`), "after" against this one.

Run (as root: the disk-full probe mounts a 3 MB tmpfs):
    .venv/bin/python benchmarks/bench_hostile_store.py [--before-src /tmp/before/src]
Writes benchmarks/results/hostile_store.json (rows: probe, before, after with verdict, seconds,
peak RSS MB, held, and the bound); `--rows` prints them as rows of the Hostile inputs table in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import write_text_pdf  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from hostile_common import Env, markdown_rows, run_identity  # noqa: E402
from hostile_watch import Bounded, bounded_cli  # noqa: E402

Probe = Callable[[Path, Env], dict[str, Any]]
GUESS = {"kind": "text", "text": '{"answer": ["x"], "citations": []}'}
SYSTEM = "guess:openai/gpt-4.1"


def tasks_file(path: Path, ids: list[str], *, bom: bool = False) -> Path:
    lines = [json.dumps({"id": i, "question": f"question {i}?", "answer_variants": [["x"]],
                         "evidence": [{"document": "a.pdf", "page": 1}]}) for i in ids]
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + ("\n".join(lines) + "\n").encode())
    return path


def guess_run(tasks: Path, out: Path) -> list[str]:
    return ["run", "--tasks", str(tasks), "--out", str(out), "--agent", "guess", "--model", "openai/gpt-4.1",
            "--concurrency", "2", "--quiet"]


def model_env(env: Env, fake: FakeOpenAI, tmp: Path) -> Env:
    return {**env, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test", "DESKBENCH_CACHE_DIR": str(tmp / "cache")}


def last_line(run: Bounded) -> str:
    """How a command ended, in a line: the exit code and the last stderr line (a traceback's
    last line is its exception)."""
    lines = run.stderr.strip().splitlines()
    tail = lines[-1][:220] if lines else ""
    traceback = " (traceback)" if "Traceback" in run.stderr else ""
    return f"exit {run.returncode}{traceback}: {tail}" if tail else f"exit {run.returncode}"


def row(verdict: str, held: bool, runs: list[Bounded]) -> dict[str, Any]:
    return {"verdict": verdict, "held": held, "seconds": round(sum(r.seconds for r in runs), 2),
            "peak_mb": round(max(r.peak_rss_mb for r in runs), 1)}


def one_error_line(run: Bounded) -> bool:
    return run.returncode == 2 and "Traceback" not in run.stderr and run.stderr.strip().splitlines()[-1].startswith("error:")


def pdfs(tmp: Path) -> Path:
    write_text_pdf(tmp / "pdfs" / "alpha.pdf", ["Mountain car winter rates", "Harbour authority report"])
    return tmp / "pdfs"


# -- probes ---------------------------------------------------------------------------------------


def probe_collision(tmp: Path, env: Env) -> dict[str, Any]:
    """Analytics tasks `fg/1` and `fg_1`, each episode writing out.csv with its own text."""
    from deskbench.tracks.analytics.generate.tasks import generate_analytics

    generate_analytics(tmp / "gen", tasks=1, seed=5)
    (task,) = [json.loads(line) for line in (tmp / "gen" / "tasks.jsonl").read_text().splitlines()]
    lines = [json.dumps({**task, "id": i, "instruction": f"{task['instruction']} [{tag}]"})
             for i, tag in (("fg/1", "one"), ("fg_1", "two"))]
    (tmp / "gen" / "two.jsonl").write_text("\n".join(lines) + "\n")

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if any(m["role"] == "tool" for m in body["messages"]):
            return {"kind": "text", "text": "done"}
        tag = "one" if "[one]" in json.dumps(body["messages"]) else "two"
        code = f"open('/mnt/result/out.csv', 'w').write('{tag}\\n')"
        return {"kind": "tool", "name": "execute_code", "arguments": json.dumps({"code": code})}

    out = tmp / "run"
    with FakeOpenAI(script=script) as fake:
        run = bounded_cli("run", "--agent", "analyst-agent", "--tasks", str(tmp / "gen" / "two.jsonl"), "--out", str(out),
                          "--model", f"openai-compat/scripted@{fake.base_url}", "--concurrency", "1", "--quiet",
                          env={**env, "OPENAI_API_KEY": "sk-test"})
    if run.returncode:
        return row(last_line(run), False, [run])
    con = sqlite3.connect(out / "run.sqlite")
    subs = {r[0]: json.loads(r[1]) for r in con.execute("SELECT task_id, submission FROM episodes")}
    read = {i: (out / s["files_dir"] / "out.csv").read_text().strip() if (out / s["files_dir"] / "out.csv").exists()
            else "missing" for i, s in subs.items()}
    held = read == {"fg/1": "one", "fg_1": "two"}
    return row(f"fg/1 reads {read['fg/1']!r} from {subs['fg/1']['files_dir']}, fg_1 reads {read['fg_1']!r} from "
               f"{subs['fg_1']['files_dir']}", held, [run])


def probe_two_runs(tmp: Path, env: Env) -> dict[str, Any]:
    ids = [f"q{i}" for i in range(12)]
    tasks = tasks_file(tmp / "tasks.jsonl", ids)
    out = tmp / "run"
    with FakeOpenAI(script=lambda b, n: GUESS, latency=1.5) as fake:
        menv = model_env(env, fake, tmp)
        started = time.monotonic()
        first = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *guess_run(tasks, out)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **menv})
        while not fake.requests and first.poll() is None:
            time.sleep(0.02)
        second = bounded_cli(*guess_run(tasks, out), env=menv)
        first.communicate(timeout=120)
        calls = len(fake.requests)
    seconds = time.monotonic() - started
    held = first.returncode == 0 and one_error_line(second) and calls == len(ids)
    verdict = f"first exit {first.returncode}; second {last_line(second)}; {calls} model calls for {len(ids)} tasks"
    result = row(verdict, held, [second])
    result["seconds"] = round(seconds, 2)
    return result


def probe_kills(tmp: Path, env: Env) -> dict[str, Any]:
    """12 ingests killed in the first milliseconds of a new corpus, each followed by an ingest."""
    src = pdfs(tmp)
    failed, runs = 0, []
    for n, after_ms in enumerate([0, 1, 2, 3, 5, 8, 12, 20, 30, 45, 60, 90]):
        parent = tmp / f"k{n}"
        parent.mkdir()
        corpus = parent / "c"
        proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", "ingest", str(src), "--corpus", str(corpus),
                                 "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **env})
        while not any(parent.iterdir()) and proc.poll() is None:
            time.sleep(0.0005)
        time.sleep(after_ms / 1000)
        proc.kill()
        proc.wait()
        again = bounded_cli("ingest", str(src), "--corpus", str(corpus), "--quiet", env=env)
        runs.append(again)
        failed += again.returncode != 0
    return row(f"{failed} of 12 later ingests failed" + (f" (e.g. {last_line(next(r for r in runs if r.returncode))})"
                                                         if failed else ""), failed == 0, runs)


def probe_half_made(tmp: Path, env: Env) -> dict[str, Any]:
    corpus = tmp / "c"
    corpus.mkdir()
    (corpus / "pages.sqlite").touch()
    run = bounded_cli("ingest", str(pdfs(tmp)), "--corpus", str(corpus), "--quiet", env=env)
    return row(last_line(run) if run.returncode else "exit 0: rebuilt, the PDFs ingested", run.returncode == 0, [run])


def _corpus(tmp: Path, env: Env) -> Path:
    corpus = tmp / "c"
    subprocess.run([sys.executable, "-m", "deskbench.cli", "ingest", str(pdfs(tmp)), "--corpus", str(corpus), "--quiet"],
                   check=True, env={**os.environ, **env}, capture_output=True)
    return corpus


def probe_corrupt_pages(tmp: Path, env: Env) -> dict[str, Any]:
    db = _corpus(tmp, env) / "pages.sqlite"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    run = bounded_cli("search", "--corpus", str(db.parent), "harbour", env=env)
    return row(last_line(run), one_error_line(run), [run])


def _run_store(tmp: Path, env: Env, fake: FakeOpenAI) -> Path:
    tasks = tasks_file(tmp / "tasks.jsonl", [f"q{i}" for i in range(30)])
    subprocess.run([sys.executable, "-m", "deskbench.cli", *guess_run(tasks, tmp / "run")], check=True,
                   env={**os.environ, **model_env(env, fake, tmp)}, capture_output=True)
    return tmp / "run" / "run.sqlite"


def probe_corrupt_run(tmp: Path, env: Env) -> dict[str, Any]:
    big = lambda b, n: {"kind": "text", "text": json.dumps({"answer": ["x" * 2000 + str(n)]})}  # noqa: E731
    with FakeOpenAI(script=big) as fake:
        db = _run_store(tmp, env, fake)
    db.write_bytes(b"not a database " * 100)
    run = bounded_cli("score", str(db.parent), env=env)
    return row(last_line(run), one_error_line(run), [run])


def probe_disk_full(tmp: Path, env: Env) -> dict[str, Any]:
    disk = tmp / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], check=True)
    try:
        (disk / "filler").write_bytes(b"\0" * (3 * 2**20 - 700 * 2**10))
        tasks = tasks_file(tmp / "tasks.jsonl", [f"q{i}" for i in range(60)])
        big = lambda b, n: {"kind": "text", "text": json.dumps({"answer": [os.urandom(8000).hex()]})}  # noqa: E731
        with FakeOpenAI(script=big) as fake:
            run = bounded_cli(*guess_run(tasks, disk / "run"), env=model_env(env, fake, tmp))
        try:
            con = sqlite3.connect(f"file:{disk / 'run' / 'run.sqlite'}?mode=ro", uri=True)
            stored = con.execute("SELECT count(*) FROM episodes").fetchone()[0]
            con.close()
        except sqlite3.Error as exc:
            stored = f"unreadable ({exc})"
        return row(f"{last_line(run)}; {stored} episodes stored", one_error_line(run), [run])
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def probe_duplicate(tmp: Path, env: Env) -> dict[str, Any]:
    with FakeOpenAI(script=lambda b, n: GUESS) as fake:
        run = bounded_cli(*guess_run(tasks_file(tmp / "dup.jsonl", ["a", "b", "a"]), tmp / "r"),
                          env=model_env(env, fake, tmp))
    return row(last_line(run), one_error_line(run), [run])


def probe_bom(tmp: Path, env: Env) -> dict[str, Any]:
    with FakeOpenAI(script=lambda b, n: GUESS) as fake:
        run = bounded_cli(*guess_run(tasks_file(tmp / "bom.jsonl", ["a", "b"], bom=True), tmp / "r"),
                          env=model_env(env, fake, tmp))
        calls = len(fake.requests)
    verdict = last_line(run) if run.returncode else f"exit 0: accepted, {calls} tasks run"
    return row(verdict, run.returncode == 0 and calls == 2, [run])


def probe_bad_name(tmp: Path, env: Env) -> dict[str, Any]:
    from deskbench.tracks.analytics.generate.tasks import generate_analytics

    generate_analytics(tmp / "gen", tasks=1, seed=5)
    code = "open(b'/mnt/result/r\\xff' + str({n}).encode() + b'.csv', 'wb').write(b'a,b\\n1,2\\n')"
    script = lambda b, n: ({"kind": "tool", "name": "execute_code",  # noqa: E731
                            "arguments": json.dumps({"code": code.format(n=n)})} if n <= 3
                           else {"kind": "text", "text": "done"})
    out = tmp / "run"
    with FakeOpenAI(script=script) as fake:
        run = bounded_cli("run", "--agent", "analyst-agent", "--tasks", str(tmp / "gen" / "tasks.jsonl"), "--out",
                          str(out), "--model", f"openai-compat/scripted@{fake.base_url}", "--concurrency", "1",
                          "--quiet", "--json", env={**env, "OPENAI_API_KEY": "sk-test"})
    try:
        run.stdout.encode("utf-8")
        json.loads(run.stdout)
        valid = True
    except (UnicodeEncodeError, ValueError):
        valid = False
    con = sqlite3.connect(out / "run.sqlite")
    status, trajectory = con.execute("SELECT status, trajectory FROM episodes").fetchone()
    calls = sum(1 for s in json.loads(trajectory or "[]") if s.get("name") == "execute_code")
    held = run.returncode == 0 and valid and status == "ok" and calls == 3
    return row(f"exit {run.returncode}; episode {status} with {calls} of 3 executed calls; --json "
               f"{'valid' if valid else 'not valid'} UTF-8 JSON", held, [run])


PROBES: dict[str, tuple[Probe, str]] = {
    "store: task ids `fg/1` and `fg_1` (analytics, one output file each)": (
        probe_collision, "each episode reads its own file"),
    "store: two `deskbench run` on one fresh --out (12 tasks)": (
        probe_two_runs, "the second: one line, exit 2; 12 model calls; < 30 s"),
    "store: kill -9 in the first 0-90 ms of a new corpus, then ingest (12 kills)": (
        probe_kills, "every later ingest succeeds; < 30 s each"),
    "store: a 0-byte pages.sqlite left by a killed ingest": (
        probe_half_made, "ingest rebuilds it; < 30 s"),
    "store: pages.sqlite truncated to half": (probe_corrupt_pages, "one line, exit 2; < 30 s"),
    "store: run.sqlite not a database (`deskbench score`)": (probe_corrupt_run, "one line, exit 2; < 30 s"),
    "store: disk full during `deskbench run` (3 MB tmpfs)": (
        probe_disk_full, "one line, exit 2, the stored episodes kept; < 30 s"),
    "store: a duplicate task id": (probe_duplicate, "one line naming the file and both lines, exit 2"),
    "store: a UTF-8 BOM in the tasks file": (probe_bom, "accepted silently"),
    "store: output file names `r\\xff1.csv` (not UTF-8) from 3 execute_code calls": (
        probe_bad_name, "episode ok with its 3 calls; --json valid UTF-8"),
}


def run_all(before_src: Path | None) -> dict[str, dict[str, Any]]:
    env: Env = {"PYTHONPATH": str(before_src)} if before_src else {}
    results = {}
    for name, (probe, _) in PROBES.items():
        with tempfile.TemporaryDirectory(prefix="bench-hostile-store-") as tmp:
            try:
                results[name] = probe(Path(tmp), env)
                results[name]["verdict"] = results[name]["verdict"].replace(f"{tmp}/", "")  # paths as the user gave them
            except Exception as exc:  # a probe the old code breaks in another way is still a row
                results[name] = {"verdict": f"probe failed: {type(exc).__name__}: {str(exc)[:200]}", "held": False,
                                 "seconds": 0.0, "peak_mb": 0.0}
        print(f"{'before' if before_src else 'after'}: {name}: {results[name]['verdict']}", flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before-src", type=Path, help="src/ of a checkout without the fix")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "hostile_store.json")
    ap.add_argument("--rows", action="store_true", help="only print the docs/benchmarks.md rows of the --out file")
    args = ap.parse_args()
    if args.rows:
        print(markdown_rows(json.loads(args.out.read_text())["rows"]), end="")
        return
    before = run_all(args.before_src.resolve()) if args.before_src else {}
    after = run_all(None)
    rows = [{"probe": name, "before": before.get(name), "after": after[name], "bound": bound}
            for name, (_, bound) in PROBES.items()]
    result = {"benchmark": "hostile inputs: store and filesystem", **run_identity(),
              "before_src": str(args.before_src) if args.before_src else None, "rows": rows}
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
