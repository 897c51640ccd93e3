"""A finished run resumed with `--executor ray` starts or joins no cluster: there is nothing for
one to do (before, a resume started a whole local Ray cluster to run no episode). Run in this
process with the cluster's entry point made to fail, so a connection would show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import _run_in_process, run_cli

from deskbench.corpus import Corpus
from deskbench.runs import ray_executor


def test_a_finished_run_resumed_on_ray_connects_to_nothing(operator_corpus: Corpus, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": i, "question": q, "answer_variants": [["x"]]}) + "\n"
                             for i, q in (("a", "What do cars parked overnight pay?"), ("b", "Which catalogue is listed?"))))
    args = ("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--agent", "lexical",
            "--out", str(tmp_path / "run"))
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr
    assert "2 episodes run (0 errors), 0 already done" in first.stderr

    def no_cluster(*_: object, **__: object) -> None:
        raise AssertionError("a resume with nothing to run connected to Ray")

    monkeypatch.setattr(ray_executor, "connect", no_cluster)
    again = _run_in_process((*args, "--executor", "ray"), cwd=None, env=None)
    assert again.returncode == 0, again.stderr
    assert "0 episodes run (0 errors), 2 already done" in again.stderr
