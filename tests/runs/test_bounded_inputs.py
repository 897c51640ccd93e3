"""Bounded inputs (issue 33, item 5; the table rows "`import` or `export` of an 18 MB predictions
file with 500k citations; /dev/zero as a predictions file" and "recorded-web index.jsonl with
invalid UTF-8"): predictions, tasks and recorded-web index files are read only from regular files,
under a size cap, a line cap and shape caps (tasks/jsonl.py, tracks/docqa/tasks.py), a line at a time;
every refusal and every decoding error is one line naming file:line, exit 2.

Before: `/dev/zero` read until MemoryError (a traceback), a FIFO blocked forever, the 18 MB file
peaked at 0.37-1.2 GB in `import` and `export` (here: 368 MB and 470 MB), an index.jsonl that is
not UTF-8 was a 49-line UnicodeDecodeError traceback, and nothing capped a line or a prediction.
What could hang or grab memory (a device, a pipe, an oversized file, the 18 MB file) runs in a
subprocess, with a wall-time bound and its CPU time and peak RSS measured; a refusal whose point is
its one line runs in this process (conftest.run_cli), as the user's command would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from deskbench.tasks.jsonl import PREDICTIONS
from deskbench.tracks.docqa.tasks import MAX_CITATIONS, MAX_TEXT_CHARS

SECONDS = 60.0  # CPU-time bound of a refusal (each takes well under a second; wall time varies with load)
HANG_SECONDS = 300.0  # wall-time hang guard: a command still running then is killed (and its test fails)
DEMO_DELIVERABLES = REPO / "src" / "deskbench" / "data" / "demo" / "deliverables"

# The 18 MB file of the table: 1,000 predictions of 500 citations each (500k citations).
QUESTIONS, CITES = 1_000, 500
IMPORT_RSS_MB = 200.0  # measured after: ~80 MB (before: 368 MB)
EXPORT_RSS_MB = 150.0  # measured after: ~50 MB (before: 470 MB)

# What the wrapper runs: the CLI as its child, then the child's peak RSS (ru_maxrss, KB on Linux).
_WRAPPER = """
import json, resource, subprocess, sys
try:
    proc = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1]))
    code, out, err = proc.returncode, proc.stdout, proc.stderr
except subprocess.TimeoutExpired as exc:
    code, out, err = -9, "", f"killed after {exc.timeout} s"
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "out": out, "err": err, "rss_kb": usage.ru_maxrss,
                  "cpu": usage.ru_utime + usage.ru_stime}))
"""


@dataclass
class Ran:
    code: int
    out: str
    err: str
    seconds: float  # CPU time (user + system) of the command and its reaped descendants (nan: not measured)
    rss_mb: float  # peak RSS (nan: not measured)

    def one_line(self) -> str:
        """The command's only stderr line (exit 2), without the 'error: ' prefix."""
        assert self.code == 2, (self.code, self.err[-2000:])
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), self.err[-2000:]
        return lines[0].removeprefix("error: ")


def cli(*args: str, timeout: float = HANG_SECONDS, env: dict[str, str] | None = None) -> Ran:
    """`deskbench ARGS` in a subprocess (killed past `timeout` s of wall time, a hang guard), with
    its CPU time and peak RSS: the child of a wrapper process, whose RUSAGE_CHILDREN is that one
    command's alone. CPU time, not wall time, so a loaded machine does not change the verdict."""
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, str(timeout), sys.executable, "-m", "deskbench.cli", *args],
                          capture_output=True, text=True, timeout=timeout + 60,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})})
    got = json.loads(proc.stdout)
    return Ran(got["code"], got["out"], got["err"], got["cpu"], got["rss_kb"] / 1024)


def here(*args: str) -> Ran:
    """`deskbench ARGS` through conftest.run_cli, in this process: its exit code and output (its
    time and memory are not measured: the tests that bound them use `cli`)."""
    proc = run_cli(*args)
    return Ran(proc.returncode, proc.stdout, proc.stderr, float("nan"), float("nan"))


def _tasks(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Question number {i}?", "answer_variants": [["a"]],
                                        "evidence": [{"document": "doc-000.pdf", "page": 1}]}) + "\n"
                            for i in range(n)), encoding="utf-8")
    return path


def _prediction(i: int, cites: int, **extra: object) -> dict[str, object]:
    return {"question": f"Question number {i}?", "answer": ["a"], "id": f"q{i}",
            "citations": [{"file": f"doc-{j % 50:03d}.pdf", "page": j % 300 + 1} for j in range(cites)], **extra}


def _predictions(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    return _tasks(tmp_path / "tasks.jsonl", 3)


# -- not a regular file: one line, at once ------------------------------------------------------


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "pred.jsonl"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize("command", ["import", "score", "score --official"])
@pytest.mark.parametrize("source", ["/dev/zero", "fifo"])
def test_a_device_or_a_pipe_as_predictions_is_one_line(tmp_path: Path, tasks: Path, command: str, source: str) -> None:
    pred = Path("/dev/zero") if source == "/dev/zero" else _fifo(tmp_path)
    extra = ["--system", "s", "--out", str(tmp_path / "run")] if command == "import" else []
    ran = cli(*command.split(), str(pred), "--tasks", str(tasks), *extra)
    kind = "a character device" if source == "/dev/zero" else "a pipe (FIFO)"
    assert ran.one_line() == (f"{pred} is {kind}, not a regular file; the predictions file is read only from a file "
                              "on disk: save it to a file and give that")
    assert ran.seconds < SECONDS and ran.rss_mb < 200, (ran.seconds, ran.rss_mb)
    assert not (tmp_path / "run").exists()


def test_a_pipe_as_tasks_is_one_line(tmp_path: Path) -> None:
    pred = _predictions(tmp_path / "p.jsonl", [_prediction(0, 1)])
    fifo = tmp_path / "tasks.jsonl"
    os.mkfifo(fifo)
    ran = cli("score", str(pred), "--tasks", str(fifo))
    assert ran.one_line().startswith(f"{fifo} is a pipe (FIFO), not a regular file; the tasks file is read only")


# -- the 18 MB predictions file: streamed in and out ---------------------------------------------


def test_an_18_mb_predictions_file_imports_and_exports_in_bounded_memory(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "tasks.jsonl", QUESTIONS)
    pred = _predictions(tmp_path / "pred.jsonl", [_prediction(i, CITES) for i in range(QUESTIONS)])
    assert pred.stat().st_size > 18_000_000
    run = tmp_path / "run"
    ran = cli("import", str(pred), "--tasks", str(tasks), "--system", "big", "--out", str(run), "--json",
              timeout=300)
    assert ran.code == 0, ran.err[-2000:]
    summary = json.loads(ran.out)
    assert summary["record"]["episodes"] == QUESTIONS and summary["new_episodes"] == QUESTIONS
    assert ran.rss_mb < IMPORT_RSS_MB, f"import peaked at {ran.rss_mb:.0f} MB (bound {IMPORT_RSS_MB} MB)"

    ran = cli("export", str(run), "--format", "madqa", "-o", str(tmp_path / "out"), timeout=300)
    assert ran.code == 0, ran.err[-2000:]
    assert ran.rss_mb < EXPORT_RSS_MB, f"export peaked at {ran.rss_mb:.0f} MB (bound {EXPORT_RSS_MB} MB)"
    exported = (tmp_path / "out" / "big.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(exported) == QUESTIONS
    first = json.loads(exported[0])
    assert first["id"] == "q0" and first["citations"] == _prediction(0, CITES)["citations"]
    assert sum(len(json.loads(line)["citations"]) for line in exported) == QUESTIONS * CITES
    assert not list((tmp_path / "out").glob("*.part"))


# -- caps: one line naming file:line and the cap ------------------------------------------------


def test_a_prediction_over_the_citation_cap_is_one_line(tmp_path: Path, tasks: Path) -> None:
    pred = _predictions(tmp_path / "p.jsonl", [_prediction(0, 3), _prediction(1, MAX_CITATIONS + 1)])
    ran = here("score", str(pred), "--tasks", str(tasks))
    assert ran.one_line() == (f"{pred}:2: field 'citations': 1,001 citations, over the cap of 1,000 per prediction; "
                              "keep at most 1,000; fix the line, or pass --skip-invalid to skip bad lines")
    ran = here("score", str(pred), "--tasks", str(tasks), "--skip-invalid", "--json")
    assert ran.code == 0, ran.err
    assert f"{pred}:2: field 'citations': 1,001 citations" in ran.err


def test_an_answer_over_the_text_cap_is_one_line(tmp_path: Path, tasks: Path) -> None:
    pred = _predictions(tmp_path / "p.jsonl", [_prediction(0, 1, answer=["x" * (MAX_TEXT_CHARS + 1)])])
    ran = here("import", str(pred), "--tasks", str(tasks), "--system", "s", "--out", str(tmp_path / "run"))
    assert ran.one_line() == (f"{pred}:1: a question, answer or error of 100,001 characters, over the cap of "
                              "100,000; shorten it; fix the line, or pass --skip-invalid to skip bad lines")


def test_a_line_over_the_line_cap_is_refused_before_it_is_parsed(tmp_path: Path, tasks: Path) -> None:
    pred = tmp_path / "p.jsonl"
    with pred.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(_prediction(0, 1)) + "\n")
        fh.write(json.dumps(_prediction(1, 1, raw_response="x" * PREDICTIONS.max_line)) + "\n")
        fh.write(json.dumps(_prediction(2, 1)) + "\n")
    ran = here("score", str(pred), "--tasks", str(tasks))
    assert ran.one_line() == (f"{pred}:2: the line is over the 8 MB line cap of the predictions file; shorten or "
                              "split it, or pass --skip-invalid to skip bad lines")
    ran = here("score", str(pred), "--tasks", str(tasks), "--skip-invalid", "--json")
    assert ran.code == 0, ran.err
    assert json.loads(ran.out)["n"] == 3  # the two other lines are scored; the third task is missing
    assert f"{pred}:2: the line is over the 8 MB line cap" in ran.err


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(tmp_path: Path, tasks: Path) -> None:
    pred = tmp_path / "p.jsonl"
    with pred.open("wb") as fh:  # sparse: 300 MB on paper, nothing on disk
        fh.truncate(300 << 20)
    ran = cli("score", str(pred), "--tasks", str(tasks))
    assert ran.one_line() == (f"{pred} is 300 MB, over the 256 MB cap of the predictions file; split it into "
                              "smaller files")
    assert ran.seconds < SECONDS and ran.rss_mb < 200, (ran.seconds, ran.rss_mb)


def test_predictions_that_are_not_utf8_name_the_line_and_byte(tmp_path: Path, tasks: Path) -> None:
    pred = tmp_path / "p.jsonl"
    pred.write_bytes(json.dumps(_prediction(0, 1)).encode() + b'\n{"question": "caf\xe9", "answer": ["a"]}\n')
    ran = here("import", str(pred), "--tasks", str(tasks), "--system", "s", "--out", str(tmp_path / "run"))
    assert ran.one_line() == (f"{pred}:2: not UTF-8 (byte 0xe9 at column 18); save the file as UTF-8, or pass "
                              "--skip-invalid to skip bad lines")


def test_a_task_over_the_evidence_cap_is_one_line(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q0", "question": "Q?", "answer_variants": ["a"],
                                 "evidence": [{"document": "d.pdf", "page": p} for p in range(1, 1_002)]}) + "\n",
                     encoding="utf-8")
    pred = _predictions(tmp_path / "p.jsonl", [_prediction(0, 1)])
    ran = here("score", str(pred), "--tasks", str(tasks))
    assert ran.one_line() == (f"{tasks}:1: 1,001 evidence pages, over the cap of 1,000 per task; keep at most 1,000; "
                              "fix the line, or pass --skip-invalid to skip bad lines")


# -- the recorded web's index -------------------------------------------------------------------


def _recording(folder: Path, search: bytes) -> Path:
    (folder / "pages").mkdir(parents=True)
    (folder / "pages" / "a.txt").write_text("a page", encoding="utf-8")
    (folder / "index.jsonl").write_bytes(b'{"kind": "page", "url": "https://a.example", "file": "pages/a.txt"}\n'
                                         + search + b"\n")
    return folder


def _run_deliverables(tmp_path: Path, web: Path) -> Ran:
    # the index is read when the options are, before any model is called (none answers on port 9)
    return here("run", "--tasks", str(DEMO_DELIVERABLES), "--out", str(tmp_path / "run"), "--quiet",
               "--web", f"recorded:{web}", "--model", "openai-compat/m@http://127.0.0.1:9")


def test_a_recorded_web_index_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    web = _recording(tmp_path / "web", b'{"kind": "search", "query": "caf\xe9", "results": []}')
    ran = _run_deliverables(tmp_path, web)
    assert ran.one_line() == f"{web / 'index.jsonl'}:2: not UTF-8 (byte 0xe9 at column 33); save the file as UTF-8"
    assert not (tmp_path / "run").exists()


def test_a_recorded_search_over_the_hits_cap_is_one_line(tmp_path: Path) -> None:
    hits = [{"title": "t", "url": f"https://a.example/{i}"} for i in range(1_001)]
    web = _recording(tmp_path / "web", json.dumps({"kind": "search", "query": "q", "results": hits}).encode())
    ran = _run_deliverables(tmp_path, web)
    assert ran.one_line() == (f"{web / 'index.jsonl'} line 2: a search with 1,001 results, over the cap of 1,000 "
                              "per search; keep its first 1,000")

