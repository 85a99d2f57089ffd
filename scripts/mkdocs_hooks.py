"""MkDocs hooks of the docs site (mkdocs.yml ``hooks:``): the README is the front page, and the
links the pages make to the repository's other files (which GitHub shows, the site does not
carry) become their paths in code.

``docs/index.md`` holds a marker line; :func:`on_page_markdown` makes that page README.md,
its links rewritten for the site: ``docs/guide.md`` becomes ``guide.md``, ``CHANGELOG.md`` the
generated ``changelog.md`` page (:func:`on_files`). In every page a link out of ``docs/``
(``../examples/client.py``; in the README ``examples/client.py``) or to a folder
(``examples/testing/``) keeps its text only, in code. Fenced blocks and inline code are left as
they are. Every other link is checked by ``mkdocs build --strict`` like any page's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- README.md -->"
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
_CODE_OR_LINK = re.compile(r"(?P<code>(`+)[^`]*?\2)|\[(?P<text>(?:[^\[\]`]|`[^`]*`)+)\]\((?P<target>[^)#\s]*)(?P<anchor>#[^)\s]*)?\)")


def _outside(text: str) -> str:
    return text if text.startswith("`") else f"`{text}`"


def _rewrite(markdown: str, *, readme: bool) -> str:
    def link(match: re.Match[str]) -> str:
        if match.group("code") is not None:
            return match.group(0)
        text, target, anchor = match.group("text"), match.group("target"), match.group("anchor") or ""
        if not target or "://" in target or target.startswith(("mailto:", "/")):
            return match.group(0)
        if readme:
            if target.startswith("docs/"):
                return f"[{text}]({target.removeprefix('docs/')}{anchor})"
            if target == "CHANGELOG.md":
                return f"[{text}](changelog.md{anchor})"
            return _outside(text)
        if target.startswith("../") or target.endswith("/"):
            return _outside(text)
        return match.group(0)

    parts: list[str] = []
    last = 0
    for fence in _FENCE.finditer(markdown):
        parts.append(_CODE_OR_LINK.sub(link, markdown[last : fence.start()]))
        parts.append(fence.group(0))
        last = fence.end()
    parts.append(_CODE_OR_LINK.sub(link, markdown[last:]))
    return "".join(parts)


def on_files(files: Files, config: Any, **_: Any) -> Files:
    """Add CHANGELOG.md as the ``changelog.md`` page."""
    files.append(File.generated(config, "changelog.md", content=(ROOT / "CHANGELOG.md").read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """The front page: README.md in place of the marker of docs/index.md; every page: links out of the site."""
    if MARKER in markdown:  # the whole page: its other lines are for readers of the repository
        return _rewrite((ROOT / "README.md").read_text(encoding="utf-8"), readme=True)
    return _rewrite(markdown, readme=False)
