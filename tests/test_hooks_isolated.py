"""Every Python step a hook or an install script runs is isolated from the repository's
files (issue 8): `python -m guard.hookcheck` would put the current directory first on
sys.path, so a lane shipping `guard/hookcheck.py` would replace the check. The hooks run
their Python with -I and the directory install recorded (GITLANE_PYPATH=); the install
scripts with -I and the guard beside them. Tests assert on exit status, `[code]` on
stderr and git's resulting refs; "PWNED" is what the planted module would print."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, Repo, git
from hookfix import assert_refused, install, make_lane, run, sha

CONFLICT = "top\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> lane/b\nbottom\n"


@pytest.fixture
def lane(repo: Repo) -> Path:
    install(repo)
    return make_lane(repo, "x")


# -- a guard/ package in the lane or hub never runs -------------------------------------
PWNED = "import sys\nprint('PWNED')\nsys.stderr.write('PWNED\\n')\nsys.exit(0)\n"


def _ship_guard(where: Path, module: str) -> None:
    (where / "guard").mkdir(parents=True, exist_ok=True)
    (where / "guard" / "__init__.py").write_text("")
    (where / "guard" / f"{module}.py").write_text(PWNED)


def test_a_lane_shipping_guard_hookcheck_does_not_replace_the_check(lane: Path) -> None:
    _ship_guard(lane, "hookcheck")
    git(lane, "add", "guard")
    (lane / "f.txt").write_text(CONFLICT)
    git(lane, "add", "f.txt")
    before = sha(lane)
    res = run(lane, "commit", "-q", "-m", "m")
    assert_refused(res, "conflict_markers_present")
    assert "PWNED" not in res.stdout + res.stderr
    assert sha(lane) == before


def test_hook_python_ignores_pythonpath_and_finds_its_own_guard(lane: Path, tmp_path: Path) -> None:
    """-I: neither PYTHONPATH nor the cwd picks the guard a hook runs; the installed
    hook names the directory that holds it."""
    other = tmp_path / "elsewhere"
    _ship_guard(other, "hookcheck")
    (lane / "f.txt").write_text(CONFLICT)
    git(lane, "add", "f.txt")
    res = run(lane, "commit", "-q", "-m", "m", env={"PYTHONPATH": str(other)})
    assert_refused(res, "conflict_markers_present")
    assert "PWNED" not in res.stderr


@pytest.mark.parametrize("script", ["install-hooks", "uninstall-hooks"])
def test_install_scripts_ignore_a_guard_in_the_current_directory(repo: Repo, script: str) -> None:
    _ship_guard(repo.path, "cli")
    if script == "uninstall-hooks":
        install(repo)
    env = dict(os.environ)
    env["GITLANE_PYTHON"] = sys.executable
    res = subprocess.run(
        ["sh", str(ROOT / "install" / script), "--json"],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert "PWNED" not in res.stdout + res.stderr
    hook = repo.common_dir / "hooks" / "reference-transaction"
    assert hook.exists() == (script == "install-hooks")
