"""Resources, prompts and completions for :class:`~fastapi_mcp_ctx.testing.McpTestClient`.

:class:`FeatureRequests` is a mixin of the test client: each method is one request (or every
page of a list), sent in the client's era through its ``request`` (so the 2026-07-28 envelope,
the ``Mcp-Name`` header of ``resources/read`` / ``prompts/get``, the answered input rounds and
the result's check against the official wire model all apply). Lists return every item of every
page, as ``list_tools`` does; a call returns the :class:`McpResponse` (``.result``, ``.logs``,
``.progress``, ``.asked``), as ``call_tool`` returns its ``ToolResult``. An error answer raises
:class:`~fastapi_mcp_ctx.errors.McpResponseError`.

Spec 2025-11-25 ``server/resources``, ``server/prompts``, ``server/utilities/completion``
(the same methods in 2026-07-28).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

from ..errors import McpResponseError
from ._results import McpResponse

__all__ = ["FeatureRequests", "Requester", "every_page"]


class Requester(Protocol):
    """What the mixin needs of its client: ``McpTestClient.request``."""

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auto_answer: bool = True,
    ) -> McpResponse: ...


async def every_page(client: Requester, method: str, key: str) -> list[dict[str, Any]]:
    """The ``key`` items of every page of ``method``, following ``nextCursor``.

    Raises:
        McpResponseError: an error answer, or a ``nextCursor`` the server already sent (its
            pagination does not advance: following it would never end).
    """
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        answer = await client.request(method, {"cursor": cursor} if cursor else None)
        page = answer.result
        items.extend(cast(list[dict[str, Any]], page.get(key) or []))
        cursor = page.get("nextCursor")
        if not cursor:
            return items
        if cursor in seen:
            message = f"the server sent nextCursor {cursor[:64]!r} twice: its pagination does not advance"
            raise McpResponseError(code=None, message=message, http_status=answer.http_status, headers=answer.headers, method=method)
        seen.add(cursor)


def _extra_meta(meta: Mapping[str, Any] | None, progress_token: str | int | None) -> dict[str, Any]:
    return {**(meta or {}), **({"progressToken": progress_token} if progress_token is not None else {})}


class FeatureRequests:
    """``list_resources``, ``list_resource_templates``, ``read_resource``, ``list_prompts``,
    ``get_prompt`` and ``complete`` (module docstring)."""

    async def list_resources(self: Requester) -> list[dict[str, Any]]:
        """Every ``Resource`` of ``resources/list`` (all pages).

        Raises:
            McpResponseError: the server answered an error (``-32601``: no resources registered).
        """
        return await every_page(self, "resources/list", "resources")

    async def list_resource_templates(self: Requester) -> list[dict[str, Any]]:
        """Every ``ResourceTemplate`` of ``resources/templates/list`` (all pages).

        Raises:
            McpResponseError: the server answered an error.
        """
        return await every_page(self, "resources/templates/list", "resourceTemplates")

    async def read_resource(
        self: Requester,
        uri: str,
        *,
        progress_token: str | int | None = None,
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auto_answer: bool = True,
    ) -> McpResponse:
        """Read ``uri`` (``resources/read``); ``.result["contents"]`` holds the text / blob items.

        Args:
            progress_token / meta / headers / auto_answer: as for ``call_tool``.

        Raises:
            McpResponseError: not found (``-32002`` in 2025, ``-32602`` in 2026, ``data.uri``),
                a malformed URI (``-32602``), a handler's ``ToolError`` (its code), 401/403.
        """
        extra = _extra_meta(meta, progress_token)
        return await self.request("resources/read", {"uri": uri}, meta=extra, headers=headers, auto_answer=auto_answer)

    async def list_prompts(self: Requester) -> list[dict[str, Any]]:
        """Every ``Prompt`` of ``prompts/list`` (all pages).

        Raises:
            McpResponseError: the server answered an error (``-32601``: no prompts registered).
        """
        return await every_page(self, "prompts/list", "prompts")

    async def get_prompt(
        self: Requester,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        progress_token: str | int | None = None,
        meta: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auto_answer: bool = True,
    ) -> McpResponse:
        """Get prompt ``name`` with ``arguments`` (strings); ``.result["messages"]`` holds its messages.

        Raises:
            McpResponseError: an unknown prompt, a missing required argument, an argument that
                is not a string (``-32602``), a handler's ``ToolError`` (its code).
        """
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        extra = _extra_meta(meta, progress_token)
        return await self.request("prompts/get", params, meta=extra, headers=headers, auto_answer=auto_answer)

    async def complete(
        self: Requester,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        context: Mapping[str, str] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> McpResponse:
        """Ask ``completion/complete``; ``.result["completion"]`` is ``{values, total?, hasMore?}``.

        Args:
            ref: ``{"type": "ref/prompt", "name": ...}`` or ``{"type": "ref/resource", "uri": <template>}``.
            argument: ``{"name": <argument>, "value": <text typed so far>}``.
            context: the values already chosen for the other arguments, sent as
                ``context.arguments`` (None: no ``context``).

        Raises:
            McpResponseError: an unknown prompt or template, a malformed ref or argument
                (``-32602``), no completions registered (``-32601``).
        """
        params: dict[str, Any] = {"ref": dict(ref), "argument": dict(argument)}
        if context is not None:
            params["context"] = {"arguments": dict(context)}
        return await self.request("completion/complete", params, headers=headers)
