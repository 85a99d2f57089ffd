"""The servers compared, and one uvicorn process per server and environment variant.

Each server is one ASGI app started as ``python -m uvicorn module:app`` (one worker, loopback,
uvicorn's own choice of httptools + uvloop when installed, access log off) from the repository
root with the root on ``PYTHONPATH``: ``bench.servers`` and, for the project, ``fastapi_mcp_ctx``
are imported from this checkout. Workloads d, s and p need a server configured differently
(``ENV_*`` below), so those run in a separate process of the same server; the default process,
which serves a b c cm, registers exactly ``BENCH_TOOLS`` tools.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HOST = "127.0.0.1"  # loopback only
ROOT = Path(__file__).resolve().parents[2]
CLK_TCK = os.sysconf("SC_CLK_TCK")

EXTRA = {"BENCH_EXTRA_TOOLS": "1"}  # lookup + countdown
STATEFUL = {"BENCH_STATEFUL": "1"}  # 2025 sessions
SSE = {"BENCH_SSE": "1"}  # peers: SSE response mode (their JSON mode drops a call's notifications)
ENV_PROJECT = {"d": EXTRA, "p": EXTRA, "s": STATEFUL}  # fastapi_mcp_ctx switches to SSE by itself
ENV_PEER = {"d": EXTRA, "p": {**EXTRA, **SSE}, "s": STATEFUL}
ENV_CEILING = {"d": EXTRA}  # only d declares dependencies on the route; p and s need nothing
SESSION_STORE_URL = os.environ.get("BENCH_SESSION_STORE_URL", "redis://127.0.0.1:6379/0")
# Sessions in Redis: a store replicas share needs the sealing key every replica shares (a fixed
# benchmark-only key: 32 bytes, base64url).
REDIS_SESSIONS = {"MCP_SESSION_STORE_URL": SESSION_STORE_URL, "MCP_REQUEST_STATE_KEY": "YmVuY2gtb25seS1rZXktbm90LWEtc2VjcmV0LTAwMDA"}
# docs/deployment.md's advice for Redis sessions (requests wait mid-flight); BENCH_GC_FREEZE=0 measures without.
REDIS_SESSIONS["MCP_GC_FREEZE"] = os.environ.get("BENCH_GC_FREEZE", "1")
ENV_PROJECT_REDIS = {**ENV_PROJECT, "s": {**STATEFUL, **REDIS_SESSIONS}}
# Sessions on a Redis Cluster (issue 21): BENCH_CLUSTER_URL, default the cluster of scripts/services.sh.
CLUSTER_URL = os.environ.get("BENCH_CLUSTER_URL", "redis+cluster://127.0.0.1:57001,127.0.0.1:57002,127.0.0.1:57003")
ENV_PROJECT_CLUSTER = {**ENV_PROJECT, "s": {**STATEFUL, **REDIS_SESSIONS, "MCP_SESSION_STORE_URL": CLUSTER_URL}}
OTEL = {"BENCH_OTEL": "1"}  # the OpenTelemetry SDK, exporters that drop everything (bench/servers/otel.py)


@dataclass(frozen=True)
class ServerSpec:
    """``name`` (CLI), ``title`` (table), ``app`` (``module:attr``), ``env`` (workload id → variant env),
    ``base_env`` (every process of this server)."""

    name: str
    title: str
    app: str
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    project: bool = False  # runs with --project-python
    ceiling: bool = False
    opt_in: bool = False  # only when named with -s (needs a service, or measures a variant)
    base_env: dict[str, str] = field(default_factory=dict)


SERVERS: dict[str, ServerSpec] = {
    s.name: s
    for s in [
        ServerSpec("project", "fastapi-mcp-ctx", "examples.bench_app:app", ENV_PROJECT, project=True),
        ServerSpec("sdk", "official SDK (mcp)", "bench.servers.sdk_server:app", ENV_PEER),
        ServerSpec("fastmcp", "FastMCP", "bench.servers.fastmcp_server:app", ENV_PEER),
        ServerSpec("fastapi", "bare FastAPI (ceiling)", "bench.servers.fastapi_ceiling:app", ENV_CEILING, ceiling=True),
        # -s project-redis: sessions in Redis (BENCH_SESSION_STORE_URL, default redis://127.0.0.1:6379/0)
        ServerSpec("project-redis", "fastapi-mcp-ctx, Redis sessions", "examples.bench_app:app", ENV_PROJECT_REDIS, project=True, opt_in=True),
        # -s project-redis-cluster: sessions on a Redis Cluster (BENCH_CLUSTER_URL), beside -s project-redis
        ServerSpec("project-redis-cluster", "fastapi-mcp-ctx, Redis Cluster sessions", "examples.bench_app:app", ENV_PROJECT_CLUSTER,
                   project=True, opt_in=True),
        # -s project-otel: the OpenTelemetry SDK configured (BENCH_OTEL=1), beside -s project (off)
        ServerSpec("project-otel", "fastapi-mcp-ctx, OpenTelemetry SDK", "examples.bench_app:app", ENV_PROJECT,
                   project=True, opt_in=True, base_env=OTEL),
    ]
}


def plan(specs: list[ServerSpec], workload_ids: list[str]) -> list[tuple[ServerSpec, dict[str, str], list[str]]]:
    """The processes to start: per server, one per distinct environment its workloads need."""
    out = []
    for spec in specs:
        groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
        for wl in workload_ids:
            groups.setdefault(tuple(sorted({**spec.base_env, **spec.env.get(wl, {})}.items())), []).append(wl)
        out += [(spec, dict(env), wls) for env, wls in groups.items()]
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process (all threads) and of its live child processes (Granian serves in
    a worker process), in clock ticks (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    for child in _children(pid):
        try:
            ticks += cpu_ticks(child)
        except OSError:
            pass  # exited meanwhile
    return ticks


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


ASGI_SERVER = os.environ.get("BENCH_ASGI_SERVER", "uvicorn")
"""``uvicorn`` (default: httptools + uvloop) or ``granian`` (``--interface asgi``, one worker, uvloop): every
server of a run, the ceiling included, is served by it."""


def server_command(python: str, app: str, port: int) -> list[str]:
    """The command serving ``app`` on loopback ``port`` with :data:`ASGI_SERVER`, access log off."""
    if ASGI_SERVER == "granian":
        return [python, "-m", "granian", "--interface", "asgi", "--host", HOST, "--port", str(port), "--workers", "1",
                "--loop", "uvloop", "--log-level", "warning", "--no-ws", app]  # fmt: skip
    return [python, "-m", "uvicorn", app, "--host", HOST, "--port", str(port), "--no-access-log", "--log-level", "warning"]


def rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), None)
    except OSError:
        return None


class ServerProcess:
    """One running server: ``spec`` started with ``env`` (a variant, or ``{}``), serving ``workloads``."""

    def __init__(self, spec: ServerSpec, python: str, env: dict[str, str], workloads: list[str], log_dir: Path) -> None:
        self.spec, self.python, self.env, self.workloads = spec, python, env, workloads
        self.label = spec.name + (f"[{','.join(workloads)}]" if env else "")
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}/mcp"
        self.log_path = log_dir / ("server-" + re.sub(r"[^\w-]+", "_", self.label) + ".log")
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._started = 0.0

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def spawn(self, base_env: dict[str, str], cpu: int | None) -> None:
        """Start the server (:data:`ASGI_SERVER`, pinned to ``cpu`` with taskset when given); :meth:`wait_listening` waits for it."""
        cmd = server_command(self.python, self.spec.app, self.port)
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu), *cmd]
        env = {**os.environ, **base_env, **self.env, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        self._started = time.monotonic()
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_listening(self, timeout: float = 90.0) -> float:
        """Wait until the server accepts connections; the seconds since :meth:`spawn`.

        Raises:
            RuntimeError: the process exited or did not listen within ``timeout`` seconds (with its log).
        """
        assert self.proc is not None, "not spawned"
        while time.monotonic() - self._started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return time.monotonic() - self._started
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.label} did not listen within {timeout:.0f} s:\n{self.tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGINT (uvicorn's graceful shutdown, then ``atexit`` prints the counters), SIGKILL after 10 s."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()

    def tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def counters(self) -> dict[str, Any] | None:
        """``get_db``'s opened/closed counts, printed by the process at exit (``bench/servers/tools.py``)."""
        found = re.findall(r"^BENCH_COUNTERS (\{.*\})$", self.tail(100_000), re.M)
        return json.loads(found[-1]) if found else None
