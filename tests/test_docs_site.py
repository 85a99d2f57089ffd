"""The docs site's hooks (scripts/mkdocs_hooks.py): the README as the front page with its links
made the site's, links out of docs/ turned into code, fenced code never touched. The strict
build itself (every link, anchor and API reference) runs in scripts/test.sh after pyright.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import yaml
from test_docs import FENCE

REPO = Path(__file__).resolve().parents[1]


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", REPO / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_front_page_is_the_readme_with_site_links() -> None:
    hooks = _hooks()
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    page = hooks.on_page_markdown(index, page=None)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert page.startswith("# fastapi-mcp-ctx\n")
    assert "](docs/" not in page and "[docs/guide.md](guide.md)" in page
    assert "[CHANGELOG.md](changelog.md)" in page
    assert "](examples/client.py)" not in page and "`examples/client.py`" in page  # the site does not carry it
    assert [m.group(0) for m in FENCE.finditer(page)] == [m.group(0) for m in FENCE.finditer(readme)]  # code untouched


def test_links_out_of_the_docs_become_code_and_others_stay() -> None:
    hooks = _hooks()
    text = (
        "See [the example](../examples/input_required.py), [the folder](examples/testing/), "
        "[the guide](guide.md#errors), [MCP](https://modelcontextprotocol.io) and `handlers[name](args)`.\n"
        "```python\nvalue = table[key](arg)\nlink = '[x](../y.py)'\n```\n"
    )
    assert hooks.on_page_markdown(text, page=None) == (
        "See `the example`, `the folder`, [the guide](guide.md#errors), [MCP](https://modelcontextprotocol.io) "
        "and `handlers[name](args)`.\n```python\nvalue = table[key](arg)\nlink = '[x](../y.py)'\n```\n"
    )


def test_every_page_is_in_the_navigation() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    listed: set[str] = set()

    def walk(entries: list[object]) -> None:
        for entry in entries:
            if isinstance(entry, str):
                listed.add(entry)
            elif isinstance(entry, dict):
                for value in entry.values():
                    walk(value if isinstance(value, list) else [value])

    walk(config["nav"])
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md") if "examples" not in p.parts}
    assert pages <= listed, f"pages missing from mkdocs.yml nav: {sorted(pages - listed)}"
    assert "changelog.md" in listed  # generated from CHANGELOG.md by the hooks
