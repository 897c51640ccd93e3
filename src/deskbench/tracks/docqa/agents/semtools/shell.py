"""The semtools-agent's tool server: runs inside the sandbox jail, one process per episode.

It carries out the four tools the paper's agent is allowed (G.4: Bash, Read, Glob, Grep; the
Claude Agent SDK's names, inputs and output shapes, with deskbench's own wording):

- Bash {command, timeout?, description?}: `bash -c` in a shell whose working directory and
  exported variables persist from one call to the next (so `export SEMTOOLS_WORKSPACE=...`
  holds, as in Prompt 8's CLAUDE.md); timeout in ms, default 120000, at most 600000; stdout then
  stderr, cut at 30000 characters; a non-zero exit is an error result naming the code.
- Read {file_path, offset?, limit?}: an absolute path, `cat -n` numbering (6 wide, a tab),
  2000 lines from `offset` (1-based) by default, lines over 2000 characters cut.
- Glob {pattern, path?}: files matching the pattern (** recursive) under path (default: the
  working directory), newest first, at most 100.
- Grep {pattern, path?, glob?, type?, output_mode?, -i, -n, -A, -B, -C, head_limit?, multiline?}:
  a regular expression (Python's `re`, close to ripgrep's syntax) over text files; output modes
  files_with_matches (default), content (path:line:text, context lines path-line-text), count.

Standalone on purpose (it imports nothing from deskbench): the host binds this file read-only
into the jail and runs it with the venv's Python. Protocol: JSON lines on duplicates of fds 0
and 1 (fds 0 and 1 themselves are /dev/null). argv[1] is a JSON object {"cwd", "env", "path_first", "files"}:
the start directory, variables added to the environment, a directory put first on PATH, files
written at start (CLAUDE.md). After start-up {"ready": true}; then {"tool", "input"} -> {"output", "is_error"}.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BASH_DEFAULT_MS = 120_000
BASH_MAX_MS = 600_000
OUTPUT_CHARS = 30_000
READ_LINES = 2000
LINE_CHARS = 2000
GLOB_LIMIT = 100
TYPES = {"md": (".md", ".markdown"), "txt": (".txt",), "py": (".py",), "json": (".json",), "csv": (".csv",),
         "js": (".js",), "ts": (".ts",), "rust": (".rs",), "yaml": (".yaml", ".yml"), "html": (".html", ".htm")}


class ToolError(Exception):
    """An error result the model reads (the tool ran, the input or the file was wrong)."""


def cut(text: str, limit: int = OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [{len(text) - limit} characters truncated]"


class Shell:
    def __init__(self, cwd: str, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.env = env
        self.state = tempfile.mkdtemp(prefix="shell-state-")

    # -- Bash -------------------------------------------------------------------------------

    def bash(self, command: object, timeout: object = None) -> tuple[str, bool]:
        if not isinstance(command, str) or not command.strip():
            raise ToolError("Bash needs a non-empty `command` string")
        ms = BASH_DEFAULT_MS if timeout is None else timeout
        if not isinstance(ms, int | float) or isinstance(ms, bool) or ms <= 0:
            raise ToolError("`timeout` is a number of milliseconds")
        ms = min(float(ms), BASH_MAX_MS)
        cwd_file, env_file = os.path.join(self.state, "cwd"), os.path.join(self.state, "env")
        trailer = f"trap 'pwd > {cwd_file}; env -0 > {env_file}' EXIT\n"
        for f in (cwd_file, env_file):
            if os.path.exists(f):
                os.unlink(f)
        proc = subprocess.Popen(["bash", "-c", trailer + command], cwd=self.cwd, env=self.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=ms / 1000)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            text = self._text(out, err)
            return cut(f"{text}\nCommand timed out after {ms / 1000:g} s" if text else
                       f"Command timed out after {ms / 1000:g} s"), True
        self._keep_state(cwd_file, env_file)
        text = self._text(out, err)
        if proc.returncode != 0:
            return cut(f"{text}\nExit code {proc.returncode}" if text else f"Exit code {proc.returncode}"), True
        return cut(text) if text else "(no output)", False

    @staticmethod
    def _text(out: bytes, err: bytes) -> str:
        parts = [b.decode("utf-8", errors="replace").rstrip("\n") for b in (out, err) if b.strip()]
        return "\n".join(parts)

    def _keep_state(self, cwd_file: str, env_file: str) -> None:
        try:
            cwd = Path(cwd_file).read_text().strip()
            if cwd and os.path.isdir(cwd):
                self.cwd = cwd
            raw = Path(env_file).read_bytes()
        except OSError:
            return
        env = dict(item.split("=", 1) for item in raw.decode("utf-8", errors="replace").split("\0") if "=" in item)
        for name in ("SHLVL", "_", "PWD", "OLDPWD"):
            env.pop(name, None)
        if env.get("PATH"):
            self.env = env

    # -- Read -------------------------------------------------------------------------------

    def read(self, file_path: object, offset: object = None, limit: object = None) -> str:
        if not isinstance(file_path, str) or not file_path:
            raise ToolError("Read needs a `file_path` string")
        if not os.path.isabs(file_path):
            raise ToolError(f"file_path must be an absolute path, not {file_path!r}")
        path = Path(file_path)
        if path.is_dir():
            raise ToolError(f"{file_path} is a directory; use Bash (ls) or Glob to list it")
        if not path.is_file():
            raise ToolError(f"File does not exist: {file_path}")
        start = 1 if offset is None else offset
        count = READ_LINES if limit is None else limit
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (start, count)):
            raise ToolError("`offset` and `limit` are line counts (whole numbers)")
        assert isinstance(start, int) and isinstance(count, int)
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            raise ToolError(f"{file_path} is a binary file; this Read shows text only (for a PDF, run parse in Bash)")
        lines = data.decode("utf-8", errors="replace").splitlines()
        if not lines:
            return "(the file exists but is empty)"
        first = max(start, 1)
        shown = lines[first - 1: first - 1 + count]
        if not shown:
            raise ToolError(f"offset {start} is past the end of the file ({len(lines)} lines)")
        return "\n".join(f"{n:>6}\t{line[:LINE_CHARS]}" for n, line in enumerate(shown, start=first))

    # -- Glob -------------------------------------------------------------------------------

    def glob(self, pattern: object, path: object = None) -> str:
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("Glob needs a `pattern` string")
        base = Path(self._base(path))
        if os.path.isabs(pattern):
            base, pattern = Path("/"), pattern.lstrip("/")
        found = [p for p in base.glob(pattern) if p.is_file()]
        if not found:
            return "No files found"
        found.sort(key=lambda p: (-p.stat().st_mtime, str(p)))
        lines = [str(p) for p in found[:GLOB_LIMIT]]
        if len(found) > GLOB_LIMIT:
            lines.append("(Results are truncated. Consider using a more specific path or pattern.)")
        return "\n".join(lines)

    def _base(self, path: object) -> str:
        if path is None or path == "":
            return self.cwd
        if not isinstance(path, str):
            raise ToolError("`path` is a string")
        full = path if os.path.isabs(path) else os.path.join(self.cwd, path)
        if not os.path.exists(full):
            raise ToolError(f"Path does not exist: {path}")
        return full

    # -- Grep -------------------------------------------------------------------------------

    def grep(self, args: dict[str, Any]) -> str:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("Grep needs a `pattern` string")
        flags = re.IGNORECASE if args.get("-i") else 0
        if args.get("multiline"):
            flags |= re.DOTALL | re.MULTILINE
        try:
            regex = re.compile(pattern, flags)
        except re.error as exc:
            raise ToolError(f"invalid regular expression: {exc}") from exc
        mode = args.get("output_mode") or "files_with_matches"
        if mode not in ("content", "files_with_matches", "count"):
            raise ToolError("output_mode is one of content, files_with_matches, count")
        files = self._grep_files(self._base(args.get("path")), args.get("glob"), args.get("type"))
        before = after = int(args.get("-C") or args.get("context") or 0)
        before = int(args.get("-B") or before)
        after = int(args.get("-A") or after)
        numbers = args.get("-n", True) is not False
        entries: list[str] = []
        matched: list[str] = []
        for f in files:
            try:
                data = f.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            text = data.decode("utf-8", errors="replace")
            if args.get("multiline"):
                hits = {text.count("\n", 0, m.start()) for m in regex.finditer(text)}
            else:
                hits = {i for i, line in enumerate(text.splitlines()) if regex.search(line)}
            if not hits:
                continue
            matched.append(str(f))
            if mode == "count":
                entries.append(f"{f}:{len(hits)}")
            elif mode == "content":
                lines = text.splitlines()
                keep = sorted({j for i in hits for j in range(max(0, i - before), min(len(lines), i + after + 1))})
                for j in keep:
                    sep = ":" if j in hits else "-"
                    entries.append(f"{f}{sep}{j + 1}{sep}{lines[j]}" if numbers else f"{f}{sep}{lines[j]}")
        head = args.get("head_limit")
        if mode == "files_with_matches":
            if not matched:
                return "No files found"
            shown = matched[: int(head)] if head else matched
            return cut(f"Found {len(matched)} file{'s' if len(matched) != 1 else ''}\n" + "\n".join(shown))
        if not entries:
            return "No matches found"
        return cut("\n".join(entries[: int(head)] if head else entries))

    def _grep_files(self, base: str, glob: object, kind: object) -> list[Path]:
        root = Path(base)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        if isinstance(glob, str) and glob:
            choices = _braces(glob)
            files = [p for p in files if any(fnmatch.fnmatch(p.name, g) or fnmatch.fnmatch(str(p), g)
                                             or fnmatch.fnmatch(str(p), f"*/{g}") for g in choices)]
        if isinstance(kind, str) and kind:
            suffixes = TYPES.get(kind, (f".{kind}",))
            files = [p for p in files if p.suffix.lower() in suffixes]
        return files

    # -- dispatch ---------------------------------------------------------------------------

    def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        try:
            if tool == "Bash":
                return self.bash(args.get("command"), args.get("timeout"))
            if tool == "Read":
                return self.read(args.get("file_path"), args.get("offset"), args.get("limit")), False
            if tool == "Glob":
                return self.glob(args.get("pattern"), args.get("path")), False
            if tool == "Grep":
                return self.grep(args), False
            raise ToolError(f"unknown tool {tool!r}: the tools are Bash, Read, Glob, Grep")
        except ToolError as exc:
            return str(exc), True
        except (OSError, ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {exc}", True


def _braces(glob: str) -> list[str]:
    """`*.{md,txt}` -> ["*.md", "*.txt"] (one level of braces, as ripgrep's globs allow)."""
    m = re.search(r"\{([^{}]*)\}", glob)
    if m is None:
        return [glob]
    return [glob[: m.start()] + part + glob[m.end():] for part in m.group(1).split(",")]


def serve(proto_in: Any, proto_out: Any, config: dict[str, Any]) -> None:
    env = {**os.environ, **config.get("env", {})}
    if config.get("path_first"):
        env["PATH"] = f"{config['path_first']}:{env.get('PATH', '')}"
    cwd = config.get("cwd") or os.getcwd()
    for name, content in config.get("files", {}).items():
        Path(cwd, name).write_text(content, encoding="utf-8")
    shell = Shell(cwd, env)

    def send(message: dict[str, Any]) -> None:
        proto_out.write(json.dumps(message) + "\n")
        proto_out.flush()

    send({"ready": True, "cwd": cwd})
    while True:
        line = proto_in.readline()
        if not line:
            return
        request = json.loads(line)
        started = time.monotonic()
        args = request.get("input")
        output, is_error = shell.call(str(request.get("tool")), args if isinstance(args, dict) else {})
        send({"output": output, "is_error": is_error, "seconds": round(time.monotonic() - started, 4),
              "cwd": shell.cwd})


def main(argv: list[str]) -> None:
    config = json.loads(argv[1]) if len(argv) > 1 else {}
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    serve(proto_in, proto_out, config)


if __name__ == "__main__":
    main(sys.argv)
