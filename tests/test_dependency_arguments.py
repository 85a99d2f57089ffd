"""The tool's arguments are the request's parameters (DESIGN decision 13, issue 19), and every
parameter is classified at registration (issue 22), in both eras.

A plain parameter anywhere in a tool's dependency graph (the handler, a dependency, a
sub-dependency, ``McpRouter(dependencies=[...])``) is an argument: in ``inputSchema``, validated
per declarer with its own annotation and default, one type per name (a conflict refused at
registration), ``app.dependency_overrides`` filled by name; ``Query()`` still reads HTTP.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from conftest import Wire, make_app, make_router, mcp_settings, open_client, result_of, tool_text
from fastapi import Body, Depends, FastAPI, Form, Path, Query, Security
from fastapi.security import SecurityScopes
from pydantic import BaseModel, Field

from fastapi_mcp_ctx import Context, McpContext, McpRouter

SEEN: list[Any] = []


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    SEEN.clear()
    yield


async def listed(app: FastAPI, era: str, name: str) -> dict[str, Any]:
    async with open_client(app) as client:
        response = await Wire(client).request(era, "tools/list", {})
    return next(t for t in result_of(response)["tools"] if t["name"] == name)


async def call(app: FastAPI, era: str, name: str, arguments: dict[str, Any], path: str = "/mcp") -> dict[str, Any]:
    async with open_client(app) as client:
        return result_of(await Wire(client, path).call_tool(era, name, arguments))


# -- flattening ---------------------------------------------------------------------------------


def tenant_of(tenant: Annotated[str, Field(description="The tenant", min_length=1)]) -> str:
    SEEN.append(("tenant", tenant))
    return tenant


def owner_of(owner_id: int, tenant: str = Depends(tenant_of)) -> str:
    return f"{tenant}/{owner_id}"


async def test_a_sub_dependency_argument_is_in_the_schema_and_gets_the_value(era: str) -> None:
    router = make_router()

    @router.tool()
    async def whose(note: str, owner: str = Depends(owner_of)) -> str:
        """Whose note."""
        return f"{owner}:{note}"

    app = make_app(router)
    schema = (await listed(app, era, "whose"))["inputSchema"]
    assert list(schema["properties"]) == ["note", "owner_id", "tenant"]
    assert schema["properties"]["tenant"] == {"description": "The tenant", "minLength": 1, "title": "Tenant", "type": "string"}
    assert schema["properties"]["owner_id"]["type"] == "integer"
    assert sorted(schema["required"]) == ["note", "owner_id", "tenant"]
    result = await call(app, era, "whose", {"note": "n", "owner_id": 7, "tenant": "acme"})
    assert tool_text(result) == "acme/7:n"
    bad = await call(app, era, "whose", {"note": "n", "owner_id": 7, "tenant": ""})
    assert bad["isError"] is True and "tenant" in tool_text(bad)


def owner_label(owner: str = Depends(owner_of)) -> str:
    """No argument of its own: its sub-dependencies take them."""
    return f"[{owner}]"


async def test_a_dependency_without_arguments_above_one_with_arguments(era: str) -> None:
    router = make_router()

    @router.tool()
    async def label(text: str = Depends(owner_label)) -> str:
        """Label."""
        return text

    app = make_app(router)
    assert sorted((await listed(app, era, "label"))["inputSchema"]["required"]) == ["owner_id", "tenant"]
    assert tool_text(await call(app, era, "label", {"owner_id": 3, "tenant": "t"})) == "[t/3]"


async def test_router_dependencies_declare_arguments_of_every_tool(era: str) -> None:
    router = McpRouter(dependencies=[Depends(tenant_of)], settings=mcp_settings())

    @router.tool()
    async def ping() -> str:
        """Ping."""
        return "pong"

    app = make_app(router)
    schema = (await listed(app, era, "ping"))["inputSchema"]
    assert schema["required"] == ["tenant"]
    assert tool_text(await call(app, era, "ping", {"tenant": "acme"})) == "pong"
    assert SEEN == [("tenant", "acme")]
    missing = await call(app, era, "ping", {})
    assert missing["isError"] is True and "tenant: Field required" in tool_text(missing)


class Color(str, Enum):
    RED = "red"
    BLUE = "blue"


class Filter(BaseModel):
    color: Color
    limit: int = 10


def filtered(query: Filter, strict: bool = False) -> str:
    return f"{query.color.value}:{query.limit}:{strict}"


def app_with(dependency: Any, name: str) -> FastAPI:
    """An app with one tool ``name`` returning what ``dependency`` gave it."""
    router = make_router()

    async def tool(value: str = Depends(dependency)) -> str:
        return value

    router.add_tool(tool, name=name, description=f"{name} through a dependency")
    return make_app(router)


async def test_a_pydantic_model_argument_declared_by_a_dependency(era: str) -> None:
    app = app_with(filtered, "search")
    schema = (await listed(app, era, "search"))["inputSchema"]
    assert schema["properties"]["query"] == {"$ref": "#/$defs/Filter"}
    assert schema["$defs"]["Color"]["enum"] == ["red", "blue"]
    assert schema["properties"]["strict"] == {"default": False, "title": "Strict", "type": "boolean"}
    assert schema["required"] == ["query"]
    assert tool_text(await call(app, era, "search", {"query": {"color": "blue"}})) == "blue:10:False"
    wrong = await call(app, era, "search", {"query": {"color": "green"}})
    assert wrong["isError"] is True and "query.color" in tool_text(wrong)


class Pager:
    """A class as a dependency (FastAPI calls it): its ``__init__`` parameters are arguments."""

    def __init__(self, page: int = 1, size: Annotated[int, Field(le=50)] = 10) -> None:
        self.page, self.size = page, size


def scoped(scopes: SecurityScopes, project: str) -> str:
    return f"{project}:{','.join(scopes.scopes)}"


async def test_class_dependencies_and_security_markers_keep_their_form(era: str) -> None:
    router = make_router()

    @router.tool()
    async def browse(pager: Annotated[Pager, Depends()], who: str = Security(scoped, scopes=["items:read"])) -> str:
        """Browse."""
        return f"{pager.page}/{pager.size} {who}"

    app = make_app(router)
    schema = (await listed(app, era, "browse"))["inputSchema"]
    assert list(schema["properties"]) == ["page", "size", "project"] and schema["required"] == ["project"]
    assert tool_text(await call(app, era, "browse", {"project": "p1", "size": 20})) == "1/20 p1:items:read"
    too_big = await call(app, era, "browse", {"project": "p1", "size": 51})
    assert too_big["isError"] is True and "size" in tool_text(too_big)


# -- values -------------------------------------------------------------------------------------


def page_size(limit: int = 20, tag: str | None = "all") -> tuple[int, str | None]:
    return limit, tag


async def test_each_declarer_gets_its_own_default_and_an_explicit_null(era: str) -> None:
    router = make_router()

    @router.tool()
    async def page(limit: int = 10, size: tuple[int, str | None] = Depends(page_size)) -> str:
        """A page."""
        return f"{limit}|{size[0]}|{size[1]}"

    app = make_app(router)
    schema = (await listed(app, era, "page"))["inputSchema"]
    assert schema["properties"]["limit"]["default"] == 10  # the first declarer's, listed once
    assert "required" not in schema or schema["required"] == []
    assert tool_text(await call(app, era, "page", {})) == "10|20|all"
    assert tool_text(await call(app, era, "page", {"limit": 3})) == "3|3|all"
    assert tool_text(await call(app, era, "page", {"tag": None})) == "10|20|None"
    strings = await call(app, era, "page", {"limit": "3"})  # JSON types, not query-string strings
    assert strings["isError"] is True and "limit" in tool_text(strings)


def needs_limit(limit: int) -> int:
    return limit


async def test_required_when_any_declarer_requires_it(era: str) -> None:
    router = make_router()

    @router.tool()
    async def pick(limit: int | None = None, needed: int = Depends(needs_limit)) -> str:
        """Pick."""
        return f"{limit}|{needed}"

    app = make_app(router)
    schema = (await listed(app, era, "pick"))["inputSchema"]
    assert schema["required"] == ["limit"] and schema["properties"]["limit"]["type"] == "integer"
    assert tool_text(await call(app, era, "pick", {"limit": 4})) == "4|4"
    missing = await call(app, era, "pick", {})
    assert missing["isError"] is True and "limit: Field required" in tool_text(missing)


COUNT = {"loads": 0}


def load(item_id: int) -> str:
    COUNT["loads"] += 1
    return f"item{item_id}"


def audit(item_id: int, item: str = Depends(load)) -> str:
    return f"audit {item_id} {item}"


async def test_one_value_for_every_declarer_and_the_dependency_cache(era: str) -> None:
    COUNT["loads"] = 0
    router = make_router()

    @router.tool()
    async def show(item_id: int, item: str = Depends(load), trail: str = Depends(audit)) -> str:
        """Show."""
        return f"{item_id} {item} {trail}"

    result = await call(make_app(router), era, "show", {"item_id": 5})
    assert tool_text(result) == "5 item5 audit 5 item5"
    assert COUNT["loads"] == 1


def opened(item_id: int) -> Iterator[str]:
    SEEN.append(f"open {item_id}")
    try:
        yield f"session {item_id}"
    except ValueError:
        SEEN.append("rollback")
        raise
    finally:
        SEEN.append("close")


async def traced(trace_id: str) -> AsyncIterator[str]:
    SEEN.append(f"start {trace_id}")
    try:
        yield trace_id
    finally:
        SEEN.append("end")


async def test_a_yield_dependency_with_an_argument_tears_down_after_the_result(era: str) -> None:
    router = make_router()

    @router.tool()
    def use(fail: bool = False, session: str = Depends(opened), trace: str = Depends(traced)) -> str:
        """Use."""
        SEEN.append("tool")
        if fail:
            raise ValueError("boom")
        return f"{session} {trace}"

    app = make_app(router)
    assert tool_text(await call(app, era, "use", {"item_id": 3, "trace_id": "t"})) == "session 3 t"
    assert SEEN == ["open 3", "start t", "tool", "end", "close"]
    SEEN.clear()
    failed = await call(app, era, "use", {"item_id": 3, "trace_id": "t", "fail": True})
    assert failed["isError"] is True
    assert SEEN == ["open 3", "start t", "tool", "end", "rollback", "close"]


def named(name: str = Body(description="Spelled out")) -> str:
    return name.upper()


async def test_a_body_marker_says_argument_explicitly(era: str) -> None:
    app = app_with(named, "shout")
    schema = (await listed(app, era, "shout"))["inputSchema"]
    assert schema["properties"]["name"]["description"] == "Spelled out" and schema["required"] == ["name"]
    assert tool_text(await call(app, era, "shout", {"name": "hi"})) == "HI"


def paged(page: int = Query(1)) -> int:
    return page


async def test_query_still_reads_the_http_query_string(era: str) -> None:
    router = make_router()

    @router.tool()
    async def where(page: int = 0, http_page: int = Depends(paged)) -> str:
        """Where."""
        return f"{page}|{http_page}"

    app = make_app(router)
    schema = (await listed(app, era, "where"))["inputSchema"]
    assert list(schema["properties"]) == ["page"]  # the argument, not the query parameter
    assert tool_text(await call(app, era, "where", {"page": 9}, path="/mcp?page=3")) == "9|3"
    assert tool_text(await call(app, era, "where", {"page": 9})) == "9|1"


# -- registration ---------------------------------------------------------------------------------


def load_as_text(item_id: str) -> str:
    return item_id


def test_one_name_with_two_types_is_refused_naming_both() -> None:
    router = make_router()
    with pytest.raises(ValueError, match="argument 'item_id' is declared int by tool 'clash' and str by dependency 'load_as_text'"):

        @router.tool()
        async def clash(item_id: int, item: str = Depends(load_as_text)) -> str:  # pyright: ignore[reportUnusedFunction]
            """Clash."""
            return item


class Session:
    """A database session: no JSON Schema."""


def test_a_parameter_without_a_json_schema_is_refused_with_the_fix() -> None:
    router = make_router()
    with pytest.raises(ValueError) as caught:

        @router.tool()
        async def save(text: str, db: Session) -> str:  # pyright: ignore[reportUnusedFunction]
            """Save."""
            return text

    message = str(caught.value)
    assert "tool 'save'" in message and "parameter 'db' of type Session" in message
    assert "`db: Session = Depends(...)`" in message and "`db: Annotated[Session, Depends(...)]`" in message
    assert "pydantic type" in message

    def with_buffer(buffer: io.BytesIO) -> None: ...

    with pytest.raises(ValueError, match=r"^dependency 'with_buffer' of tool 'load': parameter 'buffer' of type BytesIO is neither"):

        @router.tool()
        async def load(x: None = Depends(with_buffer)) -> str:  # pyright: ignore[reportUnusedFunction]
            """Load."""
            return ""


def context_without_marker(ctx: Context) -> str:
    return ctx.request_id.__class__.__name__


def test_a_context_in_a_dependency_without_depends_is_refused_naming_it() -> None:
    router = make_router()
    with pytest.raises(ValueError) as caught:

        @router.tool()
        async def who(name: str = Depends(context_without_marker)) -> str:  # pyright: ignore[reportUnusedFunction]
            """Who."""
            return name

    message = str(caught.value)
    assert "dependency 'context_without_marker' of tool 'who'" in message
    assert "`ctx: Context = Depends(mcp_context)`" in message and "`ctx: McpContext`" in message


def test_path_outside_a_resource_is_refused() -> None:
    router = make_router()
    with pytest.raises(ValueError, match="Path\\(\\), which names a resource template variable"):

        @router.tool()
        async def tool_with_path(item_id: int = Path()) -> int:  # pyright: ignore[reportUnusedFunction]
            """Path."""
            return item_id


def form_field(name: str = Form()) -> str:
    return name


def test_form_and_file_are_refused_an_mcp_call_has_no_form_body() -> None:
    router = make_router()
    with pytest.raises(ValueError, match=r"dependency 'form_field' of tool 'upload': parameter 'name' is declared Form\(\), but an MCP call has no form body"):

        @router.tool()
        async def upload(name: str = Depends(form_field)) -> str:  # pyright: ignore[reportUnusedFunction]
            """Upload."""
            return name


def request_of(ctx: McpContext) -> str:
    return str(ctx.request_id)


async def test_mcp_context_alias_in_handlers_and_dependencies(era: str) -> None:
    router = make_router()

    @router.tool()
    async def ids(ctx: McpContext, from_dep: str = Depends(request_of)) -> bool:
        """Ids."""
        return str(ctx.request_id) == from_dep

    app = make_app(router)
    assert (await listed(app, era, "ids"))["inputSchema"]["properties"] == {}
    assert tool_text(await call(app, era, "ids", {})) == "true"


# -- overrides ------------------------------------------------------------------------------------


def real_owner(owner_id: int) -> str:
    return f"real {owner_id}"


def owner_app() -> FastAPI:
    router = make_router()

    @router.tool()
    async def owner(note: str, who: str = Depends(real_owner)) -> str:
        """Owner."""
        return f"{who}:{note}"

    return make_app(router)


async def test_an_override_reads_arguments_by_name(era: str) -> None:
    app = owner_app()

    def fake_owner(owner_id: int, note: str, unknown: str = "dflt") -> str:
        return f"fake {owner_id} {note} {unknown}"

    app.dependency_overrides[real_owner] = fake_owner
    result = await call(app, era, "owner", {"note": "n", "owner_id": 2, "unknown": "ignored"})
    assert tool_text(result) == "fake 2 n dflt:n"
    wrong = await call(app, era, "owner", {"note": "n", "owner_id": "two"})
    assert wrong["isError"] is True and "owner_id" in tool_text(wrong)


async def test_an_override_naming_no_argument_is_a_clear_call_time_error(era: str) -> None:
    app = owner_app()

    def fake_owner(account: str) -> str:
        return account

    app.dependency_overrides[real_owner] = fake_owner
    result = await call(app, era, "owner", {"note": "n", "owner_id": 2})
    assert result["isError"] is True
    text = tool_text(result)
    assert "dependency override" in text and "override 'fake_owner'" in text
    assert "of 'real_owner' takes 'account', which is no argument of it" in text
    assert "add 'account' to 'real_owner''s signature" in text and "give it a default in the override" in text


async def test_an_override_of_an_argument_free_dependency_reads_arguments_too(era: str) -> None:
    def current_user() -> str:
        return "real"

    router = make_router()

    @router.tool()
    async def greet(name: str, user: str = Depends(current_user)) -> str:
        """Greet."""
        return f"{user}>{name}"

    app = make_app(router)
    assert router.registry.get("greet").plain_arguments  # validated from the parsed dict: the override still reads them
    app.dependency_overrides[current_user] = lambda name: f"fake-{name}"
    assert tool_text(await call(app, era, "greet", {"name": "ada"})) == "fake-ada>ada"


# -- resources and prompts ------------------------------------------------------------------------


def user_of(user_id: int = Path(description="The user")) -> str:
    return f"user{user_id}"


def greeting_of(name: str, punctuation: Literal["!", "?"] = "!") -> str:
    return f"Hello {name}{punctuation}"


async def test_resources_and_prompts_take_arguments_from_dependencies(era: str) -> None:
    router = make_router()

    @router.resource("users://{user_id}/profile")
    async def profile(user: str = Depends(user_of)) -> str:
        return user

    @router.prompt()
    async def greet(text: str = Depends(greeting_of)) -> str:
        """Greet someone."""
        return text

    async with open_client(make_app(router)) as client:
        wire = Wire(client)
        read = result_of(await wire.request(era, "resources/read", {"uri": "users://42/profile"}))
        assert read["contents"][0]["text"] == "user42"
        prompts = result_of(await wire.request(era, "prompts/list", {}))["prompts"]
        assert prompts[0]["arguments"] == [{"name": "name", "required": True}, {"name": "punctuation", "required": False}]
        got = result_of(await wire.request(era, "prompts/get", {"name": "greet", "arguments": {"name": "Ada", "punctuation": "?"}}))
        assert got["messages"][0]["content"]["text"] == "Hello Ada?"
        bad = await wire.request(era, "prompts/get", {"name": "greet", "arguments": {"name": "Ada", "punctuation": "."}})
        assert bad.json()["error"]["code"] == -32602


def test_a_resource_dependency_parameter_that_is_no_variable_needs_a_default() -> None:
    def extra(user_id: int, missing: str) -> str:
        return missing

    router = make_router()
    with pytest.raises(ValueError, match=r"parameters \['missing'\] need a default"):

        @router.resource("users://{user_id}")
        async def needs(user: str = Depends(extra)) -> str:  # pyright: ignore[reportUnusedFunction]
            return user


# -- McpTestClient ----------------------------------------------------------------------------------


@pytest.mark.parametrize("test_era", ["legacy", "modern"])
async def test_mcp_test_client_on_the_items_example(test_era: Literal["legacy", "modern"]) -> None:
    pytest.importorskip("asgi_lifespan")  # the lowest-FastAPI venv runs the rest without the testing extra
    from examples import items
    from fastapi_mcp_ctx.testing import McpTestClient

    items.ITEMS[1] = items.Item(id=1, name="hammer")
    async with McpTestClient(items.app, era=test_era) as client:
        tool = next(t for t in await client.list_tools() if t["name"] == "rename_item")
        assert tool["inputSchema"]["properties"]["item_id"]["type"] == "integer"
        assert sorted(tool["inputSchema"]["required"]) == ["item_id", "new_name"]
        renamed = await client.call_tool("rename_item", {"item_id": 1, "new_name": "mallet"})
        assert renamed.structured == {"id": 1, "name": "mallet"}
        absent = await client.call_tool("rename_item", {"item_id": 9, "new_name": "x"})
        assert absent.is_error and absent.text == "No item 9"
    assert items.ITEMS[1].name == "mallet"



# -- the guide's example ----------------------------------------------------------------------------


async def test_the_guides_example_flattens_and_keeps_identity_out_of_the_arguments(era: str) -> None:
    from conftest import guide_example

    example = guide_example("## Dependencies take the tool's arguments")
    router: McpRouter = example["mcp_router"]

    @router.tool()
    async def wrong_plan(account: dict[str, str] = Depends(example["account_from_argument"])) -> str:
        """The wrong way: the identity is an argument."""
        return account["plan"]

    app: FastAPI = example["app"]
    orders = (await listed(app, era, "list_orders"))["inputSchema"]
    assert list(orders["properties"]) == ["status", "limit", "cursor"]
    assert orders["properties"]["limit"] == {"default": 20, "description": "Items per page", "maximum": 100, "minimum": 1, "title": "Limit", "type": "integer"}
    assert (await listed(app, era, "my_plan"))["inputSchema"]["properties"] == {}
    assert (await listed(app, era, "wrong_plan"))["inputSchema"]["required"] == ["user"]  # the client picks it
    result = await call(app, era, "list_orders", {"limit": 5})
    assert result["structuredContent"] == {"status": "open", "limit": 5, "cursor": None}
    too_big = await call(app, era, "list_orders", {"limit": 500})
    assert too_big["isError"] is True and "limit" in tool_text(too_big)
