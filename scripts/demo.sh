#!/usr/bin/env bash
# The main job on the bundled sample data, no API key: set up, then `deskbench demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/deskbench demo "$@"
