"""A strict local simulator of the Gemini Interactions API's agent interactions (v1beta): create a
Deep Research interaction in the background, get it until it is done, over real HTTP on 127.0.0.1
(GOOGLE_GEMINI_BASE_URL points the agent at it).

Requests are checked against what the API documents and refused with Google's error body
{"error": {"code", "message", "status"}}; the interaction's outputs come from the test's script.
Sources:
  DR     https://ai.google.dev/gemini-api/docs/deep-research ("You must use background execution
         (set background=true)"; the agents; POST /v1beta/interactions, GET /v1beta/interactions/{id};
         the x-goog-api-key header; outputs[-1].text once status is "completed")
  SDK    the google-genai SDK's Interactions types, generated from the API's OpenAPI spec
         (googleapis/python-genai 16fffbd3, 2026-04-21): interaction_create_params.py
         (BaseCreateAgentInteractionParams: the fields an agent interaction takes), interaction.py
         (status in_progress | requires_action | completed | failed | cancelled | incomplete),
         deep_research_agent_config.py (type "deep-research"; thinking_summaries auto | none;
         visualization off | auto; collaborative_planning), interaction_get_params.py (include_input,
         stream, last_event_id), content.py (the output item types), usage.py (total_* counts);
         since 975d16a3 (2026-05-14) interaction.py gives `steps` (user_input, model_output with the
         content, thought and the tool call/result steps) instead of `outputs`: `shape="steps"`
Error texts: "API key not valid. Please pass a valid API key." (400 INVALID_ARGUMENT), the missing
key's 403 ("Method doesn't allow unregistered callers ...") and "Invalid JSON payload received.
Unknown name ..." are the Gemini API's, as tests/sim_gemini_native.py cites them; the texts for an
unknown agent or interaction, a wrong type or value, a foreground deep-research request and
store=false in the background were not found in a page and are worded here.
Not simulated (refused as such): model interactions, streaming, previous_interaction_id chains.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sim_gemini_file_search import GeminiDouble, err

AGENTS = {"deep-research-pro-preview-12-2025", "deep-research-preview-04-2026", "deep-research-max-preview-04-2026"}
AGENT_FIELDS = {"agent", "input", "agent_config", "background", "previous_interaction_id", "response_format",
                "response_mime_type", "response_modalities", "service_tier", "store", "system_instruction",
                "tools", "webhook_config", "stream"}  # SDK BaseCreateAgentInteractionParams (+ stream)
MODEL_FIELDS = {"model", "generation_config"}  # a model interaction's own fields (SDK BaseCreateModelInteractionParams)
CONFIG_FIELDS = {"type", "thinking_summaries", "visualization", "collaborative_planning"}  # SDK DeepResearchAgentConfig
GET_PARAMS = {"include_input", "stream", "last_event_id"}
OUTPUT_TYPES = {"text", "image", "audio", "document", "video", "thought", "function_call", "code_execution_call",
                "url_context_call", "mcp_server_tool_call", "google_search_call", "file_search_call",
                "google_maps_call", "function_result", "code_execution_result", "url_context_result",
                "google_search_result", "mcp_server_tool_result", "file_search_result", "google_maps_result"}
CONTENT_TYPES = {"text", "image", "audio", "document", "video"}  # inside a model_output step (steps shape)
ENDED = {"completed", "failed", "cancelled", "incomplete", "requires_action"}
UNREGISTERED = ("Method doesn't allow unregistered callers (callers without established identity). "
                "Please use API Key or other form of API consumer identity to call this API.")

Reply = tuple[int, dict[str, Any]]
Script = Callable[[str, str], dict[str, Any]]
"""(the input's text, the agent) -> {"outputs": [content items], "usage": {...}} for a completed
interaction, or {"status": "failed" | "cancelled" | "incomplete", "error": {...}, "outputs": [...]}."""


def _type_error(name: str, want: str, value: Any) -> Reply:
    return err(400, f"Invalid value at '{name}' ({want}), {json.dumps(value)[:60]}")


@dataclass
class SimGeminiInteractions(GeminiDouble):
    script: Script
    polls_to_finish: int = 1  # gets answered in_progress before the interaction is done
    hold: threading.Event = field(default_factory=threading.Event)  # set: every interaction stays in_progress
    unavailable: int = 0  # the next gets answered 503 UNAVAILABLE (a passing outage)
    shape: str = "outputs"  # "steps": the reply as the API gives it since 2026-05 (SDK 975d16a3)
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    interactions: dict[str, dict[str, Any]] = field(default_factory=dict)
    polls: dict[str, int] = field(default_factory=dict)

    @property
    def created(self) -> list[Any]:
        """The bodies of the interactions created (each one is a paid research run)."""
        return [b for m, _, _, b in self.requests if m == "POST"]  # only accepted requests are kept

    # -- dispatch ----------------------------------------------------------------------------------
    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        url = urlsplit(path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        p = unquote(url.path)
        key = headers.get("x-goog-api-key") or query.pop("key", None)
        if not key:
            return err(403, UNREGISTERED)
        if key != self.api_key:
            return err(400, "API key not valid. Please pass a valid API key.")
        if p == "/v1beta/interactions" and method == "POST":
            try:
                body = json.loads(raw or b"")
            except json.JSONDecodeError:
                return err(400, "Invalid JSON payload received. Expected a JSON object.")
            if not isinstance(body, dict):
                return err(400, "Invalid JSON payload received. Expected a JSON object.")
            return self._create(body, headers, path)
        if p.startswith("/v1beta/interactions/") and method == "GET":
            self.requests.append((method, path, headers, None))
            extra = sorted(set(query) - GET_PARAMS)
            if extra:
                return err(400, f"Invalid JSON payload received. Unknown name \"{extra[0]}\": Cannot bind query parameter.")
            if query.get("stream") == "true":
                return err(400, "streaming is not simulated here")
            if self.unavailable > 0:
                self.unavailable -= 1
                return err(503, "The service is currently unavailable.")
            return self._get(p[len("/v1beta/interactions/"):])
        return err(404, f"Method not found: {method} {p}")

    def _create(self, body: dict[str, Any], headers: dict[str, str], path: str) -> Reply:
        unknown = sorted(set(body) - AGENT_FIELDS - MODEL_FIELDS)
        if unknown:
            return err(400, f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.')
        if "model" in body:
            if "agent" in body:
                return err(400, "Exactly one of 'model' or 'agent' must be set.")
            return err(400, "model interactions are not simulated here")
        mixed = sorted(set(body) & MODEL_FIELDS)
        if mixed:  # an agent interaction has no generation_config
            return err(400, f'Invalid JSON payload received. Unknown name "{mixed[0]}": Cannot find field.')
        agent = body.get("agent")
        if not isinstance(agent, str):
            return err(400, "'agent' is required: the name of the Agent.") if agent is None else \
                _type_error("agent", "TYPE_STRING", agent)
        if "input" not in body:
            return err(400, "'input' is required.")
        text = _input_text(body["input"])
        if text is None:
            return _type_error("input", "a string or a list of content", body["input"])
        for name in ("background", "store", "stream"):
            if name in body and not isinstance(body[name], bool):
                return _type_error(name, "TYPE_BOOL", body[name])
        for name in ("system_instruction", "previous_interaction_id"):
            if name in body and not isinstance(body[name], str):
                return _type_error(name, "TYPE_STRING", body[name])
        if "previous_interaction_id" in body:
            return err(400, "previous_interaction_id chains are not simulated here")
        if body.get("stream"):
            return err(400, "streaming is not simulated here")
        config = body.get("agent_config")
        if config is not None:
            problem = _check_config(config)
            if problem is not None:
                return problem
        if agent not in AGENTS:
            return err(404, f"Agent {agent} not found.")
        if not body.get("background"):
            return err(400, f"Agent {agent} must be run in the background: set background=true.")
        if body.get("store") is False:
            return err(400, "background=true requires store=true.")
        self.requests.append(("POST", path, headers, body))
        iid = f"v1_{next(self._ids):08d}"
        now = "2026-11-28T12:00:00Z"
        self.interactions[iid] = {"id": iid, "status": "in_progress", "created": now, "updated": now,
                                  "agent": agent, "role": "agent", "_input": text}
        self.polls[iid] = 0
        return 200, self._view(iid)

    def _get(self, iid: str) -> Reply:
        found = self.interactions.get(iid)
        if found is None:
            return err(404, f"Interaction {iid} not found.")
        self.polls[iid] += 1
        if found["status"] == "in_progress" and not self.hold.is_set() and self.polls[iid] >= self.polls_to_finish:
            self._finish(iid)
        return 200, self._view(iid)

    def _finish(self, iid: str) -> None:
        found = self.interactions[iid]
        result = self.script(found["_input"], found["agent"])
        status = result.get("status", "completed")
        assert status in ENDED, f"the test's script gave status {status!r}"
        outputs = result.get("outputs", [])
        for item in outputs:  # the script's own items follow the documented shapes
            assert item.get("type") in OUTPUT_TYPES, f"the test's script gave an output of type {item.get('type')!r}"
        found.update(status=status, updated="2026-11-28T12:10:00Z")
        if self.shape == "steps":  # the input as a user_input step, each run of content as one model_output step
            steps: list[dict[str, Any]] = [{"type": "user_input", "content": [{"type": "text", "text": found["_input"]}]}]
            for item in outputs:
                if item["type"] in CONTENT_TYPES:
                    if steps[-1]["type"] != "model_output":
                        steps.append({"type": "model_output", "content": []})
                    steps[-1]["content"].append(item)
                else:
                    steps.append(item)
            found["steps"] = steps
        else:
            found["outputs"] = outputs
        if "usage" in result:
            found["usage"] = result["usage"]
        if "error" in result:
            found["error"] = result["error"]

    def _view(self, iid: str) -> dict[str, Any]:
        return {k: v for k, v in self.interactions[iid].items() if not k.startswith("_")}


def _input_text(value: Any) -> str | None:
    """The input's text: a string, or text content items (None: not an input the API takes)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, list) and all(isinstance(v, dict) and v.get("type") in OUTPUT_TYPES for v in value):
        return "\n".join(str(v.get("text", "")) for v in value if v.get("type") == "text")
    return None


def _check_config(config: Any) -> Reply | None:
    if not isinstance(config, dict):
        return _type_error("agent_config", "an object", config)
    unknown = sorted(set(config) - CONFIG_FIELDS)
    if unknown:
        return err(400, f'Invalid JSON payload received. Unknown name "{unknown[0]}" at \'agent_config\': Cannot find field.')
    if config.get("type") != "deep-research":
        return err(400, f"Invalid value at 'agent_config.type', {json.dumps(config.get('type'))}: a Deep Research "
                   "agent takes the config type \"deep-research\".")
    for name, allowed in (("thinking_summaries", ("auto", "none")), ("visualization", ("off", "auto"))):
        if name in config and config[name] not in allowed:
            return _type_error(f"agent_config.{name}", " | ".join(allowed), config[name])
    if "collaborative_planning" in config and not isinstance(config["collaborative_planning"], bool):
        return _type_error("agent_config.collaborative_planning", "TYPE_BOOL", config["collaborative_planning"])
    return None
