"""The repository stands on its own: a fresh clone, alone in its folder, passes the fast suite.

``git clone`` of this checkout's HEAD (what is committed, not the working tree's edits) into
an empty temporary folder, so nothing beside the clone exists. Then:

- no tracked file names a folder beside the repository (its parent's ``shared``) or an
  absolute path under a machine's top-level folders (``work``, ``root``, ``home``, ``tmp``...);
  genuine system paths (``/usr/bin/env``, ``/dev/null``, ``/var/tmp``, ``/usr/lib/postgresql``,
  ``/etc``) and the placeholder user ``you`` of documented client configs are allowed;
- the fast subset that touches what a clone must carry passes from the clone, with this
  interpreter and ``PYTHONPATH`` pointing at the clone (checked: the package imported is the
  clone's): the modules that read the repository's files, run its scripts and example apps, or
  drive outside tools (the conformance suite and the Node.js clients, which use the tools'
  cache outside the repository, ``scripts/node_tools.sh``, as a user's clone would). The
  protocol tests run in-process on the package alone; the main run covers them.

Skipped, with the reason, outside a git checkout or without ``git``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import pytest

pytestmark = pytest.mark.standalone

ROOT = Path(__file__).resolve().parents[1]
SUITE_TIMEOUT = 240  # seconds; the subset takes about 30 s on 2 busy cores (a cold tools cache adds ~20 s)
SUBSET = (
    "tests/conformance",
    "tests/clients_node",
    "tests/test_clients.py",
    "tests/test_docs.py",
    "tests/test_deploy.py",
    "tests/test_public_api.py",
    "tests/state/test_migrations.py",
)

# Files another helper is rewriting (the benchmarks); excluded from the path check for now.
NOT_YET_CHECKED: tuple[str, ...] = ()
NOT_YET_CHECKED_MAKE_RULES: tuple[str, ...] = ()

# Top-level folders of a filesystem; a path starting with one of them names this machine
# (the names are spelled without their slash so this file does not match itself).
ROOTS = "work root home Users mnt media srv opt tmp var usr etc private nix Volumes proc dev run bin sbin lib lib64 boot data scratch workspace"
ABSOLUTE = re.compile(r"(?<![\w.~%$}{)\]<>*/:@-])/(?:" + "|".join(ROOTS.split()) + r")(?![\w.-])(?:/[\w.@+-]*)*")
# Genuine system paths, and the documented placeholder user "you" (a client config needs absolute paths).
ALLOWED = ("/usr/bin/env", "/usr/bin/", "/usr/sbin/", "/usr/lib/", "/dev/", "/proc", "/var/tmp", "/etc/", "/etc", "/home/you/", "/Users/you/")
SIBLING = re.compile(r"(?:\.\.[/\\]|\.parent\s*/\s*[\"'])" + "shared")


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    probe = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    lines = probe.stdout.split()
    if probe.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != ROOT:
        pytest.skip(f"{ROOT} is not the top of a git checkout with a commit: nothing committed to clone")
    head = lines[1]
    alone = tmp_path_factory.mktemp("standalone")
    target = alone / "fastapi-mcp-ctx"
    git("clone", "--quiet", "--no-checkout", "--no-hardlinks", str(ROOT), str(target))
    git("checkout", "--quiet", "--detach", head, cwd=target)
    assert [p.name for p in alone.iterdir()] == ["fastapi-mcp-ctx"], "the clone must have no siblings"
    yield target
    shutil.rmtree(alone, ignore_errors=True)


def _make_rule_lines(text: str, rules: tuple[str, ...]) -> set[int]:
    """Line numbers (1-based) of the given Makefile rules: the target line and its recipe."""
    skipped: set[int] = set()
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if line and not line.startswith("\t"):
            inside = line.split(":", 1)[0].strip() in rules
        if inside:
            skipped.add(number)
    return skipped


def machine_paths(repo: Path) -> list[str]:
    """``path:line: text`` for every tracked file line that names a sibling folder or a machine path."""
    found: list[str] = []
    for name in git("ls-files", cwd=repo).splitlines():
        if name.startswith(NOT_YET_CHECKED):
            continue
        try:
            text = (repo / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary files; a submodule or a deleted file
        skip = _make_rule_lines(text, NOT_YET_CHECKED_MAKE_RULES) if name == "Makefile" else set()
        for number, line in enumerate(text.splitlines(), 1):
            if number in skip:
                continue
            bad = [m.group(0) for m in ABSOLUTE.finditer(line) if not m.group(0).startswith(ALLOWED)]
            bad += [m.group(0) for m in SIBLING.finditer(line)]
            if bad:
                found.append(f"{name}:{number}: {', '.join(bad)}: {line.strip()}")
    return found


def test_path_check_catches_what_it_must() -> None:
    bad_lines = [
        "cd " + "/" + "work/main && make",
        "see " + "/" + "root/.cache/x",
        "TOOL = ROOT.parent / " + "'shared' / 'tools'",
        "run " + ".." + "/shared/tools/conformance",
        "python " + "/" + "home/alice/repo/x.py",
    ]
    good_lines = [
        "#!/usr/bin/env bash",
        "exec 3<>/dev/tcp/127.0.0.1/80; echo >/dev/null",
        "d=/usr/lib/postgresql/15/bin; base=/var/tmp/x; in /usr/lib/postgresql/<major>/bin",
        "curl http://127.0.0.1:8000/mcp; path='/mcp'; docs/guide.md",
        "cache: ~/.cache/fastapi-mcp-ctx and $HOME/.cache",
        '"command": "/Users/you/notes/.venv/bin/fastapi-mcp-ctx"',
    ]
    for line in bad_lines:
        matches = [m.group(0) for m in ABSOLUTE.finditer(line) if not m.group(0).startswith(ALLOWED)]
        assert matches or SIBLING.search(line), line
    for line in good_lines:
        assert not [m.group(0) for m in ABSOLUTE.finditer(line) if not m.group(0).startswith(ALLOWED)], line
        assert not SIBLING.search(line), line


def test_no_tracked_file_names_a_machine_path(clone: Path) -> None:
    found = machine_paths(clone)
    assert not found, "tracked files name paths outside the repository:\n" + "\n".join(found)


def test_fast_suite_passes_from_the_clone(clone: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_TEST_", "MCP_REQUIRE_SERVICES", "PYTEST_"))}
    env["PYTHONPATH"] = str(clone)
    where = subprocess.run(
        [sys.executable, "-c", "import fastapi_mcp_ctx, examples.quickstart; print(fastapi_mcp_ctx.__file__)"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(clone), f"imported {where.stdout.strip()}, not the clone's package"

    missing = [path for path in SUBSET if not (clone / path).exists()]
    assert not missing, f"the subset names modules the clone lacks: {missing}"
    report = tmp_path / "junit.xml"  # in the test's own folder, not beside the clone
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", f"--junitxml={report}", *SUBSET],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT,
    )
    tail = (run.stdout + run.stderr)[-4000:]
    assert run.returncode == 0, tail
    cases = ElementTree.parse(report).getroot().iter("testcase")
    outcome: dict[str, list[str]] = {}
    for case in cases:
        state = next((child.tag for child in case if child.tag in ("skipped", "failure", "error")), "passed")
        outcome.setdefault(state, []).append(f"{case.get('classname')}::{case.get('name')}")
    assert len(outcome.get("passed", [])) >= 40 and not outcome.get("failure") and not outcome.get("error"), tail
    for needed in ("conformance.test_conformance", "clients_node.test_inspector_cli", "clients_node.test_typescript_sdk"):
        assert any(needed in case for case in outcome["passed"]), f"{needed}: no test passed in the clone"
        assert not any(needed in case for case in outcome.get("skipped", [])), f"{needed}: skipped in the clone"
