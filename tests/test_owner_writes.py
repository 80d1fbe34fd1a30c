"""The owner's git never writes a lane's worktree while a process of the lane runs (red team
16A F2): a rebase or checkout there checks a directory once and then writes through it,
so a directory the lane's process swaps for a link meanwhile takes the owner's writes
(a lane's `post-rewrite` into the common `hooks/`, run as the owner) where the sandbox
cannot write. sync, continue, abort and repair refuse lane_owner_conflict from outside
the owning exec; a land through a sandboxed exec's socket does not rebase (its `--sync`
is refused, with CMD's own confined sync as the next); a batch queue leaves a lane whose
owner runs as it is. And a lane's marker grown past a key's size is moved aside and
written back (red team 16A F1: every hook reads it a byte at a time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import Repo, git
from enginehelp import events, head, ready_lane, spawn_lane, wait_for
from sandboxhelp import NEEDS_LANDLOCK


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "120"])


def _stale(repo: Repo, key: str, owner: int | None = None) -> Path:
    args = ["create", key] + (["--owner-pid", str(owner)] if owner else [])
    r = repo.jlane(*args)
    assert r.rc == 0, r.stderr
    path = Path(r.json["lane"]["path"])
    repo.commit(path, "same.txt", f"{key}\n")
    other = ready_lane(repo, f"{key}-other", {"same.txt": "other\n"})
    assert other and repo.lane("land", f"{key}-other").rc == 0
    return path


def test_sync_continue_abort_repair_refuse_while_the_lanes_owner_runs(repo: Repo) -> None:
    repo.config("gate", "off")
    owner = _sleeper()
    try:
        path = _stale(repo, "alpha", owner.pid)
        tip = head(path)
        for action in ("sync", "continue", "abort", "repair"):
            r = repo.jlane(action, "alpha")
            assert (r.rc, r.code) == (1, "lane_owner_conflict"), (action, r.stdout, r.stderr)
            assert r.json["details"]["owner_pid"] == owner.pid
            assert r.json["next"] == [
                f"git lane {action} alpha  # from process {owner.pid} or a process it started"
            ]
        assert head(path) == tip
        assert not (
            Path(git(path, "rev-parse", "--git-dir").stdout.strip()) / "rebase-merge"
        ).exists()
    finally:
        owner.kill()
        owner.wait()
    # the owner gone, the lane syncs (it conflicts: same.txt) as before
    r = repo.jlane("sync", "alpha")
    assert r.code == "sync_conflicts", r.stdout + r.stderr


def test_the_owning_exec_may_sync_its_own_lane(repo: Repo) -> None:
    repo.config("gate", "off")
    path = ready_lane(repo, "alpha")
    ready_lane(repo, "beta")
    assert repo.lane("land", "beta").rc == 0
    r = repo.lane("exec", "alpha", "--", sys.executable, "-m", "guard", "sync", "alpha")
    assert r.rc == 0, r.stderr
    assert git(path, "merge-base", "--is-ancestor", repo.sha(), "HEAD").returncode == 0


@NEEDS_LANDLOCK
def test_a_sandboxed_execs_socket_land_does_not_rebase(repo: Repo, gitlane_on_path: Path) -> None:
    repo.config("gate_command", "true")
    repo.config("worker_land", "allow")
    path = ready_lane(repo, "alpha")
    ready_lane(repo, "beta")
    assert repo.lane("land", "beta").rc == 0  # alpha is stale
    main = repo.sha()
    r = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "git", "lane", "--json", "land", "--sync"],
        cwd=path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["code"] == "role_forbidden", out
    assert out["next"] == ["git lane sync alpha", "git lane land alpha"]
    assert repo.sha() == main and events(repo, "land_via_supervisor") == []
    # the next, as written, inside the same sandbox: CMD's own sync is confined
    r = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "sh", "-c",
         "git lane sync alpha && git lane land alpha"],
        cwd=path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert repo.sha() == head(path) != main


def test_a_batch_queue_leaves_a_lane_whose_owner_runs(repo: Repo, tmp_path: Path) -> None:
    repo.config("gate_command", "true")
    paths = {k: ready_lane(repo, k) for k in ("a", "b")}
    go = tmp_path / "go"
    # b's owner: an exec whose CMD marks b ready, then waits (it runs while the queue does)
    agent = spawn_lane(
        "exec", "b", "--", "sh", "-c",
        f'{sys.executable} -m guard ready b && touch {tmp_path}/marked && '
        f'while [ ! -e {go} ]; do sleep 0.05; done',
        cwd=repo.path,
    )  # fmt: skip
    try:
        wait_for((tmp_path / "marked").exists, what="b marked ready by its owner")
        assert repo.lane("ready", "a").rc == 0
        tip_b = head(paths["b"])
        r = repo.jlane("queue", "a", "b", "--batch", "2")
        assert r.rc == 0, r.stdout + r.stderr
        assert "b" in r.json["landed"], r.json
        # main holds b's commit (stacked on a's), b's worktree and branch were not touched
        assert head(paths["b"]) == tip_b
        warned = [e for e in events(repo, "warning") if e.get("code") == "batch_lane_not_moved"]
        assert [(e["lane"], e.get("why")) for e in warned] == [("b", "owner_live")]
    finally:
        go.touch()
        agent.communicate(timeout=60)


def test_a_grown_lane_marker_is_moved_aside_and_written_back(repo: Repo) -> None:
    repo.config("gate", "off")
    path = repo.create("alpha")
    gd = Path(git(path, "rev-parse", "--absolute-git-dir").stdout.strip())
    marker = gd / "gitlane-lane"
    with open(marker, "r+b") as f:  # what a sandboxed CMD can do: its admin dir is its own
        f.truncate(20 << 30)
    (path / "x.txt").write_text("x\n")
    # the hook read it a byte at a time: the checkpoint held for an hour (killed here)
    r = subprocess.run(
        [sys.executable, "-m", "guard", "--json", "checkpoint", "alpha", "-m", "x"],
        cwd=repo.path, capture_output=True, text=True, timeout=60, start_new_session=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert marker.read_text() == "alpha\n"
    assert os.path.getsize(marker) == 6
    kept = [e for e in events(repo, "oversized_kept")]
    assert any(m["file"].endswith("/gitlane-lane") for e in kept for m in e["moved"]), kept


@NEEDS_LANDLOCK
def test_the_queue_never_rebases_a_stale_lane_whose_sandboxed_exec_runs(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """Red team 16B F2: CMD of a sandboxed exec marks its lane ready (the mark records the
    live exec as owner, which lets the queue take it); main moves; the owner's plain
    `git lane queue alpha` rebased the lane in its worktree while CMD ran. It refuses
    lane_owner_conflict now, the lane where it was; its next, run by CMD, lands."""
    repo.config("gate_command", "true")
    alpha = repo.create("alpha")
    tip = repo.commit(alpha, "a.txt", "a\n")
    ready_lane(repo, "beta")
    assert repo.jlane("land", "beta").rc == 0  # alpha is stale
    admin = Path(git(alpha, "rev-parse", "--absolute-git-dir").stdout.strip())
    marked, done = admin / "marked", tmp_path / "done"
    script = (
        f"git lane ready alpha && : > '{marked}' || exit 3; n=0;"
        f" while [ ! -e '{done}' ] && [ $n -lt 600 ]; do n=$((n+1)); sleep 0.1; done;"
        " git lane sync alpha && git lane ready alpha"
    )
    p = subprocess.Popen(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "sh", "-c", script],
        cwd=alpha, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: marked.exists() or p.poll() is not None, 60, "alpha marked ready")
        assert marked.exists(), p.communicate()
        q = repo.jlane("queue", "alpha")
        during = head(alpha)
    finally:
        done.write_text("")
        out, err = p.communicate(timeout=120)
    assert during == tip, q.stdout
    (skip,) = [x for x in q.json["skipped"] if x["lane"] == "alpha"]
    assert skip["code"] == "lane_owner_conflict", q.stdout
    assert p.returncode == 0, out + err  # the next, run by the owner: synced, ready again
    r = repo.jlane("queue", "alpha")
    assert r.rc == 0 and r.json["landed"] == ["alpha"], r.stdout + r.stderr


def test_an_own_objects_execs_socket_land_does_not_rebase(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """Red team 16B F5: exec --own-objects (Codex, in a sandbox of its own) is refused
    `--sync` through the socket as --sandbox is."""
    repo.config("gate_command", "true")
    repo.config("worker_land", "allow")
    alpha = repo.create("alpha")
    tip = repo.commit(alpha, "a.txt", "a\n")
    ready_lane(repo, "beta")
    assert repo.jlane("land", "beta").rc == 0  # alpha is stale
    r = subprocess.run(
        ["git", "lane", "exec", "--own-objects", "alpha", "--", "sh", "-c",
         "git lane --json land --sync alpha; git rev-parse HEAD"],
        cwd=alpha, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == tip, r.stdout + r.stderr
    out = json.loads(lines[0])
    assert out["code"] == "role_forbidden" and out["next"] == [
        "git lane sync alpha",
        "git lane land alpha",
    ], out
