"""Call add_note with the official MCP client in both protocol eras.

Run: .venv/bin/python examples/client.py [URL]   (a server first: `make run`, or `uvicorn app:app`)
"""

import asyncio
import sys

try:
    from mcp import Client
except ModuleNotFoundError:
    sys.exit('examples/client.py needs the official MCP client: `make run` installs it, or pip install "mcp==2.3.*"')


async def main(url: str) -> None:
    async with Client(url, mode="legacy") as client:  # 2025 handshake era
        result = await client.call_tool("add_note", {"text": "hello"})
        print(client.protocol_version, result.structured_content)
    async with Client(url, mode="2026-07-28") as client:  # stateless era
        result = await client.call_tool("add_note", {"text": "hello"})
        print(client.protocol_version, result.structured_content)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"))
