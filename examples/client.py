"""Call add_note with the official MCP client (`pip install "mcp==2.3.*"`) in both protocol eras.

Run: python examples/client.py [URL]   (a server first: `make run`, or `uvicorn app:app`)
"""

import asyncio
import sys

from mcp import Client


async def main(url: str) -> None:
    async with Client(url, mode="legacy") as client:  # 2025 handshake era
        result = await client.call_tool("add_note", {"text": "hello"})
        print(client.protocol_version, result.structured_content)
    async with Client(url, mode="2026-07-28") as client:  # stateless era
        result = await client.call_tool("add_note", {"text": "hello"})
        print(client.protocol_version, result.structured_content)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"))
