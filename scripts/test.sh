#!/usr/bin/env bash
# Install what the tests need and run them. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export OMP_THREAD_LIMIT=1
# pytest-xdist: one worker per CPU (2 on the project's machines; DESKBENCH_TEST_WORKERS to change it),
# the Ray tests kept on one worker (--dist loadgroup); the 25 slowest tests listed at the end.
exec .venv/bin/python -m pytest -q -n "${DESKBENCH_TEST_WORKERS:-logical}" --dist loadgroup --durations=25 "$@"
