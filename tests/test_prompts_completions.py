"""Prompts and completions, both eras: arguments from the signature, message contents,
error codes (known fault B42), completion bounds (B43), dependencies and the Context."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from typing import Annotated, Any

import mcp_types as types
import pytest
from fastapi import Depends, FastAPI
from pydantic import Field

from fastapi_mcp_ctx import (
    Context,
    McpRouter,
    ToolError,
    audio_content,
    embedded_blob_resource,
    embedded_text_resource,
    image_content,
    mcp_context,
    text_content,
)
from fastapi_mcp_ctx._wire.jsonrpc import parse_message
from fastapi_mcp_ctx.errors import InvalidRequestError, McpResponseError
from fastapi_mcp_ctx.testing import McpTestClient

ERAS = ["legacy", "modern"]
COUNTRIES = [f"country-{i:03d}" for i in range(250)]


def make_app() -> tuple[FastAPI, McpRouter, list[Any]]:
    seen: list[Any] = []
    router = McpRouter()

    def db() -> Iterator[str]:
        seen.append("open")
        yield "conn"
        seen.append("close")

    @router.prompt(title="Greeting")
    def greet(who: Annotated[str, Field(description="Whom to greet")], times: int = 1) -> str:
        """Greets someone."""
        return " ".join([f"Hello {who}!"] * times)

    @router.prompt()
    def rich(conn: str = Depends(db), ctx: Context = Depends(mcp_context)) -> list[Any]:
        """Every content kind."""
        seen.append((conn, ctx.operation, ctx.method))
        return [
            "plain text",
            image_content(b"\x89PNG\r\n", "image/png"),
            audio_content(b"RIFF\x00", "audio/wav"),
            embedded_text_resource("doc://a", "embedded text"),
            embedded_blob_resource("doc://b", bytes(range(256)), "application/octet-stream"),
            types.PromptMessage(role="assistant", content=text_content("I am the assistant")),
            {"role": "user", "content": {"type": "text", "text": "from a dict"}},
        ]

    @router.prompt()
    def whole() -> types.GetPromptResult:
        """Unused: the result's own description wins."""
        return types.GetPromptResult(description="own", messages=[types.PromptMessage(role="user", content=text_content("hi"))])

    @router.prompt()
    def crash() -> str:
        raise RuntimeError("secret stack detail")

    @router.prompt()
    def refuse(topic: str) -> str:
        raise ToolError(f"No prompt about {topic}", code=-32602, reason="unknown_topic", recovery_hint="Pick a listed topic.")

    @router.prompt()
    def wrong() -> int:
        return 5

    @router.prompt(complete={"country": lambda value: [c for c in COUNTRIES if c.startswith(value)]})
    def pick_country(country: str) -> str:
        return country

    @router.completion(prompt="pick_country", argument="city")
    async def cities(value: str, arguments: dict[str, str], conn: str = Depends(db)) -> list[str]:
        seen.append(("cities", arguments, conn))
        return [f"{arguments.get('country', '?')}/{value}{i}" for i in range(3)]

    @router.resource("maps://{country}/{city}", complete={"city": lambda value, arguments: [f"{arguments['country']}-{value}"]})
    def city_map(country: str, city: str) -> str:
        return f"{country}/{city}"

    @router.completion(prompt="greet", argument="who")
    def exactly(value: str) -> list[str]:
        return [str(i) for i in range(100 if value == "100" else 101 if value == "101" else 10)]

    @router.completion(prompt="greet", argument="times")
    def liar() -> types.Completion:
        return types.Completion(values=[str(i) for i in range(10)], total=3)

    app = FastAPI()
    app.include_router(router)
    return app, router, seen


async def get(client: McpTestClient, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return (await client.request("prompts/get", params)).result


async def complete(client: McpTestClient, ref: dict[str, str], name: str, value: str, context: dict[str, str] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if context is not None:
        params["context"] = {"arguments": context}
    return (await client.request("completion/complete", params)).result["completion"]


@pytest.mark.parametrize("era", ERAS)
async def test_prompt_listing_from_the_signature(era: str) -> None:
    app, _, _ = make_app()
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        prompts = {p["name"]: p for p in (await client.request("prompts/list", {})).result["prompts"]}
        if era == "legacy":
            caps = client.initialize_result["capabilities"]  # type: ignore[index]
            assert caps["prompts"] == {"listChanged": False} and caps["completions"] == {}
    assert prompts["greet"] == {
        "name": "greet",
        "title": "Greeting",
        "description": "Greets someone.",
        "arguments": [{"name": "who", "description": "Whom to greet", "required": True}, {"name": "times", "required": False}],
    }
    assert "arguments" not in prompts["rich"]  # dependencies are not arguments


@pytest.mark.parametrize("era", ERAS)
async def test_prompt_get_text_and_typed_arguments(era: str) -> None:
    app, _, _ = make_app()
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        result = await get(client, "greet", {"who": "Ada", "times": "2"})
    assert result["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello Ada! Hello Ada!"}}]
    assert result["description"] == "Greets someone."


@pytest.mark.parametrize("era", ERAS)
async def test_prompt_messages_carry_every_content_kind_encoded_once(era: str) -> None:
    app, _, seen = make_app()
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        messages = (await get(client, "rich"))["messages"]
        whole = await get(client, "whole")
    assert seen == ["open", ("conn", "prompts/get:rich", "prompts/get"), "close"]
    kinds = [(m["role"], m["content"]["type"]) for m in messages]
    assert kinds == [("user", "text"), ("user", "image"), ("user", "audio"), ("user", "resource"), ("user", "resource"), ("assistant", "text"), ("user", "text")]
    assert base64.b64decode(messages[1]["content"]["data"], validate=True) == b"\x89PNG\r\n"
    assert base64.b64decode(messages[2]["content"]["data"], validate=True) == b"RIFF\x00"
    assert messages[3]["content"]["resource"] == {"uri": "doc://a", "mimeType": "text/plain", "text": "embedded text"}
    blob = messages[4]["content"]["resource"]
    assert "text" not in blob and base64.b64decode(blob["blob"], validate=True) == bytes(range(256))
    assert whole == {"description": "own", "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], **{k: whole[k] for k in whole if k in ("resultType", "_meta")}}


@pytest.mark.parametrize("era", ERAS)
async def test_prompt_errors_are_32602_and_crashes_32603(era: str, caplog: pytest.LogCaptureFixture) -> None:
    app, _, _ = make_app()
    status = 400 if era == "modern" else 200
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        for name, arguments in (("ghost", None), ("greet", {}), ("greet", {"who": 5}), ("greet", {"who": "a", "times": "x"}), ("greet", ["who"])):
            with pytest.raises(McpResponseError) as caught:
                await get(client, name, arguments)  # type: ignore[arg-type]
            assert (caught.value.code, caught.value.http_status) == (-32602, status), (name, arguments)
        with pytest.raises(McpResponseError) as missing:
            await get(client, "greet", {})
        assert missing.value.data["missing"] == ["who"]
        with pytest.raises(McpResponseError) as refused:
            await get(client, "refuse", {"topic": "x"})
        assert refused.value.code == -32602 and refused.value.data["reason"] == "unknown_topic"
        assert refused.value.data["recovery"] == {"hint": "Pick a listed topic."}
        with caplog.at_level(logging.ERROR, logger="fastapi_mcp_ctx"):
            for name in ("crash", "wrong"):
                with pytest.raises(McpResponseError) as crashed:
                    await get(client, name)
                assert crashed.value.code == -32603
                assert "secret" not in json.dumps([crashed.value.message, crashed.value.data])
    assert any("secret stack detail" in (r.exc_text or "") for r in caplog.records)


@pytest.mark.parametrize("era", ERAS)
async def test_completions_are_bounded_and_truthful(era: str) -> None:
    app, _, _ = make_app()
    prompt = {"type": "ref/prompt", "name": "pick_country"}
    greet = {"type": "ref/prompt", "name": "greet"}
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        long = await complete(client, prompt, "country", "")
        assert len(long["values"]) == 100 and long["values"] == COUNTRIES[:100]
        assert long["hasMore"] is True and long["total"] == 250
        assert await complete(client, prompt, "country", "country-24") == {"values": [f"country-24{i}" for i in range(10)]}
        hundred = await complete(client, greet, "who", "100")
        assert len(hundred["values"]) == 100 and "hasMore" not in hundred and "total" not in hundred
        over = await complete(client, greet, "who", "101")
        assert len(over["values"]) == 100 and over["hasMore"] is True and over["total"] == 101
        liar = await complete(client, greet, "times", "")
        assert liar["total"] >= len(liar["values"]) == 10
        assert await complete(client, prompt, "no_such_argument", "x") == {"values": []}


@pytest.mark.parametrize("era", ERAS)
async def test_completions_get_context_arguments_and_dependencies(era: str) -> None:
    app, _, seen = make_app()
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        cities = await complete(client, {"type": "ref/prompt", "name": "pick_country"}, "city", "Par", {"country": "fr"})
        resource = await complete(client, {"type": "ref/resource", "uri": "maps://{country}/{city}"}, "city", "ly", {"country": "fr"})
    assert cities == {"values": ["fr/Par0", "fr/Par1", "fr/Par2"]}
    assert resource == {"values": ["fr-ly"]}
    assert seen == ["open", ("cities", {"country": "fr"}, "conn"), "close"]


@pytest.mark.parametrize("era", ERAS)
async def test_completion_request_errors(era: str) -> None:
    app, _, _ = make_app()
    async with McpTestClient(app, era=era) as client:  # type: ignore[arg-type]
        for params in (
            {"ref": {"type": "ref/prompt", "name": "ghost"}, "argument": {"name": "a", "value": ""}},
            {"ref": {"type": "ref/resource", "uri": "maps://nothing/{x}"}, "argument": {"name": "x", "value": ""}},
            {"ref": {"type": "ref/other", "name": "greet"}, "argument": {"name": "who", "value": ""}},
            {"ref": {"type": "ref/prompt", "name": "greet"}},
            {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": 3}},
            {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": ""}, "context": {"arguments": {"a": 1}}},
        ):
            with pytest.raises(McpResponseError) as caught:
                await client.request("completion/complete", params)
            assert caught.value.code == -32602, params


def test_prompt_and_completer_registration_errors() -> None:
    router = McpRouter()
    with pytest.raises(ValueError, match="invalid prompt name"):
        router.prompt("bad name")(lambda: "x")
    with pytest.raises(ValueError, match="not its arguments"):
        router.prompt("p", complete={"nope": lambda: []})(lambda who: who)
    with pytest.raises(ValueError, match="exactly one"):
        router.completion(argument="a")
    with pytest.raises(ValueError, match="value, argument, arguments"):
        router.completion(prompt="p", argument="a")(lambda prefix: [])
    router.prompt("dup")(lambda: "x")
    with pytest.raises(ValueError, match="already registered"):
        router.prompt("dup")(lambda: "y")


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        # clientInfo.name beside params.name: the same key twice in the body, no duplicate in an object
        (b'{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet","arguments":{"who":"name"},'
         b'"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}', False),
        (b'{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet","name":"ghost",'
         b'"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}', True),
        (b'{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet","arguments":{"who":"a","who":"b"},'
         b'"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}', True),
        (b'{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet","arguments":{"who":"a"},'
         b'"_meta":{"k":{"name":"c","name":"d"}}}}', False),  # deeper objects are the schema's to judge
    ],
)
def test_repeated_keys_in_a_2026_body_with_client_info(body: bytes, refused: bool) -> None:
    if refused:
        with pytest.raises(InvalidRequestError, match="Duplicate key"):
            parse_message(body)
    else:
        parse_message(body)
