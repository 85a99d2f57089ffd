"""The official MCP conformance suite against examples/conformance_server.py (both eras).

Runs ``../shared/tools/conformance`` (node; installs itself once) against a real uvicorn
server on 127.0.0.1. Each scenario this project's surface serves must pass; the test fails
when one of them fails. ``server-stateless`` is checked check by check: every discover,
envelope, version, header and removed-method check must succeed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
TOOL = Path(os.environ.get("MCP_CONFORMANCE_TOOL", ROOT.parent / "shared" / "tools" / "conformance"))
HOME = Path(os.environ.get("MCP_CONFORMANCE_HOME", Path.home() / ".cache" / "mcp-conformance"))

REQUIRED = {
    "2025-11-25": {
        "server-initialize",
        "logging-set-level",
        "ping",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-with-logging",
        "tools-call-error",
        "tools-call-with-progress",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
        "server-session-lifecycle",
        "json-schema-2020-12",
    },
    "2026-07-28": {
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-error",
        "tools-call-with-progress",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
        "http-header-validation",
        "http-custom-header-server-validation",
        "json-schema-2020-12",
    },
}
# server-stateless checks that need features outside this surface (MRTR elicitation,
# subscriptions/listen); every other check of the scenario must succeed.
STATELESS_NOT_YET = {"sep-2575-http-server-no-independent-requests-on-stream"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    if not TOOL.exists():
        pytest.fail(f"conformance tool not found at {TOOL}")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "conformance_server.py"), str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("conformance server did not start")
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_required_scenarios_pass_in_both_eras(server_url: str) -> None:
    run = subprocess.run(
        ["bash", str(TOOL), server_url, "2025-11-25", "2026-07-28"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = run.stdout + run.stderr
    assert "conformance:" in output, output[-3000:]
    failed: dict[str, set[str]] = {"2025-11-25": set(), "2026-07-28": set()}
    for revision, name in re.findall(r"^FAILED \((\S+)\): (\S+)$", output, re.MULTILINE):
        failed.setdefault(revision, set()).add(name)
    ran = re.findall(r"^[✓✗] (\S+):", output, re.MULTILINE)
    for revision, required in REQUIRED.items():
        assert not (required & failed[revision]), f"{revision}: failed {sorted(required & failed[revision])}\n{output[-4000:]}"
        assert required <= set(ran), f"{revision}: did not run {sorted(required - set(ran))}"


def test_server_stateless_checks(server_url: str) -> None:
    node = HOME / "node_modules" / ".bin" / "node"
    cli = HOME / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.exists() and cli.exists()):
        pytest.fail("conformance suite not installed (test_required_scenarios_pass_in_both_eras installs it)")
    out = Path(tempfile.mkdtemp(prefix="mcp-conf-"))
    try:
        subprocess.run(
            [str(node), str(cli), "server", "--url", server_url, "--scenario", "server-stateless", "--spec-version", "2026-07-28", "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        checks = [c for f in out.glob("*/checks.json") for c in json.loads(f.read_text())]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    assert len(checks) >= 25
    failures = {c["id"] for c in checks if c["status"] == "FAILURE"}
    assert failures <= STATELESS_NOT_YET, sorted(failures)
    succeeded = {c["id"] for c in checks if c["status"] == "SUCCESS"}
    for must in (
        "sep-2575-request-meta-invalid-missing-meta",
        "sep-2575-request-meta-invalid-missing-protocol-version",
        "sep-2575-request-meta-invalid-missing-client-capabilities",
        "sep-2575-request-meta-client-info-optional",
        "sep-2575-server-implements-discover",
        "sep-2575-server-identifies-in-result-meta",
        "sep-2575-discover-capabilities-match-handlers",
        "sep-2575-server-unsupported-version-error",
        "sep-2575-http-server-unsupported-version-400",
        "sep-2575-http-server-header-mismatch-400",
        "sep-2575-server-rejects-undeclared-capability",
        "sep-2575-missing-capability-http-400",
        "sep-2575-http-server-method-not-found-404-initialize",
        "sep-2575-http-server-method-not-found-404-ping",
        "sep-2575-http-server-method-not-found-404",
        "sep-2575-server-no-log-without-loglevel",
        "sep-2575-http-server-error-jsonrpc-id",
    ):
        assert must in succeeded, f"{must} did not succeed"
