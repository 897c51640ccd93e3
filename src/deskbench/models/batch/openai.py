"""OpenAI's Batch API for chat completions (https://platform.openai.com/docs/guides/batch,
https://platform.openai.com/docs/api-reference/batch), through the `openai` SDK.

A batch is a JSONL file uploaded with purpose "batch" (POST /v1/files), one line per request:
{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": <the chat.completions
body models/openai_chat.py sends>}; then POST /v1/batches {input_file_id, endpoint
"/v1/chat/completions", completion_window "24h"}. The batch moves through validating,
in_progress, finalizing to completed (or failed: the file was refused as a whole; expired: the
24 h passed; cancelling, cancelled). Its output file holds the answered requests, each line
{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}; its error file
the others: a request the API refused (a status_code >= 400 and the usual error body) or one
that did not run before the window closed ("error": {"code": "batch_expired", ...}).

Each batch carries `deskbench_key` in its metadata (base.batch_key of its requests), so a
process killed after the batch was created but before its id was written finds it again
(`find`: the list of batches, newest first). Limits: 50,000 requests and 200 MB per file, one
model per batch. Price: "a 50% cost discount
compared to synchronous APIs" (the guide), so `discount` is 0.5 of the price table's standard
price. Keys and base URL as the chat client reads them (OPENAI_API_KEY, OPENAI_BASE_URL).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from deskbench.errors import UserError
from deskbench.models.batch.base import BatchItem, BatchState, BatchStatus, SdkBackend, batch_key
from deskbench.models.openai_chat import OpenAIChat, parse_completion, request_kwargs
from deskbench.models.sdk_errors import sdk_error, status_error
from deskbench.models.types import ChatModel, ChatRequest, ChatResponse, ModelError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

ENDPOINT: Final = "/v1/chat/completions"
WINDOW: Final = "24h"  # the only completion window the API takes
MAX_REQUESTS = 50_000
MAX_FILE_BYTES = 200 * 1024 * 1024
DISCOUNT = 0.5
KEY_FIELD = "deskbench_key"  # the batch's metadata field holding base.batch_key of its requests
FIND_WITHIN = 1000  # batches listed (newest first) when looking for one by its key

STATES: dict[str, BatchState] = {
    "validating": "running", "in_progress": "running", "finalizing": "running", "cancelling": "running",
    "completed": "ended", "failed": "failed", "expired": "expired", "cancelled": "cancelled",
}


class OpenAIBatch(SdkBackend["AsyncOpenAI"]):
    """The Batch API for one OpenAI chat model."""

    provider = "openai"
    discount = DISCOUNT
    max_requests = MAX_REQUESTS

    def _open(self) -> AsyncOpenAI:
        import openai

        return self._opened(openai.AsyncOpenAI, openai.OpenAIError)

    def _error(self, exc: Exception) -> ModelError:
        import openai

        if isinstance(exc, openai.OpenAIError):
            return sdk_error(exc, openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError)
        raise exc

    def body(self, request: ChatRequest) -> dict[str, Any]:
        return {"model": self.model, **request_kwargs(request, self.caps, self.id)}

    async def submit(self, items: Sequence[BatchItem]) -> str:
        lines = [json.dumps({"custom_id": i.custom_id, "method": "POST", "url": ENDPOINT, "body": i.body},
                            ensure_ascii=False, separators=(",", ":")) for i in items]
        data = ("\n".join(lines) + "\n").encode()
        if len(data) > MAX_FILE_BYTES:  # BatchedModel caps the count; the size is the other limit
            raise ModelError(f"a batch of {len(items)} requests is {len(data) // 2**20} MB, over the Batch API's "
                             "200 MB", retryable=False)
        with self._mapped():
            client = self._sdk()
            uploaded = await client.files.create(file=("deskbench-batch.jsonl", data, "application/jsonl"),
                                                 purpose="batch")
            batch = await client.batches.create(input_file_id=uploaded.id, endpoint=ENDPOINT,
                                                completion_window=WINDOW,
                                                metadata={"created_by": "deskbench", KEY_FIELD: batch_key(items)})
        return batch.id

    async def find(self, key: str) -> str | None:
        """The batch created under `key` (its metadata), among the FIND_WITHIN most recent."""
        with self._mapped():
            seen = 0
            async for batch in self._sdk().batches.list(limit=100):
                if (batch.metadata or {}).get(KEY_FIELD) == key and batch.endpoint == ENDPOINT:
                    return batch.id
                seen += 1
                if seen >= FIND_WITHIN:
                    break
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        with self._mapped():
            batch = await self._sdk().batches.retrieve(batch_id)
        counts = batch.request_counts
        detail = "; ".join(f"{e.code or 'error'}: {e.message}" + (f" (line {e.line})" if e.line else "")
                           for e in (batch.errors.data or [] if batch.errors else []))
        return BatchStatus(state=STATES.get(batch.status, "running"), provider_state=batch.status,
                           total=counts.total if counts else 0, succeeded=counts.completed if counts else 0,
                           failed=counts.failed if counts else 0, detail=detail)

    async def results(self, batch_id: str) -> dict[str, ChatResponse | ModelError]:
        with self._mapped():
            client = self._sdk()
            batch = await client.batches.retrieve(batch_id)
            texts = [(await client.files.content(fid)).text for fid in (batch.output_file_id, batch.error_file_id)
                     if fid]
        out: dict[str, ChatResponse | ModelError] = {}
        for text in texts:
            for line in text.splitlines():
                if line.strip():
                    custom, outcome = parse_line(line, self.model)
                    if custom is not None:
                        out[custom] = outcome
        return out

    async def cancel(self, batch_id: str) -> None:
        with self._mapped():
            await self._sdk().batches.cancel(batch_id)


def parse_line(line: str, model: str) -> tuple[str | None, ChatResponse | ModelError]:
    """One output or error file line: its custom id and the reply (models/openai_chat.py's parser)
    or the error, mapped as the chat client maps a refusal (models/sdk_errors.py)."""
    try:
        row = json.loads(line)
    except ValueError:
        return None, ModelError("unreadable batch output line", retryable=True)
    if not isinstance(row, dict):
        return None, ModelError("unreadable batch output line", retryable=True)
    custom = row.get("custom_id") if isinstance(row.get("custom_id"), str) else None
    error = row.get("error")
    response = row.get("response")
    if isinstance(error, dict):
        code, message = error.get("code") or "error", error.get("message") or ""
        return custom, ModelError(f"batch {code}: {message}", retryable=True)
    if not isinstance(response, dict):
        return custom, ModelError("the batch line has neither a response nor an error", retryable=True)
    status = response.get("status_code")
    body = response.get("body")
    if isinstance(status, int) and status >= 400:
        inner = body.get("error", body) if isinstance(body, dict) else body
        message = inner.get("message") if isinstance(inner, dict) else None
        return custom, status_error(status, inner, None, f"Error code: {status}" + (f" - {message}" if message else ""))
    try:
        return custom, parse_completion(body, model)
    except ModelError as exc:
        return custom, exc


def for_model(inner: ChatModel) -> OpenAIBatch:
    """The backend for an `openai/` chat adapter: its model, capabilities, key and base URL."""
    if not isinstance(inner, OpenAIChat) or not inner.id.startswith("openai/"):
        raise UserError(f"--batch: {inner.id} is not an OpenAI model; OpenAI's Batch API serves openai/MODEL")
    # registry.py opens openai/ models with the SDK's own environment (OPENAI_API_KEY, OPENAI_BASE_URL)
    return OpenAIBatch(inner.model, inner.caps, model_id=inner.id)
