#!/usr/bin/env bash
# The whole test suite: strict type check, unit and wire tests, the state contract suite
# against real Redis and PostgreSQL (started here on loopback), the official MCP clients in
# both eras (Python SDK; MCP Inspector CLI and TypeScript SDKs on Node.js 22), the official
# conformance suite, the docs site's strict build, and a fresh clone's run (tests/test_standalone.py). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh test --with-node
scripts/services.sh start
eval "$(scripts/services.sh env)"
export MCP_REQUIRE_SERVICES=1
echo "== ruff (pyflakes, import order, bugbear, pyupgrade, simplify, comprehensions, ruff rules)"
.venv/bin/ruff check fastapi_mcp_ctx tests examples bench
echo "== import-linter (the layers of docs/architecture.md, pyproject.toml [tool.importlinter])"
.venv/bin/lint-imports --no-cache
echo "== pyright (strict) over fastapi_mcp_ctx"
.venv/bin/pyright
echo "== mkdocs build --strict (the docs site: a broken link, anchor or API reference fails)"
site="$(mktemp -d)"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$site"
rm -rf "$site"
echo "== pytest"
.venv/bin/pytest "$@"
echo "== lowest admitted FastAPI"
scripts/test_fastapi_lowest.sh
