"""`git lane demo` runs the whole story, end to end, where Python writes bytecode too
(a gate that imports the project must not dirty the lane)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run(
        [sys.executable, "-m", "guard", "demo", "--json", *args],
        text=True,
        capture_output=True,
        env=env,
        timeout=300,
    )


def test_demo_tells_the_story_and_leaves_nothing_behind() -> None:
    res = run_demo()
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["ok"] is True and out["path"] is None
    exits = [s["exit"] for s in out["steps"]]
    assert exits.count(1) >= 3  # the commit on main, the stale land, continue with markers
    assert "main_mutation_refused" in res.stderr and "stale_lane" in res.stderr
    assert "conflict_markers_present" in res.stderr
    assert "dev server port" in res.stderr  # setup_command ran in each new lane
    assert any(s["cmd"].endswith("land gamma --sync") and s["exit"] == 0 for s in out["steps"])


def test_demo_keep_leaves_the_repository() -> None:
    res = run_demo("--keep")
    assert res.returncode == 0, res.stderr
    kept = Path(json.loads(res.stdout)["path"])
    try:
        hub = kept / "project"
        log = subprocess.run(
            ["git", "log", "--format=%s", "main"], cwd=hub, text=True, capture_output=True
        )
        assert log.stdout.splitlines() == [
            "readme: say what it does",
            "greet: title-case the name",
            "greet: exclaim",
            "greet: first version",
        ]
        merges = subprocess.run(
            ["git", "rev-list", "--merges", "main"], cwd=hub, text=True, capture_output=True
        )
        assert merges.stdout == ""
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def test_demo_agents_predicts_the_conflicts_the_syncs_then_hit() -> None:
    res = run_demo("--agents", "4")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["ok"] is True and out["path"] is None
    assert "4 agents landed; 2 conflicting pair(s) predicted, 2 hit by a sync" in out["summary"]
    assert "as predicted" in res.stderr and "[sync_conflicts]" in res.stderr
    cmds = [s["cmd"] for s in out["steps"]]
    assert "git lane conflicts" in cmds and "git lane gc" in cmds
    assert sum(c == "git lane queue --batch 3" for c in cmds) == 2


def test_demo_agents_takes_2_to_12() -> None:
    for n in ("1", "13", "x"):
        res = run_demo("--agents", n)
        assert res.returncode == 2, res.stderr
