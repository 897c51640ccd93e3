"""The OpenAI Batch simulator (tests/sim_openai_batch.py) refuses what the Batch API refuses and
answers in its shapes, through the openai SDK's own files and batches resources: a simulator that
accepted a wrong batch would prove nothing about the backend tested against it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types import FilePurpose
from sim_openai_batch import EXPIRED_MESSAGE, SimOpenAIBatch


@pytest.fixture
def sim() -> Iterator[SimOpenAIBatch]:
    with SimOpenAIBatch(script=lambda body, n: {"kind": "text", "text": f"answer {n}"}) as s:
        yield s


def client(sim: SimOpenAIBatch) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url, api_key=sim.api_key, max_retries=0)


def line(cid: str, body: dict[str, Any] | None = None, url: str = "/v1/chat/completions") -> dict[str, Any]:
    return {"custom_id": cid, "method": "POST", "url": url,
            "body": body or {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": cid}]}}


def upload(c: openai.OpenAI, rows: list[dict[str, Any]], name: str = "in.jsonl",
           purpose: FilePurpose = "batch") -> str:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return c.files.create(file=(name, data), purpose=purpose).id


def create(c: openai.OpenAI, fid: str) -> str:
    return c.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="24h").id


def poll_until_final(c: openai.OpenAI, bid: str) -> Any:
    for _ in range(10):
        batch = c.batches.retrieve(bid)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch
    raise AssertionError("the batch never ended")


def rows(c: openai.OpenAI, fid: str | None) -> list[dict[str, Any]]:
    return [json.loads(x) for x in c.files.content(fid).text.splitlines()] if fid else []


def test_a_batch_goes_validating_in_progress_completed_with_its_lines_out_of_order(sim: SimOpenAIBatch) -> None:
    c = client(sim)
    bid = create(c, upload(c, [line("r1"), line("r2")]))
    assert c.batches.retrieve(bid).status == "in_progress"  # validated on the first retrieve
    batch = c.batches.retrieve(bid)
    assert batch.status == "completed" and batch.request_counts is not None
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (2, 2, 0)
    out = rows(c, batch.output_file_id)
    assert [r["custom_id"] for r in out] == ["r2", "r1"] and batch.error_file_id is None
    assert out[0]["response"]["status_code"] == 200 and out[0]["error"] is None
    assert out[0]["response"]["body"]["choices"][0]["message"]["content"].startswith("answer")
    assert c.batches.list(limit=5).data[0].id == bid


@pytest.mark.parametrize(("rows_in", "code"), [
    ([line("r1"), line("r1")], "duplicate_custom_id"),
    ([line("r1"), line("r2", {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]})], "mismatched_model"),
    ([line("r1", url="/v1/embeddings")], "invalid_url"),
    ([{"custom_id": "r1", "method": "GET", "url": "/v1/chat/completions", "body": {}}], "invalid_method"),
])
def test_an_invalid_input_file_fails_the_whole_batch(sim: SimOpenAIBatch, rows_in: list[dict[str, Any]],
                                                     code: str) -> None:
    c = client(sim)
    batch = poll_until_final(c, create(c, upload(c, rows_in)))
    assert batch.status == "failed" and batch.errors is not None and batch.errors.data
    assert batch.errors.data[0].code == code and batch.errors.data[0].line is not None
    assert batch.output_file_id is None and sim.answered == []


def test_a_request_the_chat_api_refuses_is_its_error_line(sim: SimOpenAIBatch) -> None:
    c = client(sim)
    bad = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "frobnicate": 1}
    batch = poll_until_final(c, create(c, upload(c, [line("ok"), line("bad", bad)])))
    assert batch.status == "completed" and batch.request_counts is not None and batch.request_counts.failed == 1
    (error,) = rows(c, batch.error_file_id)
    assert error["custom_id"] == "bad" and error["response"]["status_code"] == 400
    assert error["response"]["body"]["error"]["message"] == "Unrecognized request argument supplied: frobnicate"
    assert [r["custom_id"] for r in rows(c, batch.output_file_id)] == ["ok"]


def test_the_create_and_upload_refusals(sim: SimOpenAIBatch) -> None:
    c = client(sim)
    fid = upload(c, [line("r1")])
    with pytest.raises(openai.BadRequestError, match="completion_window"):
        c.post("/batches", cast_to=object,  # the SDK's types allow only "24h": the raw call
               body={"input_file_id": fid, "endpoint": "/v1/chat/completions", "completion_window": "1h"})
    with pytest.raises(openai.BadRequestError, match="Unrecognized request argument supplied: model"):
        c.batches.create(input_file_id=fid, endpoint="/v1/chat/completions", completion_window="24h",
                         extra_body={"model": "gpt-4o-mini"})
    with pytest.raises(openai.NotFoundError, match="No such File object"):
        create(c, "file-nope")
    with pytest.raises(openai.BadRequestError, match="purpose 'batch'"):
        create(c, upload(c, [line("r1")], purpose="assistants"))
    with pytest.raises(openai.BadRequestError, match=r"Must be \.jsonl"):
        upload(c, [line("r1")], name="in.json")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=sim.base_url, api_key="sk-wrong", max_retries=0).batches.list()
    assert sim.created == 0 and len(sim.refused) == 6


def test_expiry_keeps_what_finished_and_marks_the_rest_batch_expired(sim: SimOpenAIBatch) -> None:
    sim.hold, sim.complete = True, {"r1"}
    c = client(sim)
    bid = create(c, upload(c, [line("r1"), line("r2")]))
    assert c.batches.retrieve(bid).status == "in_progress"
    sim.advance(23.9)
    assert c.batches.retrieve(bid).status == "in_progress"
    sim.advance(0.2)
    batch = c.batches.retrieve(bid)
    assert batch.status == "expired" and batch.expired_at is not None
    assert [r["custom_id"] for r in rows(c, batch.output_file_id)] == ["r1"]
    (expired,) = rows(c, batch.error_file_id)
    assert expired["response"] is None and expired["error"] == {"code": "batch_expired", "message": EXPIRED_MESSAGE}


def test_cancel_goes_through_cancelling_and_a_finished_batch_cannot_be_cancelled(sim: SimOpenAIBatch) -> None:
    sim.hold = True
    c = client(sim)
    bid = create(c, upload(c, [line("r1")]))
    assert c.batches.cancel(bid).status == "cancelling"
    batch = c.batches.retrieve(bid)
    assert batch.status == "cancelled" and batch.output_file_id is None and sim.answered == []
    with pytest.raises(openai.BadRequestError, match="Cannot cancel a batch with status 'cancelled'"):
        c.batches.cancel(bid)
