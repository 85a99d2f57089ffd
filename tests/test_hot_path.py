"""The per-call fast paths take the same decisions as the slow paths they skip.

Each fast path of the hot path (issue 12) is held here against its slow twin: the duplicate-key
check's token count against the strict re-parse.
"""

from __future__ import annotations

import itertools
import json

import pytest

from fastapi_mcp_ctx._jsonrpc import _each_key_once, parse_message  # pyright: ignore[reportPrivateUsage]
from fastapi_mcp_ctx.errors import InvalidRequestError


def _strict_refuses(body: bytes) -> bool:
    """The slow path's verdict: a key repeated in the message, params, _meta or arguments."""
    repeated = False

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal repeated
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys) and {"jsonrpc", "name", "a", "progressToken"} & set(keys):
            repeated = True
        return dict(items)

    json.loads(body, object_pairs_hook=pairs)
    return repeated


_PIECES = ['"a":1', '"a":2', '"b":"a"', '"name":"a"', '"c":{"a":1}', '"d":["a","a"]']


@pytest.mark.parametrize("combo", list(itertools.permutations(_PIECES, 3)))
def test_duplicate_key_fast_path_agrees_with_the_strict_parse(combo: tuple[str, ...]) -> None:
    arguments = "{" + ",".join(combo) + "}"
    body = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":' + arguments + "}}").encode()
    refused = _strict_refuses(body)
    if refused:
        with pytest.raises(InvalidRequestError, match="Duplicate key"):
            parse_message(body)
    else:
        assert parse_message(body).params["arguments"] == json.loads(arguments)  # type: ignore[union-attr]


def test_the_fast_path_answers_alone_only_when_no_string_repeats() -> None:
    body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}'
    assert _each_key_once(body, json.loads(body))
    again = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":"a"}}}'
    assert not _each_key_once(again, json.loads(again))  # "a" also a value: the strict re-read decides
    assert parse_message(again.encode()).params["arguments"] == {"a": "a"}  # type: ignore[union-attr]
