"""Before any load: send each workload's request once, check the answer in full, learn what wrk checks.

A workload a server answers wrongly is skipped for that server (reported with the reason), not the
whole run. Workload s first opens a 2025 session (``initialize`` + ``notifications/initialized``);
its requests then carry that ``Mcp-Session-Id``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from .servers import ServerProcess
from .workloads import ACCEPT, LEGACY, Workload, check_response, expectation
from .wrk import Expect


@dataclass
class Preflight:
    """The outcome for one server process and workload."""

    ok: bool
    why: str
    expect: Expect = field(default_factory=Expect)
    headers: dict[str, str] = field(default_factory=dict)  # extra request headers (the session's)
    content_type: str = ""
    response_bytes: int = 0


def http_post(url: str, body: bytes, headers: dict[str, str], timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """One POST (loopback); ``(status, lower-cased headers, body)``, HTTP errors included."""
    req = urllib.request.Request(url, data=body, method="POST", headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def open_session(url: str) -> dict[str, str] | None:
    """``initialize`` (2025-11-25) + ``notifications/initialized``; the session header, None if none given."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1.0"}}}  # fmt: skip
    status, headers, _ = http_post(url, json.dumps(init).encode(), {"Accept": ACCEPT})
    sid = headers.get("mcp-session-id")
    if status != 200 or not sid:
        return None
    session = {"Mcp-Session-Id": sid}
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    http_post(url, note, {"Accept": ACCEPT, "MCP-Protocol-Version": LEGACY, **session})
    return session


def preflight(server: ServerProcess, wl: Workload, n_tools: int) -> Preflight:
    """Send ``wl`` once to ``server`` as wrk will, check the response, derive wrk's :class:`Expect`."""
    extra: dict[str, str] = {}
    if wl.session:
        session = open_session(server.url)
        if session is None:
            return Preflight(False, "initialize gave no Mcp-Session-Id (the server runs stateless)")
        extra = session
    status, headers, raw = http_post(server.url, wl.body_bytes(), {**wl.headers, **extra})
    content_type = headers.get("content-type", "")
    ok, why = check_response(wl, status, content_type, raw, n_tools)
    if not ok:
        return Preflight(False, why, content_type=content_type, response_bytes=len(raw))
    substring, repeated, count = expectation(wl, raw, n_tools)
    if not substring or (wl.check == "countdown" and not repeated):
        return Preflight(False, f"no known spelling of the expected result in {raw[:200]!r}")
    return Preflight(True, "ok", Expect(substring, repeated, count), extra, content_type, len(raw))
