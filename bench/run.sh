#!/usr/bin/env bash
# Thin wrapper: run the shared MCP benchmark harness against this project (examples/bench_app.py).
#
#   bench/run.sh                      # project vs peer-sdk + ceiling-fastapi, a b c cm, c=1 and 32, 3 x 4 s
#   bench/run.sh -- -w a -w b --conc 32  # anything after -- replaces the default bench.py options
#
# The harness lives in ../shared/bench (override with BENCH_HARNESS). The project is imported from this
# checkout through PYTHONPATH by the harness's own venv (~/.cache/mcp-bench-venv), the same interpreter
# and package set as the peers and ceilings. Results land in bench/results/ (gitignored).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HARNESS="${BENCH_HARNESS:-$ROOT/../shared/bench}"
cd "$ROOT"
opts=(--no-ceilings --reps 3 --duration 4 --max-minutes 12)
if [ "${1:-}" = "--" ]; then shift; opts=(--no-ceilings "$@"); fi
exec "$HARNESS/run.sh" project peer-sdk ceiling-fastapi -- "${opts[@]}"
