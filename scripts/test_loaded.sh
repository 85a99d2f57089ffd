#!/usr/bin/env bash
# The test suite with every CPU core kept busy by stress-ng (issue 24 item 14: no test may pass
# only on a quiet machine). `make test-loaded` runs scripts/test.sh (the whole suite) so; with
# arguments, only pytest runs, with them (e.g. scripts/test_loaded.sh -q tests/test_redis_stores.py),
# in the installed .venv against running services (`make test` installs and starts them once).
# STRESS_WORKERS=N: another load (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v stress-ng >/dev/null; then
    echo "stress-ng is missing: apt-get install -y stress-ng (Debian)" >&2
    exit 2
fi
workers="${STRESS_WORKERS:-$(nproc)}"
stress-ng --cpu "$workers" --timeout 4h --quiet &
stress=$!
trap 'kill "$stress" 2>/dev/null || true; wait "$stress" 2>/dev/null || true' EXIT
echo "== under load: stress-ng --cpu $workers"
if [ "$#" -eq 0 ]; then
    scripts/test.sh
else
    eval "$(scripts/services.sh env)"
    export MCP_REQUIRE_SERVICES=1
    .venv/bin/pytest "$@"
fi
