"""Provider SDK exceptions to ModelError. The openai and anthropic SDKs share one exception
shape (status errors carry the response, timeouts and connection errors are separate classes),
so one function serves both; it decides what the retry policy may retry."""

from __future__ import annotations

import email.utils
import time
from typing import Any

from deskbench.models.types import ModelError

RETRYABLE_STATUS = {408, 409, 429, 529}  # plus every 5xx; 529 is Anthropic's "overloaded"


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
        status = int(getattr(exc, "status_code", 0))
        detail = str(getattr(exc, "message", "") or exc)[:300]
        response: Any = getattr(exc, "response", None)
        return ModelError(f"HTTP {status}: {detail}", retryable=status in RETRYABLE_STATUS or status >= 500,
                          status=status, retry_after=retry_after_seconds(response.headers if response else None))
    if isinstance(exc, timeout_error):  # checked before connection errors: it is one of them
        return ModelError("request timed out", retryable=True)
    if isinstance(exc, connection_error):
        return ModelError(f"connection failed: {exc}", retryable=True)
    return ModelError(f"{type(exc).__name__}: {exc}", retryable=False)
