"""A strict local simulator of the OpenAI APIs `--agent openai-deep-research` uses: Files (upload,
delete), the Responses API in background mode with a deep-research model (create, retrieve) and
the Containers API's files (list, content), over real HTTP on 127.0.0.1 (the openai SDK talks to
it through OPENAI_BASE_URL).

As the other simulators (tests/sim_openai.py, tests/sim_openai_file_search.py): every request is
checked against what the real API documents and refused as it refuses it (status, and the body
{"error": {"message", "type", "param", "code"}}); only the research itself (what the model
searched, wrote and cited, the files its code made) comes from the test's script. Sources:
  RESP   https://platform.openai.com/docs/api-reference/responses/create, .../responses/get (the
         request fields, the response object, statuses queued/in_progress/completed/failed/
         cancelled/incomplete, usage with output_tokens_details.reasoning_tokens)
  BG     https://platform.openai.com/docs/guides/background ("background": true, polled by GET
         until no longer queued or in_progress; background mode needs store=true)
  DR     https://platform.openai.com/docs/guides/deep-research and the cookbook
         examples/deep_research_api/introduction_to_deep_research_api.ipynb (models
         o3-deep-research / o4-mini-deep-research and their -2025-06-26 names; at least one data
         source among web_search_preview, file_search and mcp (require_approval "never"); the
         code_interpreter tool optional; reasoning.summary "auto")
  CI     https://platform.openai.com/docs/guides/tools-code-interpreter (container "auto" with
         file_ids, or a container id; memory_limit 1g|4g|16g|64g; files the model makes are in the
         container, downloaded through the Containers API; a container expires after 20 minutes
         unused)
  CONT   https://platform.openai.com/docs/api-reference/container-files (list: after, limit 1-100,
         order; objects {id, object "container.file", bytes, container_id, created_at, path,
         source}; .../content returns the bytes)
  FILES  https://platform.openai.com/docs/api-reference/files (purpose values; delete)
  ERR    https://platform.openai.com/docs/guides/error-codes (401 for a bad key)
Error texts: "Unknown parameter: 'x'." (400, code unknown_parameter), "Unsupported parameter:
'temperature' is not supported with this model." (as tests/sim_openai.py cites it), "Incorrect API
key provided" (401) and "No such File object: ..." (404) are the API's wording; the deep-research
data-source text, "Response with id '...' not found.", "Container with id '...' not found." and
the model_not_found text are the API's wording as recalled, not found in a page.

    with SimDeepResearch(research=lambda prompt, inputs: Research(text=...)) as sim:
        env OPENAI_BASE_URL=sim.base_url, OPENAI_API_KEY=sim.api_key
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sim_openai_file_search import Call, OpenAIDouble, err, list_page

Reply = tuple[int, Any]

MODELS = ("o3-deep-research", "o3-deep-research-2025-06-26", "o4-mini-deep-research",
          "o4-mini-deep-research-2025-06-26")  # DR
CODE_PURPOSES = ("assistants", "user_data")  # files the code interpreter may be given (CI)
CREATE_FIELDS = frozenset({  # RESP: the request body of POST /v1/responses
    "background", "conversation", "include", "input", "instructions", "max_output_tokens", "max_tool_calls",
    "metadata", "model", "parallel_tool_calls", "previous_response_id", "prompt", "prompt_cache_key",
    "reasoning", "safety_identifier", "service_tier", "store", "stream", "stream_options", "temperature", "text",
    "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user"})
TOOL_FIELDS = {  # RESP: tools[] by type, the fields each takes
    "web_search_preview": {"type", "search_context_size", "user_location"},
    "code_interpreter": {"type", "container"},
    "file_search": {"type", "vector_store_ids", "filters", "max_num_results", "ranking_options"},
    "mcp": {"type", "server_label", "server_url", "require_approval", "allowed_tools", "headers",
            "server_description", "authorization", "connector_id"},
}
DATA_SOURCES = ("web_search_preview", "file_search", "mcp")
INCLUDABLE = ("file_search_call.results", "web_search_call.results", "web_search_call.action.sources",  # RESP: include
              "message.input_image.image_url", "computer_call_output.output.image_url",
              "code_interpreter_call.outputs", "reasoning.encrypted_content", "message.output_text.logprobs")
SUMMARIES = ("auto", "concise", "detailed")
MEMORY = ("1g", "4g", "16g", "64g")


@dataclass
class Research:
    """What the simulated deep-research model did: its reply, its searches, the pages it opened,
    the URLs it cites (url_citation annotations), the code it ran and the files that code made."""

    text: str
    searches: list[tuple[str, list[str]]] = field(default_factory=list)  # (query, source URLs)
    pages: list[str] = field(default_factory=list)  # open_page actions
    cite: list[str] = field(default_factory=list)
    code: str = "print('done')"
    logs: str = "done\n"  # what the code printed (a traceback when it failed)
    files: dict[str, bytes] = field(default_factory=dict)  # made under /mnt/data/ by the code
    status: str = "completed"  # or failed / incomplete
    error: dict[str, Any] | None = None
    incomplete_reason: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 12000, "output_tokens": 3000,
                                                           "reasoning_tokens": 2000})


Script = Callable[[str, dict[str, bytes]], Research]
"""(the input text, the container's input files by name) -> the research."""


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    texts = []
    for item in value:
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        else:
            texts += [p.get("text", "") for p in content or [] if isinstance(p, dict)]
    return "\n".join(texts)


@dataclass
class SimDeepResearch(OpenAIDouble):
    research: Script
    hold: threading.Event | None = None  # while set to an unset event, responses stay in_progress
    queued_polls: int = 1  # GETs a new response answers "queued" before it runs
    created: list[str] = field(default_factory=list)  # response ids, in creation order
    polls: dict[str, int] = field(default_factory=dict)  # response id -> GETs answered
    deleted: list[str] = field(default_factory=list)
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)
    containers: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> {"files": {...}, "expired"}
    _pending: dict[str, tuple[dict[str, Any], str, list[str]]] = field(default_factory=dict)

    def expire_containers(self) -> None:
        """Every container past OpenAI's 20 idle minutes (CI): its files are gone."""
        for c in self.containers.values():
            c["expired"] = True

    # -- dispatch ----------------------------------------------------------------------------------
    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        call = self._call(method, path, headers, raw)
        if not isinstance(call, Call):
            return call
        parts, query, body, form = call.parts, call.query, call.body, call.form
        shape = (method, parts[0], len(parts), parts[-1] if len(parts) > 2 else "")
        if shape == ("POST", "files", 1, ""):
            return self._upload(form)
        if method == "DELETE" and parts[0] == "files" and len(parts) == 2:
            return self._delete_file(parts[1])
        if shape == ("POST", "responses", 1, ""):
            return self._create(body)
        if method == "GET" and parts[0] == "responses" and len(parts) == 2:
            return self._retrieve(parts[1], query, call.multi.get("include[]", []))
        if shape == ("GET", "containers", 3, "files"):
            return self._container_files(parts[1], query)
        if shape == ("GET", "containers", 5, "content") and parts[2] == "files":
            return self._container_content(parts[1], parts[3])
        return err(404, f"Invalid URL ({method} {urlsplit(path).path})")

    # -- files -------------------------------------------------------------------------------------
    def _delete_file(self, fid: str) -> Reply:
        if fid not in self.files:
            return err(404, f"No such File object: {fid}", param="id")
        del self.files[fid]
        self.deleted.append(fid)
        return 200, {"id": fid, "object": "file", "deleted": True}

    # -- responses ---------------------------------------------------------------------------------
    def _create(self, body: dict[str, Any] | None) -> Reply:
        if not isinstance(body, dict):
            return err(400, "Invalid body: expected a JSON object.")
        unknown = sorted(set(body) - CREATE_FIELDS)
        if unknown:
            return err(400, f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
        model = body.get("model")
        if not isinstance(model, str):
            return err(400, "Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
        if model not in MODELS:
            return err(400, f"The requested model '{model}' does not exist.", param="model", code="model_not_found")
        for name in ("temperature", "top_p"):  # reasoning models
            if name in body:
                return err(400, f"Unsupported parameter: '{name}' is not supported with this model.", param=name,
                           code="unsupported_parameter")
        if body.get("stream"):
            return err(400, "This test simulator serves polling only: do not stream.", param="stream")
        if not body.get("background"):
            return err(400, "This test simulator serves deep research in background mode only.", param="background")
        if body.get("store") is False:  # BG
            return err(400, "Background mode requires 'store' to be true.", param="store", code="invalid_value")
        given = body.get("input")
        if not isinstance(given, str | list) or (isinstance(given, list) and not all(
                isinstance(i, dict) and i.get("role") in ("user", "developer", "system") for i in given)):
            return err(400, "Invalid type for 'input': expected one of a string or array of input items, but got "
                       f"{type(given).__name__} instead.", param="input", code="invalid_type")
        reasoning = body.get("reasoning")
        if reasoning is not None:
            if not isinstance(reasoning, dict) or set(reasoning) - {"summary", "effort", "generate_summary"}:
                return err(400, "Invalid 'reasoning': unknown field.", param="reasoning", code="unknown_parameter")
            if reasoning.get("summary") not in (None, *SUMMARIES):
                return err(400, f"Invalid value: '{reasoning.get('summary')}'. Supported values are: 'auto', "
                           "'concise', and 'detailed'.", param="reasoning.summary", code="invalid_value")
            if reasoning.get("effort") not in (None, "medium"):
                return err(400, f"Unsupported value: 'reasoning.effort' does not support '{reasoning.get('effort')}' "
                           "with this model. Supported values are: 'medium'.", param="reasoning.effort",
                           code="unsupported_value")
        include = body.get("include", [])
        if not isinstance(include, list):
            return err(400, "Invalid type for 'include': expected an array of strings.", param="include",
                       code="invalid_type")
        for i, value in enumerate(include):
            if value not in INCLUDABLE:
                return self._bad_include(value, f"include[{i}]")
        tools = body.get("tools")
        if not isinstance(tools, list):
            tools = []
        file_ids: list[str] = []
        for i, tool in enumerate(tools):
            kind = tool.get("type") if isinstance(tool, dict) else None
            if kind not in TOOL_FIELDS:
                return err(400, f"Invalid value: '{kind}'. Supported values are: {', '.join(map(repr, TOOL_FIELDS))}.",
                           param=f"tools[{i}].type", code="invalid_value")
            extra = sorted(set(tool) - TOOL_FIELDS[kind])
            if extra:
                return err(400, f"Unknown parameter: 'tools[{i}].{extra[0]}'.", param=f"tools[{i}].{extra[0]}",
                           code="unknown_parameter")
            if kind == "mcp" and tool.get("require_approval") != "never":
                return err(400, "Deep research models require MCP tools to set require_approval to 'never'.",
                           param=f"tools[{i}].require_approval")
            if kind == "code_interpreter":
                refused = self._container_spec(tool.get("container"), i, file_ids)
                if refused is not None:
                    return refused
        if not any(t.get("type") in DATA_SOURCES for t in tools):  # DR
            return err(400, "Deep research models require at least one of 'web_search_preview', 'mcp', or "
                       "'file_search' tools.", param="tools")
        rid = self._id("resp_")
        self.created.append(rid)
        self.responses[rid] = {
            "id": rid, "object": "response", "created_at": int(time.time()), "status": "queued", "background": True,
            "error": None, "incomplete_details": None, "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"), "max_tool_calls": body.get("max_tool_calls"),
            "model": model, "output": [], "parallel_tool_calls": True, "previous_response_id": None,
            "reasoning": {"effort": "medium", "summary": (reasoning or {}).get("summary")}, "store": True,
            "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": tools,
            "top_p": 1.0, "truncation": "disabled", "usage": None, "user": None, "metadata": {}}
        self._pending[rid] = (body, _input_text(given), file_ids)
        self.polls[rid] = 0
        return 200, self.responses[rid]

    def _container_spec(self, container: Any, i: int, file_ids: list[str]) -> Reply | None:
        where = f"tools[{i}].container"
        if isinstance(container, str):
            if container not in self.containers:
                return err(404, f"Container with id '{container}' not found.", param=where)
            return None
        if not isinstance(container, dict) or container.get("type") != "auto":
            return err(400, f"Invalid value for '{where}': expected a container id or an object with type 'auto'.",
                       param=where, code="invalid_value")
        extra = sorted(set(container) - {"type", "file_ids", "memory_limit", "network_policy"})
        if extra:
            return err(400, f"Unknown parameter: '{where}.{extra[0]}'.", param=f"{where}.{extra[0]}",
                       code="unknown_parameter")
        if container.get("memory_limit") not in (None, *MEMORY):
            return err(400, f"Invalid value: '{container.get('memory_limit')}'.", param=f"{where}.memory_limit",
                       code="invalid_value")
        ids = container.get("file_ids", [])
        if not isinstance(ids, list) or not all(isinstance(f, str) for f in ids):
            return err(400, f"Invalid type for '{where}.file_ids': expected an array of strings.",
                       param=f"{where}.file_ids", code="invalid_type")
        for fid in ids:
            if fid not in self.files:
                return err(404, f"No such File object: {fid}", param=f"{where}.file_ids")
            if self.files[fid]["purpose"] not in CODE_PURPOSES:
                return err(400, f"File {fid} has purpose '{self.files[fid]['purpose']}'; the code interpreter takes "
                           "files with purpose 'assistants' or 'user_data'.", param=f"{where}.file_ids")
        file_ids += ids
        return None

    @staticmethod
    def _bad_include(value: Any, param: str) -> Reply:
        return err(400, f"Invalid value: '{value}'. Supported values are: {', '.join(map(repr, INCLUDABLE))}.",
                   param=param, code="invalid_value")

    def _retrieve(self, rid: str, query: dict[str, str], include: list[str]) -> Reply:
        if rid not in self.responses:
            return err(404, f"Response with id '{rid}' not found.", param="response_id")
        unknown = sorted(set(query) - {"include[]", "include_obfuscation", "starting_after", "stream"})
        if unknown:
            return err(400, f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
        for i, value in enumerate(include):
            if value not in INCLUDABLE:
                return self._bad_include(value, f"include[{i}]")
        resp = self.responses[rid]
        self.polls[rid] += 1
        if resp["status"] == "queued" and self.polls[rid] > self.queued_polls:
            resp["status"] = "in_progress"
        elif resp["status"] == "in_progress" and (self.hold is None or self.hold.is_set()):
            self._complete(rid)
        return 200, self._view(resp, include)

    @staticmethod
    def _view(resp: dict[str, Any], include: list[str]) -> dict[str, Any]:
        """The response as a GET shows it: a search's sources and a code run's outputs only when
        `include` asks for them (RESP: include; otherwise sources are absent and outputs null)."""
        view = copy.deepcopy(resp)
        for item in view["output"]:
            if item["type"] == "web_search_call" and "web_search_call.action.sources" not in include:
                item["action"].pop("sources", None)
            if item["type"] == "code_interpreter_call" and "code_interpreter_call.outputs" not in include:
                item["outputs"] = None
        return view

    def _complete(self, rid: str) -> None:
        """The research done: output items, the container with the model's files, usage."""
        resp = self.responses[rid]
        body, prompt, file_ids = self._pending.pop(rid)
        inputs = {self.files[f]["filename"]: self.blobs[f] for f in file_ids if f in self.files}
        done = self.research(prompt, inputs)
        output: list[dict[str, Any]] = [{"id": self._id("rs_"), "type": "reasoning",
                                         "summary": [{"type": "summary_text", "text": "Planning the analysis."}]}]
        for q, urls in done.searches:
            output.append({"id": self._id("ws_"), "type": "web_search_call", "status": "completed",
                           "action": {"type": "search", "query": q, "sources": [{"type": "url", "url": u} for u in urls]}})
        for u in done.pages:
            output.append({"id": self._id("ws_"), "type": "web_search_call", "status": "completed",
                           "action": {"type": "open_page", "url": u}})
        if any(t.get("type") == "code_interpreter" for t in body.get("tools", [])) and (done.code or done.files):
            cid = self._id("cntr_")
            made = {}
            for name, data in inputs.items():
                made[self._id("cfile_")] = {"path": f"/mnt/data/{name}", "source": "user", "data": data}
            for name, data in done.files.items():
                made[self._id("cfile_")] = {"path": f"/mnt/data/{name}", "source": "assistant", "data": data}
            self.containers[cid] = {"files": made, "expired": False}
            output.append({"id": self._id("ci_"), "type": "code_interpreter_call", "status": "completed",
                           "code": done.code, "container_id": cid,
                           "outputs": [{"type": "logs", "logs": done.logs}]})
        annotations = []
        for u in done.cite:
            at = done.text.find(u)
            start, end = (at, at + len(u)) if at >= 0 else (len(done.text), len(done.text))
            annotations.append({"type": "url_citation", "start_index": start, "end_index": end, "url": u,
                                "title": u.split("/")[2] if "//" in u else u})
        if done.status != "failed":
            output.append({"id": self._id("msg_"), "type": "message", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": done.text, "annotations": annotations,
                                        "logprobs": []}]})
        u = done.usage
        resp.update(status=done.status, output=output, error=done.error,
                    incomplete_details={"reason": done.incomplete_reason} if done.incomplete_reason else None,
                    usage={"input_tokens": u["input_tokens"], "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens": u["output_tokens"],
                           "output_tokens_details": {"reasoning_tokens": u["reasoning_tokens"]},
                           "total_tokens": u["input_tokens"] + u["output_tokens"]})

    # -- containers --------------------------------------------------------------------------------
    def _container(self, cid: str) -> Reply | None:
        c = self.containers.get(cid)
        if c is None or c["expired"]:
            return err(404, f"Container with id '{cid}' not found.", param="container_id")
        return None

    def _container_files(self, cid: str, query: dict[str, str]) -> Reply:
        if refused := self._container(cid):
            return refused
        unknown = sorted(set(query) - {"after", "limit", "order"})
        if unknown:
            return err(400, f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
        limit = int(query.get("limit", 20))
        if not 1 <= limit <= 100:
            return err(400, f"Invalid 'limit': expected a value between 1 and 100, but got {limit} instead.",
                       param="limit", code="invalid_value")
        items = [{"id": fid, "object": "container.file", "bytes": len(f["data"]), "container_id": cid,
                  "created_at": i, "path": f["path"], "source": f["source"]}
                 for i, (fid, f) in enumerate(self.containers[cid]["files"].items())]
        if query.get("order", "desc") == "desc":
            items.reverse()
        return list_page(items, query, limit)

    def _container_content(self, cid: str, fid: str) -> Reply:
        if refused := self._container(cid):
            return refused
        f = self.containers[cid]["files"].get(fid)
        if f is None:
            return err(404, f"Container file with id '{fid}' not found.", param="file_id")
        data: bytes = f["data"]
        return 200, data
