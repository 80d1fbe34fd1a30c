"""Crashes at every stage (issue 13, item 2): a real `git lane land`, `sync`, `create` and
`release` SIGKILLed part way (at a named crash point, GITLANE_TEST_CRASH_AT, or while its
gate runs), then `git lane reconcile` and `doctor`. After each: the invariants of
tests/test_crash.py hold, every commit made in a lane is still reachable from a ref, every
state file parses (nothing half-written, no temp file left), and the lane works again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Repo, git
from enginehelp import (
    head,
    lane_status,
    landing_file,
    owner_file,
    pid_alive,
    rebase_dir,
    ready_lane,
    spawn_lane,
    status_porcelain,
    wait_for,
)
from test_crash import check_invariants

pytestmark = pytest.mark.slow


def crash(repo: Repo, point: str, *args: str, cwd: Path | None = None) -> None:
    """`git lane ARGS` SIGKILLed at crash point `point`: it says nothing, on stdout."""
    r = subprocess.run(
        [sys.executable, "-m", "guard", *args, "--json"],
        cwd=cwd or repo.path,
        capture_output=True,
        text=True,
        env={**os.environ, "GITLANE_TEST_CRASH_AT": point},
        timeout=60,
    )
    assert r.returncode == -signal.SIGKILL, (point, r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""


def reachable(repo: Repo, commit: str) -> bool:
    """From a branch, main, a landed ref (refs/git-lane/...), any ref git keeps."""
    refs = git(repo.path, "for-each-ref", "--contains", commit, "--format=%(refname)").stdout
    return bool(refs.split())


def state_is_whole(repo: Repo) -> None:
    """Every state file parses and no temp file of a write is left beside it."""
    for p in sorted(repo.state_dir.rglob("*")):
        assert not p.name.endswith(".tmp"), f"a temp file left: {p}"
        if p.is_file() and p.suffix == ".json":
            json.loads(p.read_text())
        elif p.is_file() and ".jsonl" in p.name:
            for line in p.read_text().splitlines():
                json.loads(line)


def doctor_ok(repo: Repo, hooks: bool) -> None:
    r = repo.jlane("doctor")
    failed = [
        c["name"]
        for c in r.json["checks"]
        if c["status"] == "fail" and (hooks or not c["name"].startswith("hook "))
    ]
    assert failed == [], r.stdout


def recovered(repo: Repo, hooks: bool, commits: list[str]) -> None:
    """reconcile (twice: the second changes nothing), doctor, state, reachability."""
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout + r.stderr
    assert repo.jlane("reconcile").json["changes"] == []
    doctor_ok(repo, hooks)
    state_is_whole(repo)
    st = repo.jlane("status").json
    assert st["lock"] is None and st["landing"] is False
    assert not owner_file(repo).exists() and not landing_file(repo).exists()
    for c in commits:
        assert reachable(repo, c), c


def install(repo: Repo) -> None:
    r = repo.jlane("install")
    assert r.rc == 0, r.stderr


# -- land --------------------------------------------------------------------------------
LAND_POINTS = [
    ("before_lock", False),
    ("before_lock", True),
    ("locked", True),
    ("hub_updated", True),
    ("epoch_bumped", True),
]


@pytest.mark.parametrize(("point", "hooks"), LAND_POINTS)
def test_land_killed_at_a_stage(repo: Repo, point: str, hooks: bool) -> None:
    """tests/test_crash.py covers every stage without hooks and prepared / main_moved with
    them; here the stage before the lock, and the rest with the hooks installed."""
    if hooks:
        install(repo)
    repo.config("gate", "off")
    base = repo.sha()
    alpha = ready_lane(repo, "alpha", {"a.txt": "a\n", "dir/b.txt": "b\n"})
    tip = head(alpha)
    crash(repo, point, "land", "alpha")
    moved = point in ("hub_updated", "epoch_bumped")
    assert repo.sha() == (tip if moved else base)
    assert owner_file(repo).exists() == (point != "before_lock")
    recovered(repo, hooks, [tip])
    landed = [tip] if moved else []
    check_invariants(repo, landed)
    assert status_porcelain(repo.path) == ""
    if not moved:
        assert repo.jlane("land", "alpha").code == "landed"
        landed = [tip]
    # and the lane goes on: a commit on top lands too (test_crash.py lands a second lane)
    more = repo.commit(alpha, "c.txt", "c\n")
    assert repo.jlane("land", "alpha").code == "landed"
    check_invariants(repo, [*landed, more])


def gate_recorded(repo: Repo) -> Callable[[], bool]:
    return lambda: (repo.state_dir / "locks" / "integration.gate").exists()


def _gate_that_hangs(repo: Repo, tmp_path: Path) -> tuple[Path, Path]:
    """A gate that, while `flag` exists, writes its pid (its group's) to `marker` and
    sleeps; passes at once otherwise."""
    flag, marker = tmp_path / "gate-hangs", tmp_path / "gate-pid"
    cmd = (
        f"if [ -f '{flag}' ]; then echo $$ > '{marker}.tmp' && mv '{marker}.tmp' '{marker}'; "
        "sleep 60; fi; exit 0"
    )
    repo.config("gate_command", json.dumps(cmd))
    flag.write_text("")
    return flag, marker


@pytest.mark.parametrize("where", ["lane", "clean"])
def test_land_killed_while_its_gate_runs(repo: Repo, tmp_path: Path, where: str) -> None:
    """SIGKILL of land (no crash point: the real process, mid-gate). The orphaned gate
    holds no lock (the flock is close-on-exec); the next land (lane) or reconcile (clean)
    stops it, and reconcile removes the clean gate worktree it ran in."""
    install(repo)
    repo.config("gate_worktree", where)
    flag, marker = _gate_that_hangs(repo, tmp_path)
    base = repo.sha()
    alpha = ready_lane(repo, "alpha")
    tip = head(alpha)
    land = spawn_lane("land", "alpha", "--json", cwd=repo.path)
    gpid = 0
    try:
        wait_for(marker.exists, 30, "the gate to start")
        gpid = int(marker.read_text())
        wait_for(gate_recorded(repo), 10, "the gate to be recorded")  # see gate.run
        land.kill()
        land.communicate(timeout=30)
        assert land.returncode == -signal.SIGKILL
        assert pid_alive(gpid)  # the gate outlived its land ...
        flock = os.path.realpath(repo.state_dir / "locks" / "integration.flock")
        fds = [os.path.realpath(f"/proc/{gpid}/fd/{fd}") for fd in os.listdir(f"/proc/{gpid}/fd")]
        assert flock not in fds  # ... holding no lock
        assert repo.sha() == base and owner_file(repo).exists()
        flag.unlink()
        if where == "clean":  # reconcile stops it, and removes the worktree it ran in
            assert "git-lane-gate-" in repo.worktrees()
            r = repo.jlane("reconcile")
            assert r.rc == 0, r.stdout + r.stderr
            changes = r.json["changes"]
            assert {"action": "gate_stopped", "pid": gpid, "lane": "alpha"} in changes
            assert "gate_worktree_removed" in [c["action"] for c in changes]
            assert "git-lane-gate-" not in repo.worktrees()
        else:  # the next land takes the lock over and stops the dead land's gate itself
            r = repo.jlane("land", "alpha")
            assert r.code == "landed", r.stdout + r.stderr
        wait_for(lambda: not pid_alive(gpid), 10, "the orphaned gate to be stopped")
        gpid = 0
        if where == "clean":
            assert repo.jlane("land", "alpha").code == "landed"
        recovered(repo, True, [tip])
        check_invariants(repo, [tip])
        assert "git-lane-gate-" not in repo.worktrees()  # no clean gate worktree left
    finally:
        if gpid and pid_alive(gpid):
            os.killpg(gpid, signal.SIGKILL)


def test_queue_batch_killed_while_its_gate_runs(repo: Repo, tmp_path: Path) -> None:
    """The same for a batch of the land queue (its gate runs in the queue's own temporary
    worktree): the next land takes the lock over and stops it; the lanes land."""
    flag, marker = _gate_that_hangs(repo, tmp_path)
    paths = {k: ready_lane(repo, k) for k in ("a", "b")}
    for k in paths:
        assert repo.jlane("ready", k).code == "ready"
    queue = spawn_lane("queue", "--batch", "2", "--json", cwd=repo.path)
    gpid = 0
    try:
        wait_for(marker.exists, 30, "the batch gate to start")
        gpid = int(marker.read_text())
        wait_for(gate_recorded(repo), 10, "the gate to be recorded")  # see gate.run
        queue.kill()
        queue.communicate(timeout=30)
        assert pid_alive(gpid)
        flag.unlink()
        r = repo.jlane("reconcile")
        assert r.rc == 0, r.stdout + r.stderr
        assert {"action": "gate_stopped", "pid": gpid, "lane": "b"} in r.json["changes"]
        wait_for(lambda: not pid_alive(gpid), 10, "the orphaned gate to be stopped")
        gpid = 0
        r = repo.jlane("queue", "--batch", "2")
        assert r.json["landed"] == ["a", "b"], r.stdout
        recovered(repo, False, [head(p) for p in paths.values()])
    finally:
        if gpid and pid_alive(gpid):
            os.killpg(gpid, signal.SIGKILL)


# -- sync --------------------------------------------------------------------------------
def _conflict_resolved_by_hand(repo: Repo) -> tuple[Path, list[str]]:
    """A lane of two commits whose first conflicts with main, its sync stopped there and
    the conflict resolved in the worktree: its `continue` settles the step and goes on to
    the next (sync never takes a resolution from rerere: a step is settled by hand)."""
    repo.commit(repo.path, "f.txt", "base\n")
    alpha = repo.create("alpha")
    mine = [repo.commit(alpha, "f.txt", "lane\n"), repo.commit(alpha, "g.txt", "g\n")]
    repo.commit(repo.path, "f.txt", "main\n")  # no hooks installed: main moved by hand
    r = repo.jlane("sync", "alpha")
    assert r.code == "sync_conflicts", r.stdout
    (alpha / "f.txt").write_text("resolved\n")
    return alpha, mine


@pytest.mark.parametrize("then", ["continue", "abort"])
def test_sync_killed_between_rebase_steps(repo: Repo, then: str) -> None:
    alpha, mine = _conflict_resolved_by_hand(repo)
    crash(repo, "sync_step", "continue", "alpha")
    assert rebase_dir(alpha)  # stopped part way, as a conflict stops it
    assert repo.sha("refs/heads/lane/alpha") == mine[-1]  # the branch moves only at the end
    recovered(repo, False, mine)
    assert rebase_dir(alpha)  # reconcile leaves a sync in progress to its owner
    assert lane_status(repo, "alpha")["rebase_in_progress"] is True
    r = repo.jlane("sync", "alpha")
    assert r.code == "rebase_in_progress", r.stdout
    r = repo.jlane(then, "alpha")
    if then == "abort":
        assert r.code == "aborted" and head(alpha) == mine[-1]
        r = repo.jlane("sync", "alpha")  # the same conflict again, resolved again
        assert r.code == "sync_conflicts", r.stdout
        (alpha / "f.txt").write_text("resolved\n")
        r = repo.jlane("continue", "alpha")
    assert r.json["state"] == "fresh", r.stdout
    assert (alpha / "f.txt").read_text() == "resolved\n" and (alpha / "g.txt").exists()
    assert status_porcelain(alpha) == ""
    repo.config("gate", "off")
    assert repo.jlane("land", "alpha").code == "landed"
    check_invariants(repo, [head(alpha)])


def test_sync_stopped_on_conflicts_then_killed_is_just_stopped(repo: Repo) -> None:
    """A sync that stopped on conflicts has no process left to kill: the lane is mid-rebase
    and reconcile, continue and abort each cope."""
    repo.config("gate", "off")
    repo.commit(repo.path, "f.txt", "base\n")
    alpha = repo.create("alpha")
    mine = repo.commit(alpha, "f.txt", "lane\n")
    repo.commit(repo.path, "f.txt", "main\n")
    sync = spawn_lane("sync", "alpha", "--json", cwd=repo.path)
    out, _ = sync.communicate(timeout=60)
    assert json.loads(out)["code"] == "sync_conflicts"
    recovered(repo, False, [mine])
    r = repo.jlane("continue", "alpha")
    assert r.code == "conflict_markers_present", r.stdout
    (alpha / "f.txt").write_text("both\n")
    assert repo.jlane("continue", "alpha").json["state"] == "fresh"
    assert repo.jlane("land", "alpha").code == "landed"
    check_invariants(repo, [head(alpha)])


# -- create ------------------------------------------------------------------------------
def test_create_killed_between_worktree_add_and_the_registry(repo: Repo) -> None:
    crash(repo, "create_worktree_added", "create", "alpha")
    assert repo.sha("refs/heads/lane/alpha") == repo.sha()
    assert not (repo.state_dir / "lanes" / "alpha.json").exists()
    # a create of the same key names the way out: reconcile adopts what the dead one made
    r = repo.jlane("create", "alpha")
    assert r.rc == 1 and r.code == "create_interrupted", r.stdout
    assert r.json["next"][0] == "git lane reconcile"
    r = repo.jlane("reconcile")
    assert r.rc == 0
    (adopted,) = [c for c in r.json["changes"] if c["action"] == "adopted"]
    assert adopted["lane"] == "alpha"
    recovered(repo, False, [])
    # the adopted lane is an ordinary lane: commit, land, release, create again
    path = Path(adopted["path"])
    repo.config("gate", "off")
    c = repo.commit(path, "a.txt", "a\n")
    assert repo.jlane("land", "alpha").code == "landed"
    check_invariants(repo, [c])
    assert repo.jlane("release", "alpha").code == "released"
    assert repo.create("alpha") == path
    state_is_whole(repo)
    assert reachable(repo, c)


def test_create_killed_before_its_setup(repo: Repo) -> None:
    """Registered, but the .worktreeinclude copy never ran: status says the setup did
    not finish, and `git lane setup` does it."""
    (repo.path / ".gitignore").write_text(".env\n")
    (repo.path / ".worktreeinclude").write_text(".env\n")
    git(repo.path, "add", ".gitignore", ".worktreeinclude")
    git(repo.path, "commit", "-q", "-m", "include .env")
    install(repo)
    (repo.path / ".env").write_text("SECRET=1\n")
    crash(repo, "create_registered", "create", "alpha")
    ln = lane_status(repo, "alpha")
    path = Path(ln["path"])
    assert ln["state"] == "active" and not (path / ".env").exists()
    assert ln["setup"] == "failed" and "git lane setup alpha" in ln["advice"]
    recovered(repo, True, [])
    assert repo.jlane("setup", "alpha").rc == 0
    assert (path / ".env").read_text() == "SECRET=1\n"
    assert lane_status(repo, "alpha")["setup"] is None
    repo.config("gate", "off")
    c = repo.commit(path, "a.txt", "a\n")
    assert repo.jlane("land", "alpha").code == "landed"
    assert repo.jlane("release", "alpha").code == "released"  # the copy is no work of its own
    check_invariants(repo, [c])


# -- release -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "point", ["release_inspected", "release_removed", "release_branch_deleted"]
)
def test_release_of_a_landed_lane_killed_part_way(repo: Repo, point: str) -> None:
    """Killed before anything was removed, the lane is left as it was (and not frozen:
    git works in it); killed after its worktree went, reconcile finishes the release."""
    install(repo)
    repo.config("gate", "off")
    alpha = ready_lane(repo, "alpha")
    c = head(alpha)
    assert repo.jlane("land", "alpha").code == "landed"
    crash(repo, point, "release", "alpha")
    assert (repo.state_dir / "releasing" / "alpha.json").exists()
    changes = repo.jlane("reconcile").json["changes"]
    recovered(repo, True, [c])
    rec = json.loads((repo.state_dir / "lanes" / "alpha.json").read_text())
    if point == "release_inspected":
        assert {"action": "release_rolled_back", "lane": "alpha"} in changes
        assert {"action": "release_lock_cleared", "lane": "alpha"} in changes
        assert rec["status"] == "active" and alpha.is_dir()
        c2 = repo.commit(alpha, "more.txt", "more\n")
        assert repo.jlane("land", "alpha").code == "landed"
        check_invariants(repo, [c, c2])
        assert repo.jlane("release", "alpha").code == "released"
    else:
        assert {"action": "release_finished", "lane": "alpha", "tip": c} in changes
        assert rec["status"] == "released" and rec["released_tip"] == c
        assert not alpha.exists() and "alpha" not in repo.worktrees()
        assert repo.jlane("release", "alpha").code == "already_released"
    assert repo.sha("refs/heads/lane/alpha") is None and reachable(repo, c)
    assert repo.create("alpha") == alpha  # the key is free again
    state_is_whole(repo)


def test_release_killed_part_way_finishes_by_itself_too(repo: Repo) -> None:
    """Without reconcile: the next release of the lane (frozen by the dead one) goes
    through and says so."""
    repo.config("gate", "off")
    alpha = ready_lane(repo, "alpha")
    assert repo.jlane("land", "alpha").code == "landed"
    crash(repo, "release_inspected", "release", "alpha")
    assert repo.jlane("release", "alpha").code == "released"
    recovered(repo, False, [repo.sha() or ""])
    assert not alpha.exists()


@pytest.mark.parametrize("point", ["release_inspected", "release_removed"])
def test_confirmed_release_killed_keeps_the_commits(repo: Repo, point: str) -> None:
    """A discard of unlanded commits confirmed, then killed before the branch went:
    reconcile never finishes a discard; the commits stay on the branch until the owner
    confirms the release again."""
    alpha = ready_lane(repo, "alpha")
    c = head(alpha)
    crash(repo, point, "release", "alpha", "--confirm", "yes-discard-lane")
    changes = repo.jlane("reconcile").json["changes"]
    what = "release_rolled_back" if point == "release_inspected" else "release_not_finished"
    assert what in [ch["action"] for ch in changes]
    recovered(repo, False, [c])
    assert repo.sha("refs/heads/lane/alpha") == c
    r = repo.jlane("release", "alpha")
    assert r.code == "unlanded_work", r.stdout  # unconfirmed, it is still refused
    r = repo.jlane("release", "alpha", "--confirm", "yes-discard-lane")
    assert r.code == "released" and r.json["discarded_commits"], r.stdout
    assert not alpha.exists() and repo.sha("refs/heads/lane/alpha") is None
    assert repo.jlane("reconcile").json["changes"] == []
    state_is_whole(repo)


def test_a_lane_an_interrupted_create_left_names_reconcile(repo: Repo) -> None:
    """A create killed between `worktree add` and the registry: a command naming the key
    refuses unknown_lane with reconcile as its next (never `git lane create KEY`, which
    refuses create_interrupted); run as printed, the lane is there."""
    crash(repo, "create_worktree_added", "create", "alpha")
    r = repo.jlane("sync", "alpha")
    assert r.rc == 1 and r.code == "unknown_lane", r.stdout
    assert r.json["next"] == ["git lane reconcile", "git lane status alpha"]
    assert "git lane create alpha" not in r.json["alternatives"]
    for cmd in r.json["next"]:
        r = repo.jlane(*cmd.split()[2:])
        assert r.rc == 0, r.stdout
    assert repo.jlane("sync", "alpha").rc == 0
