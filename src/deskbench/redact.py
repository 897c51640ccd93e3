"""Credentials out of user-given URLs before they are stored or shown (issue 33).

A URL a user gives (`--url http://user:secret@host/...`, a model's `NAME@URL`, HF_ENDPOINT) is
used as given, in memory, for the call itself; what a run keeps (its configuration, episode
errors) and what deskbench prints (`info`, error lines) goes through `redact_url` /
`redact_text` first. Redacted:

* the userinfo (`user:password@`, or a lone token before `@`) becomes `***@`;
* the value of a query parameter whose name says it is a secret becomes `***`: the names in
  `SECRET_PARAMS`, and any name ending in `_token`, `_key`, `_secret`, `_password` or
  `_signature` (case and `-`/`_` ignored).

Secrets inside the path (a webhook's token as a path segment) cannot be told apart from a path
and are kept. Redaction is idempotent, so a resume with the same URL has the same configuration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import unquote

MASK = "***"
SECRET_PARAMS = frozenset({
    "token", "access_token", "refresh_token", "id_token", "auth", "key", "api_key", "apikey",
    "secret", "client_secret", "password", "passwd", "pwd", "sig", "signature",
    "x_amz_signature", "x_amz_credential", "x_amz_security_token", "x_goog_signature",
})
SECRET_SUFFIXES = ("_token", "_key", "_secret", "_password", "_signature")

_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#]*)@")
_URL = re.compile(r"""[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>"'`]+""")


def secret_param(name: str) -> bool:
    """A query parameter's name that says its value is a secret."""
    key = unquote(name).strip().lower().replace("-", "_")
    return key in SECRET_PARAMS or key.endswith(SECRET_SUFFIXES)


def _redact_query(query: str) -> str:
    parts = []
    for item in query.split("&"):
        name, eq, _ = item.partition("=")
        parts.append(f"{name}={MASK}" if eq and secret_param(name) else item)
    return "&".join(parts)


def redact_url(url: str) -> str:
    """`url` with its userinfo and secret query values masked; the rest kept as written."""
    url = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", url, count=1)
    head, q, rest = url.partition("?")
    if not q:
        return url
    query, hash_, fragment = rest.partition("#")
    return f"{head}?{_redact_query(query)}{hash_}{fragment}"


def redact_text(text: str) -> str:
    """Every URL in free text (an error line, a command) redacted as `redact_url` does."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text


def redact_values(value: object) -> object:
    """A configuration value with every string in it redacted (dicts and lists walked): what a
    run stores of the options a user gave."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(v) for v in value]
    return value
