"""A second app under test: a catalogue of books as MCP resources, a prompt and its completions."""

from typing import Annotated, Any

from fastapi import Depends, FastAPI
from pydantic import Field

from fastapi_mcp_ctx import Context, McpRouter, ToolError, mcp_context

BOOKS = {1: {"title": "Dune", "author": "Frank Herbert"}, 2: {"title": "Emma", "author": "Jane Austen"}}

mcp_router = McpRouter()


def complete_book_id(value: str) -> list[str]:
    """Book ids starting with what was typed."""
    return [str(book_id) for book_id in BOOKS if str(book_id).startswith(value)]


@mcp_router.resource("catalog://books", mime_type="application/json")
def all_books() -> list[dict[str, Any]]:
    """Every book."""
    return [{"id": book_id, **book} for book_id, book in BOOKS.items()]


@mcp_router.resource("catalog://books/{book_id}", mime_type="application/json", complete={"book_id": complete_book_id})
async def book(book_id: int, ctx: Context = Depends(mcp_context)) -> dict[str, Any] | None:
    """One book by id (None: not found)."""
    await ctx.log.info("read", book_id=book_id)
    found = BOOKS.get(book_id)
    return {"id": book_id, **found} if found is not None else None


@mcp_router.prompt(complete={"book_id": complete_book_id})
def review(
    book_id: Annotated[str, Field(description="The id of the book to review")],
    tone: Annotated[str, Field(description="kind or harsh")] = "kind",
) -> str:
    """Ask for a review of one book."""
    found = BOOKS.get(int(book_id)) if book_id.isdigit() else None
    if found is None:
        raise ToolError(f"No book with id {book_id}", code=-32602, reason="unknown_book")
    return f"Write a {tone} review of {found['title']} by {found['author']}."


app = FastAPI(title="catalog")
app.include_router(mcp_router)
