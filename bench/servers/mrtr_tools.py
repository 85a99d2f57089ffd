"""What both servers of ``bench/bench_mrtr.py`` share: the question, its form and the result."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

QUESTION = "Which format should the export use?"


class ExportFormat(BaseModel):
    """The elicited form: one enum field."""

    format: Literal["csv", "json", "parquet"]


def exported(dataset: str, choice: ExportFormat) -> dict[str, str]:
    """The tool's result once the format is known."""
    return {"dataset": dataset, "format": choice.format, "status": "exported"}
