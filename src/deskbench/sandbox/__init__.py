"""Isolated, stateless Python execution for model-written code (AIDABench's `execute_code`).

One call is one fresh jail, so no state survives between calls:

- **bubblewrap**, no Docker: new pid, net (loopback only, nothing listening), ipc and uts
  namespaces; read-only /usr, the Python prefixes, fonts; the task's inputs read-only at
  /mnt/data (one directory alone: its contents); a private size-capped /tmp; cwd /mnt/result.
- **/mnt/result is a size-capped tmpfs inside the jail** (`bwrap --size`), so neither one huge
  file nor many small ones can fill the host disk (also for `spawn`, the rlm REPL, unless a
  host folder is asked for). A supervisor inside the jail (`_boot.py`)
  runs the code as a child, then kills every process left in the pid namespace and streams
  the regular files (never following symlinks) to the host over a pipe; the host applies its
  own caps (file count, total bytes, safe names) to whatever arrives.
- **Limits** (`Limits`): memory and process count per sandbox through a cgroup of its own
  (`cgroups.py`: v2, else the v1 memory and pids controllers; memfd and tmpfs pages and every
  forked child count together; an OOM kill or a refused fork is reported), rlimits on CPU
  time, address space (per process: one huge allocation fails cleanly), open files and file
  size; where no cgroup is writable (non-root, read-only cgroupfs,
  DESKBENCH_SANDBOX_CGROUPS=off) RLIMIT_AS and RLIMIT_NPROC alone (`deskbench sandbox check`
  says which). Wall time (the supervisor's timer, plus a host backstop that kills the process
  group and the cgroup); stdout and stderr are each kept up to a cap and drained (then closed)
  beyond it. As root, the code runs under a fresh unprivileged uid so that RLIMIT_NPROC (which
  root ignores) counts only this sandbox's processes.
- **Temp folders** (`stale.py`) carry their owner's pid and start time; each is removed after
  use, and those of dead processes (kill -9) are removed when the next `Sandbox` starts, as are
  their cgroups.
- Every limit hit is reported in `ExecResult.limit_hits` and in plain words by
  `ExecResult.for_model()`, the tool result the model reads; nothing the code does raises.
- Without bwrap, `Sandbox` raises `SandboxUnavailable` unless `unsafe_local=True`: a plain
  subprocess with the rlimits, host temp dirs for /mnt/data and /mnt/result and the literal
  paths substituted in the code (best effort, for debugging only).

Debug one script exactly as the agent's tool runs it:
`deskbench sandbox run SCRIPT.py [--input DIR] [--json]`.
"""

from deskbench.sandbox.limits import Limits
from deskbench.sandbox.result import LIMIT_NAMES, ExecResult, OutputFile
from deskbench.sandbox.run import Sandbox, SandboxUnavailable

__all__ = ["LIMIT_NAMES", "ExecResult", "Limits", "OutputFile", "Sandbox", "SandboxUnavailable"]
