"""The no-model lexical baseline: line choice and answer extraction by hand, and a real run over
the sample corpus through `deskbench run --agent lexical` (no model, no key)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import run_cli

from deskbench.tracks.docqa.agents.lexical import best_line, extract_answer, label_pairs
from deskbench.tracks.docqa.generate.sample import build_sample_corpus


def test_best_line_prefers_rare_shared_words_and_earlier_pages() -> None:
    pages = [
        ("a.pdf", 1, "Town budget overview\nLibrary hours: 9 to 5"),
        ("b.pdf", 3, "Library renovation budget: $420,000\nParks budget: $12,000"),
    ]
    assert best_line("What is the library renovation budget?", pages) == ("b.pdf", 3, "Library renovation budget: $420,000")
    assert best_line("Zebra?", pages) is None
    tie = [("x.pdf", 1, "permit fee: 10"), ("y.pdf", 2, "permit fee: 20")]
    assert best_line("permit fee?", tie) == ("x.pdf", 1, "permit fee: 10")


def test_label_pairs_split_two_column_form_lines() -> None:
    assert label_pairs("BP-6145 Applicant: Johanna Alvarez Site address: 69 Harbour Lane") == [
        ("Applicant", "Johanna Alvarez"), ("Site address", "69 Harbour Lane")]
    assert label_pairs("Open from 12:00; reservations recommended") == []
    assert extract_answer("What is the site address on permit BP-6145?",
                          "Applicant: Johanna Alvarez Site address: 69 Harbour Lane") == "69 Harbour Lane"


def test_extract_answer_label_value_number_and_rest() -> None:
    assert extract_answer("What is the permit number?", "Permit number: BP-2023-0412") == "BP-2023-0412"
    assert extract_answer("How much did the 2023 renovation cost?", "In 2023 the renovation cost $4,200 in all") == "$4,200"
    assert extract_answer("Who chairs the board?", "The board chair Maria Lopez") == "Maria Lopez"


def test_lexical_run_needs_no_model(tmp_path: Path) -> None:
    build_sample_corpus(tmp_path / "pdfs")
    assert run_cli("ingest", str(tmp_path / "pdfs"), "--corpus", str(tmp_path / "corpus"), "--quiet").returncode == 0
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({
        "id": "q1", "question": "How many culverts were replaced?", "answer_variants": [["x"]],
        "evidence": [{"document": "riverton-public-works-2023.pdf", "page": 1}]}) + "\n")
    proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(tmp_path / "corpus"), "--agent", "lexical",
                   "--out", str(tmp_path / "run"), "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["lexical"]["n"] == 1
    row = sqlite3.connect(tmp_path / "run" / "run.sqlite").execute(
        "SELECT system, status, submission, trajectory FROM episodes").fetchone()
    assert row[0] == "lexical" and row[1] == "ok"
    sub, steps = json.loads(row[2]), json.loads(row[3])
    assert sub["steps"] == 1 and sub["search_history"] and len(sub["citations"]) == 1
    assert steps[0]["kind"] == "tool_call" and steps[0]["result"]["pages"]
