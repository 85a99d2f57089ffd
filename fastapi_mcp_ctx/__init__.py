"""fastapi-mcp-ctx: serve the Model Context Protocol from a FastAPI app.

Both protocol eras on one endpoint (2025 handshake era and the stateless 2026-07-28 era),
tools declared as FastAPI-style functions whose dependencies FastAPI resolves in process,
and a request :class:`Context` for every handler.

    from fastapi import Depends, FastAPI
    from fastapi_mcp_ctx import Context, McpRouter, mcp_context

    mcp_router = McpRouter()

    @mcp_router.tool()
    async def add(a: int, b: int, ctx: Context = Depends(mcp_context)) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    app = FastAPI()
    app.include_router(mcp_router)
"""

from . import input_required
from ._context.client_view import ClientLocation, ClientUser
from .auth import Principal
from .consent import ConsentGate
from .content import audio_content, embedded_blob_resource, embedded_text_resource, image_content, text_content
from .context import (
    CancelSignal,
    ClientView,
    Context,
    McpContext,
    OptionalMcpContext,
    get_request_context,
    mcp_context,
    optional_mcp_context,
)
from .contracts import ErrorContract
from .errors import McpError, ToolError
from .input_required import ElicitAnswer, InputRequired
from .inputs import Inputs, InputView
from .router import McpRouter
from .settings import McpSettings, get_settings

__all__ = [
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
]

__version__ = "0.1.0"
