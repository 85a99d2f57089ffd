from collections.abc import Iterator

from fastapi_mcp_ctx import Principal, mcp_context
from fastapi_mcp_ctx.testing import Era, McpTestClient
from notes import Note, app, authenticate, get_db

ADA = {"X-API-Key": "key-ada"}


async def test_add_note_with_a_fake_database(era: Era) -> None:
    notes = [Note(id=1, text="seeded", author="test")]

    def fake_db() -> Iterator[list[Note]]:
        yield notes  # a yield dependency is replaced by a yield dependency

    app.dependency_overrides[get_db] = fake_db
    async with McpTestClient(app, era=era, headers=ADA) as client:  # no lifespan needed now
        result = await client.call_tool("add_note", {"text": "second"})
    assert result.structured == {"id": 2, "text": "second", "author": "ada"}
    assert [note.text for note in notes] == ["seeded", "second"]


async def test_as_another_user(era: Era) -> None:
    app.dependency_overrides[authenticate] = lambda: Principal(subject="grace", tenant_id="acme")
    async with McpTestClient(app, era=era, lifespan=True) as client:  # no API key needed now
        result = await client.call_tool("add_note", {"text": "hi"})
    assert result.structured == {"id": 1, "text": "hi", "author": "grace"}


class FakeContext:
    """A stand-in for the whole Context: it has what whoami reads, nothing else."""

    auth = Principal(subject="robot", tenant_id="lab")
    tenant_id = "lab"


async def test_whoami_with_a_fake_context(client: McpTestClient) -> None:
    app.dependency_overrides[mcp_context] = FakeContext
    result = await client.call_tool("whoami")
    assert result.structured == {"result": "robot of lab"}
