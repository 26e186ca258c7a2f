#!/usr/bin/env bash
# The whole test suite, from a fresh machine: Python deps, Debian's Prometheus,
# the control-plane binaries (built once into a cache outside the checkout),
# then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== python dependencies"
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e '.[test]'
echo "== ruff (pyflakes and pycodestyle, configured in pyproject.toml)"
python3 -m ruff check gputui tests benchmarks scripts
echo "== mypy (configured in pyproject.toml)"
python3 -m mypy
echo "== tmux (the end-to-end test drives the installed gputui in it)"
if ! command -v tmux >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
fi
echo "== chromium (the browser test loads gputui serve's page in it)"
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
echo "== victoria-metrics (the metrics tests run against it as well as Prometheus)"
if ! command -v victoria-metrics >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq victoria-metrics >/dev/null
fi
echo "== prometheus"
bash scripts/install-prometheus.sh
echo "== control plane"
bash scripts/build-control-plane.sh
echo "== Argo Rollouts controller"
bash scripts/build-argo-rollouts.sh

echo "== router CRDs"
python3 scripts/fetch-crds.py

# Two pytest workers (GPUTUI_TEST_WORKERS), a test file each at a time (--dist loadfile: a module's fixtures stay
# in one worker). Each worker starts its own control plane and Prometheus on free ports, so nothing is shared. The
# real-server tests mostly wait (grace periods, scrapes, the scheduler's backoff): two at once halve the suite's
# time on two cores (integration and end-to-end: 16 min against 30; unit and UI: 4.4 min against 8).
echo "== pytest (${GPUTUI_TEST_WORKERS:-2} workers)"
set +e
python3 -m pytest -n "${GPUTUI_TEST_WORKERS:-2}" --dist loadfile "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$rc"
