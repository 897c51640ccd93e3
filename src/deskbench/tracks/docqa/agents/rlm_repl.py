"""The RLM agent's REPL server: runs inside the sandbox jail, one process per episode.

Unlike the analytics `execute_code` tool (stateless: a fresh process per call), this REPL keeps
one namespace for the whole episode, because the RLM's variables are its buffers across turns
(Prompt 9: "Use variables as buffers to build your answer"). `context` (the corpus text) is
loaded once at start from the path in argv[1] (default /mnt/data/context.txt).

Standalone on purpose: it imports nothing from deskbench, so the host binds this one file
read-only into the jail and runs it with the jail's Python.

Protocol: JSON lines. The host writes {"exec": code} or {"get_var": name} on stdin. While code
runs, `llm_query(prompt)` / `llm_query_batched(prompts)` write {"llm_query": [prompts...]} and
block until the host answers {"results": [...]} (or {"error": "..."}, raised in the code).
When the code ends: {"done": true, "stdout", "stderr", "error", "stdout_chars"}; get_var
answers {"value": str} or {"error": "..."}. After start-up: {"ready": true, "context_chars": n}.

The protocol travels on duplicates of fds 0 and 1; fds 0 and 1 themselves are pointed at
/dev/null, so neither the user's print() (captured into a buffer per execution) nor a
subprocess writing to fd 1 can corrupt the stream, and input() cannot eat host messages.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
import sys
import threading
import traceback
from typing import Any

OUTPUT_CAP = 100_000  # characters of stdout / stderr kept per execution; the host shows less
DEFAULT_CONTEXT = "/mnt/data/context.txt"


class CappedBuffer(io.TextIOBase):
    """A text sink that keeps the first `cap` characters and counts the rest (a runaway print
    loop must not exhaust the jail's memory)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.kept = 0
        self.total = 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.total += len(s)
        room = self.cap - self.kept
        if room > 0:
            piece = s[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        return len(s)

    def value(self) -> str:
        text = "".join(self.parts)
        if self.total > self.kept:
            text += f"\n... [{self.total - self.kept} more characters not kept]"
        return text


class QueryError(RuntimeError):
    """An llm_query the host could not answer (budget spent, model failure)."""


class Repl:
    def __init__(self, proto_in: io.TextIOBase, proto_out: io.TextIOBase, context: str) -> None:
        self.proto_in = proto_in
        self.proto_out = proto_out
        self.lock = threading.Lock()  # code that queries from threads must not interleave lines
        self.namespace: dict[str, Any] = {
            "__name__": "__main__",
            "__builtins__": builtins,
            "context": context,
            "llm_query": self.llm_query,
            "llm_query_batched": self.llm_query_batched,
            "FINAL": _final_in_code,
            "FINAL_VAR": _final_in_code,
        }

    # -- host link ---------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        self.proto_out.write(json.dumps(message) + "\n")
        self.proto_out.flush()

    def receive(self) -> dict[str, Any]:
        line = self.proto_in.readline()
        if not line:  # the host is gone: nothing left to serve
            os._exit(0)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError(f"protocol: expected a JSON object, got {line[:80]!r}")
        return message

    def ask(self, prompts: list[str]) -> list[str]:
        with self.lock:
            self.send({"llm_query": prompts})
            reply = self.receive()
        if "error" in reply:
            raise QueryError(str(reply["error"]))
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(prompts):
            raise QueryError("the host sent no answer for this query")
        return [str(r) for r in results]

    # -- what the model's code calls -----------------------------------------------------------

    def llm_query(self, prompt: str) -> str:
        """Ask the sub-LLM one prompt; returns its reply text."""
        return self.ask([_as_prompt(prompt)])[0]

    def llm_query_batched(self, prompts: list[str]) -> list[str]:
        """Ask the sub-LLM several prompts concurrently; replies in the same order."""
        if isinstance(prompts, str | bytes) or not hasattr(prompts, "__iter__"):
            raise TypeError("llm_query_batched takes a list of prompts")
        batch = [_as_prompt(p) for p in prompts]
        return self.ask(batch) if batch else []

    # -- requests --------------------------------------------------------------------------------

    def execute(self, code: str) -> dict[str, Any]:
        """Run code in the persistent namespace; a final bare expression is echoed like the
        interactive interpreter does, so `context[:500]` shows something."""
        out, err = CappedBuffer(OUTPUT_CAP), CappedBuffer(OUTPUT_CAP)
        saved = sys.stdout, sys.stderr, sys.stdin
        sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO("")
        failed = False
        try:
            tree = ast.parse(code, "<repl>", "exec")
            last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            if last is not None:
                tree.body.pop()
            exec(compile(tree, "<repl>", "exec"), self.namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), "<repl>", "eval"), self.namespace)
                if value is not None:
                    print(repr(value))
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too: report, keep serving
            failed = True
            tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # not our frame
            traceback.print_exception(type(exc), exc, tb, file=err)
        finally:
            sys.stdout, sys.stderr, sys.stdin = saved
        return {"done": True, "stdout": out.value(), "stderr": err.value(), "error": failed,
                "stdout_chars": out.total}

    def get_var(self, name: object) -> dict[str, Any]:
        if not isinstance(name, str) or not name.isidentifier():
            return {"error": f"{name!r} is not a variable name"}
        if name not in self.namespace:
            return {"error": f"there is no variable named {name!r} in the REPL"}
        value = self.namespace[name]
        try:
            return {"value": value if isinstance(value, str) else str(value)}
        except Exception as exc:  # noqa: BLE001 - a broken __str__ is the model's to see
            return {"error": f"str({name}) failed: {type(exc).__name__}: {exc}"}

    def serve(self) -> None:
        self.send({"ready": True, "context_chars": len(self.namespace["context"])})
        while True:
            request = self.receive()
            if "exec" in request:
                self.send(self.execute(str(request["exec"])))
            elif "get_var" in request:
                self.send(self.get_var(request["get_var"]))
            else:
                self.send({"error": f"unknown request {sorted(request)}"})


def _as_prompt(prompt: object) -> str:
    return prompt if isinstance(prompt, str) else str(prompt)


def _final_in_code(*args: object) -> None:
    raise NameError("FINAL and FINAL_VAR are not REPL functions: write FINAL(answer) or "
                    "FINAL_VAR(variable_name) in your reply, outside any code block")


def main(argv: list[str]) -> None:
    path = argv[1] if len(argv) > 1 else DEFAULT_CONTEXT
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    with open(path, encoding="utf-8") as f:
        context = f.read()
    Repl(proto_in, proto_out, context).serve()


if __name__ == "__main__":
    main(sys.argv)
