#!/usr/bin/env bash
# Flakiness, measured: run the integration tests N times and report every test that failed at least once,
# with the first line of its failure, and runs and failures per test.
#
#   bash scripts/soak.sh N [pytest arguments...]      e.g. bash scripts/soak.sh 5 -k drain
#
# Each run is `python3 -m pytest -p no:randomly -n 2 --dist loadfile tests/integration` (each file's tests in the
# same order every run, so a failure that comes and goes is flakiness, not ordering), its JUnit XML and its output kept in SOAK_DIR
# (default: a new directory under ${TMPDIR:-/tmp}); the report (scripts/soak-report.py) reads the XML files.
# Two workers, as scripts/test.sh runs them (GPUTUI_TEST_WORKERS). A run takes about 15 minutes on 2 cores.
# Exit 0 when no test failed in any run, 1 otherwise.
# It does no set-up: run scripts/test.sh once first (binaries, Prometheus, CRDs).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -lt 1 ] || ! [[ "$1" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bash scripts/soak.sh N [pytest arguments...]   (N: how many runs, at least 1)" >&2
  exit 2
fi
runs=$1
shift
dir=${SOAK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/gputui-soak-XXXXXX")}
mkdir -p "$dir"
echo "== soak: $runs runs of tests/integration; JUnit XML and output in $dir"

for i in $(seq 1 "$runs"); do
  started=$(date +%s)
  python3 -m pytest -q -p no:randomly -n "${GPUTUI_TEST_WORKERS:-2}" --dist loadfile tests/integration \
    --junitxml="$dir/run-$i.xml" "$@" >"$dir/run-$i.log" 2>&1
  rc=$?
  echo "run $i of $runs: pytest exit $rc in $(( $(date +%s) - started )) s; $(tail -n 1 "$dir/run-$i.log")"
  if [ ! -s "$dir/run-$i.xml" ]; then
    echo "run $i wrote no JUnit XML (pytest exit $rc): see $dir/run-$i.log" >&2
  fi
done

python3 scripts/soak-report.py --runs "$runs" "$dir"
