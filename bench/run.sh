#!/usr/bin/env bash
# Run the benchmark (bench/harness): the project vs the official SDK, FastMCP and a bare-FastAPI ceiling.
#
#   bench/run.sh                       # workloads a b c cm d, 3 reps x 3 s (= make bench)
#   bench/run.sh --all --reps 5        # every workload (a b c cm d s p)
#   bench/run.sh -w d -s project -s sdk --duration 5
#   bench/run.sh --help
#
# Installs wrk (apt, when root) and the peers' venv (~/.cache/fastapi-mcp-ctx/bench-venv) on first use.
# Results: bench/results/ (gitignored).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
exec "$PY" -m bench.harness "$@"
