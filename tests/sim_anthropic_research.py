"""A strict local simulator of the Anthropic APIs `claude-research` uses: the Messages API with
the server-side code execution and web search tools, containers, and the Files API (upload,
metadata, download, delete), over real HTTP on 127.0.0.1 (ANTHROPIC_BASE_URL points at it).

Every request is checked before the script is asked: the header, body, model, max_tokens and
tool_use/tool_result rules are tests/sim_anthropic.py's, each with its source and error text;
the rules added here are the ones for what the research agent sends (server tools, container
uploads, containers, server-tool blocks sent back, files). Sources:
  CODE    https://platform.claude.com/docs/en/agents-and-tools/tool-use/code-execution-tool
          (tool type code_execution_20250825, name "code_execution"; files uploaded with a
          container_upload block land in the container; created files come back as
          bash_code_execution_output blocks with a file_id; `container` reuses a container)
  SEARCH  https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-search-tool
          (web_search_20250305, name "web_search"; max_uses, allowed_domains XOR blocked_domains,
          user_location; web_search_tool_result; web_search_result_location citations;
          usage.server_tool_use.web_search_requests)
  FILES   https://platform.claude.com/docs/en/build-with-claude/files (POST /v1/files multipart
          `file`; GET /v1/files/{id}, .../content, DELETE; only files the code execution tool
          created are downloadable)
  PAUSE   https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons (pause_turn:
          send the reply's content back as the assistant turn to continue)
The field names are the anthropic SDK's (2.14.0) generated types. Texts of refusals added here
were not found in a page ("text not found"): each uses the API's form for its kind of error and
tests should not pin them.

The script answers by the conversation's position (how many of the simulator's replies the
request's assistant turns hold), so a request sent again after a crash gets the same turn:

    turns = [[{"bash": "python make.py", "reads": ["in.csv"], "writes": {"out.xlsx": b"..."}},
              {"stop": "pause_turn"}],
             [{"search": "query", "results": [{"url": "https://x.com/a", "title": "A"}]},
              {"text": "The answer.", "cite": ["https://x.com/a"]}]]
    with SimResearch(turns) as sim:
        env ANTHROPIC_BASE_URL=sim.base_url, ANTHROPIC_API_KEY=sim.api_key

A turn whose first action is {"status": 529} is answered with that error (retry-after 0) each
time it is asked; `fail_downloads=n` answers the first n downloads 500.
`hold_turn=n` makes the request for turn n wait (after it is accepted and counted) until
`release` is set; `held` is set when it arrives: a test kills the client there.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import sim_anthropic as base
from http_double import MethodDouble, Response, multipart

Refusal = tuple[int, dict[str, Any]]
Action = dict[str, Any]

MAX_FILE_BYTES = 500 * 1024 * 1024  # FILES: "Maximum file size: 500 MB"
SERVER_TOOLS: dict[str, tuple[str, set[str]]] = {  # type -> (its fixed name, its fields)
    "code_execution_20250825": ("code_execution", {"type", "name", "cache_control", "allowed_callers",
                                                   "defer_loading", "strict"}),
    "web_search_20250305": ("web_search", {"type", "name", "max_uses", "allowed_domains", "blocked_domains",
                                           "user_location", "cache_control", "allowed_callers", "defer_loading",
                                           "strict"}),
}
CUSTOM_TOOL_FIELDS = base.TOOL_FIELDS
USER_BLOCKS = {"text": base.BLOCK_FIELDS["text"], "image": base.BLOCK_FIELDS["image"],
               "document": base.BLOCK_FIELDS["document"], "tool_result": base.BLOCK_FIELDS["tool_result"],
               "container_upload": {"type", "file_id", "cache_control"}}
ASSISTANT_BLOCKS = {"text": base.BLOCK_FIELDS["text"], "tool_use": base.BLOCK_FIELDS["tool_use"],
                    "thinking": base.BLOCK_FIELDS["thinking"], "redacted_thinking": base.BLOCK_FIELDS["redacted_thinking"],
                    "server_tool_use": {"type", "id", "name", "input", "cache_control", "caller"},
                    "web_search_tool_result": {"type", "tool_use_id", "content", "cache_control", "caller"},
                    "bash_code_execution_tool_result": {"type", "tool_use_id", "content", "cache_control"},
                    "text_editor_code_execution_tool_result": {"type", "tool_use_id", "content", "cache_control"}}
SERVER_BLOCKS = {"server_tool_use", "web_search_tool_result", "bash_code_execution_tool_result",
                 "text_editor_code_execution_tool_result"}
KNOWN_BETAS = {"files-api-2025-04-14", "code-execution-2025-08-25", "code-execution-2025-05-22",
               "web-fetch-2025-09-10", "context-management-2025-06-27"}


@dataclass
class SimFile:
    id: str
    filename: str
    data: bytes
    downloadable: bool
    created_at: str = "2026-11-28T12:00:00Z"

    def meta(self) -> dict[str, Any]:
        return {"id": self.id, "type": "file", "filename": self.filename, "mime_type": _mime(self.filename),
                "size_bytes": len(self.data), "created_at": self.created_at, "downloadable": self.downloadable}


def _mime(name: str) -> str:
    ext = name.rsplit(".", 1)[-1].lower()
    return {"csv": "text/csv", "json": "application/json", "md": "text/markdown", "txt": "text/plain",
            "pdf": "application/pdf",
            "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation"}.get(
                ext, "application/octet-stream")


class ScriptError(Exception):
    """The test's script asks for something the request makes impossible (a tool it lacks)."""


@dataclass
class SimResearch(MethodDouble):
    turns: list[list[Action]]
    api_key: str = "sk-ant-sim-research"
    models: frozenset[str] = base.DEFAULT_MODELS
    hold_turn: int | None = None
    fail_downloads: int = 0  # this many file downloads answered 500 first
    strict_alternation: bool = True  # read by sim_anthropic's rules
    files: dict[str, SimFile] = field(default_factory=dict)
    containers: dict[str, dict[str, bytes]] = field(default_factory=dict)  # id -> file name -> bytes
    counts: Counter[str] = field(default_factory=Counter)
    requests: list[dict[str, Any]] = field(default_factory=list)  # accepted /v1/messages bodies
    refusals: list[tuple[int, str]] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _issued: dict[str, dict[str, Any]] = field(default_factory=dict)  # server block id+type -> block as sent
    _searched: dict[str, str] = field(default_factory=dict)  # url -> title, of every search result given
    _reply_of: dict[str, int] = field(default_factory=dict)  # a block sent (as JSON) -> the turn it answered

    @property
    def base_url(self) -> str:
        return self._url

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        super().__exit__(*exc)

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):04d}{secrets.token_hex(6)}"

    # --- HTTP ----------------------------------------------------------------------------------
    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Response:
        """As the API answers: lower-case headers, a request_id in each error, retry-after on the
        retryable ones; not under the lock (a held turn waits inside _route)."""
        try:
            status, payload = self._route(method, path.split("?")[0], headers, raw)
        except ScriptError as exc:
            status, payload = 500, base.error_body(500, f"simulator script: {exc}")
        if isinstance(payload, bytes):
            return status, [("content-type", "application/octet-stream")], payload
        extra: list[tuple[str, str]] = []
        if payload.get("type") == "error":
            self.refusals.append((status, payload["error"]["message"]))
            payload = {**payload, "request_id": self._id("req_")}
            if status in (429, 500, 529):  # ERRORS_PAGE / RATE_LIMITS: retry-after on 429; 0 keeps tests fast
                extra = [("retry-after", "0")]
        return status, [("content-type", "application/json"), *extra], json.dumps(payload).encode()

    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, Any]:
        refused = self._headers(headers)
        if refused:
            return refused
        if path == "/v1/messages" and method == "POST":
            return self._messages(headers, raw)
        if path == "/v1/files" and method == "POST":
            return self._upload(headers, raw)
        parts = path.strip("/").split("/")
        if len(parts) >= 3 and parts[:2] == ["v1", "files"]:
            f = self.files.get(parts[2])
            if f is None:  # FILES: 404 not_found_error; text not found
                return 404, base.error_body(404, f"File not found: {parts[2]}")
            if len(parts) == 3 and method == "GET":
                return 200, f.meta()
            if len(parts) == 3 and method == "DELETE":
                del self.files[f.id]
                self.counts["files_deleted"] += 1
                return 200, {"id": f.id, "type": "file_deleted"}
            if len(parts) == 4 and parts[3] == "content" and method == "GET":
                if not f.downloadable:  # FILES: only files created by code execution (or skills); text not found
                    return 400, base.error_body(400, f"File {f.id} is not downloadable: only files created "
                                                "by the code execution tool can be downloaded")
                if self.fail_downloads > 0:
                    self.fail_downloads -= 1
                    return 500, base.error_body(500, "Internal server error")
                self.counts["files_downloaded"] += 1
                return 200, f.data
        return 404, base.error_body(404, f"Not found: {method} {path}")

    def _headers(self, headers: dict[str, str]) -> Refusal | None:
        ctx = base.Ctx(body={}, headers=headers, sim=self)
        for check in (base.api_key_present, base.api_key_valid, base.version_present, base.version_known):
            refused = check(ctx)
            if refused:
                return refused
        betas = [b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()]
        unknown = [b for b in betas if b not in KNOWN_BETAS]
        if unknown:  # text: real body quoted in several public issues (e.g. BerriAI/litellm)
            return base.bad(f"Unexpected value(s) `{', '.join(unknown)}` for the `anthropic-beta` header. Please "
                            "consult our documentation at docs.anthropic.com or try again without the header.")
        return None

    # --- Files API -------------------------------------------------------------------------------
    def _upload(self, headers: dict[str, str], raw: bytes) -> Refusal:
        fields = multipart(headers, raw)
        if fields is None or "file" not in fields:  # text not found (pydantic form)
            return base.bad("file: Field required")
        extra = sorted(set(fields) - {"file", "expires_in_seconds"})
        if extra:
            return base.bad(f"{extra[0]}: Extra inputs are not permitted")
        filename, data = fields["file"]
        if len(data) > MAX_FILE_BYTES:
            return 413, base.error_body(413, "File too large: the maximum is 500 MB")
        f = SimFile(self._id("file_"), (filename or "unnamed").split("/")[-1], data, downloadable=False)
        with self._lock:
            self.files[f.id] = f
            self.counts["files_uploaded"] += 1
        return 200, f.meta()

    # --- Messages API ----------------------------------------------------------------------------
    def _messages(self, headers: dict[str, str], raw: bytes) -> Refusal:
        try:
            body = json.loads(raw)
        except ValueError:
            return base.bad("The request body is not valid JSON.")
        ctx = base.Ctx(body=body, headers=headers, sim=self)
        for check in (base.body_is_object, base.required_fields, base.extra_fields, base.model_served,
                      base.max_tokens_integer, base.max_tokens_not_negative, base.max_tokens_model_limit):
            refused = check(ctx)
            if refused:
                return refused
        refused = self._tools(body) or self._message_blocks(body)
        if refused:
            return refused
        for check in (base.tool_use_answered, base.tool_results_first, base.tool_result_has_tool_use):
            refused = check(ctx)
            if refused:
                return refused
        refused = self._container_rules(body)
        if refused:
            return refused
        with self._lock:
            container = body.get("container")
            if container is None and _has_code_tool(body):
                container = self._id("container_")
                self.containers[container] = {}
                self.counts["containers_created"] += 1
            if container is not None:
                for m in body["messages"]:
                    for b in _blocks(m):
                        if b.get("type") == "container_upload":
                            f = self.files[b["file_id"]]
                            self.containers[container][f.filename] = f.data
            turn = len({self._reply_of[k] for m in body["messages"] if m["role"] == "assistant"
                        for b in _blocks(m) if (k := _key(b)) in self._reply_of})
            self.counts["messages"] += 1
            self.requests.append(body)
        if self.hold_turn is not None and turn == self.hold_turn and not self.release.is_set():
            self.held.set()
            self.release.wait(60)
        if turn >= len(self.turns):
            raise ScriptError(f"no turn {turn} in the script ({len(self.turns)} turns)")
        if self.turns[turn] and "status" in self.turns[turn][0]:  # the API failing this turn (overloaded, ...)
            code = self.turns[turn][0]["status"]
            return code, base.error_body(code, self.turns[turn][0].get("message", "Overloaded"))
        reply = self._reply(body, container, self.turns[turn])
        for b in reply["content"]:
            self._reply_of.setdefault(_key(b), turn)
        return 200, reply

    def _tools(self, body: dict[str, Any]) -> Refusal | None:
        tools = body.get("tools", [])
        if not isinstance(tools, list):
            return base.bad("tools: Input should be a valid list")
        for i, t in enumerate(tools):
            if not isinstance(t, dict):
                return base.bad(f"tools.{i}: Input should be a valid dictionary")
            kind = t.get("type")
            if kind in SERVER_TOOLS:
                name, allowed = SERVER_TOOLS[kind]
                extra = sorted(set(t) - allowed)
                if extra:
                    return base.bad(f"tools.{i}.{kind}.{extra[0]}: Extra inputs are not permitted")
                if t.get("name") != name:  # the SDK's Literal name; text not found (pydantic form)
                    return base.bad(f"tools.{i}.{kind}.name: Input should be '{name}'")
                if t.get("allowed_domains") and t.get("blocked_domains"):  # SEARCH: "cannot be used alongside"
                    return base.bad(f"tools.{i}.{kind}: allowed_domains and blocked_domains cannot both be given")
                mu = t.get("max_uses")
                if mu is not None and (not isinstance(mu, int) or isinstance(mu, bool) or mu < 1):
                    return base.bad(f"tools.{i}.{kind}.max_uses: Input should be greater than 0")
            elif kind in (None, "custom"):
                extra = sorted(set(t) - CUSTOM_TOOL_FIELDS)
                if extra:
                    return base.bad(f"tools.{i}.custom.{extra[0]}: Extra inputs are not permitted")
                if not isinstance(t.get("name"), str) or not isinstance(t.get("input_schema"), dict):
                    return base.bad(f"tools.{i}.custom.input_schema: Field required")
            else:  # the API's discriminated-union refusal (pydantic form; text not found)
                return base.bad(f"tools.{i}: Input tag '{kind}' found using 'type' does not match any of the expected "
                                f"tags: {', '.join(sorted(SERVER_TOOLS))}, 'custom'")
        names = [t.get("name") for t in tools]
        if len(set(names)) != len(names):
            return base.bad("tools: Tool names must be unique.")
        return None

    def _message_blocks(self, body: dict[str, Any]) -> Refusal | None:
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            return base.bad("messages: Input should be a valid list with at least 1 item")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or set(m) - {"role", "content"} or m.get("role") not in ("user", "assistant"):
                return base.bad(f"messages.{i}: each message is {{\"role\": \"user\"|\"assistant\", \"content\": ...}}")
            if i == 0 and m["role"] != "user":
                return base.bad("messages: first message must use the \"user\" role")
            if i and m["role"] == messages[i - 1]["role"]:
                return base.bad("messages: roles must alternate between \"user\" and \"assistant\", but found "
                                f"multiple \"{m['role']}\" roles in a row")
            allowed = USER_BLOCKS if m["role"] == "user" else ASSISTANT_BLOCKS
            for j, b in enumerate(_blocks(m)):
                kind = b.get("type") if isinstance(b, dict) else None
                if kind not in allowed:
                    return base.bad(f"messages.{i}.content.{j}: Input tag '{kind}' found using 'type' does not match "
                                    f"any of the expected tags for a {m['role']} message")
                extra = sorted(set(b) - allowed[kind])
                if extra:
                    return base.bad(f"messages.{i}.content.{j}.{kind}.{extra[0]}: Extra inputs are not permitted")
                if kind == "container_upload" and b.get("file_id") not in self.files:  # text not found
                    return 404, base.error_body(404, f"File not found: {b.get('file_id')}")
                if kind in SERVER_BLOCKS or (kind == "text" and b.get("citations")):
                    key = f"{kind}:{b.get('id') or b.get('tool_use_id') or b.get('text')}"
                    if self._issued.get(key) != b:  # text not found: what was received must be sent back
                        return base.bad(f"messages.{i}.content.{j}: a {kind} block must be sent back as the API "
                                        "returned it")
        return None

    def _container_rules(self, body: dict[str, Any]) -> Refusal | None:
        uploads = [b for m in body["messages"] for b in _blocks(m) if b.get("type") == "container_upload"]
        if uploads and not _has_code_tool(body):  # CODE: files reach a container only with the tool; text not found
            return base.bad("container_upload blocks require the code execution tool")
        container = body.get("container")
        if container is not None:
            if not isinstance(container, str):  # the id form is the one sent here; text not found
                return base.bad("container: Input should be a valid string")
            if container not in self.containers:  # text not found
                return 404, base.error_body(404, f"Container not found: {container}")
        return None

    # --- replies ---------------------------------------------------------------------------------
    def _reply(self, body: dict[str, Any], container: str | None, actions: list[Action]) -> dict[str, Any]:
        tools = {t.get("name"): t for t in body.get("tools", [])}
        content: list[dict[str, Any]] = []
        stop = "end_turn"
        searches = 0
        for a in actions:
            if "bash" in a:
                if "code_execution" not in tools or container is None:
                    raise ScriptError("the script runs bash but the request has no code_execution tool")
                content += self._bash(container, a)
            elif "search" in a:
                tool = tools.get("web_search")
                if tool is None or tool.get("type") != "web_search_20250305":
                    raise ScriptError("the script searches but the request has no web_search server tool")
                searches += 1
                content += self._search(a, tool.get("blocked_domains") or [])
            elif "text" in a:
                block: dict[str, Any] = {"type": "text", "text": a["text"]}
                if a.get("cite"):
                    cites = []
                    for url in a["cite"]:
                        if url not in self._searched:
                            raise ScriptError(f"the script cites {url}, which no search returned")
                        cites.append({"type": "web_search_result_location", "url": url, "title": self._searched[url],
                                      "encrypted_index": secrets.token_urlsafe(12), "cited_text": a["text"][:150]})
                    block["citations"] = cites
                    self._issued[f"text:{a['text']}"] = block
                else:
                    block["citations"] = None
                content.append(block)
            elif "tool_use" in a:
                if a["tool_use"] not in tools or tools[a["tool_use"]].get("type") not in (None, "custom"):
                    raise ScriptError(f"the script calls client tool {a['tool_use']!r}, which the request lacks")
                content.append({"type": "tool_use", "id": self._id("toolu_"), "name": a["tool_use"],
                                "input": a.get("input", {})})
                stop = "tool_use"
            elif "stop" in a:
                stop = a["stop"]
        reply: dict[str, Any] = {
            "id": self._id("msg_"), "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 1000 + 10 * len(json.dumps(body["messages"])) // 40, "output_tokens": 200,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                      "server_tool_use": {"web_search_requests": searches, "web_fetch_requests": 0}}}
        if container is not None:
            reply["container"] = {"id": container, "expires_at": "2026-11-28T13:00:00Z"}
        return reply

    def _issue(self, block: dict[str, Any]) -> dict[str, Any]:
        self._issued[f"{block['type']}:{block.get('id') or block.get('tool_use_id')}"] = block
        return block

    def _bash(self, container: str, a: Action) -> list[dict[str, Any]]:
        call = self._issue({"type": "server_tool_use", "id": self._id("srvtoolu_"), "name": "bash_code_execution",
                            "input": {"command": a["bash"]}})
        files = self.containers[container]
        missing = [n for n in a.get("reads", []) if n not in files]
        if missing:
            result: dict[str, Any] = {"type": "bash_code_execution_result", "stdout": "", "return_code": 1,
                                      "stderr": f"FileNotFoundError: No such file or directory: '{missing[0]}'",
                                      "content": []}
        else:
            outputs = []
            for name, data in a.get("writes", {}).items():
                files[name] = data
                f = SimFile(self._id("file_"), name, data, downloadable=True)
                self.files[f.id] = f
                outputs.append({"type": "bash_code_execution_output", "file_id": f.id})
            result = {"type": "bash_code_execution_result", "stdout": a.get("stdout", ""), "stderr": "",
                      "return_code": 0, "content": outputs}
        done = self._issue({"type": "bash_code_execution_tool_result", "tool_use_id": call["id"], "content": result})
        return [call, done]

    def _search(self, a: Action, blocked: list[str]) -> list[dict[str, Any]]:
        call = self._issue({"type": "server_tool_use", "id": self._id("srvtoolu_"), "name": "web_search",
                            "input": {"query": a["search"]}})
        hits = []
        for r in a.get("results", []):
            if any(_under(r["url"], d) for d in blocked):  # SEARCH: "never appear in results"
                continue
            self._searched[r["url"]] = r.get("title", r["url"])
            hits.append({"type": "web_search_result", "url": r["url"], "title": r.get("title", r["url"]),
                         "encrypted_content": secrets.token_urlsafe(24), "page_age": r.get("page_age")})
        done = self._issue({"type": "web_search_tool_result", "tool_use_id": call["id"], "content": hits})
        return [call, done]


def _under(url: str, domain: str) -> bool:
    """SEARCH, domain filtering: no scheme; subdomains included; a subpath matches what lies under it."""
    host, _, path = domain.casefold().partition("/")
    parts = urlsplit(url)
    at = (parts.hostname or "").casefold()
    if at != host and not at.endswith(f".{host}"):
        return False
    return not path or (parts.path.casefold().rstrip("/") + "/").startswith(f"/{path.rstrip('/')}/")


def _blocks(m: dict[str, Any]) -> list[dict[str, Any]]:
    content = m.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _key(block: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in block.items() if v is not None}, sort_keys=True)


def _has_code_tool(body: dict[str, Any]) -> bool:
    return any(isinstance(t, dict) and t.get("type") == "code_execution_20250825" for t in body.get("tools", []))
