"""One stdio connection: newline-delimited JSON-RPC on two file descriptors, one session.

Spec 2025-11-25 ``basic/transports`` §stdio: every message is one line of UTF-8 JSON (no
embedded newline), the server writes nothing else to its output; ``basic/lifecycle``: the
client opens with ``initialize`` (2025 era) and ends the session by closing the server's
input. A client may instead open with a 2026-07-28 request (the ``_meta`` envelope,
``server/discover``); the first request fixes the connection's era, as in the official SDK:
later ``initialize`` on a 2026 connection is ``-32022`` naming the served versions, an
enveloped request on a 2025 connection is ``-32600``. stdio has no headers, so the 2026
header checks do not apply.

Reading never waits for a handler (asyncio): a daemon thread reads the input (a blocked read never
keeps the process alive), every request runs as its own task through the router's
:class:`~fastapi_mcp_ctx._server.dispatch.Dispatcher`, and one writer task serializes the output,
so a call's notifications (progress, ``ctx.log``) precede its result and results go out as
they complete. ``notifications/cancelled`` cancels a request, which is then never answered
(``basic/utilities/cancellation``). Responses the client sends go to a
:class:`~fastapi_mcp_ctx._transport.pending.PendingRequests` table. At end of input, requests still
running get ``drain_seconds`` to finish, then are cancelled; the session then returns.

Tools see a synthetic Starlette ``Request``: an HTTP ``POST`` to the router's path carrying
the headers given at start-up (``--header``, ``MCP_STDIO_HEADER_<NAME>``: :mod:`.headers`),
client ``("stdio", 0)``, ``scope["app"]`` set (so ``dependency_overrides`` apply) and the
lifespan state in ``scope["state"]``. Every request (``initialize`` and a batch line
included) runs the router's ``authenticate=`` (or its ``MCP_AUTH_MODE=jwt|oauth`` bearer gate)
on that request first, exactly as over HTTP (:mod:`fastapi_mcp_ctx._server.authn`): its
principal gives ``ctx.auth`` and ``ctx.tenant_id``, a refusal is the JSON-RPC error HTTP would
carry (``-32001`` for 401), the dependency's background tasks run after the answer. Without
either, the caller is the local user of tenant ``"default"``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp_types.version import LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Message

from .._context.cancel_signal import CancelSignal
from .._server.authn import AuthOutcome
from .._server.batch_core import BATCH_VERSION, run_call, starts_batch
from .._server.dispatch import PRINCIPAL_SCOPE_KEY
from .._server.http import BODY_SCOPE_KEY
from .._server.outcomes import PreparedCall
from .._transport.pending import PendingRequests
from .._transport.requests import BackChannel
from .._transport.sessions import SessionRecord, check_client_metadata
from .._transport.streams import Reply
from .._wire.envelope import Era, HeaderMap, RequestEnvelope, choose_era, read_legacy_envelope, read_modern_envelope
from .._wire.jsonrpc import (
    JsonRpcNotification,
    JsonRpcRequest,
    RequestId,
    dumps,
    error_message,
    parse_message,
    request_id_of,
    result_message,
)
from ..auth import Principal
from ..errors import InvalidRequestError, McpError, PayloadTooLargeError, UnsupportedVersionError
from ..router import McpRouter
from .admission import StdioAdmission
from .batch import StdioBatchHooks, serve_stdio_batch, take_non_request
from .framing import LineFramer, pump, write_all
from .notifications import StdioNotifications

__all__ = ["LineFramer", "StdioSession"]

logger = logging.getLogger("fastapi_mcp_ctx.stdio")

_READ_QUEUE: Final = 16  # chunks buffered between the reader thread and the loop (≤ 1 MiB)
_WRITE_QUEUE: Final = 256  # messages waiting for the writer; senders wait beyond
_WRITE_BATCH: Final = 64
_NO_HEADERS: Final = HeaderMap()


class StdioSession:
    """Serve ``router`` on one stdio connection until its input ends or :meth:`stop` is called.

    Args:
        router: the :class:`McpRouter` whose dispatcher serves the requests.
        app: the ASGI app the router is mounted in (``scope["app"]``: dependency overrides).
        path: the router's HTTP path (``scope["path"]`` of the synthetic requests).
        app_state: the lifespan state, copied into each request's ``scope["state"]``.
        read_fd / write_fd: the transport's input and output file descriptors.
        drain_seconds: at end of input, how long running requests may still finish (seconds).
        on_shutdown: called once when the input ends (or :meth:`stop`), before draining.
        headers: the synthetic requests' headers, ASGI pairs (lower-case names; :func:`.headers.stdio_headers`).
    """

    def __init__(
        self,
        router: McpRouter,
        *,
        app: Any,
        path: str,
        app_state: Mapping[str, Any] | None = None,
        read_fd: int,
        write_fd: int,
        drain_seconds: float = 0.5,
        on_shutdown: Callable[[], None] | None = None,
        headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        self.router = router
        self.pending = PendingRequests()
        self._app = app
        self._path = path
        self._app_state = dict(app_state or {})
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._drain_seconds = drain_seconds
        self._on_shutdown = on_shutdown
        self._headers = list(headers)
        self._admission = StdioAdmission(router.endpoint.authenticate, router.endpoint.gate, self._headers)
        self._limit = router.settings.max_body_bytes
        self._era: Era | None = None
        self._record: SessionRecord | None = None
        self._in_flight: dict[RequestId, CancelSignal] = {}
        self._read_scope = anyio.CancelScope()
        self._closed = anyio.Event()
        self._out: MemoryObjectSendStream[bytes] | None = None
        self._broken = False
        self._notifications = StdioNotifications(router.notifier, self._send, buffer_size=router.settings.stream_buffer_size)

    def stop(self) -> None:
        """Stop reading (as at end of input): drain, cancel, return from :meth:`serve`."""
        self._read_scope.cancel()

    async def serve(self) -> None:
        """Serve until the input ends; then let running requests drain, cancel the rest, flush."""
        send, receive = anyio.create_memory_object_stream[bytes](_WRITE_QUEUE)
        self._out = send
        async with anyio.create_task_group() as writer:
            writer.start_soon(self._write_loop, receive)
            async with anyio.create_task_group() as requests:
                with self._read_scope:
                    await self._read_loop(requests)
                if self._on_shutdown is not None:
                    self._on_shutdown()
                await self._drain()
                requests.cancel_scope.cancel()
            send.close()  # the writer flushes what is queued, then ends

    async def _drain(self) -> None:
        self._notifications.close()  # listen requests answered "complete"; the 2025 feed stops
        with anyio.move_on_after(self._drain_seconds):
            while self._in_flight:
                await anyio.sleep(0.01)
        for request_id, signal in list(self._in_flight.items()):
            logger.info("stdio: input closed, cancelling request %r", request_id)
            signal.cancel("stdin closed")
        self._closed.set()
        self.pending.close()

    # -- input --------------------------------------------------------------------------
    async def _read_loop(self, requests: TaskGroup) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        slots = threading.Semaphore(_READ_QUEUE)
        reader = threading.Thread(target=pump, args=(self._read_fd, loop, queue, slots), name="mcp-stdio-reader", daemon=True)
        reader.start()
        framer = LineFramer(self._limit)
        while True:
            chunk = await queue.get()
            slots.release()
            for line in framer.feed(chunk):
                await self._on_line(line, requests)
            if not chunk:
                return

    async def _on_line(self, line: bytes | None, requests: TaskGroup) -> None:
        if line is None:
            await self._send(error_message(None, PayloadTooLargeError(f"Payload Too Large: a message exceeds {self._limit} bytes")))
            return
        if not line.strip():
            return
        record = self._record
        if record is not None and record.protocol_version == BATCH_VERSION and starts_batch(line):  # _stdio/batch.py
            try:  # the line is one HTTP POST's body: authenticated once, as over HTTP
                principal, outcome = await self._admit(self._request(line))
            except McpError as exc:
                await self._send(error_message(None, exc))
                return
            await serve_stdio_batch(self._batch_hooks(principal), record, line, self.router.settings.max_batch_size, requests)
            await self._admission.after(outcome)
            return
        try:
            message = parse_message(line)
        except McpError as exc:
            await self._send(error_message(request_id_of(exc), exc))
            return
        if not isinstance(message, JsonRpcRequest):
            take_non_request(message, self.pending, self._on_notification)
            return
        if message.id in self._in_flight:
            await self._send(error_message(message.id, InvalidRequestError(f"Request id {message.id!r} is already in flight")))
            return
        try:
            if message.method == "initialize":  # inline: requests pipelined behind it see the session
                _, outcome = await self._admit(self._request(line))
                await self._send(self._initialize(message))
                await self._admission.after(outcome)
                assert self._record is not None
                await self._notifications.attach_session(self._record.id, requests)
                return
            envelope = self._envelope(message)
        except McpError as exc:
            await self._send(error_message(message.id, exc))
            return
        signal = self._in_flight[message.id] = CancelSignal()
        if envelope.era == "modern" and message.method == "subscriptions/listen":
            requests.start_soon(self._serve_listen, message, line, signal)
            return
        requests.start_soon(self._serve_request, message, envelope, line, signal)

    def _on_notification(self, message: JsonRpcNotification) -> None:
        if message.method != "notifications/cancelled":
            logger.debug("stdio: notification %s ignored", message.method)
            return
        request_id = message.params.get("requestId")
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return
        signal = self._in_flight.get(request_id)
        if signal is not None:  # unknown or finished ids are ignored (spec: MAY)
            reason = message.params.get("reason")
            signal.cancel(reason if isinstance(reason, str) else "cancelled by the client")

    # -- the session ------------------------------------------------------------------
    def _initialize(self, message: JsonRpcRequest) -> dict[str, Any]:
        if self._era == "modern":
            requested = message.params.get("protocolVersion")
            raise UnsupportedVersionError(requested if isinstance(requested, str) else None, list(MODERN_PROTOCOL_VERSIONS))
        if self._record is not None:
            raise InvalidRequestError("This stdio session is already initialized (one session per process)")
        check_client_metadata(message.params, self.router.settings.max_client_metadata_bytes)
        result, version = self.router.dispatcher.initialize_result(message.params, transport="stdio")
        self._record = SessionRecord.from_initialize(message.params, version)
        self._era = "legacy"
        return result_message(message.id, result)

    def _envelope(self, message: JsonRpcRequest) -> RequestEnvelope:
        params = message.params
        if choose_era(_NO_HEADERS, params) == "modern" or self._era == "modern":
            if self._era == "legacy":
                raise InvalidRequestError(
                    "This stdio connection serves the 2025 handshake era (it began with initialize): "
                    "requests carrying the 2026-07-28 _meta envelope are not accepted on it"
                )
            envelope = read_modern_envelope(_NO_HEADERS, message.method, params, http_headers=False)
            self._era = "modern"
            return envelope
        if self._record is None:
            if message.method != "ping":
                raise InvalidRequestError("Not initialized: send initialize first (spec 2025-11-25 basic/lifecycle)")
            return read_legacy_envelope(_NO_HEADERS, params, LATEST_HANDSHAKE_VERSION)
        envelope = read_legacy_envelope(_NO_HEADERS, params, self._record.protocol_version)
        envelope.client_capabilities = self._record.client_capabilities
        envelope.client_info = self._record.client_info
        return envelope

    async def _admit(self, request: Request) -> tuple[Principal | None, AuthOutcome | None]:
        """Admit ``request`` (:class:`.admission.StdioAdmission`); the notification feeds follow its tenant."""
        principal, outcome = await self._admission.admit(request)
        if principal is not None:
            self._notifications.tenant_id = principal.tenant_id
        return principal, outcome

    def _request(self, body: bytes, principal: Principal | None = None) -> Request:
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": self._path,
            "raw_path": self._path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": list(self._headers),
            "client": ("stdio", 0),
            "server": None,
            "app": self._app,
            "state": dict(self._app_state),
            "extensions": {},
            BODY_SCOPE_KEY: body,
        }
        if principal is not None:
            scope[PRINCIPAL_SCOPE_KEY] = principal
        closed = self._closed

        async def receive() -> Message:  # the body is replayed by the dispatcher; then: wait for the end
            await closed.wait()
            return {"type": "http.disconnect"}

        return Request(scope, receive)

    async def _serve_request(self, message: JsonRpcRequest, envelope: RequestEnvelope, body: bytes, signal: CancelSignal) -> None:
        try:
            request = self._request(body)
            try:
                _, admitted = await self._admit(request)
            except McpError as exc:
                await self._send(error_message(message.id, exc))
                return
            session = self._record if envelope.era == "legacy" else None
            channel = BackChannel.connection(self.pending, era=envelope.era)  # ctx.send_request: on this connection
            outcome = await self.router.dispatcher.serve(
                message, envelope, request, session, http_headers=False, signal=signal, back_channel=channel
            )
            if isinstance(outcome, Reply):
                if not signal.cancelled:
                    await self._send(outcome.message)
            else:
                await self._run_call(message.id, outcome)
            await self._admission.after(admitted)
        except Exception:  # the dispatcher answers every failure; this guards the session itself
            logger.exception("stdio: serving request %r failed", message.id)
        finally:
            del self._in_flight[message.id]

    async def _serve_listen(self, message: JsonRpcRequest, body: bytes, signal: CancelSignal) -> None:
        try:
            try:
                await self._admit(self._request(body))
            except McpError as exc:
                await self._send(error_message(message.id, exc))
                return
            await self._notifications.listen(message, signal)
        except Exception:
            logger.exception("stdio: serving subscriptions/listen %r failed", message.id)
        finally:
            del self._in_flight[message.id]

    async def _run_call(self, request_id: RequestId, call: PreparedCall) -> None:
        signal = call.signal

        async def outbound(message: dict[str, Any]) -> None:
            if not signal.cancelled:
                await self._send(message)

        reply = await run_call(call, outbound)
        if signal.cancelled:  # never answered (spec: SHOULD NOT; 2026: MUST NOT)
            logger.debug("stdio: request %r cancelled (%s); no answer sent", request_id, signal.reason)
            return
        if reply is not None:
            await self._send(reply.message)
        if call.background.tasks:
            try:
                await call.background()
            except Exception:
                logger.exception("stdio: a background task of request %r failed", request_id)

    def _batch_hooks(self, principal: Principal | None = None) -> StdioBatchHooks:
        def make_request(body: bytes) -> Request:
            return self._request(body, principal)

        return StdioBatchHooks(self.router.dispatcher, self.pending, self._in_flight, self._send, self._envelope, make_request, self._on_notification)

    # -- output -------------------------------------------------------------------------
    async def _send(self, message: dict[str, Any] | bytes) -> None:
        """Write one message (bytes: a JSON text already encoded, a batch's answer array)."""
        assert self._out is not None
        try:
            await self._out.send((message if isinstance(message, bytes) else dumps(message)) + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("stdio: output closed; message dropped")

    async def _write_loop(self, receive: MemoryObjectReceiveStream[bytes]) -> None:
        async with receive:
            async for data in receive:
                batch = [data]
                while len(batch) < _WRITE_BATCH:
                    try:
                        batch.append(receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                if self._broken:
                    continue
                try:
                    await anyio.to_thread.run_sync(write_all, self._write_fd, b"".join(batch), abandon_on_cancel=True)
                except OSError as exc:
                    self._broken = True
                    logger.warning("stdio: the output is closed (%s); stopping", exc)
                    self.stop()
