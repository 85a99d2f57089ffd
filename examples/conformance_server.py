"""The conformance fixtures (checklist §7.1) that this server's surface serves.

Run:  python examples/conformance_server.py [PORT]      (default 8931, on 127.0.0.1)
then: scripts/conformance.sh http://127.0.0.1:8931/mcp 2025-11-25 2026-07-28   (or: make conformance)
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Annotated, Any

import anyio
import mcp_types as types
from fastapi import Depends, FastAPI
from pydantic import Field

from fastapi_mcp_ctx import (
    Context,
    McpRouter,
    McpSettings,
    ToolError,
    audio_content,
    embedded_blob_resource,
    embedded_text_resource,
    image_content,
    mcp_context,
    text_content,
)
from fastapi_mcp_ctx.errors import NoBackChannelError

PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

router = McpRouter(
    settings=McpSettings(server_name="fastapi-mcp-ctx-conformance", server_version="0.1.0"),
    list_changed={"tools", "prompts", "resources"},  # test_trigger_*_change: <kind>.listChanged, subscriptions/listen
    resources_subscribe=True,  # resources/subscribe (2025) and resourceSubscriptions (2026 listen)
)


@router.tool()
async def test_simple_text() -> types.TextContent:
    """Returns a simple text response."""
    return text_content("This is a simple text response for testing.")


@router.tool()
async def test_image_content() -> types.ImageContent:
    """Returns a 1x1 PNG image."""
    return image_content(PNG_1X1, "image/png")


@router.tool()
async def test_audio_content() -> types.AudioContent:
    """Returns a short WAV clip."""
    return audio_content(WAV, "audio/wav")


@router.tool()
async def test_embedded_resource() -> types.EmbeddedResource:
    """Returns an embedded text resource."""
    return embedded_text_resource("test://embedded-resource", "This is an embedded resource content.")


@router.tool()
async def test_multiple_content_types() -> list[types.TextContent | types.ImageContent | types.EmbeddedResource]:
    """Returns text, image and resource content."""
    return [
        text_content("Multiple content types test:"),
        image_content(PNG_1X1, "image/png"),
        embedded_text_resource("test://mixed-content-resource", '{"test":"data","value":123}', "application/json"),
    ]


@router.tool()
async def test_tool_with_logging(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Emits three info log messages while it runs."""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.log.info(message)
        await anyio.sleep(0.05)
    return text_content("Logging test completed")


@router.tool()
async def test_logging_tool(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Logs one message; delivered only when the request opted into logging."""
    await ctx.log.info("logging tool ran")
    return text_content("Logging tool completed")


@router.tool()
async def test_tool_with_progress(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Reports progress 0, 50, 100 of 100."""
    for value in (0, 50, 100):
        await ctx.report_progress(value, 100, f"Progress {value}%")
        await anyio.sleep(0.05)
    return text_content(f"Progress test completed (token {ctx.progress_token!r})")


@router.tool()
async def test_error_handling() -> str:
    """Always fails with a tool error."""
    raise ToolError("This tool intentionally returns an error for testing")


@router.tool()
async def test_missing_capability(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Needs the client's sampling capability."""
    ctx.client.require("sampling")
    return text_content("Success")


@router.tool()
async def test_sampling(prompt: str, ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Asks the client's model (2025: sampling/createMessage on this call's stream)."""
    message = {"role": "user", "content": {"type": "text", "text": prompt}}
    result = await ctx.send_request("sampling/createMessage", {"messages": [message], "maxTokens": 100})
    content = result.get("content")
    return text_content(f"LLM response: {content.get('text') if isinstance(content, dict) else content}")


async def _elicit(ctx: Context, message: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return await ctx.send_request("elicitation/create", {"message": message, "requestedSchema": schema})


@router.tool()
async def test_elicitation(message: str, ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Asks the user for a username and an email (2025: elicitation/create)."""
    properties = {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    }
    result = await _elicit(ctx, message, properties, ["username", "email"])
    return text_content(f"User response: action={result['action']}, content={json.dumps(result.get('content', {}))}")


@router.tool()
async def test_elicitation_sep1034_defaults(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Elicits a form whose every field has a default (SEP-1034)."""
    properties = {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    }
    result = await _elicit(ctx, "Please review and update the form fields with defaults", properties)
    return text_content(f"Elicitation completed: action={result['action']}, content={json.dumps(result.get('content', {}))}")


@router.tool()
async def test_elicitation_sep1330_enums(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Elicits the five enum shapes of SEP-1330."""
    options = ["option1", "option2", "option3"]
    titled = [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]
    properties = {
        "untitledSingle": {"type": "string", "enum": options},
        "titledSingle": {"type": "string", "oneOf": titled},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
        "titledMulti": {"type": "array", "items": {"anyOf": titled}},
    }
    result = await _elicit(ctx, "Please select options from the enum fields", properties)
    return text_content(f"Elicitation completed: action={result['action']}, content={json.dumps(result.get('content', {}))}")


@router.tool()
async def test_streaming_elicitation(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Tries to elicit on its own stream: 2025 sends the request, 2026 refuses at once (no
    independent requests on a 2026 stream; the input_required path is the MRTR fixtures')."""
    try:
        result = await _elicit(ctx, "Your name?", {"name": {"type": "string"}}, ["name"])
    except NoBackChannelError as exc:
        return text_content(f"Not sent: {exc.detail}")
    return text_content(f"Elicitation completed: action={result['action']}")


@router.tool()
async def test_trigger_tool_change(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Announces a tool-list change (2025 GET streams, 2026 listen streams that asked for it)."""
    await ctx.notify_tools_list_changed()
    return text_content("Tool list change triggered")


@router.tool()
async def test_trigger_prompt_change(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Announces a prompt-list change (2025 GET streams, 2026 listen streams that asked for it)."""
    await ctx.notify_prompts_list_changed()
    return text_content("Prompt list change triggered")


@router.tool()
async def test_reconnection(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Closes its SSE connection mid-call (after a retry hint); the client resumes with GET +
    Last-Event-ID and gets the result there (2025-11-25 SSE polling)."""
    await ctx.close_sse_stream()
    await anyio.sleep(0.1)  # the result comes after the connection closed
    return text_content("Reconnection test completed successfully")


@router.tool()
async def test_header_param(
    region: Annotated[str, Field(description="Routing region", json_schema_extra={"x-mcp-header": "Region"})],
) -> types.TextContent:
    """Echoes a region that is mirrored in the Mcp-Param-Region header."""
    return text_content(f"region={region}")


JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@router.tool(input_schema=JSON_SCHEMA_2020_12)
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,  # noqa: N803 - wire name
    phone: str | None = None,
    email: str | None = None,
) -> types.TextContent:
    """Accepts arguments described by a JSON Schema 2020-12 document."""
    return text_content(f"name={name} contact={contactMethod} phone={phone} email={email} address={address}")


# -- resources (checklist §7.1) ---------------------------------------------------------------
@router.resource("test://static-text", name="static-text", mime_type="text/plain", cache_scope="public")
async def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@router.resource("test://static-binary", name="static-binary", mime_type="image/png")
async def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    return base64.b64decode(PNG_1X1)


@router.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
async def watched_resource() -> str:
    """A resource clients subscribe to."""
    return "Watched resource content"


@router.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
async def template_data(id: str) -> str:  # noqa: A002 - the template's variable
    """Data for one id."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


# -- prompts --------------------------------------------------------------------------------
@router.prompt()
async def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


async def _complete_arg1(value: str) -> list[str]:
    return [v for v in ("paris", "park", "party", "test", "testing") if v.startswith(value)]


@router.prompt(complete={"arg1": _complete_arg1})
async def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@router.prompt()
async def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],  # noqa: N803 - wire name
) -> list[types.EmbeddedResource | types.TextContent]:
    """A prompt embedding a resource."""
    return [
        embedded_text_resource(resourceUri, "Embedded resource content for testing."),
        text_content("Please process the embedded resource above."),
    ]


@router.prompt()
async def test_prompt_with_image() -> list[types.ImageContent | types.TextContent]:
    """A prompt with an image."""
    return [image_content(PNG_1X1, "image/png"), text_content("Please analyze the image above.")]


@router.prompt()
async def test_prompt_with_binary_resource() -> list[types.EmbeddedResource]:
    """A prompt embedding a binary resource (bytes become a base64 blob once)."""
    return [embedded_blob_resource("test://static-binary", base64.b64decode(PNG_1X1), "image/png")]


app = FastAPI(title="fastapi-mcp-ctx conformance server")
app.include_router(router)


if __name__ == "__main__":
    import uvicorn

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8931
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
