"""The registration decorators refuse or accept, never ignore (issue 22, point 1).

``@mcp_router.tool`` and ``@mcp_router.prompt`` without parentheses register the function, as in
FastMCP and the official SDK; ``@mcp_router.tool("name")`` names it. ``@mcp_router.resource``
needs its URI and ``@mcp_router.completion`` its argument: used bare they raise ``TypeError`` at
decoration naming the fix, and nothing is registered. A class, a non-callable, a
``staticmethod`` / ``classmethod`` object, a generator function or a non-string name are refused
with ``TypeError``, by every decorator.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from conftest import make_app, make_router
from fastapi import Depends
from pydantic import BaseModel

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx.testing import McpTestClient


async def test_bare_tool_and_prompt_register_the_function(era: str) -> None:
    router = make_router()

    @router.tool
    async def hello(who: str, ctx: Context = Depends(mcp_context)) -> str:
        """Say hello."""
        return f"Hello, {who} ({ctx.era})"

    @router.tool
    def shout(text: str) -> str:
        """A sync tool, bare decorator."""
        return text.upper()

    @router.prompt
    def review(code: str) -> str:
        """Review code."""
        return f"Review this: {code}"

    assert hello.__name__ == "hello" and callable(shout)  # the functions themselves, unchanged
    async with McpTestClient(make_app(router), era=era) as client:  # type: ignore[arg-type]
        tools = await client.list_tools()
        said = await client.call_tool("hello", {"who": "Ada"})
        shouted = await client.call_tool("shout", {"text": "hi"})
        prompts = await client.request("prompts/list", {})
        got = await client.request("prompts/get", {"name": "review", "arguments": {"code": "x = 1"}})
    assert [(t["name"], t["description"]) for t in tools] == [("hello", "Say hello."), ("shout", "A sync tool, bare decorator.")]
    assert said.structured == {"result": f"Hello, Ada ({era})"}
    assert shouted.structured == {"result": "HI"}
    assert [p["name"] for p in prompts.result["prompts"]] == ["review"]
    assert got.result["messages"][0]["content"]["text"] == "Review this: x = 1"


def test_positional_name_and_keywords_of_the_bare_call() -> None:
    router = make_router()

    @router.tool("renamed")
    def original() -> str:
        """Named by a positional string."""
        return "x"

    def titled() -> str:
        """Registered by the bare call with keywords."""
        return "y"

    assert router.tool(titled, title="Titled") is titled

    @router.prompt("prompt_name")
    def prompt_function() -> str:
        return "p"

    listing = {tool["name"]: tool for tool in router.registry.listings()}
    assert set(listing) == {"renamed", "titled"}
    assert listing["titled"]["title"] == "Titled"
    assert callable(original) and callable(prompt_function)
    assert [p["name"] for p in router.features.prompts.listings()] == ["prompt_name"]


def test_bare_resource_names_the_uri_it_needs() -> None:
    router = make_router()
    with pytest.raises(TypeError, match=re.escape('@mcp_router.resource("config://app") above def settings(...)')):

        @router.resource  # pyright: ignore[reportArgumentType]
        def settings() -> str:
            return "{}"

    assert len(router.features.resources) == 0


@pytest.mark.parametrize(
    ("use", "message"),
    [
        (lambda router, f: router.completion(f), "@mcp_router.completion without parentheses"),
        (lambda router, f: router.completion()(f), "@mcp_router.completion() without argument="),
    ],
)
def test_bare_completion_names_the_fix(use: Callable[[McpRouter, Any], Any], message: str) -> None:
    router = make_router()

    def languages(value: str) -> list[str]:
        return ["python"]

    with pytest.raises(TypeError, match=re.escape(message)) as raised:
        use(router, languages)
    assert '@mcp_router.completion(argument="language", prompt="review")' in str(raised.value)


class Tools:
    def method(self) -> str:
        return "m"


def generator() -> Any:
    yield 1


async def async_generator() -> Any:
    yield 1


MISUSES: list[tuple[str, Any, str]] = [
    ("a class", Tools, "decorates a function, not the class Tools"),
    ("a non-callable", 42, "decorates a function, got int 42"),
    ("a staticmethod object", staticmethod(generator), "got a staticmethod object: put"),
    ("a classmethod object", classmethod(generator), "got a classmethod object"),
    ("a generator function", generator, "'generator' is a generator function; a handler returns its result"),
    ("an async generator function", async_generator, "'async_generator' is a generator function"),
]
DECORATORS: list[tuple[str, Callable[[McpRouter], Callable[[Any], Any]]]] = [
    ("@mcp_router.tool", lambda r: r.tool()),
    ("@mcp_router.tool", lambda r: r.tool),
    ("@mcp_router.prompt", lambda r: r.prompt()),
    ("@mcp_router.prompt", lambda r: r.prompt),
    ("@mcp_router.resource", lambda r: r.resource("config://app")),
    ("@mcp_router.completion", lambda r: r.completion(argument="code", prompt="review")),
]


@pytest.mark.parametrize(("kind", "target", "message"), MISUSES, ids=[m[0] for m in MISUSES])
@pytest.mark.parametrize(("what", "decorator"), DECORATORS, ids=["tool()", "tool", "prompt()", "prompt", "resource", "completion"])
def test_what_cannot_serve_a_call_is_refused(
    kind: str, target: Any, message: str, what: str, decorator: Callable[[McpRouter], Callable[[Any], Any]]
) -> None:
    router = make_router()
    if kind == "a non-callable" and decorator(router) in (router.tool, router.prompt):
        message = "name must be a string, got int 42"  # a bare decorator's first argument is a name unless callable
    if what == "@mcp_router.completion":

        @router.prompt()
        def review(code: str) -> str:
            return code

    with pytest.raises(TypeError, match=re.escape(message)) as raised:
        decorator(router)(target)
    assert str(raised.value).startswith(what)
    assert router.registry.listings() == [] and len(router.features.resources) == 0


@pytest.mark.parametrize("name", [123, b"bytes", ["a"]])
def test_a_name_that_is_not_a_string_is_refused(name: Any) -> None:
    router = make_router()
    with pytest.raises(TypeError, match="name must be a string"):
        router.tool(name=name)
    with pytest.raises(TypeError, match="name must be a string"):
        router.prompt(name=name)
    with pytest.raises(TypeError, match="uri must be a string"):
        router.resource(name)


class Echo:
    def __call__(self, text: str) -> str:
        return text


def test_a_bound_method_registers_and_a_callable_object_names_its_method() -> None:
    router = make_router()
    router.add_tool(Tools().method)
    with pytest.raises(TypeError, match=re.escape('got a Echo object: register one of its methods (mcp_router.add_tool(obj.__call__, name="...")')):
        router.add_tool(Echo())
    router.add_tool(Echo().__call__, name="echo")
    assert [tool["name"] for tool in router.registry.listings()] == ["method", "echo"]


# -- annotations that do not resolve --------------------------------------------------------
# This module has `from __future__ import annotations`: every annotation below is a string,
# resolved from the module's globals when the handler is registered.


def test_a_local_type_under_future_annotations_names_the_tool_the_parameter_and_the_fix() -> None:
    router = make_router()

    class Item(BaseModel):  # local: not in the module's globals
        name: str

    async def add_item(item: Item, ctx: Context = Depends(mcp_context)) -> str:
        """Add an item."""
        return item.name

    with pytest.raises(NameError) as raised:
        router.tool()(add_item)
    message = str(raised.value)
    assert message.startswith("tool 'add_item': parameter 'item' ('Item') names 'Item', which the function's module does not define")
    assert "at module level" in message and "from __future__ import annotations" in message
    assert isinstance(raised.value.__cause__, NameError)  # typing's own error stays the cause
    assert router.registry.listings() == []


def test_an_unresolvable_return_annotation_and_a_prompt_are_named_too() -> None:
    router = make_router()

    class Answer(BaseModel):
        text: str

    def ask(question: str) -> list[Answer]:
        """Ask."""
        return []

    with pytest.raises(NameError, match=re.escape("tool 'ask': the return annotation ('list[Answer]') names 'Answer'")):
        router.tool()(ask)
    with pytest.raises(NameError, match=re.escape("prompt 'ask': the return annotation ('list[Answer]') names 'Answer'")):
        router.prompt()(ask)
