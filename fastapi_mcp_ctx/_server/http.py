"""The HTTP front door: content negotiation, single-valued headers, the bounded body read.

Spec 2025-11-25 ``basic/transports`` §Sending Messages to the Server (``Accept`` lists
``application/json`` and ``text/event-stream``); RFC 9110 §12.5.1 (``Accept``, ``q=0``) and
§5.3 (a field that must appear once); RFC 9110 §8.4 / §15.5.16 (a content coding the server
does not decode is answered 415, naming what it accepts in ``Accept-Encoding``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from itertools import chain
from typing import Final, NoReturn

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.types import Message, Receive

from .._fastapi_routes import LEAN_SCOPE_KEY
from .._wire.envelope import HeaderMap, header_map
from .._wire.memo import BoundedMemo
from ..errors import (
    HeaderFieldsTooLargeError,
    HeaderMismatchError,
    HostNotAllowedError,
    InvalidRequestError,
    McpError,
    OriginNotAllowedError,
    PayloadTooLargeError,
    RequestTimeoutError,
    UnsupportedContentEncodingError,
)
from .first_step import Rest, first_step

__all__ = [
    "BODY_SCOPE_KEY",
    "HEADERS_SCOPE_KEY", "accepted", "read_body", "refuse_content_coding", "reject_repeated", "replaying_receive", "screen_headers"]

HEADERS_SCOPE_KEY = "fastapi_mcp_ctx.headers"
"""Request-scope key of the :class:`HeaderMap` built by the route's screen (``McpEndpoint.screen``)."""

BODY_SCOPE_KEY = "fastapi_mcp_ctx.body"
"""Request-scope key of the POST body, read once by the endpoint and replayed to dependencies."""

_Q_ZERO = re.compile(r"(?:^|;)\s*q\s*=\s*0(?:\.0{0,3})?\s*(?:;|$)", re.IGNORECASE)


_ACCEPT_CACHE: Final = BoundedMemo[tuple[bool, bool]](128)  # a client sends the same Accept on every request


def accepted(headers: HeaderMap) -> tuple[bool, bool]:
    """``(application/json accepted, text/event-stream accepted)``; no Accept header admits both."""
    accept = headers.get("accept")
    if accept is None:
        return True, True
    return _ACCEPT_CACHE.get(accept, _parse_accept)


def _parse_accept(accept: str) -> tuple[bool, bool]:
    json_ok = sse_ok = False
    for part in accept.split(","):
        value, _, parameters = part.partition(";")
        value = value.strip().lower()
        if _Q_ZERO.search(parameters):
            continue  # q=0 means "not acceptable" (RFC 9110 §12.4.2)
        if value in ("*/*", "application/json", "application/*"):
            json_ok = True
        if value in ("*/*", "text/event-stream", "text/*"):
            sse_ok = True
    return json_ok, sse_ok


_SINGLE_VALUED: dict[str, type[McpError]] = {
    "host": HostNotAllowedError,
    "authorization": InvalidRequestError,  # RFC 9110 §11.6.2: two credentials, one checked, the other read
    "proxy-authorization": InvalidRequestError,
    "origin": OriginNotAllowedError,
    "mcp-protocol-version": HeaderMismatchError,
    "mcp-method": HeaderMismatchError,
    "mcp-name": HeaderMismatchError,
    "mcp-session-id": InvalidRequestError,
    "content-type": InvalidRequestError,
    "content-length": InvalidRequestError,
    "last-event-id": InvalidRequestError,
}


def reject_repeated(repeated: AbstractSet[str]) -> None:
    """A header that must appear once appears twice: never let the last copy silently win.

    Each ``Mcp-Param-*`` mirror (2026-07-28 ``streamable-http`` §Custom Parameter Headers) is
    single-valued too: two copies would let one be checked against the body and the other read
    by a proxy (``HeaderMismatchError``, -32020, HTTP 400).
    """
    for name, error in _SINGLE_VALUED.items():
        if name in repeated:
            raise error(f"The {name} header must appear exactly once")
    params = sorted(name for name in repeated if name.startswith("mcp-param-"))
    if params:
        raise HeaderMismatchError(f"The {params[0]} header must appear exactly once")


_FRONT_SINGLE_VALUED: Final = frozenset({"host", "origin", "authorization", "proxy-authorization"})


def screen_headers(raw: Sequence[tuple[bytes, bytes]], limit: int) -> HeaderMap:
    """The MCP route's first look at a request, before FastAPI solves any route, router or app
    dependency (``LeanRoute.handle``): the header bound (431: the names and values together
    past ``limit`` bytes, refused before anything reads one: uvicorn with httptools accepts
    headers of any size, and a 4 MB ``Authorization`` would otherwise be decoded, mapped and
    parsed), then the :class:`HeaderMap` the endpoint reads (built once, here), refusing a
    repeated ``Host``, ``Origin``, ``Authorization`` or ``Proxy-Authorization`` (an app's
    dependency would read one copy and the gate verify the other). The other single-valued
    headers are refused by the endpoint, before authentication, with the body's request id.

    Returns:
        The request's headers (lower-case names, the last value of a repeated one, ``repeated``).
    Raises:
        HeaderFieldsTooLargeError: 431 (RFC 6585 §5) naming ``MCP_MAX_REQUEST_HEADER_BYTES``.
        HostNotAllowedError, OriginNotAllowedError: 403.
        InvalidRequestError: -32600, HTTP 400 (a repeated credential header).
    """
    size = sum(map(len, chain.from_iterable(raw)))  # every name and value, counted in C
    if size > limit:
        _refuse_header_size(size, limit)
    headers = header_map(raw)
    if headers.repeated:
        reject_repeated(headers.repeated & _FRONT_SINGLE_VALUED)
    return headers


def _refuse_header_size(size: int, limit: int) -> NoReturn:
    raise HeaderFieldsTooLargeError(
        f"Request Header Fields Too Large: the request headers hold {size} bytes, more than {limit} (MCP_MAX_REQUEST_HEADER_BYTES)"
    )


def refuse_content_coding(raw_headers: Iterable[tuple[bytes, bytes]]) -> None:
    """Refuse a POST whose ``Content-Encoding`` (every copy of the header, each comma-separated
    coding) names anything but ``identity``: the body would be parsed as if plain. Call it only
    when the header is present (the common request has none).

    Raises:
        UnsupportedContentEncodingError: HTTP 415 with ``Accept-Encoding: identity`` and
            ``data.contentEncoding`` (the first coding refused, at most 64 characters).
    """
    for name, value in raw_headers:
        if name.lower() != b"content-encoding":
            continue
        for coding in value.decode("latin-1").split(","):
            coding = coding.strip().lower()
            if coding and coding != "identity":
                shown = coding if len(coding) <= 64 else coding[:63] + "…"
                raise UnsupportedContentEncodingError(
                    f"Unsupported Media Type: Content-Encoding {shown!r} is not supported (send the body uncompressed)",
                    data={"contentEncoding": shown},
                    headers={"Accept-Encoding": "identity"},
                )


async def read_body(request: Request, headers: HeaderMap, limit: int, timeout: float) -> bytes:
    """The whole body, refused with 413 past ``limit`` bytes: a larger ``Content-Length`` before
    reading, else counted on the bytes read (a body may be chunked or lie about its length);
    refused with 408 when it has not arrived in full ``timeout`` seconds after the read began.

    Raises:
        PayloadTooLargeError (413), RequestTimeoutError (408, ``Connection: close``),
        InvalidRequestError (malformed Content-Length), ClientDisconnect.
    """
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.isascii() or not declared.isdigit():
            raise InvalidRequestError("Invalid Content-Length header")
        if int(declared) > limit:
            raise _too_large(limit)
    try:
        first: Message | None = None
        rest: Rest[Message] | None = None
        if request.scope.get(LEAN_SCOPE_KEY):  # the server's own receive: nothing read the body before
            first, rest = first_step(request._receive())  # pyright: ignore[reportPrivateUsage]  # the property's own field
            if first is not None and first["type"] == "http.request" and not first.get("more_body", False):
                body: bytes = first.get("body", b"")  # all there already: no wait to bound
                if len(body) > limit:
                    raise _too_large(limit)
                return body
        task = _asyncio_task()  # only now: the usual body above needs no deadline, hence no task
        if task is None:  # another event loop (trio): anyio's deadline around the same read
            with anyio.fail_after(timeout):
                return await _read(request, limit, first, rest)
        return await _read_before(task, timeout, request, limit, first, rest)
    except TimeoutError:
        raise RequestTimeoutError(
            f"Request Timeout: the request body did not arrive in full within {timeout:g} s (MCP_BODY_TIMEOUT_SECONDS)"
        ) from None


def _asyncio_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop (trio)
        return None


class _Expiry:
    """The timer callback of :func:`_read_before`: cancels the reading task, remembers it did."""

    __slots__ = ("fired", "task")

    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task
        self.fired = False

    def __call__(self) -> None:
        self.fired = True
        self.task.cancel()


def _too_large(limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"Payload Too Large: the body exceeds {limit} bytes")


async def _read_before(
    task: asyncio.Task[object],
    timeout: float,
    request: Request,
    limit: int,
    first: Message | None = None,
    rest: Rest[Message] | None = None,
) -> bytes:
    """:func:`_read` within ``timeout`` seconds on asyncio, else ``TimeoutError``: what
    ``asyncio.timeout`` does (the same cancel/uncancel accounting, so a cancellation from
    outside still propagates), at a third of its cost per request (one timer, no state machine)."""
    expiry = _Expiry(task)
    cancelling = task.cancelling()
    timer = task.get_loop().call_later(timeout, expiry)
    try:
        return await _read(request, limit, first, rest)
    except asyncio.CancelledError:
        if expiry.fired and task.uncancel() <= cancelling:
            raise TimeoutError from None
        raise
    finally:
        timer.cancel()


async def _read(request: Request, limit: int, first: Message | None = None, rest: Rest[Message] | None = None) -> bytes:
    """The body from ``receive``; ``first`` / ``rest``: the first message, or the rest of the
    first ``receive()``, when :func:`read_body` already took its first step."""
    if not request.scope.get(LEAN_SCOPE_KEY):
        # FastAPI ran HTTP-level dependencies first: one may have read (and cached) the body,
        # which Request.stream() replays; otherwise it streams from receive, still bounded.
        size = 0
        parts: list[bytes] = []
        async for part in request.stream():
            size += len(part)
            if size > limit:
                raise _too_large(limit)
            parts.append(part)
        return b"".join(parts)
    chunks: list[bytes] = []
    size = 0
    receive = request.receive
    while True:
        if rest is not None:
            message, rest = await rest, None
        elif first is not None:
            message, first = first, None
        else:
            message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def replaying_receive(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the already-read ``body`` once, then defers to ``receive``."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
