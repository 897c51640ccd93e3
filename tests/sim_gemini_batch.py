"""A strict local simulator of the Gemini API's batch mode (v1beta), for the tests: the Files API
upload of a JSONL input file, `models/{model}:batchGenerateContent` with inline requests or that
file, the batch's long-running operation polled at `batches/{id}`, its results (inline responses or
a responses file to download), cancel, delete, list, and the 48-hour expiry, over real HTTP on
127.0.0.1 (GOOGLE_GEMINI_BASE_URL points the backend at it). It answers generateContent too, as
sim_gemini_native does, for the requests a batch did not answer and deskbench sends on their own.

As tests/sim_gemini_native.py, which this reuses: a request the API refuses is refused here, with
the API's error body {"error": {"code", "message", "status"}}. Each inner GenerateContentRequest is
held to sim_gemini_native's rules: its unknown fields fail the whole create call (the body is one
proto message, parsed whole), while its other refusals (a thinking budget out of range, a function
response without its call, ...) come back as that request's error status in the results, the way
the batch reports a request that failed ("each line is either a GenerateContentResponse or a
status object", BATCH below). Only the model's replies come from the test's script.

Sources:
  BATCH   https://ai.google.dev/gemini-api/docs/batch-api (inline requests "under 20MB" in all, an
          input file of JSON lines {"key", "request"}, the output "a JSONL file where each line is
          either a GenerateContentResponse or a status object"; the states; 50% of the standard
          price; "Jobs that are running or pending for more than 48 hours" expire; cancel, delete)
  REF     https://ai.google.dev/api/batch-mode (batchGenerateContent: the body {"batch":
          GenerateContentBatch}, answered by an Operation; GenerateContentBatch's fields; InputConfig
          {fileName | requests: {requests: [{request, metadata}]}}; GenerateContentBatchOutput
          {responsesFile | inlinedResponses: {inlinedResponses: [{metadata, response | error}]}};
          BatchState; BatchStats, int64 counts as JSON strings; batches.get / cancel / delete / list)
  SDK     googleapis/python-genai google/genai/batches.py (the paths `{model}:batchGenerateContent`,
          `batches/{name}`, `batches/{name}:cancel`; the job read from the Operation's `metadata`,
          its results from `metadata.output`), files.py ("Files created by `upload` can't be
          downloaded": only generated files are; the resumable upload: X-Goog-Upload-Protocol
          resumable, Command start, then "upload, finalize" at offset 0)
  FILES   https://ai.google.dev/api/files (media.upload {"file": File}; File's fields; files.get)
Error texts: the key's and the unknown model's are the API's, as sim_gemini_native.py cites them;
"You do not have permission to access the File <id> or it may not exist." is the API's 403 for a
missing file (quoted in google-gemini/cookbook and gemini-cli issues); the texts for a missing
batch, a cancel of a finished batch, two or no input sources and an empty request list were not
found and are worded here in the API's forms (tests should not pin those).

The simulator's clock is `hours` (advance() moves it): no test waits for real time. A batch is
PENDING when made, RUNNING from its `polls_to_run`-th poll and done at its `polls_to_finish`-th
(unless `hold` keeps every batch running until release()).

Usage:

    with SimGeminiBatch(script=lambda body, key: {"kind": "text", "text": "hi"}) as sim:
        os.environ["GOOGLE_GEMINI_BASE_URL"] = sim.base_url
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

from http_double import JsonMethodDouble
from sim_gemini_native import (
    MODEL_SPECS,
    Behaviour,
    Ctx,
    SimGeminiNative,
    normalised,
    reply_payload,
)

MAX_INLINE_BYTES = 20 * 1024 * 1024  # BATCH: inline requests keep "the total request size under 20MB"
MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024  # FILES / BATCH: an input file of up to 2 GB
EXPIRY_HOURS = 48  # BATCH: a job running or pending for more than 48 hours expires
STATES = ("BATCH_STATE_UNSPECIFIED", "BATCH_STATE_PENDING", "BATCH_STATE_RUNNING", "BATCH_STATE_SUCCEEDED",
          "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED")  # REF, BatchState, by number
DONE = {"BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED"}
STATUS_NAMES = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
# google.rpc.Code of an HTTP status, for a request's error status inside the results
RPC_CODES = {400: 3, 403: 7, 404: 5, 409: 10, 429: 8, 500: 13, 503: 14, 504: 4}
BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatchOutput"
# REF: GenerateContentBatch's fields (the output-only ones are accepted and ignored, as the API does)
BATCH_FIELDS = {"name", "model", "displayName", "inputConfig", "output", "createTime", "endTime", "updateTime",
                "batchStats", "state", "priority"}
FILE_FIELDS = {"name", "displayName", "mimeType", "sizeBytes", "createTime", "updateTime", "expirationTime",
               "sha256Hash", "uri", "downloadUri", "state", "source", "error", "videoMetadata"}  # FILES, File
EPOCH = datetime(2026, 11, 28, tzinfo=UTC)

Script = Callable[[dict[str, Any], str], Behaviour]
"""(the request's body, field names in camelCase; its key) -> a Behaviour of sim_gemini_native
(text, calls, finish, blocked; "status" makes that request's error status)."""
Reply = tuple[int, Any, list[tuple[str, str]]]


def _default(body: dict[str, Any], key: str) -> Behaviour:
    return {"kind": "text", "text": "ok"}


def error_body(status: int, message: str, status_name: str | None = None) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": status_name or STATUS_NAMES.get(status, "UNKNOWN")}}


def _err(status: int, message: str, status_name: str | None = None) -> Reply:
    return status, error_body(status, message, status_name), []


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _unknown(value: dict[str, Any], fields: set[str], path: str) -> str | None:
    """The proto JSON parse error of the first field `value` does not know (sim_gemini_native's form)."""
    for key in value:
        if _camel(key) not in fields:
            where = f" at '{path}'" if path else ""
            return f'Invalid JSON payload received. Unknown name "{key}"{where}: Cannot find field.'
    return None


def _camel_keys(value: dict[str, Any]) -> dict[str, Any]:
    return {_camel(k): v for k, v in value.items()}


@dataclass
class _Item:
    """One request of a batch: its key (inline: metadata.key or its index), metadata, body, and,
    once the batch ran, its outcome (a reply's behaviour and Ctx, or an error status)."""

    key: str
    metadata: Any
    body: Any  # the request as sent (inline: already parsed)
    line_error: str | None = None  # an input file's line that is no request
    behaviour: Behaviour | None = None
    ctx: Ctx | None = None
    error: dict[str, Any] | None = None


@dataclass
class SimGeminiBatch(JsonMethodDouble):
    CONTENT_TYPE: ClassVar[str] = "application/json; charset=UTF-8"

    script: Script = _default
    api_key: str = "test-gemini-key"
    models: set[str] | None = None
    polls_to_run: int = 1
    polls_to_finish: int = 2
    hold: bool = False  # every batch stays running until release()
    fail_with: str | None = None  # the next batch to finish fails as a whole, with this message
    hours: float = 0.0  # the simulator's clock
    creations: list[dict[str, Any]] = field(default_factory=list)  # each accepted create's body
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)
    uploads: dict[str, dict[str, Any]] = field(default_factory=dict)
    script_errors: list[str] = field(default_factory=list)
    direct: list[dict[str, Any]] = field(default_factory=list)  # generateContent bodies (outside any batch)
    _native: SimGeminiNative | None = None

    def __post_init__(self) -> None:
        self.models = set(MODEL_SPECS if self.models is None else self.models)
        self._native = SimGeminiNative(api_key=self.api_key, models=self.models)  # its rules, not its server

    @property
    def base_url(self) -> str:
        """The API root, as GOOGLE_GEMINI_BASE_URL takes it."""
        return self._url

    def env(self) -> dict[str, str]:
        return {"GOOGLE_GEMINI_BASE_URL": self.base_url, "GEMINI_API_KEY": self.api_key}

    # -- the test's levers -------------------------------------------------------------------------
    def advance(self, hours: float) -> None:
        """Move the clock (expiry is checked at the next poll)."""
        with self._lock:
            self.hours += hours

    def release(self) -> None:
        """Let held batches finish at their next poll."""
        with self._lock:
            self.hold = False

    def created(self) -> int:
        """How many batches were created (a resume must not add one)."""
        return len(self.creations)

    # -- dispatch (JsonMethodDouble answers under its lock, counting refusals in `refused`) ---------
    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        url = urlsplit(path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        p = unquote(url.path)
        body: Any = None
        if method == "POST" and "upload_id" not in query:
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                self.requests.append((method, path, headers, None))
                return _err(400, "Invalid JSON payload received. Unexpected token.")
        self.requests.append((method, path, headers, body))
        key = headers.get("x-goog-api-key") or query.get("key")
        if not key:  # sim_gemini_native's api_key_present
            return _err(403, "Method doesn't allow unregistered callers (callers without established identity). "
                        "Please use API Key or other form of API consumer identity to call this API.")
        if key != self.api_key:
            return _err(400, "API key not valid. Please pass a valid API key.")
        if "upload_id" in query:
            return self._finalize(query["upload_id"], headers, raw)
        if p == "/upload/v1beta/files" and method == "POST":
            return self._start(headers, body)
        if p.startswith("/download/v1beta/files/") and p.endswith(":download") and method == "GET":
            return self._download(p.removeprefix("/download/v1beta/").removesuffix(":download"), query)
        if p.startswith("/v1beta/files/") and method == "GET":
            return self._file(p.removeprefix("/v1beta/"))
        if p.startswith("/v1beta/models/") and p.endswith(":generateContent") and method == "POST":
            return self._generate(path, headers, raw)
        if p.startswith("/v1beta/models/") and p.endswith(":batchGenerateContent") and method == "POST":
            return self._create(p.removeprefix("/v1beta/models/").removesuffix(":batchGenerateContent"), body, raw)
        if p == "/v1beta/batches" and method == "GET":
            return self._list(query)
        if p.startswith("/v1beta/batches/"):
            name = p.removeprefix("/v1beta/")
            if name.endswith(":cancel") and method == "POST":
                return self._cancel(name.removesuffix(":cancel"))
            if method == "GET":
                return self._get(name, query)
            if method == "DELETE":
                return self._delete(name)
        return _err(404, f"Method not found: {p}")

    def _stamp(self, hours: float | None = None) -> str:
        """An RFC 3339 time on the simulator's clock (hour 0 is EPOCH)."""
        return (EPOCH + timedelta(hours=self.hours if hours is None else hours)).strftime("%Y-%m-%dT%H:%M:%SZ")

    # -- Files API ---------------------------------------------------------------------------------
    def _start(self, headers: dict[str, str], body: Any) -> Reply:
        if headers.get("x-goog-upload-protocol") != "resumable" or headers.get("x-goog-upload-command") != "start":
            # text not found: the SDKs always start a resumable upload this way (SDK, files.py)
            return _err(400, "Upload requests must set X-Goog-Upload-Protocol: resumable and X-Goog-Upload-Command: start.")
        if not isinstance(body, dict) or (err := _unknown(body, {"file"}, "")):
            return _err(400, err if isinstance(body, dict) and err else "Invalid JSON payload received. Expected an object.")
        meta = body.get("file") or {}
        if not isinstance(meta, dict) or (err := _unknown(meta, FILE_FIELDS, "file")):
            return _err(400, err or "Invalid JSON payload received. Expected an object at 'file'.")
        length = headers.get("x-goog-upload-header-content-length", "")
        if not length.isdigit():
            return _err(400, "X-Goog-Upload-Header-Content-Length must give the file's size in bytes.")  # text not found
        if int(length) > MAX_FILE_BYTES:
            return _err(400, f"File size {length} exceeds the maximum of {MAX_FILE_BYTES} bytes.")  # text not found
        uid = self._id("up")
        self.uploads[uid] = {"meta": _camel_keys(meta), "length": int(length),
                             "mime": headers.get("x-goog-upload-header-content-type") or meta.get("mimeType") or ""}
        url = f"{self.base_url}/upload/v1beta/files?upload_id={uid}&upload_protocol=resumable"
        return 200, {}, [("X-Goog-Upload-URL", url), ("X-Goog-Upload-Status", "active")]

    def _finalize(self, uid: str, headers: dict[str, str], raw: bytes) -> Reply:
        up = self.uploads.pop(uid, None)
        if up is None:
            return _err(404, "Upload session not found.")  # text not found
        if headers.get("x-goog-upload-command") != "upload, finalize" or headers.get("x-goog-upload-offset") != "0":
            return _err(400, "The upload must be sent whole: X-Goog-Upload-Command: upload, finalize at offset 0.")
        if up["length"] != len(raw):
            return _err(400, f"The upload's length {len(raw)} is not the announced {up['length']}.")
        name = self._id("files/in")
        self.files[name] = self._file_view(name, up["meta"].get("displayName", ""), up["mime"] or "application/octet-stream",
                                           len(raw), "UPLOADED")
        self.blobs[name] = raw
        return 200, {"file": self.files[name]}, [("X-Goog-Upload-Status", "final")]

    def _file_view(self, name: str, display: str, mime: str, size: int, source: str) -> dict[str, Any]:
        view = {"name": name, "mimeType": mime, "sizeBytes": str(size), "createTime": self._stamp(),
                "updateTime": self._stamp(), "expirationTime": self._stamp(self.hours + EXPIRY_HOURS),
                "uri": f"{self.base_url}/v1beta/{name}", "state": "ACTIVE", "source": source}
        if display:
            view["displayName"] = display
        if source == "GENERATED":
            view["downloadUri"] = f"{self.base_url}/download/v1beta/{name}:download?alt=media"
        return view

    def _file(self, name: str) -> Reply:
        if name not in self.files:
            return _err(403, f"You do not have permission to access the File {name.removeprefix('files/')} or it may "
                        "not exist.")
        return 200, self.files[name], []

    def _download(self, name: str, query: dict[str, str]) -> Reply:
        if name not in self.files:
            return self._file(name)
        if query.get("alt") != "media":
            return _err(400, "Download requests must ask for the content: alt=media.")  # text not found
        if self.files[name]["source"] != "GENERATED":
            # SDK files.py: "Files created by `upload` can't be downloaded." (text of the refusal not found)
            return _err(400, f"Only generated files can be downloaded; {name} was uploaded.")
        return 200, self.blobs[name], []

    # -- generateContent (a request a batch did not answer, sent on its own) ------------------------
    def _generate(self, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        """sim_gemini_native's answer, from the same script (key ""): so a test sees what went
        through a batch and what went on its own (`direct`)."""
        assert self._native is not None
        verdict, ctx = self._native.evaluate(path, headers, raw)
        if verdict is not None:
            status, payload = verdict[1]
            return status, payload, []
        assert ctx is not None
        self.direct.append(ctx.body)
        behaviour = self.script(ctx.body, "")
        if behaviour["kind"] == "status":
            status = behaviour["status"]
            return _err(status, behaviour.get("message", f"HTTP {status}"))
        return 200, reply_payload(ctx, behaviour), []

    # -- batches -----------------------------------------------------------------------------------
    def _create(self, model: str, body: Any, raw: bytes) -> Reply:
        assert self.models is not None
        if model not in self.models:
            return _err(404, f"models/{model} is not found for API version v1beta, or is not supported for "
                        "batchGenerateContent. Call ListModels to see the list of available models and their "
                        "supported methods.")
        if len(raw) > MAX_INLINE_BYTES:  # BATCH; the text as sim_gemini_native's request_size
            return _err(400, f"Request payload size exceeds the limit: {MAX_INLINE_BYTES} bytes.")
        if not isinstance(body, dict):
            return _err(400, "Invalid JSON payload received. Expected an object.")
        if err := _unknown(body, {"batch"}, ""):
            return _err(400, err)
        batch = body.get("batch")
        if not isinstance(batch, dict):
            return _err(400, "* BatchGenerateContentRequest.batch: batch is not specified\n")  # the field-error form
        if err := _unknown(batch, BATCH_FIELDS, "batch"):
            return _err(400, err)
        batch = _camel_keys(batch)
        if "model" in batch and batch["model"] != f"models/{model}":
            return _err(400, f"* BatchGenerateContentRequest.batch.model: {batch['model']} is not the model of the "
                        f"request's path, models/{model}\n")  # text not found
        source = batch.get("inputConfig")
        if not isinstance(source, dict):
            return _err(400, "* BatchGenerateContentRequest.batch.input_config: input_config is not specified\n")
        if err := _unknown(source, {"fileName", "requests"}, "batch.input_config"):
            return _err(400, err)
        source = _camel_keys(source)
        given = [k for k in ("fileName", "requests") if k in source]
        if len(given) > 1:
            return _err(400, "Invalid JSON payload received. Oneof field 'source' is already set. Cannot set 'requests'")
        if not given:
            return _err(400, "* BatchGenerateContentRequest.batch.input_config.source: required oneof field 'source' "
                        "must have one initialized field\n")
        items: list[_Item] = []
        if "requests" in source:
            outer = source["requests"]
            if not isinstance(outer, dict) or (err := _unknown(outer, {"requests"}, "batch.input_config.requests")):
                return _err(400, err if isinstance(outer, dict) and err else "Invalid JSON payload received. Expected an "
                            "object at 'batch.input_config.requests'.")
            listed = outer.get("requests")
            if not isinstance(listed, list) or not listed:
                return _err(400, "* BatchGenerateContentRequest.batch.input_config.requests.requests: requests must not "
                            "be empty\n")  # text not found
            for i, entry in enumerate(listed):
                where = f"batch.input_config.requests.requests[{i}]"
                if not isinstance(entry, dict) or (err := _unknown(entry, {"request", "metadata"}, where)):
                    return _err(400, err if isinstance(entry, dict) and err else f"Invalid JSON payload received. "
                                f"Expected an object at '{where}'.")
                request = entry.get("request")
                if not isinstance(request, dict):
                    return _err(400, f"* BatchGenerateContentRequest.{where}.request: request is not specified\n")
                _, err = normalised(request, "GenerateContentRequest", f"{where}.request")
                if err:
                    return _err(400, err)
                metadata = entry.get("metadata")
                key = metadata.get("key") if isinstance(metadata, dict) and isinstance(metadata.get("key"), str) else str(i)
                items.append(_Item(key, metadata, request))
        else:
            name = source["fileName"]
            if name not in self.files:
                return self._file(str(name))
            for line in self.blobs[name].decode("utf-8", "replace").splitlines():
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    entry = None
                if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
                    key = entry.get("key") if isinstance(entry, dict) and isinstance(entry.get("key"), str) else ""
                    items.append(_Item(key, None, None, line_error="Invalid JSON payload received. Each line must be "
                                       'an object {"key", "request"}.'))
                    continue
                items.append(_Item(str(entry.get("key", "")), None, entry["request"]))
            if not items:
                return _err(400, f"The input file {name} holds no requests.")  # text not found
        bid = self._id("batches/b")
        self.creations.append(body)
        self.batches[bid] = {"name": bid, "model": f"models/{model}", "displayName": batch.get("displayName", ""),
                             "createHours": self.hours, "state": "BATCH_STATE_PENDING", "polls": 0, "items": items,
                             "fromFile": "fileName" in source, "error": None, "responsesFile": None,
                             "priority": batch.get("priority")}
        return 200, self._operation(bid, {}), []

    def _list(self, query: dict[str, str]) -> Reply:
        size = min(int(query.get("pageSize", 50) or 50), 1000)
        start = int(query.get("pageToken") or 0)
        names = list(self.batches)[start:start + size]
        out: dict[str, Any] = {"operations": [self._operation(n, query) for n in names]} if names else {}
        if start + size < len(self.batches):
            out["nextPageToken"] = str(start + size)
        return 200, out, []

    def _get(self, name: str, query: dict[str, str]) -> Reply:
        batch = self.batches.get(name)
        if batch is None:
            return _err(404, f"Batch {name} not found.")  # text not found
        batch["polls"] += 1
        if batch["state"] not in DONE:
            if self.hours - batch["createHours"] >= EXPIRY_HOURS:
                batch["state"] = "BATCH_STATE_EXPIRED"  # BATCH: no results for an expired job
                batch["endHours"] = self.hours
            elif batch["polls"] >= self.polls_to_finish and not self.hold:
                self._run(batch)
            elif batch["polls"] >= self.polls_to_run:
                batch["state"] = "BATCH_STATE_RUNNING"
        return 200, self._operation(name, query), []

    def _cancel(self, name: str) -> Reply:
        batch = self.batches.get(name)
        if batch is None:
            return _err(404, f"Batch {name} not found.")
        if batch["state"] in DONE:
            return _err(400, f"Batch {name} is already in a terminal state ({batch['state']}) and cannot be cancelled.",
                        "FAILED_PRECONDITION")  # text not found
        batch["state"] = "BATCH_STATE_CANCELLED"
        batch["endHours"] = self.hours
        return 200, {}, []

    def _delete(self, name: str) -> Reply:
        if self.batches.pop(name, None) is None:
            return _err(404, f"Batch {name} not found.")
        return 200, {}, []

    # -- running a batch ---------------------------------------------------------------------------
    def _run(self, batch: dict[str, Any]) -> None:
        batch["endHours"] = self.hours
        if self.fail_with is not None:
            batch["state"], batch["error"], self.fail_with = "BATCH_STATE_FAILED", {"code": 13, "message": self.fail_with}, None
            return
        assert self._native is not None
        model = batch["model"].removeprefix("models/")
        for item in batch["items"]:
            if item.line_error is not None:
                item.error = {"code": 3, "message": item.line_error}
                continue
            verdict, ctx = self._native.evaluate(f"/v1beta/models/{model}:generateContent",
                                                 {"x-goog-api-key": self.api_key}, json.dumps(item.body).encode())
            if verdict is not None:
                status, payload = verdict[1]
                item.error = {"code": RPC_CODES.get(status, 2), "message": payload["error"]["message"]}
                continue
            assert ctx is not None
            try:
                behaviour = self.script(ctx.body, item.key)
            except Exception as exc:  # noqa: BLE001 -- a broken script is a test bug; say so loudly
                self.script_errors.append(f"{type(exc).__name__}: {exc}")
                item.error = {"code": 13, "message": f"simulator script error: {type(exc).__name__}: {exc}"}
                continue
            if behaviour["kind"] == "status":
                status = behaviour["status"]
                item.error = {"code": RPC_CODES.get(status, 2), "message": behaviour.get("message", f"HTTP {status}")}
            else:
                item.behaviour, item.ctx = behaviour, ctx
        batch["state"] = "BATCH_STATE_SUCCEEDED"
        if batch["fromFile"]:
            # the output file: one keyed line per request; written last to first, so a reader that
            # matched lines by position instead of by key would be caught
            lines = [json.dumps({"key": item.key, **self._outcome(item, {})}) for item in reversed(batch["items"])]
            raw = ("\n".join(lines) + "\n").encode()
            name = self._id("files/batch-out")
            self.files[name] = self._file_view(name, f"{batch['name']}-responses", "application/jsonl", len(raw), "GENERATED")
            self.blobs[name] = raw
            batch["responsesFile"] = name

    def _outcome(self, item: _Item, query: dict[str, str]) -> dict[str, Any]:
        if item.error is not None:
            return {"error": item.error}
        assert item.behaviour is not None and item.ctx is not None
        ctx = dataclasses.replace(item.ctx, query={k: [v] for k, v in query.items()})
        return {"response": reply_payload(ctx, item.behaviour)}

    def _operation(self, name: str, query: dict[str, str]) -> dict[str, Any]:
        """The batch as the API answers create and get: an Operation named like the batch, its
        metadata the GenerateContentBatch, `done` with the output as its response once finished."""
        batch = self.batches[name]
        numbers = "enum-encoding=int" in query.get("$alt", "")
        items = batch["items"]
        finished = batch["state"] == "BATCH_STATE_SUCCEEDED"
        failed = sum(1 for i in items if i.error is not None) if finished else 0
        stats = {"requestCount": len(items), "successfulRequestCount": len(items) - failed if finished else 0,
                 "failedRequestCount": failed, "pendingRequestCount": 0 if batch["state"] in DONE else len(items)}
        meta: dict[str, Any] = {
            "@type": BATCH_TYPE, "model": batch["model"], "name": name, "createTime": self._stamp(batch["createHours"]),
            "updateTime": self._stamp(), "batchStats": {k: str(v) for k, v in stats.items() if v},
            "state": STATES.index(batch["state"]) if numbers else batch["state"]}
        if batch["displayName"]:
            meta["displayName"] = batch["displayName"]
        if "endHours" in batch:
            meta["endTime"] = self._stamp(batch["endHours"])
        out: dict[str, Any] = {"name": name, "metadata": meta}
        if batch["state"] not in DONE:
            return out
        out["done"] = True
        if batch["error"] is not None:
            out["error"] = batch["error"]
        if not finished:
            return out
        if batch["responsesFile"] is not None:
            output: dict[str, Any] = {"responsesFile": batch["responsesFile"]}
        else:
            output = {"inlinedResponses": {"inlinedResponses": [
                {**self._outcome(i, query), **({"metadata": i.metadata} if i.metadata is not None else {})}
                for i in items]}}
        meta["output"] = output
        out["response"] = {"@type": OUTPUT_TYPE, **output}
        return out

