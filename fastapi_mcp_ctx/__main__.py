"""``python -m fastapi_mcp_ctx`` and the ``fastapi-mcp-ctx`` console script (see :mod:`.cli`).

The command line needs the ``cli`` extra (click); without it this entry point says which
``pip install`` to run instead of a traceback.
"""

from __future__ import annotations

import sys

from ._extras import missing_extra

__all__ = ["main"]


def main() -> None:
    """Run the ``fastapi-mcp-ctx`` command group (exits with its status)."""
    try:
        from .cli import cli  # click is optional: imported only when the command line runs
    except ModuleNotFoundError as exc:
        sys.exit(f"fastapi-mcp-ctx: {missing_extra(exc, 'the fastapi-mcp-ctx command').message}")
    cli(prog_name="fastapi-mcp-ctx")


if __name__ == "__main__":
    main()
