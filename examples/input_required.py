"""Asking the client for input, one handler for both protocol eras.

- ``export_report`` asks for the export format when the caller left it out
  (``ctx.request_input`` + ``ctx.inputs``): a 2026-07-28 client gets ``input_required`` and
  retries with the answer; a 2025 client gets a real ``elicitation/create`` on the call's stream.
- ``trip_wizard`` asks three questions in sequence with ``await ctx.elicit``: live round trips
  in 2025, three ``input_required`` rounds in 2026-07-28 (the code before a question runs again
  on every 2026 round, so it has no side effects).
- ``summarize`` asks the client's model; ``project_roots`` lists the client's roots.

Run: uvicorn examples.input_required:app   (then an MCP client with elicitation support)
"""

from __future__ import annotations

from typing import Literal

from fastapi import Depends, FastAPI
from pydantic import BaseModel, Field

from fastapi_mcp_ctx import Context, McpRouter, ToolError, input_required, mcp_context

router = McpRouter()


class FormatChoice(BaseModel):
    format: Literal["json", "csv"] = Field(description="Export format")


@router.tool()
async def export_report(
    report_id: str, format: Literal["json", "csv"] | None = None, ctx: Context = Depends(mcp_context)
) -> dict[str, str]:
    """Export a report, asking for the format when the caller left it out."""
    view = ctx.inputs.view("format")
    if view.kind == "elicit" and view.action != "accept":
        raise ToolError(f"The user chose to {view.action} the format question.", reason="not_confirmed")
    choice = ctx.inputs.accepted("format", FormatChoice)
    chosen = format or (choice.format if choice else None)
    if chosen is None:
        ctx.request_input(
            {"format": input_required.elicit("Which format should the report use?", FormatChoice)},
            fallback_hint="Or call again with format supplied.",
        )
    return {"url": f"https://reports.example/{report_id}.{chosen}"}


class Destination(BaseModel):
    city: str = Field(description="Where to")


class Dates(BaseModel):
    nights: int = Field(ge=1, le=60, description="How many nights")


class Extras(BaseModel):
    breakfast: bool = Field(default=True, description="Breakfast included")


@router.tool()
async def trip_wizard(ctx: Context = Depends(mcp_context)) -> dict[str, object]:
    """Plan a trip: three questions, asked one after another."""
    where = await ctx.elicit("Where do you want to go?", Destination)
    if where.data is None:
        raise ToolError("Trip planning stopped at the destination.", reason="not_confirmed")
    nights = await ctx.elicit(f"How many nights in {where.data.city}?", Dates)
    if nights.data is None:
        raise ToolError("Trip planning stopped at the dates.", reason="not_confirmed")
    extras = await ctx.elicit("Any extras?", Extras)
    breakfast = extras.data.breakfast if extras.data is not None else False
    return {"city": where.data.city, "nights": nights.data.nights, "breakfast": breakfast}


@router.tool()
async def summarize(text: str, ctx: Context = Depends(mcp_context)) -> str:
    """Summarise a text with the client's model."""
    answer = await ctx.sample(f"Summarise in one line: {text}", max_tokens=100)
    content = answer.content
    return content.text if hasattr(content, "text") else str(content)  # pyright: ignore[reportAttributeAccessIssue]


@router.tool()
async def project_roots(ctx: Context = Depends(mcp_context)) -> list[str]:
    """The client's roots (its open folders)."""
    return [str(root.uri) for root in await ctx.list_roots()]


app = FastAPI()
app.include_router(router)
