"""One round trip of :class:`~fastapi_mcp_ctx.testing.McpTestClient` with the app: the JSON-RPC
message in the client's era (``testing._encoding.Outgoing``), run through the in-process transport
(``testing._asgi.exchange``) under the client's timeout, the 2025 server→client requests
of its stream answered as they arrive (a POST on the session), the answer matched by id, its
notifications kept, and its result checked against the official wire model.

:class:`WireExchange` is a mixin of the test client (the attributes it reads are the client's).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, cast

import anyio
import httpx
from mcp_types.methods import validate_server_result
from starlette.types import ASGIApp

from ._asgi import exchange, messages_of
from ._encoding import ACCEPT, Outgoing, response_error
from ._input import InputAnswerer
from ._results import Asked, McpResponse

__all__ = ["WireExchange"]


class WireExchange:
    """Requests and notifications on the wire for the test client (a mixin: no slots of its own)."""

    __slots__ = ()
    era: Literal["legacy", "modern"]
    path: str
    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any]
    log_level: str | None
    session_id: str | None
    timeout: float
    validate: bool
    answerer: InputAnswerer
    notifications: list[dict[str, Any]]
    _http: httpx.AsyncClient | None
    app: ASGIApp
    _app: ASGIApp
    _next_id: int

    @property
    def http(self) -> httpx.AsyncClient:
        """The underlying ``httpx.AsyncClient``, bound to the app and sending ``headers`` (for raw requests)."""
        if self._http is None:
            raise RuntimeError("McpTestClient is not open: use it as `async with McpTestClient(app) as client:`")
        return self._http

    async def _request_once(
        self, method: str, params: Mapping[str, Any] | None, meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None
    ) -> McpResponse:
        asked: list[Asked] = []
        self._next_id = request_id = self._next_id + 1  # concurrent requests each match their own answer
        response, messages = await self._send(method, params, meta, headers, request_id, asked)
        answers = [m for m in messages if "method" not in m]
        final = next((m for m in answers if m.get("id") == request_id), answers[-1] if answers else None)
        notes = [m for m in messages if "method" in m and "id" not in m]
        self.notifications.extend(notes)
        if final is None or "error" in final or response.status_code >= 400:
            raise response_error(method, response, final, self.app)
        result = cast(dict[str, Any], final.get("result") or {})
        if self.validate:
            try:
                validate_server_result(method, self.protocol_version, result)
            except KeyError:  # a method the official tables do not know: nothing to check
                pass
        return McpResponse(method, result, notes, response.status_code, dict(response.headers), tuple(asked))

    def _legacy_headers(self) -> dict[str, str]:
        session = {"Mcp-Session-Id": self.session_id} if self.session_id is not None else {}
        return {"MCP-Protocol-Version": self.protocol_version, **session}

    async def _send(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        request_id: int | None,
        asked: list[Asked],
    ) -> tuple[httpx.Response, list[dict[str, Any]]]:
        outgoing = Outgoing(self.era, self.protocol_version, self.client_capabilities, self.client_info, self.log_level, self._legacy_headers())
        message, sent = outgoing.message(method, params, meta, request_id)
        sent.update(headers or {})
        request = self.http.build_request("POST", self.path, content=json.dumps(message, allow_nan=False).encode(), headers=sent)

        async def on_message(received: dict[str, Any]) -> None:
            if "method" in received and "id" in received:  # a server->client request on this stream
                await self._answer_server(received, asked)

        try:
            with anyio.fail_after(self.timeout):
                return await exchange(self._app, request, on_message)
        except TimeoutError as exc:
            raise TimeoutError(f"{method}: no answer from the app within {self.timeout} s") from exc

    async def _answer_server(self, request: dict[str, Any], asked: list[Asked]) -> None:
        """Answer a 2025 server→client request: a POST of the JSON-RPC response on the session."""
        reply = await self.answerer.reply_to(request, asked)
        sent = {"Content-Type": "application/json", "Accept": ACCEPT, **self._legacy_headers()}
        response = await self.http.post(self.path, content=json.dumps(reply, allow_nan=False).encode(), headers=sent)
        if response.status_code != 202:
            final = next(iter(messages_of(response.headers.get("content-type", ""), response.content)), None)
            raise response_error(str(request["method"]), response, final, self.app)
