"""``examples/files.py`` (shown in docs/resources.md): a ``{+path}`` handler that confines its path
(issue 24 item 10). Reads inside the root are served; every way out (``..``, percent-encoded
``..``, an absolute path, a symbolic link, a NUL byte) is refused ``-32602`` in both eras.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from fastapi_mcp_ctx.errors import McpResponseError
from fastapi_mcp_ctx.testing import McpTestClient

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The example serving ``tmp_path/root`` (a.txt, sub/b.txt, a link out), a secret beside it."""
    import examples.files as module

    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha", encoding="utf-8")
    (root / "sub" / "b.txt").write_text("beta", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    (root / "out").symlink_to(tmp_path)
    monkeypatch.setattr(module, "ROOT", root.resolve())
    yield module


def test_the_docs_block_is_the_example_file() -> None:
    doc = (REPO / "docs" / "resources.md").read_text(encoding="utf-8")
    block = doc.split('```python title="examples/files.py"\n', 1)[1].split("\n```", 1)[0] + "\n"
    assert block == (REPO / "examples" / "files.py").read_text(encoding="utf-8")


async def test_files_inside_the_root_are_read(files: ModuleType, era: str) -> None:
    async with McpTestClient(files.app, era=era) as client:
        assert (await client.read_resource("files:///a.txt")).result["contents"][0]["text"] == "alpha"
        assert (await client.read_resource("files:///sub/b.txt")).result["contents"][0]["text"] == "beta"
        assert (await client.read_resource("files:///sub/../a.txt")).result["contents"][0]["text"] == "alpha"  # stays inside
        with pytest.raises(McpResponseError) as missing:
            await client.read_resource("files:///nothing.txt")
    assert missing.value.code == (-32002 if era == "legacy" else -32602)


@pytest.mark.parametrize(
    "uri",
    [
        "files:///../secret.txt",
        "files:///sub/../../secret.txt",
        "files:///%2E%2E/secret.txt",
        "files:///sub%2F..%2F..%2Fsecret.txt",
        "files:////etc/passwd",
        "files:///out/secret.txt",
        "files:///a.txt%00",
    ],
)
async def test_every_way_out_of_the_root_is_refused(files: ModuleType, era: str, uri: str) -> None:
    async with McpTestClient(files.app, era=era) as client:
        with pytest.raises(McpResponseError) as refused:
            await client.read_resource(uri)
    assert refused.value.code == -32602
    assert refused.value.data is not None and refused.value.data["reason"] in ("outside_root", "invalid_path")
