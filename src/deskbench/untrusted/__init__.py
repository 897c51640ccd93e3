"""Files that came from a model or a user, parsed under limits (issue 22 item 1).

`limits.py`: the limits (one place, env-configurable) and the `LimitExceeded` verdict;
`worker.py`: `run_limited` / `call_limited`, a parse in a capped worker process;
`checks.py`: the cheap checks made before parsing (zip directory, element counts, page pixels).
"""

from deskbench.untrusted.limits import (
           FileLimitError,
           FileLimits,
           LimitExceeded,
           current_limits,
           use_limits,
)
from deskbench.untrusted.worker import ReaderCrashed, call_limited, in_worker, run_limited

__all__ = ["FileLimitError", "FileLimits", "LimitExceeded", "ReaderCrashed", "call_limited", "current_limits",
           "in_worker", "run_limited", "use_limits"]
