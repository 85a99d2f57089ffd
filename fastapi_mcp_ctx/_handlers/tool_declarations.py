"""What a tool declares beside its signature (``enrichment=``, ``errors=``), checked once at
registration and folded into its listing: one call from ``_handlers.registry.build_tool``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..contracts import ErrorContract, ErrorContracts, build_contracts, check_context_annotation, meta_with_contracts
from ..enrichment import EnrichmentSpec, build_enrichment, extend_output_schema

__all__ = ["ToolDeclarations", "declare"]


@dataclass(frozen=True, slots=True)
class ToolDeclarations:
    """A tool's checked declarations and the listing parts they change.

    Attributes:
        enrichment / contracts: for ``ToolDef`` (None when not declared).
        output_schema: the ``outputSchema`` extended by the enrichment fields.
        meta: the ``_meta`` of the ``Tool`` with the contracts listed.
    """

    enrichment: EnrichmentSpec | None
    contracts: ErrorContracts | None
    output_schema: dict[str, Any] | None
    meta: dict[str, Any] | None


def declare(
    owner: str,
    output_schema: dict[str, Any] | None,
    meta: dict[str, Any] | None,
    enrichment: Any,
    errors: Sequence[ErrorContract] | None,
    context_annotations: Iterable[Any],
) -> ToolDeclarations:
    """Check ``enrichment=`` and ``errors=`` of the tool ``owner`` names (``"tool 'search'"``).

    ``context_annotations`` are the annotations of its ``Depends(mcp_context)`` parameters
    (each ``Context[Literal[...]]`` reason must be declared).

    Raises:
        ValueError: see :func:`~fastapi_mcp_ctx.enrichment.build_enrichment`,
            :func:`~fastapi_mcp_ctx.enrichment.extend_output_schema`,
            :func:`~fastapi_mcp_ctx.contracts.build_contracts`,
            :func:`~fastapi_mcp_ctx.contracts.meta_with_contracts` and
            :func:`~fastapi_mcp_ctx.contracts.check_context_annotation`.
    """
    spec = build_enrichment(enrichment, owner)
    if spec is not None:
        output_schema = extend_output_schema(output_schema, spec)
    contracts = build_contracts(errors, owner)
    for annotation in context_annotations:
        check_context_annotation(annotation, contracts, owner)
    return ToolDeclarations(spec, contracts, output_schema, meta_with_contracts(meta, contracts))
