"""The plain OpenAI configuration without the SDK (models/openai_wire.py `plain_post`): the URL
and headers equal, in order, what the installed SDK's AsyncOpenAI gives for the same settings and
environment; whatever it does not mirror goes back to the SDK; a process that calls an OpenAI
model in that configuration never imports the SDK (1.5 s of CPU a process)."""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI

from deskbench.models import openai_wire
from deskbench.models.openai_wire import DirectPost, direct_post, plain_post

ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY",
       "OPENAI_CUSTOM_HEADERS", "OPENAI_WEBHOOK_SECRET")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _in_loop(post: DirectPost) -> tuple[str, list[tuple[str, str]]]:
    """URL and headers as sent: the async library is known only in the running task."""
    async def go() -> None:
        post._session_here()
        await post.aclose()

    asyncio.run(go())
    return post.url, list(post.headers.items())


def _sdk(api_key: str | None, base_url: str | None) -> tuple[str, list[tuple[str, str]]]:
    from openai import AsyncOpenAI

    made = direct_post(AsyncOpenAI(api_key=api_key, base_url=base_url), "/chat/completions", 7.5)
    assert made is not None
    return _in_loop(made)


def _ours(api_key: str | None, base_url: str | None) -> tuple[str, list[tuple[str, str]]]:
    made = plain_post(api_key, base_url, "/chat/completions", 7.5)
    assert made is not None
    return _in_loop(made)


@pytest.mark.parametrize(("args", "env"), [
    (("sk-arg", "http://127.0.0.1:8123/v1"), {}),
    ((None, None), {"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": "http://localhost:9/v1/"}),
    (("sk-arg", None), {"OPENAI_ORG_ID": "org-1", "OPENAI_PROJECT_ID": "proj_2", "OPENAI_WEBHOOK_SECRET": "w"}),
    (("sk-arg", None), {"OPENAI_PROJECT_ID": "proj_2"}),
    (("sk-arg", "https://openrouter.ai/api/v1"), {"OPENAI_BASE_URL": "http://ignored.invalid/v1"}),
    (("sk-arg", "http://[::1]:8000"), {}),
    (("sk-arg", "https://example.com"), {}),
])
def test_url_and_headers_are_the_sdks_in_order(clean_env: pytest.MonkeyPatch, args: tuple[Any, Any],
                                               env: dict[str, str]) -> None:
    for name, value in env.items():
        clean_env.setenv(name, value)
    ours, sdk = _ours(*args), _sdk(*args)
    assert ours == sdk
    assert dict(ours[1])["X-Stainless-Async"] == "async:asyncio"


def test_outside_the_plain_configuration_the_sdk_is_the_client(clean_env: pytest.MonkeyPatch) -> None:
    assert plain_post(None, None, "/chat/completions", 1.0) is None  # no key: the SDK words the refusal
    assert plain_post("", "http://127.0.0.1:1/v1", "/chat/completions", 1.0) is None
    for url in ("HTTP://127.0.0.1:1/v1", "http://Example.com/v1", "http://example.com:80/v1",
                "https://example.com:443/v1", "http://example.com/v1?api-version=1", "http://example.com/a%20b",
                "http://user:pw@example.com/v1", "http://example.com/./v1", "http://example.com/v1/../v2",
                "http://example.com:99999/v1", "ftp://example.com/v1", "", "http://example.com/v1#x"):
        assert plain_post("sk", url, "/chat/completions", 1.0) is None, url
    for name in ("OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS"):
        clean_env.setenv(name, "X-Team: a")
        assert plain_post("sk", "http://127.0.0.1:1/v1", "/chat/completions", 1.0) is None, name
        clean_env.delenv(name)
    assert plain_post("sk", "http://127.0.0.1:1/v1", "/chat/completions", 1.0) is not None


def test_every_url_taken_is_the_sdks_base_url(clean_env: pytest.MonkeyPatch) -> None:
    from openai import AsyncOpenAI

    for url in ("http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1/", "https://api.example-1.com/openai/deployments/x",
                "http://localhost:11434/v1", "http://host.docker.internal:8000/v1", "https://a.b/c_d/e~f/g-h",
                "http://[::1]:1", "http://10.0.0.1:65535/v1"):
        made = plain_post("sk", url, "/chat/completions", 1.0)
        assert made is not None, url
        assert made.url == f"{str(AsyncOpenAI(api_key='sk', base_url=url).base_url).rstrip('/')}/chat/completions"


@pytest.mark.parametrize(("system", "name", "machine", "release"), [
    ("Linux", "Linux-6.1.0-x86_64-with-glibc2.36", "x86_64", {"ID": "debian"}),
    ("Linux", "Linux-6.1.0-aarch64-with-glibc2.36", "aarch64", OSError()),
    ("Linux", "Linux-6.1.0-armv7l", "arm", {"ID": "FreeBSD"}),
    ("Linux", "Linux-5.10.81-android12-9-aarch64-with-libc", "aarch64", {}),
    ("Darwin", "macOS-14.1-arm64-arm-64bit", "arm64", {}),
    ("Darwin", "Darwin-21.6.0-iPhone12,1-64bit", "arm64", {}),
    ("Windows", "Windows-10-10.0.19045-SP0", "AMD64", {}),
    ("FreeBSD", "FreeBSD-14.0-RELEASE-amd64-64bit", "amd64", {}),
    ("Linux", "Linux-6.1.0-riscv64", "riscv64", {"ID": "debian"}),
])
def test_the_platform_is_named_as_the_sdk_names_it(monkeypatch: pytest.MonkeyPatch, system: str, name: str,
                                                  machine: str, release: object) -> None:
    from openai._base_client import get_architecture, get_platform

    def os_release() -> dict[str, str]:
        if isinstance(release, Exception):
            raise release
        assert isinstance(release, dict)
        return release

    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(platform, "platform", lambda: name)
    monkeypatch.setattr(platform, "machine", lambda: machine)
    monkeypatch.setattr(platform, "freedesktop_os_release", os_release)
    ours_os, ours_arch = openai_wire._sdk_os(), openai_wire._sdk_arch()
    sdk_os, sdk_arch = str(get_platform()), str(get_architecture())
    assert ours_os in (None, sdk_os) and ours_arch in (None, sdk_arch)
    if ours_os is None:  # not mirrored: the SDK names it otherwise than the three mirrored
        assert sdk_os not in ("Linux", "MacOS", "Windows")
    if ours_arch is None:
        assert sdk_arch not in ("x64", "arm64", "arm")


PROBE = """
import asyncio, sys
from deskbench.models.openai_chat import OpenAIChat
from deskbench.models.types import ChatRequest, Message

async def go():
    model = OpenAIChat("gpt-4.1", base_url=sys.argv[1], api_key="sk-test")
    try:
        return (await model.complete(ChatRequest(messages=[Message(role="user", content="hi")]))).message.text()
    finally:
        await model.aclose()

print(asyncio.run(go()), "openai" in sys.modules)
"""


def test_a_plain_call_imports_no_sdk_and_any_other_does(tmp_path: Path) -> None:
    with FakeOpenAI(script=lambda body, n: {"kind": "text", "text": "hello"}) as fake:
        env = {k: v for k, v in os.environ.items() if k not in ENV}
        plain = subprocess.run([sys.executable, "-c", PROBE, fake.base_url], capture_output=True, text=True,
                               env=env, timeout=120)
        custom = subprocess.run([sys.executable, "-c", PROBE, fake.base_url], capture_output=True, text=True,
                                env={**env, "OPENAI_CUSTOM_HEADERS": "X-Team: blue"}, timeout=120)
        sent = fake.headers
    assert plain.returncode == 0 and custom.returncode == 0, plain.stderr + custom.stderr
    assert plain.stdout.split() == ["hello", "False"]
    assert custom.stdout.split() == ["hello", "True"]
    assert [{k.lower(): v for k, v in h.items()}.get("x-team") for h in sent] == [None, "blue"]  # the SDK's own reading of the environment
