"""A tool whose arguments are ``int``, ``str`` or ``bool`` (``ToolDef.plain_arguments``) validates
the parsed ``arguments`` directly instead of encoding them for the strict JSON validator: the
same results, errors included, as the general path; other tools keep the general path."""

from __future__ import annotations

import datetime
from typing import Annotated, Any

import pytest
from conftest import Wire, make_app, make_router, open_client, result_of
from fastapi import Depends, FastAPI
from pydantic import BaseModel, Field, ValidationError
from pydantic_core import from_json, to_json

from fastapi_mcp_ctx._handlers.argument_fields import validates_alike

VALUES: list[Any] = [
    0, 1, -7, 2**63, 10**80, -(10**400), 1.0, 2.5, -0.0, 1e308, True, False, None,
    "", "5", "true", "abc", "abcdefgh", "é", "\u2028", "2020-01-01", [], [1], {}, {"a": 1},
]  # fmt: skip
"""Every kind of JSON value: the integer beyond a double's range (``-10**300``) included."""


class Nested(BaseModel):
    x: int


def _tool_router() -> Any:
    router = make_router()

    @router.tool()
    async def plain(
        a: int,
        s: str = "x",
        flag: bool | None = None,
        low: Annotated[int, Field(ge=3, le=10**30)] = 4,
        word: Annotated[str, Field(pattern="^a", max_length=5)] = "a",
    ) -> str:
        """Every field kind the plain path takes."""
        return repr((a, s, flag, low, word))

    @router.tool()
    async def general(a: int, when: datetime.date | None = None, ratio: float = 0.5) -> str:
        """A date and a float: the general path."""
        return repr((a, when, ratio))

    return router


def _outcome(make: Any, value: Any) -> Any:
    try:
        return ("ok", make(value).model_dump())
    except ValidationError as exc:
        return ("error", [(e["type"], e["loc"], e["msg"]) for e in exc.errors(include_url=False, include_context=False)])


def test_plain_fields_validate_python_values_as_their_json_text() -> None:
    router = _tool_router()
    model = router.registry.get("plain").arguments_model
    validator = model.__pydantic_validator__
    assert validates_alike(model)
    for field in ("a", "s", "flag", "low", "word"):
        for value in VALUES:
            raw = to_json({"a": 1, field: value})
            from_text = _outcome(lambda r: validator.validate_json(r, strict=True), raw)
            from_parsed = _outcome(lambda r: validator.validate_python(from_json(r), strict=True), raw)
            assert from_parsed == from_text, (field, value)


def test_which_tools_take_the_plain_path() -> None:
    router = _tool_router()
    assert router.registry.get("plain").plain_arguments
    assert not router.registry.get("general").plain_arguments  # a float or a date: the general path

    def dependency(owner: int) -> int:
        return owner

    @router.tool()
    async def aliased(a: Annotated[int, Field(alias="A")]) -> str:
        """An alias."""
        return str(a)

    @router.tool()
    async def lax(a: Annotated[int, Field(strict=False)]) -> str:
        """A field that is not strict."""
        return str(a)

    @router.tool()
    async def nested(n: Nested) -> str:
        """A model argument."""
        return str(n)

    @router.tool()
    async def declared(a: int, owner: int = Depends(dependency)) -> str:
        """A dependency declares an argument: not flat."""
        return str(a + owner)

    @router.tool()
    async def no_arguments() -> str:
        """No argument at all."""
        return "none"

    for name in ("aliased", "lax", "nested", "declared"):
        assert not router.registry.get(name).plain_arguments, name
    assert router.registry.get("no_arguments").plain_arguments


async def _call_all(app: FastAPI, era: str, name: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    async with open_client(app) as client:
        wire = Wire(client)
        return [result_of(await wire.call_tool(era, name, arguments)) for arguments in cases]


async def test_the_plain_path_answers_as_the_general_path(era: str) -> None:
    router = _tool_router()
    app = make_app(router)
    cases = [{"a": value} for value in VALUES] + [{"a": 1, "low": value} for value in VALUES]
    cases += [{"a": 1, "s": value, "word": value} for value in VALUES] + [{"a": 1, "flag": v} for v in VALUES]
    cases += [{}, {"s": "no a"}, {"a": 1, "unknown": [1, {"x": None}]}]
    tool = router.registry.get("plain")
    plain = await _call_all(app, era, "plain", cases)
    tool.plain_arguments = False  # the general path for the same tool
    general = await _call_all(app, era, "plain", cases)
    assert plain == general
    assert plain[0]["content"] == [{"type": "text", "text": "(0, 'x', None, 4, 'a')"}]
    assert sum(r["isError"] for r in plain) > 20  # the refusals were compared too


@pytest.mark.parametrize("arguments", [{"a": 3, "when": "2024-02-29", "ratio": 2}, {"a": 3, "ratio": 10**400}, {"a": "3"}])
async def test_the_general_path_still_runs_elsewhere(era: str, arguments: dict[str, Any]) -> None:
    app = make_app(_tool_router())
    [result] = await _call_all(app, era, "general", [arguments])
    text = result["content"][0]["text"]
    if "when" in arguments:  # JSON-mode: the ISO date parsed from its string, the integer a float
        assert text == "(3, datetime.date(2024, 2, 29), 2.0)"
    elif "ratio" in arguments:  # an integer beyond a double is out of range, not refused as no number
        assert result["isError"] and "number out of range" in text
    else:  # "3" is no integer
        assert result["isError"] and "Input should be a valid integer" in text
