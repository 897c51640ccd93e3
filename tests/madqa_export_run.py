"""The docqa run that tests/tracks/docqa/test_export_madqa.py exports, built offline the same way by
tests/data/madqa_export/generate.py (so the official evaluator's numbers stored there are for the
file the test writes): the operator corpus, tasks.jsonl, and two scripted models over it with the
bm25 agent, in one run directory:

- bm25-agent:scripted/answers-a, every task: searches, answers exact, near and wrong, a malformed
  provide_answer repaired, and one task its script has no reply for (an errored episode);
- bm25-agent:scripted/answers-b, run with --limit 5 (the last three tasks are not run, though its
  script answers them), one episode that searches until its step limit (status "limit").

--concurrency 1, so the episodes end (and are exported) in task order on every machine; run from
tests/data/madqa_export with the script files named relative to it, so the errored episode's
message (it names the file) is the same on every machine."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli, write_operator_corpus

DATA = Path(__file__).parent / "data" / "madqa_export"
TASKS = DATA / "tasks.jsonl"
SYSTEMS = {"bm25-agent:scripted/answers-a": ("answers-a.jsonl", ()),
           "bm25-agent:scripted/answers-b": ("answers-b.jsonl", ("--limit", "5"))}
FILES = {"bm25-agent:scripted/answers-a": "bm25-agent-scripted-answers-a.jsonl",
         "bm25-agent:scripted/answers-b": "bm25-agent-scripted-answers-b.jsonl"}
"""The export's file per system."""


def build_run(root: Path) -> Path:
    """The run, under root/run (its corpus under root/operators)."""
    corpus = write_operator_corpus(root / "operators")
    run = root / "run"
    for script, extra in SYSTEMS.values():
        proc = run_cli("run", "--tasks", str(TASKS), "--corpus", str(corpus.root), "--agent", "bm25-agent", "--protocol", "paper",
                       "--model", f"scripted:{script}", "--out", str(run), "--max-steps", "4", "--top-k", "4",
                       "--view", "text", "--concurrency", "1", "--quiet", *extra, cwd=DATA)
        assert proc.returncode == 0, proc.stderr
    return run
