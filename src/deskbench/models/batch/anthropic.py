"""Anthropic's Message Batches API (https://platform.claude.com/docs/en/build-with-claude/batch-processing,
https://platform.claude.com/docs/en/api/messages/batches), through the `anthropic` SDK.

A batch is one POST /v1/messages/batches {"requests": [{"custom_id", "params"}, ...]}, where
`params` is the Messages API body models/anthropic_chat.py sends (its `to_anthropic`, plus the
model): no file to upload. The batch is `in_progress` (or `canceling`) until every request has
an outcome, then `ended`; its results (GET results_url, JSONL, in no fixed order) give each
custom_id one of `succeeded` (a Message, read by anthropic_chat.py's own `read_reply`),
`errored` (the error the Messages API would have answered: the params are validated only when
the batch is processed), `canceled` or `expired` (not processed: left out of the map, so the
caller sends it on its own). A batch not done 24 hours after creation expires; results stay 29
days.

Limits: 100,000 requests or 256 MB per batch, whichever comes first; custom_id
^[a-zA-Z0-9_-]{1,64}$, unique in the batch (base.custom_id's ids are). `stream` and
`max_tokens: 0` are not taken in a batch (the Anthropic client sends neither). Price: "All usage
is charged at 50% of the standard API prices", so `discount` is 0.5. Key and base URL as the
chat client has them (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL).

Structured output goes as a forced RESPOND_TOOL call, whose input is the reply's text; the
result does not say which request asked for that, so the backend notes it when it builds the
body (by the custom id base.custom_id gives that body in this attempt) -- in a resumed process
too, since BatchedModel builds every body again before it waits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from deskbench.errors import UserError
from deskbench.models.anthropic_chat import AnthropicChat, read_reply, to_anthropic
from deskbench.models.batch.base import BatchItem, BatchState, BatchStatus, SdkBackend, custom_id
from deskbench.models.cache import ATTEMPT
from deskbench.models.capabilities import Capabilities
from deskbench.models.sdk_errors import sdk_error, status_error
from deskbench.models.types import ChatModel, ChatRequest, ChatResponse, ModelError

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types.messages.batch_create_params import Request

MAX_REQUESTS = 100_000
MAX_BATCH_BYTES = 256 * 1024 * 1024
DISCOUNT = 0.5

# ERRORS_PAGE (https://platform.claude.com/docs/en/api/errors): each error type's HTTP status,
# for an errored result, which carries the type but no status.
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529}


class AnthropicBatch(SdkBackend["AsyncAnthropic"]):
    """The Message Batches API for one Claude model."""

    provider = "anthropic"
    discount = DISCOUNT
    max_requests = MAX_REQUESTS

    def __init__(self, model: str, caps: Capabilities, *, model_id: str | None = None,
                 base_url: str | None = None, api_key: str | None = None, timeout: float = 120.0) -> None:
        super().__init__(model, caps, model_id=model_id, base_url=base_url, api_key=api_key, timeout=timeout)
        self._structured: set[str] = set()  # custom ids whose request asked for a response schema

    def _open(self) -> AsyncAnthropic:
        import anthropic

        return self._opened(anthropic.AsyncAnthropic, anthropic.AnthropicError)

    def _error(self, exc: Exception) -> ModelError:
        import anthropic

        if isinstance(exc, anthropic.AnthropicError):
            if isinstance(exc, anthropic.APIStatusError | anthropic.APITimeoutError | anthropic.APIConnectionError):
                return sdk_error(exc, anthropic.APIStatusError, anthropic.APITimeoutError,
                                 anthropic.APIConnectionError)
            return ModelError(f"Anthropic batch: {exc}", retryable=True)  # e.g. no results_url yet
        raise exc

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The Messages API body the chat client sends (sampling fields, which the chat client
        passes to the SDK as extra_body, sit in the params as they do on the wire)."""
        body = {"model": self.model, **to_anthropic(request, self.caps)}
        if request.response_schema is not None:
            self._structured.add(custom_id(self.id, body, ATTEMPT.get()))
        return body

    async def submit(self, items: Sequence[BatchItem]) -> str:
        requests = [{"custom_id": i.custom_id, "params": i.body} for i in items]
        size = len(json.dumps({"requests": requests}, ensure_ascii=False, separators=(",", ":")).encode())
        if size > MAX_BATCH_BYTES:  # BatchedModel caps the count; the size is the other limit
            raise ModelError(f"a batch of {len(items)} requests is {size // 2**20} MB, over the Message Batches "
                             "API's 256 MB", retryable=False)
        with self._mapped():
            batch = await self._sdk().messages.batches.create(requests=cast("list[Request]", requests))
        return batch.id

    async def status(self, batch_id: str) -> BatchStatus:
        with self._mapped():
            batch = await self._sdk().messages.batches.retrieve(batch_id)
        counts = batch.request_counts
        total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
        return BatchStatus(state=_state(batch.processing_status, batch.cancel_initiated_at is not None,
                                        counts.expired),
                           provider_state=batch.processing_status, total=total, succeeded=counts.succeeded,
                           failed=counts.errored + counts.canceled + counts.expired)

    async def results(self, batch_id: str) -> dict[str, ChatResponse | ModelError]:
        out: dict[str, ChatResponse | ModelError] = {}
        with self._mapped():
            decoder = await self._sdk().messages.batches.results(batch_id)
            async for row in decoder:
                outcome = self._outcome(row.custom_id, row.result)
                if outcome is not None:
                    out[row.custom_id] = outcome
        return out

    def _outcome(self, cid: str, result: Any) -> ChatResponse | ModelError | None:
        """One result line: the reply, the error, or None for a request not processed."""
        if result.type == "succeeded":
            return read_reply(result.message, structured=cid in self._structured, model=self.model)
        if result.type == "errored":
            error = result.error.error
            status = ERROR_STATUS.get(error.type, 500)
            return status_error(status, {"type": error.type, "message": error.message}, None,
                                f"Error code: {status} - {error.message}")
        return None  # canceled, expired: not answered

    async def cancel(self, batch_id: str) -> None:
        with self._mapped():
            await self._sdk().messages.batches.cancel(batch_id)


def _state(processing_status: str, cancelled: bool, expired: int) -> BatchState:
    """The batch in base.BatchState's words: only `ended` has results; it ended by a cancel, by
    the 24 hours running out (requests expired), or by every request having an outcome."""
    if processing_status != "ended":
        return "running"  # in_progress, canceling
    if cancelled:
        return "cancelled"
    return "expired" if expired else "ended"


def for_model(inner: ChatModel) -> AnthropicBatch:
    """The backend for an `anthropic/` chat adapter: its model, capabilities, key and base URL."""
    if not isinstance(inner, AnthropicChat):
        raise UserError(f"--batch: {inner.id} is not an Anthropic model; the Message Batches API serves anthropic/MODEL")
    client = inner._client
    return AnthropicBatch(inner.model, inner.caps, model_id=inner.id, base_url=str(client.base_url),
                          api_key=client.api_key, timeout=120.0)

