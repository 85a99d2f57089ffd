"""A Redis deployment that is misconfigured says what to do; one that is down answers 503; one
that restarted serves the next command (review of the Redis Cluster and Sentinel support):

- every failure of redis-py's cluster client (``RedisClusterException`` and its family, which
  are not ``RedisError``\\ s) is the typed 503 on every path (a command, the bus, ``check()``),
  and a cluster URL none of whose nodes ever answered is a ConfigurationError;
- a ``redis://`` URL that names one node of a cluster fails the first command (every key, not
  only those of other nodes' slots) with a ConfigurationError naming ``redis+cluster://``;
- a sentinel URL whose master name no sentinel monitors, or whose "sentinel" is a data node,
  is a ConfigurationError saying so, while sentinels that do not answer stay a 503;
- after a Redis restart (data kept) a non-idempotent script succeeds on its first try: the
  pooled connections the old server closed are replaced before a command is written on them.

The failure tests run on servers of their own (``own_redis``, :func:`own_cluster`); the shared
cluster and sentinels only receive read-only commands (``INFO``, ``SENTINEL
GET-MASTER-ADDR-BY-NAME``) and scripts they refuse before running them (``CROSSSLOT``).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import LEGACY, Wire, assert_error, make_app, mcp_settings, open_client, result_of, rpc
from fastapi import Depends
from own_redis import own_redis
from redis.exceptions import (
    ClusterCrossSlotError,
    ClusterDownError,
    MovedError,
    RedisClusterException,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from replica_app import deployment_url

from fastapi_mcp_ctx import Context, McpRouter, mcp_context
from fastapi_mcp_ctx._replicas.link import RedisLink, Script
from fastapi_mcp_ctx._replicas.redis_bus import RedisBus
from fastapi_mcp_ctx.backends._redis_client import _ANSWERED, LoopClient, Slots, _every_sentinel_unreached, refusal
from fastapi_mcp_ctx.backends._redis_url import parse_redis_url
from fastapi_mcp_ctx.backends.redis import RedisBackend
from fastapi_mcp_ctx.errors import ConfigurationError, StateUnavailableError

INCR = Script("return redis.call('INCR', KEYS[1])")
"""A script that must never run twice for one call."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _app(url: str) -> tuple[McpRouter, Any]:
    router = McpRouter(settings=mcp_settings(session_store_url=url, storage_url=url))

    @router.tool()
    async def remember(text: str, ctx: Context = Depends(mcp_context)) -> str:
        """Store text in ctx.state."""
        await ctx.state.set("last", text)
        return text

    return router, make_app(router)


async def _calls(app: Any) -> list[Any]:
    """A 2026 tools/call, and a 2025 one (its initialize's answer when the session is refused)."""
    async with open_client(app) as client:
        wire = Wire(client)
        modern = await wire.call_tool("modern", "remember", {"text": "hi"}, check=False)
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}
        initialize = await wire.post(rpc("initialize", params, 0))
        if initialize.status_code != 200:
            return [modern, initialize]
        wire.session = initialize.headers["mcp-session-id"]
        await wire.post(rpc("notifications/initialized", None, None), {"mcp-session-id": wire.session, "mcp-protocol-version": LEGACY})
        return [modern, await wire.call_tool("legacy", "remember", {"text": "hi"}, check=False)]


# ------------------------------------------------------------------ a cluster of our own


class OwnCluster:
    """Three masters (no replicas) on free loopback ports under a temp dir; :meth:`restart` one."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ports = [_free_port() for _ in range(3)]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)
        self.bus_ports = {p: _free_port() for p in self.ports}

    def start(self, port: int) -> None:
        node = self.folder / str(port)
        node.mkdir(exist_ok=True)
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(node), "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always", "--cluster-enabled", "yes"]
        args += ["--cluster-port", str(self.bus_ports[port]), "--cluster-config-file", "nodes.conf"]
        args += ["--cluster-require-full-coverage", "no", "--cluster-node-timeout", "2000"]
        self.procs[port] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait(lambda: self._cli(port, "ping") == "PONG", f"node {port}")

    def stop(self, port: int) -> None:
        proc = self.procs.pop(port, None)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)

    def restart(self, port: int) -> None:
        self.stop(port)
        self.start(port)
        self._wait(lambda: "cluster_state:ok" in self._cli(port, "cluster", "info"), "the cluster after a restart")

    def create(self) -> None:
        for port in self.ports:
            self.start(port)
        nodes = [f"127.0.0.1:{p}" for p in self.ports]
        subprocess.run(
            ["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
        )  # fmt: skip
        for port in self.ports:
            self._wait(lambda p=port: "cluster_state:ok" in self._cli(p, "cluster", "info"), "the cluster")

    @staticmethod
    def _cli(port: int, *args: str) -> str:
        done = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=10, check=False)
        return done.stdout.strip()

    @staticmethod
    def _wait(ready: Any, what: str) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.05)
        raise RuntimeError(f"{what} did not come up")

    def stop_all(self) -> None:
        for port in list(self.procs):
            self.stop(port)


@contextmanager
def own_cluster() -> Iterator[OwnCluster]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server / redis-cli are not on PATH")
    with tempfile.TemporaryDirectory(prefix="mcp-own-cluster-") as folder:
        cluster = OwnCluster(Path(folder))
        try:
            cluster.create()
            yield cluster
        finally:
            cluster.stop_all()


# ------------------------------------------------------------------ fault 1: the cluster client's exceptions


@pytest.mark.parametrize(
    "exc",
    [
        RedisClusterException("Redis Cluster cannot be connected. Please provide at least one reachable node"),
        SlotNotCoveredError("Slot 42 is not covered by the cluster"),
        ClusterDownError("The cluster is down"),
        RedisConnectionError("Connection closed by server."),
        OSError("Network is unreachable"),
    ],
)
async def test_every_failure_of_the_cluster_client_is_the_typed_503_once_the_cluster_answered(exc: BaseException) -> None:
    target = parse_redis_url("redis+cluster://10.255.0.1:7000")
    _ANSWERED.add(target.url)  # it answered once: now it is an outage, not a typo
    client = LoopClient(SimpleNamespace(execute_command=None), False, Slots(2, 1.0), target)  # type: ignore[arg-type]

    async def fails(_c: LoopClient) -> None:
        raise exc

    def translate(e: BaseException) -> Exception:
        return ConfigurationError("refused") if refusal(e) is not None else StateUnavailableError("down")

    for idempotent in (True, False):
        with pytest.raises(StateUnavailableError):
            await client.attempt(fails, translate, idempotent=idempotent)


def test_a_redirection_on_a_plain_url_names_the_cluster_form() -> None:
    for exc in (MovedError("3999 127.0.0.1:6381"), ClusterCrossSlotError("Keys in request don't hash to the same slot")):
        problem = refusal(exc)
        assert problem is not None and "redis+cluster://" in problem


@pytest.mark.redis
async def test_a_cluster_that_stopped_answering_is_a_503_on_every_path() -> None:
    with own_cluster() as cluster:
        router, app = _app(cluster.url)
        try:
            modern, legacy = await _calls(app)
            assert result_of(modern)["isError"] is False and result_of(legacy)["isError"] is False
            cluster.stop_all()
            for response in await _calls(app):
                error = assert_error(response, 503, -32603)
                assert error["data"]["reason"] == "backend_unavailable" and response.headers["retry-after"]
            with pytest.raises(StateUnavailableError):
                await router.check()
            link = RedisLink(cluster.url)
            bus = RedisBus(link, timeout=5.0)
            _ANSWERED.add(cluster.url)
            with pytest.raises(StateUnavailableError):
                await link.call("session store", "PING")
            with pytest.raises(StateUnavailableError):
                await bus.subscribe("c", lambda _m: None)
            await bus.aclose()
            await link.aclose()
        finally:
            await router.aclose()


async def test_a_cluster_url_no_node_of_which_answers_is_a_configuration_error() -> None:
    url = f"redis+cluster://127.0.0.1:{_free_port()}"
    router, app = _app(url)
    try:
        with pytest.raises(ConfigurationError, match="no node of the redis\\+cluster:// URL answers"):
            await router.check()
        modern, legacy = await _calls(app)
        for response in (modern, legacy):
            error = assert_error(response, 500, -32603)
            assert "check its host:port list" in error["message"] and "retry-after" not in response.headers
            assert "127.0.0.1" not in error["message"]
    finally:
        await router.aclose()


# ------------------------------------------------------------------ fault 2: redis:// to a cluster node


@pytest.mark.redis
async def test_a_plain_url_to_a_cluster_node_fails_the_first_request_naming_the_cluster_form() -> None:
    host, port = parse_redis_url(deployment_url("cluster")).nodes[0]
    url = f"redis://{host}:{port}/0"
    router, app = _app(url)
    try:
        for response in await _calls(app):
            error = assert_error(response, 500, -32603)
            assert "redis+cluster://" in error["message"] and "retry-after" not in response.headers
        backend = RedisBackend(url)
        for i in range(12):  # some of these keys are in the node's own slots: every one fails anyway
            with pytest.raises(ConfigurationError, match=r"redis\+cluster://"):
                await backend.get(f"t/tenant/key-{i}")
        await backend.aclose()
    finally:
        await router.aclose()


# ------------------------------------------------------------------ fault 3: Sentinel


@pytest.mark.redis
async def test_a_master_name_no_sentinel_monitors_is_a_configuration_error(caplog: pytest.LogCaptureFixture) -> None:
    sentinels = parse_redis_url(deployment_url("sentinel")).nodes[:2]
    url = "redis+sentinel://" + ",".join(f"{h}:{p}" for h, p in sentinels) + "/nosuchmaster/0"
    router, app = _app(url)
    try:
        with caplog.at_level(logging.ERROR), pytest.raises(ConfigurationError) as info:
            await router.check()
        assert "no sentinel monitors master 'nosuchmaster'" in info.value.message
        assert "check the name in the URL path" in info.value.message
        asked = [r.getMessage() for r in caplog.records if "nosuchmaster" in r.getMessage()]
        assert any(all(f"{h}:{p}" in m for h, p in sentinels) for m in asked), asked  # the log names the sentinels
        for response in await _calls(app):
            error = assert_error(response, 500, -32603)
            assert "nosuchmaster" in error["message"] and "retry-after" not in response.headers
    finally:
        await router.aclose()


@pytest.mark.redis
async def test_a_sentinel_url_naming_a_data_node_says_it_is_not_a_sentinel() -> None:
    with own_redis() as server:
        url = f"redis+sentinel://127.0.0.1:{server.port}/mymaster/0"
        for store in (RedisBackend(url), RedisLink(url)):
            with pytest.raises(ConfigurationError, match="is a Redis data node, not a sentinel"):
                await store.check()
            await store.aclose()


def test_a_sentinel_that_answered_with_an_error_is_asked_again_whatever_redis_py_lists() -> None:
    """redis-py 8.2's ``MasterNotFoundError`` names every sentinel it tried, those that answered
    with an error reply too: only a text whose every sentinel was unreachable skips the look."""
    unreached = "<Redis(<ConnectionPool(<Connection(host=127.0.0.1,port=1,db=0)>)>)> - ConnectionError('refused')"
    data_node = (
        "<Redis(<ConnectionPool(<Connection(host=127.0.0.1,port=2,db=0)>)>)> - ResponseError(\"unknown command 'SENTINEL'\"): "
        "unknown command 'SENTINEL', with args beginning with: 'MASTERS'"
    )
    assert _every_sentinel_unreached(f"No master found for 'm' : {unreached}, {unreached}", 2)  # pyright: ignore[reportPrivateUsage]
    assert not _every_sentinel_unreached(f"No master found for 'm' : {unreached}", 2)  # pyright: ignore[reportPrivateUsage]
    assert not _every_sentinel_unreached(f"No master found for 'm' : {data_node}", 1)  # pyright: ignore[reportPrivateUsage]
    assert not _every_sentinel_unreached(f"No master found for 'm' : {unreached}, {data_node}", 2)  # pyright: ignore[reportPrivateUsage]


async def test_sentinels_that_do_not_answer_are_an_outage_not_a_misconfiguration() -> None:
    url = f"redis+sentinel://127.0.0.1:{_free_port()},127.0.0.1:{_free_port()}/mymaster/0"
    for store in (RedisBackend(url), RedisLink(url)):
        started = time.monotonic()
        with pytest.raises(StateUnavailableError):
            await store.check()
        # refused at once: no retries of redis-py's own (3, with backoff: 16 s before) on the sentinels
        assert time.monotonic() - started < 8.0
        await store.aclose()


# ------------------------------------------------------------------ fault 4: a restart


@pytest.mark.redis
async def test_a_non_idempotent_script_succeeds_on_its_first_try_after_a_restart() -> None:
    with own_redis() as server:
        link = RedisLink(server.url)
        backend = RedisBackend(server.url)
        try:
            assert await link.eval("store", INCR, ["n"], [], idempotent=False) == 1
            await backend.set("a", "1")
            await backend.set("b", "2")
            assert await backend.take("a") == "1"
            await asyncio.to_thread(server.stop)  # the loop runs meanwhile, as it does in a server
            await asyncio.to_thread(server.start)  # same port and dir: the data is kept (AOF)
            assert await link.eval("store", INCR, ["n"], [], idempotent=False) == 2  # once, on the first try
            assert await backend.take("b") == "2"  # a take is never retried: it must not need one
        finally:
            await link.aclose()
            await backend.aclose()


@pytest.mark.redis
async def test_a_non_idempotent_script_succeeds_after_a_cluster_node_restarts() -> None:
    with own_cluster() as cluster:
        link = RedisLink(cluster.url)
        try:
            keys = [f"{{k{i}}}" for i in range(12)]  # spread over the three masters
            for key in keys:
                assert await link.eval("store", INCR, [key], [], idempotent=False) == 1
            await asyncio.to_thread(cluster.restart, cluster.ports[0])
            for key in keys:
                assert await link.eval("store", INCR, [key], [], idempotent=False) == 2
        finally:
            await link.aclose()


@pytest.mark.redis
async def test_a_connection_idle_past_the_health_check_interval_is_pinged_and_replaced_before_a_command() -> None:
    with own_redis() as server:
        link = RedisLink(server.url)
        try:
            assert await link.eval("store", INCR, ["n"], [], idempotent=False) == 1
            server.stop()  # the loop is blocked: the closed socket's EOF is not read yet, only a PING finds it
            server.start()
            pool: Any = link.commands().redis.connection_pool
            for conn in pool._available_connections:
                assert not conn._reader.at_eof()
                conn.next_health_check = -1  # the clock, controlled: idle longer than the interval
            assert await link.eval("store", INCR, ["n"], [], idempotent=False) == 2  # once, on the first try
        finally:
            await link.aclose()


async def test_a_server_that_refuses_info_is_not_taken_for_a_misconfiguration() -> None:
    """The first-use ``INFO cluster`` is a look, not a requirement: a user without ``INFO`` (ACL)
    or a server that renamed it serves its commands as before."""
    from redis.exceptions import NoPermissionError, ResponseError

    for refused in (NoPermissionError("this user has no permissions to run the 'info' command"), ResponseError("unknown command 'INFO'")):
        sent: list[str] = []

        async def execute(*args: Any, refused: Exception = refused, sent: list[str] = sent) -> str:
            sent.append(str(args[0]))
            if args[0] == "INFO":
                raise refused
            return "OK"

        client = LoopClient(SimpleNamespace(execute_command=execute), False, Slots(2, 1.0), parse_redis_url("redis://10.255.0.1:6379/0"))  # type: ignore[arg-type]
        for _ in range(2):
            assert await client.attempt(lambda c: c.exec("SET", "k", "v"), lambda e: StateUnavailableError(str(e)), idempotent=False) == "OK"
        assert sent == ["INFO", "SET", "SET"]  # looked once: the first success ends the look
