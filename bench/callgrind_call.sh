#!/usr/bin/env bash
# Instructions per call of one workload on one app, counted by valgrind (callgrind): repeatable where
# wall-clock timings on a shared machine are not. Two runs (N1 and N2 calls); the difference of the
# totals divided by N2 - N1 cancels start-up and import costs.
#
#   bench/callgrind_call.sh d project      # or: d fastapi, a project, a fastapi
set -euo pipefail
shopt -s inherit_errexit  # a failed run stops the script (its log: the profiled process's stderr) instead of counting ~0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PY:-$ROOT/.venv/bin/python}"
workload="${1:-d}"; app="${2:-project}"; n1="${N1:-200}"; n2="${N2:-1200}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
total() {
  PYTHONPATH="${PYTHONPATH:-}" PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file="$out/cg.$1" \
    "$PY" "$ROOT/bench/profile_call.py" "$workload" --only "$app" --calls "$1" >/dev/null 2>"$out/log.$1" || { tail -20 "$out/log.$1" >&2; exit 1; }
  grep -m1 '^summary:' "$out/cg.$1" | awk '{print $2}'
}
t1="$(total "$n1")"; t2="$(total "$n2")"
echo "$workload $app: $(( (t2 - t1) / (n2 - n1) )) instructions per call ($n1 → $n2 calls)"
