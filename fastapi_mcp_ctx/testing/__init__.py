"""Test your own MCP tools in process: :class:`McpTestClient`, calling the ASGI app directly.

Like FastAPI's ``TestClient`` it calls the app directly (no server, no socket), so
``app.dependency_overrides``, ``authenticate=`` and middleware apply; it speaks either era
as a real client does (``docs/testing.md``)::

    async with McpTestClient(app, era="modern", log_level="info") as client:
        result = await client.call_tool("add_note", {"text": "hello"})
    assert result.structured == {"id": 1, "text": "hello"}
    assert [entry["data"]["message"] for entry in result.logs] == ["stored"]

Tools that ask for input (``ctx.elicit``, ``ctx.sample``, ``ctx.list_roots``,
``ctx.request_input``) are answered by the ``elicitation=``, ``sampling=`` and ``roots=``
callbacks, in both eras (2026-07-28 ``input_required`` retries; 2025 requests on the call's
stream, read as they arrive); :attr:`McpResponse.asked` records what was asked.
:func:`reset_state` empties ``ctx.state`` between tests. Needs the ``testing`` extra:
``pip install "fastapi-mcp-ctx[testing]"`` (httpx, asgi-lifespan).

The client's parts: the wire round trip (``testing._exchange``), the answered questions
(``testing._input``), the results (``testing._results``), resources/prompts/completions
(``testing._features``), :func:`reset_state` (``testing._state``), what goes on the wire
(``testing._encoding``) and the in-process ASGI call (``testing._asgi``); the lifecycle and the tool
requests are here. The package imports ``router``, ``_server``, ``_handlers`` and below, through the
public surface where it can; nothing in ``fastapi_mcp_ctx`` imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Final, Literal, Self, cast

import anyio
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION
from starlette.types import ASGIApp, Receive, Scope, Send

try:
    import httpx
    from asgi_lifespan import LifespanManager
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        'fastapi_mcp_ctx.testing needs httpx and asgi-lifespan: pip install "fastapi-mcp-ctx[testing]"'
    ) from exc

from .. import __version__
from .._discovery import find_targets
from ..errors import McpResponseError, TestClientInputError, TestClientTaskError
from ..router import McpRouter
from ._encoding import header_params_of, param_headers, response_error
from ._exchange import WireExchange
from ._features import FeatureRequests
from ._input import ElicitationCallback, InputAnswerer, RootsCallback, SamplingCallback, answer_rounds
from ._results import Asked, McpResponse, Notified, ToolResult
from ._state import StateReset, reset_state
from ._tasks import TASKS_CAPABILITY, TaskRequests, refuse_task

__all__ = [
    "TASKS_CAPABILITY",
    "Asked",
    "Era",
    "McpResponse",
    "McpResponseError",
    "McpTestClient",
    "TestClientInputError",
    "TestClientTaskError",
    "ToolResult",
    "reset_state",
]

Era = Literal["legacy", "modern"]
"""A protocol era: ``"legacy"`` (2025 handshake) or ``"modern"`` (2026-07-28)."""
BASE_URL: Final = "http://127.0.0.1"
for _member in (Asked, McpResponse, ToolResult, reset_state):  # documented here, as httpx does for its own
    _member.__module__ = __name__


def _endpoint_path(app: ASGIApp) -> str:
    """The path of ``app``'s one ``McpRouter``; ``/mcp`` when a router is there or none is found
    (e.g. an app wrapped in ASGI middleware).

    Raises:
        ValueError: several routers, none at ``/mcp``: the message lists their paths (pass ``path=``).
    """
    paths = sorted({target.path for target in find_targets(app)})
    if "/mcp" in paths:
        return "/mcp"
    if len(paths) > 1:
        raise ValueError(f"the app has several McpRouters ({', '.join(paths)}): choose one with McpTestClient(app, path=...)")
    return paths[0] if paths else "/mcp"


class McpTestClient(WireExchange, StateReset, Notified, FeatureRequests, TaskRequests):
    """An in-process MCP client for ``app``: ``async with McpTestClient(app) as client``.

    ``era="legacy"``: ``initialize`` + ``notifications/initialized`` on entry, ``Mcp-Session-Id``
    and ``MCP-Protocol-Version`` on each request, ``DELETE`` of the session on exit.
    ``era="modern"``: the ``params._meta`` envelope and the ``MCP-Protocol-Version`` /
    ``Mcp-Method`` / ``Mcp-Name`` headers on each request, and ``Mcp-Param-*`` for the
    ``x-mcp-header`` arguments of tools seen by :meth:`list_tools` (as the official client does).
    Answers are read as JSON or SSE; results are checked against the official wire models.
    Resources, prompts and completions: ``list_resources``, ``list_resource_templates``,
    ``read_resource``, ``list_prompts``, ``get_prompt``, ``complete`` (``testing._features``).
    Tasks: ``call_tool_as_task``, ``get_task``, ``wait_task``, ``update_task``, ``cancel_task``,
    ``task_result``, ``list_tasks`` (``testing._tasks``; 2026 needs ``client_capabilities=TASKS_CAPABILITY``).

    Args:
        app: the ASGI app (your ``FastAPI`` app including an ``McpRouter``).
        era: ``"legacy"`` (2025 handshake, sessions) or ``"modern"`` (2026-07-28, stateless).
        path: the MCP endpoint path, with any router prefix; default ``/mcp`` when a router is
            there, else the path of the app's one ``McpRouter`` (included routers and mounted
            apps searched).
        headers: HTTP headers of every request (``Authorization``, ``X-API-Key``...).
        client_capabilities: ``ClientCapabilities`` (legacy: in ``initialize``; modern: in ``_meta``).
        client_info: the ``Implementation`` sent (default ``fastapi-mcp-ctx-testing``).
        log_level: lowest ``notifications/message`` level wanted. Legacy: ``logging/setLevel``
            after the handshake (None: every level is sent); modern: ``_meta`` ``logLevel``
            (None: no log messages).
        protocol_version: default ``2025-11-25`` (legacy) / ``2026-07-28`` (modern).
        lifespan: run the app's lifespan around the block (its state reaches ``request.state``).
        base_url: scheme and host (loopback: DNS-rebinding protection checks as for a local server).
        timeout: seconds one request may take before :class:`TimeoutError` (each round of a
            2026 call; a whole 2025 call, its answered requests included).
        validate: check each result against the official wire model (``pydantic.ValidationError``).
        elicitation: answers ``elicitation/create`` (form and URL mode): ``(params) ->``
            ``ElicitAnswer`` / pydantic model (accepted) / ``ElicitResult`` dict, sync or async.
        sampling: answers ``sampling/createMessage``: ``(params) ->`` str (the assistant's
            text) / pydantic model / ``CreateMessageResult`` dict.
        roots: answers ``roots/list``: a list of URIs / ``Root`` dicts, or ``(params) ->`` one.
        max_input_rounds: ``input_required`` results a 2026 call answers before
            :class:`TestClientInputError`.

    Each callback given declares its capability (``elicitation: {form, url}``, ``sampling``,
    ``roots``) unless ``client_capabilities`` names it; ``ping`` from the server is answered.

    Attributes:
        session_id: the 2025 ``Mcp-Session-Id`` (None in the modern era or stateless mode).
        initialize_result: the ``InitializeResult`` (legacy; None in the modern era).
        notifications: every notification received so far (``logs``, ``progress`` read them).
        router: the ``McpRouter`` that served the last request (None before one did).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        era: Era = "legacy",
        path: str | None = None,
        headers: Mapping[str, str] | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        client_info: Mapping[str, Any] | None = None,
        log_level: str | None = None,
        protocol_version: str | None = None,
        lifespan: bool = False,
        base_url: str = BASE_URL,
        timeout: float = 10.0,
        validate: bool = True,
        elicitation: ElicitationCallback | None = None,
        sampling: SamplingCallback | None = None,
        roots: RootsCallback | Sequence[Any] | None = None,
        max_input_rounds: int = 10,
    ) -> None:
        if era not in ("legacy", "modern"):
            raise ValueError(f"era must be 'legacy' or 'modern', not {era!r}")
        self.app, self.path, self.lifespan = app, path if path is not None else _endpoint_path(app), lifespan
        self.era: Era = era
        self.headers = dict(headers or {})
        self.answerer = InputAnswerer(elicitation, sampling, roots)
        self.client_capabilities = {**self.answerer.capabilities(), **(client_capabilities or {})}
        self.max_input_rounds = max_input_rounds
        self.client_info = dict(client_info or {"name": "fastapi-mcp-ctx-testing", "version": __version__})
        self.log_level = log_level
        self.protocol_version = protocol_version or (LATEST_HANDSHAKE_VERSION if era == "legacy" else LATEST_MODERN_VERSION)
        self.base_url, self.timeout, self.validate = base_url, timeout, validate
        self.session_id: str | None = None
        self.initialize_result: dict[str, Any] | None = None
        self.notifications: list[dict[str, Any]] = []
        self.router: McpRouter | None = None
        self._http: httpx.AsyncClient | None = None
        self._stack = AsyncExitStack()
        self._next_id = 0
        self._header_params: dict[str, dict[str, str]] = {}
        self._app: ASGIApp = app

    # -- lifecycle ----------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        async with AsyncExitStack() as stack:
            target: ASGIApp = self.app
            if self.lifespan:
                target = (await stack.enter_async_context(LifespanManager(cast(Any, self.app)))).app

            async def observed(scope: Scope, receive: Receive, send: Send) -> None:
                try:
                    await target(scope, receive, send)
                finally:  # Starlette's routing leaves the matched endpoint in the scope
                    owner = getattr(getattr(scope.get("endpoint"), "__self__", None), "router", None)
                    self.router = owner if isinstance(owner, McpRouter) else self.router

            self._app = observed  # what call_tool / request stream through; .http buffers
            transport = httpx.ASGITransport(app=observed)
            self._http = await stack.enter_async_context(httpx.AsyncClient(transport=transport, base_url=self.base_url, headers=self.headers))
            if self.era == "legacy":
                await self._handshake()
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self.session_id is not None and self._http is not None:
                with anyio.move_on_after(self.timeout):
                    await self._http.delete(self.path, headers=self._legacy_headers())
                self.session_id = None
        finally:
            self._http = None
            await self._stack.__aexit__(exc_type, exc, tb)

    async def _handshake(self) -> None:
        params = {"protocolVersion": self.protocol_version, "capabilities": self.client_capabilities}
        answer = await self.request("initialize", {**params, "clientInfo": self.client_info})
        self.initialize_result = answer.result
        self.protocol_version = str(answer.result.get("protocolVersion", self.protocol_version))
        self.session_id = answer.headers.get("mcp-session-id")
        await self.notify("notifications/initialized")
        if self.log_level is not None:
            await self.request("logging/setLevel", {"level": self.log_level})

    # -- requests -----------------------------------------------------------------------
    async def list_tools(self) -> list[dict[str, Any]]:
        """Every ``Tool`` of ``tools/list`` (all pages); remembers their ``x-mcp-header`` arguments.

        Raises:
            McpResponseError: the server answered an error.
        """
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = (await self.request("tools/list", {"cursor": cursor} if cursor else None)).result
            tools.extend(page.get("tools", []))
            cursor = page.get("nextCursor")
            if not cursor:
                break
        self._header_params.update({tool["name"]: header_params_of(tool) for tool in tools})
        return tools

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress_token: str | int | None = None,
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auto_answer: bool = True,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
    ) -> ToolResult:
        """Call tool ``name``. A tool failure is a result (``is_error``), not an exception.

        Args:
            arguments: the tool's arguments (a JSON object).
            progress_token: sent as ``_meta.progressToken``, so ``ctx.report_progress`` reaches
                :attr:`ToolResult.progress`.
            meta: extra ``params._meta`` keys (``traceparent``...).
            headers: extra HTTP headers of this call (over the client's).
            auto_answer: 2026-07-28: answer ``input_required`` results with the callbacks and
                retry (see :meth:`request`); False returns the first one as it is.
            input_responses / request_state: sent as ``inputResponses`` / ``requestState``
                (a hand-made retry of an ``input_required`` result).

        Raises:
            McpResponseError: a protocol error (unknown tool ``-32602``, 401, 403, an
                undeclared capability ``-32021``...).
            TestClientInputError: the tool asked what no callback answers, or kept asking.
            TestClientTaskError: the call was answered with a task (a task tool, the 2026 client
                declared ``TASKS_CAPABILITY``): use :meth:`call_tool_as_task`.
        """
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        if input_responses is not None:
            params["inputResponses"] = dict(input_responses)
        if request_state is not None:
            params["requestState"] = request_state
        extra = {**(meta or {}), **({"progressToken": progress_token} if progress_token is not None else {})}
        mirrored = param_headers(self._header_params.get(name, {}), params["arguments"]) if self.era == "modern" else {}
        sent = {**mirrored, **(headers or {})}
        answer = await self.request("tools/call", params, meta=extra, headers=sent, auto_answer=auto_answer)
        refuse_task(name, answer.result)
        return ToolResult(answer.method, answer.result, answer.notifications, answer.http_status, answer.headers, answer.asked)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auto_answer: bool = True,
    ) -> McpResponse:
        """Send a JSON-RPC request (``"tools/list"``, ``"server/discover"``, ``"ping"``...) in the
        client's era and return its result; ``meta`` adds ``params._meta`` keys, ``headers``
        HTTP headers.

        Questions are answered with the callbacks: server→client requests arriving on the
        request's stream (2025) as they arrive, and, with ``auto_answer``, a 2026-07-28
        ``input_required`` result by retrying with ``inputResponses`` and the echoed
        ``requestState``, at most ``max_input_rounds`` times (spec 2026-07-28
        ``basic/patterns/mrtr``). ``asked`` records every question and answer.

        Raises:
            McpResponseError: a JSON-RPC error, or an HTTP error without one.
            TimeoutError: no answer within ``timeout`` seconds.
            TestClientInputError: a question no callback answers; still ``input_required``
                after ``max_input_rounds`` retries.
            pydantic.ValidationError: the result breaks the official wire model (``validate``).
        """
        answer = await self._request_once(method, params, meta, headers)
        if not (auto_answer and answer.input_required):
            return answer

        async def resend(retried: dict[str, Any]) -> McpResponse:
            return await self._request_once(method, retried, meta, headers)

        return await answer_rounds(self.answerer, answer, dict(params or {}), resend, self.max_input_rounds)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None = None, *, headers: Mapping[str, str] | None = None
    ) -> None:
        """Send a JSON-RPC notification (``notifications/cancelled``...).

        Raises:
            McpResponseError: the server answered anything but 202 Accepted.
        """
        response, messages = await self._send(method, params, None, headers, None, [])
        if response.status_code != 202:
            raise response_error(method, response, next(iter(messages), None), self.app)
