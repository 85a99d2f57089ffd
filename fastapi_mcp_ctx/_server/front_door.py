"""The front door of one MCP HTTP request, in one pass (DESIGN.md decision 12).

The stages, in order, each in its own module, each reading what the one before produced:

1. the route's screen (``LeanRoute``, before any dependency): the 431 header bound and one
   decode of the headers into a :class:`~fastapi_mcp_ctx._wire.envelope.HeaderMap`
   (``http.screen_headers``);
2. transport security: ``Host`` / ``Origin`` (``_auth.host_rules``), a repeated single-valued
   header (``http.reject_repeated``; on POST after the body read, so the refusal echoes the id);
3. the bounded body read, POST only (``http.read_body``: ``MCP_MAX_BODY_BYTES``,
   ``MCP_BODY_TIMEOUT_SECONDS``), kept in the scope and replayed to dependencies and tools;
4. authentication: ``McpRouter(authenticate=...)`` (``authn.resolve_principal``) or the
   ``MCP_AUTH_MODE`` gate (``_auth.gate``), the principal kept in the scope;
5. POST negotiation: ``Content-Type``, ``Content-Encoding``, ``Accept`` (:meth:`FrontDoor.negotiate`);
6. the frame and the era: ``_wire.jsonrpc.parse_message``, ``_wire.envelope.choose_era``
   (:func:`frame`); then the era's envelope (``_wire.envelope.read_*_envelope``) and, in the
   2025 era, the session (``session_gate``), read by the endpoint before the dispatcher.

:meth:`FrontDoor.admit` runs stages 2-4 and fills one :class:`Admission`; the only I/O is the body
read and the authentication (the session lookup follows in the endpoint). Every refusal is an
``McpError`` carrying the request id once the body is read.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from starlette.requests import Request
from starlette.types import Scope

from .._auth.gate import RequestGate
from .._auth.host_rules import TransportSecurity, is_loopback_host, loopback_security
from .._wire.envelope import Era, HeaderMap, choose_era
from .._wire.jsonrpc import JsonRpcNotification, JsonRpcRequest, JsonRpcResponse, parse_message, request_id_of
from ..auth import Principal
from ..errors import McpError, NotAcceptableError, UnsupportedMediaTypeError
from ..settings import McpSettings
from .authn import AuthOutcome, refusal, resolve_principal
from .dispatch import JSON_OK_SCOPE_KEY, PRINCIPAL_SCOPE_KEY
from .http import BODY_SCOPE_KEY, HEADERS_SCOPE_KEY, accepted, read_body, refuse_content_coding, reject_repeated, screen_headers

__all__ = ["Admission", "FrontDoor", "body_request_id", "frame"]

Message = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse


def body_request_id(body: bytes | None) -> Any:
    """The id of the JSON-RPC request in ``body``, or None (no body, not a request, unparsable)."""
    if not body:
        return None
    try:
        message = parse_message(body)
    except McpError:
        return None
    return message.id if isinstance(message, JsonRpcRequest) else None


def _reject_repeated_in_post(repeated: AbstractSet[str], body: bytes) -> None:
    """:func:`~fastapi_mcp_ctx._server.http.reject_repeated` for a POST: its refusal echoes the body's id."""
    try:
        reject_repeated(repeated)
    except McpError as exc:
        exc.request_id = body_request_id(body)  # type: ignore[attr-defined]
        raise


def _echo_request_id(exc: McpError, scope: Scope) -> None:
    """A refusal after the body read carries the body's request id (unless it names one already)."""
    if request_id_of(exc) is None:
        exc.request_id = body_request_id(scope.get(BODY_SCOPE_KEY))  # type: ignore[attr-defined]


class Admission:
    """What the front door learnt of one request before its method is served (a plain class:
    made per request with nothing to initialise, each stage sets what it learnt).

    Attributes:
        headers: the request's headers, decoded once (the route's screen).
        principal: who is calling (None: no authentication configured, or a local caller).
        outcome: what ``authenticate=`` produced (its headers and background tasks go on the
            final response, a refusal's included), None when it did not run.
    """

    headers: HeaderMap | None = None
    principal: Principal | None = None
    outcome: AuthOutcome | None = None


def frame(body: bytes, headers: HeaderMap) -> tuple[Message, Era]:
    """Stage 6: the JSON-RPC message of a POST body and its era (DESIGN.md decision 2).

    Raises:
        McpError: a parse error (-32700), an invalid message (-32600), a malformed answer.
    """
    message = parse_message(body)
    params = message.params if not isinstance(message, JsonRpcResponse) else None
    return message, choose_era(headers, params)


class FrontDoor:
    """Stages 2-5 of one endpoint's requests (see the module docstring).

    Args:
        settings: the router's settings (host/origin rules, body bounds).
        gate: the ``MCP_AUTH_MODE`` gate, or None.
        authenticate: the dependant of ``McpRouter(authenticate=...)``, or None (then the gate runs).
        challenge: the ``WWW-Authenticate`` value of a bearer mode, or None.
    """

    __slots__ = ("_authenticate", "_challenge", "_configured_security", "_gate", "_loopback", "_settings")

    def __init__(self, settings: McpSettings, gate: RequestGate | None, authenticate: Any, challenge: str | None) -> None:
        self._settings = settings
        self._gate = gate if authenticate is None else None  # authenticate= wins over MCP_AUTH_MODE
        self._authenticate = authenticate
        self._challenge = challenge
        self._loopback = loopback_security()
        self._configured_security = self._security_from_settings()

    def _security_from_settings(self) -> TransportSecurity | None:
        s = self._settings
        if s.dns_rebinding_protection is False:
            return TransportSecurity(enabled=False)
        if s.allowed_hosts is not None or s.allowed_origins is not None:
            base = self._loopback
            return TransportSecurity(
                enabled=True,
                allowed_hosts=(*base.allowed_hosts, *(h.lower() for h in s.allowed_hosts or ())),
                allowed_origins=(*base.allowed_origins, *(o.lower() for o in s.allowed_origins or ())),
                any_loopback_ip=True,
            )
        if s.dns_rebinding_protection is True:
            return self._loopback
        return None

    async def admit(self, request: Request, admission: Admission) -> HeaderMap:
        """Stages 2-4 for ``request``, filling ``admission`` as they go (the body and the
        principal also go into the scope, where dependencies and tools find them); returns the
        request's headers.

        Raises:
            McpError: 431, 421/403 (Host/Origin), 400 (a repeated header), 413/408 (the body),
                401/403/4xx (authentication), with the request's id once its body is read.
            ClientDisconnect: the client went away during the body read.
        """
        scope = request.scope
        headers: HeaderMap | None = scope.get(HEADERS_SCOPE_KEY)  # the route's screen built it
        if headers is None:  # served by another route than LeanRoute: screened here (431 first)
            headers = screen_headers(scope["headers"], self._settings.max_request_header_bytes)
        admission.headers = headers
        security = self._configured_security
        if security is not None:
            security.check(headers)
        else:  # no setting: the allow-lists guard a server listening on loopback
            server = scope.get("server")
            if server and is_loopback_host(str(server[0])):
                self._loopback.check(headers)
        if scope["method"] == "POST":  # read once, bounded; dependencies and tools get it replayed
            settings = self._settings
            scope[BODY_SCOPE_KEY] = body = await read_body(request, headers, settings.max_body_bytes, settings.body_timeout_seconds)
            if headers.repeated:  # before authentication: a gate and an app never read two copies
                _reject_repeated_in_post(headers.repeated, body)
        elif headers.repeated:
            reject_repeated(headers.repeated)
        gate = self._gate
        if gate is not None and gate.verifier is None:  # the local-only default: nothing to await
            try:
                gate.refuse_remote(request, headers)
            except McpError as exc:
                _echo_request_id(exc, scope)
                raise
        elif gate is not None or self._authenticate is not None:
            await self._authenticate_caller(request, admission, headers)
        return headers

    async def _authenticate_caller(self, request: Request, admission: Admission, headers: HeaderMap) -> None:
        """Stage 4 when it has something to await: ``authenticate=``, or the bearer gate."""
        authenticate, gate = self._authenticate, self._gate
        try:
            if authenticate is None:  # the gate: MCP_AUTH_MODE=jwt/oauth
                principal = await gate.admit(request, headers)  # pyright: ignore[reportOptionalMemberAccess]
            else:
                admission.outcome = outcome = await resolve_principal(authenticate, request, self._challenge)
                principal = outcome.principal
                if principal is None:
                    raise refusal(self._challenge)
        except McpError as exc:  # the body was read: the refusal echoes its id
            _echo_request_id(exc, request.scope)
            raise
        if principal is not None:
            admission.principal = principal
            request.scope[PRINCIPAL_SCOPE_KEY] = principal

    @staticmethod
    def negotiate(request: Request, headers: HeaderMap) -> bool:
        """Stage 5, POST: ``Content-Type: application/json``, no content coding, an ``Accept``
        this server can answer; returns whether an SSE answer is allowed (JSON's is kept in
        the scope for the dispatcher).

        Raises:
            UnsupportedMediaTypeError: 415; UnsupportedContentEncodingError: 415;
            NotAcceptableError: 406.
        """
        content_type = headers.get("content-type", "")
        if content_type != "application/json" and content_type.split(";", 1)[0].strip().lower() != "application/json":
            raise UnsupportedMediaTypeError()
        if "content-encoding" in headers:  # RFC 9110 §15.5.16: a coding this server does not decode
            refuse_content_coding(request.scope["headers"])
        json_ok, sse_allowed = accepted(headers)
        request.scope[JSON_OK_SCOPE_KEY] = json_ok
        if not (json_ok or sse_allowed):
            raise NotAcceptableError()
        return sse_allowed
