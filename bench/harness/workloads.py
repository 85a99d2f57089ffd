"""The workloads (one fixed JSON-RPC request each) and the checks a good response passes.

Every response is checked twice over: once in full by :func:`check_response` (the preflight:
status, JSON-RPC result, tool result, SSE events), then by wrk on every request with a
substring taken from that preflight response's own spelling (:func:`expectation`, checked in
``check.lua``), so a server that answers fast with errors cannot look good.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
PV_KEY = "io.modelcontextprotocol/protocolVersion"
ACCEPT = "application/json, text/event-stream"
TENANT = "acme"  # workload d's X-Tenant header
LOOKUP_RESULT = {"value": "v1", "tenant": TENANT}
PROGRESS_TOKEN = "t1"
NOTE_URI = "bench://note"  # workloads r, rm (bench/servers/tools.py serves it)
NOTE_TEXT = "A small note: the benchmark reads it as a resource."
GREETING = "Hello, Ada!"  # workloads g, gm: prompts/get greet {"who": "Ada"}
COUNTDOWN_N = 10


@dataclass(frozen=True)
class Workload:
    """One request, replayed by wrk: ``body`` (JSON-RPC, id 1) and ``headers``.

    ``check``: what a good response holds (``add`` → 5, ``list`` → the tool count, ``lookup`` →
    :data:`LOOKUP_RESULT`, ``countdown`` → :data:`COUNTDOWN_N` progress events then the result,
    ``read`` → :data:`NOTE_TEXT` as the first contents, ``prompt`` → :data:`GREETING` as the first message).
    ``session``: initialize once, then every request carries ``Mcp-Session-Id`` and its own id.
    """

    id: str
    title: str
    body: dict[str, Any]
    headers: dict[str, str]
    check: str = "add"
    session: bool = False

    def body_bytes(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":")).encode()


def _legacy(method: str, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return body, {"Accept": ACCEPT, "MCP-Protocol-Version": LEGACY}


def _modern(method: str, params: dict[str, Any], name: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {PV_KEY: MODERN, "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0"},
            "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return body, headers


def _make() -> dict[str, Workload]:
    add = {"name": "add", "arguments": {"a": 2, "b": 3}}
    countdown = {"name": "countdown", "arguments": {"n": COUNTDOWN_N}, "_meta": {"progressToken": PROGRESS_TOKEN}}
    a, b, c, cm = _legacy("tools/call", add), _modern("tools/call", add, "add"), _legacy("tools/list", {}), _modern("tools/list", {}, None)
    d = _legacy("tools/call", {"name": "lookup", "arguments": {"key": "k1"}})
    p = _legacy("tools/call", countdown)
    read, prompt = {"uri": NOTE_URI}, {"name": "greet", "arguments": {"who": "Ada"}}
    out = [
        Workload("a", "tools/call add, 2025-11-25, no session", *a),
        Workload("b", "tools/call add, 2026-07-28 _meta envelope + headers", *b),
        Workload("c", "tools/list (every tool, one page), 2025-11-25", *c, check="list"),
        Workload("cm", "tools/list (every tool, one page), 2026-07-28", *cm, check="list"),
        Workload("d", "tools/call lookup: yield dependency + X-Tenant header, 2025-11-25", d[0],
                 {**d[1], "X-Tenant": TENANT}, check="lookup"),
        Workload("s", "tools/call add in a 2025-11-25 session", *a, session=True),
        Workload("p", f"tools/call countdown: {COUNTDOWN_N} progress notifications on SSE, 2025-11-25", *p, check="countdown"),
        Workload("r", f"resources/read {NOTE_URI} (small text), 2025-11-25", *_legacy("resources/read", read), check="read"),
        Workload("rm", f"resources/read {NOTE_URI} (small text), 2026-07-28", *_modern("resources/read", read, NOTE_URI), check="read"),
        Workload("g", "prompts/get greet {who: Ada}, 2025-11-25", *_legacy("prompts/get", prompt), check="prompt"),
        Workload("gm", "prompts/get greet {who: Ada}, 2026-07-28", *_modern("prompts/get", prompt, "greet"), check="prompt"),
    ]
    return {w.id: w for w in out}


WORKLOADS: dict[str, Workload] = _make()
DEFAULT_WORKLOADS = ["a", "b", "c", "cm", "d"]


def sse_messages(raw: bytes) -> list[Any]:
    """The JSON payloads of an SSE body, one per event with ``data:`` (CRLF or LF framing).

    Raises:
        ValueError: an event's data is not JSON.
    """
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
    out = []
    for event in text.split("\n\n"):
        data = "\n".join(line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:"))
        if data.strip():
            out.append(json.loads(data))
    return out


def structured(result: dict[str, Any]) -> Any:
    """``structuredContent``, else the first text block that parses as JSON, else None."""
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    for block in result.get("content") or []:
        try:
            return json.loads(block.get("text"))
        except (TypeError, ValueError, AttributeError):
            continue
    return None


def _check_countdown(raw: bytes, content_type: str) -> tuple[bool, str]:
    if not content_type.startswith("text/event-stream"):
        return False, f"{content_type or 'no content-type'}, not SSE (progress dropped?): {raw[:200]!r}"
    try:
        msgs = sse_messages(raw)
    except ValueError:
        return False, f"SSE data that is not JSON: {raw[:200]!r}"
    got = [(m.get("params") or {}) for m in msgs if isinstance(m, dict) and m.get("method") == "notifications/progress"]
    steps = [(p.get("progressToken"), p.get("progress"), p.get("total")) for p in got]
    if steps != [(PROGRESS_TOKEN, i, COUNTDOWN_N) for i in range(1, COUNTDOWN_N + 1)]:
        return False, f"{len(steps)} progress events, expected {COUNTDOWN_N} ({PROGRESS_TOKEN!r}, 1..{COUNTDOWN_N} of {COUNTDOWN_N})"
    final = msgs[-1]
    if not isinstance(final, dict) or final.get("id") != 1 or "result" not in final:
        return False, f"the last event is not the call's result: {raw[-200:]!r}"
    if structured(final["result"]) != {"done": COUNTDOWN_N}:
        return False, f"wrong countdown result: {raw[-200:]!r}"
    return True, "ok"


def check_response(wl: Workload, status: int, content_type: str, raw: bytes, n_tools: int) -> tuple[bool, str]:
    """Whether one response is a good answer to ``wl``: ``(ok, why)``; ``why`` says what is wrong."""
    if status != 200:
        return False, f"HTTP {status}: {raw[:200]!r}"
    if wl.check == "countdown":
        return _check_countdown(raw, content_type)
    try:
        msg = json.loads(raw)
    except ValueError:
        return False, f"not a JSON body ({content_type}): {raw[:200]!r}"
    result = msg.get("result") if isinstance(msg, dict) else None
    if not isinstance(result, dict) or msg.get("id") != 1:
        return False, f"no result for id 1: {raw[:200]!r}"
    if wl.check == "read":
        contents = result.get("contents") or [{}]
        return (True, "ok") if contents[0].get("text") == NOTE_TEXT else (False, f"wrong contents: {raw[:200]!r}")
    if wl.check == "prompt":
        messages = result.get("messages") or [{}]
        text = (messages[0].get("content") or {}).get("text")
        return (True, "ok") if text == GREETING else (False, f"wrong messages: {raw[:200]!r}")
    if wl.check == "list":
        names = [t.get("name") for t in result.get("tools") or []]
        if len(names) == n_tools and "add" in names:
            return True, "ok"
        return False, f"tools/list gave {len(names)} tools, expected {n_tools}"
    if result.get("isError"):
        return False, f"tool error: {raw[:200]!r}"
    want = {"result": 5} if wl.check == "add" else LOOKUP_RESULT
    got = structured(result)
    if got == want or (wl.check == "add" and got == 5):
        return True, "ok"
    return False, f"wrong result {got!r}, expected {want!r}"


def expectation(wl: Workload, raw: bytes, n_tools: int) -> tuple[str, str, int]:
    """What wrk checks in every response: ``(substring, repeated, count)``.

    ``substring`` must occur in each body; ``repeated`` exactly ``count`` times (workload p:
    the progress token, once per notification). Taken from the spelling of ``raw``, a response
    :func:`check_response` accepted; ``("", "", 0)`` when none of the known spellings occurs.
    """
    text = raw.decode(errors="replace")
    spell = [(", ", ": "), (",", ":")]  # spaced or compact JSON
    if wl.check == "add":
        candidates = ['"text":"5"', '"text": "5"', '"result":5', '"result": 5']
    elif wl.check == "lookup":
        candidates = [json.dumps(LOOKUP_RESULT, separators=s) for s in spell] + ['"tenant":"acme"', '"tenant": "acme"']
    elif wl.check == "countdown":
        candidates = [json.dumps({"done": COUNTDOWN_N}, separators=s) for s in spell]
    elif wl.check in ("read", "prompt"):
        candidates = [json.dumps(NOTE_TEXT if wl.check == "read" else GREETING)]
    else:
        last = f"tool_{n_tools - 2:03d}" if n_tools > 1 else "add"
        candidates = [f'"name":"{last}"', f'"name": "{last}"']
    substring = next((c for c in candidates if c in text), "")
    if wl.check != "countdown":
        return substring, "", 0
    for token in (f'"progressToken":"{PROGRESS_TOKEN}"', f'"progressToken": "{PROGRESS_TOKEN}"'):
        if text.count(token) == COUNTDOWN_N:
            return substring, token, COUNTDOWN_N
    return substring, "", 0
