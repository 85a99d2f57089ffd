#!/usr/bin/env bash
# Create .venv and install the project (idempotent; says what it does).
#
#   scripts/bootstrap.sh run            the example server, the CLI and the official MCP client (examples/client.py):
#                                       the package + its `server`, `cli`, `client` extras
#   scripts/bootstrap.sh test           everything the test suite needs (`test` extra: all extras, the
#                                       official mcp client, pytest, pyright, ruff, mkdocs for the docs site)
#   scripts/bootstrap.sh test --with-node   also Node.js + npm (the conformance suite and the node clients)
#
# Installs what the machine lacks from Debian's packages when run as root: python3-venv, and
# with --with-node Node.js + npm, then (scripts/node_tools.sh) the pinned Node.js 22, conformance
# suite, MCP Inspector and TypeScript SDKs into a cache outside the repo. A `test` install
# satisfies a later `run`.
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-test}"
case "$profile" in run | test) ;; *) echo "bootstrap: unknown profile '$profile' (run, test)" >&2; exit 2;; esac
with_node=0
[ "${2:-}" = "--with-node" ] && with_node=1
say() { printf 'bootstrap: %s\n' "$*" >&2; }

need_apt=()
PY="$(command -v python3.11 || command -v python3 || true)"
[ -n "$PY" ] || need_apt+=(python3 python3-venv python3-pip)
if [ "$with_node" = 1 ] && ! command -v npm >/dev/null 2>&1; then need_apt+=(nodejs npm); fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    say "installing ${need_apt[*]} (apt)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    PY="$(command -v python3.11 || command -v python3)"
  else
    say "please install: ${need_apt[*]}"; exit 1
  fi
fi
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { say "Python >= 3.11 required"; exit 1; }
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$PY" --version)"
  "$PY" -m venv .venv || { [ "$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && "$PY" -m venv .venv; }
fi
hash="$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f ".venv/.installed-test-$hash" ] && [ ! -f ".venv/.installed-$profile-$hash" ]; then
  if [ "$profile" = run ]; then
    extras='.[server,cli,client]'
    what="the package, uvicorn, the fastapi-mcp-ctx command and the official MCP client (extras: server, cli, client)"
    check='import fastapi_mcp_ctx, uvicorn, click, httpx, mcp'
  else
    extras='.[test]'; what="the package with every extra and the test tools (extra: test; about 250 MB)"
    check='import fastapi_mcp_ctx, mcp, uvicorn, redis, sqlalchemy, mkdocs, mkdocstrings_handlers.python, material'
  fi
  say "installing $what into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q -e "$extras" 2>&1 | grep -v "is ignored" || true
  .venv/bin/python -c "$check"
  rm -f .venv/.installed-"$profile"-* && touch ".venv/.installed-$profile-$hash"
  say "done"
fi
if [ "$with_node" = 1 ]; then
  scripts/node_tools.sh >/dev/null
fi
