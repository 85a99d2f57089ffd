#!/usr/bin/env bash
# Sample one uvicorn worker with py-spy while wrk drives workload d (or a) at 32 connections, then
# summarize where its CPU went (bench/pyspy_summary.py): the harness's servers, this checkout's package.
#
#   bench/pyspy_load.sh examples.bench_app:app d              # fastapi_mcp_ctx (the benchmark app)
#   bench/pyspy_load.sh bench.servers.fastapi_ceiling:app d   # bare FastAPI, the same dependencies on the route
#   PKG=/path/to/other/checkout bench/pyspy_load.sh examples.bench_app:app d   # another copy of the package
#
# Needs py-spy (PY_SPY=path, else on PATH: `pip install --target <dir> py-spy`) and wrk; the servers
# and the response check are this repository's harness (bench/servers, bench/harness/check.lua).
# Server on CPU 0, wrk on CPU 1, loopback only,
# bounded (DURATION seconds, default 12). Raw stacks and the server log go to bench/results/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
APP="${1:-examples.bench_app:app}"; WORKLOAD="${2:-d}"
PKG="${PKG:-$ROOT}"; PY="${PY:-$ROOT/.venv/bin/python}"; PY_SPY="${PY_SPY:-py-spy}"
PORT="${PORT:-18931}"; DURATION="${DURATION:-12}"
OUT="$ROOT/bench/results/pyspy-${APP%%:*}-$WORKLOAD"
mkdir -p "$ROOT/bench/results"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ "$WORKLOAD" = d ]; then
  printf '%s' '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup","arguments":{"key":"k1"}}}' > "$work/body"
  expect='{"value":"v1","tenant":"acme"}'
else
  printf '%s' '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}' > "$work/body"
  expect='"text":"5"'
fi
printf 'Accept: application/json, text/event-stream\nMCP-Protocol-Version: 2025-11-25\nX-Tenant: acme\n' > "$work/headers"
cd "$ROOT"
(cd "$ROOT" && PYTHONPATH="$PKG:$ROOT" BENCH_TOOLS=100 "$PY" -m bench.harness.capture "$work/tools.json")  # the ceiling's static tools/list
BENCH_TOOLS=100 BENCH_TOOLS_LIST="$work/tools.json" BENCH_EXTRA_TOOLS=$([ "$WORKLOAD" = d ] && echo 1 || echo 0) PYTHONPATH="$PKG:$ROOT" \
  taskset -c 0 "$PY_SPY" record -r 400 --format raw -o "$OUT.raw" --nonblocking -- \
  "$PY" -m uvicorn "$APP" --host 127.0.0.1 --port "$PORT" --loop uvloop --http httptools --log-level warning \
  > "$OUT.log" 2>&1 &
spy=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.2; done
sleep 1
BENCH_BODY="$work/body" BENCH_HEADERS="$work/headers" BENCH_EXPECT="$expect" \
  taskset -c 1 timeout $((DURATION + 20)) wrk -t1 -c32 -d"${DURATION}s" --timeout 10s -s "$ROOT/bench/harness/check.lua" \
  "http://127.0.0.1:$PORT/mcp" | grep '^BENCH_RESULT' | sed 's/^BENCH_RESULT //' > "$work/wrk.json"
server="$(pgrep -f -- "-m uvicorn $APP --host 127.0.0.1 --port $PORT" | head -1)"
kill -INT "$server"
wait "$spy" || true
"$PY" "$ROOT/bench/pyspy_summary.py" "$OUT.raw" --wrk "$work/wrk.json" --rate 400
