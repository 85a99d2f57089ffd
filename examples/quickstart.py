"""Quickstart: a notes server over MCP, both protocol eras, on 127.0.0.1:8000/mcp.

Run:  python examples/quickstart.py      (or: fastapi-mcp-ctx serve examples.quickstart:app)
      PORT=8001 python examples/quickstart.py   (another port)

Embedded defaults: ``ctx.state`` (the ``remember``/``recall`` memos) lives in memory. Keep it in
PostgreSQL with ``MCP_STORAGE_URL=postgresql+asyncpg://…`` after ``fastapi-mcp-ctx migrate``, with
``MCP_REQUEST_STATE_KEY=$(fastapi-mcp-ctx keygen)`` (a store processes share needs one sealing key;
compose.yaml does all three); the app checks the schema at start-up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, Header, Request
from pydantic import BaseModel, Field

from fastapi_mcp_ctx import Context, McpRouter, ToolError, mcp_context


class Note(BaseModel):
    """A stored note."""

    id: int
    text: str
    author: str


class NoteBook:
    """A tiny in-memory database with explicit sessions (to show yield dependencies)."""

    def __init__(self) -> None:
        self.notes: list[Note] = []
        self.events: list[str] = []


BOOK = NoteBook()


def get_book() -> NoteBook:
    return BOOK


def get_db(book: NoteBook = Depends(get_book)) -> Iterator[NoteBook]:
    """A yield dependency: opened before the tool runs, closed after its result is produced."""
    book.events.append("db:open")
    try:
        yield book
    finally:
        book.events.append("db:close")


mcp_router = McpRouter()


@mcp_router.tool(annotations={"readOnlyHint": True})
async def add(
    a: Annotated[int, Field(description="First addend")],
    b: Annotated[int, Field(description="Second addend")],
) -> int:
    """Add two integers."""
    return a + b


@mcp_router.tool()
async def add_note(
    text: Annotated[str, Field(description="The note's text", min_length=1)],
    ctx: Context = Depends(mcp_context),
    db: NoteBook = Depends(get_db),
    x_author: str = Header(default="anonymous"),
) -> Note:
    """Store a note; the author comes from the X-Author HTTP header."""
    note = Note(id=len(db.notes) + 1, text=text, author=x_author)
    db.notes.append(note)
    db.events.append(f"tool:add_note:{ctx.request_id}")
    return note


@mcp_router.tool()
async def whoami(request: Request, ctx: Context = Depends(mcp_context)) -> dict[str, str | None]:
    """Describe the caller: user agent, protocol era and version, tenant."""
    return {
        "user_agent": request.headers.get("user-agent"),
        "era": ctx.era,
        "protocol_version": ctx.protocol_version,
        "tenant": ctx.tenant_id,
        "session": ctx.session_id,
    }


@mcp_router.tool()
async def count_to(n: Annotated[int, Field(ge=1, le=100)], ctx: Context = Depends(mcp_context)) -> str:
    """Count to n, reporting progress on the way."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
        await ctx.log.info("counted", value=i)
    return f"counted to {n}"


@mcp_router.tool()
def find_note(note_id: int, db: NoteBook = Depends(get_db)) -> Note:
    """Find a note by id (a sync tool: runs in a worker thread)."""
    for note in db.notes:
        if note.id == note_id:
            return note
    raise ToolError(f"No note with id {note_id}", recovery_hint="List notes with add_note first.")


class Memo(BaseModel):
    """A memo kept in ctx.state."""

    key: str
    text: str


MemoKey = Annotated[str, Field(pattern=r"^[a-z0-9_-]{1,64}$", description="The memo's name, e.g. 'groceries'")]


@mcp_router.tool()
async def remember(
    key: MemoKey,
    text: Annotated[str, Field(description="What to remember", max_length=10_000)],
    ctx: Context = Depends(mcp_context),
) -> Memo:
    """Keep a memo in ctx.state (per tenant; in the database that MCP_STORAGE_URL names)."""
    await ctx.state.set(f"memos/{key}", text)
    return Memo(key=key, text=text)


@mcp_router.tool(annotations={"readOnlyHint": True})
async def recall(key: MemoKey, ctx: Context = Depends(mcp_context)) -> Memo:
    """Read back a memo stored with remember."""
    text = await ctx.state.get(f"memos/{key}", str)
    if text is None:
        raise ToolError(f"No memo named {key!r}", recovery_hint="Store one with remember first.")
    return Memo(key=key, text=text)


@asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    await mcp_router.check()  # a missing SQL schema stops the start, naming `fastapi-mcp-ctx migrate`
    yield
    await mcp_router.aclose()


app = FastAPI(title="fastapi-mcp-ctx quickstart", lifespan=lifespan)
app.include_router(mcp_router)


if __name__ == "__main__":
    import os

    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
