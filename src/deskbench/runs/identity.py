"""Run identity: what each system of a run is, so a resume never mixes two configurations under
one system name, and which deskbench produced its episodes.

Each track's prepare builds a `SystemConfig` per system (track, agent, model, every agent setting
that changes what runs, the model settings sent, a hash of the prompt texts and tool
descriptions the agent sends) and calls `remember_config`. The run keeps it in its meta
(`systems`: {system: {config, first, latest}}) with the deskbench version and git sha that first
ran the system and the latest that resumed it. A resume with another configuration is refused
with one line naming what differs; another deskbench version is recorded and warned about, not
refused (a changed prompt shows as a changed prompt hash). What only changes how a run goes
(--concurrency, --limit, --attempts, --cache) is not configuration.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from deskbench.errors import UserError
from deskbench.models.resilient import ResilientModel
from deskbench.runs.store import RunStore, deskbench_version, now

META_KEY = "systems"
IMPLIED_SETTINGS: dict[str, Any] = {"retriever": "bm25"}
"""Settings recorded only when they are not their default, so configurations stored before they
existed stay equal: absent means this value, and a resume that adds or drops one differs (a run
searched with BM25 resumed under a dense retriever is refused, and the other way round)."""


class Build(BaseModel):
    """Which deskbench ran a system: its version, and its git commit when run from a checkout."""

    deskbench: str | None = None
    git_sha: str | None = None
    at: str = ""

    def describe(self) -> str:
        version = self.deskbench or "unknown version"
        return f"deskbench {version}" + (f" ({self.git_sha[:12]})" if self.git_sha else "")


class SystemConfig(BaseModel):
    """Everything that decides what a system's episodes are."""

    model_config = ConfigDict(extra="ignore")

    track: str
    agent: str
    model: str | None = None  # the model's id; None: an agent that calls no model
    settings: dict[str, Any] = {}  # the agent's settings that change what runs, by name
    model_settings: dict[str, Any] | None = None  # what the model is sent (ResolvedSettings.sent)
    prompt_hash: str | None = None  # sha256 of the prompts and tool descriptions; None: no prompt
    model_source: str | None = None  # what a model answers from besides the request (a scripted model's file)

    @field_validator("settings")
    @classmethod
    def _no_credentials(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """A URL among the settings (external's --url) is kept without its credentials, whether
        built for a run or read back from one stored before they were stripped (redact.py)."""
        from deskbench.redact import redact_values

        return {k: redact_values(v) for k, v in settings.items()}

    def differences(self, new: SystemConfig) -> list[str]:
        """What changed from self to `new`, one "name: old -> new" each. A setting only one side
        has (kept by an older or newer deskbench) is not a difference."""
        out = [f"{name}: {_show(getattr(self, name))} -> {_show(getattr(new, name))}"
               for name in ("track", "agent", "model") if getattr(self, name) != getattr(new, name)]
        out += _changed(self.settings, new.settings, "", IMPLIED_SETTINGS)
        if self.model_settings is not None and new.model_settings is not None:
            out += _changed(self.model_settings, new.model_settings, "model ")
        if self.model_source != new.model_source:
            out.append(f"model replies: {_show(self.model_source)[:19]} -> {_show(new.model_source)[:19]} (the file "
                       "the model answers from changed)")
        if self.prompt_hash != new.prompt_hash:
            out.append(f"prompts: {_short(self.prompt_hash)} -> {_short(new.prompt_hash)} (the agent's prompt "
                       "texts or tool descriptions changed)")
        return out

    def describe(self) -> str:
        parts = [f"{k}={_setting(k, v)}" for k, v in self.settings.items()]
        parts += [f"model {k}={_show(v)}" for k, v in (self.model_settings or {}).items()]
        parts.append(f"prompts={_short(self.prompt_hash)}")
        if self.model_source:
            parts.append(f"model replies={self.model_source[:19]}")
        return ", ".join(parts)


class SystemIdentity(BaseModel):
    config: SystemConfig
    first: Build | None = None  # None: the system ran before deskbench recorded run identity
    latest: Build


def _show(value: object) -> str:
    return "default" if value is None else str(value)


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "none"


def _changed(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str,
             implied: Mapping[str, Any] | None = None) -> list[str]:
    """Settings both sides have that differ; of `implied`, one side's absence is its default value."""
    pairs = [(k, old[k], v) for k, v in new.items() if k in old and old[k] != v]
    pairs += [(k, old.get(k, default), new.get(k, default)) for k, default in (implied or {}).items()
              if (k in old) != (k in new) and old.get(k, default) != new.get(k, default)]
    return [f"{prefix}{k}: {_difference(k, before, after)}" for k, before, after in pairs]


def _setting(name: str, value: object) -> str:
    """A setting's value in one line: a retriever's identity as `dense=MODEL (weights ...)`."""
    if name == "retriever" and isinstance(value, Mapping):
        from deskbench.search.retriever_use import describe

        return describe(value)
    return _show(value)


def _difference(name: str, before: object, after: object) -> str:
    """`before -> after`; a retriever's identity in one line each (in full when those lines agree)."""
    if name == "retriever":
        shown = [_setting(name, v) for v in (before, after)]
        if shown[0] != shown[1]:
            return f"{shown[0]} -> {shown[1]}"
    return f"{_show(before)} -> {_show(after)}"


@lru_cache(maxsize=1)
def git_sha() -> str | None:
    """The commit of the source tree deskbench runs from, when it is a git checkout (no network;
    None when it is not one, or git is missing)."""
    root = Path(__file__).resolve().parents[3]  # src/deskbench/runs/identity.py -> the checkout
    if not (root / ".git").exists():
        return None
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and len(sha) == 40 else None


def current_build() -> Build:
    return Build(deskbench=deskbench_version(), git_sha=git_sha(), at=now())


def prompt_hash(*modules: str | ModuleType) -> str | None:
    """sha256 of the module-level constants (UPPER_CASE names: texts, tool specs and containers
    of them; not bare numbers, which are settings or timings) of the modules an agent takes its
    prompts and tool descriptions from.
    Comments and code do not count: only what the model can be sent. None: no modules."""
    if not modules:
        return None
    digest = hashlib.sha256()
    for module in modules:
        mod = importlib.import_module(module) if isinstance(module, str) else module
        for name in sorted(vars(mod)):
            if not name.isupper() or name.startswith("_"):
                continue
            raw = getattr(mod, name)
            value = None if isinstance(raw, int | float) else _plain(raw)  # a number is a setting, not a text
            if value is not None:
                digest.update(f"{mod.__name__}.{name}=".encode())
                digest.update(json.dumps(value, sort_keys=True, ensure_ascii=False).encode())
                digest.update(b"\n")
    return digest.hexdigest()


def _plain(value: object) -> object | None:
    """A constant as JSON data, or None when it is not prompt material (a class, a regex...)."""
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple | frozenset | set):
        items = [_plain(v) for v in value]
        if any(i is None for i in items):
            return None
        return sorted(items, key=json.dumps) if isinstance(value, frozenset | set) else items
    if isinstance(value, dict):
        pairs = {str(k): _plain(v) for k, v in value.items()}
        return None if any(v is None for v in pairs.values()) else pairs
    return None


def model_settings(model: ResilientModel | None) -> dict[str, Any] | None:
    """What a system's model is sent (its resolved sampling settings), for its SystemConfig."""
    if model is None or model.settings is None:
        return None
    return model.settings.sent.model_dump(mode="json")


def model_source(model: ResilientModel | None) -> str | None:
    """What a system's model answers from besides the request, for its SystemConfig: an adapter
    that replies from a file names it by `source` ("sha256:<hex>", models/scripted.py); None for
    the others."""
    if model is None:
        return None
    source = getattr(model.inner, "source", None)
    return source if isinstance(source, str) else None


def remember_config(store: RunStore, system: str, config: SystemConfig) -> str | None:
    """Keep a system's configuration and build with the run. A resume with another configuration
    is refused with one line naming what differs; returns a warning when another deskbench
    version (or commit) resumes it (recorded as the system's latest)."""
    build = current_build()
    warning: list[str] = []

    def change(known: object | None) -> object:
        table: dict[str, Any] = dict(known) if isinstance(known, dict) else {}
        old = table.get(system)
        if isinstance(old, dict):
            before = SystemIdentity.model_validate(old)
            diffs = before.config.differences(config)
            if diffs:
                raise UserError(f"{store.dir} already holds a {system} run with another configuration "
                                f"({', '.join(diffs)}); use a new --out for this configuration "
                                "(or the same flags and task file to resume)")
            last = before.latest
            if (last.deskbench, last.git_sha) != (build.deskbench, build.git_sha):
                warning.append(f"{store.dir} was last run with {last.describe()}; resuming with "
                               f"{build.describe()} (the configuration is the same; recorded per system)")
            entry = SystemIdentity(config=config, first=before.first, latest=build)
        else:
            ran_before = bool(store.done(system))  # a run made before identity was recorded
            entry = SystemIdentity(config=config, first=None if ran_before else build, latest=build)
        table[system] = entry.model_dump(mode="json")
        return table

    store.update_meta(META_KEY, change)
    return warning[0] if warning else None


def stored_identities(store: RunStore) -> dict[str, SystemIdentity]:
    """Each system's configuration and builds (systems run before identity was kept: none)."""
    known = store.meta(META_KEY)
    if not isinstance(known, dict):
        return {}
    return {system: SystemIdentity.model_validate(value) for system, value in known.items() if isinstance(value, dict)}
