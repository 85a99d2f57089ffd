#!/usr/bin/env bash
# The whole test suite: strict type check, unit and wire tests, the state contract suite
# against real Redis and PostgreSQL (started here on loopback), the official MCP client in
# both eras, and the official conformance suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --with-node
scripts/services.sh start
eval "$(scripts/services.sh env)"
export MCP_REQUIRE_SERVICES=1
echo "== ruff (pyflakes, import order)"
.venv/bin/ruff check fastapi_mcp_ctx tests examples bench
echo "== pyright (strict) over fastapi_mcp_ctx"
.venv/bin/pyright
echo "== pytest"
.venv/bin/pytest "$@"
echo "== lowest admitted FastAPI"
scripts/test_fastapi_lowest.sh
