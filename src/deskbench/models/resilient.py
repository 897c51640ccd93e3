"""The wrapper every adapter runs inside: settings, cache, concurrency limit, retries, usage
and cost.

The user's sampling settings (resolved against the capability table before the run) go on
every request here, so agents and judges never set them. Retries use exponential backoff with
full jitter on 429, 5xx, timeouts and dropped connections, and wait at least what the server's
Retry-After asks for. A call that still fails raises ModelError; what that means (an unscored
judgement, an episode error) is the caller's decision. A refusal that is the user's to fix (a
bad key, an unknown model, a parameter the model does not take) is never retried and raises
ProviderRefused, a UserError: the run stops with one line naming the flag to change.
"""

from __future__ import annotations

import asyncio
import random
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from deskbench.models.cache import ResponseCache, cache_key
from deskbench.models.capabilities import Capabilities, capabilities
from deskbench.models.meter import METER
from deskbench.models.prices import PriceTable
from deskbench.models.settings import ResolvedSettings, flag
from deskbench.models.types import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    ModelError,
    ProviderRefused,
    Usage,
)

_FIELD_WORDS = {  # words of a provider's refusal -> the setting it is about
    "max_tokens": ("max_tokens", "max_completion_tokens", "max_output_tokens", "output tokens"),
    "temperature": ("temperature",),
    "top_p": ("top_p", "top-p"),
    "top_k": ("top_k", "topk", "top-k"),
    "reasoning_effort": ("reasoning_effort", "reasoning effort", "reasoning.effort", "thinking"),
}


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # calls in all, the first included
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_retry_after: float = 300.0  # a server asking for longer is treated as an outage
    timeout: float = 180.0  # per call, on top of the SDK's own timeout

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        backoff = rng.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))
        return max(backoff, min(retry_after, self.max_retry_after)) if retry_after else backoff


@dataclass
class UsageLedger:
    """Running totals for the progress bar and the run summary."""

    total: Usage = field(default_factory=Usage)
    retries: int = 0
    failures: int = 0
    cache_hits: int = 0


class ResilientModel:
    """A ChatModel around another ChatModel; same `id`, so caches and prices see the real model."""

    def __init__(
        self,
        inner: ChatModel,
        *,
        policy: RetryPolicy | None = None,
        concurrency: int = 16,
        cache: ResponseCache | None = None,
        prices: PriceTable | None = None,
        ledger: UsageLedger | None = None,
        seed: int = 0,
        settings: ResolvedSettings | None = None,
    ) -> None:
        self.inner = inner
        self.id = inner.id
        self.settings = settings
        self._sent = settings.sent.given() if settings else {}
        self.policy = policy or RetryPolicy()
        self.cache = cache
        self.prices = prices or PriceTable()
        self.ledger = ledger or UsageLedger()
        self.concurrency = concurrency  # calls in flight at once (a cluster's limiter takes the same number)
        self._slots: AbstractAsyncContextManager[object] = asyncio.Semaphore(concurrency)
        self._rng = random.Random(seed)

    def limit_with(self, slots: AbstractAsyncContextManager[object]) -> None:
        """Bound calls by `slots` instead of this process's semaphore: on a Ray cluster, a limiter
        shared by every worker (runs/ray_worker.py), so the per-model limit holds cluster-wide."""
        self._slots = slots

    async def complete(self, request: ChatRequest) -> ChatResponse:
        meter = METER.get()  # the calling episode's limits (runs/budget.py); None outside an episode
        if meter is not None:
            meter.before_call(self.id)
        response = await self._complete(request)
        if meter is not None:
            meter.after_call(self.id, response)  # a limit reached raises, the reply with it
        return response

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        if self._sent:
            missing = {k: v for k, v in self._sent.items() if getattr(request, k) is None}
            if missing:
                request = request.model_copy(update=missing)
        key = cache_key(request.fingerprint(self.id)) if self.cache is not None else ""
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self.ledger.cache_hits += 1
            # A cached answer costs nothing now: report zero usage, keep the tokens for reference.
            return hit.model_copy(update={"cached": True, "usage": Usage(calls=0, cost_known=True)})
        response = await self._call_with_retries(request)
        if self.cache is not None:
            self.cache.put(key, self.id, response)
        return response

    async def _fit_images(self, request: ChatRequest) -> ChatRequest:
        """The request's images fitted to the model's limits once, before the first try and in a
        worker thread: downscaling 25 page images is seconds of CPU, which on the event loop would
        stall every other episode's calls, count against this call's timeout (a slow machine then
        timed out and re-sent a request the server already had) and be redone on every retry."""
        caps = getattr(self.inner, "caps", None)
        if not isinstance(caps, Capabilities) or not request.has_images():
            return request
        from deskbench.models.image_limits import (
            fit_request,  # Pillow: imported only when there are images
        )

        return await asyncio.to_thread(fit_request, request, caps)

    async def _call_with_retries(self, request: ChatRequest) -> ChatResponse:
        policy = self.policy
        request = await self._fit_images(request)
        for attempt in range(policy.attempts):
            started = time.monotonic()
            try:
                async with self._slots, asyncio.timeout(policy.timeout):  # no extra task, unlike wait_for
                    response = await self.inner.complete(request)
            except (TimeoutError, ModelError) as exc:
                error = exc if isinstance(exc, ModelError) else ModelError("call timed out", retryable=True)
                if error.fatal:
                    self.ledger.failures += 1
                    raise ProviderRefused(self._refusal_line(error)) from exc
                if not error.retryable or attempt == policy.attempts - 1:
                    self.ledger.failures += 1
                    raise ModelError(
                        f"{self.id}: {error} (after {attempt + 1} attempts)",
                        retryable=False, status=error.status,
                    ) from exc
                self.ledger.retries += 1
                await asyncio.sleep(policy.delay(attempt, error.retry_after, self._rng))
                continue
            return self._account(response, time.monotonic() - started)
        raise AssertionError("unreachable: the loop returns or raises")

    def _refusal_line(self, error: ModelError) -> str:
        """One line: who refused, their words, and what to change."""
        role = self.settings.role if self.settings else "agent"
        text = f"{error} {error.param or ''}".lower()
        status = error.status
        if status == 401 or status == 403 or "api key not valid" in text:  # Google answers a bad key with 400
            caps = capabilities(self.id)
            key_env = " or ".join([caps.key_env, *caps.key_env_also]) if caps.key_env else None
            hint = f"check the key in {key_env}" if key_env else "check the server's key (OPENAI_COMPAT_API_KEY)"
            if status == 403:
                hint += " and that it may use this model"
        elif status == 404 or error.param == "model" or "invalid model" in text:  # Mistral: 400 "Invalid model: X"
            hint = "check the model name in " + ("--judge" if role == "judge" else "--model")
        else:
            named = [f for f, words in _FIELD_WORDS.items() if any(w in text for w in words)]
            hint = ("change or drop " + " / ".join(flag(role, f) for f in named)) if named else \
                "check the request settings"
            if "image" in text:
                hint = "use --view text (the model refused page images)"
        return (f"{self.id} refused the request ({error}); {hint}; "
                "or give --capabilities FILE if deskbench's capability table is wrong for this model")

    def _account(self, response: ChatResponse, seconds: float) -> ChatResponse:
        usage = response.usage
        cost = self.prices.cost(self.id, usage.input_tokens, usage.output_tokens)
        usage = usage.model_copy(update={
            "calls": max(usage.calls, 1),
            "seconds": seconds,
            "cost_usd": cost,  # None: the model has no price, so the cost is unknown (not 0)
            "cost_known": cost is not None,
        })
        self.ledger.total = self.ledger.total + usage
        return response.model_copy(update={"usage": usage})

    async def aclose(self) -> None:
        await self.inner.aclose()
