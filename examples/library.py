"""A library catalogue over MCP: resources, templates, prompts and completions backed by SQLite.

Run:  python examples/library.py        (127.0.0.1:8002/mcp; LIBRARY_DB=path keeps the data)

Every handler gets its database connection from a FastAPI yield dependency (opened before the
handler, closed after its result is shaped), and the Context like any tool.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from typing import Annotated, Any

import mcp_types as types
from fastapi import Depends, FastAPI, Security
from fastapi.security import APIKeyHeader
from pydantic import Field

from fastapi_mcp_ctx import Context, McpRouter, ToolError, embedded_text_resource, mcp_context, text_content

BOOKS = [
    (1, "Dune", "Frank Herbert", "science-fiction"),
    (2, "Dracula", "Bram Stoker", "horror"),
    (3, "Emma", "Jane Austen", "romance"),
    (4, "Ulysses", "James Joyce", "modernism"),
]
EVENTS: list[str] = []  # what the yield dependency did, in order (the tests read it)


def _connect() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ.get("LIBRARY_DB", "file:library?mode=memory&cache=shared"), uri=True, check_same_thread=False)
    db.row_factory = sqlite3.Row
    return db


_KEEPER = _connect()  # an in-memory shared database lives while one connection is open
_KEEPER.execute("CREATE TABLE IF NOT EXISTS books (id INTEGER PRIMARY KEY, title TEXT, author TEXT, genre TEXT)")
_KEEPER.executemany("INSERT OR IGNORE INTO books VALUES (?, ?, ?, ?)", BOOKS)
_KEEPER.commit()


def get_db() -> Iterator[sqlite3.Connection]:
    """One connection per MCP call, closed after the result is produced."""
    db = _connect()
    EVENTS.append("db:open")
    try:
        yield db
    finally:
        db.close()
        EVENTS.append("db:close")


def book_row(db: sqlite3.Connection, book_id: int) -> dict[str, Any] | None:
    row = db.execute("SELECT id, title, author, genre FROM books WHERE id = ?", (book_id,)).fetchone()
    return dict(row) if row is not None else None


mcp_router = McpRouter(resources_subscribe=True)
mcp_router.cache_hints("resources/list", ttl_ms=60_000, cache_scope="public")


@mcp_router.resource("library://books", mime_type="application/json", ttl_ms=5_000, cache_scope="public")
def all_books(db: sqlite3.Connection = Depends(get_db)) -> list[dict[str, Any]]:
    """Every book in the catalogue."""
    return [dict(row) for row in db.execute("SELECT id, title, author, genre FROM books ORDER BY id")]


async def complete_book_id(value: str, db: sqlite3.Connection = Depends(get_db)) -> list[str]:
    """Book ids starting with what was typed."""
    return [str(row["id"]) for row in db.execute("SELECT id FROM books ORDER BY id") if str(row["id"]).startswith(value)]


@mcp_router.resource("library://books/{book_id}", mime_type="application/json", complete={"book_id": complete_book_id})
def book(book_id: int, db: sqlite3.Connection = Depends(get_db), ctx: Context = Depends(mcp_context)) -> dict[str, Any] | None:
    """One book by id (None: not found)."""
    found = book_row(db, book_id)
    return {**found, "uri": ctx.uri} if found is not None else None


@mcp_router.resource("library://covers/{book_id}", mime_type="application/octet-stream")
def cover(book_id: int) -> bytes:
    """A book's cover scan: raw bytes, sent as a base64 blob."""
    return bytes(range(256)) * 4 if book_id == 1 else bytes([book_id]) * 58


@mcp_router.resource("library://search{?q,genre,limit}", mime_type="application/json")
def search(q: str = "", genre: str | None = None, limit: int = 10, db: sqlite3.Connection = Depends(get_db)) -> list[str]:
    """Titles containing ``q`` (optionally of one genre), at most ``limit``."""
    rows = db.execute("SELECT title, genre FROM books WHERE title LIKE ? ORDER BY id", (f"%{q}%",))
    return [row["title"] for row in rows if genre is None or row["genre"] == genre][:limit]


@mcp_router.resource("library://shelf{/path*}", mime_type="text/plain")
def shelf(path: list[str]) -> str:
    """A shelf location, one segment per level."""
    return " > ".join(path) or "(the whole library)"


@mcp_router.resource("library://staff/notes", mime_type="text/plain")
def staff_notes(api_key: str | None = Security(APIKeyHeader(name="X-Staff-Key", auto_error=False))) -> str:
    """Staff notes: only with the X-Staff-Key header."""
    if api_key != "s3cret":
        raise ToolError("Staff only", reason="forbidden", recovery_hint="Send X-Staff-Key.")
    return "Reshelve Ulysses."


@mcp_router.prompt(complete={"book_id": complete_book_id})
def summarize_book(
    book_id: Annotated[str, Field(description="The id of the book to summarize")],
    style: Annotated[str, Field(description="short or detailed")] = "short",
    db: sqlite3.Connection = Depends(get_db),
) -> list[types.TextContent | types.EmbeddedResource]:
    """Ask for a summary of one book."""
    found = book_row(db, int(book_id)) if book_id.isdigit() else None
    if found is None:
        raise ToolError(f"No book with id {book_id}", code=-32602, reason="unknown_book")
    return [
        embedded_text_resource(f"library://books/{book_id}", json.dumps(found), "application/json"),
        text_content(f"Write a {style} summary of {found['title']} by {found['author']}."),
    ]


@mcp_router.completion(prompt="summarize_book", argument="style")
def complete_style(value: str, arguments: dict[str, str]) -> types.Completion:
    """Styles; a known book adds "detailed"."""
    styles = ["short", "detailed"] if arguments.get("book_id", "").isdigit() else ["short"]
    return types.Completion(values=[s for s in styles if s.startswith(value)], total=len(styles), has_more=False)


@mcp_router.tool()
async def rename_book(book_id: int, title: str, db: sqlite3.Connection = Depends(get_db), ctx: Context = Depends(mcp_context)) -> str:
    """Rename a book and tell the subscribers of its resource."""
    db.execute("UPDATE books SET title = ? WHERE id = ?", (title, book_id))
    db.commit()
    await ctx.notify_resource_updated(f"library://books/{book_id}")
    return f"renamed {book_id}"


app = FastAPI(title="library")
app.include_router(mcp_router)

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8002")))
