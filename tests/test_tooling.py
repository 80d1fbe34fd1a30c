"""The house tooling, run by the suite itself so the README's one test command checks it
all: ruff (lint and format), mypy --strict over guard/, and shellcheck present where CI
promised it (so the hooks' shellcheck test never skips silently there)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, shellcheck


def _tool(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_ruff_lint() -> None:
    res = _tool("ruff", "check", "guard", "tests", "bench")
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_format() -> None:
    res = _tool("ruff", "format", "--check", "guard", "tests", "bench")
    assert res.returncode == 0, "run `ruff format guard tests bench`:\n" + res.stdout + res.stderr


@pytest.mark.slow
def test_mypy_strict() -> None:
    res = _tool("mypy")
    assert res.returncode == 0, res.stdout + res.stderr


def test_shims_pass_shellcheck() -> None:
    """The PATH shims run as they are (nothing renders them): shellcheck each one, as sh,
    following what it sources (shims/common.sh, and hooks/common.sh from it)."""
    exe = shellcheck()
    if not exe:
        pytest.skip("shellcheck is not installed")
    shims = sorted(p for p in (ROOT / "shims").iterdir() if p.name != "README")
    assert any(p.name == "git" for p in shims), shims
    for path in shims:
        res = subprocess.run(
            [exe, "-s", "sh", "-x", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, f"{path.name}:\n{res.stdout}{res.stderr}"


def test_shellcheck_present_when_required() -> None:
    """.ci/run installs shellcheck from the distribution and sets this variable."""
    if os.environ.get("GITLANE_REQUIRE_SHELLCHECK") != "1":
        pytest.skip("GITLANE_REQUIRE_SHELLCHECK is not set (only .ci/run promises shellcheck)")
    assert shellcheck(), "shellcheck is not installed: the hooks' shellcheck test would skip"
