"""The README's first server is tested code: it runs as written and serves both eras."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from conftest import Wire, open_client, result_of

README = Path(__file__).resolve().parents[1] / "README.md"


def _first_server_source() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## A first server") :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


async def test_readme_first_server_runs_in_both_eras() -> None:
    namespace: dict[str, Any] = {"__name__": "readme_first_server"}
    exec(compile(_first_server_source(), str(README), "exec"), namespace)  # noqa: S102
    async with open_client(namespace["app"]) as client:
        for era in ("legacy", "modern"):
            wire = Wire(client)
            listing = result_of(await wire.request(era, "tools/list"))
            assert [t["name"] for t in listing["tools"]] == ["add_note"]
            assert listing["tools"][0]["description"] == "Store a note."
            result = result_of(await wire.call_tool(era, "add_note", {"text": "hello"}))
            assert result["isError"] is False
            assert result["structuredContent"]["text"] == "hello"
    assert [n.text for n in namespace["NOTES"]] == ["hello", "hello"]
