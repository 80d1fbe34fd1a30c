"""`git lane reconcile`: the registry brought in line with git — vanished worktrees
orphaned and restored, unregistered lane worktrees adopted, dead owners cleared — and a
no-op when nothing differs (not one byte or mtime changes in the state dir)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, git, lane
from enginehelp import events, lane_capped
from sandboxhelp import NEEDS_LANDLOCK


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


def test_reconcile_never_adopts_a_directory_a_lanes_gitdir_file_names_as_a_lane(
    repo: Repo, tmp_path: Path
) -> None:
    """MED (red team 13Q, finding 5). Lane alpha makes a branch lane/zeta, points its
    `<admin>/HEAD` at it and its `<admin>/gitdir` at `OTHER/.git` (OTHER: any repository
    of the owner's); `git worktree list` then shows OTHER on lane/zeta. reconcile adopted
    it as lane zeta, whose repair nexts handed OTHER to alpha's admin dir. A worktree is
    adopted only when its `.git` and its admin dir's `gitdir` name each other and the admin
    dir is no recorded lane's; alpha's own repair puts its pointer back."""
    lane_path = repo.create("alpha")
    admin = _admin(repo, "alpha")
    other = tmp_path / "other-project"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    (other / "p.txt").write_text("precious\n")
    main = repo.sha()
    assert main is not None
    repo.git("update-ref", "refs/heads/lane/zeta", main)
    (admin / "HEAD").write_text("ref: refs/heads/lane/zeta\n")
    (admin / "gitdir").write_text(f"{other}/.git\n")
    rc = repo.jlane("reconcile")
    st = repo.jlane("status")
    paths = {ln["key"]: ln["path"] for ln in st.json.get("lanes", [])}
    assert str(other) not in paths.values(), (
        "reconcile adopted the owner's other repository as a lane",
        rc.json.get("changes"),
        paths,
    )
    assert not (repo.state_dir / "lanes" / "zeta.json").exists()
    assert (other / ".git").is_dir() and (other / "p.txt").read_text() == "precious\n"
    (admin / "HEAD").write_text("ref: refs/heads/lane/alpha\n")
    assert repo.jlane("repair", "alpha").rc == 0
    assert (admin / "gitdir").read_text() == f"{lane_path}/.git\n"
    assert (other / ".git").is_dir()


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


# -- git's lock files: lifted only when provably no live git's --------------------------
def _admin(repo: Repo, key: str) -> Path:
    return repo.common_dir / "worktrees" / key


def _hold(
    argv: list[str], cwd: Path, ref: str, sha: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """A live git holding `ref`'s lock: a prepared `update-ref --stdin` transaction
    waiting for its `commit`."""
    p = subprocess.Popen(
        [*argv, "update-ref", "--no-deref", "--stdin"],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(f"start\nupdate {ref} {sha}\nprepare\n")
    p.stdin.flush()
    assert p.stdout.readline() == "start: ok\n"
    assert p.stdout.readline() == "prepare: ok\n"
    return p


def _commit_and_end(p: subprocess.Popen[str]) -> None:
    try:
        _out, err = p.communicate("commit\n", timeout=30)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _age(p: Path) -> None:
    old = time.time() - 10  # older than gitlocks.MIN_AGE
    os.utime(p, (old, old))


def test_a_live_git_named_by_git_dir_keeps_its_lock(repo: Repo, tmp_path: Path) -> None:
    """A git run on the lane from outside it (`git --git-dir=<admin>`: its repository is
    on its command line, nowhere in its cwd or starting environment) holds the lane's
    HEAD.lock: reconcile leaves it, and that git's update then goes through."""
    assert repo.lane("install").rc == 0
    repo.create("alpha")
    admin = _admin(repo, "alpha")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = _hold(["git", f"--git-dir={admin}"], elsewhere, "HEAD", repo.sha() or "")
    try:
        _age(admin / "HEAD.lock")
        r = repo.jlane("reconcile")
        assert r.rc == 0, r.stderr
        assert (admin / "HEAD.lock").is_file(), f"a live git's lock was removed: {r.stdout}"
    finally:
        _commit_and_end(p)


def test_a_live_git_with_a_relative_git_dir_keeps_its_lock_whatever_reconciles_cwd(
    repo: Repo, tmp_path: Path
) -> None:
    """GIT_DIR relative to that git's own cwd (outside the repository): resolved against
    its cwd, never against reconcile's (run here from a subdirectory of the hub)."""
    assert repo.lane("install").rc == 0
    repo.create("alpha")
    admin = _admin(repo, "alpha")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo.path / "sub").mkdir()
    rel = os.path.relpath(admin, elsewhere)
    p = _hold(["git"], elsewhere, "HEAD", repo.sha() or "", env={"GIT_DIR": rel})
    try:
        _age(admin / "HEAD.lock")
        r = repo.jlane("reconcile", cwd=repo.path / "sub")
        assert r.rc == 0, r.stderr
        assert (admin / "HEAD.lock").is_file(), f"a live git's lock was removed: {r.stdout}"
    finally:
        _commit_and_end(p)


def test_a_live_git_in_the_hub_keeps_the_lanes_head_lock_it_holds(repo: Repo) -> None:
    """A git working in the hub can hold a lane's lock (`update-ref worktrees/alpha/HEAD`,
    `git branch -m` rewriting the HEAD of each worktree on the branch): while any live
    git works in the repository, reconcile leaves the lane's locks."""
    assert repo.lane("install").rc == 0
    repo.create("alpha")
    admin = _admin(repo, "alpha")
    p = _hold(["git"], repo.path, "worktrees/alpha/HEAD", repo.sha() or "")
    try:
        assert (admin / "HEAD.lock").is_file()
        _age(admin / "HEAD.lock")
        r = repo.jlane("reconcile")
        assert r.rc == 0, r.stderr
        assert (admin / "HEAD.lock").is_file(), f"a live git's lock was removed: {r.stdout}"
    finally:
        _commit_and_end(p)


def test_a_lanes_locks_are_left_while_its_record_names_another_lanes_admin_dir(
    repo: Repo,
) -> None:
    """Lane alpha's record naming beta's admin dir (a planted `admin`) never has beta's
    locks judged by alpha's worktree: alpha's pointers are not intact, so its locks are
    not acted on; the live git in beta keeps its HEAD.lock."""
    assert repo.lane("install").rc == 0
    repo.create("alpha")
    beta = repo.create("beta")
    f = repo.state_dir / "lanes" / "alpha.json"
    d = json.loads(f.read_text())
    d["admin"] = "beta"
    f.write_text(json.dumps(d))
    admin = _admin(repo, "beta")
    p = _hold(["git"], beta, "HEAD", repo.sha() or "")
    try:
        _age(admin / "HEAD.lock")
        r = repo.jlane("reconcile")
        assert (admin / "HEAD.lock").is_file(), f"beta's live lock was removed: {r.stdout}"
        left = [c for c in r.json["changes"] if c["action"] == "git_lock_left"]
        assert left and left[0]["lane"] == "alpha", r.stdout
    finally:
        _commit_and_end(p)


def test_the_locks_of_a_lane_whose_worktree_is_gone_are_lifted_while_its_admin_dir_is_its(
    repo: Repo,
) -> None:
    """A lane's worktree deleted by hand: its admin dir's stale locks are lifted too (the
    release that reads that admin dir refuses lane_busy on them with reconcile as next),
    but only while the admin dir's own pointers hold (its `gitdir` names the lane, its
    `commondir` is git's `../..`): a `commondir` of no git's making (the lane's to
    write) leaves its locks, noted."""
    lp = repo.create("alpha")
    admin = _admin(repo, "alpha")
    shutil.rmtree(lp)
    lk = admin / "HEAD.lock"
    lk.write_text(f"{repo.sha()}\n")
    _age(lk)
    (admin / "commondir").write_text("../../\n")
    changes = reconcile(repo)
    assert lk.is_file(), f"a lock of an admin dir that is not the lane's went: {changes}"
    (left,) = [c for c in changes if c["action"] == "git_lock_left"]
    assert left["lane"] == "alpha" and left["files"] == [str(lk)], changes
    (admin / "commondir").write_text("../..\n")
    changes = reconcile(repo)
    assert not lk.exists(), changes
    assert {
        "action": "git_lock_removed",
        "lane": "alpha",
        "files": [str(lk)],
        "lifted": [{"file": str(lk)}],
    } in changes


def test_the_hubs_locks_are_never_lifted_through_a_symlinked_admin_dir(repo: Repo) -> None:
    """A record naming `worktrees/evil -> ..` (the common dir): no admin dir of git's, so
    nothing in it is the lane's. The hub's own index.lock and packed-refs.lock (old, of
    no live process) stay, and so does the HEAD.lock of a live git in the hub."""
    assert repo.lane("install").rc == 0
    repo.create("alpha")
    (repo.common_dir / "worktrees" / "evil").symlink_to("..")
    f = repo.state_dir / "lanes" / "alpha.json"
    d = json.loads(f.read_text())
    d["admin"] = "evil"
    f.write_text(json.dumps(d))
    hub_locks = [repo.common_dir / "index.lock", repo.common_dir / "packed-refs.lock"]
    for lk in hub_locks:
        lk.write_text("")
        _age(lk)
    p = _hold(["git"], repo.path, "HEAD", repo.sha() or "")
    try:
        _age(repo.common_dir / "HEAD.lock")
        r = repo.jlane("reconcile")
        for lk in [*hub_locks, repo.common_dir / "HEAD.lock"]:
            assert lk.is_file(), f"the hub's {lk.name} was removed: {r.stdout}"
        assert not any(c["action"] == "git_lock_removed" for c in r.json["changes"])
    finally:
        p.communicate("abort\n", timeout=30)
        for lk in hub_locks:
            lk.unlink()


@contextlib.contextmanager
def _left_while_a_git_works(repo: Repo, lk: Path) -> Iterator[None]:
    """While a live git works in the repository (its cwd the hub): reconcile leaves the
    old lock `lk`, noted as git_lock_left."""
    live = subprocess.Popen(
        ["git", "hash-object", "--stdin"], cwd=repo.path, stdin=subprocess.PIPE, text=True
    )
    try:
        changes = reconcile(repo)
        assert lk.exists()
        assert any(c["action"] == "git_lock_left" and c["files"] == [str(lk)] for c in changes)
        yield
    finally:
        live.communicate("", timeout=30)


def test_a_lanes_dead_branch_lock_is_lifted_and_one_a_live_git_may_hold_is_named(
    repo: Repo,
) -> None:
    """`refs/heads/lane/alpha.lock` in the common dir (a git killed while it moved the
    branch): doctor fails it and reconcile lifts it when no live git works anywhere in
    the repository. While one does (it may be writing the branch), reconcile leaves it
    and doctor names it with the command that removes it by hand, which works."""
    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    lk = repo.common_dir / "refs" / "heads" / "lane" / "alpha.lock"
    lk.write_text(f"{repo.sha()}\n")
    _age(lk)
    doctor = repo.jlane("doctor")
    assert any(
        c["name"] == "lane alpha" and c["status"] == "fail" and str(lk) in c["message"]
        for c in doctor.json["checks"]
    ), doctor.stdout
    changes = reconcile(repo)
    assert not lk.exists()
    assert {"action": "git_lock_removed", "lane": "alpha", "files": [str(lk)]} in changes
    lk.write_text(f"{repo.sha()}\n")
    _age(lk)
    with _left_while_a_git_works(repo, lk):
        doctor = repo.jlane("doctor")
        (warn,) = [c for c in doctor.json["checks"] if c["name"] == "lane alpha"]
        assert warn["status"] == "warn", doctor.stdout
        assert subprocess.run(warn["fix"], shell=True, check=False).returncode == 0
        assert not lk.exists()
    repo.commit(path, "f.txt", "x\n")  # the branch moves again


def test_a_dead_packed_refs_lock_is_lifted_and_one_a_live_git_may_hold_is_left(
    repo: Repo,
) -> None:
    """`packed-refs.lock` a killed gc/pack-refs left (every ref delete fails on it: a
    release's): reconcile removes it when it is old and no live git works in the
    repository (red team 14H-B F9), and leaves it, noted, while one does."""
    repo.create("alpha")
    lk = repo.common_dir / "packed-refs.lock"
    lk.write_text("")
    _age(lk)
    changes = reconcile(repo)
    assert not lk.exists()
    assert {"action": "git_lock_removed", "files": [str(lk)]} in changes
    lk.write_text("")
    _age(lk)
    with _left_while_a_git_works(repo, lk):
        pass
    lk.unlink()


def test_an_unreadable_release_journal_is_kept_aside_not_deleted(repo: Repo) -> None:
    """releasing/KEY.json that is not JSON: reconcile moves it aside (kept, as other
    unreadable state files are), never deletes it; the lane is left as it was."""
    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    journal = repo.state_dir / "releasing" / "alpha.json"
    journal.parent.mkdir(exist_ok=True)
    journal.write_text("{not json")
    changes = reconcile(repo)
    assert not journal.exists()
    (aside,) = journal.parent.glob("alpha.json.corrupt-*")
    assert aside.read_text() == "{not json"
    assert any(c["action"] == "release_journal_kept" for c in changes), changes
    assert path.is_dir() and rec(repo, "alpha")["status"] == "active"


def test_git_lane_run_through_git_lifts_a_dead_lock_in_the_hub_it_runs_from(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """`git lane reconcile` as a person types it: the `git` that runs git-lane waits for
    it with its cwd in the hub, holding no lock; it is not counted as a git at work, so
    a dead lock in a lane is still lifted."""
    assert repo.lane("install").rc == 0
    repo.create("alpha")
    lk = _admin(repo, "alpha") / "HEAD.lock"
    lk.write_text("")
    _age(lk)
    r = subprocess.run(
        ["git", "lane", "reconcile", "--json"], cwd=repo.path, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert not lk.exists(), r.stdout


def test_a_git_that_exits_while_it_is_looked_at_works_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A git that exits between two reads of its /proc entries fails the second with
    ESRCH, not ENOENT: gitlocks took that for "a git we may not look into" and so for a
    git at work, and every stale lock stayed "held" while any git anywhere on the
    machine happened to exit (a CI flake under load, a reconcile that lifts nothing)."""
    from guard import gitlocks

    p = subprocess.Popen(
        ["git", "hash-object", "--stdin"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.2)
        assert gitlocks.git_at_work([str(tmp_path)]) is True  # it works there
        real = open

        def exited(path: Any, *a: Any, **k: Any) -> Any:
            if str(path) == f"/proc/{p.pid}/environ":
                raise ProcessLookupError(3, "No such process")
            return real(path, *a, **k)

        monkeypatch.setattr(gitlocks, "open", exited, raising=False)
        assert gitlocks.git_at_work([str(tmp_path)]) is False
    finally:
        p.kill()
        p.wait()


@NEEDS_LANDLOCK
def test_reconcile_never_writes_out_a_sparse_index_lock_the_lane_grew(hub: Repo) -> None:
    """Red team 15A F4. A sandboxed lane runs `truncate -s 256M "$(git rev-parse
    --git-dir)/index.lock"` (its admin dir is granted; no disk used). Once it is stale,
    the owner's `git lane reconcile` (the next of every stale `lane_busy`) kept a copy of
    it in kept/ with shutil.copyfileobj, every hole written out as zeros (and the lane's
    index copied the same way beside it): a terabyte for the same lane cost, until the
    owner's disk was full. The copy keeps holes as holes (dirfd.copy_data); what the
    lock held is kept whole all the same."""
    lp = hub.create("alpha")
    size = 256 << 20
    r = lane(
        "exec", "--sandbox", "alpha", "--", "sh", "-c",
        f'truncate -s {size} "$(git rev-parse --git-dir)/index.lock"', cwd=lp,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    time.sleep(2.5)  # gitlocks.MIN_AGE
    lifted = [c for c in reconcile(hub) if c["action"] == "git_lock_removed"]
    assert lifted, "the stale index.lock was not lifted"
    kept = hub.state_dir / "kept"
    files = [p for p in kept.rglob("*") if p.is_file()] if kept.exists() else []
    written = sum(p.stat().st_blocks * 512 for p in files)
    assert written < (1 << 20), (
        f"reconcile wrote {written} bytes into kept/ for a sparse index.lock of "
        f"{size} bytes that took no disk"
    )
    assert [p.stat().st_size for p in files] == [size]  # kept whole, holes and all


def test_reconcile_never_reads_a_lane_marker_the_lane_grew(repo: Repo) -> None:
    """The lane's marker (`<admin>/gitlane-lane`, its key: the hooks tell a lane by it) is
    in its admin dir, which a sandboxed lane may write: `truncate -s 3G` of it (no disk
    used) made reconcile (and repair) read it whole, MemoryError, exit 3 under 1.5 GiB
    (the pattern of red team 15A F7). It is read to 4 KiB at most; one past that is no
    key. Every command's first step (reconcile's too) now moves one past REF_MAX into
    kept/ and writes it back from the lane's record (red team 16A F1), so reconcile finds
    nothing left to write."""
    lp = repo.create("alpha")
    admin = Path(git(lp, "rev-parse", "--absolute-git-dir").stdout.strip())
    with open(admin / "gitlane-lane", "r+b") as f:
        f.truncate(3 << 30)
    r = lane_capped(repo.path, "reconcile", "--json", memory=1536 << 20)
    assert r.returncode == 0, (r.returncode, r.stdout[-300:], r.stderr[-300:])
    assert {"action": "marker_written", "lane": "alpha"} not in json.loads(r.stdout)["changes"]
    assert (admin / "gitlane-lane").read_text() == "alpha\n"
    (moved,) = [
        m
        for e in events(repo, "oversized_kept")
        for m in e["moved"]
        if m["file"].endswith("/gitlane-lane")
    ]
    assert moved["head"] == "alpha" and moved["size"] == 3 << 30
