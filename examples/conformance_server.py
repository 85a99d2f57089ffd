"""The conformance fixtures (checklist §7.1) that this server's surface serves.

Run:  python examples/conformance_server.py [PORT]      (default 8931, on 127.0.0.1)
then: scripts/conformance.sh http://127.0.0.1:8931/mcp 2025-11-25 2026-07-28   (or: make conformance)
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Annotated, Any

import anyio
import mcp_types as types
from fastapi import Depends, FastAPI
from pydantic import BaseModel, Field

from fastapi_mcp_ctx import (
    Context,
    McpRouter,
    McpSettings,
    ToolError,
    audio_content,
    embedded_blob_resource,
    embedded_text_resource,
    image_content,
    input_required,
    mcp_context,
    text_content,
)
from fastapi_mcp_ctx.errors import InternalError, NoBackChannelError

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
    """Asks the client's model (2025: sampling/createMessage on this call's stream; 2026: input_required)."""
    answer = await ctx.sample(prompt, max_tokens=100)
    return text_content(f"LLM response: {getattr(answer.content, 'text', answer.content)}")


async def _elicit(ctx: Context, message: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return await ctx.send_request("elicitation/create", {"message": message, "requestedSchema": schema})


def _form(ctx: Context, key: str, message: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """The answer to the form ``key``, asking for it (``ctx.request_input``) when it has not come back."""
    view = ctx.inputs.view(key)
    if view.kind == "none":
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        ctx.request_input({key: input_required.elicit(message, schema)})
    return {"action": view.action, "content": dict(view.content or {})}


@router.tool()
async def test_elicitation(message: str, ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Asks the user for a username and an email (2025: elicitation/create; 2026: input_required)."""
    properties = {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    }
    result = _form(ctx, "answer", message, properties, ["username", "email"])
    return text_content(f"User response: action={result['action']}, content={json.dumps(result['content'])}")


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
    result = _form(ctx, "defaults", "Please review and update the form fields with defaults", properties)
    return text_content(f"Elicitation completed: action={result['action']}, content={json.dumps(result['content'])}")


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
    result = _form(ctx, "enums", "Please select options from the enum fields", properties)
    return text_content(f"Elicitation completed: action={result['action']}, content={json.dumps(result['content'])}")


# -- 2026-07-28 multi-round-trip fixtures (input-required-result-*) --------------------------
class UserName(BaseModel):
    name: str


class Ok(BaseModel):
    ok: bool


class Color(BaseModel):
    color: str


@router.tool()
async def test_input_required_result_elicitation(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Asks for the user's name (key user_name), then greets them."""
    answer = await ctx.elicit("What is your name?", UserName, key="user_name")
    return text_content(f"Hello, {answer.data.name if answer.data else 'stranger'}!")


@router.tool()
async def test_input_required_result_sampling(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Asks the client's model one question."""
    answer = await ctx.sample("What is the capital of France?", max_tokens=100, key="sample_request")
    return text_content(f"Model said: {getattr(answer.content, 'text', '')}")


@router.tool()
async def test_input_required_result_list_roots(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Lists the client's roots."""
    roots = await ctx.list_roots(key="client_roots")
    return text_content(f"Roots: {', '.join(str(root.uri) for root in roots) or 'none'}")


@router.tool()
async def test_input_required_result_request_state(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Asks for a confirmation with a request state, and checks the state on the retry."""
    confirmed = ctx.inputs.accepted("confirm", Ok)
    if confirmed is None:
        ctx.request_input({"confirm": input_required.elicit("Proceed?", Ok)}, request_state="conformance-state")
    status = "state-ok" if ctx.inputs.state() == "conformance-state" else "state-missing"
    return text_content(f"{status}: ok={confirmed.ok}")


@router.tool()
async def test_input_required_result_multiple_inputs(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Asks three kinds of input in one round, with a request state."""
    name, greeting, roots = ctx.inputs.view("user_name"), ctx.inputs.view("greeting"), ctx.inputs.view("client_roots")
    if "none" in (name.kind, greeting.kind, roots.kind):
        ctx.request_input(
            {
                "user_name": input_required.elicit("What is your name?", UserName),
                "greeting": input_required.sample("Say hello", max_tokens=50),
                "client_roots": input_required.list_roots(),
            },
            request_state="multiple-inputs",
        )
    return text_content(f"name={dict(name.content or {}).get('name')} greeting={greeting.text} roots={len(roots.roots or [])}")


@router.tool()
async def test_input_required_result_multi_round(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Two questions in two rounds (await ctx.elicit twice)."""
    first = await ctx.elicit("Step 1: What is your name?", UserName, key="step1")
    second = await ctx.elicit("Step 2: What is your favorite color?", Color, key="step2")
    name = first.data.name if first.data else "?"
    return text_content(f"Multi-round complete for {name} who likes {second.data.color if second.data else '?'}")


@router.tool()
async def test_input_required_result_tampered_state(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Asks with a request state; a tampered echo never reaches this handler."""
    if ctx.inputs.state() is None:
        ctx.request_input({"confirm": input_required.elicit("Proceed?", Ok)}, request_state="tamper-target")
    return text_content(f"state={ctx.inputs.state()}")


@router.tool()
async def test_input_required_result_capabilities(ctx: Context = Depends(mcp_context)) -> types.TextContent:
    """Asks only what the request's capabilities cover (sampling and/or elicitation)."""
    requests: dict[str, Any] = {}
    if ctx.client.can("sampling") and ctx.inputs.view("question").kind == "none":
        requests["question"] = input_required.sample("Pick a number", max_tokens=10)
    if ctx.client.can("elicitation.form") and ctx.inputs.view("name").kind == "none":
        requests["name"] = input_required.elicit("What is your name?", UserName)
    if requests:
        ctx.request_input(requests)
    return text_content("Capabilities respected")


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



class PromptContext(BaseModel):
    context: str


@router.prompt()
async def test_input_required_result_prompt(ctx: Context = Depends(mcp_context)) -> str:
    """Asks what context the prompt should use (key user_context), then builds the prompt."""
    answer = await ctx.elicit("What context should the prompt use?", PromptContext, key="user_context")
    return f"Use this context: {answer.data.context if answer.data else 'none'}"


# -- tasks (the suite's tasks-* scenarios: extension io.modelcontextprotocol/tasks, SEP-2663) --
@router.tool()
async def greet(name: str) -> str:
    """A plain tool (never a task): greets ``name``."""
    return f"Hello, {name}!"


@router.tool(task="optional")
async def slow_compute(seconds: float, label: str = "", ctx: Context = Depends(mcp_context)) -> str:
    """A task tool: sleeps ``seconds``, then answers; cancelled while it sleeps, it ends ``cancelled``."""
    if ctx.task is not None:
        await ctx.task.status(f"computing {label}".strip())
    await anyio.sleep(seconds)
    return f"computed {label or 'result'} after {seconds:g} s"


@router.tool(task="required")
async def failing_job() -> str:
    """A task-only tool that always fails as a tool (``isError``): its task ends ``completed``."""
    await anyio.sleep(0.2)
    raise ToolError("the job failed")


@router.tool(task="optional")
async def protocol_error_job() -> str:
    """A task tool failing with a JSON-RPC error: its task ends ``failed`` with that error."""
    await anyio.sleep(0.1)
    raise InternalError("the job hit a protocol-level failure")


class Confirmation(BaseModel):
    confirm: bool


class NamedConfirmation(BaseModel):
    name: str = ""
    confirm: bool = False


@router.tool(task="optional")
async def confirm_delete(filename: str, ctx: Context = Depends(mcp_context)) -> str:
    """A task tool that asks one confirmation (the task goes ``input_required``), then answers."""
    answer = await ctx.elicit(f"Delete {filename}?", Confirmation)
    if answer.action == "accept" and answer.data is not None and answer.data.confirm:
        return f"deleted {filename}"
    return f"kept {filename}"


@router.tool(task="optional")
async def multi_input(ctx: Context = Depends(mcp_context)) -> str:
    """A task tool asking two questions at once (two ``inputRequests`` pending together)."""
    first, second = await asyncio.gather(
        ctx.elicit("First name?", NamedConfirmation, key="first"),
        ctx.elicit("Second name?", NamedConfirmation, key="second"),
    )
    names = [a.data.name for a in (first, second) if a.data is not None]
    return f"got {', '.join(names)}"


@router.tool(task="required", task_start="handler")
async def test_tool_with_task(ctx: Context = Depends(mcp_context)) -> str:
    """Asks the user's name as an ``input_required`` round, then becomes a task that greets them."""
    answer = await ctx.elicit("What is your name?", UserName, key="user_name")
    name = answer.data.name if answer.data is not None else "stranger"
    await ctx.start_task()
    await anyio.sleep(0.2)
    return f"Hello, {name}!"


app = FastAPI(title="fastapi-mcp-ctx conformance server")
app.include_router(router)


if __name__ == "__main__":
    import uvicorn

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8931
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")

