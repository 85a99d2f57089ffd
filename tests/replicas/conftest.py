"""Fixtures of the replica tests: one topology (Redis, two replicas, nginx) per module,
healed before each test (a test may stop Redis or kill a replica)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from .topology import Topology, topology


@pytest.fixture(scope="module", params=["single", "cluster", "sentinel"])
def deployment(request: pytest.FixtureRequest) -> str:
    """The Redis deployment under the replicas: a Redis of the topology's own, the cluster or
    the sentinel group of ``scripts/services.sh`` (issue 21). A module may narrow it by
    defining its own ``deployment`` fixture."""
    return str(request.param)


@pytest.fixture(scope="module")
def topo_started(deployment: str) -> Iterator[Topology]:
    with topology(deployment=deployment) as topo:
        yield topo


@pytest.fixture
def topo(topo_started: Topology) -> Iterator[Topology]:
    topo_started.heal()
    yield topo_started
    if any(not r.running for r in topo_started.replicas):
        print(topo_started.logs())


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(15.0)) as client:
        yield client
