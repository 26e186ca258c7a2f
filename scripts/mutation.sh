#!/usr/bin/env bash
# Mutation testing of the safety-critical modules (drains, leases, writes, permissions, sessions) with mutmut,
# one module at a time against the fast tests that cover it. By hand, not part of CI: a full run takes a while
# on one worker. Arguments go to scripts/mutation.py (targets to run, --list, --fresh, --report-only,
# --max-children, --min-score). Exit status: 1 when a module scores below 90% killed, 2 when a run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

MUTMUT_VERSION=3.8.1
if [ "$(python3 -c 'import importlib.metadata as m; print(m.version("mutmut"))' 2>/dev/null)" != "$MUTMUT_VERSION" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "mutmut==$MUTMUT_VERSION"
fi
exec python3 scripts/mutation.py "$@"
