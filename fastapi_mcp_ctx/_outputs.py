"""What one tool call accumulates beside its return value (``ctx.enrich``, ``ctx.content``).

Created at the first use in a call (``CallState.outputs`` stays None otherwise, so a call
that uses neither pays nothing) and merged into the result once the handler has returned
(``_handlers.results.merge_outputs``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CallOutputs"]


class CallOutputs:
    """Accumulators of one call.

    Attributes:
        enriched: enrichment field → JSON value (declared, validated), in first-set order.
        blocks: content blocks (wire dicts) to prepend to ``content``, in call order.
    """

    __slots__ = ("blocks", "enriched")

    def __init__(self) -> None:
        self.enriched: dict[str, Any] = {}
        self.blocks: list[dict[str, Any]] = []
