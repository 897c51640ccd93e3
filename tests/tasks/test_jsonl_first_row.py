"""tasks/jsonl.py's first_row: how the analytics track tells its tasks file and AIDA's manifests
from other JSON Lines files, by their first row."""

from __future__ import annotations

from pathlib import Path

from deskbench.tasks.jsonl import first_row


def test_the_first_non_blank_line_is_read_past_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf\n  \n" + b'{"id": "QA_1", "question": "q"}\n{"id": "QA_2"}\n')
    assert first_row(path) == {"id": "QA_1", "question": "q"}


def test_what_cannot_be_read_or_parsed_is_none(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"q": "caf\xe9"}\n')
    assert [first_row(tmp_path / n) for n in ("empty.jsonl", "bad.jsonl", "latin1.jsonl", "missing.jsonl")] == \
        [None, None, None, None]
