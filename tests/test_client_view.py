"""ctx.client: info and capabilities (copies), extension(), user (openai/* hints), supports_views."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import make_app, make_router
from fastapi import Depends

from fastapi_mcp_ctx import ClientLocation, ClientUser, Context, mcp_context
from fastapi_mcp_ctx._context.client_view import MAX_HINT_CHARS, read_user, supports_views
from fastapi_mcp_ctx.context import ClientView
from fastapi_mcp_ctx.testing import McpTestClient

UI = "io.modelcontextprotocol/ui"
CAPABILITIES = {"sampling": {}, "extensions": {UI: {"mimeTypes": ["text/html;profile=mcp-app"]}, "x.example/other": {}}}
OPENAI_META = {
    "openai/locale": "it-IT",
    "openai/userAgent": "Mozilla/5.0 (test)",
    "openai/userLocation": {"city": "Roma", "country": "IT", "latitude": 41.9, "longitude": "12.5", "timezone": 3},
    "openai/subject": "v1/abc",
    "openai/session": "conv-1",
    "openai/organization": 42,  # wrong type: dropped
}


def _app() -> Any:
    router = make_router()

    @router.tool()
    async def report(ctx: Context = Depends(mcp_context)) -> dict[str, Any]:
        """What the client said about itself."""
        info = ctx.client.info
        capabilities = ctx.client.capabilities
        if info is not None:
            info["name"] = "mutated"  # a copy: the next read is unchanged
        if capabilities is not None:
            capabilities.setdefault("extensions", {})[UI] = "mutated"
        user = ctx.client.user
        ui = ctx.client.extension(UI)
        return {
            "info": ctx.client.info,
            "capabilities": ctx.client.capabilities,
            "ui": ui,
            "other": ctx.client.extension("x.example/other"),
            "missing": ctx.client.extension("nope/none"),
            "has": ctx.client.has_extension(UI),
            "views": ctx.client.supports_views,
            "sampling": ctx.client.can("sampling"),
            "user": None
            if user is None
            else {
                "locale": user.locale,
                "user_agent": user.user_agent,
                "subject": user.subject,
                "conversation_id": user.conversation_id,
                "organization_id": user.organization_id,
                "location": None if user.location is None else [user.location.city, user.location.country, user.location.latitude, user.location.longitude, user.location.timezone],
            },
        }

    return make_app(router)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_client_view_in_both_eras(era: Any) -> None:
    async with McpTestClient(_app(), era=era, client_capabilities=CAPABILITIES, client_info={"name": "probe", "version": "9"}) as client:
        result = await client.call_tool("report", meta=OPENAI_META)
        bare = await client.call_tool("report")
    seen = result.structured
    assert seen["info"] == {"name": "probe", "version": "9"}
    assert seen["capabilities"]["extensions"][UI] == {"mimeTypes": ["text/html;profile=mcp-app"]}
    assert seen["ui"] == {"mimeTypes": ["text/html;profile=mcp-app"]} and seen["other"] == {} and seen["missing"] is None
    assert seen["has"] is True and seen["views"] is True and seen["sampling"] is True
    assert seen["user"] == {
        "locale": "it-IT",
        "user_agent": "Mozilla/5.0 (test)",
        "subject": "v1/abc",
        "conversation_id": "conv-1",
        "organization_id": None,
        "location": ["Roma", "IT", 41.9, "12.5", None],
    }
    assert bare.structured["user"] is None, "no openai/* hint: user is None"


def test_user_normalisation() -> None:
    assert read_user(None) is None and read_user({}) is None
    assert read_user({"openai/locale": 5, "openai/subject": "", "openai/userLocation": {"latitude": True}}) is None
    assert read_user({"webplus/i18n": "fr-FR"}) == ClientUser(locale="fr-FR")
    assert read_user({"openai/locale": "de-DE", "webplus/i18n": "fr-FR"}) == ClientUser(locale="de-DE")
    assert read_user({"openai/subject": "x" * (MAX_HINT_CHARS + 1)}) is None, "oversized: dropped, never cut"
    assert read_user({"openai/userAgent": "a" * 1000}) == ClientUser(user_agent="a" * 1000)
    assert read_user({"openai/userLocation": {"latitude": float("nan"), "region": "Lazio"}}) == ClientUser(
        location=ClientLocation(region="Lazio")
    )
    assert read_user({"openai/userLocation": "Rome", "timezone_offset_minutes": 60}) is None


def test_supports_views_and_copies() -> None:
    assert supports_views(None) is False
    assert supports_views({"extensions": {UI: {"mimeTypes": ["text/html"]}}}) is False
    assert supports_views({"extensions": {UI: {"mimeTypes": "text/html;profile=mcp-app"}}}) is False
    assert supports_views({"extensions": {UI: {"mimeTypes": ["Text/HTML; profile=mcp-app"]}}}) is True
    assert supports_views({"extensions": {UI: True}}) is False
    declared: dict[str, Any] = {"extensions": {UI: {"mimeTypes": ["text/html;profile=mcp-app"]}}}
    view = ClientView(declared, {"name": "c"})
    copied = view.extension(UI)
    assert copied is not None
    copied["mimeTypes"].append("x")
    assert declared["extensions"][UI]["mimeTypes"] == ["text/html;profile=mcp-app"]
    assert view.capabilities == declared and view.capabilities is not declared
    assert ClientView(None, None).capabilities is None and ClientView(None, None).info is None
    assert ClientView(None, None).user is None and ClientView(None, None).supports_views is False
