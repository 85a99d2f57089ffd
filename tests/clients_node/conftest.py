"""Fixtures of the outside-client tests: the pinned Node.js tools and the quickstart on uvicorn.

``node_tools`` runs ``scripts/node_tools.sh`` (installs, once, Node.js 22, the MCP Inspector
and the official TypeScript SDK clients into a cache outside the repository; a cold install
takes about 15-30 s) and gives the cache's ``node`` binary. ``quickstart_url`` serves
``examples.quickstart:app`` with uvicorn in a child process on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from serving import ROOT, uvicorn_server

QUICKSTART_TOOLS = {"add", "add_note", "whoami", "count_to", "find_note", "remember", "recall"}


@dataclass(frozen=True)
class NodeTools:
    """The cache ``scripts/node_tools.sh`` installed into."""

    home: Path

    @property
    def node(self) -> Path:
        return self.home / "node_modules" / ".bin" / "node"

    def package_bin(self, package: str, name: str) -> Path:
        """The file a package's ``bin`` entry ``name`` names (run it with :attr:`node`)."""
        root = self.home / "node_modules" / package
        return root / json.loads((root / "package.json").read_text())["bin"][name]

    def run(
        self, args: Sequence[str], *, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run the cache's node with ``args``, working directory the cache; bounded by ``timeout`` seconds."""
        return subprocess.run(
            [str(self.node), *args], input=stdin, capture_output=True, text=True, cwd=self.home, env=env, timeout=timeout
        )


@pytest.fixture(scope="session")
def node_tools() -> NodeTools:
    run = subprocess.run(["bash", str(ROOT / "scripts" / "node_tools.sh")], capture_output=True, text=True, timeout=900)
    if run.returncode != 0:
        pytest.fail(f"scripts/node_tools.sh failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return NodeTools(Path(run.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="package")
def quickstart_url() -> Iterator[str]:
    with uvicorn_server("examples.quickstart:app") as url:
        yield url
