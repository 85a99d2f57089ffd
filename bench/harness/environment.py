"""What the runner needs on the machine: ``wrk`` (Debian package) and the peers' venv.

The peers run from their own venv (default ``~/.cache/fastapi-mcp-ctx/bench-venv``, or
``$BENCH_VENV``) with the exact versions of ``bench/requirements.txt`` (``mcp``, ``fastmcp``,
``fastapi``, ``uvicorn[standard]`` and everything they pull in, pinned). By default the project
runs from the same venv, importing ``fastapi_mcp_ctx`` from this checkout through ``PYTHONPATH``
(its dependencies are in that set), so every server shares one interpreter and package stack.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .servers import ROOT

REQUIREMENTS = ROOT / "bench" / "requirements.txt"


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("BENCH_VENV") or cache / "fastapi-mcp-ctx" / "bench-venv")


def ensure_wrk() -> str:
    """The path of ``wrk``; installs the Debian package when absent and running as root.

    Raises:
        SystemExit: wrk is absent and cannot be installed here (says how to install it).
    """
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing wrk (apt-get install wrk)", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
            subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], env=env, check=False)
        found = shutil.which("wrk")
        if found:
            return found
    raise SystemExit("wrk not found: install it (Debian/Ubuntu: sudo apt-get install wrk; macOS: brew install wrk)")


def ensure_venv(venv: Path) -> str:
    """The Python of the peers' venv, created or re-synced when ``bench/requirements.txt`` changed.

    Raises:
        SystemExit: venv creation or ``pip install`` failed.
    """
    python = venv / "bin" / "python"
    stamp = venv / (".installed-" + hashlib.sha1(REQUIREMENTS.read_bytes()).hexdigest()[:12])
    if python.exists() and stamp.exists():
        return str(python)
    print(f"preparing the peers' venv {venv} (bench/requirements.txt)", flush=True)
    if not python.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        if subprocess.run([base, "-m", "venv", str(venv)]).returncode != 0:
            raise SystemExit(f"could not create {venv} with {base} -m venv (Debian: apt-get install python3-venv)")
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(REQUIREMENTS)]
    if subprocess.run(pip).returncode != 0:
        raise SystemExit(f"pip install -r {REQUIREMENTS} failed in {venv}")
    for old in venv.glob(".installed-*"):
        old.unlink()
    stamp.touch()
    return str(python)


def versions(python: str) -> dict[str, str]:
    """Python and the versions of the packages that matter, as installed for ``python``."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {'python': sys.version.split()[0]}\n"
        "for p in ('fastapi', 'starlette', 'pydantic', 'pydantic-core', 'uvicorn', 'httptools', 'uvloop', 'anyio',"
        " 'mcp', 'fastmcp'):\n"
        "    try: out[p] = m.version(p)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr[-300:]}
