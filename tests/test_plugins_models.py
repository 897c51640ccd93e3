"""A model-provider plugin (deskbench/plugins.py, group `deskbench.models` or
package.module:factory): `--model tests.scripted_provider:scripted/some-model` drives a docqa
bm25-agent run end to end through a Python ChatModel with scripted replies, stored and scored."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO, run_cli

from deskbench.corpus import Corpus
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.tasks import DocQATask

TASK = DocQATask(id="q1", question="Which vehicle rental rates are given for the winter season?",
                 answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
MODEL = "tests.scripted_provider:scripted/some-model"


def test_a_provider_plugin_drives_a_bm25_run(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    out = tmp_path / "run"
    proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--agent", "bm25-agent",
                   "--model", MODEL, "--view", "text", "--out", str(out), "--json", "--quiet", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    (system, report), = json.loads(proc.stdout).items()
    assert system == f"bm25-agent:{MODEL}"
    assert report["accuracy"] == 1.0  # the model saw the searched page's text: its reply came from it
    (ep,) = RunStore(out, create=False).episodes()
    assert ep.status == "ok", ep.error
    assert [s.name for s in ep.trajectory if isinstance(s, ToolCallStep)][:1] == ["search_documents"]
    assert ep.usage.calls == 2  # type: ignore[union-attr]
    proc = run_cli("score", str(out), "--json", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[system]["accuracy"] == 1.0


def test_an_unknown_provider_module_is_one_line(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    proc = run_cli("run", "--tasks", str(tasks), "--agent", "guess", "--model", "tests.no_such_provider:make/x",
                   "--out", str(tmp_path / "run"), cwd=REPO)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "no_such_provider" in proc.stderr, proc.stderr
