"""Failover under load (issue 21): the replicas (nginx + two uvicorn) on the Redis Cluster and on
the Sentinel group of scripts/services.sh; ``kill -9`` of the master that holds a live session
while 4 clients call a counted tool and 2 GET streams are open; one shard down (no replica to
promote) while sessions on the others keep working.

What must hold: a call fails only with 503 + ``Retry-After`` and only while the failover lasts;
every call acknowledged ran exactly once (the tool counts, in a file); each GET stream resumes
with ``Last-Event-ID`` with no event lost or repeated (consecutive sequences per stream); the
service answers the victim's session again within the node timeout plus 5 s. Margins: the
bound is asserted with a generous allowance for a loaded machine; the measured recovery is
printed (``-s``) for the report.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from redis import Redis
from redis.crc import key_slot

from fastapi_mcp_ctx.backends._redis_url import parse_redis_url

from .topology import ROOT, Topology, topology
from .wire import call, initialize, legacy_headers, result_of, stream

pytestmark = [pytest.mark.replicas, pytest.mark.redis, pytest.mark.slow]

NODE_TIMEOUT = 3.0
"""cluster-node-timeout and the sentinels' down-after-milliseconds of scripts/services.sh, seconds."""

ALLOWANCE = 20.0
"""Added to the issue's bound (node timeout + 5 s) for a loaded 2-core machine: a failure here
means the service did not recover, not that the machine was busy."""

SERVICES_SH = ROOT / "scripts" / "services.sh"


@pytest.fixture(scope="module", params=["cluster", "sentinel"])
def deployment(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def count_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("failover") / "counted.txt"


@pytest.fixture(scope="module")
def failover_topo(deployment: str, count_file: Path) -> Iterator[Topology]:
    os.environ["FAILOVER_COUNT_FILE"] = str(count_file)
    try:
        with topology(deployment=deployment, app="tests.replicas.failover_app:app") as topo:
            yield topo
    finally:
        os.environ.pop("FAILOVER_COUNT_FILE", None)
        heal(deployment)


def heal(deployment: str) -> None:
    """services.sh start brings a killed node back (as a replica of the promoted one)."""
    subprocess.run(["bash", str(SERVICES_SH), "start", f"redis-{deployment}"], check=True, timeout=120, stdin=subprocess.DEVNULL)


def master_of_session(topo: Topology, deployment: str, session: str) -> tuple[int, int]:
    """(port, pid) of the master holding ``session``'s keys (its hash tag's slot, or the
    sentinel group's master)."""
    target = parse_redis_url(topo.env["MCP_SESSION_STORE_URL"])
    host, port = target.nodes[0]
    with Redis(host=host, port=port, decode_responses=True, socket_timeout=5) as r:
        if deployment == "sentinel":
            port = int(r.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", target.service)[1])
        else:
            slot = key_slot(session.encode())
            for start, end, master, *_ in r.execute_command("CLUSTER", "SLOTS"):
                if int(start) <= slot <= int(end):
                    port = int(master[1])
    with Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=5) as r:
        pid = int(r.info("server")["process_id"])
    return port, pid


@dataclass
class Outcomes:
    acked: list[str] = field(default_factory=lambda: [])
    refused: list[tuple[float, bool]] = field(default_factory=lambda: [])  # (when, had Retry-After)
    other: list[tuple[float, int, str]] = field(default_factory=lambda: [])
    victim_ok: list[float] = field(default_factory=lambda: [])


async def _client(http: httpx.AsyncClient, url: str, session: str, out: Outcomes, victim: bool, stop: anyio.Event) -> None:
    while not stop.is_set():
        token = uuid.uuid4().hex
        try:
            response = await http.post(url, json=call("counted", {"token": token}, request_id=token), headers=legacy_headers(session))
        except httpx.HTTPError as exc:
            out.other.append((anyio.current_time(), 0, repr(exc)))
            continue
        now = anyio.current_time()
        if response.status_code == 200:
            message = await result_of(response)
            if "result" in message and not message["result"].get("isError"):
                out.acked.append(token)
                if victim:
                    out.victim_ok.append(now)
                continue
            out.other.append((now, 200, str(message)[:300]))
        elif response.status_code == 503:
            out.refused.append((now, "retry-after" in response.headers))
            await anyio.sleep(0.1)
        else:
            out.other.append((now, response.status_code, response.text[:300]))
            await anyio.sleep(0.1)


@dataclass
class Reader:
    """A GET stream read until ``stop``, resumed with ``Last-Event-ID`` whenever it breaks."""

    session: str
    events: list[tuple[str, int, str | None]] = field(default_factory=lambda: [])  # (stream, seq, poke text)
    resumes: int = 0

    async def run(self, http: httpx.AsyncClient, url: str, stop: anyio.Event) -> None:
        last: str | None = None
        while not stop.is_set():
            headers = legacy_headers(self.session, accept="text/event-stream")
            if last is not None:
                headers["last-event-id"] = last
            try:
                async with stream(http, "GET", url, headers) as sse:
                    if sse.status != 200:
                        await anyio.sleep(0.2)
                        continue
                    while not stop.is_set():
                        with anyio.move_on_after(0.5):
                            event = await sse.next(timeout=3600)
                            if event is None:
                                break
                            if event.id is not None:
                                stream_id, _, seq = event.id.partition(":")
                                data: Any = event.data
                                text = data["params"]["data"] if isinstance(data, dict) and "params" in data else None
                                self.events.append((stream_id, int(seq), text))
                                last = event.id
                        continue
            except (httpx.HTTPError, anyio.EndOfStream):
                pass
            self.resumes += 1
            await anyio.sleep(0.2)

    def check(self) -> None:
        """Consecutive sequences per stream (nothing lost, nothing repeated); no poke twice."""
        by_stream: dict[str, list[int]] = {}
        for stream_id, seq, _ in self.events:
            by_stream.setdefault(stream_id, []).append(seq)
        for stream_id, seqs in by_stream.items():
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), (stream_id, seqs)
        texts = [t for _, _, t in self.events if t is not None]
        assert [t for t, n in Counter(texts).items() if n > 1] == []


DRAIN = 3.0
"""Seconds the GET streams keep reading after the last poke was acknowledged (a loaded machine
delays a bus notification's delivery to a stream by a second and more)."""

async def _poker(http: httpx.AsyncClient, url: str, sessions: list[str], acked: list[tuple[float, str, str]], stop: anyio.Event) -> None:
    n = 0
    while not stop.is_set():
        for session in sessions:
            n += 1
            text = f"p{n}"
            try:
                response = await http.post(url, json=call("poke", {"text": text}, request_id=text), headers=legacy_headers(session))
                if response.status_code == 200:
                    message = await result_of(response)
                    if message.get("result", {}).get("structuredContent", {}).get("result") is True:
                        acked.append((anyio.current_time(), session, text))
            except httpx.HTTPError:
                pass
        await anyio.sleep(0.05)


async def test_kill_9_of_the_master_holding_a_live_session_under_load(failover_topo: Topology, deployment: str, count_file: Path) -> None:
    topo = failover_topo
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http:
        sessions = [await initialize(http, topo.url) for _ in range(4)]
        victim = sessions[0]
        port, pid = master_of_session(topo, deployment, victim)
        readers = [Reader(sessions[0]), Reader(sessions[1])]
        out = Outcomes()
        pokes: list[tuple[float, str, str]] = []
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            for i, session in enumerate(sessions):
                tg.start_soon(_client, http, topo.url, session, out, i == 0, stop)
            for reader in readers:
                tg.start_soon(reader.run, http, topo.url, stop)
            stop_pokes = anyio.Event()  # the pokes end first: the streams get DRAIN seconds to deliver the last ones
            tg.start_soon(_poker, http, topo.url, [sessions[0], sessions[1]], pokes, stop_pokes)
            await anyio.sleep(2.0)
            assert out.acked and not out.refused, "no load before the kill, or refusals before it"
            killed_at = anyio.current_time()
            os.kill(pid, signal.SIGKILL)
            bound = NODE_TIMEOUT + 5.0 + ALLOWANCE
            with anyio.move_on_after(bound + 5.0):
                while not [t for t in out.victim_ok if t > killed_at + 0.5] or not [t for t, _, _ in pokes if t > killed_at + 0.5]:
                    await anyio.sleep(0.1)
            recovered = min([t for t in out.victim_ok if t > killed_at + 0.5], default=float("inf"))
            await anyio.sleep(5.0)  # load after the recovery
            stop_pokes.set()
            await anyio.sleep(DRAIN)
            stop.set()
    heal(deployment)
    recovery = recovered - killed_at
    print(f"\n{deployment}: master :{port} killed; victim's calls answered again after {recovery:.2f} s; "
          f"{len(out.acked)} calls acknowledged, {len(out.refused)} refused with 503; resumes {[r.resumes for r in readers]}")  # fmt: skip
    assert recovery < bound, f"not recovered within {bound} s"
    assert out.other == [], f"answers other than 200 and 503: {out.other[:5]}"
    assert all(has for _, has in out.refused), "a 503 without Retry-After"
    assert all(killed_at <= t <= recovered + 2.0 for t, _ in out.refused), "a 503 outside the failover"
    ran = Counter(count_file.read_text().split())
    assert [t for t in out.acked if ran[t] != 1] == [], "an acknowledged call ran other than once"
    assert [t for t, n in ran.items() if n > 1] == [], "a call ran twice"
    for reader in readers:
        reader.check()
        received = {t for _, _, t in reader.events}
        # A poke is appended to the session's GET stream in the store, never carried by the bus
        # (whose subscriptions reconnect after a failover): every poke acknowledged once the
        # failover is over reaches the stream that stayed open, live, with no resume needed.
        late = [text for when, session, text in pokes if session == reader.session and recovered < when]
        assert late and set(late) <= received, f"pokes after the recovery that never arrived: {sorted(set(late) - received)}"


def _masters(topo: Topology) -> dict[str, tuple[int, int, int]]:
    """Each master ``host:port`` → (its first slot, its last slot, its pid) (one range each in
    the cluster services.sh forms)."""
    host, port = parse_redis_url(topo.env["MCP_SESSION_STORE_URL"]).nodes[0]
    found: dict[str, tuple[int, int, int]] = {}
    with Redis(host=host, port=port, decode_responses=True, socket_timeout=5) as r:
        for start, end, master, *_ in r.execute_command("CLUSTER", "SLOTS"):
            with Redis(host=str(master[0]), port=int(master[1]), decode_responses=True, socket_timeout=5) as m:
                found[f"{master[0]}:{master[1]}"] = (int(start), int(end), int(m.info("server")["process_id"]))
    return found


def _replica_of(topo: Topology, master: str) -> Redis:
    host, port = parse_redis_url(topo.env["MCP_SESSION_STORE_URL"]).nodes[0]
    with Redis(host=host, port=port, decode_responses=True, socket_timeout=5) as r:
        for line in str(r.execute_command("CLUSTER", "NODES")).splitlines():
            parts = line.split()
            if "slave" in parts[2] and parts[3] == _node_id(r, master):
                h, p = parts[1].split("@")[0].rsplit(":", 1)
                return Redis(host=h, port=int(p), decode_responses=True, socket_timeout=5)
    raise AssertionError(f"no replica of {master}")


def _node_id(r: Redis, address: str) -> str:
    for line in str(r.execute_command("CLUSTER", "NODES")).splitlines():
        parts = line.split()
        if parts[1].split("@")[0] == address:
            return parts[0]
    raise AssertionError(address)


def _wait_not_failing(r: Redis, address: str, seconds: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = next((x for x in str(r.execute_command("CLUSTER", "NODES")).splitlines() if x.split()[1].split("@")[0] == address), "")
        if line and "fail" not in line.split()[2]:
            return
        time.sleep(0.2)
    raise AssertionError(f"{address} still failing after {seconds} s")


async def _status_of_call(http: httpx.AsyncClient, url: str, session: str) -> tuple[int, bool]:
    token = uuid.uuid4().hex
    response = await http.post(url, json=call("counted", {"token": token}, request_id=token), headers=legacy_headers(session))
    return response.status_code, "retry-after" in response.headers


async def test_one_shard_down_fails_only_its_sessions_and_ready_names_it(failover_topo: Topology, deployment: str) -> None:
    if deployment != "cluster":
        pytest.skip("a sentinel group has one shard")
    topo = failover_topo
    masters = _masters(topo)
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http:
        on: dict[str, str] = {}  # master -> a session whose keys it holds
        for _ in range(200):
            if len(on) == len(masters):
                break
            session = await initialize(http, topo.url)
            slot = key_slot(session.encode())
            on.setdefault(next(m for m, (a, b, _) in masters.items() if a <= slot <= b), session)
        assert len(on) == 3, on
        down = sorted(on)[0]
        pid = masters[down][2]
        replica = _replica_of(topo, down)
        replica.config_set("cluster-replica-no-failover", "yes")  # nothing to promote: the shard stays down
        os.kill(pid, signal.SIGSTOP)
        try:
            deadline = anyio.current_time() + NODE_TIMEOUT + 5.0 + ALLOWANCE
            while True:  # until the victim's session is refused (the shard is seen down)
                status, retry_after = await _status_of_call(http, topo.url, on[down])
                if status == 503 or anyio.current_time() > deadline:
                    break
                await anyio.sleep(0.2)
            assert (status, retry_after) == (503, True)
            for master, session in on.items():
                if master != down:
                    assert (await _status_of_call(http, topo.url, session))[0] == 200, master
            for r in topo.replicas:
                report = (await http.get(f"{r.base}/mcp/ready", timeout=30.0)).json()
                assert report["shards"].get(down, "").startswith("unavailable"), report
                assert all(v.startswith("ok") for k, v in report["shards"].items() if k != down), report
                assert report["checks"]["sessions"].startswith("degraded") and down in report["checks"]["sessions"], report
        finally:
            os.kill(pid, signal.SIGCONT)
            _wait_not_failing(replica, down)  # else the replica, allowed again, would fail over now
            replica.config_set("cluster-replica-no-failover", "no")
            replica.close()
        deadline = anyio.current_time() + 30.0
        while (await _status_of_call(http, topo.url, on[down]))[0] != 200:
            assert anyio.current_time() < deadline, "the shard's sessions did not come back"
            await anyio.sleep(0.2)
