"""compose.yaml's "replicas" profile is the topology the replica tests run (no Docker needed):
every MCP_* variable is a real setting, the replicas share every setting, their stores are on
the compose Redis, and nginx serves the same template (deploy/nginx.conf.template) the test
topology renders, pointed at the replicas' real ports."""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
import yaml

from fastapi_mcp_ctx import McpSettings

from .topology import REPLICA_SETTINGS, ROOT, TEMPLATE, render_template

REPLICAS = ("replica-1", "replica-2")
COMPOSE_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(?::-([^}]*))?\}")


def _services() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ``${NAME:-default}`` interpolation, from ``env``."""
    return COMPOSE_VARIABLE.sub(lambda m: env.get(m.group(1), m.group(2) or ""), value)


def _settings_of(service: dict[str, Any], monkeypatch: pytest.MonkeyPatch, **env: str) -> McpSettings:
    for name in [k for k in os.environ if k.startswith("MCP_")]:
        monkeypatch.delenv(name)
    for name, value in service["environment"].items():
        monkeypatch.setenv(name, _interpolate(str(value), env))
    return McpSettings()  # read exactly as the container does


def test_every_mcp_variable_in_compose_is_a_setting() -> None:
    fields = {f"MCP_{name.upper()}" for name in McpSettings.model_fields}
    for name, service in _services().items():
        for variable in service.get("environment", {}):
            if variable.startswith("MCP_"):
                assert variable in fields, f"{name}: {variable} is not an McpSettings field"


def test_replicas_share_every_setting_and_the_stores_are_on_the_compose_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    services = _services()
    envs = [{k: v for k, v in services[name]["environment"].items() if k.startswith("MCP_")} for name in REPLICAS]
    assert envs[0] == envs[1]  # every MCP_* setting identical on every replica
    assert set(REPLICA_SETTINGS) <= set(envs[0])  # what the test topology gives its replicas, and more
    assert envs[0]["MCP_REQUEST_STATE_KEY"] == "${MCP_REQUEST_STATE_KEY:-}"  # one key, from the operator
    assert [services[name]["environment"]["REPLICA_NAME"] for name in REPLICAS] == list(REPLICAS)
    settings = _settings_of(services["replica-1"], monkeypatch, MCP_REQUEST_STATE_KEY="k" * 43)
    for url in (settings.session_store_url, settings.storage_url):  # type: ignore[attr-defined]
        parts = urlsplit(url)
        assert parts.scheme == "redis" and parts.hostname == "redis", url
    assert settings.session_store_url != settings.storage_url  # type: ignore[attr-defined]
    assert settings.allowed_hosts and settings.auth_mode == "none"
    assert "--appendonly" in services["redis"]["command"]
    with pytest.raises(ValueError, match="MCP_REQUEST_STATE_KEY is empty"):
        _settings_of(services["replica-1"], monkeypatch)  # unset: refused at start-up, saying what to set


def test_replicas_serve_the_replicated_app_with_readiness_as_healthcheck() -> None:
    services = _services()
    for name in REPLICAS:
        service = services[name]
        assert service["image"] == services["migrate"]["image"] and "build" not in service
        argv = service["command"]
        assert argv[:3] == ["fastapi-mcp-ctx", "serve", "examples.replicated_app:app"]
        assert "--proxy-headers" in argv and argv[argv.index("--host") + 1] == "0.0.0.0"
        assert "/mcp/ready" in " ".join(service["healthcheck"]["test"])
        assert service["depends_on"] == {"redis": {"condition": "service_healthy"}}


def test_nginx_serves_the_template_the_tests_render_pointed_at_the_replicas() -> None:
    services = _services()
    nginx = services["nginx"]
    assert nginx["volumes"] == ["./deploy/nginx.conf.template:/etc/nginx/templates/mcp.conf.template:ro"]
    assert (ROOT / "deploy" / "nginx.conf.template") == TEMPLATE
    placeholders = set(re.findall(r"\$\{([A-Z0-9_]+)\}", TEMPLATE.read_text()))
    assert placeholders == set(nginx["environment"])  # envsubst fills every one, and only those
    for i, name in enumerate(REPLICAS, start=1):
        argv = services[name]["command"]
        assert nginx["environment"][f"UPSTREAM_{i}"] == f"{name}:{argv[argv.index('--port') + 1]}"
    listen = nginx["environment"]["NGINX_LISTEN"]
    assert nginx["ports"] == [f"127.0.0.1:8080:{listen}"]
    assert set(nginx["depends_on"]) == set(REPLICAS)
    site = render_template(TEMPLATE.read_text(), {k: str(v) for k, v in nginx["environment"].items()})
    upstream = re.search(r"upstream mcp_replicas \{(.*?)\}", site, re.DOTALL)
    assert upstream is not None
    directives = [line.split()[0] for line in upstream.group(1).splitlines() if line.strip() and not line.strip().startswith("#")]
    assert directives == ["server", "server", "keepalive", "keepalive_timeout"]  # round robin: no ip_hash, hash or sticky
    # the proxy drops an idle upstream connection before uvicorn does (a POST into a closing one: a 502)
    (idle,) = re.findall(r"keepalive_timeout (\d+)s;", upstream.group(1))
    assert int(idle) < uvicorn.Config("x:app").timeout_keep_alive
    for directive in ("proxy_buffering off;", "proxy_set_header Host $http_host;", "proxy_read_timeout 1h;"):
        assert directive in site


def test_the_cluster_profile_runs_the_same_replicas_on_the_compose_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Profile "cluster" (issue 21): the replicas of the "replicas" profile, their stores on a
    redis+cluster:// URL naming the compose cluster's nodes, everything else the same."""
    from fastapi_mcp_ctx.backends._redis_url import parse_redis_url

    services = _services()
    names = ("cluster-replica-1", "cluster-replica-2")
    envs = [{k: v for k, v in services[name]["environment"].items() if k.startswith("MCP_")} for name in names]
    assert envs[0] == envs[1]
    plain = {k: v for k, v in services["replica-1"]["environment"].items() if k.startswith("MCP_")}
    stores = {"MCP_SESSION_STORE_URL", "MCP_STORAGE_URL"}
    assert {k: v for k, v in envs[0].items() if k not in stores} == {k: v for k, v in plain.items() if k not in stores}
    nodes = {f"redis-node-{i}" for i in range(1, 7)}
    settings = _settings_of(services[names[0]], monkeypatch, MCP_REQUEST_STATE_KEY="k" * 43)
    for url in (settings.session_store_url, settings.storage_url):  # type: ignore[attr-defined]
        target = parse_redis_url(url)
        assert target.kind == "cluster" and {h for h, _ in target.nodes} <= nodes, url
    for name in nodes:
        assert services[name]["profiles"] == ["cluster"] and "--cluster-enabled" in services[name]["command"]
    assert services[names[0]]["depends_on"] == {"cluster-init": {"condition": "service_completed_successfully"}}
    assert services["cluster-nginx"]["environment"]["UPSTREAM_1"] == "cluster-replica-1:8000"
