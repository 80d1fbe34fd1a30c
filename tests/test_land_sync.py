"""`git lane land --sync`: a stale lane is rebased onto main under the integration lock
(as `git lane sync` rebases it), then gated and landed in the same lock hold; on conflicts
it stops exactly as `sync` does and frees the lock. Also: what a land names next."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import psutil

from conftest import Repo, git
from enginehelp import (
    flock_holder,
    assert_linear,
    events,
    head,
    is_ancestor,
    owner_file,
    rebase_dir,
    ready_lane,
    spawn_lane,
    status_porcelain,
)


def stale_lane(repo: Repo, conflict: bool = False) -> Path:
    repo.commit(repo.path, "f.txt", "base\n")
    path = repo.create("alpha")
    repo.commit(path, "f.txt" if conflict else "a.txt", "lane\n", "lane edit")
    repo.commit(path, "a2.txt", "lane 2\n", "lane edit 2")
    repo.commit(repo.path, "f.txt", "main\n", "main edit")
    return path


def sync_would_make(repo: Repo, path: Path) -> str:
    """The commit `git lane sync` would leave the lane at: the same rebase (fixed dates
    make it the same sha), in a throwaway detached worktree."""
    tmp = repo.path.parent / "expect-wt"
    git(repo.path, "worktree", "add", "-q", "--detach", str(tmp), head(path))
    git(tmp, "rebase", "-q", "main")
    sha = head(tmp)
    git(repo.path, "worktree", "remove", "--force", str(tmp))
    return sha


def check_stale_lane_lands(repo: Repo, install: bool = False) -> None:
    path = stale_lane(repo)
    if install:  # after main moved by hand: from now on only land moves it
        assert repo.jlane("install").rc == 0
    main_before, old_tip = repo.sha(), head(path)
    expect = sync_would_make(repo, path)
    assert repo.jlane("land", "alpha").code == "stale_lane"  # without --sync: refused
    r = repo.jlane("land", "alpha", "--sync")
    assert (r.rc, r.code) == (0, "landed"), r.stdout + r.stderr
    assert r.json["main_before"] == main_before
    assert r.json["main_after"] == expect == repo.sha() == head(path)
    assert old_tip != expect and is_ancestor(repo.path, str(main_before), expect)
    # the lane is left as `git lane sync` leaves it: its branch checked out, clean, no rebase
    assert git(path, "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/lane/alpha"
    assert status_porcelain(path) == "" and not rebase_dir(path)
    assert_linear(repo)
    assert not owner_file(repo).exists()
    # one lock hold: the sync ran between lock_acquired and the land
    kinds = [(e["kind"], e.get("code")) for e in events(repo)]
    i = max(n for n, k in enumerate(kinds) if k[0] == "lock_acquired")
    assert kinds[i + 1][0] == "sync_start" and ("sync", "fresh") in kinds[i:]
    j = kinds.index(("land", "landed"), i)
    assert not any(k[0] == "lock_released" for k in kinds[i:j])


def test_land_sync_rebases_a_stale_lane_and_lands_it(repo: Repo) -> None:
    repo.config("gate", "off")
    check_stale_lane_lands(repo)


def test_land_sync_with_the_hooks_installed_and_a_gate(repo: Repo, tmp_path: Path) -> None:
    """The reference-transaction hook lets the lane branch's rebase through (it is not
    main) and still lets land move main; the gate runs at the rebased tip."""
    seen = tmp_path / "gate-saw"
    repo.config("gate_command", json.dumps(f"git rev-parse HEAD > '{seen}'"))
    check_stale_lane_lands(repo, install=True)
    assert seen.read_text().strip() == repo.sha()


def test_land_sync_stops_on_conflicts_exactly_like_sync(repo: Repo) -> None:
    repo.config("gate", "off")
    path = stale_lane(repo, conflict=True)
    main_before, tip = repo.sha(), head(path)
    r = repo.jlane("land", "alpha", "--sync")
    assert (r.rc, r.code) == (1, "sync_conflicts"), r.stdout + r.stderr
    assert r.json["state"] == "conflicts"
    landed = r.json
    assert repo.sha() == main_before and rebase_dir(path)
    assert not owner_file(repo).exists()  # the lock was released
    # the same stop as `git lane sync`: same code, worklist, next
    assert repo.jlane("abort", "alpha").json["tip"] == tip
    s = repo.jlane("sync", "alpha")
    assert (s.rc, s.code) == (1, "sync_conflicts")
    assert {k: v for k, v in s.json.items() if k != "message"} == {
        k: v for k, v in landed.items() if k != "message"
    }
    # text mode prints the worklist too
    assert repo.jlane("abort", "alpha").rc == 0
    t = repo.lane("land", "alpha", "--sync")
    assert t.rc == 1 and "both modified" in t.stdout and "git lane continue alpha" in t.stdout
    # resolve, continue, land
    (path / "f.txt").write_text("merged\n")
    c = repo.jlane("continue", "alpha")
    assert (c.rc, c.code, c.json["next"]) == (0, "synced", ["git lane land alpha"])
    assert repo.jlane("land", "alpha", "--sync").code == "landed"


def test_land_sync_of_a_fresh_or_dirty_lane(repo: Repo) -> None:
    repo.config("gate", "off")
    path = ready_lane(repo, "alpha")
    (path / "dirty.txt").write_text("x\n")
    before = head(path)
    r = repo.jlane("land", "alpha", "--sync")
    assert r.code == "lane_dirty" and head(path) == before  # G2 before any rebase
    (path / "dirty.txt").unlink()
    r = repo.jlane("land", "alpha", "--sync")
    assert (r.rc, r.code, r.json["main_after"]) == (0, "landed", before)


def test_lock_busy_suggests_wait_and_sync(repo: Repo) -> None:
    repo.config("gate", "off")
    path = stale_lane(repo)
    holder = flock_holder(repo)
    try:
        start = psutil.Process(holder.pid).create_time()
        owner_file(repo).parent.mkdir(parents=True, exist_ok=True)
        owner_file(repo).write_text(
            f"pid={holder.pid}\nstart={start!r}\nhost={socket.gethostname()}\ntoken=x\n"
            "lane=ghost\nmain_before=\ntip=\nsince=2026-01-01T00:00:00Z\n"
        )
        r = repo.jlane("land", "alpha")
        assert r.code == "lock_busy"
        assert r.json["next"] == ["git lane land alpha --wait"]
        assert r.json["alternatives"] == ["git lane land alpha --wait --sync"]
        r = repo.jlane("land", "alpha", "--sync")
        assert r.code == "lock_busy" and r.json["next"] == ["git lane land alpha --wait --sync"]
        waiting = spawn_lane("land", "alpha", "--wait", "--sync", "--json", cwd=repo.path)
    finally:
        holder.kill()
        holder.wait()
    out, _ = waiting.communicate(timeout=60)
    assert json.loads(out)["code"] == "landed", out
    assert repo.sha() == head(path)


def test_land_names_the_lanes_it_made_stale(repo: Repo) -> None:
    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    beta = ready_lane(repo, "beta")
    ready_lane(repo, "gamma")
    repo.commit(repo.path, "m.txt", "m\n")  # all three stale already
    r = repo.jlane("land", "alpha", "--sync")
    assert r.code == "landed"
    assert r.json["made_stale"] == [] and r.json["next"] == []  # they were stale before
    assert repo.jlane("sync", "gamma").code == "synced"
    assert repo.jlane("sync", "beta").code == "synced"
    # fresh before, stale after: gamma, and alpha (landed, still open); not released lanes
    r = repo.jlane("land", "beta")
    assert r.json["made_stale"] == ["alpha", "gamma"]
    assert r.json["next"] == ["git lane sync alpha", "git lane sync gamma"]
    for cmd in r.json["next"]:
        k = cmd.split()[-1]
        assert repo.jlane("sync", k).code == "synced"
    assert repo.jlane("release", "alpha").code == "released"
    repo.commit(beta, "b2.txt", "b2\n")
    t = repo.lane("land", "beta")
    assert t.rc == 0, t.stderr
    assert "lane gamma is stale now: git lane sync gamma" in t.stdout
    assert "alpha" not in t.stdout


def test_made_stale_reads_a_lane_store_for_its_lane_only(repo: Repo) -> None:
    """Lanes whose commits are in the shared store are asked in one git call; a lane
    whose commits live only in its own store (made under `exec --sandbox`) is asked alone,
    reading that store: it is named, and the shared call is not broken by its objects."""
    from guard import objects
    from guard.repo import Repo as GuardRepo

    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    ready_lane(repo, "beta")
    gamma = ready_lane(repo, "gamma")
    store = objects.enroll(GuardRepo.discover(repo.path), str(gamma))
    common = git(repo.path, "rev-parse", "--path-format=absolute", "--git-common-dir")
    (gamma / "g2.txt").write_text("g2\n")
    own = {
        "GIT_OBJECT_DIRECTORY": store,
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": f"{common.stdout.strip()}/objects",
    }
    git(gamma, "add", "g2.txt", env=own)
    git(gamma, "commit", "-q", "-m", "g2", env=own)
    tip = head(gamma)
    assert git(repo.path, "cat-file", "-e", tip, check=False).returncode != 0  # its store only
    r = repo.jlane("land", "beta")
    assert r.code == "landed", r.json
    assert r.json["made_stale"] == ["alpha", "gamma"]
