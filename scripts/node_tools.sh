#!/usr/bin/env bash
# The Node.js tools the test suite drives, installed once into a cache outside the repository.
#
#   scripts/node_tools.sh      install when absent or stale, then print the cache directory
#
# What (exact versions in scripts/node/package.json; their own dependencies float in their ranges):
#   node 22                             npm's `node` package; the inspector needs Node >= 22.19
#                                       (Debian 12 ships 18), every tool below runs on it
#   @modelcontextprotocol/conformance   the official conformance suite (scripts/conformance.sh)
#   @modelcontextprotocol/inspector     the MCP Inspector, its --cli (tests/clients_node)
#   @modelcontextprotocol/sdk           the official TypeScript SDK v1 client (2025 era)
#   @modelcontextprotocol/client        the official TypeScript SDK v2 client (both eras)
#
# Where: ${MCP_CONFORMANCE_HOME:-$HOME/.cache/fastapi-mcp-ctx/conformance}. Idempotent: a stamp
# (hash of package.json) skips the install when it matches; changing a pin reinstalls.
# Not safe to run twice at the same time on one cache.
# Needs npm on PATH (scripts/bootstrap.sh test --with-node installs it on Debian, as root).
# Exit status: 0 installed (the directory is the only line on stdout), 2 npm missing or the
# install failed (the reason on stderr).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${MCP_CONFORMANCE_HOME:-$HOME/.cache/fastapi-mcp-ctx/conformance}"
NODE_MIN=22.19

die() { echo "node_tools: $*" >&2; exit 2; }

node_ok() {
    [ -x "$home/node_modules/.bin/node" ] && "$home/node_modules/.bin/node" -e '
        const [maj, min] = process.versions.node.split(".").map(Number);
        const [wmaj, wmin] = process.argv[1].split(".").map(Number);
        process.exit(maj > wmaj || (maj === wmaj && min >= wmin) ? 0 : 1);' "$NODE_MIN" 2>/dev/null
}

stamp="$(sha1sum <"$here/node/package.json" | cut -c1-16)"
if [ "$(cat "$home/.installed" 2>/dev/null || true)" != "$stamp" ] || ! node_ok; then
    command -v npm >/dev/null 2>&1 || die "npm not found: run scripts/bootstrap.sh test --with-node (Debian, as root) or install Node.js and npm"
    mkdir -p "$home" || die "cannot create $home (set MCP_CONFORMANCE_HOME to a writable folder)"
    rm -f "$home/.installed"
    cp "$here/node/package.json" "$home/package.json"
    echo "node_tools: installing the pins of scripts/node/package.json into $home" >&2
    (cd "$home" && npm install --no-audit --no-fund --no-update-notifier --loglevel=error) >&2 \
        || die "npm install failed in $home (network? the npm registry must be reachable)"
    node_ok || die "$home/node_modules/.bin/node is not Node >= $NODE_MIN after the install"
    echo "$stamp" >"$home/.installed"
fi
printf '%s\n' "$home"
