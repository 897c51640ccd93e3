#!/usr/bin/env bash
# Install what the tests need and run them. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# pytest-xdist: one worker more than the CPUs this process may use (3 on the project's 2-CPU
# machines; not the host's count a container reports; DESKBENCH_TEST_WORKERS to change it): about
# half of a test's time is spent waiting on processes it started (servers, Ray, a sandbox's time
# limit), and with one worker per CPU the CPUs sat a tenth idle (docs/development.md, "Where the time
# goes"); each test file on one worker (--dist loadfile: a file's module fixtures built once, the Ray
# tests on one cluster; loadgroup ignores its groups under pytest 9.2, whose node ids xdist 3.8
# cannot suffix), the files taken in tests/conftest.py's order (longest_files_first: the Ray files
# first; --no-loadscope-reorder keeps it); the 25 slowest tests listed at the end.
workers="${DESKBENCH_TEST_WORKERS:-$(.venv/bin/python -c 'import os; print(len(os.sched_getaffinity(0)) + 1)')}"
export OMP_THREAD_LIMIT=1
# Cached bytecode, even where the environment turns it off (PYTHONDONTWRITEBYTECODE=1, as in many
# container images): the suite starts hundreds of interpreters (CLI subprocesses, servers, Ray
# workers), each of which would otherwise compile the package again, and every worker would rewrite
# every test module's asserts again (collection 24 s -> 13 s a worker).
unset PYTHONDONTWRITEBYTECODE
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
.venv/bin/python -m pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder --durations=25 "$@" || status=$?
exit "$status"
