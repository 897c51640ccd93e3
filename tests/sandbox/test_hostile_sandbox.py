"""Fault suite, sandbox rows (issue 22 item 2): limits per sandbox, not per process.

Each probe runs the real CLI (or the REPL host) in a subprocess with a bound on wall time and,
where it is about memory, on the peak of a memory cgroup made by the test around the whole
command (memfd and tmpfs pages count there, not in any RSS). Before the cgroup per sandbox,
every one of these failed: the memfd probe held 3 GB and four children 4.4 GB under a 2 GiB
limit with limit_hits empty, a fork bomb that swallowed its errors went unreported, the REPL
wrote 1 GB into the host's TMPDIR, and temp folders stayed behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_sandbox import (
    FORK_4X1100MB,
    FORK_BOMB,
    GIB,
    MEMFD_3GB,
    REPL_1GB,
    REPL_DRIVER,
    can_watch,
    children_cpu,
    cli,
    run_watched,
)

from deskbench.sandbox import cgroups
from deskbench.sandbox.stale import TAGGED, pid_namespace, start_time

MB = 1024**2
SANDBOX_LIMIT = 2 * GIB
HOST_SLACK = 300 * MB   # the CLI's own interpreter and page cache beside the sandbox's 2 GiB


@pytest.fixture(autouse=True)
def _bwrap(bwrap: str) -> None:
    pass


def need_cgroups() -> cgroups.Mode:
    mode = cgroups.detect()
    if mode.hierarchy is None:
        msg = f"no writable cgroup here ({mode.reason})"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    if not can_watch():
        pytest.skip("no memory cgroup to watch the probe in")
    return mode


def sandbox_json(tmp_path: Path, code: str, *args: str, env: dict[str, str] | None = None,
                 timeout: float = 300.0) -> tuple[dict, float, float | None]:
    """The sandbox's --json, the CPU seconds of the CLI's tree (not wall time: the verdict must
    not depend on the machine's load) and its memory peak; `timeout` is only a hang guard."""
    script = tmp_path / "probe.py"
    script.write_text(code)
    w = run_watched(cli("sandbox", "run", str(script), "--json", "--timeout", "60", *args),
                    env=env, timeout=timeout)
    assert w.returncode in (0, 1), w.stderr[-2000:]
    return json.loads(w.stdout), w.cpu_seconds, w.peak_bytes


# -- memory: the whole sandbox, whatever holds it ---------------------------------------------------


def test_memfd_3gb_is_killed_at_the_sandbox_limit(tmp_path: Path) -> None:
    need_cgroups()
    data, seconds, peak = sandbox_json(tmp_path, MEMFD_3GB)
    assert "memory" in data["limit_hits"], data
    assert data["enforcement"] in ("cgroup v1", "cgroup v2") and data["signal"] == signal.SIGKILL
    assert "held 3 GB" not in data["stdout"]
    assert seconds < 60 and peak is not None and peak < SANDBOX_LIMIT + HOST_SLACK, (seconds, peak)


def test_four_forked_children_share_one_limit(tmp_path: Path) -> None:
    need_cgroups()
    data, seconds, peak = sandbox_json(tmp_path, FORK_4X1100MB)
    assert "memory" in data["limit_hits"], data
    killed = json.loads(data["stdout"]) if data["stdout"] else []
    assert not killed or any(s == signal.SIGKILL for s in killed)  # children OOM-killed (status 9)
    assert seconds < 60 and peak is not None and peak < SANDBOX_LIMIT + HOST_SLACK, (seconds, peak)


def test_memory_kill_is_said_to_the_model(tmp_path: Path) -> None:
    need_cgroups()
    from deskbench.sandbox import Limits, Sandbox

    result = Sandbox(Limits(memory_bytes=SANDBOX_LIMIT, wall_seconds=60)).run(MEMFD_3GB)
    assert result.oom_killed and result.limit_hits == ["memory"]
    assert "memory limit 2 GiB reached: the program was killed" in result.for_model()
    assert result.memory_peak_bytes is not None and result.memory_peak_bytes <= SANDBOX_LIMIT


# -- processes -----------------------------------------------------------------------------------------


def test_fork_bomb_stopped_by_pids_max_and_reported(tmp_path: Path) -> None:
    need_cgroups()
    data, seconds, peak = sandbox_json(tmp_path, FORK_BOMB)
    assert data["limit_hits"] == ["processes"], data
    forked = int(data["stdout"].split()[1])
    assert 100 <= forked <= 128, forked          # the default 128 processes, not a few thousand
    assert seconds < 30 and peak is not None and peak < 1 * GIB, (seconds, peak)


# -- the rlm REPL's /mnt/result ------------------------------------------------------------------------


def test_repl_result_folder_is_capped_and_host_tmpdir_untouched(tmp_path: Path) -> None:
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    w = run_watched([sys.executable, "-c", REPL_DRIVER, str(host_tmp)], env={"TMPDIR": str(host_tmp)},
                    stdin=REPL_1GB, timeout=300)
    assert w.returncode == 0, w.stderr[-2000:]
    out = json.loads(w.stdout)
    assert out["error"] and "wrote 1 GB" not in out["stdout"], out
    assert "No space left on device" in out["stderr"] or "File too large" in out["stderr"], out
    assert "[sandbox] a write failed: /mnt/result holds at most 256 MB" in out["stderr"]
    assert out["tmp_bytes"] < 1 * MB, out["tmp_bytes"]       # nothing of it on the host's disk
    assert w.cpu_seconds < 60, (w.cpu_seconds, w.seconds)
    assert w.peak_bytes is None or w.peak_bytes < SANDBOX_LIMIT + HOST_SLACK
    assert not [p.name for p in host_tmp.iterdir() if p.name.startswith("deskbench-")]


# -- temp folders --------------------------------------------------------------------------------------


def test_a_run_leaves_no_deskbench_temp_folders(tmp_path: Path) -> None:
    """An rlm episode through `deskbench run` and an execute_code call through `sandbox run`,
    both with TMPDIR pointing at an empty folder: it is empty afterwards."""
    from conftest import ingest, write_text_pdf
    from fake_openai import FakeOpenAI

    write_text_pdf(tmp_path / "pdfs" / "fleet.pdf", ["Winter season rates: Mountain car."])
    ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q1", "question": "Which vehicle?", "answer_variants": [["Mountain car"]],
                                 "evidence": [{"document": "fleet.pdf", "page": 1}]}) + "\n")
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(host_tmp)}
    replies = ["```repl\nfound = context[context.find('Mountain'):][:12]\nprint(found)\n```",
               "FINAL_VAR(found)"]

    def script(body: dict, n: int) -> dict:
        if body.get("response_format"):
            return {"kind": "text", "text": json.dumps({"answer": ["Mountain car"],
                                                        "citations": [{"file": "fleet.pdf", "page": 1}]})}
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return {"kind": "text", "text": replies[min(turn, 1)]}

    with FakeOpenAI(script=script) as fake:
        cpu = children_cpu()  # CPU time, not wall time: a loaded machine is slower, not costlier
        proc = subprocess.run(cli("run", "--tasks", str(tasks), "--corpus", str(tmp_path / "corpus"),
                                  "--agent", "rlm", "--model", f"openai-compat/fake@{fake.base_url}",
                                  "--out", str(tmp_path / "run"), "--json", "--quiet"),
                              capture_output=True, text=True, env=env, timeout=300)  # a hang guard
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert children_cpu() - cpu < 120
    (report,) = json.loads(proc.stdout).values()
    assert report["accuracy"] == 1.0
    (tmp_path / "hello.py").write_text("open('/mnt/result/a.txt', 'w').write('a')\nprint('hi')\n")
    proc = subprocess.run(cli("sandbox", "run", str(tmp_path / "hello.py")), capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in host_tmp.iterdir()) == []


def test_kill_9_mid_call_leaves_folders_the_next_use_removes(tmp_path: Path) -> None:
    """kill -9 of the CLI leaves its deskbench-call-* folder (and, with cgroups, its group);
    the next sandbox use in another process removes both."""
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(host_tmp)}
    (tmp_path / "sleep.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(3600)\n")
    proc = subprocess.Popen(cli("sandbox", "run", str(tmp_path / "sleep.py")), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mode = cgroups.detect()
    parents = mode.hierarchy.parents() if mode.hierarchy else []

    def call_groups() -> list[Path]:
        return [d for parent in parents for d in parent.glob(f"deskbench-sandbox-{proc.pid}.*")]

    # Killed once the call is under way (its folder and, with cgroups, its groups made): polled
    # for, with a generous deadline, not guessed with a sleep.
    deadline = time.monotonic() + 300
    while not (list(host_tmp.glob("deskbench-call-*")) and len(call_groups()) == len(parents)):
        assert proc.poll() is None and time.monotonic() < deadline, "the call did not start"
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    left = [p.name for p in host_tmp.iterdir()]
    assert any(n.startswith("deskbench-call-") for n in left), left
    groups = call_groups()
    assert len(groups) == len(parents), groups  # left by the kill
    cpu = children_cpu()
    check = subprocess.run(cli("sandbox", "check", "--json"), capture_output=True, text=True,
                           env=env, timeout=300)  # a hang guard
    assert check.returncode == 0, check.stderr
    assert children_cpu() - cpu < 120
    assert [p.name for p in host_tmp.iterdir()] == []
    assert not [g for g in groups if g.exists()]


def test_stale_folders_only_of_dead_owners_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from deskbench.sandbox import Limits, Sandbox

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    me, my_start = os.getpid(), start_time(os.getpid())
    names = {
        "dead": f"deskbench-call-{gone.pid}.1234-abc",                   # pid gone
        "reused": f"deskbench-spawn-{me}.{(my_start or 0) + 1}-abc",      # pid alive, another start
        "alive": f"deskbench-rlm-context-{me}.{my_start}-abc",            # this process: kept
        "untagged": "deskbench-call-x1y2z3",                              # not ours to judge: kept
        "elsewhere": f"deskbench-call-{gone.pid}.1.{pid_namespace() + 1}-abc",  # another pid namespace: kept
        "dead_here": f"deskbench-result-{gone.pid}.1.{pid_namespace()}-abc",    # this namespace, gone
        "other": "somebody-else-1.2-abc",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text("x")
    (tmp_path / f"deskbench-call-{gone.pid}.1-link").symlink_to(tmp_path / names["alive"])
    assert all(TAGGED.match(names[k]) for k in ("dead", "reused", "alive", "elsewhere", "dead_here"))
    Sandbox(Limits())
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([names["alive"], names["untagged"], names["other"], names["elsewhere"]]), left
    assert (tmp_path / names["alive"] / "f").exists()   # the link was removed, not followed


def test_stale_cgroup_of_a_dead_owner_is_killed_and_removed() -> None:
    mode = need_cgroups()
    from deskbench.sandbox import Limits, Sandbox

    assert mode.hierarchy is not None
    gone = subprocess.Popen(["true"])
    gone.wait()
    dirs = mode.hierarchy.make(f"deskbench-sandbox-{gone.pid}.1.{pid_namespace()}-stale", Limits())
    sleeper = subprocess.Popen(["/bin/sh", "-c", 'for f in "$@"; do echo $$ > "$f"; done; exec sleep 600',
                                "sh", *(str(d / "cgroup.procs") for d in dirs)])
    deadline = time.monotonic() + 300  # the shell is in its group once it wrote its pid there
    while str(sleeper.pid) not in (dirs[0] / "cgroup.procs").read_text():
        assert time.monotonic() < deadline, "the sleeper never joined its group"
        time.sleep(0.05)
    Sandbox(Limits())
    assert sleeper.wait(timeout=300) == -signal.SIGKILL
    assert not any(d.exists() for d in dirs)


# -- the fallback ----------------------------------------------------------------------------------------


def test_rlimit_fallback_when_cgroups_are_off(tmp_path: Path) -> None:
    env = {"DESKBENCH_SANDBOX_CGROUPS": "off"}
    data, seconds, _ = sandbox_json(tmp_path, "b = bytearray(3 * 1024**3)\n", env=env)
    assert data["limit_hits"] == ["memory"] and "MemoryError" in data["stderr"], data
    assert data["enforcement"] == "rlimit" and seconds < 30
    check = subprocess.run(cli("sandbox", "check", "--json"), capture_output=True, text=True,
                           env={**os.environ, **env}, timeout=300)  # a hang guard
    info = json.loads(check.stdout)
    assert info["enforcement"] == "rlimit" and "DESKBENCH_SANDBOX_CGROUPS=off" in info["detail"]
    bomb, _, _ = sandbox_json(tmp_path, "import os\nwhile True:\n    os.fork()\n", env=env)
    assert "processes" in bomb["limit_hits"], bomb     # RLIMIT_NPROC under the sandbox's own uid


def test_cgroup_v2_files_are_written_and_read(tmp_path: Path) -> None:
    """The v2 path cannot run on a v1 machine; its file handling is checked on a plain tree."""
    from deskbench.sandbox import Limits

    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    mounts = cgroups._mounts(f"30 1 0:26 / {tmp_path} rw - cgroup2 cgroup2 rw\n")
    found = cgroups._try_v2(mounts, cgroups._own_groups("0::/\n"))
    assert isinstance(found, cgroups.V2) and found.parent == tmp_path / "deskbench"
    (d,) = found.make("g", Limits(memory_bytes=GIB, processes=10))
    assert (d / "memory.max").read_text() == str(GIB) and (d / "pids.max").read_text() == "14"
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 5\noom 1\noom_kill 2\n")
    (d / "pids.events").write_text("max 7\n")
    (d / "memory.peak").write_text(str(GIB))
    usage = found.usage([d])
    assert (usage.oom_kills, usage.pids_refused, usage.memory_peak) == (2, 7, GIB)
    assert "cgroup v2" in cgroups.Mode(found, "").describe()
