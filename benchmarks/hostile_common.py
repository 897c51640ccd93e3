"""What the four hostile-input benchmarks share: running their probes before and after a fix,
the rows of docs/benchmarks.md, and the run's identity in the results file."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
Env = dict[str, str]


def run_probes(probes: dict[str, Callable[[Path, Env], dict[str, Any]]], src: Path | None,
               prefix: str = "bench-hostile-") -> dict[str, dict[str, Any]]:
    """Each probe in a temporary folder, with `src` (a checkout without the fix) first on the path
    when given; a probe that breaks the old code in another way is a figure too."""
    env: Env = {"PYTHONPATH": str(src)} if src else {}
    out = {}
    for name, probe in probes.items():
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            try:
                out[name] = probe(Path(tmp), env)
            except Exception as e:  # noqa: BLE001
                out[name] = {"verdict": f"probe failed: {type(e).__name__}: {str(e)[:160]}",
                             "seconds": None, "peak_mb": None, "held": False}
        print(f"{'before' if src else 'after '} {name}: {out[name]}", file=sys.stderr)
    return out


def markdown_rows(rows: list[dict[str, Any]]) -> str:
    """The rows of the Hostile inputs table in docs/benchmarks.md (probe | before | after | seconds | peak MB | bound | held)."""
    def before(b: dict[str, Any] | None) -> str:
        return "-" if b is None else f"{b['verdict']} ({b['seconds']} s, {b['peak_mb']} MB)"

    return "".join(f"| {r['probe']} | {before(r['before'])} | {r['after']['verdict']} | {r['after']['seconds']} | "
                   f"{r['after']['peak_mb']} | {r['bound']} | {'yes' if r['after']['held'] else '**no**'} |\n"
                   for r in rows)


def run_identity() -> dict[str, Any]:
    """When, where and at which commit a results file was made."""
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                         text=True).stdout.strip()
    return {"timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "kernel": platform.release()},
            "commit": sha}


def print_rows(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        print(f"{r['probe']}: held={r['after']['held']} {r['after']['verdict']}")
