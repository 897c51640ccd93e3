"""Gemini API batch mode, the Google backend of models/batch/base.py.

Reference: https://ai.google.dev/gemini-api/docs/batch-api (the guide) and
https://ai.google.dev/api/batch-mode (the REST reference); the shapes are the ones Google's own
genai SDK sends and reads (googleapis/python-genai, google/genai/batches.py and files.py).

* Submit: `POST /v1beta/models/{model}:batchGenerateContent` with {"batch": {"displayName",
  "inputConfig"}}. The requests go inline ({"requests": {"requests": [{"request", "metadata":
  {"key"}}]}}) while the whole create body stays under the guide's 20 MB; a larger batch is
  uploaded first as a JSONL file of {"key", "request"} lines through the Files API's resumable
  upload, and named by {"fileName"}. Each request body is the one GeminiNative sends to
  generateContent (gemini_native.to_gemini): one wire format, batched or not.
* The answer is a long-running Operation named like the batch ("batches/..."); its `metadata`
  is the batch (state BATCH_STATE_PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, EXPIRED).
  Status polls `GET /v1beta/batches/{id}`.
* Results, once SUCCEEDED: the operation's `response` (the SDK reads the same object from
  `metadata.output`) holds either `inlinedResponses.inlinedResponses` (in request order, each
  with the request's metadata and a `response` or an `error` status) or `responsesFile`, a file
  downloaded from `/download/v1beta/{file}:download?alt=media` whose lines carry the request's
  key; each reply is read by gemini_native.parse_reply, so the model version the API returned
  (`modelVersion`) is kept.
* A batch pending or running for more than 48 hours expires (the guide) and a cancelled one
  stops: for both the API gives no results, so base.py sends their requests on their own.
* Price: the guide's "50% of the standard cost" (BatchBackend.discount 0.5).

The key and the API root are the ones the google/ adapter uses (GEMINI_API_KEY or
GOOGLE_API_KEY; GOOGLE_GEMINI_BASE_URL), so a local simulator serves both in the tests.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from deskbench.models.batch.base import BatchBackend, BatchItem, BatchState, BatchStatus
from deskbench.models.gemini_native import (
    API_VERSION,
    KEY_ENVS,
    GeminiNative,
    LoopHttp,
    key_from_env,
    parse_body,
    parse_reply,
    reply_error,
)
from deskbench.models.types import ChatModel, ChatRequest, ChatResponse, ModelError

INLINE_LIMIT = 19 * 1024 * 1024  # the guide's 20 MB for inline requests, less a margin for the envelope
MAX_REQUESTS = 50_000  # deskbench's cap per batch (the guide names a file size, not a count: 2 GB)
STATES: dict[str, BatchState] = {
    "BATCH_STATE_UNSPECIFIED": "running", "BATCH_STATE_PENDING": "running", "BATCH_STATE_RUNNING": "running",
    "BATCH_STATE_SUCCEEDED": "ended", "BATCH_STATE_FAILED": "failed", "BATCH_STATE_CANCELLED": "cancelled",
    "BATCH_STATE_EXPIRED": "expired"}
STATE_NAMES = tuple(STATES)  # BatchState by number, should a reply carry numbers
# google.rpc.Code -> the HTTP status the same refusal has on generateContent (a request's error in the results)
RPC_TO_HTTP = {3: 400, 4: 504, 5: 404, 7: 403, 8: 429, 9: 400, 10: 409, 13: 500, 14: 503}


def for_model(inner: ChatModel) -> BatchBackend:
    """The backend for a google/ model (a GeminiNative adapter)."""
    if not isinstance(inner, GeminiNative):
        raise TypeError(f"the Gemini batch backend serves google/ models (GeminiNative), not {type(inner).__name__}")
    return GeminiBatch(inner)


def _int(value: object) -> int:
    """An int64 count, which proto JSON sends as a string."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _state_name(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(STATE_NAMES):
        return STATE_NAMES[value]
    return value if isinstance(value, str) else "BATCH_STATE_UNSPECIFIED"


def request_error(status: object, model: str) -> ModelError:
    """A request's error status in the results ({"code": google.rpc.Code, "message"}) as the
    ModelError the same refusal raises on generateContent (gemini_native.reply_error)."""
    code = status.get("code") if isinstance(status, dict) else None
    message = status.get("message") if isinstance(status, dict) else None
    http = RPC_TO_HTTP.get(code, 500) if isinstance(code, int) else 500
    error = reply_error(http, {"error": {"code": http, "message": str(message or status)}}, {})
    return ModelError(f"{model} batch request failed: {error}", retryable=error.retryable, status=error.status,
                      fatal=error.fatal)


class GeminiBatch:
    """One Gemini model's batch mode (see the module docstring)."""

    provider = "google"
    discount = 0.5
    max_requests = MAX_REQUESTS

    def __init__(self, inner: GeminiNative, *, api_key: str | None = None, timeout: float = 300.0) -> None:
        self.inner = inner
        self.model = inner.model
        self.root = inner.url.partition(f"/{API_VERSION}/")[0]
        key = api_key or key_from_env()
        if not key:
            from deskbench.errors import UserError

            raise UserError(f"--batch with {inner.id} needs an API key: set {' or '.join(KEY_ENVS)} in the environment")
        self._key = key
        self._http = LoopHttp(self.root, timeout)
        self._final: dict[str, dict[str, Any]] = {}  # batch name -> its last operation, once done

    # -- the protocol ------------------------------------------------------------------------
    def body(self, request: ChatRequest) -> dict[str, Any]:
        return self.inner.body(request)

    async def submit(self, items: Sequence[BatchItem]) -> str:
        display = f"deskbench-{items[0].custom_id}-{len(items)}" if items else "deskbench"
        inline = {"requests": {"requests": [{"request": item.body, "metadata": {"key": item.custom_id}}
                                            for item in items]}}
        payload = {"batch": {"displayName": display, "inputConfig": inline}}
        data = _json(payload)
        if len(data) > INLINE_LIMIT:
            lines = b"".join(_json({"key": item.custom_id, "request": item.body}) + b"\n" for item in items)
            file = await self._upload(lines, display)
            data = _json({"batch": {"displayName": display, "inputConfig": {"fileName": file}}})
        operation = await self._call("POST", f"/{API_VERSION}/models/{self.model}:batchGenerateContent", data)
        name = operation.get("name")
        if not isinstance(name, str) or not name.startswith("batches/"):
            raise ModelError(f"the batch create answer has no batch name: {str(operation)[:200]}", retryable=True)
        return name

    async def status(self, batch_id: str) -> BatchStatus:
        operation = await self._call("GET", f"/{API_VERSION}/{batch_id}")
        meta = _dict(operation.get("metadata"))
        name = _state_name(meta.get("state"))
        state = STATES.get(name, "running")
        if state != "running" or operation.get("done") is True:
            self._final[batch_id] = operation
        stats = _dict(meta.get("batchStats"))
        error = operation.get("error")
        detail = str(error.get("message") or error) if isinstance(error, dict) else ""
        return BatchStatus(state=state, provider_state=name, total=_int(stats.get("requestCount")),
                           succeeded=_int(stats.get("successfulRequestCount")),
                           failed=_int(stats.get("failedRequestCount")), detail=detail)

    async def results(self, batch_id: str) -> dict[str, ChatResponse | ModelError]:
        operation = self._final.get(batch_id) or await self._call("GET", f"/{API_VERSION}/{batch_id}")
        meta = _dict(operation.get("metadata"))
        output = operation.get("response") if isinstance(operation.get("response"), dict) else meta.get("output")
        if not isinstance(output, dict):
            return {}  # failed, cancelled or expired: no results
        out: dict[str, ChatResponse | ModelError] = {}
        if isinstance(file := output.get("responsesFile"), str):
            raw = await self._download(file)
            for line in raw.decode("utf-8", "replace").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:  # a line that is no JSON answers nothing: its request goes on its own
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                    out[entry["key"]] = self._outcome(entry)
            return out
        inlined = output.get("inlinedResponses")
        listed = inlined.get("inlinedResponses") if isinstance(inlined, dict) else None
        for entry in listed if isinstance(listed, list) else []:
            metadata = entry.get("metadata") if isinstance(entry, dict) else None
            key = metadata.get("key") if isinstance(metadata, dict) else None
            if isinstance(key, str):
                out[key] = self._outcome(entry)
        return out

    async def cancel(self, batch_id: str) -> None:
        await self._call("POST", f"/{API_VERSION}/{batch_id}:cancel", b"{}")

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- reading ----------------------------------------------------------------------------
    def _outcome(self, entry: dict[str, Any]) -> ChatResponse | ModelError:
        if "error" in entry:
            return request_error(entry["error"], self.inner.id)
        try:
            return parse_reply(entry.get("response"), self.model)
        except ModelError as exc:
            return exc

    # -- HTTP -------------------------------------------------------------------------------
    async def _call(self, method: str, path: str, data: bytes | None = None) -> dict[str, Any]:
        """A JSON call to the API; an error answer as gemini_native's ModelError."""
        headers = {"x-goog-api-key": self._key}
        if data is not None:
            headers["content-type"] = "application/json"
        status, raw, reply_headers = await self._http.send(method, self.root + path, data, headers)
        parsed = parse_body(raw)
        if status >= 400:
            raise reply_error(status, parsed, reply_headers)
        if not isinstance(parsed, dict):
            raise ModelError(f"the batch API answered {path} with no JSON object", retryable=True)
        return parsed

    async def _upload(self, data: bytes, display: str) -> str:
        """Upload a JSONL input file (the Files API's resumable upload); its name ("files/...")."""
        start = {"x-goog-api-key": self._key, "content-type": "application/json",
                 "x-goog-upload-protocol": "resumable", "x-goog-upload-command": "start",
                 "x-goog-upload-header-content-length": str(len(data)),
                 "x-goog-upload-header-content-type": "application/jsonl"}
        status, raw, headers = await self._http.send("POST", f"{self.root}/upload/{API_VERSION}/files",
                                                _json({"file": {"displayName": display}}), start)
        if status >= 400:
            raise reply_error(status, parse_body(raw), headers)
        url = headers.get("x-goog-upload-url")
        if not isinstance(url, str) or not url:
            raise ModelError("the upload start answer has no X-Goog-Upload-URL", retryable=True)
        finish = {"x-goog-api-key": self._key, "x-goog-upload-command": "upload, finalize", "x-goog-upload-offset": "0"}
        status, raw, headers = await self._http.send("POST", url, data, finish)
        parsed = parse_body(raw)
        if status >= 400:
            raise reply_error(status, parsed, headers)
        file = parsed.get("file") if isinstance(parsed, dict) else None
        name = file.get("name") if isinstance(file, dict) else None
        if not isinstance(name, str):
            raise ModelError(f"the upload answer names no file: {str(parsed)[:200]}", retryable=True)
        return name

    async def _download(self, name: str) -> bytes:
        status, raw, headers = await self._http.send("GET", f"{self.root}/download/{API_VERSION}/{name}:download?alt=media",
                                                None, {"x-goog-api-key": self._key})
        if status >= 400:
            raise reply_error(status, parse_body(raw), headers)
        return raw


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
