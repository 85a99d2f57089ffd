"""The one errors module of fastapi-mcp-ctx.

Every error the framework raises or translates carries its JSON-RPC ``code`` and the HTTP
``http_status`` it is answered with on the Streamable HTTP transport (MCP 2026-07-28
``basic/transports/streamable-http`` §Server Validation; JSON-RPC codes from
``basic/index`` §Error Codes). Library errors (redis-py, SQLAlchemy, pydantic) are
translated at the edge that calls the library, ``raise ... from exc``.

Tree::

    McpError                         base: code, http_status, message, reason, recovery_hint, data
    ├── ParseError                   -32700  400  body is not UTF-8 JSON
    ├── InvalidRequestError          -32600  400  not a single JSON-RPC request / notification
    │   ├── MalformedAnswerError     -32600  400  a client's answer with a valid id but a bad error/result (fails its waiter)
    │   ├── MissingSessionError      -32600  400  2025 era: no Mcp-Session-Id on a non-initialize request
    │   ├── SessionNotFoundError     -32600  404  2025 era: unknown or terminated Mcp-Session-Id
    │   ├── StreamConflictError      -32600  409  2025 era: a second standalone GET stream for one session
    │   ├── InvalidEventIdError      -32600  400  2025 era: a Last-Event-ID that is malformed or names no stream of the session
    │   ├── NotAcceptableError       -32600  406  Accept lacks application/json / text/event-stream
    │   ├── UnsupportedMediaTypeError -32600 415  POST Content-Type is not application/json
    │   │   └── UnsupportedContentEncodingError -32600 415  POST Content-Encoding other than identity (Accept-Encoding: identity)
    │   ├── PayloadTooLargeError     -32600  413  body larger than MCP_MAX_BODY_BYTES
    │   ├── RequestTimeoutError      -32600  408  body not complete within MCP_BODY_TIMEOUT_SECONDS
    │   ├── HeaderFieldsTooLargeError -32600 431  request headers larger than MCP_MAX_REQUEST_HEADER_BYTES
    │   ├── UnsupportedVersionHeaderError -32600 400 2025 era: MCP-Protocol-Version not served (data.supported)
    │   │   └── ProtocolVersionMismatchError -32600 400 2025 session: MCP-Protocol-Version is not the one it negotiated
    │   ├── HostNotAllowedError      -32600  421  Host header outside the allow-list (DNS rebinding)
    │   ├── OriginNotAllowedError    -32600  403  Origin header outside the allow-list
    │   ├── TenantRequiredError      -32600  403  authenticated caller without a tenant claim (fail closed)
    │   └── RequestRejectedError     -32600  4xx  a request-level dependency answered another 4xx (429…)
    ├── MethodNotFoundError          -32601  404  unknown, or removed at this protocol version
    ├── InvalidParamsError           -32602  400  params do not fit the method
    │   ├── UnknownToolError         -32602  400  tools/call of a tool that is not registered
    │   ├── UnknownPromptError       -32602  400  prompts/get of a prompt that is not registered
    │   ├── ResourceNotFoundError    -32602  400  resources/read of a URI nothing serves (data.uri); -32002 in 2025
    │   ├── UriMatchError            -32602  400  a malformed escape or a '/' in a simple template variable (_wire.uri_template)
    │   ├── InvalidCursorError       -32602  400  a forged, foreign or stale pagination cursor
    │   ├── ValidationError          -32602  400  a ctx.state key or prefix outside the key grammar
    │   ├── SerializationError       -32602  400  a ctx.state value that is not JSON-serializable
    │   └── InvalidRequestStateError -32602  400  a requestState not sealed by this server for this caller,
    │                                             operation and arguments, or expired (details: server log)
    ├── InternalError                -32603  500  a crash; the message sent is generic, the cause is logged
    │   ├── StateUnavailableError    -32603  503  a state backend is down; retryable (Retry-After)
    │   │   ├── ServerShuttingDownError -32603 503  this process is shutting down; retry (another replica answers)
    │   │   └── IdentityProviderUnavailableError -32603 503  no signing key could be fetched (JWKS / discovery)
    │   ├── ConfigurationError       -32603  500  the server is misconfigured (missing extra, SQL schema missing or
    │   │                                         outdated); not retryable, the message says what the operator must do
    │   ├── CallLostError            -32603  500  2025 resumable call: the replica running it died (its lease lapsed)
    │   │                                         before it answered; sent on its stream, which then ends
    │   ├── RequestStateTooLargeError -32603 500  a handler's requestState exceeds MCP_REQUEST_STATE_MAX_BYTES sealed
    │   └── InputRoundsExceededError -32603  500  2025: more input rounds in one call than MCP_INPUT_MAX_ROUNDS
    ├── HeaderMismatchError          -32020  400  2026: MCP-Protocol-Version / Mcp-Method / Mcp-Name disagree with the body
    ├── MissingCapabilityError       -32021  400  2026: the call needs a client capability the request did not declare
    ├── UnsupportedVersionError      -32022  400  2026: protocol version not served (data.supported, data.requested)
    ├── ServerRequestError           -32603  500  ctx.send_request got no result from the client (base; .method)
    │   ├── NoBackChannelError       -32600  400  nothing can carry the request or its answer: JSON-only Accept, no
    │   │                                         session (stateless), the 2026 era, the call or session ended
    │   ├── ClientResponseError      (client's)   the client answered with a JSON-RPC error (.code; .client_message, .client_data)
    │   ├── ServerRequestTimeoutError -32603 500  no answer within the timeout (notifications/cancelled was sent)
    │   └── ClientCapabilityMissingError -32600 400 2025: input asked of a client that did not declare it, or
    │                                             of a request without a session (data.requiredCapabilities)
    ├── AuthenticationError          -32001  401  missing or invalid credentials (a dependency raised HTTPException 401)
    │   └── InvalidTokenError        -32001  401  MCP_AUTH_MODE=jwt/oauth: a bearer token that does not verify
    ├── PermissionDeniedError        -32003  403  credentials lack a scope (a dependency raised HTTPException 403)
    │   ├── InsufficientScopeError   -32003  403  a tool/resource/prompt needs scopes the token lacks
    │   └── RemoteAccessDeniedError  -32003  403  no authentication configured and the request is not local
    ├── RequestCancelledError        -32800  200  2025 era: the answer to a call the client cancelled (ends its stream)
    └── ToolError                    1 (app)  an anticipated failure shown to the model as an ``isError`` result
        └── ConsentDeclinedError     1 (app)  ctx.consent.require: the user declined or cancelled the confirmation

    McpResponseError                 client side: ``fastapi_mcp_ctx.testing`` received an error answer
                                     (the JSON-RPC code, message, data and the HTTP status as sent)
    TestClientInputError             client side: ``McpTestClient`` cannot answer the server's input (no callback
                                     for the method asked, more ``input_required`` rounds than ``max_input_rounds``)
    TestClientTaskError              client side: ``McpTestClient.call_tool`` was answered with a task (use
                                     ``call_tool_as_task``)
    AppLoadError                     (not a wire error) ``module:attr`` names no servable app or McpRouter (stdio)
    DeclarationError (TypeError)     (not a wire error) a handler used what its registration did not declare:
                                     ``ctx.fail`` of an undeclared reason, ``ctx.enrich`` of an undeclared field
                                     or a value outside its type, a bad ``ctx.content`` block; a crash of the call

A handler raises :class:`ToolError` (or a subclass) for failures the model should read and
recover from; any other exception is a crash: the model sees a generic message and the
server log gets the traceback.

The error envelope (one shape for every failure a caller can see). As a JSON-RPC error's
``error``, and in an ``isError`` tool result as ``_meta["fastapi-mcp-ctx/error"]`` (plus
``structuredContent.error`` when the tool has no ``outputSchema``, see ``_handlers.results``)::

    {"code": int, "message": str,
     "data": {"requestId": <the request's id, null when unreadable>,
              "reason": "snake_case_reason",          # when known
              "recovery": {"hint": "what to do"},     # when known
              "retryAfter": seconds,                  # retryable errors (503 + Retry-After)
              ...the raiser's fields}}                # ToolError(data={...}), McpError(data={...})

``data`` given by a raiser is a mapping with string keys; anything else is a ``TypeError``
and a reserved key (``requestId``, ``reason``, ``recovery``, ``retryAfter``) a ``ValueError``,
both at raise time. Values that are not JSON become their ``str()`` (bytes: base64).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from pydantic_core import to_jsonable_python

__all__ = [
    "RESERVED_DATA_KEYS",
    "AppLoadError",
    "AuthenticationError",
    "CallLostError",
    "ClientCapabilityMissingError",
    "ClientResponseError",
    "ConfigurationError",
    "ConsentDeclinedError",
    "DeclarationError",
    "HeaderFieldsTooLargeError",
    "HeaderMismatchError",
    "HostNotAllowedError",
    "IdentityProviderUnavailableError",
    "InputRoundsExceededError",
    "InsufficientScopeError",
    "InternalError",
    "InvalidCursorError",
    "InvalidEventIdError",
    "InvalidParamsError",
    "InvalidRequestError",
    "InvalidRequestStateError",
    "InvalidTokenError",
    "MalformedAnswerError",
    "McpError",
    "McpResponseError",
    "MethodNotFoundError",
    "MissingCapabilityError",
    "MissingSessionError",
    "NoBackChannelError",
    "NotAcceptableError",
    "OriginNotAllowedError",
    "ParseError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "ProtocolVersionMismatchError",
    "RemoteAccessDeniedError",
    "RequestCancelledError",
    "RequestRejectedError",
    "RequestStateTooLargeError",
    "RequestTimeoutError",
    "ResourceNotFoundError",
    "SerializationError",
    "ServerRequestError",
    "ServerRequestTimeoutError",
    "ServerShuttingDownError",
    "SessionNotFoundError",
    "StateUnavailableError",
    "StreamConflictError",
    "TaskFailedError",
    "TaskNotFoundError",
    "TaskQuotaExceededError",
    "TaskTtlError",
    "TenantRequiredError",
    "TestClientInputError",
    "TestClientTaskError",
    "ToolError",
    "UnknownPromptError",
    "UnknownToolError",
    "UnsupportedContentEncodingError",
    "UnsupportedMediaTypeError",
    "UnsupportedVersionError",
    "UnsupportedVersionHeaderError",
    "UriMatchError",
    "ValidationError",
]


RESERVED_DATA_KEYS: Final[frozenset[str]] = frozenset({"requestId", "reason", "recovery", "retryAfter"})
"""Keys of ``error.data`` the framework fills; a raiser's ``data`` may not set them."""


def _raiser_fields(data: object) -> dict[str, Any]:
    """The raiser's ``data`` as a JSON-able dict (checked at raise time, see the module docstring)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise TypeError(f"error data must be a mapping of field names to JSON values, not {type(data).__name__}")
    items: Mapping[Any, Any] = data  # pyright: ignore[reportUnknownVariableType]
    if not all(isinstance(key, str) for key in items):
        raise TypeError("error data keys must be strings")
    clash = RESERVED_DATA_KEYS.intersection(items)
    if clash:
        raise ValueError(f"error data must not set the reserved key(s) {', '.join(sorted(clash))}: the framework fills them")
    try:
        fields: dict[str, Any] = to_jsonable_python(dict(items), fallback=str, bytes_mode="base64")
    except ValueError:  # e.g. a value whose str() fails: keep the key, never the 500
        fields = {key: repr(value) for key, value in items.items()}
    return fields


class _Failure(Exception):
    """What every failure a caller can see carries; :meth:`to_error` builds the envelope."""

    code: int
    default_message: ClassVar[str] = "Error"
    default_reason: ClassVar[str | None] = None
    default_hint: ClassVar[str | None] = None
    retry_after: int | None = None

    def __init__(
        self,
        message: str | None = None,
        *,
        reason: str | None = None,
        recovery_hint: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        self.message = message if message is not None else self.default_message
        self.reason = reason if reason is not None else self.default_reason
        self.recovery_hint = recovery_hint if recovery_hint is not None else self.hint_for(self.reason)
        self.data: dict[str, Any] = _raiser_fields(data)
        super().__init__(self.message)

    def hint_for(self, reason: str | None) -> str | None:
        """The ``data.recovery.hint`` when the raiser gives none: :attr:`default_hint` (a
        subclass may give one per ``reason``)."""
        return self.default_hint

    def to_error(self, request_id: str | int | None = None) -> dict[str, Any]:
        """The error envelope: ``{"code": int, "message": str, "data": {"requestId": request_id, ...}}``.

        ``data`` holds ``reason``, ``recovery.hint`` and ``retryAfter`` (seconds) when known, then
        the raiser's fields (module docstring).
        """
        data: dict[str, Any] = {"requestId": request_id}
        if self.reason is not None:
            data["reason"] = self.reason
        if self.recovery_hint is not None:
            data["recovery"] = {"hint": self.recovery_hint}
        if self.retry_after is not None:
            data["retryAfter"] = self.retry_after
        data.update(self.data)
        return {"code": self.code, "message": self.message, "data": data}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class McpError(_Failure):
    """Base of every framework error: a JSON-RPC error with its HTTP status.

    Attributes:
        code: JSON-RPC error code (int).
        http_status: HTTP status the error is answered with on Streamable HTTP.
        message: human-readable message sent on the wire.
        reason: machine-readable ``data.reason`` (snake_case), or None.
        recovery_hint: ``data.recovery.hint``, or None.
        data: the raiser's extra ``error.data`` fields (a dict, see the module docstring).
        headers: extra HTTP response headers (``Retry-After``, ``WWW-Authenticate``...).

    Raises (at construction):
        TypeError / ValueError: ``data`` is not a mapping with string keys / sets a reserved key.
    """

    code: int = -32603
    http_status: int = 500
    default_message: ClassVar[str] = "Internal error"
    default_reason: ClassVar[str | None] = "internal_error"

    def __init__(
        self,
        message: str | None = None,
        *,
        data: Mapping[str, Any] | None = None,
        reason: str | None = None,
        recovery_hint: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, reason=reason, recovery_hint=recovery_hint, data=data)
        self.headers: dict[str, str] = dict(headers or {})


class ParseError(McpError):
    """The body is not valid UTF-8 JSON (JSON-RPC -32700, HTTP 400)."""

    code = -32700
    http_status = 400
    default_message = "Parse error"
    default_reason = "parse_error"


class InvalidRequestError(McpError):
    """Not a single valid JSON-RPC request or notification (-32600, HTTP 400)."""

    code = -32600
    http_status = 400
    default_message = "Invalid Request"
    default_reason = "invalid_request"


class MalformedAnswerError(InvalidRequestError):
    """A POSTed JSON-RPC response (the client's answer to a server→client request) with a valid
    id but an ``error`` member that is not an object, or both ``result`` and ``error`` (-32600,
    HTTP 400). The request waiting for that id, if any, fails at once with the same message
    instead of waiting out its timeout.

    Attributes:
        answer_id: the response's id (``str`` or ``int``).
    """

    def __init__(self, message: str, answer_id: str | int) -> None:
        super().__init__(message)
        self.answer_id = answer_id


class MissingSessionError(InvalidRequestError):
    """2025 era: a non-initialize request without ``Mcp-Session-Id`` (HTTP 400).

    Spec 2025-11-25 ``basic/transports`` §Session Management item 2.
    """

    default_message = "Bad Request: Missing session ID (send initialize first, then echo its Mcp-Session-Id)"
    default_reason = "missing_session"
    default_hint = "Send initialize first, then echo its Mcp-Session-Id header on every request."


class SessionNotFoundError(InvalidRequestError):
    """2025 era: an unknown or terminated ``Mcp-Session-Id`` (HTTP 404: the client re-initializes).

    Spec 2025-11-25 ``basic/transports`` §Session Management items 3-4.
    """

    http_status = 404
    default_message = "Session not found"
    default_reason = "session_not_found"
    default_hint = "Send initialize again (without Mcp-Session-Id) to open a new session."


class StreamConflictError(InvalidRequestError):
    """2025 era: the session already has its standalone GET stream open (HTTP 409)."""

    http_status = 409
    default_message = "Conflict: Only one SSE stream is allowed per session"
    default_reason = "stream_conflict"
    default_hint = "Close the open GET stream of this session first."


class NotAcceptableError(InvalidRequestError):
    """The ``Accept`` header does not admit the response media type (HTTP 406)."""

    http_status = 406
    default_message = "Not Acceptable: Client must accept application/json and text/event-stream"
    default_reason = "not_acceptable"
    default_hint = "Send Accept: application/json, text/event-stream (text/event-stream for GET)."


class UnsupportedMediaTypeError(InvalidRequestError):
    """A POST whose ``Content-Type`` is not ``application/json`` (HTTP 415)."""

    http_status = 415
    default_message = "Unsupported Media Type: Content-Type must be application/json"
    default_reason = "unsupported_media_type"
    default_hint = "Send Content-Type: application/json."


class PayloadTooLargeError(InvalidRequestError):
    """The body read so far exceeds ``MCP_MAX_BODY_BYTES`` (HTTP 413)."""

    http_status = 413
    default_message = "Payload Too Large"
    default_reason = "payload_too_large"


class HeaderFieldsTooLargeError(InvalidRequestError):
    """The request's header fields, names and values together, exceed
    ``MCP_MAX_REQUEST_HEADER_BYTES`` (HTTP 431, RFC 6585 §5), refused before any header is read.
    The response carries ``Connection: close``."""

    http_status = 431
    default_message = "Request Header Fields Too Large"
    default_reason = "headers_too_large"
    default_hint = "Send fewer or shorter headers (a bearer token has its own, smaller bound: MCP_JWT_MAX_TOKEN_BYTES)."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"Connection": "close"})


class RequestTimeoutError(InvalidRequestError):
    """The body did not arrive in full within ``MCP_BODY_TIMEOUT_SECONDS`` (HTTP 408).

    A body shorter than its ``Content-Length`` or a chunked body that never ends would
    otherwise hold the connection; the response carries ``Connection: close`` so the server
    frees it (RFC 9110 §15.5.9).
    """

    http_status = 408
    default_message = "Request Timeout: the request body did not arrive in time"
    default_reason = "body_timeout"
    default_hint = "Send the whole body at once, with a Content-Length that matches it."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"Connection": "close"})


class UnsupportedVersionHeaderError(InvalidRequestError):
    """2025 era: ``MCP-Protocol-Version`` names a version this server does not serve (HTTP 400).

    A request carrying ``Mcp-Session-Id`` and an unknown version is a 2025 request (DESIGN.md
    decision 2); ``data`` is ``{"supported": [str, ...], "requested": <echo>}``. Spec
    2025-11-25 ``basic/transports`` §Protocol Version Header: invalid or unsupported → 400.
    """

    default_message = "Bad Request: Unsupported MCP-Protocol-Version header"
    default_reason = "unsupported_version"

    def __init__(self, requested: str, supported: list[str]) -> None:
        super().__init__(
            f"Bad Request: Unsupported MCP-Protocol-Version {requested!r}; supported: {', '.join(supported)}",
            data={"supported": supported, "requested": requested},
            recovery_hint="Send the version negotiated by initialize in MCP-Protocol-Version.",
        )


class HostNotAllowedError(InvalidRequestError):
    """``Host`` is outside the allow-list: DNS-rebinding protection (HTTP 421).

    Spec 2025-11-25 ``basic/transports`` §Security Warning.
    """

    http_status = 421
    default_message = "Invalid Host header: this host is not in MCP_ALLOWED_HOSTS"
    default_reason = "host_not_allowed"
    default_hint = 'Behind a reverse proxy, list the Host it forwards in MCP_ALLOWED_HOSTS, e.g. ["mcp.example.com"].'


class OriginNotAllowedError(InvalidRequestError):
    """``Origin`` is present and outside the allow-list (HTTP 403).

    Spec 2025-11-25 ``basic/transports`` §Security Warning: MUST answer 403.
    """

    http_status = 403
    default_message = "Invalid Origin header: this origin is not in MCP_ALLOWED_ORIGINS"
    default_reason = "origin_not_allowed"
    default_hint = 'List the browser origin in MCP_ALLOWED_ORIGINS, e.g. ["https://mcp.example.com"].'


class TenantRequiredError(InvalidRequestError):
    """Authentication is on and the caller has no tenant claim: tenant storage refuses (HTTP 403)."""

    http_status = 403
    default_message = (
        "No tenant for this caller (its token carries no tenant claim, or its Principal no tenant_id): "
        "tenant-scoped state is unavailable"
    )
    default_reason = "tenant_required"
    default_hint = (
        "Give the caller a tenant: under MCP_AUTH_MODE=jwt/oauth a token claim named by MCP_JWT_TENANT_CLAIM "
        "(default tid), or a Principal with tenant_id from McpRouter(authenticate=...)."
    )


class RequestRejectedError(InvalidRequestError):
    """A request-level dependency (``authenticate``) raised ``HTTPException`` with a 4xx other
    than 401/403 (e.g. 429 with ``Retry-After``): the status and headers are kept.

    Args:
        status: the HTTP status (400-499).
        message: the exception's detail.
        headers: the exception's headers.
    """

    default_reason = "rejected"

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message, headers=headers)
        self.http_status = status


class MethodNotFoundError(McpError):
    """Unknown method, or one removed at this protocol version (-32601, HTTP 404)."""

    code = -32601
    http_status = 404
    default_message = "Method not found"
    default_reason = "method_not_found"


class InvalidParamsError(McpError):
    """The params do not fit the method (-32602, HTTP 400)."""

    code = -32602
    http_status = 400
    default_message = "Invalid params"
    default_reason = "invalid_params"


class UnknownToolError(InvalidParamsError):
    """``tools/call`` names a tool that is not registered (spec: protocol error -32602)."""

    default_message = "Unknown tool"
    default_reason = "unknown_tool"
    default_hint = "Call tools/list for the tool names this server serves."


class InvalidCursorError(InvalidParamsError):
    """A pagination cursor that this server did not issue for this listing (-32602)."""

    default_message = "Invalid cursor"
    default_reason = "invalid_cursor"
    default_hint = "Restart the listing without a cursor."


class ValidationError(InvalidParamsError):
    """A ``ctx.state`` key or prefix outside ``^[a-zA-Z0-9_.\\-/]+$`` (≤ 1024 chars, no ``..``)."""

    default_message = "Invalid key"
    default_reason = "invalid_key"


class SerializationError(InvalidParamsError):
    """A ``ctx.state`` value that does not round-trip as JSON; nothing was written."""

    default_message = "Value is not JSON-serializable"
    default_reason = "not_serializable"


class InternalError(McpError):
    """A crash inside the server (-32603, HTTP 500: :class:`McpError`'s own code, status, message
    and reason). The wire message is generic; the cause is logged."""


class StateUnavailableError(InternalError):
    """A state backend (Redis, SQL) could not be reached; retry later (HTTP 503, ``Retry-After``).

    On the wire: ``data.reason`` ``"backend_unavailable"`` (or the given ``reason``) and
    ``data.retryAfter`` (seconds, the same value as the ``Retry-After`` header, which a
    client on an already started SSE stream cannot see).

    Attributes:
        retryable: always True.
        retry_after: seconds a client should wait before retrying (int ≥ 0).
    """

    http_status = 503
    default_message = "State backend unavailable, retry later"
    default_reason = "backend_unavailable"
    retryable: ClassVar[bool] = True

    def __init__(
        self,
        message: str | None = None,
        *,
        retry_after: int = 1,
        reason: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(
            message,
            data=data,
            reason=reason,
            recovery_hint=f"Retry after {retry_after} s.",
            headers={"Retry-After": str(retry_after)},
        )


class CallLostError(InternalError):
    """The replica running a 2025 resumable call stopped (``kill -9``, a crash) before it
    answered, and its lease lapsed: the call's request id gets this error on its stream, which
    then ends, instead of keep-alives for ever (issue 24 item 4). Whether the call ran, in
    part or whole, is unknown: ``data.reason`` ``"call_lost"``, ``data.recovery.hint`` "Retry
    the call"."""

    default_message = "The replica running this call stopped before it answered; its outcome is unknown"
    default_reason = "call_lost"
    default_hint = "Retry the call (it may have run in part before its replica stopped)."


class HeaderMismatchError(McpError):
    """2026-07-28: a required header is missing or disagrees with the body (-32020, HTTP 400)."""

    code = -32020
    http_status = 400
    default_message = "Header mismatch"
    default_reason = "header_mismatch"
    default_hint = (
        "Send MCP-Protocol-Version, Mcp-Method and Mcp-Name (Mcp-Param-* for declared arguments) equal to the"
        " request body's _meta protocolVersion, method and name/uri (spec 2026-07-28 basic/transports)."
    )


class MissingCapabilityError(McpError):
    """2026-07-28: the request needs a client capability it did not declare (-32021, HTTP 400).

    ``data`` is ``{"requiredCapabilities": <ClientCapabilities subset>}``, e.g.
    ``{"requiredCapabilities": {"sampling": {}}}``.
    """

    code = -32021
    http_status = 400
    default_message = "Missing required client capability"
    default_reason = "missing_capability"

    def __init__(self, required: dict[str, Any], message: str | None = None) -> None:
        names = ", ".join(sorted(required))
        super().__init__(
            message or f"Client did not declare the required capability: {names}",
            data={"requiredCapabilities": required},
        )
        self.required = required


class UnsupportedVersionError(McpError):
    """2026-07-28: the protocol version is not served (-32022, HTTP 400).

    ``data`` is ``{"supported": [str, ...], "requested": <echo>}``.
    """

    code = -32022
    http_status = 400
    default_message = "Unsupported protocol version"
    default_reason = "unsupported_version"

    def __init__(self, requested: Any, supported: list[str]) -> None:
        super().__init__(
            f"Unsupported protocol version; supported: {', '.join(supported)}",
            data={"supported": supported, "requested": requested},
            recovery_hint="Send one of data.supported, or initialize for the 2025 handshake era.",
        )


class ServerRequestError(McpError):
    """A server→client request (``ctx.send_request``) produced no result (-32603).

    Raised into the handler that sent it; left uncaught in a tool it becomes an ``isError``
    result carrying the envelope. Spec 2025-11-25 ``basic/transports`` §Sending Messages item 6.

    Attributes:
        method: the request's method (``"elicitation/create"``...); also ``data.method``.
    """

    default_message = "The request to the client failed"
    default_reason = "server_request_failed"

    def __init__(self, method: str, message: str, *, data: Mapping[str, Any] | None = None, recovery_hint: str | None = None) -> None:
        super().__init__(message, data={"method": method, **(data or {})}, recovery_hint=recovery_hint)
        self.method = method


class NoBackChannelError(ServerRequestError):
    """Nothing can carry a server→client request, or bring its answer back (-32600): raised at
    once, never after waiting out a timeout (known faults B06, B45).

    Why (``detail``, a sentence): the client accepts only ``application/json`` on this request; the
    request has no session (``MCP_SESSION_MODE=stateless``, or ``auto`` without
    ``Mcp-Session-Id``), so an answer could not be routed back; the 2026-07-28 era, which has no
    server→client requests; the call, its session or the connection ended before the answer came.
    """

    code = -32600
    http_status = 400
    default_reason = "no_back_channel"

    def __init__(self, method: str, detail: str, *, recovery_hint: str | None = None) -> None:
        super().__init__(method, f"Cannot send {method} to the client: {detail}", recovery_hint=recovery_hint)
        self.detail = detail


class ClientResponseError(ServerRequestError):
    """The client answered a server→client request with a JSON-RPC error.

    Attributes:
        code: the client's ``error.code``.
        client_message / client_data: its ``error.message`` and ``error.data`` as sent (``None``
            when absent); ``data.clientError`` of the envelope holds the whole error object.
        message: ``"The client answered <method> with error <code>: <client_message>"``.
    """

    default_reason = "client_error"

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        super().__init__(method, f"The client answered {method} with error {code}: {message}", data={"clientError": error})
        self.code = code
        self.client_message = message
        self.client_data = data


class ServerRequestTimeoutError(ServerRequestError):
    """No answer to a server→client request within its timeout; the server stopped waiting and
    sent ``notifications/cancelled`` for it (spec 2025-11-25 ``basic/lifecycle`` §Timeouts).

    Attributes:
        timeout: the timeout, in seconds (also ``data.timeoutSeconds``).
    """

    default_reason = "server_request_timeout"

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(method, f"The client did not answer {method} within {timeout:g} s", data={"timeoutSeconds": timeout})
        self.timeout = timeout


class AuthenticationError(McpError):
    """Missing or invalid credentials (HTTP 401, ``WWW-Authenticate: Bearer``).

    Spec 2025-11-25 ``basic/authorization`` §Token Handling.
    """

    code = -32001
    http_status = 401
    default_message = "Unauthorized"
    default_reason = "unauthenticated"


class PermissionDeniedError(McpError):
    """Valid credentials without the needed scope (HTTP 403, ``error="insufficient_scope"``)."""

    code = -32003
    http_status = 403
    default_message = "Forbidden"
    default_reason = "permission_denied"


class RequestCancelledError(McpError):
    """2025 era: the answer to a call cancelled by ``notifications/cancelled`` while its
    connection is open, so its stream ends (-32800, the official SDK's code; never sent in
    2026-07-28, where a cancelled request gets no answer)."""

    code = -32800
    http_status = 200
    default_message = "Request cancelled"
    default_reason = "cancelled"


class ToolError(_Failure):
    """An anticipated tool failure, returned to the model as an ``isError`` result.

    The result: ``{"content": [{"type": "text", "text": message}, {"type": "text", "text":
    "Recovery: <hint>"}?], "isError": true, "_meta": {"fastapi-mcp-ctx/error": <envelope>}}``,
    plus ``"structuredContent": {"error": <envelope>}`` when the tool has no ``outputSchema``
    (some clients check any ``structuredContent`` against it, error results included). The
    envelope is in the module docstring. Spec 2025-11-25 ``server/tools`` §Error Handling:
    execution errors are tool results, not protocol errors.

    Args:
        message: text the model reads.
        reason: machine-readable ``data.reason`` (snake_case, e.g. ``"not_found"``).
        recovery_hint: advice on how to recover: a second text block and ``data.recovery.hint``.
        data: extra fields of the envelope's ``data`` (a mapping with string keys).
        code: ``error.code``; default :attr:`code` (``1``: application-defined, outside the
            range JSON-RPC reserves). The framework's own tool failures use ``-32602``
            (invalid arguments) and ``-32603`` (a crash, an output breaking its schema).
    Raises:
        TypeError: ``data`` is not a mapping with string keys.
        ValueError: ``data`` sets a reserved key (``requestId``, ``reason``, ``recovery``, ``retryAfter``).
    """

    code: int = 1
    default_reason: ClassVar[str | None] = "tool_error"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        recovery_hint: str | None = None,
        data: Mapping[str, Any] | None = None,
        code: int | None = None,
    ) -> None:
        super().__init__(message, reason=reason, recovery_hint=recovery_hint, data=data)
        if code is not None:
            self.code = code


class McpResponseError(Exception):
    """The server answered a request with an error (raised by :mod:`fastapi_mcp_ctx.testing`).

    The client-side mirror of :class:`McpError`: what arrived on the wire, not something the
    server raises.

    Attributes:
        code: the JSON-RPC ``error.code`` (``-32602``…); ``None`` when the HTTP response carried
            no JSON-RPC error (a 404 for a path nothing serves, a FastAPI ``HTTPException`` from
            an app-level guard, an empty 4xx).
        message: ``error.message``, or the start of the HTTP body when there is no JSON-RPC error.
        data: ``error.data`` (``None`` when absent).
        http_status: the HTTP status of the response.
        headers: the HTTP response headers (lower-case names).
        method: the JSON-RPC method that was sent.
    """

    def __init__(
        self,
        *,
        code: int | None,
        message: str,
        data: Any = None,
        http_status: int,
        headers: dict[str, str] | None = None,
        method: str = "",
    ) -> None:
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status
        self.headers: dict[str, str] = dict(headers or {})
        self.method = method
        super().__init__(f"{method}: HTTP {http_status}, code {code}: {message}")

    def __repr__(self) -> str:
        return f"McpResponseError(code={self.code}, http_status={self.http_status}, message={self.message!r})"


class AppLoadError(Exception):
    """The ``module:attr`` given to the stdio server names no app it can serve: the module or
    attribute is missing, the object is neither a Starlette/FastAPI app nor an ``McpRouter``,
    or the app has no McpRouter (or several and no ``--path`` chooses one). The message says
    what to fix."""


class ConfigurationError(InternalError):
    """The server is misconfigured; nothing changes until its operator acts (-32603, HTTP 500).

    Examples: a storage URL whose package extra is not installed (``pip install
    "fastapi-mcp-ctx[sql]"``), a SQL schema that is missing or outdated (``fastapi-mcp-ctx
    migrate``). Raised at start-up (``McpRouter(...)``, ``await mcp_router.check()``) or at
    first use; answered HTTP 500 in both eras, never 503: retrying does not help. The message
    says what the operator must do and names no secret (no database URL).

    Attributes:
        retryable: always False.
    """

    default_message = "Server misconfigured"
    retryable: ClassVar[bool] = False


class InvalidEventIdError(InvalidRequestError):
    """2025 era: a ``Last-Event-ID`` that is not an event id this server sent on one of the
    session's streams: malformed, expired, or another session's (-32600, HTTP 400; never 404,
    which would tell the client its session is gone).

    Spec 2025-11-25 ``basic/transports`` §Resumability and Redelivery.
    """

    default_message = "Invalid Last-Event-ID: expected <stream id>:<sequence> as sent by this server"
    default_reason = "invalid_event_id"
    default_hint = "Resume with the id of an event this session received, or GET without Last-Event-ID."


class ServerShuttingDownError(StateUnavailableError):
    """This process is shutting down (-32603, HTTP 503, ``Retry-After``): a new stream or session
    is refused, a call still running when the shutdown grace ends is answered with it.
    ``data.reason`` is ``"server_shutting_down"``; retrying reaches another replica."""

    default_message = "The server is shutting down; retry (another replica will answer)"
    default_reason = "server_shutting_down"


class InvalidRequestStateError(InvalidParamsError):
    """A ``requestState`` echoed by the client that this server cannot open for this call (-32602,
    HTTP 400): forged, tampered, expired, sealed with a key no longer configured, or minted for
    another tenant, client, subject, operation or set of arguments. Which one is written to the
    server log only; the client learns nothing beyond ``data.reason = "invalid_request_state"``.

    Spec 2026-07-28 ``server/utilities/multi-round-trip`` (requestState is opaque to the client).
    """

    default_message = "Invalid requestState"
    default_reason = "invalid_request_state"
    default_hint = "Send the call again without requestState and inputResponses to start over."


class RequestStateTooLargeError(InternalError):
    """A handler returned a ``requestState`` whose sealed form exceeds ``MCP_REQUEST_STATE_MAX_BYTES``
    (-32603, HTTP 500): a server bug or a setting to raise, never a silent truncation."""

    default_message = "The request state of this call is too large to send"
    default_reason = "request_state_too_large"


class ConsentDeclinedError(ToolError):
    """``await ctx.consent.require(...)``: the user declined or cancelled the confirmation, so the
    operation did not run (an ``isError`` tool result, ``data.reason = "consent_declined"``,
    ``data.action`` = ``"decline"`` or ``"cancel"``)."""

    default_reason = "consent_declined"


class ClientCapabilityMissingError(ServerRequestError):
    """2025 era: a handler asked the client for input (``ctx.request_input``, ``await
    ctx.elicit`` / ``sample`` / ``list_roots``) that the client did not declare, or that no
    session can carry (``MCP_SESSION_MODE=stateless``): refused where it stands, before
    anything is sent (-32600, ``reason: "client_capability_missing"``).

    A tool gets it as an ``isError`` result (``structuredContent.error.code = -32600``);
    ``resources/read`` and ``prompts/get`` as a JSON-RPC ``-32600`` error with the same
    ``data``: ``{"method", "requiredCapabilities": {...}, "recovery": {"hint": "Reconnect
    with a client that declares the `elicitation.form` capability. <fallback_hint>"}}``.
    The 2026-07-28 era answers :class:`MissingCapabilityError` (-32021) instead.
    """

    code = -32600
    http_status = 400
    default_reason = "client_capability_missing"

    def __init__(self, method: str, required: Mapping[str, Any], message: str, *, recovery_hint: str) -> None:
        super().__init__(method, message, data={"requiredCapabilities": dict(required)}, recovery_hint=recovery_hint)
        self.required = dict(required)


class InputRoundsExceededError(InternalError):
    """2025 era: a handler kept asking for input past ``MCP_INPUT_MAX_ROUNDS`` rounds of
    server→client requests in one call (-32603, ``reason: "input_rounds_exceeded"``): a tool
    gets an ``isError`` result, ``resources/read`` / ``prompts/get`` a JSON-RPC error. Usually
    a handler that asks again after a decline instead of ending the call."""

    default_reason = "input_rounds_exceeded"

    def __init__(self, rounds: int) -> None:
        super().__init__(
            f"The handler asked the client for input {rounds} times in one call (MCP_INPUT_MAX_ROUNDS={rounds})",
            data={"rounds": rounds},
            recovery_hint="End the call when the user declines or cancels instead of asking again.",
        )


class ResourceNotFoundError(InvalidParamsError):
    """``resources/read`` (or a subscription) of a URI no resource or template serves:
    ``-32602`` with ``data.uri`` echoed exactly as sent (2026-07-28 ``server/resources``
    §Error Handling, MUST), ``-32002`` in the 2025 era (2025-11-25, SHOULD; pass ``era``).
    A resource handler may raise it (or return None) for an item that does not exist."""

    default_message = "Resource not found"
    default_reason = "resource_not_found"

    def __init__(self, uri: str, message: str | None = None, *, era: str = "modern") -> None:
        super().__init__(message or f"Resource not found: {uri[:256]}", data={"uri": uri})
        if era == "legacy":
            self.code = -32002


class UnknownPromptError(InvalidParamsError):
    """``prompts/get`` (or a completion ref) naming a prompt that is not registered (-32602, both eras)."""

    default_message = "Unknown prompt"
    default_reason = "unknown_prompt"


class UriMatchError(InvalidParamsError):
    """A URI that fits a resource template's shape but holds a value the matcher refuses
    (-32602, ``data.reason`` ``"invalid_uri"``, ``data.uri``): a malformed percent-escape, a
    simple ``{var}`` decoding to a ``/``, a repeated query parameter (RFC 6570 §3.2; see
    ``_wire.uri_template``)."""

    default_message = "Invalid resource URI"
    default_reason = "invalid_uri"


class InvalidTokenError(AuthenticationError):
    """A bearer token that does not verify under ``MCP_AUTH_MODE=jwt`` / ``oauth``: bad
    signature, algorithm outside the allow-list, unknown key id, wrong ``iss`` / ``aud``,
    expired, not yet valid (-32001, HTTP 401, ``WWW-Authenticate: Bearer error="invalid_token"``).

    The wire message is generic; the precise cause is logged at debug level only (never sent).
    Spec 2025-11-25 ``basic/authorization`` §Token Handling; RFC 6750 §3.1.
    """

    default_message = "Invalid or expired token"
    default_reason = "invalid_token"


class InsufficientScopeError(PermissionDeniedError):
    """The caller's token lacks a scope a tool (resource, prompt) was registered with
    (-32003, HTTP 403, ``WWW-Authenticate: Bearer error="insufficient_scope", scope="..."``).

    Attributes:
        required: the scopes the operation needs (sorted tuple).
    Spec 2025-11-25 ``basic/authorization`` §Scope Challenge Handling.
    """

    default_message = "Insufficient scope"
    default_reason = "insufficient_scope"

    def __init__(self, required: tuple[str, ...], *, headers: dict[str, str] | None = None) -> None:
        self.required = required
        super().__init__(
            f"Insufficient scope: this operation needs {' '.join(required)}",
            data={"requiredScopes": list(required)},
            headers=headers,
        )


class RemoteAccessDeniedError(PermissionDeniedError):
    """No authentication is configured (no ``MCP_AUTH_MODE``, no ``McpRouter(authenticate=...)``;
    an HTTP-level FastAPI dependency on the route does not count) and the request is not local:
    its peer is not loopback, or it came through a proxy (``Forwarded``, ``X-Forwarded-For``,
    ``X-Real-IP``, ``Via``…) (-32003, HTTP 403). The message says what to set."""

    default_message = (
        "This MCP server has no authentication configured and only answers local requests: set "
        "MCP_AUTH_MODE=jwt (or oauth) or McpRouter(authenticate=...), or set MCP_AUTH_MODE=none explicitly "
        "to serve unauthenticated remote callers"
    )
    default_reason = "authentication_not_configured"
    default_hint = (
        "A FastAPI dependency on the route (FastAPI/APIRouter/include_router dependencies=) is not counted as "
        "authentication: return a Principal from McpRouter(authenticate=...), or set MCP_AUTH_MODE=none if it authenticates."
    )


class IdentityProviderUnavailableError(StateUnavailableError):
    """No key to verify a token with: the JWKS (or the authorization server's metadata) could
    not be fetched and no key is known yet (-32603, HTTP 503, ``Retry-After``). Once keys were
    fetched they are kept while the identity provider is unreachable."""

    default_message = "The identity provider's signing keys are unavailable, retry later"
    default_reason = "identity_provider_unavailable"


class TestClientInputError(Exception):
    """``McpTestClient`` could not answer what the server asked (raised in the test, never sent):
    the server asked ``elicitation/create``, ``sampling/createMessage`` or ``roots/list`` and the
    client has no ``elicitation=`` / ``sampling=`` / ``roots=`` for it (pass one, or leave the
    capability undeclared to test the refusal), or a 2026-07-28 call still answered
    ``input_required`` after ``max_input_rounds`` retries (the handler keeps asking)."""

    __test__ = False  # not a pytest test class despite its name


class TestClientTaskError(Exception):
    """``McpTestClient.call_tool`` was answered with a task (2026 ``resultType: "task"``: a task
    tool, the client declared the tasks extension), not a tool result: there is nothing to check
    in it yet. Call ``call_tool_as_task`` and ``wait_task`` (or leave the extension undeclared
    for a plain call). Raised in the test, never sent."""

    __test__ = False  # not a pytest test class despite its name


class DeclarationError(TypeError):
    """A handler used something its registration did not declare, or broke a declared type: a
    programming error, like a call with an unexpected keyword argument (hence ``TypeError``).

    Raised by ``ctx.fail`` with a reason absent from the tool's ``errors=[ErrorContract(...)]``,
    by ``ctx.enrich`` with a field absent from ``enrichment=`` or a value outside its type, by
    ``ctx.content`` with a block that is not a valid content block (bad base64, an image
    ``mimeType`` that is not ``image/*``...). Inside a call it is a crash: the model sees the generic ``internal_error``
    result, the server log gets the message and the traceback.
    """


class UnsupportedContentEncodingError(UnsupportedMediaTypeError):
    """A POST body sent with a ``Content-Encoding`` other than ``identity`` (``gzip``, ``br``...):
    this server decodes no content coding, so the body is refused rather than parsed as if plain
    (-32600, HTTP 415, ``Accept-Encoding: identity``; ``data.contentEncoding`` names the coding).
    RFC 9110 §8.4 and §15.5.16."""

    default_message = "Unsupported Media Type: the body must not be content-encoded"
    default_reason = "unsupported_content_encoding"
    default_hint = "Send the body uncompressed (no Content-Encoding header, or Content-Encoding: identity)."


class ProtocolVersionMismatchError(UnsupportedVersionHeaderError):
    """2025 era: a request of a session carries an ``MCP-Protocol-Version`` other than the one
    that session negotiated at ``initialize`` (-32600, HTTP 400).

    The version is served by this server but not in this session: the session's behaviour is
    fixed by its negotiated version, so serving the request would answer in a version the client
    did not ask for. ``data`` is ``{"supported": [<negotiated>], "requested": <echo>,
    "negotiated": <negotiated>}``. Spec 2025-11-25 ``basic/transports`` §Protocol Version
    Header (the header SHOULD be the negotiated version; an invalid or unsupported one MUST get 400).
    """

    default_reason = "protocol_version_mismatch"

    def __init__(self, requested: str, negotiated: str) -> None:
        InvalidRequestError.__init__(
            self,
            f"Bad Request: MCP-Protocol-Version {requested!r} is not the version this session negotiated ({negotiated!r})",
            data={"supported": [negotiated], "requested": requested, "negotiated": negotiated},
            recovery_hint=f"Send MCP-Protocol-Version: {negotiated} in this session, or initialize a new session to use another version.",
        )


class TaskNotFoundError(InvalidParamsError):
    """``tasks/get`` / ``tasks/result`` / ``tasks/update`` / ``tasks/cancel`` named a task this
    caller has no record of: never created, expired (its TTL elapsed) or another owner's
    (-32602, HTTP 400; the same answer in all three cases, so task ids cannot be probed).
    ``data.taskId`` echoes the id (bounded). Spec 2025-11-25 ``basic/utilities/tasks`` §Error
    Handling; SEP-2663 §Protocol Errors."""

    default_message = "Failed to retrieve task: Task not found"
    default_reason = "task_not_found"
    default_hint = "Check the taskId: a task is kept for its TTL after creation (2026 ttlMs, 2025 ttl), for its creator only."
    reason_hints: ClassVar[dict[str, str]] = {
        "task_cancelled": "The taskId is right but the task was cancelled before it produced a result: call the tool again.",
        "invalid_params": "Send taskId as the string the task's creation answered.",
    }

    def hint_for(self, reason: str | None) -> str | None:
        """Each ``reason`` has its own hint (:attr:`reason_hints`; else :attr:`default_hint`)."""
        return self.reason_hints.get(reason or "", self.default_hint)


class TaskQuotaExceededError(InvalidRequestError):
    """One owner already holds ``MCP_MAX_TASKS_PER_OWNER`` stored tasks (-32600, HTTP 429):
    the ``tools/call`` that would create one more is refused before its handler runs."""

    http_status = 429
    default_message = "Too many tasks for this caller"
    default_reason = "task_quota_exceeded"
    default_hint = "Wait for earlier tasks to expire (their ttlMs), or cancel the ones no longer needed."


class TaskTtlError(InvalidParamsError):
    """A 2025 ``tools/call`` asked a ``task.ttl`` outside ``MCP_TASK_MIN_TTL_MS`` ..
    ``MCP_TASK_MAX_TTL_MS``, or not a positive integer of milliseconds (-32602, HTTP 400)."""

    default_reason = "task_ttl_out_of_range"


class TaskFailedError(InternalError):
    """Why a task ended ``failed`` without a JSON-RPC error of its handler (-32603): the replica
    running it stopped (``reason: task_lost``, lease expired), the server shut down before it
    ended (``server_shut_down``), or its result was larger than ``MCP_TASK_MAX_RESULT_BYTES``
    (``task_result_too_large``). Stored as the task's ``error``, never raised to a caller."""

    default_message = "The task failed"
