"""Resource scopes hold for every way of naming or watching a resource (issue 24 items 8 and 9).

- 2026 ``subscriptions/listen`` checks each ``resourceSubscriptions`` URI against the scopes of
  the resource serving it, as 2025 ``resources/subscribe`` does: a caller lacking them is refused
  403 ``insufficient_scope`` (the whole listen request, with the challenge), never streamed the
  updates; a URI no resource serves is still accepted (the application may publish it).
- A URI is looked up in its RFC 3986 §6.2.2 normal form (``_wire.uris.normalize_uri``): an
  escaped unreserved character (``%70`` is ``p``) or the scheme's and host's case cannot route a
  scoped static resource's URI to an overlapping unscoped template.

Against the real loopback JWKS of tests/test_jwt_auth.py, both eras.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from conftest import Wire, mcp_settings, open_client, result_of
from fastapi import FastAPI
from jwt_support import RESOURCE, KeyServer, RsaKey, claims
from notify_app import frames, listening
from test_feature_scopes import assert_refused, scoped_app, start
from test_jwt_auth import ISSUER, bearer, idp, rsa_key

from fastapi_mcp_ctx import McpRouter
from fastapi_mcp_ctx._wire.uris import normalize_uri

__all__ = ["idp", "rsa_key"]  # the JWKS fixtures, shared with test_jwt_auth.py


def overlapping_app(idp: KeyServer) -> FastAPI:
    """A scoped static ``docs://payroll`` under an unscoped template ``docs://{name}``."""
    values: dict[str, Any] = {"auth_mode": "jwt", "jwt_jwks_url": idp.jwks_url, "jwt_issuer": ISSUER, "resource_url": RESOURCE}
    router = McpRouter(settings=mcp_settings(**values), resources_subscribe=True)

    @router.resource("docs://payroll", scopes=["hr"])
    async def payroll() -> str:
        return "salaries"

    @router.resource("docs://{name}")
    async def doc(name: str) -> str:
        return f"doc {name}"

    app = FastAPI()
    app.include_router(router)
    return app


async def listen_at_once(wire: Wire, notifications: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    """A listen POST expected to be answered at once (refused): an accepted one would stream on,
    so it fails after 10 s rather than hang."""
    with anyio.fail_after(10):
        return await wire.modern("subscriptions/listen", {"notifications": notifications}, headers=headers, check=False)


async def test_listen_refuses_a_resource_uri_the_token_lacks_the_scope_for(idp: KeyServer, rsa_key: RsaKey, era: str) -> None:
    reader = bearer(rsa_key.sign(claims(ISSUER, scope="notes:read")))
    async with open_client(scoped_app(idp)) as client:
        wire = await start(client, era, reader)
        if era == "legacy":  # the 2025 twin: resources/subscribe
            assert_refused(await wire.legacy("resources/subscribe", {"uri": "docs://secret"}, headers=reader, check=False), "docs:read")
            assert_refused(await wire.legacy("resources/subscribe", {"uri": "docs://7"}, headers=reader, check=False), "docs:read")
            return
        for uris in (["docs://secret"], ["docs://public", "docs://7"], ["docs://%73ecret"]):
            assert_refused(await listen_at_once(wire, {"resourcesListChanged": True, "resourceSubscriptions": uris}, reader), "docs:read")


async def test_listen_with_the_scope_or_for_unscoped_and_unserved_uris_is_acknowledged(idp: KeyServer, rsa_key: RsaKey) -> None:
    cases = [("notes:read", ["docs://public", "elsewhere://x"]), ("docs:read", ["docs://secret", "docs://7"])]
    for scope, uris in cases:
        token = bearer(rsa_key.sign(claims(ISSUER, scope=scope)))
        async with listening(scoped_app(idp), "L", {"resourceSubscriptions": uris}, **token) as ex:
            assert ex.status == 200
            ack = frames(ex)[0]
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {"resourceSubscriptions": uris}


@pytest.mark.parametrize("uri", ["docs://%70ayroll", "docs://%70%61yroll", "DOCS://payroll", "docs://PAYROLL", "Docs://Pay%72oll"])
async def test_an_encoded_or_recased_uri_of_a_scoped_static_resource_needs_its_scope(
    idp: KeyServer, rsa_key: RsaKey, era: str, uri: str
) -> None:
    lacking = bearer(rsa_key.sign(claims(ISSUER, scope="other")))
    granted = bearer(rsa_key.sign(claims(ISSUER, scope="hr")))
    async with open_client(overlapping_app(idp)) as client:
        wire = await start(client, era, lacking)

        async def read(headers: dict[str, str]) -> httpx.Response:
            return await wire.request(era, "resources/read", {"uri": uri}, headers=headers, check=False)

        assert_refused(await read(lacking), "hr")
        if era == "legacy":
            assert_refused(await wire.legacy("resources/subscribe", {"uri": uri}, headers=lacking, check=False), "hr")
        else:
            assert_refused(await listen_at_once(wire, {"resourceSubscriptions": [uri]}, lacking), "hr")
        granted_wire = await start(client, era, granted)
        allowed = await granted_wire.request(era, "resources/read", {"uri": uri}, headers=granted, check=False)
        assert result_of(allowed)["contents"][0]["text"] == "salaries"
        other = await wire.request(era, "resources/read", {"uri": "docs://%70ublic"}, headers=lacking, check=False)
        assert result_of(other)["contents"][0]["text"] == "doc public"  # the template still serves the rest, decoded


def test_static_resources_that_differ_only_in_normalisation_are_one_uri() -> None:
    router = McpRouter(settings=mcp_settings())

    async def read() -> str:
        return "x"

    router.resource("docs://payroll")(read)
    with pytest.raises(ValueError, match="already registered"):
        router.resource("DOCS://%70ayroll")(read)


@pytest.mark.parametrize(
    ("uri", "normal"),
    [
        ("docs://payroll", "docs://payroll"),
        ("docs://%70ayroll", "docs://payroll"),
        ("HTTP://User@Example.COM:8080/A%2fB?Q=%7e#F", "http://User@example.com:8080/A%2FB?Q=~#F"),
        ("file:///Tmp/%41", "file:///Tmp/A"),
        ("urn:ISBN:0451450523", "urn:ISBN:0451450523"),
        ("URN:isbn:x", "urn:isbn:x"),
        ("lib://books/%31", "lib://books/1"),
        ("x://h%C3%A9/p", "x://h%C3%A9/p"),
        ("x://H%c3%a9st/", "x://h%C3%A9st/"),
        ("not a uri %7e", "not a uri ~"),
        ("books/01", "books/01"),
    ],
)
def test_normalize_uri_is_rfc3986_syntax_based_normalisation(uri: str, normal: str) -> None:
    assert normalize_uri(uri) == normal
    assert normalize_uri(normal) == normal  # idempotent
