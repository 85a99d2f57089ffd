"""One dependency for FastAPI and MCP alike: the tool's arguments are the request's parameters.

``load_item`` serves the path operation ``PUT /items/{item_id}`` (``item_id`` a path parameter)
and the tool ``rename_item`` (``item_id`` an argument of the tool, in its ``inputSchema``), unchanged.
Run: ``uvicorn examples.items:app``.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel

from fastapi_mcp_ctx import McpRouter


class Item(BaseModel):
    id: int
    name: str


ITEMS: dict[int, Item] = {1: Item(id=1, name="hammer")}


def get_db() -> dict[int, Item]:
    return ITEMS


def load_item(item_id: int, db: dict[int, Item] = Depends(get_db)) -> Item:
    item = db.get(item_id)
    if item is None:
        raise HTTPException(404, f"No item {item_id}")
    return item


mcp_router = McpRouter()


@mcp_router.tool()
async def rename_item(new_name: str, item: Item = Depends(load_item)) -> Item:
    """Rename an item."""
    item.name = new_name
    return item


app = FastAPI()
app.include_router(mcp_router)


@app.put("/items/{item_id}")
async def put_item(new_name: str, item: Item = Depends(load_item)) -> Item:
    item.name = new_name
    return item
