"""Defects found by a hostile fault run (2026-12-01) (each test fails on the code it was written against).

In process (``httpx.ASGITransport``), both eras where the defect is era-independent.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import anyio
import httpx
from conftest import BASE_URL, Wire, final_message, make_app, make_router, open_client
from fastapi import Depends
from pydantic import BaseModel

from fastapi_mcp_ctx import Context, mcp_context

# -- lost-request pointer: a deeply nested JSON body on an unmatched path ----------------------------


async def test_lost_request_sniff_of_a_deeply_nested_body_is_a_404_not_a_500() -> None:
    """``_json_rpc_id`` catches ValueError/UnicodeDecodeError only: ``json.loads`` of 200 000 ``[``
    raises RecursionError, so an unmatched JSON POST (the app's plain 404 before the pointer)
    becomes an unhandled exception / HTTP 500 with a traceback in the log, per request."""
    router = make_router()

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    app = make_app(router)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=10.0) as client:
        await client.post("/mcp", json={})  # the endpoint's first request installs the pointer
        response = await client.post("/nope", content=b"[" * 200_000, headers={"content-type": "application/json"})
    assert response.status_code == 404, (response.status_code, response.text[:200])


# -- the sync-tool Context bridge: a cancelled call's question keeps its thread ------------------------

FINISHED: list[tuple[str, float]] = []


class Name(BaseModel):
    name: str


async def test_cancelling_a_sync_tool_waiting_in_ctx_elicit_frees_its_thread_promptly() -> None:
    """An async tool in ``await ctx.elicit(...)`` is cancelled at once by ``notifications/cancelled``.
    The same question from a ``def`` tool runs as a separate task on the loop
    (``run_coroutine_threadsafe``) that the call's cancellation never reaches: the worker thread (a
    token of the process-wide thread limiter shared with every sync path operation and dependency)
    and the cancelled call's -32800 reply both wait ``server_request_timeout_seconds`` (60 s by
    default). 40 such cancelled calls starve every sync handler of the app."""
    FINISHED.clear()
    asking = threading.Event()
    router = make_router(server_request_timeout_seconds=120.0)  # the fault: waiting this out

    @router.tool()
    def ask_sync(ctx: Context = Depends(mcp_context)) -> str:
        """A sync tool asking the user."""
        started = time.monotonic()
        asking.set()
        try:
            ctx.elicit("Your name?", Name)
        finally:
            FINISHED.append(("ask_sync", time.monotonic() - started))
        return "answered"

    app = make_app(router)
    replies: list[httpx.Response] = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=30.0) as client:
        wire = Wire(client)
        await wire.initialize(capabilities={"elicitation": {"form": {}}})

        async def call() -> None:
            replies.append(await wire.legacy("tools/call", {"name": "ask_sync", "arguments": {}}, request_id=7, check=False))

        begun = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(60):  # the tool is running (in, or about to enter, ctx.elicit)
                while not asking.is_set():
                    await anyio.sleep(0.01)
            await anyio.sleep(0.2)
            note = await wire.post(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}, wire.legacy_headers()
            )
            assert note.status_code == 202
        waited = time.monotonic() - begun
    assert final_message(replies[0]).get("error", {}).get("code") == -32800
    # Margins an order of magnitude wide: the fault waited the whole 120 s request timeout.
    assert FINISHED and FINISHED[0][1] < 60.0, f"the thread stayed in ctx.elicit {FINISHED} after the call was cancelled"
    assert waited < 60.0, f"the cancelled call's reply took {waited:.1f} s"


# -- resource templates: the %2F guard and path-segment variables -------------------------------------


async def test_a_path_segment_variable_refuses_a_smuggled_slash_as_a_simple_variable_does() -> None:
    """``{name}`` refuses ``a%2F..`` (the path-traversal guard, -32602); ``{/name}`` is one path
    segment as well (RFC 6570 §3.2.6 encodes a ``/`` in its value), but its value is decoded
    without the guard: ``files://docs/a%2F..%2F..%2Fetc`` reaches the handler as
    ``'a/../../etc'``, and an exploded ``{/parts*}`` segment ``..%2Fx`` as ``'../x'``."""
    router = make_router()
    SEGMENTS: list[Any] = []

    @router.resource("files://docs{/name}")
    async def doc(name: str) -> str:
        """One document by name."""
        SEGMENTS.append(name)
        return name

    @router.resource("files://tree{/parts*}")
    async def tree(parts: list[str]) -> str:
        """A tree path, one list item per segment."""
        SEGMENTS.append(parts)
        return "/".join(parts)

    app = make_app(router)
    async with open_client(app) as client:
        wire = Wire(client)
        one = await wire.request("modern", "resources/read", {"uri": "files://docs/a%2F..%2F..%2Fetc"}, check=False)
        many = await wire.request("modern", "resources/read", {"uri": "files://tree/a/..%2Fx"}, check=False)
    for response in (one, many):
        message = final_message(response)
        assert message.get("error", {}).get("code") == -32602, f"a '/' smuggled into a segment was served: {message}"
    assert SEGMENTS == []


# -- stdio --header: a malformed option never echoes its value ----------------------------------------


def test_stdio_header_without_a_valid_name_does_not_echo_the_value() -> None:
    """headers.py promises that no message names a value; ``--header 'X-API-Key sk-SECRET=='``
    (a space typed instead of ``=``, a base64 key ending in ``=``) is cut at the padding's ``=``
    and the refusal quotes the whole "name", the key with it, on stderr / the desktop client's log."""
    import pytest  # noqa: PLC0415

    from fastapi_mcp_ctx._stdio.headers import stdio_headers  # noqa: PLC0415
    from fastapi_mcp_ctx.errors import AppLoadError  # noqa: PLC0415

    with pytest.raises(AppLoadError) as caught:
        stdio_headers(["X-API-Key sk-SECRETVALUE=="])
    assert "SECRETVALUE" not in str(caught.value), str(caught.value)


# -- the lost-request pointer inside a mounted sub-app -------------------------------------------------


async def test_lost_request_pointer_in_a_mounted_sub_app_names_the_full_mcp_path() -> None:
    """``app.mount("/api", sub)`` with the McpRouter in ``sub``: the endpoint is ``/api/mcp``, but the
    pointer of ``POST /api/nope`` reads the sub-app's own routes and names ``/mcp`` (ignoring
    ``root_path``), sending the client to a path that 404s."""
    from fastapi import FastAPI  # noqa: PLC0415

    router = make_router()

    @router.tool()
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    app = FastAPI()
    app.mount("/api", make_app(router))
    async with open_client(app) as client:
        await client.post("/api/mcp", json={})  # the endpoint's first request installs the pointer
        response = await client.post("/api/nope", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 404
    assert response.json()["error"]["data"]["mcpPaths"] == ["/api/mcp"], response.text


# -- registration: an argument named like a pydantic model attribute -------------------------------------


def test_a_dependency_argument_named_model_config_is_refused_with_a_message_not_a_keyerror() -> None:
    """Registration builds a pydantic model of a declarer's arguments; a parameter named
    ``model_config`` (pydantic's reserved name) makes ``argument_fields`` crash with a bare
    ``KeyError: 'model_config'`` instead of the registration refusal naming the tool, the
    parameter and the fix that every other unusable parameter gets."""
    import pytest  # noqa: PLC0415

    router = make_router()

    def settings_of(model_config: str = "default") -> str:
        return model_config

    with pytest.raises(ValueError, match=r"'model_config' has a name pydantic reserves.*rename the parameter") as caught:

        @router.tool()
        async def configured(value: str = Depends(settings_of)) -> str:
            """Uses a dependency with an argument named model_config."""
            return value

    assert "configured" in str(caught.value)  # the tool is named

    with pytest.raises(ValueError, match=r"'_hidden' has a name pydantic reserves"):

        @router.tool()
        async def private(_hidden: str = "x") -> str:  # a private attribute to pydantic: never a field
            """A tool's own argument with a leading underscore."""
            return _hidden


# -- redaction: an Authorization scheme other than Bearer/Basic ---------------------------------------


def test_redaction_masks_the_credential_of_any_authorization_scheme_not_its_scheme_word() -> None:
    """``Authorization: Bearer x`` and ``Basic x`` are masked whole; with another scheme (RFC 9449
    ``DPoP`` access tokens, ``ApiKey``, ``Negotiate``) the inline-pair rule takes the scheme word
    as the value: the log line reads ``Authorization: [REDACTED] <the token>`` (looks masked,
    is not), in the server log and in 2025 ``notifications/message``."""
    from fastapi_mcp_ctx._context.logger import redact_text  # noqa: PLC0415

    for line in (
        "Authorization: DPoP Kz5xOPAQUEaccessTOKEN",
        "authorization=ApiKey sk-live-SECRETKEY",
        "Authorization: Negotiate YIIGSECRETBLOB",
    ):
        masked = redact_text(line)
        assert "OPAQUE" not in masked and "SECRET" not in masked, f"{line!r} -> {masked!r}"


def test_redaction_masks_a_private_key_pem_field() -> None:
    """``private_key`` is masked as a key name, but ``private_key_pem`` (the usual name of the PEM
    text itself) is not: neither a sensitive word nor a sensitive suffix."""
    from fastapi_mcp_ctx._context.logger import redact  # noqa: PLC0415

    masked = redact({"private_key_pem": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg..."})
    assert masked["private_key_pem"] == "[REDACTED]", masked


# -- the sync-tool Context bridge: ctx.signal.wait from a thread of the tool's own ---------------------


async def test_ctx_signal_wait_from_a_thread_the_sync_tool_started_blocks_until_cancelled() -> None:
    """Every awaitable Context member, ``ctx.signal.wait`` included, "runs to completion" from a
    thread (CHANGELOG, ``_bridge``); ``ctx.state`` does from a thread the tool starts (the call's
    loop is captured). ``CancelSignal.wait`` is bridged with no owner (``lambda _signal: None``),
    so outside an AnyIO worker thread ``anyio.from_thread.run`` fails and the bridge returns the
    un-awaited coroutine: the watcher thread's ``ctx.signal.wait()`` returns at once, as if the
    call had been cancelled (and Python warns "coroutine was never awaited")."""
    import threading  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    from fastapi_mcp_ctx.testing import McpTestClient  # noqa: PLC0415

    returned: list[tuple[str, bool]] = []
    router = make_router()

    @router.tool()
    def watch(ctx: Context = Depends(mcp_context)) -> str:
        """Starts a watcher thread waiting for the call's cancellation; the call is not cancelled."""

        def watcher() -> None:
            try:
                value = ctx.signal.wait()
            except asyncio.CancelledError:  # the call ended uncancelled: the wait ends with it
                returned.append(("ended with the call", bool(ctx.signal)))
                return
            returned.append((type(value).__name__, bool(ctx.signal)))

        thread = threading.Thread(target=watcher, daemon=True)
        threads.append(thread)
        thread.start()
        time.sleep(0.5)
        return "done"

    threads: list[threading.Thread] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        async with McpTestClient(make_app(router), era="legacy") as client:
            result = await client.call_tool("watch", {})
    assert result.is_error is False
    await anyio.to_thread.run_sync(lambda: threads[0].join(60))  # it neither returns early nor outlives the call
    assert returned == [("ended with the call", False)], f"ctx.signal.wait() gave {returned} in a call that was never cancelled"
