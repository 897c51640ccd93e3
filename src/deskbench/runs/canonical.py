"""A run store's content without the wall clock: what two runs of the same scripted work share.

Two runs never give byte-identical run.sqlite files, even on one executor: each episode stores
when it started and ended, each model call and tool call how long it took, and the file's pages
hold rows in the order episodes ended. `canonical_dump` is what "the same store" means for
deskbench (tests/runs/test_ray_executor.py compares local against local and local against ray with it):
every table's rows, each column's value decoded (JSON text parsed, transcript bodies
decompressed), the wall-clock columns and keys named below left out, the rows sorted. Everything
else, every byte of every submission, trajectory count, transcript message and output file,
must be equal.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from deskbench.runs.transcript import decode

# columns that hold a time of day (when an episode started or ended, when a judge was called)
WALL_CLOCK_COLUMNS: dict[str, frozenset[str]] = {
    "episodes": frozenset({"started_at", "finished_at"}),
    "episode_tries": frozenset({"started_at", "finished_at"}),
    "judge_transcripts": frozenset({"created"}),
    "scorings": frozenset({"created"}),
}
# keys, at any depth of a JSON value, that hold a duration or an offset in seconds
WALL_CLOCK_KEYS = frozenset({"seconds", "at", "started", "elapsed", "wall_seconds", "duration"})


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in WALL_CLOCK_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _value(table: str, row: dict[str, Any], column: str) -> Any:
    value = row[column]
    if column == "body" and "codec" in row and isinstance(value, bytes):
        return _strip(json.loads(decode(row["codec"], value).model_dump_json()))
    if column == "transcript_body" and row.get("transcript_codec") and isinstance(value, bytes):  # an earlier try's
        return _strip(json.loads(decode(row["transcript_codec"], value).model_dump_json()))
    if isinstance(value, bytes):
        return {"sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return _strip(json.loads(value))
        except ValueError:
            return value
    return value


def canonical_dump(run_dir: Path) -> dict[str, list[str]]:
    """Every table of RUNDIR/run.sqlite as sorted JSON rows, wall clock left out, and every
    output file under RUNDIR/outputs by its sha256 (as the table `outputs/`)."""
    con = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        dump: dict[str, list[str]] = {}
        for table in tables:
            skip = WALL_CLOCK_COLUMNS.get(table, frozenset())
            rows = []
            for row in con.execute(f'SELECT * FROM "{table}"'):
                record = dict(row)
                rows.append(json.dumps({c: _value(table, record, c) for c in record if c not in skip},
                                       sort_keys=True, ensure_ascii=False))
            dump[table] = sorted(rows)
    finally:
        con.close()
    outputs = run_dir / "outputs"
    dump["outputs/"] = sorted(f"{p.relative_to(outputs)} {hashlib.sha256(p.read_bytes()).hexdigest()}"
                              for p in outputs.rglob("*") if p.is_file()) if outputs.is_dir() else []
    return dump
