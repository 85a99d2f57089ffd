#!/usr/bin/env bash
# Outside Python MCP clients the test suite drives, in a virtualenv of their own outside the
# repository (their pins conflict with the project's own test environment).
#
#   scripts/python_clients.sh      install when absent or stale, then print the venv's python
#
# What (exact pins in scripts/python_clients/requirements.txt):
#   fastmcp 4.1.6          FastMCP's client (modern era: server/discover, 2026-07-28)
#   fastmcp-tasks 4.1.4    its SEP-2663 tasks client (call_tool_task, ToolTask); installed
#                          without dependencies, because 4.1.4 pins fastmcp-slim 4.1.4 while
#                          fastmcp 4.1.6 brings fastmcp-slim 4.1.6 (the newest fastmcp-tasks on
#                          the index is 4.1.4); its own imports (pydocket) are pinned beside it
#
# Where: ${MCP_PY_CLIENTS_HOME:-$HOME/.cache/fastapi-mcp-ctx/python-clients}. Idempotent: a stamp
# (hash of the requirements) skips the install when it matches; changing a pin reinstalls.
# Needs python3 with venv (any CPython >= 3.11) and the package index.
# Exit status: 0 installed (the python's path is the only line on stdout), 2 the install failed
# (the reason on stderr).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${MCP_PY_CLIENTS_HOME:-$HOME/.cache/fastapi-mcp-ctx/python-clients}"
reqs="$here/python_clients/requirements.txt"
nodeps="$here/python_clients/no-deps.txt"

die() { echo "python_clients: $*" >&2; exit 2; }

stamp="$(cat "$reqs" "$nodeps" | sha1sum | cut -c1-16)"
if [ "$(cat "$home/.installed" 2>/dev/null || true)" != "$stamp" ] || [ ! -x "$home/bin/python" ]; then
    python="${PYTHON:-python3}"
    command -v "$python" >/dev/null 2>&1 || die "$python not found"
    rm -rf "$home"
    "$python" -m venv "$home" || die "cannot create a virtualenv in $home (set MCP_PY_CLIENTS_HOME)"
    echo "python_clients: installing the pins of scripts/python_clients/ into $home" >&2
    "$home/bin/pip" install -q --disable-pip-version-check -r "$reqs" >&2 \
        || die "pip install -r $reqs failed (network? the package index must be reachable)"
    "$home/bin/pip" install -q --disable-pip-version-check --no-deps -r "$nodeps" >&2 \
        || die "pip install --no-deps -r $nodeps failed"
    "$home/bin/python" -c "import fastmcp, fastmcp_tasks" >&2 || die "the clients do not import after the install"
    echo "$stamp" >"$home/.installed"
fi
printf '%s\n' "$home/bin/python"
