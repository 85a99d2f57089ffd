"""compose.yaml and the Dockerfile stay consistent with the package (no Docker engine needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fastapi_mcp_ctx import McpSettings
from fastapi_mcp_ctx.backends import backend_from_url

ROOT = Path(__file__).resolve().parents[1]


def test_compose_services_and_settings_are_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "mcp"} <= set(services)
    for name, value in services["mcp"]["environment"].items():
        monkeypatch.setenv(name, value)
    settings = McpSettings()  # read from the environment exactly as the container does
    assert settings.allowed_hosts and settings.allowed_origins
    backend_from_url(settings.storage_url)  # a URL the package accepts (no I/O)
    assert services["migrate"]["command"] == ["alembic", "upgrade", "head"]


def test_dockerfile_copies_what_the_image_runs() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for path in ("fastapi_mcp_ctx", "alembic", "examples", "alembic.ini", "pyproject.toml"):
        assert f"COPY {path}" in dockerfile or f" {path} " in dockerfile or f"{path} ./" in dockerfile, path
    assert "examples.quickstart:app" in dockerfile
