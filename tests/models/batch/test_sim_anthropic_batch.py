"""The Message Batches simulator refuses what the API refuses and answers in the shapes the SDK
parses (the anthropic SDK's own client.messages.batches drives it): a simulator that accepted a
wrong batch would let the backend's tests pass on a request the real API turns down."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from sim_anthropic_batch import SimAnthropicBatch

MODEL = "claude-haiku-4-5"


def _req(cid: str, text: str = "hi", **params: Any) -> dict[str, Any]:
    return {"custom_id": cid, "params": {"model": MODEL, "max_tokens": 64,
                                         "messages": [{"role": "user", "content": text}], **params}}


def _client(sim: SimAnthropicBatch, key: str = "sk-ant-test") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.base_url, api_key=key, max_retries=0)


def test_a_batch_runs_to_its_results_matched_by_custom_id() -> None:
    script = lambda params, n: {"kind": "text", "text": "echo " + params["messages"][0]["content"],  # noqa: E731
                                "input_tokens": 11, "output_tokens": 3}
    with SimAnthropicBatch(script=script, polls_to_end=2) as sim:
        client = _client(sim)
        batch = client.messages.batches.create(requests=[_req("a", "one"), _req("b", "two")])
        assert batch.processing_status == "in_progress" and batch.results_url is None
        assert batch.request_counts.processing == 2
        assert client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
        done = client.messages.batches.retrieve(batch.id)
        assert done.processing_status == "ended" and done.request_counts.succeeded == 2
        results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert set(results) == {"a", "b"}
    a = results["a"]
    assert a.type == "succeeded" and a.message.content[0].text == "echo one"
    assert a.message.usage.input_tokens == 11 and a.message.usage.service_tier == "batch"
    assert sim.creations == 1


def test_params_are_validated_when_the_batch_is_processed_not_when_created() -> None:
    with SimAnthropicBatch(polls_to_end=1) as sim:
        client = _client(sim)
        batch = client.messages.batches.create(requests=[
            _req("ok"), _req("toolong", max_tokens=10**6), _req("cold", max_tokens=0), _req("streamed", stream=True),
            {"custom_id": "sysrole", "params": {"model": MODEL, "max_tokens": 5,
                                                "messages": [{"role": "system", "content": "x"}]}}])
        ended = client.messages.batches.retrieve(batch.id)
        assert ended.request_counts.succeeded == 1 and ended.request_counts.errored == 4
        results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert results["ok"].type == "succeeded"
    err = results["toolong"]
    assert err.type == "errored" and err.error.error.type == "invalid_request_error"
    assert "maximum allowed number of output tokens" in err.error.error.message
    assert results["cold"].type == "errored" and results["sysrole"].type == "errored"
    assert results["streamed"].type == "errored"
    assert not sim.refused  # nothing was refused when the batch was created


@pytest.mark.parametrize(("requests", "fragment"), [
    ([], "at least 1 item"),
    ([{"custom_id": "x" * 65, "params": {}}], "at most 64 characters"),
    ([{"custom_id": "a b", "params": {}}], "should match pattern"),
    ([_req("same"), _req("same")], "Duplicate custom_id"),
    ([{"custom_id": "a"}], "requests.0.params: Field required"),
    ([{**_req("a"), "method": "POST"}], "requests.0.method: Extra inputs are not permitted"),
])
def test_the_create_call_refuses_a_bad_envelope_at_once(requests: list[Any], fragment: str) -> None:
    with SimAnthropicBatch() as sim, pytest.raises(anthropic.BadRequestError) as caught:
        _client(sim).messages.batches.create(requests=requests)
    assert fragment in str(caught.value)
    assert sim.creations == 0


def test_a_wrong_key_or_an_unknown_batch_is_refused() -> None:
    with SimAnthropicBatch() as sim:
        with pytest.raises(anthropic.AuthenticationError):
            _client(sim, "sk-ant-wrong").messages.batches.create(requests=[_req("a")])
        with pytest.raises(anthropic.NotFoundError):
            _client(sim).messages.batches.retrieve("msgbatch_01nothere")


def test_results_before_the_end_are_refused_and_the_sdk_says_so() -> None:
    with SimAnthropicBatch(hold=True) as sim:
        client = _client(sim)
        batch = client.messages.batches.create(requests=[_req("a")])
        with pytest.raises(anthropic.AnthropicError, match="results_url"):
            list(client.messages.batches.results(batch.id))
        assert sim.creations == 1


def test_a_batch_expires_after_24_hours_with_its_unprocessed_requests() -> None:
    with SimAnthropicBatch(hold=True) as sim:
        client = _client(sim)
        batch = client.messages.batches.create(requests=[_req("a"), _req("b")])
        sim.advance(23.9)
        assert client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
        sim.advance(0.2)
        ended = client.messages.batches.retrieve(batch.id)
        assert ended.processing_status == "ended" and ended.request_counts.expired == 2
        assert {r.result.type for r in client.messages.batches.results(batch.id)} == {"expired"}
        sim.advance(29 * 24)
        assert client.messages.batches.retrieve(batch.id).archived_at is not None
        with pytest.raises(anthropic.NotFoundError):
            list(client.messages.batches.results(batch.id))


def test_a_request_the_script_leaves_unprocessed_expires_and_status_errors_are_errored() -> None:
    answers = {"a": {"kind": "expire"}, "b": {"kind": "status", "status": 529}, "c": {"kind": "text", "text": "ok"}}
    with SimAnthropicBatch(script=lambda params, n: answers[params["metadata"]["user_id"]]) as sim:
        client = _client(sim)
        batch = client.messages.batches.create(requests=[_req(c, metadata={"user_id": c}) for c in "abc"])
        client.messages.batches.retrieve(batch.id)
        results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert results["a"].type == "expired"
    assert results["b"].type == "errored" and results["b"].error.error.type == "overloaded_error"
    assert results["c"].type == "succeeded"


def test_cancel_ends_the_batch_with_its_requests_canceled_and_cannot_be_repeated_after() -> None:
    with SimAnthropicBatch(hold=True) as sim:
        client = _client(sim)
        batch = client.messages.batches.create(requests=[_req("a")])
        with pytest.raises(anthropic.BadRequestError, match="cancel it first"):
            client.messages.batches.delete(batch.id)
        canceling = client.messages.batches.cancel(batch.id)
        assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at is not None
        ended = client.messages.batches.retrieve(batch.id)
        assert ended.processing_status == "ended" and ended.request_counts.canceled == 1
        with pytest.raises(anthropic.BadRequestError):
            client.messages.batches.cancel(batch.id)
        assert [b.id for b in client.messages.batches.list()] == [batch.id]
        client.messages.batches.delete(batch.id)
        assert list(client.messages.batches.list()) == []
