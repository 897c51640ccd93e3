"""The Gemini batch simulator (tests/sim_gemini_batch.py) refuses what the API refuses and answers
in the API's shapes: a simulator that accepted anything would let the backend's tests prove nothing."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from sim_gemini_batch import SimGeminiBatch

KEY = "test-gemini-key"
HELLO = {"contents": [{"parts": [{"text": "hello"}], "role": "user"}]}


def call(sim: SimGeminiBatch, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
         raw: bytes | None = None) -> tuple[int, Any, dict[str, str]]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(sim.base_url + path, data=data, method=method,
                                     headers={"x-goog-api-key": KEY, "content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request) as response:
            payload = response.read()
            status, reply_headers = response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        payload, status, reply_headers = exc.read(), exc.code, dict(exc.headers)
    try:
        return status, json.loads(payload), {k.lower(): v for k, v in reply_headers.items()}
    except ValueError:
        return status, payload, {k.lower(): v for k, v in reply_headers.items()}


def inline(*requests: dict[str, Any], keys: list[str] | None = None) -> dict[str, Any]:
    keys = keys or [f"k{i}" for i in range(len(requests))]
    return {"batch": {"displayName": "t", "inputConfig": {"requests": {"requests": [
        {"request": r, "metadata": {"key": k}} for r, k in zip(requests, keys, strict=True)]}}}}


def create(sim: SimGeminiBatch, body: dict[str, Any], model: str = "gemini-2.5-flash") -> tuple[int, Any]:
    status, reply, _ = call(sim, "POST", f"/v1beta/models/{model}:batchGenerateContent", body)
    return status, reply


def poll_until_done(sim: SimGeminiBatch, name: str, limit: int = 10) -> dict[str, Any]:
    for _ in range(limit):
        status, op, _ = call(sim, "GET", f"/v1beta/{name}")
        assert status == 200
        if op.get("done"):
            return op
    raise AssertionError(f"{name} never finished")


def test_inline_batch_runs_through_its_states_and_answers_by_key() -> None:
    replies = {"a": "first", "b": "second"}
    with SimGeminiBatch(script=lambda body, key: {"kind": "text", "text": replies[key], "input_tokens": 7}) as sim:
        status, op = create(sim, inline(HELLO, HELLO, keys=["a", "b"]))
        assert status == 200
        name = op["name"]
        assert name.startswith("batches/") and op["metadata"]["state"] == "BATCH_STATE_PENDING"
        assert op["metadata"]["batchStats"] == {"requestCount": "2", "pendingRequestCount": "2"}  # int64 as strings
        assert "done" not in op
        _, running, _ = call(sim, "GET", f"/v1beta/{name}")
        assert running["metadata"]["state"] == "BATCH_STATE_RUNNING"
        done = poll_until_done(sim, name)
    assert done["metadata"]["state"] == "BATCH_STATE_SUCCEEDED"
    listed = done["response"]["inlinedResponses"]["inlinedResponses"]
    assert [r["metadata"]["key"] for r in listed] == ["a", "b"]  # inline: in request order, metadata echoed
    assert [r["response"]["candidates"][0]["content"]["parts"][0]["text"] for r in listed] == ["first", "second"]
    assert listed[0]["response"]["usageMetadata"]["promptTokenCount"] == 7
    assert done["metadata"]["output"] == {k: v for k, v in done["response"].items() if k != "@type"}
    assert done["metadata"]["batchStats"] == {"requestCount": "2", "successfulRequestCount": "2"}


def test_a_request_the_api_refuses_is_that_requests_error_status() -> None:
    bad = {**HELLO, "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}}  # 2.5 Pro cannot stop thinking
    with SimGeminiBatch() as sim:
        status, op = create(sim, inline(HELLO, bad), model="gemini-2.5-pro")
        assert status == 200  # the create is accepted: the rule applies when the request runs
        done = poll_until_done(sim, op["name"])
    ok, refused = done["response"]["inlinedResponses"]["inlinedResponses"]
    assert "response" in ok
    assert refused["error"] == {"code": 3, "message": "Budget 0 is invalid. This model only works in thinking mode."}
    assert done["metadata"]["batchStats"]["failedRequestCount"] == "1"


def test_script_status_is_a_per_request_error() -> None:
    with SimGeminiBatch(script=lambda body, key: {"kind": "status", "status": 429} if key == "k1" else
                        {"kind": "text", "text": "ok"}) as sim:
        _, op = create(sim, inline(HELLO, HELLO))
        done = poll_until_done(sim, op["name"])
    assert done["response"]["inlinedResponses"]["inlinedResponses"][1]["error"]["code"] == 8  # RESOURCE_EXHAUSTED


def test_create_refusals() -> None:
    with SimGeminiBatch() as sim:
        # an unknown field inside a request fails the whole create (one proto message, parsed whole)
        status, reply = create(sim, inline({**HELLO, "temperature": 1}))
        assert status == 400
        assert reply["error"]["message"] == ('Invalid JSON payload received. Unknown name "temperature" at '
                                             "'batch.input_config.requests.requests[0].request': Cannot find field.")
        assert reply["error"]["status"] == "INVALID_ARGUMENT"
        assert create(sim, {"batch": {"displayName": "t", "inputConfig": {}}})[0] == 400  # no source
        both = {"batch": {"inputConfig": {"fileName": "files/x", "requests": {"requests": [{"request": HELLO}]}}}}
        assert "Oneof field 'source'" in create(sim, both)[1]["error"]["message"]
        assert create(sim, {"batch": {"inputConfig": {"requests": {"requests": []}}}})[0] == 400
        assert create(sim, {"requests": []})[1]["error"]["message"].startswith('Invalid JSON payload received. Unknown name "requests"')
        status, reply = create(sim, inline(HELLO), model="gemini-9")
        assert status == 404 and "models/gemini-9 is not found" in reply["error"]["message"]
        status, reply = create(sim, {"batch": {"inputConfig": {"fileName": "files/nope"}}})
        assert status == 403 and reply["error"]["message"].startswith("You do not have permission to access the File nope")
        status, reply, _ = call(sim, "POST", "/v1beta/models/gemini-2.5-flash:batchGenerateContent", inline(HELLO),
                                headers={"x-goog-api-key": "wrong"})
        assert status == 400 and reply["error"]["message"] == "API key not valid. Please pass a valid API key."
        assert sim.created() == 0


def test_input_file_upload_and_keyed_output_file() -> None:
    lines = b"".join(json.dumps({"key": k, "request": HELLO}).encode() + b"\n" for k in ("x", "y", "z"))
    with SimGeminiBatch(script=lambda body, key: {"kind": "text", "text": key.upper()}) as sim:
        status, _, headers = call(sim, "POST", "/upload/v1beta/files", {"file": {"displayName": "in"}},
                                  headers={"x-goog-upload-protocol": "resumable", "x-goog-upload-command": "start",
                                           "x-goog-upload-header-content-length": str(len(lines)),
                                           "x-goog-upload-header-content-type": "application/jsonl"})
        assert status == 200
        url = headers["x-goog-upload-url"].removeprefix(sim.base_url)
        status, uploaded, _ = call(sim, "POST", url, raw=lines, headers={"x-goog-upload-command": "upload, finalize",
                                                                         "x-goog-upload-offset": "0"})
        assert status == 200 and uploaded["file"]["source"] == "UPLOADED"
        name = uploaded["file"]["name"]
        # an uploaded file cannot be downloaded (only generated ones)
        assert call(sim, "GET", f"/download/v1beta/{name}:download?alt=media")[0] == 400
        _, op = create(sim, {"batch": {"displayName": "f", "inputConfig": {"fileName": name}}})
        done = poll_until_done(sim, op["name"])
        out = done["response"]["responsesFile"]
        status, raw, _ = call(sim, "GET", f"/download/v1beta/{out}:download?alt=media")
    assert status == 200
    rows = [json.loads(line) for line in raw.decode().splitlines()] if isinstance(raw, bytes) else [raw]
    assert [r["key"] for r in rows] == ["z", "y", "x"]  # keyed, not in request order
    assert {r["key"]: r["response"]["candidates"][0]["content"]["parts"][0]["text"] for r in rows} == {
        "x": "X", "y": "Y", "z": "Z"}


def test_upload_refusals() -> None:
    with SimGeminiBatch() as sim:
        start = {"x-goog-upload-protocol": "resumable", "x-goog-upload-command": "start",
                 "x-goog-upload-header-content-length": "3"}
        assert call(sim, "POST", "/upload/v1beta/files", {"file": {}}, headers={"x-goog-upload-command": "start"})[0] == 400
        assert call(sim, "POST", "/upload/v1beta/files", {"file": {"colour": "red"}}, headers=start)[0] == 400
        _, _, headers = call(sim, "POST", "/upload/v1beta/files", {"file": {}}, headers=start)
        url = headers["x-goog-upload-url"].removeprefix(sim.base_url)
        status, reply, _ = call(sim, "POST", url, raw=b"four", headers={"x-goog-upload-command": "upload, finalize",
                                                                        "x-goog-upload-offset": "0"})
        assert status == 400 and "announced 3" in reply["error"]["message"]


def test_hold_cancel_expiry_and_failure() -> None:
    with SimGeminiBatch(hold=True) as sim:
        _, held = create(sim, inline(HELLO))
        for _ in range(5):
            _, op, _ = call(sim, "GET", f"/v1beta/{held['name']}")
        assert op["metadata"]["state"] == "BATCH_STATE_RUNNING"
        # cancel: CANCELLED, done, no output
        assert call(sim, "POST", f"/v1beta/{held['name']}:cancel", {})[0] == 200
        _, op, _ = call(sim, "GET", f"/v1beta/{held['name']}")
        assert op["done"] is True and op["metadata"]["state"] == "BATCH_STATE_CANCELLED" and "response" not in op
        status, reply, _ = call(sim, "POST", f"/v1beta/{held['name']}:cancel", {})
        assert status == 400 and reply["error"]["status"] == "FAILED_PRECONDITION"
        # expiry: more than 48 hours pending or running
        _, old = create(sim, inline(HELLO))
        sim.advance(47.5)
        assert call(sim, "GET", f"/v1beta/{old['name']}")[1]["metadata"]["state"] == "BATCH_STATE_RUNNING"
        sim.advance(1)
        _, op, _ = call(sim, "GET", f"/v1beta/{old['name']}")
        assert op["metadata"]["state"] == "BATCH_STATE_EXPIRED" and op["done"] is True and "response" not in op
        # a batch that fails as a whole
        sim.release()
        sim.fail_with = "internal failure"
        _, failed = create(sim, inline(HELLO))
        op = poll_until_done(sim, failed["name"])
        assert op["metadata"]["state"] == "BATCH_STATE_FAILED" and op["error"]["message"] == "internal failure"
        # enums as numbers when the query asks for them (as for generateContent)
        _, op, _ = call(sim, "GET", f"/v1beta/{failed['name']}?%24alt=json%3Benum-encoding%3Dint")
        assert op["metadata"]["state"] == 4
        # list, delete, and a missing batch
        _, listed, _ = call(sim, "GET", "/v1beta/batches?pageSize=2")
        assert len(listed["operations"]) == 2 and listed["nextPageToken"] == "2"
        assert call(sim, "DELETE", f"/v1beta/{failed['name']}")[0] == 200
        assert call(sim, "GET", f"/v1beta/{failed['name']}")[0] == 404
    assert sim.created() == 3


def test_generate_content_answers_outside_a_batch_with_native_rules() -> None:
    with SimGeminiBatch(script=lambda body, key: {"kind": "text", "text": "alone"}) as sim:
        status, reply, _ = call(sim, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", HELLO)
        assert status == 200 and reply["candidates"][0]["content"]["parts"][0]["text"] == "alone"
        status, reply, _ = call(sim, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", {"contents": []})
        assert status == 400 and "contents is not specified" in reply["error"]["message"]
    assert len(sim.direct) == 1
