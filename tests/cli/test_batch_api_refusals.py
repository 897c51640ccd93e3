"""`--batch-api` refused in one line (exit 2, nothing created) where it cannot work: a model whose
provider has no batch API in deskbench, `--executor ray`, `score` of a predictions file (no run
store to keep its batches in) or without a judge; and the concurrency it picks when none is given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from conftest import run_cli

from deskbench.cli import batch_flag
from deskbench.errors import UserError


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "q0", "question": "Which year?", "answer_variants": [["2020"]]}) + "\n")
    return path


@pytest.mark.parametrize(("extra", "words"), [
    (["--model", "mistral/pixtral-large-latest"], "--batch-api: mistral/pixtral-large-latest has no batch API"),
    (["--model", "gemini/gemini-2.5-flash"], "Gemini's batch mode is on its native API: use google/MODEL"),
    (["--model", "openai/gpt-4o-mini", "--judge", "ollama/llama3.2"], "ollama/llama3.2 has no batch API"),
    (["--model", "openai/gpt-4o-mini", "--executor", "ray"], "--batch-api is for --executor local"),
])
def test_run_refuses_what_no_batch_can_serve(tmp_path: Path, extra: list[str], words: str) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--tasks", str(_tasks(tmp_path)), "--agent", "guess", "--out", str(out), "--batch-api",
                   "--quiet", *extra, env={"OPENAI_API_KEY": "sk-test", "MISTRAL_API_KEY": "k", "GEMINI_API_KEY": "k"})
    assert proc.returncode == 2 and words in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not out.exists()


def test_score_refuses_a_predictions_file_and_a_score_without_a_judge(tmp_path: Path) -> None:
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(json.dumps({"question_id": "q0", "answer": ["2020"]}) + "\n")
    proc = run_cli("score", str(predictions), "--judge", "openai/gpt-4o-mini", "--batch-api",
                   env={"OPENAI_API_KEY": "sk-test"})
    assert proc.returncode == 2 and "--batch-api scores a run directory" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    with pytest.raises(UserError, match="--batch-api batches the judge's calls, and this command has none"):
        batch_flag.check([], what="judge")
    assert batch_flag.names("openai/x") == ["openai/x"] and batch_flag.names(["a/b", "c/d"]) == ["a/b", "c/d"]
    assert batch_flag.names(None) == []


def test_the_concurrency_under_batch_is_large_unless_given() -> None:
    seen: list[int] = []
    app = typer.Typer()

    @app.command()
    def cmd(ctx: typer.Context, concurrency: int = 16, batch: bool = False) -> None:
        seen.append(batch_flag.run_concurrency(ctx, batch, concurrency))

    from typer.testing import CliRunner

    for args in ([], ["--batch"], ["--batch", "--concurrency", "8"], ["--concurrency", "8"]):
        assert CliRunner().invoke(app, args).exit_code == 0
    assert seen == [16, batch_flag.BATCH_CONCURRENCY, 8, 8]
