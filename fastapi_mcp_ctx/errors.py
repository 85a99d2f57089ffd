"""The one errors module of fastapi-mcp-ctx.

Every error the framework raises or translates carries its JSON-RPC ``code`` and the HTTP
``http_status`` it is answered with on the Streamable HTTP transport (MCP 2026-07-28
``basic/transports/streamable-http`` §Server Validation; JSON-RPC codes from
``basic/index`` §Error Codes). Library errors (redis-py, SQLAlchemy, pydantic) are
translated at the edge that calls the library, ``raise ... from exc``.

Tree::

    McpError                         base: code, http_status, message, data
    ├── ParseError                   -32700  400  body is not UTF-8 JSON
    ├── InvalidRequestError          -32600  400  not a single JSON-RPC request / notification
    │   ├── MissingSessionError      -32600  400  2025 era: no Mcp-Session-Id on a non-initialize request
    │   ├── SessionNotFoundError     -32600  404  2025 era: unknown or terminated Mcp-Session-Id
    │   ├── StreamConflictError      -32600  409  2025 era: a second standalone GET stream for one session
    │   ├── InvalidEventIdError      -32600  400  2025 era: a Last-Event-ID that is malformed or names no stream of the session
    │   ├── NotAcceptableError       -32600  406  Accept lacks application/json / text/event-stream
    │   ├── UnsupportedMediaTypeError -32600 415  POST Content-Type is not application/json
    │   ├── PayloadTooLargeError     -32600  413  body larger than MCP_MAX_BODY_BYTES
    │   ├── HostNotAllowedError      -32600  421  Host header outside the allow-list (DNS rebinding)
    │   ├── OriginNotAllowedError    -32600  403  Origin header outside the allow-list
    │   ├── TenantRequiredError      -32600  403  authenticated caller without a tenant claim (fail closed)
    │   └── RequestRejectedError     -32600  4xx  a request-level dependency answered another 4xx (429…)
    ├── MethodNotFoundError          -32601  404  unknown, or removed at this protocol version
    ├── InvalidParamsError           -32602  400  params do not fit the method
    │   ├── UnknownToolError         -32602  400  tools/call of a tool that is not registered
    │   ├── InvalidCursorError       -32602  400  a forged, foreign or stale pagination cursor
    │   ├── ValidationError          -32602  400  a ctx.state key or prefix outside the key grammar
    │   └── SerializationError       -32602  400  a ctx.state value that is not JSON-serializable
    ├── InternalError                -32603  500  a crash; the message sent is generic, the cause is logged
    │   ├── StateUnavailableError    -32603  503  a state backend is down; retryable (Retry-After)
    │   │   └── ServerShuttingDownError -32603 503  this process is shutting down; retry (another replica answers)
    │   └── ConfigurationError       -32603  500  the server is misconfigured (missing extra, SQL schema missing or
    │                                             outdated); not retryable, the message says what the operator must do
    ├── HeaderMismatchError          -32020  400  2026: MCP-Protocol-Version / Mcp-Method / Mcp-Name disagree with the body
    ├── MissingCapabilityError       -32021  400  2026: the call needs a client capability the request did not declare
    ├── UnsupportedVersionError      -32022  400  2026: protocol version not served (data.supported, data.requested)
    ├── AuthenticationError          -32001  401  missing or invalid credentials (a dependency raised HTTPException 401)
    ├── PermissionDeniedError        -32003  403  credentials lack a scope (a dependency raised HTTPException 403)
    └── ToolError                    (no code) an anticipated failure shown to the model as an ``isError`` result

    McpResponseError                 client side: ``fastapi_mcp_ctx.testing`` received an error answer
                                     (the JSON-RPC code, message, data and the HTTP status as sent)
    AppLoadError                     (not a wire error) ``module:attr`` names no servable app or McpRouter (stdio)

A handler raises :class:`ToolError` (or a subclass) for failures the model should read and
recover from; any other exception is a crash: the model sees a generic message and the
server log gets the traceback.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AppLoadError",
    "AuthenticationError",
    "HeaderMismatchError",
    "HostNotAllowedError",
    "InternalError",
    "InvalidCursorError",
    "InvalidParamsError",
    "InvalidRequestError",
    "McpError",
    "McpResponseError",
    "MethodNotFoundError",
    "MissingCapabilityError",
    "MissingSessionError",
    "NotAcceptableError",
    "OriginNotAllowedError",
    "ParseError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RequestRejectedError",
    "SerializationError",
    "SessionNotFoundError",
    "StateUnavailableError",
    "StreamConflictError",
    "TenantRequiredError",
    "ToolError",
    "UnknownToolError",
    "UnsupportedMediaTypeError",
    "UnsupportedVersionError",
    "ValidationError",
    "ConfigurationError",
    "InvalidEventIdError",
    "ServerShuttingDownError",
]


class McpError(Exception):
    """Base of every framework error: a JSON-RPC error with its HTTP status.

    Attributes:
        code: JSON-RPC error code (int).
        http_status: HTTP status the error is answered with on Streamable HTTP.
        message: human-readable message sent on the wire.
        data: optional JSON value sent as ``error.data``.
        headers: extra HTTP response headers (``Retry-After``, ``WWW-Authenticate``...).
    """

    code: ClassVar[int] = -32603
    http_status: int = 500
    default_message: ClassVar[str] = "Internal error"

    def __init__(
        self,
        message: str | None = None,
        *,
        data: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message if message is not None else self.default_message
        self.data = data
        self.headers: dict[str, str] = dict(headers or {})
        super().__init__(self.message)

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member: ``{"code": int, "message": str, "data"?: Any}``."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class ParseError(McpError):
    """The body is not valid UTF-8 JSON (JSON-RPC -32700, HTTP 400)."""

    code = -32700
    http_status = 400
    default_message = "Parse error"


class InvalidRequestError(McpError):
    """Not a single valid JSON-RPC request or notification (-32600, HTTP 400)."""

    code = -32600
    http_status = 400
    default_message = "Invalid Request"


class MissingSessionError(InvalidRequestError):
    """2025 era: a non-initialize request without ``Mcp-Session-Id`` (HTTP 400).

    Spec 2025-11-25 ``basic/transports`` §Session Management item 2.
    """

    default_message = "Bad Request: Missing session ID (send initialize first, then echo its Mcp-Session-Id)"


class SessionNotFoundError(InvalidRequestError):
    """2025 era: an unknown or terminated ``Mcp-Session-Id`` (HTTP 404: the client re-initializes).

    Spec 2025-11-25 ``basic/transports`` §Session Management items 3-4.
    """

    http_status = 404
    default_message = "Session not found"


class StreamConflictError(InvalidRequestError):
    """2025 era: the session already has its standalone GET stream open (HTTP 409)."""

    http_status = 409
    default_message = "Conflict: Only one SSE stream is allowed per session"


class NotAcceptableError(InvalidRequestError):
    """The ``Accept`` header does not admit the response media type (HTTP 406)."""

    http_status = 406
    default_message = "Not Acceptable: Client must accept application/json and text/event-stream"


class UnsupportedMediaTypeError(InvalidRequestError):
    """A POST whose ``Content-Type`` is not ``application/json`` (HTTP 415)."""

    http_status = 415
    default_message = "Unsupported Media Type: Content-Type must be application/json"


class PayloadTooLargeError(InvalidRequestError):
    """The body read so far exceeds ``MCP_MAX_BODY_BYTES`` (HTTP 413)."""

    http_status = 413
    default_message = "Payload Too Large"


class HostNotAllowedError(InvalidRequestError):
    """``Host`` is outside the allow-list: DNS-rebinding protection (HTTP 421).

    Spec 2025-11-25 ``basic/transports`` §Security Warning.
    """

    http_status = 421
    default_message = "Invalid Host header"


class OriginNotAllowedError(InvalidRequestError):
    """``Origin`` is present and outside the allow-list (HTTP 403).

    Spec 2025-11-25 ``basic/transports`` §Security Warning: MUST answer 403.
    """

    http_status = 403
    default_message = "Invalid Origin header"


class TenantRequiredError(InvalidRequestError):
    """Authentication is on and the caller has no tenant claim: tenant storage refuses (HTTP 403)."""

    http_status = 403
    default_message = "No tenant for this caller: tenant-scoped state is unavailable"


class RequestRejectedError(InvalidRequestError):
    """A request-level dependency (``authenticate``) raised ``HTTPException`` with a 4xx other
    than 401/403 (e.g. 429 with ``Retry-After``): the status and headers are kept.

    Args:
        status: the HTTP status (400-499).
        message: the exception's detail.
        headers: the exception's headers.
    """

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message, headers=headers)
        self.http_status = status


class MethodNotFoundError(McpError):
    """Unknown method, or one removed at this protocol version (-32601, HTTP 404)."""

    code = -32601
    http_status = 404
    default_message = "Method not found"


class InvalidParamsError(McpError):
    """The params do not fit the method (-32602, HTTP 400)."""

    code = -32602
    http_status = 400
    default_message = "Invalid params"


class UnknownToolError(InvalidParamsError):
    """``tools/call`` names a tool that is not registered (spec: protocol error -32602)."""

    default_message = "Unknown tool"


class InvalidCursorError(InvalidParamsError):
    """A pagination cursor that this server did not issue for this listing (-32602)."""

    default_message = "Invalid cursor"


class ValidationError(InvalidParamsError):
    """A ``ctx.state`` key or prefix outside ``^[a-zA-Z0-9_.\\-/]+$`` (≤ 1024 chars, no ``..``)."""

    default_message = "Invalid key"


class SerializationError(InvalidParamsError):
    """A ``ctx.state`` value that does not round-trip as JSON; nothing was written."""

    default_message = "Value is not JSON-serializable"


class InternalError(McpError):
    """A crash inside the server (-32603). The wire message is generic; the cause is logged."""

    code = -32603
    http_status = 500
    default_message = "Internal error"


class StateUnavailableError(InternalError):
    """A state backend (Redis, SQL) could not be reached; retry later (HTTP 503, ``Retry-After``).

    Attributes:
        retryable: always True.
        retry_after: seconds a client should wait before retrying.
    """

    http_status = 503
    default_message = "State backend unavailable, retry later"
    retryable: ClassVar[bool] = True

    def __init__(self, message: str | None = None, *, retry_after: int = 1, data: Any = None) -> None:
        self.retry_after = retry_after
        super().__init__(message, data=data, headers={"Retry-After": str(retry_after)})


class HeaderMismatchError(McpError):
    """2026-07-28: a required header is missing or disagrees with the body (-32020, HTTP 400)."""

    code = -32020
    http_status = 400
    default_message = "Header mismatch"


class MissingCapabilityError(McpError):
    """2026-07-28: the request needs a client capability it did not declare (-32021, HTTP 400).

    ``data`` is ``{"requiredCapabilities": <ClientCapabilities subset>}``, e.g.
    ``{"requiredCapabilities": {"sampling": {}}}``.
    """

    code = -32021
    http_status = 400
    default_message = "Missing required client capability"

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

    def __init__(self, requested: Any, supported: list[str]) -> None:
        super().__init__(data={"supported": supported, "requested": requested})


class AuthenticationError(McpError):
    """Missing or invalid credentials (HTTP 401, ``WWW-Authenticate: Bearer``).

    Spec 2025-11-25 ``basic/authorization`` §Token Handling.
    """

    code = -32001
    http_status = 401
    default_message = "Unauthorized"


class PermissionDeniedError(McpError):
    """Valid credentials without the needed scope (HTTP 403, ``error="insufficient_scope"``)."""

    code = -32003
    http_status = 403
    default_message = "Forbidden"


class ToolError(Exception):
    """An anticipated tool failure, returned to the model as ``{"isError": true}`` with the message.

    Spec 2025-11-25 ``server/tools`` §Error Handling: execution errors are tool results,
    not protocol errors.

    Args:
        message: text the model reads.
        recovery_hint: optional advice on how to recover; sent as a second text line and in
            ``structuredContent.error.recovery.hint`` when the tool has structured output.
        data: optional JSON value put in ``structuredContent.error.data``.
    """

    def __init__(self, message: str, *, recovery_hint: str | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.recovery_hint = recovery_hint
        self.data = data


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


class ServerShuttingDownError(StateUnavailableError):
    """This process is shutting down (-32603, HTTP 503, ``Retry-After``): a new stream or session
    is refused, a call still running when the shutdown grace ends is answered with it.
    ``data.reason`` is ``"server_shutting_down"``; retrying reaches another replica."""

    default_message = "The server is shutting down; retry (another replica will answer)"

    def __init__(self, message: str | None = None, *, retry_after: int = 1) -> None:
        super().__init__(
            message,
            retry_after=retry_after,
            data={"reason": "server_shutting_down", "retryAfter": retry_after, "recovery": {"hint": "Retry the request"}},
        )
