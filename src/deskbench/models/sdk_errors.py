"""Provider SDK exceptions to ModelError. The openai and anthropic SDKs share one exception
shape (status errors carry the response, timeouts and connection errors are separate classes),
so one function serves both; it decides what the retry policy may retry."""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any

from deskbench.models.types import ModelError

RETRYABLE_STATUS = {408, 409, 429, 529}  # plus every 5xx; 529 is Anthropic's "overloaded"
USER_STATUS = {400, 401, 403, 404, 422}  # refusals of the request itself: the user's to fix...

# ...except those that belong to one episode's conversation, not to the settings: a prompt that
# outgrew the context window, a content-policy refusal. These end that episode only.
POLICY = re.compile(r"content[_ ]?(policy|filter|management)|safety (system|filter)|flagged as (unsafe|harmful)"
                    r"|invalid_prompt|refus", re.I)
CONTEXT = re.compile(r"context[_ ]?(length|window|limit)|maximum context|too many tokens|prompt (is )?too long"
                     r"|exceeds? the (model'?s )?(context|token)", re.I)


# Mistral's check that every tool call has its result (mistral-common's validator, answered 400): a
# conversation in which an agent left a call unanswered (vllm_agent.py sends no result for a tool it
# does not offer); the settings are not at fault. (Its role-order refusals are the adapter's to get
# right, from the capability table: those stay the user's to fix.)
ORDER = re.compile(r"Not the same number of function calls and responses")


def episode_specific(message: str) -> bool:
    """A refusal caused by this conversation (context overflow, content policy, the order of its
    messages), not the run."""
    return bool(POLICY.search(message) or CONTEXT.search(message) or ORDER.search(message))


def retry_after_seconds(headers: Any) -> float | None:
    """Retry-After as seconds: either a number or an HTTP date."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def sdk_error(exc: Exception, status_error: type, timeout_error: type, connection_error: type) -> ModelError:
    if isinstance(exc, status_error):
        response: Any = getattr(exc, "response", None)
        return _status_model_error(int(getattr(exc, "status_code", 0)), _detail(exc), _param(exc),
                                   response.headers if response else None)
    if isinstance(exc, timeout_error):  # checked before connection errors: it is one of them
        return ModelError("request timed out", retryable=True)
    if isinstance(exc, connection_error):
        return ModelError(f"connection failed: {exc}", retryable=True)
    return ModelError(f"{type(exc).__name__}: {exc}", retryable=False)


def status_error(status: int, body: object, headers: Any, message: str) -> ModelError:
    """A refusal read off the wire (models/openai_wire.py) as ModelError, by the rules above:
    `body` is what the SDK keeps as the exception's body (OpenAI's "error" object), `message` what
    it says when the body has no message."""
    holder = _Refusal(message, body)
    return _status_model_error(status, _detail(holder), _param(holder), headers)


class _Refusal(Exception):
    """The shape of an SDK status error, for _detail and _param."""

    def __init__(self, message: str, body: object) -> None:
        super().__init__(message)
        self.message, self.body = message, body
        self.param = body.get("param") if isinstance(body, dict) else None


def _status_model_error(status: int, detail: str, param: str | None, headers: Any) -> ModelError:
    detail = detail[:500]
    retryable = status in RETRYABLE_STATUS or status >= 500
    fatal = status in USER_STATUS and not episode_specific(detail)
    return ModelError(f"HTTP {status}: {detail}", retryable=retryable, status=status,
                      retry_after=retry_after_seconds(headers), fatal=fatal, param=param)


def _detail(exc: Exception) -> str:
    """The provider's own message: OpenAI's error.message, Anthropic's error.message, Gemini's
    [{"error": {"message"}}], else what the SDK made of the body."""
    body: Any = getattr(exc, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], dict):
        body = body[0]
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if (found := _validation_detail(body)) is not None:
            return found
    return str(getattr(exc, "message", "") or exc)


def _validation_detail(body: dict[str, Any]) -> str | None:
    """A validation error list as one line, "loc: msg; ...": Mistral's 422 puts pydantic's list under
    message.detail ({"object": "error", "message": {"detail": [{"type", "loc", "msg", "input"}]}, ...}),
    FastAPI's bare form under detail ({"detail": [...]}; {"detail": "Unauthorized"} is Mistral's 401)."""
    message = body.get("message")
    detail = message.get("detail") if isinstance(message, dict) else message if isinstance(message, list) \
        else body.get("detail")
    if isinstance(detail, str):
        return detail
    if not isinstance(detail, list) or not detail:
        return None
    lines = []
    for item in detail:
        if isinstance(item, dict):
            loc = ".".join(str(x) for x in item.get("loc") or [] if x != "body")
            lines.append(f"{loc}: {item.get('msg')}" if loc else str(item.get("msg")))
    return "; ".join(lines) or None


def _param(exc: Exception) -> str | None:
    param = getattr(exc, "param", None)
    if isinstance(param, str):
        return param
    body: Any = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("param"), str):
            return str(inner["param"])
    return None
