"""What a sandboxed CMD commits or writes cannot make the owner's commands unbounded (red
team 17 sandbox F1, F3).

F1: a "tree bomb", N subtrees that are all one subtree D levels deep (N**D paths from N*D
small objects), committed on the lane's branch: G2's `git status` lists every path, and git
queues them all before it prints the first. Reads of a lane's status, diff and log are
bounded (git.run_capped: entries and bytes read, git killed past them; git's data memory
held to lane_read_memory; lane_read_timeout): status reports the lane dirty, land, release
and checkpoint refuse with a code (worktree_too_large), gc keeps the lane; a commit
message of many MB costs release a 200-character subject.

F3: a sparse file (`truncate -s 64G`) costs CMD nothing and `git add -A` minutes to hours:
checkpoint's add looks first (worktree_file_oversized, naming the file, with a next that
works) and runs within lane_read_timeout (worktree_blocked, naming the largest files).

Every owner command runs in a child under RLIMIT_AS (its git children inherit it) with a
timeout: an unbounded read fails the test, never the machine."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, git
from sandboxhelp import NEEDS_LANDLOCK

MEM = 768 << 20  # the owner command's address space (and its git's)
SMALL = str(48 << 20)  # GITLANE_TEST_LANE_READ_MEMORY: git's data bound, for a small bomb

# CMD builds the bomb with git by its path and moves its own branch there
BOMB = r"""
set -e
G=/usr/bin/git
b=$(printf 'x\n' | $G hash-object -w --stdin)
t=$(printf '100644 blob %s\tf\n' "$b" | $G mktree)
for d in $(seq 1 "$D"); do
  t=$(for i in $(seq 1 "$N"); do printf '040000 tree %s\td%d\n' "$t" "$i"; done | $G mktree)
done
bt=$( ($G ls-tree HEAD; printf '040000 tree %s\tbomb\n' "$t") | $G mktree)
c=$($G commit-tree -p HEAD -m bomb "$bt")
$G update-ref "refs/heads/$($G symbolic-ref --short HEAD)" "$c"
"""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM, MEM))


def _glane(
    hub: Repo, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], float]:
    start = time.monotonic()
    try:
        res = subprocess.run(
            [sys.executable, "-m", "guard", *args, "--json"],
            cwd=hub.path, capture_output=True, text=True, timeout=timeout,
            preexec_fn=_limited, env={**os.environ, **(env or {})}, start_new_session=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"git lane {' '.join(args)} ran past {timeout} s")
    took = time.monotonic() - start
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    out = json.loads(res.stdout) if res.stdout.startswith("{") else {}
    assert out.get("code") not in (None, "internal_error"), (res.returncode, res.stderr[-800:])
    return res, out, took


def _bomb(hub: Repo, lane: Path, n: int, d: int, sandbox: bool = False) -> None:
    env = {**os.environ, "N": str(n), "D": str(d)}
    if sandbox:
        script = lane.parent / "bomb.sh"
        script.write_text(BOMB)
        argv = ["git", "lane", "exec", "--sandbox", lane.name, "--", "sh", str(script)]
        r = subprocess.run(argv, cwd=hub.path, capture_output=True, text=True, env=env,
                           timeout=120)  # fmt: skip
    else:
        r = subprocess.run(["sh", "-c", BOMB], cwd=lane, capture_output=True, text=True,
                           env=env, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr


@NEEDS_LANDLOCK
def test_a_tree_bomb_a_sandboxed_cmd_commits_leaves_the_owners_status_bounded(
    hub: Repo,
) -> None:
    """60**3 = 216,000 paths: git's status finishes under the real memory bound and the
    owner reads 10,000 entries of it (truncated); under a small memory bound, git runs out
    and status still answers: the lane dirty, its paths unnamed."""
    lane = hub.create("alpha")
    _bomb(hub, lane, 60, 3, sandbox=True)
    _, out, took = _glane(hub, "status", "alpha")
    (v,) = out["lanes"]
    assert v["dirty"] and v["dirty_truncated"] and v["dirty_paths"], v
    _, out, took = _glane(hub, "status", env={"GITLANE_TEST_LANE_READ_MEMORY": SMALL})
    (v,) = out["lanes"]
    assert out["ok"] and v["dirty"] and v["dirty_truncated"] and v["dirty_paths"] == [], v
    assert took < 60


def test_a_tree_bomb_makes_land_release_and_checkpoint_refuse_with_a_code(hub: Repo) -> None:
    lane = hub.create("beta")
    _bomb(hub, lane, 50, 3)  # 125,000 paths: more than git may hold under SMALL
    main = hub.sha()
    small = {"GITLANE_TEST_LANE_READ_MEMORY": SMALL}
    for cmd in (["land", "beta"], ["release", "beta"], ["checkpoint", "beta", "-m", "x"]):
        r, out, _ = _glane(hub, *cmd, env=small)
        assert r.returncode == 1 and out["code"] == "worktree_too_large", (cmd, out)
        assert out["next"], out
    assert hub.sha() == main
    assert lane.is_dir() and git(hub.path, "rev-parse", "--verify", "lane/beta").stdout
    # its first next shows the lane's last commits as written
    r, out, _ = _glane(hub, "land", "beta", env=small)
    done = subprocess.run(out["next"][0], shell=True, cwd=hub.path, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and "bomb" in done.stdout, (done.stdout, done.stderr)
    # gc keeps it, named, and answers for the others
    r, out, _ = _glane(hub, "gc", "--dry-run", env=small)
    assert r.returncode == 0, out
    assert [k["code"] for k in out["kept"] if k["lane"] == "beta"] == ["worktree_too_large"]


def test_a_lane_with_more_dirty_paths_than_the_bound_is_dirty_and_truncated(hub: Repo) -> None:
    """The cap is on what is read, not on what is dirty: land refuses lane_dirty, status
    names the first paths and says there are more."""
    lane = hub.create("gamma")
    _bomb(hub, lane, 40, 3)  # 64,000 paths: git finishes, the owner reads 10,000
    r, out, _ = _glane(hub, "land", "gamma")
    assert r.returncode == 1 and out["code"] == "lane_dirty", out


def test_a_commit_message_of_many_mb_costs_release_a_short_subject(hub: Repo) -> None:
    lane = hub.create("delta")
    msg = lane.parent / "msg"
    msg.write_bytes(b"a" * (40 << 20))
    c = git(lane, "rev-parse", "HEAD").stdout.strip()
    tree = git(lane, "rev-parse", "HEAD^{tree}").stdout.strip()
    for _ in range(3):
        c = git(lane, "commit-tree", "-p", c, "-F", str(msg), tree).stdout.strip()
    git(lane, "update-ref", "refs/heads/lane/delta", c)
    git(lane, "reset", "-q", "--soft", c)
    r, out, took = _glane(hub, "release", "delta")
    assert r.returncode == 1 and out["code"] == "unlanded_work", out
    listed = out["details"]["commits"]
    assert len(listed) == 3 and all(len(x) < 260 for x in listed), [len(x) for x in listed]
    assert took < 30


# -- F3: what checkpoint's `git add -A` would read -----------------------------------------


@NEEDS_LANDLOCK
def test_a_sparse_file_a_sandboxed_cmd_made_is_refused_by_name_and_the_next_works(
    hub: Repo,
) -> None:
    lane = hub.create("eps")
    (lane / "work.txt").write_text("real work\n")
    r = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "eps", "--", "truncate", "-s", "64G", "big.bin"],
        cwd=hub.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    try:
        land = hub.jlane("land", "eps")
        assert land.code == "lane_dirty", land.stdout
        r, out, took = _glane(hub, "checkpoint", "eps", "-m", "work")
        assert r.returncode == 1 and out["code"] == "worktree_file_oversized", out
        assert [f["path"] for f in out["details"]["files"]] == ["big.bin"]
        assert took < 30
        for step in out["next"]:
            done = subprocess.run(step, shell=True, cwd=hub.path, capture_output=True,
                                  text=True, timeout=60)  # fmt: skip
            assert done.returncode == 0, (step, done.stdout, done.stderr)
        assert (lane / "big.bin").exists()  # ignored, where it was
        shown = git(lane, "show", "--name-only", "--format=", "HEAD").stdout.split()
        assert "work.txt" in shown and "big.bin" not in shown
    finally:
        (lane / "big.bin").unlink(missing_ok=True)


def test_a_tracked_file_grown_sparse_is_kept_aside_by_the_next(hub: Repo) -> None:
    lane = hub.create("zeta")
    hub.commit(lane, "data.bin", "small\n")
    with open(lane / "data.bin", "r+b") as f:
        f.truncate(3 << 30)
    try:
        r, out, _ = _glane(hub, "checkpoint", "zeta")
        assert r.returncode == 1 and out["code"] == "worktree_file_oversized", out
        assert out["details"]["files"][0]["tracked"] is True
        for step in out["next"]:
            done = subprocess.run(step, shell=True, cwd=hub.path, capture_output=True,
                                  text=True, timeout=60)  # fmt: skip
            assert done.returncode == 0, (step, done.stdout, done.stderr)
        assert (lane / "data.bin").read_text() == "small\n"  # HEAD's, checked out again
        kept = list(hub.path.joinpath(".git", "git-lane", "kept").rglob("data.bin"))
        assert kept and kept[0].stat().st_size == 3 << 30  # set aside, not deleted
    finally:
        for p in hub.path.joinpath(".git", "git-lane", "kept").rglob("data.bin"):
            p.unlink()


def test_an_add_past_its_time_is_worktree_blocked_naming_the_largest_file(hub: Repo) -> None:
    lane = hub.create("eta")
    with open(lane / "dense.bin", "wb") as f:  # real blocks: not sparse, under ADD_MAX
        for _ in range(96):
            f.write(os.urandom(1 << 20))
    env = {"GITLANE_TEST_LANE_READ_TIMEOUT": "1"}
    r, out, _ = _glane(hub, "checkpoint", "eta", "-m", "w", env=env)
    assert r.returncode == 1 and out["code"] == "worktree_blocked", out
    assert out["details"]["largest"] == ["dense.bin"]
    assert out["next"][-1] == "git lane checkpoint eta -m w"
    assert git(lane, "status", "--porcelain").stdout == "?? dense.bin\n"  # nothing committed
