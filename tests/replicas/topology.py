"""The replicated topology of the replica tests: a Redis of its own, N uvicorn replicas of
``examples.replicated_app``, and nginx as a round-robin proxy, all on 127.0.0.1.

``with topology() as topo:`` starts them (bounded waits), yields a :class:`Topology` and stops
everything on exit. Tests may stop and restart the Redis (``topo.redis.stop()`` / ``start()``,
data kept: append-only file, fsync always) and ``kill -9`` a replica (``replica.kill()``,
``replica.start()`` brings it back on the same port). nginx renders the committed
``deploy/nginx.conf.template`` (the file compose.yaml mounts) into a temporary prefix and runs
in the foreground (``daemon off``) as the current user.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from servers import free_port

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "nginx.conf.template"
APP = "examples.replicated_app:app"
START_SECONDS = 20.0

REPLICA_SETTINGS = (
    "MCP_SESSION_STORE_URL",
    "MCP_STORAGE_URL",
    "MCP_REQUEST_STATE_KEY",
    "MCP_AUTH_MODE",
    "MCP_SSE_RETRY_MS",
    "MCP_SESSION_LEASE_SECONDS",
)
"""The MCP_* variables every replica gets (compose.yaml sets the same ones: tests/replicas/test_compose.py)."""

LEASE_SECONDS = 3.0
"""``MCP_SESSION_LEASE_SECONDS`` of the test replicas: a dead holder's GET lease lapses this fast."""

PLACEHOLDER = re.compile(r"\$\{([A-Z0-9_]+)\}")


def render_template(text: str, values: Mapping[str, str]) -> str:
    """Substitute ``${NAME}`` as the nginx image's envsubst does (only the names given; nginx's
    own ``$host`` etc. stay). Raises KeyError naming a placeholder left without a value."""
    missing = sorted({m.group(1) for m in PLACEHOLDER.finditer(text)} - set(values))
    if missing:
        raise KeyError(f"no value for {missing} in {TEMPLATE.name}")
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def binary(name: str, *fallbacks: str) -> str:
    """The path of ``name`` (PATH, then ``fallbacks``); skip the test when absent, or fail under
    ``MCP_REQUIRE_SERVICES=1`` (the test command installs it: scripts/services.sh)."""
    found = shutil.which(name) or next((f for f in fallbacks if os.access(f, os.X_OK)), None)
    if found is None:
        message = f"{name} is not installed (scripts/services.sh start installs it)"
        if os.environ.get("MCP_REQUIRE_SERVICES") == "1":
            pytest.fail(f"MCP_REQUIRE_SERVICES=1 but {message}")
        pytest.skip(message)
    return found


def _wait(what: str, ready: object, proc: subprocess.Popen[bytes], log: Path, timeout: float = START_SECONDS) -> None:
    assert callable(ready)
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready within {timeout} s:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@dataclass
class RedisServer:
    """A redis-server of the tests' own (never the shared one), data in ``dir``."""

    dir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def _pong(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        log = self.dir / "redis.log"
        self.proc = subprocess.Popen(
            [binary("redis-server"), "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
             "--logfile", str(log), "--protected-mode", "yes"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        log.touch()
        _wait("redis-server", self._pong, self.proc, log)

    def stop(self) -> None:
        """SIGTERM: Redis fsyncs its append-only file and exits (a restart finds every key)."""
        _stop(self.proc)


@dataclass
class SharedRedis:
    """A deployment of ``scripts/services.sh`` (the cluster, the sentinel group: issue 21) the
    topology uses instead of a Redis of its own; never stopped by the tests (a failover test
    kills a node itself and ``services.sh start`` brings it back)."""

    kind: str
    base_url: str

    def url(self, db: int = 0) -> str:
        if self.kind == "sentinel":
            return self.base_url.rsplit("/", 1)[0] + f"/{db}"
        return self.base_url  # a cluster has database 0 only: the stores' key prefixes keep them apart

    @property
    def running(self) -> bool:
        return True

    def start(self) -> None:
        return None

    def stop(self) -> None:
        raise AssertionError("the shared cluster / sentinel group is not stopped by a test (see test_failover.py)")


@dataclass
class Replica:
    """One uvicorn process serving the example app on its own port."""

    name: str
    env: dict[str, str]
    log: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    app: str = APP

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", self.app, "--host", "127.0.0.1", "--port", str(self.port), "--no-access-log",
             "--proxy-headers", "--forwarded-allow-ips", "127.0.0.1", "--timeout-graceful-shutdown", "3"],
            cwd=ROOT, env={**self.env, "REPLICA_NAME": self.name},
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )  # fmt: skip
        out.close()
        _wait(f"replica {self.name}", lambda: _accepts(self.port), self.proc, self.log)

    def kill(self) -> None:
        """``kill -9``: no shutdown, no lease released, connections cut."""
        _stop(self.proc, signal.SIGKILL)

    def stop(self) -> None:
        _stop(self.proc)


@dataclass
class Nginx:
    """nginx in the foreground with a generated prefix; round robin over ``upstreams``."""

    prefix: Path
    upstreams: list[str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def access_log(self) -> Path:
        return self.prefix / "access.log"

    def config(self) -> str:
        """The main nginx.conf: the foreground process, files under the prefix, and the committed
        template rendered as the http block's one include (what compose.yaml's nginx serves)."""
        site = render_template(
            TEMPLATE.read_text(),
            {"NGINX_LISTEN": f"127.0.0.1:{self.port}", "UPSTREAM_1": self.upstreams[0], "UPSTREAM_2": self.upstreams[1]},
        )
        (self.prefix / "mcp.conf").write_text(site)
        temp = "\n".join(
            f"    {kind}_temp_path {self.prefix / 'tmp' / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        return f"""daemon off;
worker_processes 1;
pid {self.prefix / "nginx.pid"};
error_log {self.prefix / "error.log"} warn;
events {{ worker_connections 256; }}
http {{
    log_format mcp '$request_method $status $upstream_addr $http_mcp_session_id';
    access_log {self.access_log} mcp;
{temp}
    include {self.prefix / "mcp.conf"};
}}
"""

    def start(self) -> None:
        (self.prefix / "tmp").mkdir(parents=True, exist_ok=True)
        (self.prefix / "nginx.conf").write_text(self.config())
        log = self.prefix / "error.log"
        log.touch()
        self.proc = subprocess.Popen(
            [binary("nginx", os.environ.get("MCP_TEST_NGINX", ""), "/usr/sbin/nginx"), "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"), "-e", str(log)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        _wait("nginx", lambda: _accepts(self.port), self.proc, log)

    def stop(self) -> None:
        _stop(self.proc, signal.SIGQUIT)  # graceful: finish open requests, then exit


@dataclass
class Topology:
    """What :func:`topology` started. ``url`` is the MCP endpoint through the proxy."""

    redis: RedisServer | SharedRedis
    replicas: list[Replica]
    nginx: Nginx
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.nginx.port}/mcp"

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def other(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name != name)

    def heal(self) -> None:
        """Bring back whatever a test stopped (Redis, killed replicas); wait until each is ready."""
        if not self.redis.running:
            self.redis.start()
        for replica in self.replicas:
            if not replica.running:
                replica.start()
        for replica in self.replicas:
            wait_ready(replica.base)

    def logs(self) -> str:
        return "\n".join(f"--- {r.name}\n{r.log.read_text(errors='replace')[-4000:]}" for r in self.replicas)


def wait_ready(base: str, timeout: float = START_SECONDS) -> None:
    """Poll ``GET base/mcp/ready`` until it answers 200 (bounded)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{base}/mcp/ready", timeout=2.0)
            if response.status_code == 200:
                return
            last = f"{response.status_code} {response.text}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.1)
    raise RuntimeError(f"{base}/mcp/ready not 200 within {timeout} s: {last}")


def replica_env(redis: RedisServer | SharedRedis) -> dict[str, str]:
    """The environment of every replica: this process's, minus any MCP_* setting, plus the
    settings all replicas must share (the same values on each)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_") or k.startswith("MCP_TEST_")}
    env.update(
        MCP_SESSION_STORE_URL=redis.url(0),
        MCP_STORAGE_URL=redis.url(1),
        MCP_REQUEST_STATE_KEY=secrets.token_urlsafe(32),
        MCP_AUTH_MODE="none",
        MCP_SSE_RETRY_MS="200",
        MCP_SESSION_LEASE_SECONDS=str(LEASE_SECONDS),
    )
    assert {k for k in env if k.startswith("MCP_") and not k.startswith("MCP_TEST_")} == set(REPLICA_SETTINGS)
    return env


@contextmanager
def topology(names: tuple[str, ...] = ("a", "b"), deployment: str = "single", app: str = APP) -> Iterator[Topology]:
    """Start Redis, a replica per name and nginx; stop them all (by their own pids) on exit.

    ``deployment``: ``"single"`` (a Redis of the topology's own), ``"cluster"`` or
    ``"sentinel"`` (the shared ones of ``scripts/services.sh``, issue 21)."""
    with tempfile.TemporaryDirectory(prefix="mcp-topology-") as tmp, ExitStack() as stack:
        base = Path(tmp)
        base.chmod(0o755)  # nginx's workers (user nobody when started as root) read under the prefix
        redis: RedisServer | SharedRedis
        if deployment == "single":
            (base / "redis").mkdir()
            redis = RedisServer(base / "redis")
            redis.start()
            stack.callback(redis.stop)
        else:
            from replica_app import deployment_url

            redis = SharedRedis(deployment, deployment_url(deployment))
        env = replica_env(redis)
        replicas = [Replica(name, env, base / f"replica-{name}.log", app=app) for name in names]
        for replica in replicas:
            replica.start()
            stack.callback(replica.stop)
        nginx = Nginx(base / "nginx", [f"127.0.0.1:{r.port}" for r in replicas])
        nginx.prefix.mkdir()
        nginx.prefix.chmod(0o755)
        nginx.start()
        stack.callback(nginx.stop)
        topo = Topology(redis, replicas, nginx, env)
        for replica in replicas:
            wait_ready(replica.base)
        yield topo
