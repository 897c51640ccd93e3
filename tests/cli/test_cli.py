"""The command line: JSON shapes, one-line errors with exit code 2, and the demo."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import cli_json, run_cli

from deskbench.corpus import Corpus


def test_search_json_has_exactly_the_documented_keys(operator_corpus: Corpus) -> None:
    hits = cli_json("search", "--corpus", str(operator_corpus.root), "annual report", "-k", "2", "--json")
    assert isinstance(hits, list) and len(hits) == 2
    for hit in hits:
        assert set(hit) == {"document", "page", "score", "snippet"}
        assert isinstance(hit["page"], int) and isinstance(hit["score"], float)
    assert hits == [h.model_dump() for h in operator_corpus.search("annual report", k=2)]


def test_search_text_output(operator_corpus: Corpus) -> None:
    proc = run_cli("search", "--corpus", str(operator_corpus.root), "carriage")
    assert proc.returncode == 0
    assert "alpha.pdf p.1" in proc.stdout and "carriage" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "--corpus", "{root}", '"unclosed'], "unbalanced quote"),
        (["search", "--corpus", "{root}", "fee AND"], "AND at position 5 needs a term after it"),
        (["search", "--corpus", "{root}", "the of"], "no searchable words"),
        (["search", "--corpus", "{missing}", "fee"], "missing does not exist"),
        (["ingest", "{root}", "--corpus", "{root}", "--ocr", "sometimes"], "--ocr 'sometimes' is not valid"),
        (["ingest", "{root}", "--corpus", "{root}", "--workers", "0"], "--workers 0 is not valid"),
        (["page", "--corpus", "{root}", "nope.pdf", "1", "--output", "{missing}/x.png"], "document 'nope.pdf' is not in the corpus"),
        (["page", "--corpus", "{root}", "alpha.pdf", "1", "--dpi", "5", "--output", "{missing}/x.png"], "dpi 5 is out of range"),
        (["info", "--corpus", "{missing}"], "missing does not exist"),
    ],
)
def test_user_errors_are_one_line_with_exit_code_2(
    operator_corpus: Corpus, tmp_path: Path, args: list[str], message: str
) -> None:
    filled = [a.format(root=operator_corpus.root, missing=tmp_path / "missing") for a in args]
    proc = run_cli(*filled)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    proc = run_cli("search", "fee")  # no --corpus
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_info_lists_documents_and_failures(operator_corpus: Corpus) -> None:
    info = cli_json("info", "--corpus", str(operator_corpus.root), "--json")
    assert isinstance(info, dict)
    assert (info["documents"], info["pages"], info["indexed_pages"]) == (2, 5, 5)
    assert info["documents_not_indexed"] == [] and info["files_failed"] == []
