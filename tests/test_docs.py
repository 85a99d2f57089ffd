"""The docs' code is tested code.

- README.md: every ``python`` block either names a file (``title="examples/client.py"``) and is
  that file verbatim (the file is run by ``tests/test_clients.py``), or runs as written (the
  first server, which also serves both eras here).
- docs/testing.md: every code block names a file under ``docs/examples/testing/`` and equals
  it; every example file is shown; no ``...`` placeholder. The examples are a user's test suite:
  pytest runs them (their own ``pytest.ini`` and ``conftest.py``) and ruff checks them.
- every other page of docs/: a ``python`` block without a title runs as written, as a file of
  its own (imports included, no top-level ``await``); one that builds an ``McpRouter`` also builds
  the ``app`` serving it, so ``uvicorn module:app`` serves the example. Titled blocks are files,
  run by their own tests. What each example does is checked by the tests of its feature.
- examples/client.py: one line naming the install when the official client is missing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fastapi_mcp_ctx._wire.versions import KNOWN_PROTOCOL_VERSIONS
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


def test_readme_lists_every_protocol_version_the_server_speaks() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The two eras on one endpoint") : text.index("## Context")]
    assert [v for v in KNOWN_PROTOCOL_VERSIONS if v not in section] == []


def test_the_client_extra_is_what_make_run_installs_and_the_example_names() -> None:
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (pin,) = extras["client"]
    assert pin.startswith("mcp==") and "client" in extras["test"][0]
    assert f'pip install "{pin}"' in (REPO / "examples" / "client.py").read_text(encoding="utf-8")
    assert "extras='.[server,cli,client]'" in (REPO / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")


def test_the_client_example_without_the_client_says_what_to_install() -> None:
    hide_mcp = "import runpy, sys; sys.modules['mcp'] = None; runpy.run_path('examples/client.py', run_name='__main__')"
    done = subprocess.run(
        [sys.executable, "-c", hide_mcp], cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        'examples/client.py needs the official MCP client: `make run` installs it, or pip install "mcp==2.3.*"'
    ]


# -- docs/*.md: every untitled python block ---------------------------------------------------

DOC_PAGES = sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "testing.md")
DOC_BLOCKS = [
    pytest.param(page, code, id=f"{page.name}:{page.read_text(encoding='utf-8')[: m.start()].count(chr(10)) + 1}")
    for page in DOC_PAGES
    for m in FENCE.finditer(page.read_text(encoding="utf-8"))
    if m.group(1) == "python" and m.group(2) is None
    for code in [m.group(3)]
]
# Each block runs in a process of its own, as `python example.py` / `uvicorn example:app` would: some
# set process-wide state (docs/telemetry.md installs the global tracer provider).
RUN_BLOCK = """
import sys
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from fastapi_mcp_ctx import McpRouter, ToolError

label, source = sys.argv[1], Path(sys.argv[2]).read_text(encoding="utf-8")
namespace = {"__name__": "docs_block"}
compiled = compile(source, label, "exec")
if source.rstrip().splitlines()[-1].startswith("raise ToolError("):  # the errors section's one-liner
    try:
        exec(compiled, namespace)
    except ToolError:
        sys.exit(0)
    sys.exit("the block does not raise ToolError")
exec(compiled, namespace)
routers = [value for value in namespace.values() if isinstance(value, McpRouter)]
if routers:
    app = namespace.get("app")
    if not isinstance(app, FastAPI):
        sys.exit("an example building an McpRouter builds the `app` serving it (`uvicorn module:app`)")
    client = TestClient(app, base_url="http://127.0.0.1:8000", client=("127.0.0.1", 50000))  # a local caller
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "docs", "version": "1"}},
    }
    for router in routers:  # served: the app answers at the router's path (401 when it authenticates)
        response = client.post(router.mcp_path, json=initialize, headers={"accept": "application/json, text/event-stream"})
        if response.status_code not in (200, 401):
            sys.exit(f"app.include_router(mcp_router): POST {router.mcp_path} answered {response.status_code} {response.text}")
"""
# docs/auth.md's token recipe reads what the shell block before it exports
RECIPE_ENV = {"MCP_JWT_ISSUER": "dev", "MCP_RESOURCE_URL": "http://127.0.0.1:8000/mcp", "MCP_JWT_SECRET": "s" * 43}


def test_the_docs_have_untitled_python_blocks_on_the_pages_of_the_findings() -> None:
    pages = {param.values[0].name for param in DOC_BLOCKS}  # type: ignore[union-attr]
    assert {"guide.md", "state.md", "auth.md"} <= pages
    assert len([p for p in DOC_BLOCKS if p.values[0].name == "guide.md"]) >= 9  # type: ignore[union-attr]


@pytest.mark.parametrize(("page", "code"), DOC_BLOCKS)
def test_every_docs_python_block_runs_as_written_and_serves_its_router(page: Path, code: str, tmp_path: Path) -> None:
    example = tmp_path / "example.py"
    example.write_text(code, encoding="utf-8")
    env = {**os.environ, **(RECIPE_ENV if "os.environ[" in code else {})}
    done = subprocess.run(
        [sys.executable, "-c", RUN_BLOCK, str(page.relative_to(REPO)), str(example)],
        cwd=REPO,  # this checkout's package first
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr


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
