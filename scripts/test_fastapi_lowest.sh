#!/usr/bin/env bash
# Run the dependency-bridge tests against the LOWEST FastAPI that pyproject.toml admits
# (the main venv has the highest). _fastapi_compat.py is the only module touching FastAPI
# internals; this keeps it honest across the admitted range.
set -euo pipefail
cd "$(dirname "$0")/.."
LOWEST=$(grep -oE '"fastapi>=[0-9.]+' pyproject.toml | head -1 | cut -d'=' -f2)
VENV=.venv-fastapi-lowest
PY="$(command -v python3.11 || command -v python3)"
if [ ! -x "$VENV/bin/python" ] || [ "$("$VENV/bin/python" -c 'import fastapi; print(fastapi.__version__)' 2>/dev/null)" != "$LOWEST" ]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q "fastapi==$LOWEST" -e . httpx pytest pytest-asyncio uvicorn 2>&1 | grep -v "is ignored" || true
fi
echo "== dependency bridge on FastAPI $("$VENV/bin/python" -c 'import fastapi; print(fastapi.__version__)')"
"$VENV/bin/pytest" -q -p no:cacheprovider tests/test_dependencies.py tests/test_dependency_arguments.py tests/test_call_path.py tests/test_tools.py tests/test_route.py tests/test_lean_route.py tests/test_auth.py tests/test_auth_adversarial.py tests/test_stdio_units.py tests/test_solve_shortcuts.py
