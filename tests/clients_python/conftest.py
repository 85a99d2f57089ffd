"""Fixtures of the outside Python client tests: FastMCP's client, in a virtualenv of its own.

``python_clients`` runs ``scripts/python_clients.sh`` (installs, once, the pins of
``scripts/python_clients/`` into a cache outside the repository; a cold install takes about a
minute) and gives that venv's ``python``. ``tasks_url`` serves ``tests/clients_python/tasks_app.py``
with uvicorn in a child process on 127.0.0.1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import ROOT, uvicorn_server


@pytest.fixture(scope="session")
def python_clients() -> Path:
    env = {**os.environ, "PYTHON": os.environ.get("PYTHON", sys.executable)}  # a CPython with venv: the one running the tests
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "python_clients.sh")], capture_output=True, text=True, timeout=900, env=env
    )
    if run.returncode != 0:
        pytest.fail(f"scripts/python_clients.sh failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return Path(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="package")
def tasks_url() -> Iterator[str]:
    with uvicorn_server("tests.clients_python.tasks_app:app") as url:
        yield url
