"""`deskbench sandbox run`: run one script exactly as the agent's execute_code tool would;
`deskbench sandbox check`: how sandboxes are isolated and limited here.

Exit code: 0 when the script exited 0 within every limit, 1 when it failed or hit a limit,
2 for a usage error (missing script or input, no bubblewrap without --unsafe-local).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.console import out
from deskbench.errors import UserError

sandbox_app = typer.Typer(no_args_is_help=True, help="Run model-written Python in the sandbox.")


@sandbox_app.command("run")
def run_cmd(
    script: Annotated[Path, typer.Argument(help="Python file to run.")],
    input_dirs: Annotated[list[Path] | None, typer.Option(
        "--input", help="Input file or dir, read-only under /mnt/data (one dir alone: its contents). Repeatable.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")] = False,
    unsafe_local: Annotated[bool, typer.Option(
        "--unsafe-local", help="Run WITHOUT isolation when bubblewrap is missing (debugging only).")] = False,
    timeout: Annotated[float | None, typer.Option(help="Wall-time limit in seconds (default 120).")] = None,
    memory_mb: Annotated[int | None, typer.Option(help="Address-space limit in MB (default 2048).")] = None,
    keep: Annotated[Path | None, typer.Option(help="Keep the files collected from /mnt/result here.")] = None,
) -> None:
    """Run SCRIPT in a fresh sandbox; print stdout, stderr, exit status, limit hits and the
    collected files. Exit 0 if it ran ok, 1 if it failed or hit a limit."""
    from deskbench.sandbox import Limits, Sandbox

    if not script.is_file():
        raise UserError(f"script {script} does not exist; pass a Python file")
    for d in input_dirs or []:
        if not d.exists():
            raise UserError(f"--input {d} does not exist")
    if timeout is not None and timeout <= 0:
        raise UserError(f"--timeout {timeout} is not valid; use a positive number of seconds")
    if memory_mb is not None and memory_mb <= 0:
        raise UserError(f"--memory-mb {memory_mb} is not valid; use a positive number")
    defaults = Limits()
    limits = Limits(wall_seconds=timeout or defaults.wall_seconds,
                    memory_bytes=(memory_mb * 1024**2) if memory_mb else defaults.memory_bytes)
    try:
        code = script.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"script {script} is not UTF-8 text ({e.reason})") from None
    sandbox = Sandbox(limits, unsafe_local=unsafe_local)
    result = sandbox.run(code, inputs=input_dirs or [], collect_to=keep)
    try:
        if as_json:
            print(json.dumps({
                "stdout": result.stdout, "stderr": result.stderr, "exit_code": result.exit_code,
                "signal": result.signal, "limit_hits": result.limit_hits,
                "files": [{"name": f.name, "size": f.size} for f in result.files],
                "skipped": [list(s) for s in result.skipped], "seconds": round(result.seconds, 3),
                "notes": result.notes, "enforcement": result.enforcement,
                "memory_peak_bytes": result.memory_peak_bytes,
            }, ensure_ascii=False))
        else:
            out.print(escape(result.for_model(max_chars=10**9)))
            if keep is not None and result.files:
                out.print(f"files kept in {escape(str(keep))}")
    finally:
        if keep is None:
            result.cleanup()
    if not result.ok:
        raise typer.Exit(1)


@sandbox_app.command("check")
def check_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")] = False,
) -> None:
    """Say how sandboxes are isolated and limited on this machine: bubblewrap, and whether
    memory and process count are capped per sandbox (a cgroup, v2 or v1) or per process
    (rlimits, and why). Exit 0 when bubblewrap works, 2 when it does not."""
    from deskbench.sandbox import Limits, Sandbox

    sandbox = Sandbox(Limits())
    lim = sandbox.limits
    detail = sandbox.mode.describe()
    info = {"bwrap": sandbox.bwrap, "as_root": sandbox.as_root, "enforcement": sandbox.mode.name,
            "detail": detail, "memory_bytes": lim.memory_bytes,
            "processes": lim.processes, "result_bytes": lim.result_bytes, "tmp_bytes": lim.tmp_bytes}
    if as_json:
        print(json.dumps(info))
        return
    out.print(f"bubblewrap: {escape(str(sandbox.bwrap))} (works)")
    out.print(f"limits: {escape(detail)}")
    out.print(f"defaults: memory {lim.memory_bytes // 1024**2} MB, {lim.processes} processes/threads, "
              f"/mnt/result {lim.result_bytes // 1024**2} MB, /tmp {lim.tmp_bytes // 1024**2} MB "
              "(size-capped tmpfs in the jail)")


def register(app: typer.Typer) -> None:
    """Add the `sandbox` command group to the main app."""
    app.add_typer(sandbox_app, name="sandbox")


__all__ = ["register", "sandbox_app"]
