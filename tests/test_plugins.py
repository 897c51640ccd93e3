"""Plugins (deskbench/plugins.py): the examples/ agent run by module path and installed as an
entry point in a throwaway venv, `deskbench list`, and broken plugins named in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_cli
from fake_openai import FakeOpenAI

from deskbench.corpus import Corpus
from deskbench.runs.store import RunStore
from deskbench.tasks.docqa import DocQATask

EXAMPLES = REPO / "examples"
TASK = DocQATask(id="q1", question="Which vehicle rental rates are given for the winter season?",
                 answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(TASK.model_dump_json() + "\n")
    return path


def _answer_from_pages(body: dict[str, Any], n: int) -> dict[str, Any]:
    """The fake model answers only when the agent put the retrieved page text in its prompt."""
    prompt = body["messages"][-1]["content"]
    text = prompt if isinstance(prompt, str) else json.dumps(prompt)
    ok = "[alpha.pdf page 1]" in text and "winter" in text.lower()
    answer = ["Mountain car"] if ok else ["no pages seen"]
    return {"kind": "text", "text": json.dumps({"answer": answer, "citations": [{"file": "alpha.pdf", "page": 1}]})}


def _run(agent: str, corpus: Corpus, tmp_path: Path, fake: FakeOpenAI, *, python: str = sys.executable,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    args = [python, "-m", "deskbench.cli", "run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(corpus.root),
            "--agent", agent, "--model", f"openai-compat/fake@{fake.base_url}", "--out", str(tmp_path / "run"),
            "--json", "--quiet"]
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
                          cwd=tmp_path)


def test_example_agent_by_module_path(operator_corpus: Corpus, tmp_path: Path) -> None:
    with FakeOpenAI(script=_answer_from_pages) as fake:
        proc = _run("keyword_agent:KeywordAgent", operator_corpus, tmp_path, fake,
                    env={"PYTHONPATH": str(EXAMPLES / "custom_agent")})
    assert proc.returncode == 0, proc.stderr
    (system, report), = json.loads(proc.stdout).items()
    assert system == "keyword_agent:KeywordAgent:openai-compat/fake"
    assert report["n"] == 1 and report["accuracy"] == 1.0  # the page text reached the model: its context's search
    (episode,) = RunStore(tmp_path / "run").episodes()
    assert episode.status == "ok"
    assert [s.kind for s in episode.trajectory] == ["tool_call"] and episode.trajectory[0].name == "search_documents"


@pytest.mark.parametrize(("agent", "says"), [
    ("no_such_module:Agent", "no module named 'no_such_module'"),
    ("keyword_agent:Missing", "has no 'Missing'"),
])
def test_module_path_mistakes_are_one_line(agent: str, says: str, operator_corpus: Corpus, tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        proc = _run(agent, operator_corpus, tmp_path, fake, env={"PYTHONPATH": str(EXAMPLES / "custom_agent")})
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
