#!/usr/bin/env bash
# Install what the tests need and run them. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# pytest-xdist: one worker per CPU this process may use (2 on the project's machines; not the host's
# count a container reports; DESKBENCH_TEST_WORKERS to change it); each test file on one worker
# (--dist loadfile: a file's module fixtures built once, the Ray tests on one cluster; loadgroup
# ignores its groups under pytest 9.2, whose node ids xdist 3.8 cannot suffix); the 25 slowest tests
# listed at the end.
workers="${DESKBENCH_TEST_WORKERS:-$(.venv/bin/python -c 'import os; print(len(os.sched_getaffinity(0)))')}"
export OMP_THREAD_LIMIT=1
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --durations=25 "$@"
