"""A strict local simulator of Anthropic's Message Batches API, for the tests.

The batch endpoints (https://platform.claude.com/docs/en/api/messages/batches, and the guide
https://platform.claude.com/docs/en/build-with-claude/batch-processing) over real HTTP on
127.0.0.1, so the anthropic SDK's own `client.messages.batches` talks to it:

* POST /v1/messages/batches             create: {"requests": [{"custom_id", "params"}, ...]}
* GET  /v1/messages/batches/{id}        retrieve (the poll); each one moves processing on
* GET  /v1/messages/batches/{id}/results  the JSONL results, only once processing has ended
* POST /v1/messages/batches/{id}/cancel cancel: in_progress -> canceling -> ended
* GET  /v1/messages/batches             list (newest first, limit / after_id / before_id)
* DELETE /v1/messages/batches/{id}      delete, only once processing has ended
* POST /v1/messages                      tests/sim_anthropic.py's SimAnthropic (same script), for
                                        the requests a batch did not answer, sent on their own

What the API checks when the batch is created (the envelope: key, version header, the body's
shape, custom_id) is refused at once, with tests/sim_anthropic.py's error shapes. What it checks
in each request's `params` is not: the guide says "Validation of the params object for each message
request is performed asynchronously, and validation errors are returned when processing of the
entire batch has ended", so each request goes through every rule of tests/sim_anthropic.py (the
Messages API's rules, the same list) when the batch is processed, and a refusal there becomes that
request's `errored` result carrying the error the Messages API would have answered.

Time is the simulator's clock, not the wall's (no test depends on timing): a batch is processed
on the `polls_to_end`-th retrieve after its creation (0: at creation), unless `hold` keeps it in
progress until `release()`; `advance(hours)` moves the clock, and a batch still in progress 24
hours after creation ends with its unprocessed requests `expired` ("If a batch's processing does
not complete within 24 hours, the batch expires", guide, "Batch limitations"). Results stay for
29 days ("Batch results are available for 29 days after creation"): after that the results
endpoint answers 404 and `archived_at` is set.

Sources for texts: "requests.0.custom_id: String should have at most 64 characters" is a real
400 body (anthropics/anthropic-sdk-python#984); the pattern ^[a-zA-Z0-9_-]{1,64}$ is the API
spec's (as mirrored in tryAGI/Anthropic#67's openapi.yaml). The 404 texts, the duplicate-id and
the state refusals (results before the end, cancel after it, delete before it): text not found,
the form is the API's "<field>: <message>"; tests should not pin them.

    with SimAnthropicBatch(script=lambda params, n: {"kind": "text", "text": "hi"}) as sim:
        client = anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-test", max_retries=0)
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from http_double import MethodDouble, Response
from sim_anthropic import (
    DEFAULT_MESSAGES,
    DEFAULT_MODELS,
    MODEL_SPECS,
    RULES,
    Behaviour,
    Ctx,
    Refusal,
    SimAnthropic,
    _rand_id,
    _text_default,
    api_key_present,
    api_key_valid,
    bad,
    error_body,
    message_payload,
    version_known,
    version_present,
)

BATCHES_REF = "https://platform.claude.com/docs/en/api/messages/batches"
GUIDE = "https://platform.claude.com/docs/en/build-with-claude/batch-processing"

MAX_REQUESTS = 100_000  # GUIDE: "limited to either 100,000 Message requests or 256 MB in size"
MAX_BATCH_BYTES = 256 * 1024 * 1024
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # the API spec's pattern (module docstring)
EXPIRY = dt.timedelta(hours=24)  # BATCHES_REF: expires_at "is 24 hours after creation"
RESULTS_KEPT = dt.timedelta(days=29)  # GUIDE: "available for 29 days after creation"
ENVELOPE_RULES = {"api_key_present", "api_key_valid", "version_present", "version_known"}
# A request the script answers {"kind": "expire"} is one the API did not get to before expiry:
# its result is {"type": "expired"} when the batch ends (at expiry or when it ends otherwise).


def _iso(t: dt.datetime) -> str:
    """RFC 3339 with microseconds and a Z, as the API writes them ("2024-08-20T18:37:24.100435Z")."""
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Batch:
    id: str
    requests: list[dict[str, Any]]
    headers: dict[str, str]
    created_at: dt.datetime
    polls: int = 0
    status: str = "in_progress"  # BATCHES_REF: in_progress | canceling | ended
    ended_at: dt.datetime | None = None
    cancel_initiated_at: dt.datetime | None = None
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom_id -> result

    def counts(self) -> dict[str, int]:
        """BATCHES_REF, request_counts: every request is `processing` until the whole batch ends,
        and the sum always matches the number of requests."""
        out = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if self.status != "ended":
            out["processing"] = len(self.requests)
            return out
        for result in self.results.values():
            out[result["type"]] += 1
        return out


@dataclass
class SimAnthropicBatch(MethodDouble):
    """Context manager: `with SimAnthropicBatch() as sim:`; point the SDK at sim.base_url.

    script(params, n) answers the n-th processed request (1-based, over the simulator's life) with
    a tests/sim_anthropic.py Behaviour: text / tool / blocks succeed, status errors become errored
    results (api_error, overloaded_error...), {"kind": "expire"} leaves the request unprocessed."""

    script: Callable[[dict[str, Any], int], Behaviour] = _text_default
    api_key: str = "sk-ant-test"
    models: set[str] | None = None
    polls_to_end: int = 1
    hold: bool = False
    strict_alternation: bool = True  # read by sim_anthropic's rules through Ctx.sim
    batches: dict[str, Batch] = field(default_factory=dict)
    creations: int = 0  # batches created: a resumed run must not add one
    processed: list[dict[str, Any]] = field(default_factory=list)  # every request's params, as processed
    refused: list[dict[str, Any]] = field(default_factory=list)  # envelope refusals (status, body, rule)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of every request
    script_errors: list[str] = field(default_factory=list)
    issued_thinking: dict[str, str] = field(default_factory=dict)  # for the rules sim_anthropic shares
    issued_redacted: set[str] = field(default_factory=set)
    now: dt.datetime = field(default_factory=lambda: dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC))
    _lock: threading.RLock = field(default_factory=threading.RLock, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        self.models = set(DEFAULT_MODELS if self.models is None else self.models)
        unknown = self.models - set(MODEL_SPECS)
        if unknown:
            raise ValueError(f"no ModelSpec for {sorted(unknown)}: add it to sim_anthropic.MODEL_SPECS")
        # POST /v1/messages on the same base URL, as on the real API: a request a batch did not
        # answer is sent there on its own; `direct.accepted` lists them.
        self.direct = SimAnthropic(script=self.script, api_key=self.api_key, models=self.models,
                                   strict_alternation=self.strict_alternation)

    # --- the test's controls --------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self._url

    def env(self) -> dict[str, str]:
        """The environment that points the anthropic SDK (and so `deskbench`) here."""
        return {"ANTHROPIC_BASE_URL": self.base_url, "ANTHROPIC_API_KEY": self.api_key}

    def custom_ids(self) -> list[str]:
        """Every request's custom_id, over every batch created."""
        with self._lock:
            return [r["custom_id"] for b in self.batches.values() for r in b.requests]

    def advance(self, hours: float) -> None:
        """Move the simulator's clock on (batches past their 24 hours expire on the next look)."""
        with self._lock:
            self.now += dt.timedelta(hours=hours)

    def release(self) -> None:
        """Stop holding: in-progress batches are processed on their next retrieve."""
        with self._lock:
            self.hold = False

    # --- processing ----------------------------------------------------------------------
    def _process(self, batch: Batch) -> None:
        """Run every request (params validated by the Messages API's rules, then the script)."""
        for request in batch.requests:
            cid = request["custom_id"]
            if cid in batch.results:
                continue
            result = self._one(request["params"], batch.headers)
            if result is not None:
                batch.results[cid] = result
        self._end(batch, leftover="expired")

    def _one(self, params: Any, headers: dict[str, str]) -> dict[str, Any] | None:
        self.processed.append(params)
        refusal = self._check_params(params, headers)
        if refusal is not None:
            status, payload = refusal
            return {"type": "errored", "error": {**payload, "request_id": _rand_id("req_011C")}}
        if isinstance(params, dict) and params.get("stream"):
            # GUIDE: streaming is not supported inside a batch. Text not found.
            return _errored(400, "stream: Streaming is not supported in the Message Batches API")
        if isinstance(params, dict) and params.get("max_tokens") == 0:
            # GUIDE: "max_tokens: 0 (cache pre-warming) is not supported inside a batch". Text not found.
            return _errored(400, "max_tokens: Input should be greater than or equal to 1")
        try:
            behaviour = self.script(params, len(self.processed))
            while behaviour["kind"] == "slow":  # no waiting in a batch: the reply is what counts
                behaviour = behaviour.get("then", {"kind": "text", "text": "late"})
            if behaviour["kind"] == "expire":
                return None
            if behaviour["kind"] == "status":
                status = behaviour["status"]
                return _errored(status, behaviour.get("message", DEFAULT_MESSAGES.get(status, "Error")))
            message = message_payload(params, behaviour)
        except Exception as exc:  # noqa: BLE001 -- a broken script is a test bug; say so loudly
            self.script_errors.append(f"{type(exc).__name__}: {exc}")
            return _errored(500, f"simulator script error: {type(exc).__name__}: {exc}")
        message["usage"]["service_tier"] = "batch"  # a batch request's usage says so
        return {"type": "succeeded", "message": message}

    def _check_params(self, params: Any, headers: dict[str, str]) -> Refusal | None:
        ctx = Ctx(params, headers, self)  # type-compatible: the rules read models/strict_alternation/issued_*
        for name, fn in RULES:
            if name in ENVELOPE_RULES:
                continue
            refusal = fn(ctx)
            if refusal is not None:
                return refusal
        return None

    def _end(self, batch: Batch, leftover: str) -> None:
        for request in batch.requests:
            batch.results.setdefault(request["custom_id"], {"type": leftover})
        batch.status = "ended"
        batch.ended_at = self.now

    def _tick(self, batch: Batch, *, poll: bool) -> None:
        """What time and a poll do to a batch: expiry first, then cancellation, then processing."""
        if batch.status == "ended":
            return
        if self.now >= batch.created_at + EXPIRY:
            self._end(batch, leftover="expired")
            return
        if batch.status == "canceling":
            self._end(batch, leftover="canceled")  # GUIDE: requests not yet processed are canceled
            return
        if poll:
            batch.polls += 1
        if not self.hold and batch.polls >= self.polls_to_end:
            self._process(batch)

    # --- the wire ------------------------------------------------------------------------------
    def _object(self, batch: Batch) -> dict[str, Any]:
        archived = batch.created_at + RESULTS_KEPT <= self.now
        return {
            "id": batch.id, "type": "message_batch", "processing_status": batch.status,
            "request_counts": batch.counts(),
            "ended_at": _iso(batch.ended_at) if batch.ended_at else None,
            "created_at": _iso(batch.created_at), "expires_at": _iso(batch.created_at + EXPIRY),
            "archived_at": _iso(batch.created_at + RESULTS_KEPT) if archived else None,
            "cancel_initiated_at": _iso(batch.cancel_initiated_at) if batch.cancel_initiated_at else None,
            # BATCHES_REF: "Specified only once processing ends"
            "results_url": (f"{self.base_url}/v1/messages/batches/{batch.id}/results"
                            if batch.status == "ended" else None),
        }

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Response:
        if urlsplit(path).path == "/v1/messages" and method == "POST":
            with self._lock:
                self.calls.append((method, path))
            return self.direct._handle(path, headers, raw)
        with self._lock:
            self.calls.append((method, path))
            refusal = self._envelope(headers)
            if refusal is not None:
                return self._refuse("envelope", refusal, None)
            url = urlsplit(path)
            parts = url.path.strip("/").split("/")
            if parts[:3] != ["v1", "messages", "batches"] or len(parts) > 5:
                return _json(404, error_body(404, "Not Found"))
            if len(parts) == 3:
                if method == "POST":
                    return self._create(headers, raw)
                if method == "GET":
                    return self._list(parse_qs(url.query))
                return _json(405, error_body(405, "Method Not Allowed", "invalid_request_error"))
            batch = self.batches.get(parts[3])
            if batch is None:
                # ERRORS_PAGE: 404 not_found_error; text not found (the API's "<field>: <id>" form)
                return _json(404, error_body(404, f"message_batch_id: {parts[3]}"))
            action = parts[4] if len(parts) == 5 else ""
            if (method, action) == ("GET", ""):
                self._tick(batch, poll=True)
                return _json(200, self._object(batch))
            if (method, action) == ("GET", "results"):
                return self._results(batch)
            if (method, action) == ("POST", "cancel"):
                return self._cancel(batch)
            if (method, action) == ("DELETE", ""):
                return self._delete(batch)
            return _json(404, error_body(404, "Not Found"))

    def _envelope(self, headers: dict[str, str]) -> Refusal | None:
        ctx = Ctx({}, headers, self)
        for fn in (api_key_present, api_key_valid, version_present, version_known):
            refusal = fn(ctx)
            if refusal is not None:
                return refusal
        return None

    def _refuse(self, rule_name: str, refusal: Refusal, body: Any) -> Response:
        status, payload = refusal
        self.refused.append({"status": status, "body": payload, "request": body, "rule": rule_name})
        return _json(status, payload)

    def _create(self, headers: dict[str, str], raw: bytes) -> Response:
        if len(raw) > MAX_BATCH_BYTES:
            return self._refuse("batch_size", (413, error_body(413, "Request exceeds the maximum size")), None)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        refusal = _check_create(body)
        if refusal is not None:
            return self._refuse("create_shape", refusal, body)
        batch = Batch(id=_rand_id("msgbatch_01"), requests=body["requests"], headers=dict(headers),
                      created_at=self.now)
        self.batches[batch.id] = batch
        self.creations += 1
        if self.polls_to_end == 0:
            self._tick(batch, poll=False)
        return _json(200, self._object(batch))

    def _list(self, query: dict[str, list[str]]) -> Response:
        # BATCHES_REF (list): newest first; limit 1..1000 (default 20); after_id / before_id cursors.
        try:
            limit = int(query.get("limit", ["20"])[0])
        except ValueError:
            return self._refuse("list_limit", bad("limit: Input should be a valid integer"), query)
        if not 1 <= limit <= 1000:
            return self._refuse("list_limit", bad("limit: Input should be less than or equal to 1000"
                                                  if limit > 1000 else "limit: Input should be greater than or equal to 1"), query)
        ids = list(reversed(self.batches))
        if "after_id" in query and query["after_id"][0] in ids:
            ids = ids[ids.index(query["after_id"][0]) + 1:]
        if "before_id" in query and query["before_id"][0] in ids:
            ids = ids[:ids.index(query["before_id"][0])]
        page = ids[:limit]
        for bid in page:
            self._tick(self.batches[bid], poll=False)
        return _json(200, {"data": [self._object(self.batches[b]) for b in page], "has_more": len(ids) > limit,
                           "first_id": page[0] if page else None, "last_id": page[-1] if page else None})

    def _results(self, batch: Batch) -> Response:
        self._tick(batch, poll=False)
        if batch.status != "ended":
            # BATCHES_REF: results_url is given "only once processing ends". Text not found.
            return self._refuse("results_not_ready", bad(f"message_batch_id: {batch.id} has not finished processing"), None)
        if batch.created_at + RESULTS_KEPT <= self.now:
            # GUIDE: after 29 days "you will no longer be able to download the results". Text not found.
            return self._refuse("results_archived", (404, error_body(404, f"message_batch_id: {batch.id} results are no longer available")), None)
        # "Results are not guaranteed to be in the same order as requests": served in reverse, so a
        # client that matches by position instead of custom_id gets them wrong.
        lines = [json.dumps({"custom_id": cid, "result": result})
                 for cid, result in reversed(list(batch.results.items()))]
        return 200, [("content-type", "application/binary"), ("request-id", _rand_id("req_011C"))], \
            ("\n".join(lines) + "\n").encode()

    def _cancel(self, batch: Batch) -> Response:
        # BATCHES_REF (cancel): "Batches may be canceled any time before processing ends"; the batch
        # is `canceling` until then, and non-processed requests end `canceled`.
        self._tick(batch, poll=False)
        if batch.status == "ended":
            return self._refuse("cancel_ended", bad(f"message_batch_id: {batch.id} has already ended and cannot be canceled"), None)
        if batch.status == "in_progress":
            batch.status = "canceling"
            batch.cancel_initiated_at = self.now
        return _json(200, self._object(batch))

    def _delete(self, batch: Batch) -> Response:
        # BATCHES_REF (delete): "Message Batches can only be deleted once they've finished processing.
        # If you'd like to delete an in-progress batch, you must first cancel it." Text not found.
        self._tick(batch, poll=False)
        if batch.status != "ended":
            return self._refuse("delete_in_progress", bad(f"message_batch_id: {batch.id} is still processing; cancel it first"), None)
        del self.batches[batch.id]
        return _json(200, {"id": batch.id, "type": "message_batch_deleted"})


def _errored(status: int, message: str) -> dict[str, Any]:
    """An errored result: the SDK's MessageBatchErroredResult, whose error is an ErrorResponse
    ({"type": "error", "error": {"type", "message"}, "request_id"})."""
    return {"type": "errored", "error": {**error_body(status, message), "request_id": _rand_id("req_011C")}}


def _json(status: int, payload: dict[str, Any]) -> Response:
    request_id = _rand_id("req_011C")
    if payload.get("type") == "error":
        payload = {**payload, "request_id": request_id}
    return status, [("content-type", "application/json"), ("request-id", request_id)], json.dumps(payload).encode()


def _check_create(body: Any) -> Refusal | None:
    """The refusals of the create call itself (answered at once, 400 invalid_request_error)."""
    if not isinstance(body, dict):
        return bad("The request body is not valid JSON.")
    extra = sorted(set(body) - {"requests"})
    if extra:
        return bad(f"{extra[0]}: Extra inputs are not permitted")
    requests = body.get("requests")
    if requests is None:
        return bad("requests: Field required")
    if not isinstance(requests, list):
        return bad("requests: Input should be a valid list")
    if not requests:  # BATCHES_REF: minItems 1
        return bad("requests: List should have at least 1 item after validation, not 0")
    if len(requests) > MAX_REQUESTS:  # BATCHES_REF: maxItems 100000
        return bad(f"requests: List should have at most {MAX_REQUESTS} items after validation, not {len(requests)}")
    seen: set[str] = set()
    for i, r in enumerate(requests):
        if not isinstance(r, dict):
            return bad(f"requests.{i}: Input should be a valid dictionary")
        for name in ("custom_id", "params"):
            if name not in r:
                return bad(f"requests.{i}.{name}: Field required")
        extra = sorted(set(r) - {"custom_id", "params"})
        if extra:
            return bad(f"requests.{i}.{extra[0]}: Extra inputs are not permitted")
        cid = r["custom_id"]
        if not isinstance(cid, str):
            return bad(f"requests.{i}.custom_id: Input should be a valid string")
        if len(cid) > 64:  # real text, anthropics/anthropic-sdk-python#984
            return bad(f"requests.{i}.custom_id: String should have at most 64 characters")
        if not CUSTOM_ID.match(cid):
            return bad(f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        if cid in seen:  # BATCHES_REF: "Must be unique for each request within the Message Batch"
            return bad(f"requests.{i}.custom_id: Duplicate custom_id '{cid}' in batch")
        seen.add(cid)
        if not isinstance(r["params"], dict):
            return bad(f"requests.{i}.params: Input should be a valid dictionary")
    return None
