"""2025 era: a request whose ``params._meta`` is malformed (not an object, a ``progressToken``
that is neither a string nor an integer) is answered like any other invalid-params error of
that era: ``-32602`` with the request's id echoed, HTTP 200, on a single POST as in a batch and
on stdio. Found by the third hostile run: a single POST answered 400 with ``"id": null``,
though the id was readable (known faults kind JSONRPC-ENVELOPE / ID).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import LEGACY, Wire, make_app, make_router, open_client, rpc


def build() -> Any:
    router = make_router()

    @router.tool()
    async def echo(text: str = "x") -> str:
        """Echo."""
        return text

    return make_app(router)


@pytest.mark.parametrize(
    "meta",
    [5, "x", [], {"progressToken": {}}, {"progressToken": 1.5}, {"progressToken": True}, {"progressToken": None}],
)
@pytest.mark.parametrize("request_id", [7, "r-7", 0])
async def test_a_malformed_meta_is_minus_32602_with_the_request_id(meta: Any, request_id: Any) -> None:
    async with open_client(build()) as client:
        wire = Wire(client)
        session = await wire.initialize(LEGACY)
        body = rpc("tools/call", {"name": "echo", "arguments": {}, "_meta": meta}, request_id)
        response = await wire.post(body, {"mcp-session-id": session, "mcp-protocol-version": LEGACY})
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["id"] == request_id
        assert answer["error"]["code"] == -32602 and "_meta" in answer["error"]["message"]
        assert response.headers["mcp-session-id"] == session
        served = await wire.post(rpc("tools/call", {"name": "echo", "arguments": {}}, 8), {"mcp-session-id": session, "mcp-protocol-version": LEGACY})
        assert served.json()["result"]["content"][0]["text"] == "x"
