#!/usr/bin/env bash
# The main job on the bundled demo benchmark, no API key: set up, then `deskbench demo`.
# Without OPENAI_API_KEY or --model, the agent is the local SmolLM2 model: setup builds
# llama.cpp for it (about 10 minutes, once).
set -euo pipefail
# the demo's closing command names paths as typed from where this was started, not the repo root
export DESKBENCH_SHOW_PATHS_FROM="$PWD"
cd "$(dirname "$0")/.."
local_model=1
[ -n "${OPENAI_API_KEY:-}" ] && local_model=0
for arg in "$@"; do
  case "$arg" in --model|--model=*) local_model=0 ;; esac
done
DESKBENCH_LOCAL_MODEL="$local_model" bash scripts/setup.sh
export OMP_THREAD_LIMIT=1
exec .venv/bin/deskbench demo "$@"
