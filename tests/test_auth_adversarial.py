"""Adversarial tests of ``McpRouter(authenticate=...)``, HTTP route guards and tenant isolation.

Every test asserts the RIGHT behaviour; the ones named ``test_fault_*`` failed when written
(see the docstring of each for what was observed).

Spec 2025-11-25 ``basic/authorization`` (401 + ``WWW-Authenticate``; 403 insufficient scope),
``basic/security_best_practices`` §Session Hijacking (sessions bound to user-specific
information), RFC 6585 §4 (429 + ``Retry-After``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import unicodedata
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from conftest import (
    ACCEPT_BOTH,
    LEGACY,
    Wire,
    final_message,
    mcp_settings,
    modern_meta,
    result_of,
    rpc,
    tool_text,
)
from fastapi import APIRouter, BackgroundTasks, Depends, FastAPI, Header, HTTPException, Request, Response, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, SecurityScopes

from fastapi_mcp_ctx import Context, McpRouter, Principal, mcp_context

# -- shared fixtures ----------------------------------------------------------------------

TOOL_RUNS: list[str] = []
AUTH_CALLS: list[str | None] = []

USERS: dict[str, Principal] = {
    "alice": Principal(subject="alice", tenant_id="acme"),
    "bob": Principal(subject="bob", tenant_id="globex"),
    # a different person, another tenant, the same subject string as alice (per-tenant user ids)
    "alice-at-globex": Principal(subject="alice", tenant_id="globex"),
}


def authenticate(authorization: str | None = Header(default=None)) -> Principal | None:
    AUTH_CALLS.append(authorization)
    if authorization is None or not authorization.startswith("Bearer "):
        return None
    principal = USERS.get(authorization.removeprefix("Bearer "))
    if principal is None:
        raise HTTPException(401, "invalid token", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return principal


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def add_tools(router: McpRouter) -> McpRouter:
    @router.tool()
    async def secret(ctx: Context = Depends(mcp_context)) -> str:
        """Returns a secret; records that it ran."""
        TOOL_RUNS.append("secret")
        return f"secret-of-{ctx.auth.subject if ctx.auth else 'anonymous'}"

    @router.tool()
    async def wait(ms: int, ctx: Context = Depends(mcp_context)) -> str:
        """Waits up to ``ms`` milliseconds unless cancelled."""
        with anyio.move_on_after(ms / 1000):
            await ctx.signal.wait()
        return "cancelled" if ctx.signal.cancelled else "done"

    @router.tool()
    async def put(key: str, value: str, ctx: Context = Depends(mcp_context)) -> str:
        """Stores a value in the caller's tenant."""
        await ctx.state.set(key, value)
        return "ok"

    @router.tool()
    async def get(key: str, ctx: Context = Depends(mcp_context)) -> str | None:
        """Reads a value of the caller's tenant."""
        value: Any = await ctx.state.get(key)
        return value

    @router.tool()
    async def listing(prefix: str = "", cursor: str | None = None, limit: int = 50, ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """Lists the caller's tenant."""
        page = await ctx.state.list(prefix, cursor=cursor, limit=limit)
        return {"keys": [i.key for i in page.items], "values": [i.value for i in page.items], "next": page.next_cursor}

    return router


def build_auth_app(auth: Callable[..., Any] = authenticate, **app_kwargs: Any) -> FastAPI:
    router = add_tools(McpRouter(settings=mcp_settings(), authenticate=auth))
    app = FastAPI(**app_kwargs)
    app.include_router(router)
    return app


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    TOOL_RUNS.clear()
    AUTH_CALLS.clear()
    yield


@asynccontextmanager
async def _client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://127.0.0.1", timeout=10.0
    ) as c:
        yield c


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with _client(build_auth_app()) as c:
        yield c


INIT = rpc("initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, 0)


def modern_call(name: str = "secret", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return rpc("tools/call", {"name": name, "arguments": arguments or {}, "_meta": modern_meta()}, 1)


def mh(method: str, name: str | None = None) -> dict[str, str]:
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


def lh(sid: str) -> dict[str, str]:
    return {"mcp-session-id": sid, "mcp-protocol-version": LEGACY}


# -- 1. nothing reaches the server without passing authenticate ---------------------------

# (name, body (dict/list/bytes), extra headers); the legacy ones carry a REAL session id of
# alice (filled in at run time where the value is "SID") so only credentials are missing.
UNAUTHENTICATED_POSTS: list[tuple[str, Any, dict[str, str]]] = [
    ("modern tools/call", modern_call(), mh("tools/call", "secret")),
    ("modern tools/list", rpc("tools/list", {"_meta": modern_meta()}, 1), mh("tools/list")),
    ("modern server/discover", rpc("server/discover", {"_meta": modern_meta()}, 1), mh("server/discover")),
    ("modern notification", rpc("notifications/cancelled", {"requestId": 1, "_meta": modern_meta()}, None), mh("notifications/cancelled")),
    ("modern client response", {"jsonrpc": "2.0", "id": 1, "result": {}}, {"mcp-protocol-version": "2026-07-28"}),
    ("meta-only modern (no version header)", modern_call(), {}),
    ("legacy initialize", INIT, {}),
    ("legacy tools/call on a live session", rpc("tools/call", {"name": "secret", "arguments": {}}, 2), {"mcp-session-id": "SID"}),
    ("legacy tools/list on a live session", rpc("tools/list", {}, 2), {"mcp-session-id": "SID"}),
    ("legacy ping", rpc("ping", {}, 2), {"mcp-session-id": "SID"}),
    ("legacy notification", rpc("notifications/initialized", {}, None), {"mcp-session-id": "SID"}),
    ("legacy cancel", rpc("notifications/cancelled", {"requestId": 2}, None), {"mcp-session-id": "SID"}),
    ("legacy client response", {"jsonrpc": "2.0", "id": 1, "result": {}}, {"mcp-session-id": "SID"}),
    ("legacy setLevel", rpc("logging/setLevel", {"level": "debug"}, 2), {"mcp-session-id": "SID"}),
    ("malformed JSON", b"{not json", {}),
    ("empty body", b"", {}),
    ("batch array", [modern_call(), INIT], {}),
    ("JSON null", b"null", {}),
]


@pytest.mark.parametrize("case", UNAUTHENTICATED_POSTS, ids=[c[0] for c in UNAUTHENTICATED_POSTS])
@pytest.mark.parametrize("credential", ["none", "bad token", "not bearer"])
async def test_unauthenticated_posts_are_401_and_run_nothing(client: httpx.AsyncClient, case: tuple[str, Any, dict[str, str]], credential: str) -> None:
    _, body, extra = case
    owner = Wire(client)
    sid = await owner.initialize(headers=bearer("alice"))
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-protocol-version": LEGACY}
    headers.update({k: (sid if v == "SID" else v) for k, v in extra.items()})
    if credential == "bad token":
        headers.update(bearer("forged"))
    elif credential == "not bearer":
        headers["authorization"] = "Basic YWxpY2U6eA=="
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    AUTH_CALLS.clear()
    response = await client.post("/mcp", content=content, headers=headers)
    assert response.status_code == 401, response.text
    if credential == "bad token":  # the dependency's own HTTPException(401, headers=...), passed through as raised
        assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    else:  # authenticate= returned None outside a bearer mode: no Bearer challenge (issue 22 item 6)
        assert "www-authenticate" not in response.headers
    assert response.json()["error"]["code"] == -32001
    assert "mcp-session-id" not in response.headers
    assert len(AUTH_CALLS) == 1
    assert TOOL_RUNS == []
    # the owner's session is untouched
    assert (await owner.legacy("ping", headers=bearer("alice"), check=False)).status_code == 200


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
async def test_wrong_content_type_without_credentials_is_401_not_415(client: httpx.AsyncClient, content_type: str) -> None:
    """Authentication comes first: an unauthenticated caller learns nothing about the endpoint."""
    response = await client.post("/mcp", content=json.dumps(modern_call()), headers={"content-type": content_type, **mh("tools/call", "secret")})
    assert response.status_code == 401
    assert TOOL_RUNS == []


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("version", [LEGACY, "2026-07-28", None])
async def test_get_and_delete_without_credentials_are_401(client: httpx.AsyncClient, method: str, version: str | None) -> None:
    owner = Wire(client)
    sid = await owner.initialize(headers=bearer("alice"))
    headers = {"mcp-session-id": sid, "accept": "text/event-stream"}
    if version is not None:
        headers["mcp-protocol-version"] = version
    response = await client.request(method, "/mcp", headers=headers)
    assert response.status_code == 401
    assert (await owner.legacy("ping", headers=bearer("alice"), check=False)).status_code == 200


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "PUT", "PATCH", "TRACE"])
async def test_other_http_methods_never_reach_the_endpoint(client: httpx.AsyncClient, method: str) -> None:
    """HEAD in particular must not be routed to the endpoint (whose fallback branch is DELETE)."""
    owner = Wire(client)
    sid = await owner.initialize(headers=bearer("alice"))
    AUTH_CALLS.clear()
    response = await client.request(method, "/mcp", headers={"mcp-session-id": sid, **bearer("alice"), "accept": ACCEPT_BOTH})
    assert response.status_code == 405
    assert AUTH_CALLS == []
    assert (await owner.legacy("ping", headers=bearer("alice"), check=False)).status_code == 200


async def test_authenticate_runs_exactly_once_per_request(client: httpx.AsyncClient, era: str) -> None:
    wire = Wire(client)
    if era == "legacy":
        await wire.initialize(headers=bearer("alice"))
    AUTH_CALLS.clear()
    result = result_of(await wire.call_tool(era, "secret", headers=bearer("alice")))
    assert tool_text(result) == "secret-of-alice"
    assert AUTH_CALLS == ["Bearer alice"]


# -- 1b. a session belongs to its principal ------------------------------------------------


@pytest.mark.parametrize(
    "attempt",
    ["tools/call", "tools/list", "ping", "logging/setLevel", "notification", "response", "GET", "DELETE"],
)
async def test_another_principal_cannot_use_a_session(client: httpx.AsyncClient, attempt: str) -> None:
    alice = Wire(client)
    sid = await alice.initialize(headers=bearer("alice"))
    hdrs = {**lh(sid), **bearer("bob"), "content-type": "application/json", "accept": ACCEPT_BOTH}
    if attempt == "GET":
        response = await client.get("/mcp", headers={**hdrs, "accept": "text/event-stream"})
    elif attempt == "DELETE":
        response = await client.delete("/mcp", headers=hdrs)
    elif attempt == "notification":
        response = await client.post("/mcp", content=json.dumps(rpc("notifications/initialized", {}, None)), headers=hdrs)
    elif attempt == "response":
        response = await client.post("/mcp", content=json.dumps({"jsonrpc": "2.0", "id": 3, "result": {}}), headers=hdrs)
    else:
        params = {"name": "secret", "arguments": {}} if attempt == "tools/call" else ({"level": "emergency"} if attempt == "logging/setLevel" else {})
        response = await client.post("/mcp", content=json.dumps(rpc(attempt, params, 9)), headers=hdrs)
    assert response.status_code == 404, response.text
    assert "mcp-session-id" not in response.headers
    assert "secret-of" not in response.text
    assert TOOL_RUNS == []
    # the session still serves its owner (bob's DELETE did not end it)
    still = await alice.legacy("tools/call", {"name": "secret", "arguments": {}}, headers=bearer("alice"))
    assert tool_text(result_of(still)) == "secret-of-alice"


async def test_another_principal_cannot_cancel_an_in_flight_call(client: httpx.AsyncClient) -> None:
    alice, bob = Wire(client), Wire(client)
    alice_sid = await alice.initialize(headers=bearer("alice"))
    bob_sid = await bob.initialize(headers=bearer("bob"))
    results: list[httpx.Response] = []

    async def call() -> None:
        results.append(await alice.legacy("tools/call", {"name": "wait", "arguments": {"ms": 400}}, request_id=5, headers=bearer("alice")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.sleep(0.1)
        note = rpc("notifications/cancelled", {"requestId": 5, "reason": "x"}, None)
        # on alice's session with bob's credential: refused
        hijack = await bob.post(note, {**lh(alice_sid), **bearer("bob")})
        assert hijack.status_code == 404
        # on bob's own session: the id is looked up in bob's session only
        own = await bob.post(note, {**lh(bob_sid), **bearer("bob")})
        assert own.status_code == 202
    assert tool_text(result_of(results[0])) == "done"


async def test_the_owner_can_cancel_its_own_in_flight_call(client: httpx.AsyncClient) -> None:
    """Control for the test above: cancellation itself works under authentication."""
    alice = Wire(client)
    sid = await alice.initialize(headers=bearer("alice"))
    results: list[httpx.Response] = []

    async def call() -> None:
        results.append(await alice.legacy("tools/call", {"name": "wait", "arguments": {"ms": 2000}}, request_id=5, headers=bearer("alice"), check=False))

    with anyio.fail_after(1.5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.1)
            note = await alice.post(rpc("notifications/cancelled", {"requestId": 5}, None), {**lh(sid), **bearer("alice")})
            assert note.status_code == 202
    message = final_message(results[0])
    assert message.get("error", {}).get("code") == -32800 or tool_text(message["result"]) == "cancelled", message


@pytest.mark.parametrize("attempt", ["tools/call", "DELETE", "cancel"])
async def test_fault_same_subject_in_another_tenant_cannot_use_the_session(client: httpx.AsyncClient, attempt: str) -> None:
    """Sessions are bound to ``Principal.subject`` only. Subjects are commonly unique per
    tenant only (per-tenant user tables, pairwise ``sub``); a principal of ANOTHER tenant
    with the same subject string uses, deletes and cancels in the session.
    Observed: 200 / 200 (session ended) / 202 + the call cancelled. Expected: 404 (bind the
    session to ``(tenant_id, subject)``, router.py ``_initialize``/``_session``)."""
    alice = Wire(client)
    sid = await alice.initialize(headers=bearer("alice"))
    intruder = {**lh(sid), **bearer("alice-at-globex")}
    if attempt == "tools/call":
        response = await alice.post(rpc("tools/call", {"name": "secret", "arguments": {}}, 9), intruder)
        assert response.status_code == 404, response.text
    elif attempt == "DELETE":
        response = await client.delete("/mcp", headers=intruder)
        assert response.status_code == 404
        assert (await alice.legacy("ping", headers=bearer("alice"), check=False)).status_code == 200
    else:
        results: list[httpx.Response] = []

        async def call() -> None:
            results.append(await alice.legacy("tools/call", {"name": "wait", "arguments": {"ms": 400}}, request_id=5, headers=bearer("alice"), check=False))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.1)
            await alice.post(rpc("notifications/cancelled", {"requestId": 5}, None), intruder)
        assert tool_text(result_of(results[0])) == "done"


async def test_modern_requests_ignore_a_stolen_session_id(client: httpx.AsyncClient) -> None:
    """A 2026 request carrying alice's session id runs as bob (no session in that era)."""
    alice = Wire(client)
    sid = await alice.initialize(headers=bearer("alice"))
    wire = Wire(client)
    response = await wire.modern("tools/call", {"name": "secret", "arguments": {}}, headers={**bearer("bob"), "mcp-session-id": sid})
    assert tool_text(result_of(response)) == "secret-of-bob"


# -- 1c. shapes of the authenticate dependency ----------------------------------------------

_bearer_scheme = HTTPBearer(auto_error=False)
SEEN_SCOPES: list[list[str]] = []


def _verify(scopes: SecurityScopes, cred: HTTPAuthorizationCredentials | None = Security(_bearer_scheme)) -> Principal | None:
    SEEN_SCOPES.append(list(scopes.scopes))
    if cred is None or cred.credentials not in USERS:
        return None
    return USERS[cred.credentials]


def auth_with_security(principal: Principal | None = Security(_verify, scopes=["mcp"])) -> Principal | None:
    return principal


async def test_authenticate_using_security_scopes(era: str) -> None:
    SEEN_SCOPES.clear()
    async with _client(build_auth_app(auth_with_security)) as c:
        wire = Wire(c)
        denied = await wire.modern("tools/list", check=False)
        assert denied.status_code == 401
        result = result_of(await wire.call_tool(era, "secret", headers=bearer("bob")))
        assert tool_text(result) == "secret-of-bob"
    assert SEEN_SCOPES and all(s == ["mcp"] for s in SEEN_SCOPES)


YIELD_LOG: list[str] = []


async def auth_with_yield(authorization: str | None = Header(default=None)) -> AsyncIterator[Principal | None]:
    YIELD_LOG.append("enter")
    try:
        yield USERS.get((authorization or "").removeprefix("Bearer "))
    finally:
        YIELD_LOG.append("exit")


async def test_authenticate_with_yield_is_torn_down_once_per_request(era: str) -> None:
    YIELD_LOG.clear()
    async with _client(build_auth_app(auth_with_yield)) as c:
        wire = Wire(c)
        assert (await wire.modern("tools/list", check=False)).status_code == 401
        assert YIELD_LOG == ["enter", "exit"]
        YIELD_LOG.clear()
        result = result_of(await wire.call_tool(era, "secret", headers=bearer("alice")))
        assert tool_text(result) == "secret-of-alice"
    assert YIELD_LOG.count("enter") == YIELD_LOG.count("exit") >= 1


def token_store() -> dict[str, Principal]:
    return {}


def auth_via_store(authorization: str | None = Header(default=None), store: dict[str, Principal] = Depends(token_store)) -> Principal | None:
    return store.get((authorization or "").removeprefix("Bearer "))


async def test_dependency_overrides_apply_to_authenticate_and_its_sub_dependencies(era: str) -> None:
    app = build_auth_app(auth_via_store)
    async with _client(app) as c:
        assert (await Wire(c).modern("tools/list", check=False)).status_code == 401
        app.dependency_overrides[token_store] = lambda: {"tok": Principal(subject="overridden", tenant_id="t")}
        assert tool_text(result_of(await Wire(c).call_tool(era, "secret", headers=bearer("tok")))) == "secret-of-overridden"
        app.dependency_overrides[auth_via_store] = lambda: Principal(subject="whole", tenant_id="t")
        assert tool_text(result_of(await Wire(c).call_tool(era, "secret"))) == "secret-of-whole"
        app.dependency_overrides.clear()
        assert (await Wire(c).modern("tools/list", check=False)).status_code == 401


def auth_required_header(x_api_key: str = Header()) -> Principal:
    return Principal(subject=x_api_key, tenant_id="t")


async def test_authenticate_with_a_missing_required_header_is_401() -> None:
    async with _client(build_auth_app(auth_required_header)) as c:
        response = await Wire(c).modern("tools/list", check=False)
        assert response.status_code == 401
        assert "www-authenticate" not in response.headers  # an X-API-Key scheme is no Bearer one (issue 22 item 6)
        # The refusal names what to send (a new-user run: "Invalid credentials" alone left the
        # caller guessing), as FastAPI's own 422 does; it never echoes a value.
        message = response.json()["error"]["message"]
        assert message == "Invalid credentials: header.x-api-key: Field required", message


SECRET_DETAIL = "dsn=postgres://admin:hunter2@10.0.0.5/idp"


def auth_crashes(authorization: str | None = Header(default=None)) -> Principal:
    raise RuntimeError(SECRET_DETAIL)


def auth_wrong_type(authorization: str | None = Header(default=None)) -> Any:
    return {"sub": SECRET_DETAIL}


@pytest.mark.parametrize("auth", [auth_crashes, auth_wrong_type], ids=["raises", "wrong-type"])
@pytest.mark.parametrize("request_kind", ["modern", "initialize", "GET", "DELETE"])
async def test_authenticate_programming_errors_are_500_without_internals(auth: Callable[..., Any], request_kind: str) -> None:
    async with _client(build_auth_app(auth)) as c:
        wire = Wire(c)
        if request_kind == "modern":
            response = await wire.modern("tools/call", {"name": "secret", "arguments": {}}, check=False)
        elif request_kind == "initialize":
            response = await wire.post(INIT)
        else:
            response = await c.request(request_kind, "/mcp", headers={"mcp-session-id": "x", "accept": "text/event-stream"})
        assert response.status_code == 500
        for leak in (SECRET_DETAIL, "hunter2", "Traceback", "RuntimeError", "TypeError", ".py"):
            assert leak not in response.text
        assert TOOL_RUNS == []


def auth_403(authorization: str | None = Header(default=None)) -> Principal:
    raise HTTPException(403, "insufficient_scope", headers={"WWW-Authenticate": 'Bearer error="insufficient_scope", scope="mcp"'})


async def test_authenticate_403_keeps_status_and_challenge(era: str) -> None:
    async with _client(build_auth_app(auth_403)) as c:
        wire = Wire(c)
        response = await wire.modern("tools/list", check=False) if era == "modern" else await wire.post(INIT)
        assert response.status_code == 403
        assert 'insufficient_scope' in response.headers["www-authenticate"]
        assert "mcp-session-id" not in response.headers


def auth_rate_limited(authorization: str | None = Header(default=None)) -> Principal:
    raise HTTPException(429, "slow down", headers={"Retry-After": "30"})


async def test_fault_authenticate_429_is_not_turned_into_401() -> None:
    """Observed: 401 ``Unauthorized`` + ``WWW-Authenticate: Bearer``, ``Retry-After`` dropped:
    a rate-limited client is told its credential is bad (it re-authenticates / drops the
    token instead of backing off). Expected: 429 with ``Retry-After`` kept.
    Fix: router.py ``_resolve_principal`` (only 401/403 are translated; others fall to 401)."""
    async with _client(build_auth_app(auth_rate_limited)) as c:
        response = await Wire(c).modern("tools/list", check=False)
        assert response.status_code == 429, response.text
        assert response.headers.get("retry-after") == "30"


def auth_idp_down(authorization: str | None = Header(default=None)) -> Principal:
    raise HTTPException(503, f"identity provider unreachable: {SECRET_DETAIL}", headers={"Retry-After": "5"})


async def test_fault_authenticate_5xx_is_a_server_error_not_401() -> None:
    """Observed: 401 ``Unauthorized`` (an outage of the identity provider reads as "your
    token is invalid"). Expected: a 5xx (503 with ``Retry-After`` here), the detail not echoed.
    Fix: router.py ``_resolve_principal``."""
    async with _client(build_auth_app(auth_idp_down)) as c:
        response = await Wire(c).modern("tools/list", check=False)
        assert response.status_code >= 500, response.text
        assert SECRET_DETAIL not in response.text
        assert "www-authenticate" not in response.headers


AUDIT: list[str] = []


def auth_with_audit(tasks: BackgroundTasks, authorization: str | None = Header(default=None)) -> Principal | None:
    principal = USERS.get((authorization or "").removeprefix("Bearer "))
    tasks.add_task(AUDIT.append, f"auth:{principal.subject if principal else 'denied'}")
    return principal


async def test_fault_background_tasks_of_authenticate_run(era: str) -> None:
    """An audit trail written from ``authenticate`` via ``BackgroundTasks`` (as in any
    FastAPI dependency). Observed: never runs (the solve gets a throw-away
    ``BackgroundTasks()``), for granted and denied requests alike. Expected: run after the
    response, like a path operation's. Fix: router.py ``_resolve_principal`` (attach the
    tasks to the response)."""
    AUDIT.clear()
    async with _client(build_auth_app(auth_with_audit)) as c:
        wire = Wire(c)
        assert (await wire.modern("tools/list", check=False)).status_code == 401
        result_of(await wire.call_tool(era, "secret", headers=bearer("alice")))
    assert "auth:denied" in AUDIT
    assert "auth:alice" in AUDIT


SIGNING_KEY = b"k"


async def auth_signed_body(request: Request, x_signature: str | None = Header(default=None)) -> Principal | None:
    """HMAC over the raw body (webhook-style request signing)."""
    body = await request.body()
    expected = hmac.new(SIGNING_KEY, body, hashlib.sha256).hexdigest()
    if x_signature is None or not hmac.compare_digest(x_signature, expected):
        return None
    return Principal(subject="signer", tenant_id="t")


async def test_fault_authenticate_reading_the_body_does_not_hang() -> None:
    """Observed: the request hangs (the dependency consumed the body from ``receive``; the
    endpoint then waits for a body that never comes, until the client gives up → 400).
    Expected: the body is available to both (read it once, bounded, before authenticate,
    and replay it, as ``_server.http.replaying_receive`` already does for tools).
    Fix: router.py ``_endpoint``/``_resolve_principal``."""
    async with _client(build_auth_app(auth_signed_body)) as c:
        body = json.dumps(modern_call()).encode()
        signature = hmac.new(SIGNING_KEY, body, hashlib.sha256).hexdigest()
        headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, **mh("tools/call", "secret"), "x-signature": signature}
        response: httpx.Response | None = None
        with anyio.move_on_after(3):
            response = await c.post("/mcp", content=body, headers=headers)
        assert response is not None, "the request hung"
        assert tool_text(result_of(response)) == "secret-of-signer"


# -- 2. HTTP route guards ------------------------------------------------------------------

GUARD_SEEN: list[str] = []


def guard(x_key: str | None = Header(default=None)) -> None:
    GUARD_SEEN.append(x_key or "-")
    if x_key != "open-sesame":
        raise HTTPException(401, "no key", headers={"WWW-Authenticate": "Key"})


def other_guard(x_other: str | None = Header(default=None)) -> None:
    GUARD_SEEN.append(f"other:{x_other or '-'}")
    if x_other != "yes":
        raise HTTPException(403, "no")


def plain_router() -> McpRouter:
    return add_tools(McpRouter(settings=mcp_settings()))


def _layouts() -> dict[str, tuple[Any, str, dict[str, str]]]:
    """layout name → (ASGI app, MCP path, headers that pass its guard)."""
    ok = {"x-key": "open-sesame"}
    out: dict[str, tuple[Any, str, dict[str, str]]] = {}
    a = FastAPI()
    a.include_router(plain_router(), dependencies=[Depends(guard)])
    out["include_router deps"] = (a, "/mcp", ok)
    a = FastAPI(dependencies=[Depends(guard)])
    a.include_router(plain_router())
    out["FastAPI deps"] = (a, "/mcp", ok)
    a, p = FastAPI(), APIRouter(dependencies=[Depends(guard)])
    p.include_router(plain_router())
    a.include_router(p)
    out["nested APIRouter deps"] = (a, "/mcp", ok)
    a, p = FastAPI(), APIRouter(prefix="/api", dependencies=[Depends(guard)])
    p.include_router(plain_router(), prefix="/v1")
    a.include_router(p, prefix="/x")
    out["nested with prefixes"] = (a, "/x/api/v1/mcp", ok)
    a, p = FastAPI(), APIRouter()
    p.include_router(plain_router(), dependencies=[Depends(guard)])
    a.include_router(p)
    out["inner include deps"] = (a, "/mcp", ok)
    a, p = FastAPI(), APIRouter()
    p.include_router(plain_router())
    a.include_router(p, dependencies=[Depends(guard)])
    out["outer include deps"] = (a, "/mcp", ok)
    inner, outer = FastAPI(), FastAPI()
    inner.include_router(plain_router(), dependencies=[Depends(guard)])
    outer.mount("/sub", inner)
    out["mounted sub-app"] = (outer, "/sub/mcp", ok)
    inner, outer = FastAPI(dependencies=[Depends(guard)]), FastAPI()
    inner.include_router(plain_router())
    outer.mount("/sub", inner)
    out["mounted sub-app with app deps"] = (outer, "/sub/mcp", ok)
    r, a = plain_router(), FastAPI()
    a.include_router(r, prefix="/a", dependencies=[Depends(guard)])
    a.include_router(r, prefix="/b", dependencies=[Depends(other_guard)])
    out["twice: first"] = (a, "/a/mcp", ok)
    out["twice: second"] = (a, "/b/mcp", {"x-other": "yes"})
    r, a = plain_router(), FastAPI()
    a.include_router(r, prefix="/open")
    a.include_router(r, prefix="/guarded", dependencies=[Depends(guard)])
    out["twice: open then guarded"] = (a, "/guarded/mcp", ok)
    r, a = plain_router(), FastAPI()
    a.include_router(r, prefix="/guarded", dependencies=[Depends(guard)])
    a.include_router(r, prefix="/open")
    out["twice: guarded then open"] = (a, "/guarded/mcp", ok)
    r, a = add_tools(McpRouter(settings=mcp_settings(), authenticate=authenticate)), FastAPI()
    a.include_router(r, dependencies=[Depends(guard)])
    out["guard plus authenticate"] = (a, "/mcp", {**ok, **bearer("alice")})
    return out


LAYOUTS = list(_layouts())
REQUEST_KINDS = ["modern tools/call", "modern tools/list", "modern server/discover", "modern notification", "initialize", "legacy tools/call", "GET", "DELETE", "malformed"]


@pytest.mark.parametrize("kind", REQUEST_KINDS)
@pytest.mark.parametrize("layout", LAYOUTS)
async def test_route_guards_run_for_every_mcp_request(layout: str, kind: str) -> None:
    app, path, ok = _layouts()[layout]
    async with _client(app) as c:
        owner = Wire(c, path=path)
        sid = await owner.initialize(headers=ok)
        GUARD_SEEN.clear()
        base = {"content-type": "application/json", "accept": ACCEPT_BOTH}
        if kind.startswith("modern"):
            method = {"modern tools/call": "tools/call", "modern tools/list": "tools/list", "modern server/discover": "server/discover", "modern notification": "notifications/cancelled"}[kind]
            params: dict[str, Any] = {"_meta": modern_meta()}
            if method == "tools/call":
                params.update(name="secret", arguments={})
            if method == "notifications/cancelled":
                params["requestId"] = 1
            body = json.dumps(rpc(method, params, None if "notification" in kind else 1))
            response = await c.post(path, content=body, headers={**base, **mh(method, "secret" if method == "tools/call" else None)})
        elif kind == "initialize":
            response = await c.post(path, content=json.dumps(INIT), headers=base)
        elif kind == "legacy tools/call":
            response = await c.post(path, content=json.dumps(rpc("tools/call", {"name": "secret", "arguments": {}}, 3)), headers={**base, **lh(sid)})
        elif kind == "malformed":
            response = await c.post(path, content=b"{", headers=base)
        else:
            response = await c.request(kind, path, headers={**lh(sid), "accept": "text/event-stream"})
        assert response.status_code in (401, 403), f"{layout} / {kind}: HTTP {response.status_code} {response.text[:200]}"
        assert GUARD_SEEN, "the guard did not run"
        assert TOOL_RUNS == []
        # with the guard satisfied, the owner's session still works (DELETE did not end it)
        passed = await owner.legacy("tools/call", {"name": "secret", "arguments": {}}, headers=ok)
        assert tool_text(result_of(passed)).startswith("secret-of")


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_route_guards_admit_a_satisfying_request_in_both_eras(layout: str, era: str) -> None:
    app, path, ok = _layouts()[layout]
    async with _client(app) as c:
        wire = Wire(c, path=path)
        result = result_of(await wire.call_tool(era, "secret", headers=ok))
        assert tool_text(result).startswith("secret-of")
        if era == "legacy":
            deleted = await c.delete(path, headers={**lh(wire.session or ""), **ok})
            assert deleted.status_code == 200


async def test_guarded_and_open_inclusions_of_one_router_share_sessions_only_through_the_guard() -> None:
    """One router included at /open and /guarded: the open inclusion is open by the app
    author's choice; what matters is that /guarded never skips its guard, even for a
    session created at /open."""
    r, a = plain_router(), FastAPI()
    a.include_router(r, prefix="/open")
    a.include_router(r, prefix="/guarded", dependencies=[Depends(guard)])
    async with _client(a) as c:
        sid = await Wire(c, path="/open/mcp").initialize()
        response = await c.post(
            "/guarded/mcp",
            content=json.dumps(rpc("tools/call", {"name": "secret", "arguments": {}}, 1)),
            headers={"content-type": "application/json", "accept": ACCEPT_BOTH, **lh(sid)},
        )
        assert response.status_code == 401
        assert TOOL_RUNS == []


# -- 3. tenant isolation through ctx.state -----------------------------------------------

TENANT_PAIRS: list[tuple[str, str]] = [
    ("a/b", "a"),
    ("a/b", "a%2Fb"),
    ("a%2Fb", "a%252Fb"),
    ("..", "."),
    ("../acme", "acme"),
    ("%", "%25"),
    ("Acme", "acme"),
    ("ACME", "acme"),
    (unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")),
    ("café", "caf%C3%A9"),
    ("ａｃｍｅ", "acme"),  # fullwidth
    ("acme ", "acme"),
    ("acme\x00", "acme"),
    ("t", "t/t"),
    ("x" * 10_000, "x" * 9_999),
    ("default", "Default"),
    ("😀", "%F0%9F%98%80"),
]


def tenant_app() -> tuple[FastAPI, dict[str, Principal]]:
    principals: dict[str, Principal] = {}

    def auth(authorization: str | None = Header(default=None)) -> Principal | None:
        return principals.get((authorization or "").removeprefix("Bearer "))

    return build_auth_app(auth), principals


@pytest.mark.parametrize("pair", TENANT_PAIRS, ids=[f"{a[:12]!r}-vs-{b[:12]!r}" for a, b in TENANT_PAIRS])
async def test_tenants_with_odd_ids_are_isolated(pair: tuple[str, str], era: str) -> None:
    first, second = pair
    app, principals = tenant_app()
    principals["one"] = Principal(subject="u1", tenant_id=first)
    principals["two"] = Principal(subject="u2", tenant_id=second)
    async with _client(app) as c:

        async def call(token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return result_of(await Wire(c).call_tool(era, name, arguments, headers=bearer(token)))

        assert (await call("one", "put", {"key": "k", "value": "v1"}))["isError"] is False
        assert (await call("one", "put", {"key": "b/k", "value": "nested"}))["isError"] is False
        assert (await call("two", "get", {"key": "k"}))["structuredContent"] == {"result": None}
        assert (await call("two", "get", {"key": "b/k"}))["structuredContent"] == {"result": None}
        assert (await call("two", "listing", {}))["structuredContent"]["keys"] == []
        assert (await call("two", "put", {"key": "k", "value": "v2"}))["isError"] is False
        assert (await call("one", "get", {"key": "k"}))["structuredContent"] == {"result": "v1"}
        assert (await call("two", "listing", {}))["structuredContent"]["values"] == ["v2"]
        assert sorted((await call("one", "listing", {}))["structuredContent"]["values"]) == ["nested", "v1"]


async def test_tenant_with_slash_cannot_reach_a_key_path_of_its_parent(era: str) -> None:
    """tenant "a" + key "b/k" vs tenant "a/b" + key "k": both would be "t/a/b/k" unencoded."""
    app, principals = tenant_app()
    principals["parent"] = Principal(subject="p", tenant_id="a")
    principals["child"] = Principal(subject="c", tenant_id="a/b")
    async with _client(app) as c:
        result_of(await Wire(c).call_tool(era, "put", {"key": "b/k", "value": "parent-secret"}, headers=bearer("parent")))
        child = result_of(await Wire(c).call_tool(era, "get", {"key": "k"}, headers=bearer("child")))
        assert child["structuredContent"] == {"result": None}
        listing = result_of(await Wire(c).call_tool(era, "listing", {"prefix": "b"}, headers=bearer("child")))
        assert listing["structuredContent"]["keys"] == []


@pytest.mark.parametrize("tenant", ["", None])
async def test_empty_or_missing_tenant_fails_closed(tenant: str | None, era: str) -> None:
    app, principals = tenant_app()
    principals["none"] = Principal(subject="n", tenant_id=tenant)
    principals["other-none"] = Principal(subject="m", tenant_id=None)
    async with _client(app) as c:
        response = await Wire(c).call_tool(era, "put", {"key": "k", "value": "v"}, headers=bearer("none"), check=False)
        assert response.status_code == 403
        assert final_message(response)["error"]["code"] == -32600
        response = await Wire(c).call_tool(era, "get", {"key": "k"}, headers=bearer("other-none"), check=False)
        assert response.status_code == 403


@pytest.mark.parametrize("tenant", ["\ud800", "a\udcff"], ids=["lone-high-surrogate", "lone-low-surrogate"])
async def test_unencodable_tenant_fails_closed_without_leaking(tenant: str, era: str) -> None:
    app, principals = tenant_app()
    principals["odd"] = Principal(subject="o", tenant_id=tenant)
    principals["plain"] = Principal(subject="p", tenant_id="a")
    async with _client(app) as c:
        result_of(await Wire(c).call_tool(era, "put", {"key": "k", "value": "plain-secret"}, headers=bearer("plain")))
        response = await Wire(c).call_tool(era, "get", {"key": "k"}, headers=bearer("odd"), check=False)
        assert response.status_code in (200, 403, 500)
        assert "plain-secret" not in response.text
        assert "Traceback" not in response.text and "UnicodeEncodeError" not in response.text


@pytest.mark.parametrize(
    "pair", [("acme", "globex"), ("Acme", "acme"), ("a/b", "a%2Fb"), ("acme", "acme ")], ids=["distinct", "case", "encoding", "space"]
)
async def test_list_cursor_of_one_tenant_is_refused_in_another(pair: tuple[str, str], era: str) -> None:
    first, second = pair
    app, principals = tenant_app()
    principals["one"] = Principal(subject="u1", tenant_id=first)
    principals["two"] = Principal(subject="u2", tenant_id=second)
    async with _client(app) as c:
        for i in range(3):
            result_of(await Wire(c).call_tool(era, "put", {"key": f"k{i}", "value": f"one-{i}"}, headers=bearer("one")))
            result_of(await Wire(c).call_tool(era, "put", {"key": f"k{i}", "value": f"two-{i}"}, headers=bearer("two")))
        page = result_of(await Wire(c).call_tool(era, "listing", {"limit": 1}, headers=bearer("one")))["structuredContent"]
        assert page["keys"] == ["k0"] and page["next"]
        moved = result_of(await Wire(c).call_tool(era, "listing", {"cursor": page["next"], "limit": 1}, headers=bearer("two")))
        assert moved["isError"] is True
        assert "one-" not in json.dumps(moved) and "two-" not in json.dumps(moved)
        # the cursor still works for its own tenant
        again = result_of(await Wire(c).call_tool(era, "listing", {"cursor": page["next"], "limit": 1}, headers=bearer("one")))
        assert again["structuredContent"]["values"] == ["one-1"]


async def test_list_cursor_is_bound_to_the_tenant_not_to_the_subject(era: str) -> None:
    """Control: two users of one tenant share its state, cursors included."""
    app, principals = tenant_app()
    principals["one"] = Principal(subject="u1", tenant_id="acme")
    principals["two"] = Principal(subject="u2", tenant_id="acme")
    async with _client(app) as c:
        for i in range(2):
            result_of(await Wire(c).call_tool(era, "put", {"key": f"k{i}", "value": f"v{i}"}, headers=bearer("one")))
        page = result_of(await Wire(c).call_tool(era, "listing", {"limit": 1}, headers=bearer("one")))["structuredContent"]
        shared = result_of(await Wire(c).call_tool(era, "listing", {"cursor": page["next"], "limit": 1}, headers=bearer("two")))
        assert shared["structuredContent"]["values"] == ["v1"]


async def test_forged_cursor_naming_another_tenants_key_is_refused(era: str) -> None:
    """A cursor is ``b64(last-key).b64(mac)``; editing the key part must break the MAC."""
    app, principals = tenant_app()
    principals["one"] = Principal(subject="u1", tenant_id="acme")
    async with _client(app) as c:
        for i in range(3):
            result_of(await Wire(c).call_tool(era, "put", {"key": f"k{i}", "value": f"v{i}"}, headers=bearer("one")))
        page = result_of(await Wire(c).call_tool(era, "listing", {"limit": 1}, headers=bearer("one")))["structuredContent"]
        _, tag = page["next"].split(".")
        forged_body = base64.urlsafe_b64encode(b"../globex/k0").rstrip(b"=").decode()
        for cursor in (f"{forged_body}.{tag}", page["next"] + "A", "." + tag, page["next"].replace(".", "..")):
            forged = result_of(await Wire(c).call_tool(era, "listing", {"cursor": cursor, "limit": 1}, headers=bearer("one")))
            assert forged["isError"] is True, cursor


async def test_modern_request_with_tenant_meta_cannot_choose_its_tenant(era: str) -> None:
    """Nothing the client sends (``_meta``, headers) overrides the principal's tenant."""
    app, principals = tenant_app()
    principals["one"] = Principal(subject="u1", tenant_id="acme")
    principals["two"] = Principal(subject="u2", tenant_id="globex")
    async with _client(app) as c:
        result_of(await Wire(c).call_tool(era, "put", {"key": "k", "value": "acme-secret"}, headers=bearer("one")))
        meta = {"tenant_id": "acme", "io.modelcontextprotocol/tenant": "acme", "tenantId": "acme"}
        headers = {**bearer("two"), "x-tenant-id": "acme", "mcp-tenant": "acme"}
        response = await Wire(c).call_tool(era, "get", {"key": "k"}, headers=headers, meta=meta)
        assert result_of(response)["structuredContent"] == {"result": None}


# -- additions -------------------------------------------------------------------------------


async def body_guard(request: Request) -> None:
    """A route guard verifying something in the raw body (e.g. a signature)."""
    if b'"secret"' not in await request.body():
        raise HTTPException(401, "unsigned")


async def test_fault_route_guard_reading_the_body_does_not_hang() -> None:
    """``app.include_router(router, dependencies=[Depends(body_guard)])`` where the guard
    awaits ``request.body()``. Observed: the request hangs (FastAPI cached the body on the
    Request, but ``_server.http.read_body`` reads ``request.receive`` directly and waits for a body
    that was already consumed). Expected: served. Fix: ``_server.http.read_body`` (use the body
    already read on the Request / ``request.stream()``)."""
    r, a = plain_router(), FastAPI()
    a.include_router(r, dependencies=[Depends(body_guard)])
    async with _client(a) as c:
        response: httpx.Response | None = None
        with anyio.move_on_after(3):
            response = await Wire(c).modern("tools/call", {"name": "secret", "arguments": {}}, check=False)
        assert response is not None, "the request hung"
        assert tool_text(result_of(response)) == "secret-of-anonymous"


async def test_stateless_2025_mode_still_authenticates_every_request() -> None:
    router = add_tools(McpRouter(settings=mcp_settings(session_mode="stateless"), authenticate=authenticate))
    app = FastAPI()
    app.include_router(router)
    async with _client(app) as c:
        wire = Wire(c)
        body = rpc("tools/call", {"name": "secret", "arguments": {}}, 1)
        denied = await wire.post(body, {"mcp-protocol-version": LEGACY})
        assert denied.status_code == 401
        assert TOOL_RUNS == []
        ok = await wire.post(body, {"mcp-protocol-version": LEGACY, **bearer("bob")})
        assert tool_text(result_of(ok)) == "secret-of-bob"


def auth_refreshing(response: Response, authorization: str | None = Header(default=None)) -> Principal | None:
    response.headers["x-token-expires-in"] = "60"
    return USERS.get((authorization or "").removeprefix("Bearer "))


async def test_fault_response_headers_set_by_authenticate_are_sent() -> None:
    """A FastAPI dependency may set response headers through a ``Response`` parameter
    (token-expiry hints, rotated cookies). Observed: dropped (the solve gets a throw-away
    ``Response()``). Expected: present on the MCP response, as for a path operation.
    Fix: router.py ``_resolve_principal``. Low severity."""
    async with _client(build_auth_app(auth_refreshing)) as c:
        response = await Wire(c).modern("tools/list", headers=bearer("alice"))
        assert response.status_code == 200
        assert response.headers.get("x-token-expires-in") == "60"
