"""Response cache: one SQLite file, keyed on model + request fingerprint.

On by default for judges (the same answer judged twice costs twice and may disagree with itself),
opt-in for agents (an agent's run should normally call the model).
"""

from __future__ import annotations

import sqlite3
import threading
from contextvars import ContextVar
from pathlib import Path

from deskbench.models.types import ChatResponse

ATTEMPT: ContextVar[int] = ContextVar("deskbench_attempt", default=0)
"""The attempt of the episode making a call (set by the runner in each episode's task). Attempt k
> 0 is part of the cache key: with one key for every attempt, attempts 1..k-1 would replay attempt
0's replies and pass@k would measure nothing. Attempt 0's key is the plain request's, so caches
made before attempts were keyed still serve it."""


def cache_key(fingerprint: str) -> str:
    attempt = ATTEMPT.get()
    return fingerprint if attempt == 0 else f"{fingerprint}#attempt={attempt}"


class ResponseCache:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._con = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL,"
            " response TEXT NOT NULL, created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )

    def get(self, key: str) -> ChatResponse | None:
        with self._lock:
            row = self._con.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return ChatResponse.model_validate_json(row[0]) if row else None

    def put(self, key: str, model: str, response: ChatResponse) -> None:
        with self._lock:
            self._con.execute(
                "INSERT OR REPLACE INTO responses(key, model, response) VALUES (?, ?, ?)",
                (key, model, response.model_dump_json()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._con.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._con.close()
