"""The official MCP conformance suite against examples/conformance_server.py (both eras).

Runs ``scripts/conformance.sh`` (which installs the pinned suite and Node.js 22 once, into a
cache outside the repository) against a real uvicorn server on 127.0.0.1. Each scenario this
project's surface serves must pass in each revision; the test fails when one of them fails.
``server-stateless`` is checked check by check: every discover, envelope, version, header and
removed-method check must succeed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import uvicorn_server

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "conformance.sh"
SCENARIO_LINE = re.compile(r"^([✓✗]) (\S+) \((\S+)\): (\d+) passed, (\d+) failed", re.MULTILINE)

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
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
        "server-session-lifecycle",
        "json-schema-2020-12",
        "server-sse-polling",
        "completion-complete",
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "resources-subscribe",
        "resources-unsubscribe",
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
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
        "server-stateless",
        "input-required-result-basic-elicitation",
        "input-required-result-basic-sampling",
        "input-required-result-basic-list-roots",
        "input-required-result-request-state",
        "input-required-result-multiple-input-requests",
        "input-required-result-multi-round",
        "input-required-result-missing-input-response",
        "input-required-result-result-type",
        "input-required-result-unsupported-methods",
        "input-required-result-tampered-state",
        "input-required-result-capability-check",
        "input-required-result-ignore-extra-params",
        "input-required-result-validate-input",
        "completion-complete",
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "sep-2164-resource-not-found",
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
        "caching",
        # the tasks extension io.modelcontextprotocol/tasks (SEP-2663; the suite counts them apart)
        "tasks-lifecycle",
        "tasks-capability-negotiation",
        "tasks-wire-fields",
        "tasks-request-state-removal",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-dispatch-and-envelope",
        "tasks-status-notifications",
        "tasks-required-task-error",
        "tasks-mrtr-composition",
    },
}
# input_required on prompts/get (the fixture test_input_required_result_prompt): required as soon
# as the conformance server serves prompts at all.
NEEDS_PROMPTS = {"2026-07-28": {"input-required-result-non-tool-request"}}
# Scenarios whose every check must succeed outright: a WARNING fails them here.
NO_WARNINGS = {
    "2025-11-25": {"tools-call-sampling", "tools-call-elicitation", "elicitation-sep1034-defaults", "elicitation-sep1330-enums"},
    "2026-07-28": {name for name in REQUIRED["2026-07-28"] if name.startswith(("input-required-result-", "tasks-"))} | {"server-stateless"},
}
# server-stateless checks that need features outside this surface; every other check of the
# scenario must succeed (none today).
STATELESS_NOT_YET: set[str] = set()


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with uvicorn_server("examples.conformance_server:app") as url:
        yield url


def run_conformance(url: str, *args: str, results: Path | None = None, timeout: float = 900) -> str:
    """Run scripts/conformance.sh; return its stdout + stderr."""
    env = dict(os.environ)
    if results is not None:
        env["MCP_CONFORMANCE_RESULTS"] = str(results)
    run = subprocess.run(["bash", str(SCRIPT), url, *args], capture_output=True, text=True, timeout=timeout, env=env)
    output = run.stdout + run.stderr
    print(output)  # the per-scenario summary, shown by `pytest -rP` (make conformance)
    assert run.returncode in (0, 1), f"conformance.sh exited {run.returncode}:\n{output[-3000:]}"
    return output


def warnings_of(results: Path, revision: str, scenarios: set[str]) -> list[str]:
    """``scenario: check`` of every WARNING check of ``scenarios`` in the saved results."""
    found: list[str] = []
    for path in (results / revision).glob("server-*/checks.json"):
        scenario = re.sub(r"^server-|-\d{4}-\d{2}-\d{2}T.*$", "", path.parent.name)
        if scenario in scenarios:
            found.extend(f"{scenario}: {c['id']}" for c in json.loads(path.read_text()) if c["status"] == "WARNING")
    return found


def test_required_scenarios_pass_in_both_eras(server_url: str, tmp_path: Path) -> None:
    output = run_conformance(server_url, "2025-11-25", "2026-07-28", results=tmp_path)
    assert "conformance:" in output, output[-3000:]
    failed: dict[str, set[str]] = {"2025-11-25": set(), "2026-07-28": set()}
    for revision, name in re.findall(r"^FAILED \((\S+)\): (\S+)$", output, re.MULTILINE):
        failed.setdefault(revision, set()).add(name)
    ran: dict[str, set[str]] = {"2025-11-25": set(), "2026-07-28": set()}
    for mark, name, revision, _passed, bad in SCENARIO_LINE.findall(output):
        ran.setdefault(revision, set()).add(name)
        if mark == "✗":  # an extension scenario (tasks-*) has no FAILED line of its own
            failed.setdefault(revision, set()).add(name)
        assert (mark == "✗") == (int(bad) > 0), f"{name} ({revision}): mark {mark} with {bad} failed checks"
    for revision, required in REQUIRED.items():
        if "prompts-list" in ran[revision] and "prompts-list" not in failed[revision]:
            required = required | NEEDS_PROMPTS.get(revision, set())
        assert not (required & failed[revision]), f"{revision}: failed {sorted(required & failed[revision])}\n{output[-4000:]}"
        assert required <= ran[revision], f"{revision}: did not run {sorted(required - ran[revision])}"
        checked = required | NO_WARNINGS.get(revision, set())
        assert not warnings_of(tmp_path, revision, checked), warnings_of(tmp_path, revision, checked)


def test_server_stateless_checks(server_url: str, tmp_path: Path) -> None:
    run_conformance(server_url, "custom", "--", "--scenario", "server-stateless", "--spec-version", "2026-07-28", results=tmp_path, timeout=300)
    checks = [c for f in (tmp_path / "custom").glob("server-server-stateless-*/checks.json") for c in json.loads(f.read_text())]
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
        "sep-2575-server-sends-subscription-ack",
        "sep-2575-server-tags-subscription-id",
        "sep-2575-server-honors-notification-filter",
        "sep-2575-server-sends-tools-list-changed-on-subscription",
        "sep-2575-http-server-no-independent-requests-on-stream",
    ):
        assert must in succeeded, f"{must} did not succeed"


def test_server_sse_polling_checks_all_succeed(server_url: str, tmp_path: Path) -> None:
    """2025-11-25 SSE polling (SEP-1699): a priming event first, a retry field, and the answer after
    the server closed the connection and the client resumed with GET + Last-Event-ID. A check
    the suite only warns about counts here: every one must succeed."""
    run_conformance(server_url, "custom", "--", "--scenario", "server-sse-polling", "--spec-version", "2025-11-25", results=tmp_path, timeout=300)
    checks = [c for f in (tmp_path / "custom").glob("server-server-sse-polling-*/checks.json") for c in json.loads(f.read_text())]
    scored = {c["id"]: c["status"] for c in checks if c["status"] != "INFO"}
    assert scored == {
        "server-sse-priming-event": "SUCCESS",
        "server-sse-retry-field": "SUCCESS",
        "server-sse-disconnect-resume": "SUCCESS",
    }, checks
