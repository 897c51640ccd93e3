"""A strict local simulator of OpenAI's Batch API for chat completions, for the tests.

The endpoints a batch needs, over real HTTP on 127.0.0.1, so the openai SDK's own `files` and
`batches` resources talk to it (OPENAI_BASE_URL):

* POST /v1/files                      upload (multipart: purpose, file); purpose "batch" wants JSONL
* GET  /v1/files/{id}, /v1/files/{id}/content
* POST /v1/batches                    create {input_file_id, endpoint, completion_window, metadata?}
* GET  /v1/batches/{id}               retrieve (the poll); each one moves the batch on
* GET  /v1/batches                    list (newest first, limit, after)
* POST /v1/batches/{id}/cancel        in progress -> cancelling -> cancelled
* POST /v1/chat/completions           the synchronous API (tests/sim_openai.py's rules), where a client
                                      sends a request a batch did not answer

Sources:
  BATCH  https://platform.openai.com/docs/guides/batch (the input line {"custom_id", "method",
         "url", "body"}; "up to 50,000 requests", "up to 200 MB"; the statuses validating, failed,
         in_progress, finalizing, completed, expired, cancelling, cancelled; "Batches that do not
         complete in time eventually move to an expired state; unfinished requests within that batch
         are cancelled, and any responses to completed requests are made available via the batch's
         output file"; an expired request's error line {"custom_id", "response": null, "error":
         {"code": "batch_expired", "message": "This request could not be executed before the
         completion window expired."}}; the output line {"id", "custom_id", "response": {"status_code",
         "request_id", "body"}, "error": null}; "the output line order may not match the input line
         order": this simulator writes them in reverse, so a client that relies on the order fails)
  REF    https://platform.openai.com/docs/api-reference/batch (create's fields; completion_window
         "Currently only 24h is supported"; the endpoints; metadata 16 pairs, keys <= 64 chars,
         values <= 512; the Batch object, request_counts {total, completed, failed}, errors
         {"object": "list", "data": [{"code", "message", "param", "line"}]})
  FILES  https://platform.openai.com/docs/api-reference/files (purpose "batch")
The rules of each request's body are tests/sim_openai.py's (SimOpenAI, profile "openai"): a line
whose body breaks one becomes that request's error line carrying the status and error body the
Chat Completions API answers, as the real batch reports a request the API refused (its error
file, status_code >= 400). Texts not found verbatim (their form is the API's, tests should not
pin them): the batch validation errors' messages (duplicate custom id, mismatched URL or
model, an unparsable line), "Invalid value for 'completion_window'", the cancel refusal of a
finished batch, the non-JSONL upload refusal.

Time is the simulator's clock, not the wall's (no test depends on timing): a batch is validated
on its first retrieve, done on the `polls_to_end`-th, unless `hold` keeps it in progress until
`release()`; `advance(hours)` moves the clock, and a batch not done 24 h after creation expires
(what finished is in its output file, the rest "batch_expired" in its error file). `complete`
(a set of custom ids, or None for all) decides which requests finish before an expiry or cancel.

    with SimOpenAIBatch(script=lambda body, n: {"kind": "text", "text": "hi"}) as sim:
        env OPENAI_BASE_URL=sim.base_url, OPENAI_API_KEY=sim.api_key
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fake_openai import Behaviour
from sim_openai import SimOpenAI, status_body
from sim_openai_file_search import Call, OpenAIDouble, err

Reply = tuple[int, Any]

ENDPOINTS = ("/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/moderations",
             "/v1/images/generations", "/v1/images/edits", "/v1/videos")  # REF: create's endpoint
CREATE_FIELDS = {"input_file_id", "endpoint", "completion_window", "metadata", "output_expires_after"}
MAX_REQUESTS = 50_000
MAX_BATCH_FILE = 200 * 1024 * 1024
WINDOW_HOURS = 24.0
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
T0 = 1_760_000_000  # the simulator's epoch (created_at and friends are Unix seconds)


def _default_script(body: dict[str, Any], n: int) -> Behaviour:
    return {"kind": "text", "text": "ok"}


@dataclass
class SimOpenAIBatch(OpenAIDouble):
    """The key, the paths, the bodies and the Files API are OpenAIDouble's (tests/sim_openai_file_search.py),
    with the Batch API's own rules for a file of purpose "batch"."""

    script: Callable[[dict[str, Any], int], Behaviour] = _default_script
    polls_to_end: int = 2  # retrieves after creation until the batch is done (the first validates it)
    hold: bool = False  # keep batches in progress until release()
    complete: set[str] | None = None  # custom ids that finish before an expiry or a cancel (None: none)
    models: set[str] | None = None
    max_requests: int = MAX_REQUESTS  # BATCH's 50,000 (lower it to see a batch refused as too large)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    answered: list[dict[str, Any]] = field(default_factory=list)  # bodies the script answered in batches
    direct: list[dict[str, Any]] = field(default_factory=list)  # bodies answered by POST /v1/chat/completions
    hours: float = 0.0
    _chat: SimOpenAI = field(default_factory=SimOpenAI)
    _n: int = 0

    def __post_init__(self) -> None:
        self._chat = SimOpenAI(profile="openai", api_key=self.api_key, models=self.models)

    @property
    def created(self) -> int:
        """Batches created (a resumed run that submits nothing twice leaves this unchanged)."""
        return len(self.batches)

    def release(self) -> None:
        with self._lock:
            self.hold = False

    def advance(self, hours: float) -> None:
        with self._lock:
            self.hours += hours
            for batch in self.batches.values():
                self._expire_if_due(batch)

    def _now(self) -> int:
        return T0 + int(self.hours * 3600)

    def _created_at(self) -> int:
        return self._now()

    # -- dispatch -----------------------------------------------------------------------------
    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        call = self._call(method, path, headers, raw)
        if not isinstance(call, Call):
            return call
        parts, query, body = call.parts, call.query, call.body
        key = (method, parts[0], len(parts), parts[2] if len(parts) > 2 else "")
        if key == ("POST", "files", 1, ""):
            return self._upload(call.form)
        if key == ("GET", "files", 2, ""):
            return (200, self.files[parts[1]]) if parts[1] in self.files else self._no_file(parts[1])
        if key == ("GET", "files", 3, "content"):
            return (200, self.blobs[parts[1]]) if parts[1] in self.blobs else self._no_file(parts[1])
        if key == ("POST", "chat", 2, "") and parts[1] == "completions":
            return self._chat_completion(headers, body)
        if key == ("POST", "batches", 1, ""):
            return self._create(body)
        if key == ("GET", "batches", 1, ""):
            return self._list(query)
        if method in ("GET", "POST") and parts[0] == "batches" and len(parts) >= 2:
            batch = self.batches.get(parts[1])
            if batch is None:
                return err(404, f"No batch found with id '{parts[1]}'.")
            if key == ("GET", "batches", 2, ""):
                self._poll(batch)
                return 200, self._view(batch)
            if key == ("POST", "batches", 3, "cancel"):
                return self._cancel(batch)
        return err(404, f"Invalid URL ({method} {urlsplit(path).path})")

    @staticmethod
    def _no_file(fid: str) -> Reply:
        return err(404, f"No such File object: {fid}", param="id")

    # -- the synchronous API, where a request a batch did not answer goes on its own -----------------
    def _chat_completion(self, headers: dict[str, str], body: Any) -> Reply:
        """POST /v1/chat/completions as tests/sim_openai.py answers it (its rules, this script),
        counted in `direct` (the requests sent outside any batch, at the standard price)."""
        if not isinstance(body, dict):
            return err(400, "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
                       "using your HTTP library correctly.)")
        found = self._chat.check(body, headers)
        if found is not None:
            return found[1]
        self.direct.append(body)
        self._n += 1
        behaviour = self.script(body, self._n)
        if behaviour["kind"] == "status":
            return behaviour["status"], status_body(self._chat, behaviour["status"], behaviour.get("message"))
        return 200, self._chat.completion(behaviour, self._n, str(body.get("model", "")))

    # -- files ----------------------------------------------------------------------------------
    def _upload(self, form: dict[str, tuple[str | None, bytes]] | None) -> Reply:
        """POST /v1/files as OpenAIDouble takes it; a file of purpose "batch" must be JSONL (BATCH: "only
        supports .jsonl files") of at most 200 MB."""
        name, data = (form or {}).get("file", (None, b""))
        if form is not None and form.get("purpose", (None, b""))[1] == b"batch" and name:
            if not name.endswith(".jsonl"):
                return err(400, "Invalid file format for Batch API. Must be .jsonl", param="file")
            if len(data) > MAX_BATCH_FILE:
                return err(400, "File is too large. The maximum file size for batch is 200 MB.", param="file")
        return super()._upload(form)

    def _output_file(self, lines: list[dict[str, Any]], name: str) -> str | None:
        if not lines:
            return None
        fid = self._id("file-")
        data = "".join(json.dumps(line) + "\n" for line in reversed(lines)).encode()  # BATCH: order not kept
        self.files[fid] = {"id": fid, "object": "file", "bytes": len(data), "created_at": self._now(),
                           "filename": name, "purpose": "batch_output", "status": "processed",
                           "expires_at": None, "status_details": None}
        self.blobs[fid] = data
        return fid

    # -- batches --------------------------------------------------------------------------------
    def _create(self, body: Any) -> Reply:
        if not isinstance(body, dict):
            return err(400, "Invalid type for request body: expected an object.")
        if extra := sorted(set(body) - CREATE_FIELDS):
            return err(400, f"Unrecognized request argument supplied: {extra[0]}")
        for name in ("input_file_id", "endpoint", "completion_window"):
            if name not in body:
                return err(400, f"Missing required parameter: '{name}'.", param=name, code="missing_required_parameter")
        if body["completion_window"] != "24h":
            return err(400, f"Invalid value for 'completion_window': '{body['completion_window']}'. Supported "
                       "values are: '24h'.", param="completion_window", code="invalid_value")
        if body["endpoint"] not in ENDPOINTS:
            return err(400, f"Invalid value for 'endpoint': '{body['endpoint']}'. Supported values are: "
                       + ", ".join(f"'{e}'" for e in ENDPOINTS) + ".", param="endpoint", code="invalid_value")
        metadata = body.get("metadata")
        if metadata is not None and (not isinstance(metadata, dict) or len(metadata) > 16
                                     or any(len(str(k)) > 64 or not isinstance(v, str) or len(v) > 512
                                            for k, v in metadata.items())):
            return err(400, "Invalid 'metadata': at most 16 pairs, keys of at most 64 characters, string values "
                       "of at most 512.", param="metadata")
        fid = body["input_file_id"]
        if fid not in self.files:
            return self._no_file(fid)
        if self.files[fid]["purpose"] != "batch":
            return err(400, f"The file {fid} was not uploaded with purpose 'batch'.", param="input_file_id")
        bid = self._id("batch_")
        self.batches[bid] = {
            "id": bid, "object": "batch", "endpoint": body["endpoint"], "errors": None, "input_file_id": fid,
            "completion_window": "24h", "status": "validating", "output_file_id": None, "error_file_id": None,
            "created_at": self._now(), "in_progress_at": None, "expires_at": self._now() + 24 * 3600,
            "finalizing_at": None, "completed_at": None, "failed_at": None, "expired_at": None,
            "cancelling_at": None, "cancelled_at": None, "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": metadata, "model": None, "_polls": 0, "_hours": self.hours, "_lines": [], "_done": {},
        }
        return 200, self._view(self.batches[bid])

    @staticmethod
    def _view(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _list(self, query: dict[str, str]) -> Reply:
        limit = int(query.get("limit", 20))
        if not 1 <= limit <= 100:
            return err(400, f"Invalid 'limit': integer below minimum value. Expected a value >= 1, but got {limit} "
                       "instead.", param="limit", code="integer_below_min_value")
        ordered = sorted(self.batches.values(), key=lambda b: (b["created_at"], b["id"]), reverse=True)
        if "after" in query:
            ids = [b["id"] for b in ordered]
            ordered = ordered[ids.index(query["after"]) + 1:] if query["after"] in ids else []
        page = [self._view(b) for b in ordered[:limit]]
        return 200, {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                     "last_id": page[-1]["id"] if page else None, "has_more": len(ordered) > limit}

    def _validate(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """The input file's lines against BATCH's rules: the errors that fail the batch as a whole."""
        errors: list[dict[str, Any]] = []
        text = self.blobs[batch["input_file_id"]].decode("utf-8", "replace")
        seen: set[str] = set()
        model = None
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            return [{"code": "empty_file", "message": "The batch input file is empty.", "param": None, "line": None}]
        if len(lines) > self.max_requests:
            return [{"code": "too_many_requests", "message": f"The batch input file has {len(lines)} requests, over "
                     f"the limit of {self.max_requests}.", "param": None, "line": None}]
        for n, line in enumerate(lines, 1):
            def bad(code: str, message: str, param: str | None, n: int = n) -> None:
                errors.append({"code": code, "message": message, "param": param, "line": n})
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                bad("invalid_json_line", "This line is not parseable as valid JSON.", None)
                continue
            if not isinstance(row, dict):
                bad("invalid_request", "Each line must be a JSON object.", None)
                continue
            if extra := sorted(set(row) - {"custom_id", "method", "url", "body"}):
                bad("invalid_request", f"Unrecognized request argument supplied: {extra[0]}", extra[0])
            custom = row.get("custom_id")
            if not isinstance(custom, str) or not custom:
                bad("missing_required_parameter", "Missing required parameter: 'custom_id'.", "custom_id")
            elif custom in seen:
                bad("duplicate_custom_id", "The custom_id for this request is a duplicate of another request. The "
                    "custom_id parameter must be unique for each request in a batch.", "custom_id")
            else:
                seen.add(custom)
            if row.get("method") != "POST":
                bad("invalid_method", "The method for this request must be 'POST'.", "method")
            if row.get("url") != batch["endpoint"]:
                bad("invalid_url", "The URL provided for this request does not match the batch endpoint.", "url")
            body = row.get("body")
            if not isinstance(body, dict):
                bad("missing_required_parameter", "Missing required parameter: 'body'.", "body")
                continue
            if model is None:
                model = body.get("model")
            elif body.get("model") != model:
                bad("mismatched_model", "The model for this request does not match the model of the other requests "
                    "in the batch: a batch takes one model.", "body.model")
            if not errors:
                batch["_lines"].append(row)
        batch["model"] = model
        return errors

    def _poll(self, batch: dict[str, Any]) -> None:
        """One retrieve: validating -> in_progress (or failed), then done after `polls_to_end`."""
        self._expire_if_due(batch)
        status = batch["status"]
        if status == "validating":
            errors = self._validate(batch)
            if errors:
                batch.update(status="failed", failed_at=self._now(), errors={"object": "list", "data": errors})
                return
            batch.update(status="in_progress", in_progress_at=self._now())
            batch["request_counts"]["total"] = len(batch["_lines"])
        elif status == "cancelling":
            self._finish(batch, "cancelled")
            return
        if batch["status"] != "in_progress":
            return
        batch["_polls"] += 1
        if not self.hold and batch["_polls"] >= self.polls_to_end:
            self._finish(batch, "completed")

    def _expire_if_due(self, batch: dict[str, Any]) -> None:
        if batch["status"] in ("validating", "in_progress", "finalizing") and \
                self.hours - batch["_hours"] >= WINDOW_HOURS:
            if batch["status"] == "validating" and self._validate(batch):
                batch["_lines"] = []
            self._finish(batch, "expired")

    def _answer(self, row: dict[str, Any]) -> dict[str, Any]:
        """One request as the Chat Completions API answers it: SimOpenAI's rules, then the script."""
        body = row["body"]
        request_id = self._id("req_")
        found = self._chat.check(body, {"authorization": f"Bearer {self.api_key}"})
        if found is not None:
            status, payload = found[1]
            self.refused.append(("BATCH", row["custom_id"], status, payload["error"]["message"]))
            return {"status_code": status, "request_id": request_id, "body": payload}
        self._n += 1
        self.answered.append(body)
        behaviour = self.script(body, self._n)
        if behaviour["kind"] == "status":
            status = behaviour["status"]
            return {"status_code": status, "request_id": request_id,
                    "body": status_body(self._chat, status, behaviour.get("message"))}
        return {"status_code": 200, "request_id": request_id,
                "body": self._chat.completion(behaviour, self._n, str(body.get("model", "")))}

    def _finish(self, batch: dict[str, Any], end: str) -> None:
        """Answer the requests that finish (all of them when completed; `complete` otherwise) and
        write the output and error files."""
        out: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for row in batch["_lines"]:
            custom = row["custom_id"]
            if end == "completed" or (self.complete is not None and custom in self.complete):
                response = batch["_done"].get(custom) or self._answer(row)
                line = {"id": self._id("batch_req_"), "custom_id": custom, "response": response, "error": None}
                (out if response["status_code"] < 400 else errors).append(line)
            elif end == "expired":
                errors.append({"id": self._id("batch_req_"), "custom_id": custom, "response": None,
                               "error": {"code": "batch_expired", "message": EXPIRED_MESSAGE}})
            # cancelled: an unfinished request has no line
        batch["request_counts"] = {"total": len(batch["_lines"]), "completed": len(out), "failed": len(errors)}
        now = self._now()
        if end == "completed":
            batch.update(finalizing_at=now, completed_at=now)
        else:
            batch[f"{end}_at"] = now
        batch.update(status=end, output_file_id=self._output_file(out, f"{batch['id']}_output.jsonl"),
                     error_file_id=self._output_file(errors, f"{batch['id']}_error.jsonl"))

    def _cancel(self, batch: dict[str, Any]) -> Reply:
        if batch["status"] not in ("validating", "in_progress", "finalizing"):
            return err(400, f"Cannot cancel a batch with status '{batch['status']}'.")
        batch.update(status="cancelling", cancelling_at=self._now())
        return 200, self._view(batch)

    def lines(self) -> list[dict[str, Any]]:
        """Every request line of every batch created (the test's count of what was submitted)."""
        out = []
        for batch in self.batches.values():
            text = self.blobs[batch["input_file_id"]].decode()
            out.extend(json.loads(line) for line in text.splitlines() if line.strip())
        return out
