#!/usr/bin/env bash
# Install what the tests need and run them. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export OMP_THREAD_LIMIT=1
exec .venv/bin/python -m pytest -q "$@"
