"""The app under test: notes over MCP with a yield dependency, an API key and ctx.state."""

from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from pydantic import BaseModel, Field

from fastapi_mcp_ctx import Context, McpRouter, Principal, mcp_context


class Note(BaseModel):
    id: int
    text: str
    author: str


API_KEYS = {"key-ada": Principal(subject="ada", tenant_id="acme")}  # a real app looks keys up


def authenticate(x_api_key: str | None = Header(default=None)) -> Principal | None:
    if x_api_key is None:
        return None  # 401, no challenge: an API key is no Bearer scheme
    principal = API_KEYS.get(x_api_key)
    if principal is None:
        raise HTTPException(401, "invalid API key")
    return principal


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncGenerator[dict[str, Any]]:
    notes: list[Note] = []  # a real app opens its database pool here
    yield {"notes": notes}  # lifespan state: request.state.notes during every request
    await mcp_router.aclose()  # release ctx.state's pools; the next request reconnects


def get_db(request: Request) -> Iterator[list[Note]]:
    yield request.state.notes  # a real app opens a session here and closes it after the yield


mcp_router = McpRouter(authenticate=authenticate)


@mcp_router.tool()
async def add_note(
    text: Annotated[str, Field(min_length=1)],
    ctx: Context = Depends(mcp_context),
    db: list[Note] = Depends(get_db),
) -> Note:
    """Store a note."""
    note = Note(id=len(db) + 1, text=text, author=ctx.auth.subject)
    db.append(note)
    await ctx.log.info("stored", note_id=note.id)
    return note


@mcp_router.tool()
async def import_notes(
    texts: list[str],
    ctx: Context = Depends(mcp_context),
    db: list[Note] = Depends(get_db),
) -> int:
    """Store several notes, reporting progress."""
    for i, text in enumerate(texts, start=1):
        db.append(Note(id=len(db) + 1, text=text, author=ctx.auth.subject))
        await ctx.report_progress(i, len(texts), f"imported {i} of {len(texts)}")
    return len(texts)


@mcp_router.tool()
async def count_visit(page: str, ctx: Context = Depends(mcp_context)) -> int:
    """Count the visits of a page (kept in ctx.state, per tenant)."""
    visits = (await ctx.state.get(f"visits/{page}", int) or 0) + 1
    await ctx.state.set(f"visits/{page}", visits)
    return visits


@mcp_router.tool()
async def whoami(ctx: Context = Depends(mcp_context)) -> str:
    """Who the server thinks the caller is."""
    return f"{ctx.auth.subject} of {ctx.tenant_id}"


app = FastAPI(lifespan=lifespan)
app.include_router(mcp_router)
