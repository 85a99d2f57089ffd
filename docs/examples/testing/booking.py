"""Tools that ask the client: a three-question booking, a tagline from the client's model, its roots."""

from fastapi import Depends, FastAPI
from pydantic import BaseModel, Field

from fastapi_mcp_ctx import Context, McpRouter, ToolError, mcp_context

router = McpRouter()


class Guest(BaseModel):
    name: str = Field(description="Who is staying")


class Stay(BaseModel):
    nights: int = Field(ge=1, le=30, description="How many nights")


class Confirm(BaseModel):
    confirm: bool = Field(description="Book it")


@router.tool()
async def book_room(ctx: Context = Depends(mcp_context)) -> dict[str, object]:
    """Book a room, asking the user three questions."""
    guest = await ctx.elicit("Who is staying?", Guest)
    if guest.data is None:
        raise ToolError(f"The user chose to {guest.action} the booking.")
    stay = await ctx.elicit(f"How many nights for {guest.data.name}?", Stay)
    if stay.data is None:
        raise ToolError(f"The user chose to {stay.action} the booking.")
    confirm = await ctx.elicit(f"Book {stay.data.nights} nights for {guest.data.name}?", Confirm)
    booked = confirm.data is not None and confirm.data.confirm
    return {"guest": guest.data.name, "nights": stay.data.nights, "booked": booked}


@router.tool()
async def tagline(hotel: str, ctx: Context = Depends(mcp_context)) -> str:
    """A tagline for the hotel, written by the client's model."""
    answer = await ctx.sample(f"Write a one-line tagline for {hotel}.", max_tokens=30)
    return getattr(answer.content, "text", "")


@router.tool()
async def workspace(ctx: Context = Depends(mcp_context)) -> list[str]:
    """The folders the client has open."""
    return [str(root.uri) for root in await ctx.list_roots()]


app = FastAPI()
app.include_router(router)
