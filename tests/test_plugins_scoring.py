"""`deskbench score RUN --scorer NAME`: the plugin scorer's verdicts stored as a scoring
(runs/scorings.py), so the viewer shows them, labelled, in place of the run's own scoring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_cli
from fake_openai import FakeOpenAI

from deskbench.corpus import Corpus
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.tasks import DocQATask
from deskbench.web.viewer_scores import system_scores

EXAMPLES = REPO / "examples"
TASK = DocQATask(id="q1", question="Which vehicle rental rates are given for the winter season?",
                 answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
SYSTEM = "keyword_agent:KeywordAgent:openai-compat/fake"


def test_a_plugin_scoring_is_stored_and_shown(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    out = tmp_path / "run"
    reply = {"kind": "text", "text": '{"answer": ["Mountain cars"], "citations": [{"file": "alpha.pdf", "page": 1}]}'}
    env = {**os.environ, "PYTHONPATH": f"{EXAMPLES / 'custom_agent'}{os.pathsep}{EXAMPLES / 'custom_scorer'}"}
    with FakeOpenAI(script=lambda body, n: reply) as fake:
        proc = subprocess.run([sys.executable, "-m", "deskbench.cli", "run", "--tasks", str(tasks), "--corpus",
                               str(operator_corpus.root), "--agent", "keyword_agent:KeywordAgent", "--model",
                               f"openai-compat/fake@{fake.base_url}", "--out", str(out), "--json", "--quiet"],
                              capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[SYSTEM]["accuracy"] == 1.0  # ANLS* takes "Mountain cars"
    store = RunStore(out, create=False)
    (own,) = store.scorings()
    shown, _ = system_scores(store, SYSTEM)
    assert shown[("q1", 0)].correct is True and shown[("q1", 0)].scoring == own.id

    proc = run_cli("score", str(out), "--scorer", "exact_scorer:ExactMatchScorer", "--json",
                   env={"PYTHONPATH": env["PYTHONPATH"]})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)[SYSTEM]
    assert report["accuracy"] == 0.0  # exact match does not

    store = RunStore(out, create=False)
    plugin = store.latest_scoring()
    assert plugin is not None and plugin.id != own.id and plugin.track == "docqa"
    assert plugin.settings.scorer.startswith("plugin scorer exact_scorer:ExactMatchScorer: exact match")
    assert plugin.reports[SYSTEM]["accuracy"] == 0.0  # the report as --json printed it
    scoring, item = store.scored_items(SYSTEM)[("q1", 0)]
    assert scoring.id == plugin.id
    assert (item.status, item.score, item.correct) == ("scored", 0.0, False)
    assert item.row["scorer"] == "exact_scorer:ExactMatchScorer"
    shown, _ = system_scores(store, SYSTEM)  # what `deskbench view` shows for the episode
    score = shown[("q1", 0)]
    assert score.stored and score.scoring == plugin.id and score.correct is False
    assert "plugin scorer exact_scorer:ExactMatchScorer" in score.source

    proc = run_cli("info", str(out))  # the scorings are listed with the run
    assert proc.returncode == 0, proc.stderr
    assert "exact_scorer:ExactMatchScorer" in proc.stdout
