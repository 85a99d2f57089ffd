#!/usr/bin/env bash
# Instructions per call of one workload on one app, counted by valgrind (callgrind): repeatable where
# wall-clock timings on a shared machine are not. Two runs (N1 and N2 calls); the difference of the
# totals divided by N2 - N1 cancels start-up and import costs.
#
#   bench/callgrind_call.sh d project      # or: d fastapi, a project, a fastapi
#   bench/callgrind_call.sh otel default   # workload a on a bench_auth_otel.py variant (off, floor, required...)
#   KEEP=dir bench/callgrind_call.sh ...   # keep the callgrind files there (callgrind_annotate)

set -euo pipefail
shopt -s inherit_errexit  # a failed run stops the script (its log: the profiled process's stderr) instead of counting ~0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PY:-$ROOT/.venv/bin/python}"
workload="${1:-d}"; app="${2:-project}"; n1="${N1:-200}"; n2="${N2:-1200}"
if [ -n "${KEEP:-}" ]; then out="$KEEP"; mkdir -p "$out"; else out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT; fi
if [ "$workload" = otel ]; then driver=("$ROOT/bench/bench_auth_otel.py" --part otel --only "$app"); else driver=("$ROOT/bench/profile_call.py" "$workload" --only "$app"); fi
# One callgrind file per thread (cg.N-01 is the main thread: the request path); the SDK's export
# threads run on 5-second timers, so their share grows the slower valgrind goes: both are shown.
total() {
  PYTHONPATH="${PYTHONPATH:-}" PYTHONHASHSEED=0 valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg.$1" \
    "$PY" "${driver[@]}" --calls "$1" >/dev/null 2>"$out/log.$1" || { tail -20 "$out/log.$1" >&2; exit 1; }
  local main all=0 f n
  main="$(grep -h -m1 -E '^(summary|totals):' "$out/cg.$1-01" 2>/dev/null | awk '{print $2}' || true)"
  for f in "$out/cg.$1" "$out/cg.$1"-*; do
    [ -f "$f" ] || continue; n="$(grep -h -m1 -E '^(summary|totals):' "$f" | awk '{print $2}' || true)"; all=$(( all + ${n:-0} ))
  done
  echo "${main:-$all} $all"
}
read -r m1 a1 <<<"$(total "$n1")"; read -r m2 a2 <<<"$(total "$n2")"
echo "$workload $app: $(( (m2 - m1) / (n2 - n1) )) instructions per call in the main thread, $(( (a2 - a1) / (n2 - n1) )) in all threads ($n1 → $n2 calls)"
