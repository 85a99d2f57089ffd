#!/usr/bin/env bash
# Run the official MCP conformance suite against a running server.
#
#   scripts/conformance.sh URL [REVISION ...] [-- extra suite arguments]
#
# URL       the server's MCP endpoint, e.g. http://127.0.0.1:8931/mcp
#           (make conformance-server serves examples/conformance_server.py there)
# REVISION  2025-11-25 and/or 2026-07-28 (default: both): each runs exactly the scenarios
#           that revision requires (the suite's --requirements REVISION). `custom` runs only
#           what the extra arguments select, e.g.
#             scripts/conformance.sh URL custom -- --scenario server-stateless --spec-version 2026-07-28
#
# Prints, per revision, one line per scenario ("✓ NAME (REVISION): P passed, F failed",
# counting its checks; a failed check is listed under it), "FAILED (REVISION): NAME" for each
# failed scenario, and a closing "conformance: N passed, M failed" counting scenarios; the
# scenarios the suite marks as extensions (tasks-*) are counted apart: no revision requires them.
# Exit status: 0 every counted scenario passed, 1 some failed or none ran, 2 usage error,
# install error, or no server listening at URL.
#
# The suite (pinned, with Node.js 22) is installed on first use by scripts/node_tools.sh into
# ${MCP_CONFORMANCE_HOME:-$HOME/.cache/fastapi-mcp-ctx/conformance}. Set
# MCP_CONFORMANCE_RESULTS=DIR to keep the suite's results (DIR/REVISION/*/checks.json and the
# suite's log DIR/REVISION/suite.log); they are deleted otherwise. MCP_CONFORMANCE_WAIT
# (seconds, default 15) bounds the wait for the server to accept connections.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

url="${1:-}"
case "$url" in http://* | https://*) ;; *) usage ;; esac
shift
revisions=() extra=()
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then shift; extra=("$@"); break; fi
    case "$1" in 2025-11-25 | 2026-07-28 | custom) revisions+=("$1") ;; *) echo "conformance: unknown revision '$1'" >&2; usage ;; esac
    shift
done
[ ${#revisions[@]} -gt 0 ] || revisions=(2025-11-25 2026-07-28)

home="$("$here/node_tools.sh")" || exit 2
node="$home/node_modules/.bin/node"
suite="$home/node_modules/@modelcontextprotocol/conformance"

# Wait for the server: bash's /dev/tcp, so a server still starting is not a wall of failures.
if [[ "$url" =~ ^(https?)://(\[([^]]+)\]|([^/:]+))(:([0-9]+))? ]]; then
    host="${BASH_REMATCH[3]:-${BASH_REMATCH[4]}}"
    port="${BASH_REMATCH[6]:-$([ "${BASH_REMATCH[1]}" = https ] && echo 443 || echo 80)}"
else
    usage
fi
deadline=$((SECONDS + ${MCP_CONFORMANCE_WAIT:-15}))
until (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "conformance: nothing listens at $host:$port (start the server first, e.g. make conformance-server)" >&2
        exit 2
    fi
    sleep 0.2
done

if [ -n "${MCP_CONFORMANCE_RESULTS:-}" ]; then
    results="$MCP_CONFORMANCE_RESULTS"
    mkdir -p "$results" || exit 2
else
    results="$(mktemp -d)" || exit 2
    trap 'rm -rf "$results"' EXIT
fi

version="$("$node" -p 'require(process.argv[1]).version' "$suite/package.json")"
for rev in "${revisions[@]}"; do
    out="$results/$rev"
    rm -rf "$out" && mkdir -p "$out" || exit 2
    if [ "$rev" = custom ]; then args=(); else args=(--requirements "$rev"); fi
    echo "conformance: running $rev (suite $version) against $url" >&2
    # The suite exits 1 when any scenario fails; the summary below decides from checks.json.
    "$node" "$suite/dist/index.js" server --url "$url" "${args[@]}" "${extra[@]}" -o "$out" >"$out/suite.log" 2>&1
done
"$node" "$here/conformance_summary.mjs" "$results" "${revisions[@]}"
