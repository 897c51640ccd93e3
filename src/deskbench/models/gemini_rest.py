"""The Gemini API's REST methods other than chat (the File Search stores of `gemini-file-search`,
the Interactions API of `gemini-deep-research`), with the standard library's HTTP: one blocking
request at a time (an async caller runs it in a worker thread).

The key goes in the x-goog-api-key header, as the google-genai SDK sends it; the key and the
endpoint root are read as models/gemini_native.py reads them (GEMINI_API_KEY, else GOOGLE_API_KEY;
GOOGLE_GEMINI_BASE_URL, a simulator in the tests). A refusal is a GeminiApiError with the HTTP
status and the message of Google's error body {"error": {"code", "message", "status"}}."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Self

from deskbench.models.gemini_native import API_ROOT, BASE_URL_ENV, key_from_env

TIMEOUT = 120.0  # seconds per HTTP request (a poll returns at once; long work runs server-side)


class GeminiApiError(Exception):
    """The API refused a request: its HTTP status (0: a reply the API does not document) and the
    error body's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class GeminiRest:
    """The REST API at one root with one key."""

    root: str
    key: str

    @classmethod
    def from_env(cls) -> Self | None:
        """The API the environment names; None when no key is set."""
        key = key_from_env()
        if not key:
            return None
        return cls((os.environ.get(BASE_URL_ENV) or API_ROOT).rstrip("/"), key)

    def request(self, method: str, path: str, body: Any = None, *, data: bytes | None = None,
                headers: dict[str, str] | None = None, url: str | None = None) -> tuple[Any, dict[str, str]]:
        """One request to {root}/{path} (or to `url`), with `body` as JSON or `data` as it is: the
        reply's JSON ({} when empty) and its headers (lower-case names); GeminiApiError on a refusal."""
        sent = {"x-goog-api-key": self.key, **(headers or {})}
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        request = urllib.request.Request(url or f"{self.root}/{path}", data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                raw = response.read()
                got = {k.lower(): v for k, v in response.headers.items()}
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = json.loads(raw)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode(errors="replace")[:200] or exc.reason
            raise GeminiApiError(exc.code, str(message)) from exc
        return (json.loads(raw) if raw.strip() else {}), got
