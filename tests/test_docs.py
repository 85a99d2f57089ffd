"""The docs' code is tested code.

- README.md: every ``python`` block either names a file (``title="examples/client.py"``) and is
  that file verbatim (the file is run by ``tests/test_clients.py``), or runs as written (the
  first server, which also serves both eras here).
- docs/testing.md: every code block names a file under ``docs/examples/testing/`` and equals
  it; every example file is shown; no ``...`` placeholder. The examples are a user's test suite:
  pytest runs them (their own ``pytest.ini`` and ``conftest.py``) and ruff checks them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fastapi_mcp_ctx.testing import McpTestClient

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
TESTING_DOC = REPO / "docs" / "testing.md"
EXAMPLES = REPO / "docs" / "examples" / "testing"
FENCE = re.compile(r'^```(\w*)(?: title="([^"]+)")?\n(.*?)^```', re.DOTALL | re.MULTILINE)


def code_blocks(path: Path) -> list[tuple[str, str | None, str]]:
    """``(language, title or None, code)`` of every fenced block of a Markdown file."""
    return [(m.group(1), m.group(2), m.group(3)) for m in FENCE.finditer(path.read_text(encoding="utf-8"))]


def run_block(code: str, name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": name}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102
    return namespace


# -- README -----------------------------------------------------------------------------------


def test_every_readme_python_block_is_a_tested_file_or_runs() -> None:
    blocks = [(title, code) for lang, title, code in code_blocks(README) if lang == "python"]
    titled = [title for title, _ in blocks if title]
    assert "examples/client.py" in titled, "the client snippet is examples/client.py"
    for title, code in blocks:
        if title is not None:
            assert code == (REPO / title).read_text(encoding="utf-8"), f"README block differs from {title}"
        else:
            run_block(code, "readme_block")  # top-level `await` or a missing import fails here


async def test_readme_first_server_runs_in_both_eras() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## A first server") :]
    match = FENCE.search(section)
    assert match is not None and match.group(1) == "python" and match.group(2) is None
    namespace = run_block(match.group(3), "readme_first_server")
    for era in ("legacy", "modern"):
        async with McpTestClient(namespace["app"], era=era) as client:
            tools = await client.list_tools()
            assert [t["name"] for t in tools] == ["add_note"]
            assert tools[0]["description"] == "Store a note."
            result = await client.call_tool("add_note", {"text": "hello"})
            assert result.is_error is False
            assert result.structured["text"] == "hello"
            expected_logs = [{"message": "stored", "note_id": result.structured["id"]}] if era == "legacy" else []
            assert [entry["data"] for entry in result.logs] == expected_logs  # 2026: only when asked for
    assert [n.text for n in namespace["NOTES"]] == ["hello", "hello"]


# -- docs/testing.md ----------------------------------------------------------------------------


def test_testing_guide_blocks_are_the_example_files() -> None:
    blocks = code_blocks(TESTING_DOC)
    shown: list[str] = []
    for lang, title, code in blocks:
        if lang == "bash":
            continue
        assert title is not None and title.startswith("docs/examples/testing/"), f"untested {lang} block: {code[:60]!r}"
        assert code == (REPO / title).read_text(encoding="utf-8"), f"docs/testing.md block differs from {title}"
        shown.append(Path(title).name)
    files = sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in (".py", ".ini"))
    assert sorted(shown) == files, "every example file is shown once"
    assert "..." not in TESTING_DOC.read_text(encoding="utf-8") and "…" not in TESTING_DOC.read_text(encoding="utf-8")


def test_guide_points_to_the_testing_guide() -> None:
    guide = (REPO / "docs" / "guide.md").read_text(encoding="utf-8")
    section = guide[guide.index("## Testing") : guide.index("## Authentication")]
    assert "(testing.md)" in section and "```" not in section
    assert "iter([" not in guide, "a lambda returning an iterator is not a yield dependency"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


def test_testing_guide_examples_pass_as_a_users_test_suite() -> None:
    done = _run("pytest", str(EXAMPLES.relative_to(REPO)), "-q", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"(\d+) passed(, \d+ warnings?)? in [\d.]+s", summary), summary  # nothing skipped or failed
    assert int(summary.split()[0]) >= 30


@pytest.mark.parametrize("target", ["docs/examples", "examples/client.py"])
def test_examples_are_lint_clean(target: str) -> None:
    done = _run("ruff", "check", target)
    assert done.returncode == 0, done.stdout + done.stderr
