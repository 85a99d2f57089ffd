"""The package's import graph (issue 18, docs/architecture.md): no cycles, few modules on the top floor,
a bounded chain of imports.

The layer order itself is ``import-linter``'s layers contract in ``pyproject.toml``, run by ``make test``
(``lint-imports``); this file holds what that contract does not see: a cycle between two modules of one
subpackage, and the shape figures. Imports under ``TYPE_CHECKING`` count: a type ties two modules as
much as a call does.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterable, Mapping

import grimp
import pytest

PACKAGE = "fastapi_mcp_ctx"
MAX_TOP_FLOOR = 25
"""Modules directly in ``fastapi_mcp_ctx/``: the public modules, a few leaves, no subpackage's parts."""
MAX_CHAIN = 19
"""The longest chain of imports, in modules (a ratchet: lower it when a change shortens the chain)."""


@pytest.fixture(scope="module")
def imports() -> dict[str, set[str]]:
    graph = grimp.build_graph(PACKAGE, include_external_packages=False, exclude_type_checking_imports=False, cache_dir=None)
    return {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's components of ``graph`` (iterative: the package is deeper than a small recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def longest_chain(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """The longest path of imports in an acyclic ``graph``, from its top module down."""
    below: dict[str, list[str]] = {}

    def chain(module: str) -> list[str]:
        if module not in below:
            longest = max((chain(child) for child in graph.get(module, ())), key=len, default=[])
            below[module] = [module, *longest]
        return below[module]

    return max((chain(module) for module in sorted(graph)), key=len)


def test_strongly_connected_finds_a_cycle_and_only_it() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set[str]()}
    assert sorted(c for c in strongly_connected(graph) if len(c) > 1) == [["a", "b", "c"]]
    assert longest_chain({"a": {"b"}, "b": {"c"}, "c": set[str](), "d": {"c"}}) == ["a", "b", "c"]


def test_no_import_cycles(imports: dict[str, set[str]]) -> None:
    cycles = [component for component in strongly_connected(imports) if len(component) > 1]
    assert not cycles, f"import cycles (type-only imports included): {cycles}"


def test_longest_chain_of_imports(imports: dict[str, set[str]]) -> None:
    chain = longest_chain(imports)
    assert len(chain) <= MAX_CHAIN, " -> ".join(chain)


def test_top_floor_holds_the_public_modules_and_few_leaves() -> None:
    root = pathlib.Path(__import__(PACKAGE).__file__).parent
    floor = sorted(path.name for path in root.glob("*.py"))
    assert len(floor) <= MAX_TOP_FLOOR, floor
    for path in root.iterdir():
        if path.is_dir() and path.name != "migrations" and not path.name.startswith("__"):
            face = path / "__init__.py"
            assert face.is_file(), f"{path.name}/ is a package: it needs an __init__.py"
            assert (__import__(f"{PACKAGE}.{path.name}", fromlist=["_"]).__doc__ or "").strip(), (
                f"{path.name}/__init__.py says what the package is for, what it imports, what imports it"
            )
