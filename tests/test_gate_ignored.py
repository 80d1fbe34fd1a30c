"""Red team 16F: an untracked `.gitignore` that ignores itself hides untracked files from
G2, which an in-lane gate would read: such a lane gates in a clean worktree."""

from __future__ import annotations

import subprocess
from pathlib import Path


from conftest import Repo, git
from sandboxhelp import NEEDS_LANDLOCK


GATE = "python3 -c 'import calc, sys; sys.exit(0 if calc.add(2, 2) == 4 else 1)'"
PLANT = (
    "mkdir -p calc && printf '*\\n' > calc/.gitignore && "
    "printf 'def add(a, b):\\n    return a + b\\n' > calc/__init__.py"
)


def _broken_tip(hub: Repo, lane: Path) -> str:
    # the tip's calc.add is wrong: its gate fails at the tip (in a clean worktree it does)
    return hub.commit(lane, "calc.py", "def add(a, b):\n    return a - b\n")


def test_self_ignoring_untracked_gitignore_hides_a_shadow_module_from_g2(hub: Repo) -> None:
    """A lane's untracked calc/.gitignore (`*`, so it ignores itself) hides an untracked
    calc/__init__.py, which Python prefers over the tracked calc.py; the tip's own ignore
    rules ignore nothing. `git status` in the lane is clean, the content check compares only
    tracked files, and the gate in the lane imports the shadow: main gets the broken tip."""
    hub.config("gate_command", GATE)
    lane = hub.create("alpha")
    tip = _broken_tip(hub, lane)
    subprocess.run(["sh", "-c", PLANT], cwd=lane, check=True)
    assert git(lane, "status", "--porcelain", "-uall").stdout == ""  # G2 sees nothing
    before = hub.sha()
    r = hub.jlane("land", "alpha")
    assert hub.sha() == before, (
        f"main moved to {tip[:12]}, whose gate fails at the tip "
        f"(gate: {r.json.get('gate')}, code {r.code})"
    )


@NEEDS_LANDLOCK
def test_the_same_planted_by_a_sandboxed_cmd_then_the_owners_land(hub: Repo) -> None:
    """The same files written by a sandboxed CMD (exec --sandbox) that then ends; the
    owner's plain `git lane land` from the hub (no live owner) gates in a clean worktree
    since an exec ran in the lane (tests/test_exec_lane_gate.py), and before that since
    the untracked .gitignore ignores itself."""
    hub.config("gate_command", GATE)
    lane = hub.create("alpha")
    tip = _broken_tip(hub, lane)
    res = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "sh", "-c", PLANT],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (lane / "calc" / "__init__.py").exists()
    before = hub.sha()
    r = hub.jlane("land", "alpha")
    assert hub.sha() == before, (
        f"main moved to {tip[:12]}, whose gate fails at the tip "
        f"(gate: {r.json.get('gate')}, code {r.code})"
    )


def test_control_the_same_gate_in_a_clean_worktree_fails_at_the_tip(hub: Repo) -> None:
    """Control: gate_worktree = clean runs the same gate on the tip itself: gate_failed."""
    hub.config("gate_command", GATE)
    hub.config("gate_worktree", "clean")
    lane = hub.create("alpha")
    _broken_tip(hub, lane)
    subprocess.run(["sh", "-c", PLANT], cwd=lane, check=True)
    before = hub.sha()
    r = hub.jlane("land", "alpha")
    assert r.code == "gate_failed" and hub.sha() == before
