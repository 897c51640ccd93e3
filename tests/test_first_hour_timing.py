"""Issue 31, item 7: a test command that is green on a slow machine too.

On a fresh (slow) machine, `test_anthropic_images_are_downscaled_and_counted_never_refused` saw
its 25-image request arrive twice: the adapter downscaled the images (seconds of CPU) on the
event loop, inside the retry wrapper's per-call timeout, so a slow first try timed out after the
request had reached the server, and the retry downscaled everything again. The wrapper now fits
a request's images once, before the first try, in a worker thread. These tests hold that without
depending on how fast the machine is: they count the downscaling work and note its thread.
"""

from __future__ import annotations

import asyncio
import base64
import io
import threading
from typing import Any

import pytest
from PIL import Image
from sim_anthropic import SimAnthropic

from deskbench.models import image_limits
from deskbench.models.capabilities import use_capabilities
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.settings import Sampling, resolve
from deskbench.models.types import ChatRequest, ImagePart, Message, TextPart

# Generous: no test here may depend on a call finishing within a tight bound.
POLICY = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02, timeout=600.0)


@pytest.fixture(autouse=True)
def _builtin_capabilities() -> Any:
    use_capabilities(None)
    yield
    use_capabilities(None)


def _wide_png(seed: int) -> bytes:
    """2001 x 8 px: over the 2000 px side allowed with more than 20 images, and quick to resize."""
    buf = io.BytesIO()
    Image.new("RGB", (2001, 8), (seed % 256, 100, 200)).save(buf, format="PNG")
    return buf.getvalue()


def _count_downscales(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread of every image the adapters' fitting actually changed (a downscale)."""
    threads: list[int] = []
    fit_one = image_limits._fit_one

    def counting(part: ImagePart, max_b64: int | None, max_side: int | None) -> ImagePart:
        fitted = fit_one(part, max_b64, max_side)
        if fitted is not part:
            threads.append(threading.get_ident())
        return fitted

    monkeypatch.setattr(image_limits, "_fit_one", counting)
    return threads


def test_images_are_fitted_once_off_the_event_loop_even_when_the_call_is_retried(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from deskbench.models.anthropic_chat import AnthropicChat
    downscales = _count_downscales(monkeypatch)
    images = [ImagePart.of(_wide_png(i)) for i in range(21)]
    request = ChatRequest(messages=[Message(role="user", content=[TextPart(text="look"), *images])])
    # The first try fails (HTTP 500) after the server has the request: the retry must send the
    # images already fitted, not fit them again.
    script = lambda body, n: {"kind": "status", "status": 500} if n == 1 else {"kind": "text", "text": "ok"}  # noqa: E731

    async def call() -> tuple[str, int]:
        loop_thread = threading.get_ident()
        model = ResilientModel(AnthropicChat("claude-sonnet-4-5", base_url=sim.base_url, api_key="sk-ant-test"),
                               policy=POLICY, settings=resolve("anthropic/claude-sonnet-4-5", Sampling()))
        try:
            reply = await model.complete(request)
        finally:
            await model.aclose()
        assert model.ledger.retries == 1
        return reply.message.text(), loop_thread

    with SimAnthropic(script=script) as sim:
        text, loop_thread = asyncio.run(call())
    assert text == "ok" and sim.refused == [], sim.refused[:1]
    assert len(sim.accepted) == 2  # the failed try and its retry, both within the limits
    for body in sim.accepted:
        sides = [Image.open(io.BytesIO(base64.b64decode(b["source"]["data"]))).size[0]
                 for b in body["messages"][0]["content"] if b["type"] == "image"]
        assert sides == [2000] * 21
    assert len(downscales) == 21, "each image downscaled once, not once per try"
    assert loop_thread not in downscales, "downscaling ran on the event loop"


def test_a_request_without_images_is_sent_as_it_is() -> None:
    from deskbench.models.anthropic_chat import AnthropicChat
    request = ChatRequest(messages=[Message(role="user", content="no pictures here")])
    assert not request.has_images()
    with_image = ChatRequest(messages=[Message(role="user", content=[ImagePart.of(_wide_png(0))])])
    assert with_image.has_images()
    with SimAnthropic() as sim:
        async def call() -> None:
            model = ResilientModel(AnthropicChat("claude-sonnet-4-5", base_url=sim.base_url, api_key="sk-ant-test"),
                                   policy=POLICY)
            try:
                assert (await model._fit_images(request)) is request
                await model.complete(request)
            finally:
                await model.aclose()

        asyncio.run(call())
    assert sim.refused == [] and len(sim.accepted) == 1
