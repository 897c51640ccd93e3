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
# The guard rails first: ruff (the linter) on src and tests, mypy --strict (pyproject [tool.mypy]) on
# the whole package; then pytest (tests/test_layering.py: no core module imports a track, no import
# cycle). Every step runs; the command fails if any did. DESKBENCH_LINT=0 skips the first two
# (a quick loop on a few test files).
status=0
if [ "${DESKBENCH_LINT:-1}" != 0 ]; then
  echo "ruff check src tests" >&2
  .venv/bin/ruff check --no-cache src tests || status=1
  echo "mypy src/deskbench (strict)" >&2
  .venv/bin/mypy src/deskbench || status=1
fi
.venv/bin/python -m pytest -q -n "$workers" --dist loadfile --durations=25 "$@" || status=$?
exit "$status"
