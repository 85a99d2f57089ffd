"""A tool's argument model is built at registration (a bad signature fails there), dropped, and built
again at the tool's first call (``_handlers.argument_fields.DeferredModel``): an idle tool holds no
model (idle RSS, issue 23), and what a call sees is the same."""

from __future__ import annotations

import gc
import io
import weakref
from typing import Any

import pytest
from conftest import Wire, make_app, make_router, open_client, result_of
from pydantic import BaseModel

from fastapi_mcp_ctx._handlers.tool_def import ToolDef


def _registered(router: Any, name: str) -> ToolDef:
    tool = router.registry.get(name)
    assert tool is not None
    return tool


def test_an_idle_tool_holds_no_argument_model() -> None:
    router = make_router()

    @router.tool()
    async def pair(x: int, label: str = "item") -> str:
        """A filler."""
        return f"{label}-{x}"

    gc.collect()
    assert not [c for c in BaseModel.__subclasses__() if c.__name__ == "pair_arguments"]
    tool = _registered(router, "pair")
    assert type(tool.validator).__name__ == "_FirstCall"
    model = tool.arguments_model  # built again on demand, the same fields and name
    assert model.__name__ == "pair_arguments" and list(model.model_fields) == ["x", "label"]
    assert tool.validator is model.__pydantic_validator__
    assert tool.arguments_model is model  # built once
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is not None


def test_a_bad_signature_still_fails_at_registration() -> None:
    router = make_router()

    async def bad(stream: io.BytesIO) -> str:
        """No JSON Schema for BytesIO."""
        return ""

    with pytest.raises(ValueError, match="'stream' of type BytesIO"):
        router.add_tool(bad)


async def test_the_first_call_builds_the_model_and_validates_with_it(era: str) -> None:
    router = make_router()

    @router.tool()
    async def pair(x: int, label: str = "item") -> dict[str, Any]:
        """A filler."""
        return {"text": f"{label}-{x}"}

    tool = _registered(router, "pair")
    async with open_client(make_app(router)) as client:
        wire = Wire(client)
        refused = result_of(await wire.call_tool(era, "pair", {"x": "5"}))  # strict JSON: "5" is no integer
        assert refused["isError"] is True
        assert tool.validator is tool.arguments_model.__pydantic_validator__
        assert result_of(await wire.call_tool(era, "pair", {"x": 5}))["structuredContent"] == {"text": "item-5"}
