"""The public surface: ``fastapi_mcp_ctx.__all__`` is exactly the documented names (DESIGN.md decision 8)."""

from __future__ import annotations

import importlib
import inspect

import fastapi_mcp_ctx

PUBLIC_NAMES = {
    "CancelSignal",
    "ClientLocation",
    "ClientUser",
    "ClientView",
    "ConsentGate",
    "Context",
    "ElicitAnswer",
    "ErrorContract",
    "InputRequired",
    "InputView",
    "Inputs",
    "McpContext",
    "McpError",
    "McpRouter",
    "McpSettings",
    "OptionalMcpContext",
    "Principal",
    "ToolError",
    "audio_content",
    "embedded_blob_resource",
    "embedded_text_resource",
    "get_request_context",
    "get_settings",
    "image_content",
    "input_required",
    "mcp_context",
    "optional_mcp_context",
    "text_content",
}


def test_all_equals_documented_public_names() -> None:
    assert set(fastapi_mcp_ctx.__all__) == PUBLIC_NAMES
    assert len(fastapi_mcp_ctx.__all__) == len(PUBLIC_NAMES), "no duplicates in __all__"
    assert list(fastapi_mcp_ctx.__all__) == sorted(fastapi_mcp_ctx.__all__)


def test_every_public_name_is_importable() -> None:
    module = importlib.import_module("fastapi_mcp_ctx")
    for name in fastapi_mcp_ctx.__all__:
        assert getattr(module, name) is not None, name
    namespace: dict[str, object] = {}
    exec("from fastapi_mcp_ctx import *", namespace)  # noqa: S102
    assert set(namespace) >= PUBLIC_NAMES


def test_public_names_have_docstrings() -> None:
    for name in fastapi_mcp_ctx.__all__:
        obj = getattr(fastapi_mcp_ctx, name)
        assert inspect.getdoc(obj), f"{name} has no docstring"


def test_no_private_module_leaks_into_the_namespace() -> None:
    public = {n for n in vars(fastapi_mcp_ctx) if not n.startswith("_")}
    submodules = {n for n in public if inspect.ismodule(getattr(fastapi_mcp_ctx, n))}
    assert public - submodules <= PUBLIC_NAMES


def test_error_base_and_router_types() -> None:
    from fastapi import APIRouter

    assert issubclass(fastapi_mcp_ctx.McpRouter, APIRouter)
    assert issubclass(fastapi_mcp_ctx.McpError, Exception)
    assert issubclass(fastapi_mcp_ctx.ToolError, Exception)
    assert fastapi_mcp_ctx.__version__
