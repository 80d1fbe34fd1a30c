"""`git lane reconcile`: the registry brought in line with git — vanished worktrees
orphaned and restored, unregistered lane worktrees adopted, dead owners cleared — and a
no-op when nothing differs (not one byte or mtime changes in the state dir)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import Repo


def rec(repo: Repo, key: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((repo.state_dir / "lanes" / f"{key}.json").read_text())
    return data


def reconcile(repo: Repo) -> list[dict[str, Any]]:
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stderr
    assert r.json["ok"] is True
    changes: list[dict[str, Any]] = r.json["changes"]
    return changes


def state(repo: Repo) -> dict[str, tuple[int, int, str]]:
    out = {}
    for p in sorted(repo.state_dir.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[str(p.relative_to(repo.state_dir))] = (st.st_mtime_ns, st.st_size, digest)
    return out


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])


def test_vanished_worktree_is_orphaned_and_comes_back(repo: Repo) -> None:
    lp = repo.create("alpha")
    repo.create("beta")
    away = lp.with_name("alpha-away")
    os.rename(lp, away)
    changes = reconcile(repo)
    assert {"action": "orphaned", "lane": "alpha", "from": "active"} in changes
    assert rec(repo, "alpha")["status"] == "orphaned" and rec(repo, "beta")["status"] == "active"
    assert repo.sha("refs/heads/lane/alpha") == repo.sha()  # the branch is kept
    assert reconcile(repo) == []

    os.rename(away, lp)
    changes = reconcile(repo)
    assert {"action": "active", "lane": "alpha", "from": "orphaned"} in changes
    assert rec(repo, "alpha")["status"] == "active"
    ln = {x["key"]: x for x in repo.jlane("status").json["lanes"]}["alpha"]
    assert ln["state"] == "active"


def test_unregistered_lane_worktrees_are_adopted(repo: Repo, tmp_path: Path) -> None:
    repo.create("alpha")
    foo = tmp_path / "by hand ü"
    repo.git("worktree", "add", "-q", "-b", "lane/foo", str(foo), "main")
    repo.git("worktree", "add", "-q", "-b", "lane/Not_A_Key", str(tmp_path / "bad"), "main")
    repo.git("worktree", "add", "-q", "-b", "feature", str(tmp_path / "feat"), "main")
    changes = reconcile(repo)
    adopted = [c for c in changes if c["action"] == "adopted"]
    assert adopted == [{"action": "adopted", "lane": "foo", "path": str(foo)}]
    r = rec(repo, "foo")
    assert (r["key"], r["branch"], r["path"], r["status"]) == (
        "foo",
        "lane/foo",
        str(foo),
        "active",
    )
    assert sorted(p.stem for p in (repo.state_dir / "lanes").glob("*.json")) == ["alpha", "foo"]
    # adopted lanes are ordinary lanes
    keys = [x["key"] for x in repo.jlane("status").json["lanes"]]
    assert keys == ["alpha", "foo"]
    assert reconcile(repo) == []
    # worktrees outside the lane namespace are left alone
    assert "branch refs/heads/feature" in repo.worktrees()


def test_dead_owner_is_cleared(repo: Repo) -> None:
    owner = sleeper()
    try:
        assert repo.jlane("create", "alpha", "--owner-pid", str(owner.pid)).rc == 0
        assert reconcile(repo) == []  # alive: kept
        assert rec(repo, "alpha")["owner_pid"] == owner.pid
    finally:
        owner.kill()
        owner.wait()
    changes = reconcile(repo)
    assert {"action": "owner_cleared", "lane": "alpha", "pid": owner.pid} in changes
    r = rec(repo, "alpha")
    assert (r["owner_pid"], r["owner_start"], r["status"]) == (None, None, "active")


def test_live_pid_with_another_start_time_is_not_the_owner(repo: Repo) -> None:
    owner = sleeper()
    try:
        assert repo.jlane("create", "alpha", "--owner-pid", str(owner.pid)).rc == 0
        path = repo.state_dir / "lanes" / "alpha.json"
        data = json.loads(path.read_text())
        data["owner_start"] -= 3600.0  # the pid was reused by a process started an hour later
        path.write_text(json.dumps(data))
        assert repo.jlane("status", "alpha").json["lanes"][0]["owner_alive"] is False
        changes = reconcile(repo)
        assert {"action": "owner_cleared", "lane": "alpha", "pid": owner.pid} in changes
        assert rec(repo, "alpha")["owner_pid"] is None
        assert owner.poll() is None  # reconcile never touches the process itself
    finally:
        owner.kill()
        owner.wait()


def test_nothing_differs_writes_nothing(repo: Repo) -> None:
    a = repo.create("alpha")
    repo.create("beta")
    g = repo.create("gamma")
    repo.commit(a, "a.txt", "a\n")
    (a / "dirt.txt").write_text("x\n")
    assert repo.jlane("release", "beta").rc == 0
    os.rename(g, g.with_name("gamma-away"))
    assert reconcile(repo) != []  # gamma: orphaned, once
    assert repo.jlane("create", "Bad").rc == 1  # a refusal event, so events.jsonl exists
    before = state(repo)
    assert "events.jsonl" in before and "lanes/alpha.json" in before
    time.sleep(0.02)  # a rewrite would show as a new mtime
    assert reconcile(repo) == []
    assert repo.jlane("status").rc == 0
    assert reconcile(repo) == []
    assert state(repo) == before


def test_reconcile_sets_aside_a_directory_in_a_releasing_journals_place(repo: Repo) -> None:
    """A directory at releasing/KEY.json (no journal of a release) once made every
    reconcile exit 3: it is set aside, kept, and the lane is left as it was."""
    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    journal = repo.state_dir / "releasing" / "alpha.json"
    (journal / "sub").mkdir(parents=True)
    r = repo.jlane("reconcile")
    assert r.rc == 0, (r.rc, r.stdout, r.stderr[-300:])
    assert not journal.exists()
    (aside,) = (repo.state_dir / "releasing").glob("alpha.json.corrupt-*")
    assert (aside / "sub").is_dir()  # kept
    assert path.is_dir() and rec(repo, "alpha")["status"] == "active"
    assert repo.jlane("reconcile").rc == 0


def test_a_land_left_to_its_live_owner_is_noted_not_reconciled(repo: Repo) -> None:
    """landing.json while a land holds the integration lock: reconcile leaves it, says so
    in its changes, and its code is `ok` (nothing was reconciled)."""
    from enginehelp import flock_holder

    assert repo.lane("install").rc == 0
    landing = repo.state_dir / "landing.json"
    landing.write_text('{"stage": "prepared"}')
    holder = flock_holder(repo)
    try:
        r = repo.jlane("reconcile")
    finally:
        holder.kill()
        holder.wait()
    assert r.rc == 0 and r.code == "ok", r.stdout
    assert r.json["changes"] == [{"action": "landing_left", "reason": "a land is running"}]
    assert landing.exists()
