"""``fastapi-mcp-ctx check URL``: a health and protocol probe of a running MCP server (httpx).

One probe, both eras on the same endpoint:

1. 2025 handshake: ``initialize`` (2025-11-25), ``notifications/initialized``, ``tools/list``
   and the ``resources/list``, ``resources/templates/list`` and ``prompts/list`` the server's
   capabilities announce (every page, counted) on the session, then ``DELETE`` of the session,
   also when a step failed (the probe opens no GET stream, and leaves no session behind);
2. 2026-07-28: ``server/discover`` and the same lists with the required headers
   (``MCP-Protocol-Version``, ``Mcp-Method``) and the ``params._meta`` envelope.

Each step is timed (milliseconds, wall clock) and bounded: each exchange must be complete within
``timeout`` seconds (a server trickling SSE comments never holds the probe) and its body may not
exceed ``MAX_RESPONSE_BYTES`` (4 MiB, after decompression); either failure fails the step. A
transport failure (connection refused, 421 Host refused, 401, 404, a redirect (its target named:
use that URL)…) stops the probe with a message saying what to do (``_probe_answers.py``). Spec:
2025-11-25 ``basic/lifecycle`` and ``basic/transports``; 2026-07-28 ``server/discover`` and
``basic/transports/streamable-http``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import httpx

from ._probe_answers import ProbeFailure, check_status, connect_reason, read_messages

__all__ = ["MAX_RESPONSE_BYTES", "ProbeReport", "Step", "probe"]

LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
_ACCEPT = "application/json, text/event-stream"
_MAX_PAGES = 100
_CLIENT_INFO = {"name": "fastapi-mcp-ctx-check", "version": "1"}
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""The largest response body the probe reads (bytes, decoded); a larger one fails the step."""
_FRAMING = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@dataclass
class Step:
    """One probed exchange: ``name`` (``initialize``…), outcome, time in ms, facts learned."""

    era: str
    name: str
    ok: bool
    ms: float
    facts: dict[str, str] = field(default_factory=lambda: {})
    error: str | None = None


@dataclass
class ProbeReport:
    """What :func:`probe` found; ``ok`` when every step succeeded."""

    url: str
    steps: list[Step] = field(default_factory=lambda: [])
    fatal: str | None = None

    @property
    def ok(self) -> bool:
        """True when the server answered every step of both eras."""
        return self.fatal is None and bool(self.steps) and all(s.ok for s in self.steps)

    def render(self) -> str:
        """The readable report: one line per step, then its facts, then a verdict line."""
        lines = [f"MCP server at {self.url}"]
        era = ""
        width = max((len(step.name) for step in self.steps), default=16)  # resources/templates/list: 24
        for step in self.steps:
            label = step.era if step.era != era else ""
            era = step.era
            status = "ok" if step.ok else "FAILED"
            lines.append(f"  {label:<18} {step.name:<{width}} {status:<6} {step.ms:7.1f} ms")
            for key, value in step.facts.items():
                lines.append(f"  {'':<18}   {key + ':':<14} {value}")
            if step.error:
                lines.append(f"  {'':<18}   {step.error}")
        if self.fatal:
            lines.append(f"FAILED: {self.fatal}")
        elif self.ok:
            lines.append("OK: the server answers both protocol eras")
        else:
            lines.append("FAILED: " + "; ".join(f"{s.era} {s.name}: {s.error}" for s in self.steps if not s.ok))
        return "\n".join(lines)


class _Prober:
    def __init__(self, client: httpx.AsyncClient, url: str, headers: Mapping[str, str], timeout: float) -> None:
        self.client = client
        self.url = url
        self.headers = dict(headers)
        self.timeout = timeout
        self.next_id = 0

    async def rpc(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str]
    ) -> tuple[dict[str, Any], httpx.Response, float]:
        """POST one request; its ``result``, the response and the time in ms.

        Raises:
            ProbeFailure: transport failure, HTTP status that stops the probe, JSON-RPC error.
        """
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        merged = {"content-type": "application/json", "accept": _ACCEPT, **self.headers, **headers}
        started = time.perf_counter()
        response = await self._send("POST", json.dumps(body).encode(), merged, method)
        ms = (time.perf_counter() - started) * 1000
        check_status(response, self.url, method)
        try:
            messages = read_messages(response)
        except ValueError as exc:
            raise ProbeFailure(f"HTTP {response.status_code}: the body is not JSON ({exc})", method) from exc
        reply = next((m for m in messages if m.get("id") == self.next_id), None)
        if reply is None:
            raise ProbeFailure(f"HTTP {response.status_code}: no JSON-RPC response in the body", method)
        if "error" in reply:
            error = cast("dict[str, Any]", reply["error"])
            raise ProbeFailure(f"HTTP {response.status_code}, JSON-RPC error {error.get('code')}: {error.get('message')}", method)
        result = reply.get("result")
        if not isinstance(result, dict):
            raise ProbeFailure(f"HTTP {response.status_code}: the result is not an object", method)
        return cast("dict[str, Any]", result), response, ms

    async def _send(self, method: str, content: bytes | None, headers: Mapping[str, str], step: str) -> httpx.Response:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._read(method, content, headers, step)
        except TimeoutError as exc:
            raise ProbeFailure(f"no complete answer within {self.timeout:g} s (--timeout)", step) from exc
        except httpx.ConnectError as exc:
            where = httpx.URL(self.url).netloc.decode()
            raise ProbeFailure(f"cannot connect to {where}: {connect_reason(exc)} (is the server running?)", step, fatal=True) from exc
        except httpx.TimeoutException as exc:
            raise ProbeFailure(f"no answer within the timeout ({type(exc).__name__})", step) from exc
        except httpx.HTTPError as exc:
            raise ProbeFailure(f"HTTP failure: {exc}", step) from exc

    async def _read(self, method: str, content: bytes | None, headers: Mapping[str, str], step: str) -> httpx.Response:
        """One exchange, the body read in full but never past :data:`MAX_RESPONSE_BYTES`."""
        async with self.client.stream(method, self.url, content=content, headers=headers) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_RESPONSE_BYTES:
                    raise ProbeFailure(
                        f"HTTP {response.status_code}: the response exceeds {MAX_RESPONSE_BYTES // (1024 * 1024)} MiB, "
                        "stopped reading",
                        step,
                    )
        kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _FRAMING]  # body already decoded
        return httpx.Response(response.status_code, headers=kept, content=bytes(body), request=response.request)

    async def listing(self, era: str, method: str, key: str, headers: Mapping[str, str], meta: dict[str, Any] | None) -> Step:
        """Every page of one list method (``tools/list``, ``resources/list``…), counted."""
        total, ms, cursor, pages = 0, 0.0, None, 0
        while True:
            params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
            if meta is not None:
                params["_meta"] = meta
            result, _, took = await self.rpc(method, params, headers)
            ms += took
            pages += 1
            items = result.get(key)
            total += len(cast("list[Any]", items)) if isinstance(items, list) else 0
            cursor = result.get("nextCursor")
            if not cursor or pages >= _MAX_PAGES:
                break
        return Step(era, method, True, ms, {key: f"{total} ({pages} page{'s' if pages > 1 else ''})"})

    async def listings(self, report: ProbeReport, era: str, capabilities: Any, headers: Mapping[str, str], meta: dict[str, Any] | None) -> None:
        """``tools/list``, then the resource and prompt lists the server's capabilities announce."""
        offered = cast("dict[str, Any]", capabilities) if isinstance(capabilities, dict) else {}
        for capability, method, key in _LISTS:
            if capability == "tools" or capability in offered:
                step_headers = {**headers, "mcp-method": method} if meta is not None else headers
                report.steps.append(await self.listing(era, method, key, step_headers, meta))

    async def legacy(self, report: ProbeReport) -> None:
        era = f"2025 ({LEGACY_VERSION})"
        params = {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": _CLIENT_INFO}
        result, response, ms = await self.rpc("initialize", params, {})
        info: dict[str, Any] = result.get("serverInfo") or {}
        session = response.headers.get("mcp-session-id")
        report.steps.append(
            Step(
                era,
                "initialize",
                True,
                ms,
                {
                    "server": f"{info.get('name')} {info.get('version')}",
                    "protocol": str(result.get("protocolVersion")),
                    "capabilities": _capabilities(result.get("capabilities")),
                    "session": session or "(none: stateless server)",
                },
            )
        )
        headers = {"mcp-protocol-version": str(result.get("protocolVersion"))}
        if session:
            headers["mcp-session-id"] = session
        end_headers = {**self.headers, **headers}  # the DELETE ending the session
        try:
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            merged = {"content-type": "application/json", "accept": _ACCEPT, **end_headers}
            step = "notifications/initialized"
            answer = await self._send("POST", json.dumps(note).encode(), merged, step)
            if answer.status_code != 202:
                raise ProbeFailure(f"expected HTTP 202, got {answer.status_code}", step)
            await self.listings(report, era, result.get("capabilities"), headers, None)
        except ProbeFailure as exc:
            if session and not exc.fatal:  # a failed step still ends the session it opened
                with contextlib.suppress(ProbeFailure):  # the step's own failure is the one to report
                    await self._send("DELETE", None, end_headers, "DELETE")
            raise
        if session:  # the probe leaves nothing open on the server (the session, its streams)
            await self._send("DELETE", None, end_headers, "DELETE")

    async def modern(self, report: ProbeReport) -> None:
        era = MODERN_VERSION
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": _CLIENT_INFO,
        }
        headers = {"mcp-protocol-version": MODERN_VERSION, "mcp-method": "server/discover"}
        result, _, ms = await self.rpc("server/discover", {"_meta": meta}, headers)
        meta_out: dict[str, Any] = result.get("_meta") or {}
        info: dict[str, Any] = meta_out.get("io.modelcontextprotocol/serverInfo") or {}
        facts = {
            "versions": ", ".join(result.get("supportedVersions") or []) or "(none)",
            "capabilities": _capabilities(result.get("capabilities")),
        }
        if info:
            facts["server"] = f"{info.get('name')} {info.get('version')}"
        report.steps.append(Step(era, "server/discover", True, ms, facts))
        await self.listings(report, era, result.get("capabilities"), headers, meta)


_LISTS = (
    ("tools", "tools/list", "tools"),
    ("resources", "resources/list", "resources"),
    ("resources", "resources/templates/list", "resourceTemplates"),
    ("prompts", "prompts/list", "prompts"),
)


def _capabilities(value: Any) -> str:
    if not isinstance(value, dict) or not value:
        return "(none)"
    caps = cast("dict[str, Any]", value)
    parts: list[str] = []
    for name in sorted(caps):
        options = caps[name]
        flags = sorted(k for k, v in cast("dict[str, Any]", options).items() if v is True) if isinstance(options, dict) else []
        parts.append(f"{name}({', '.join(flags)})" if flags else name)
    return ", ".join(parts)


async def probe(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ProbeReport:
    """Probe the MCP endpoint at ``url`` in both eras.

    Args:
        url: the endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        headers: extra request headers (``Authorization``…), sent on every request.
        timeout: seconds per HTTP exchange, from connecting to the body's last byte.
        transport: an httpx transport (tests pass ``httpx.ASGITransport(app)``).

    Returns:
        The report; never raises for a server problem (it is in ``report.fatal`` or a step).
    """
    report = ProbeReport(url)
    async with httpx.AsyncClient(timeout=timeout, transport=transport, follow_redirects=False) as client:
        prober = _Prober(client, url, headers or {}, timeout)
        for run, era in ((prober.legacy, f"2025 ({LEGACY_VERSION})"), (prober.modern, MODERN_VERSION)):
            try:
                await run(report)
            except ProbeFailure as exc:
                if exc.fatal:
                    report.fatal = str(exc)  # the same for every era: stop here
                    return report
                report.steps.append(Step(era, exc.step, False, 0.0, error=str(exc)))
    return report
