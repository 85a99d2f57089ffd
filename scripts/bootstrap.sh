#!/usr/bin/env bash
# Create .venv and install the project with its test extras (idempotent).
# Installs what the machine lacks from Debian's packages when run as root:
# python3-venv, and with --with-node Node.js + npm, then (scripts/node_tools.sh) the pinned
# Node.js 22, conformance suite, MCP Inspector and TypeScript SDKs into a cache outside the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
PY="$(command -v python3.11 || command -v python3 || true)"
[ -n "$PY" ] || need_apt+=(python3 python3-venv python3-pip)
if [ "${1:-}" = "--with-node" ] && ! command -v npm >/dev/null 2>&1; then need_apt+=(nodejs npm); fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    PY="$(command -v python3.11 || command -v python3)"
  else
    echo "bootstrap: please install: ${need_apt[*]}" >&2; exit 1
  fi
fi
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { echo "bootstrap: Python >= 3.11 required" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv || { [ "$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && "$PY" -m venv .venv; }
fi
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q -e '.[test]' 2>&1 | grep -v "is ignored" || true
  .venv/bin/python -c 'import fastapi_mcp_ctx, mcp, uvicorn, redis, sqlalchemy' 
  rm -f .venv/.installed-* && touch "$stamp"
fi
if [ "${1:-}" = "--with-node" ]; then
  scripts/node_tools.sh >/dev/null
fi
