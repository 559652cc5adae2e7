#!/usr/bin/env bash
# Line coverage of src/ over both test tiers together, as CI runs them (issue #50: coverage must not
# drop when the tests are made leaner). Every Python process the tests start is measured too: the
# xdist workers, `probes` CLI subprocesses, served models and vLLM's engine processes
# (coverage's `patch = subprocess`), each writing its own data file, combined at the end.
#
#   bash scripts/coverage.sh [REPO] [-- extra pytest arguments]
#
# REPO (default: this checkout) needs its own venv from scripts/setup.sh; coverage is installed into
# it. Prints the report and writes REPO/coverage.json (totals and per-file figures). Runs both tiers:
# about 35 minutes on 2 cores.
set -euo pipefail
REPO_ARG="$(dirname "$0")/.."
if [ $# -gt 0 ] && [ "$1" != "--" ]; then REPO_ARG="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
REPO="$(cd "$REPO_ARG" && pwd)"
cd "$REPO"
PY="$REPO/.venv/bin/python"
"$PY" -m pip install --quiet coverage==7.17.3

DATA="$REPO/.coverage-data"
rm -rf "$DATA" && mkdir -p "$DATA"
RC="$DATA/coveragerc"
cat > "$RC" <<RC
[run]
source = $REPO/src
parallel = true
patch = subprocess, _exit
data_file = $DATA/.coverage
[report]
precision = 2
RC
export COVERAGE_RCFILE="$RC"
status=0
for tier in "not slow" "slow"; do
  "$PY" -m coverage run -m pytest -q -n 2 --dist loadfile -m "$tier" -p no:cacheprovider "$@" || status=$?
done
"$PY" -m coverage combine --quiet
"$PY" -m coverage report --skip-covered --sort=cover | tail -n 40
"$PY" -m coverage json --quiet -o "$REPO/coverage.json"
"$PY" - "$REPO/coverage.json" <<'PY'
import json, sys
totals = json.load(open(sys.argv[1]))["totals"]
print(f"src line coverage: {totals['covered_lines']}/{totals['num_statements']} lines, "
      f"{totals['percent_covered']:.2f}%")
PY
exit "$status"
