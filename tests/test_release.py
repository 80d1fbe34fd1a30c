"""`git lane release` (G11): a lane with unlanded commits or uncommitted work is never
removed without `--confirm yes-discard-lane`; a kept dirty lane is `git worktree lock`ed;
a landed clean lane goes without confirmation; the record stays, as `released`."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LaneRun, Repo, earlier_kept, git, needs_modes, owner_lane, take_name

from guard.errors import Refusal, join_next

CONFIRM = ("--confirm", "yes-discard-lane")


def wt_block(repo: Repo, path: Path) -> str | None:
    """The `git worktree list --porcelain` record of `path`, or None."""
    for block in repo.worktrees().split("\n\n"):
        if block.startswith(f"worktree {path}\n"):
            return block
    return None


def record(repo: Repo, key: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((repo.state_dir / "lanes" / f"{key}.json").read_text())
    return data


def assert_untouched(repo: Repo, path: Path, tip: str | None, files: dict[str, str]) -> None:
    assert repo.sha("refs/heads/lane/alpha") == tip
    block = wt_block(repo, path)
    assert block is not None and "branch refs/heads/lane/alpha" in block
    for name, content in files.items():
        assert (path / name).read_text() == content
    assert record(repo, "alpha")["status"] == "active"


def assert_removed(repo: Repo, path: Path) -> None:
    assert repo.sha("refs/heads/lane/alpha") is None
    assert wt_block(repo, path) is None and not path.exists()
    rec = record(repo, "alpha")
    assert rec["status"] == "released" and rec["owner_pid"] is None
    r = repo.jlane("status", "alpha")
    assert r.json["lanes"][0]["state"] == "released"


def test_unlanded_commits_are_refused_then_discarded_with_confirm(repo: Repo) -> None:
    lp = repo.create("alpha")
    c1 = repo.commit(lp, "a.txt", "a\n", "first")
    tip = repo.commit(lp, "b.txt", "b\n", "second")
    for extra in ((), ("--confirm", "yes"), ("--confirm", "YES-DISCARD-LANE")):
        r = repo.jlane("release", "alpha", *extra)
        assert (r.rc, r.code) == (1, "unlanded_work"), extra
        assert [c.split()[0] for c in r.json["details"]["commits"]] == [
            repo.git("rev-parse", "--short", tip).stdout.strip(),
            repo.git("rev-parse", "--short", c1).stdout.strip(),
        ]
        assert r.json["details"]["dirty_paths"] == []
        assert "refused [unlanded_work]" in r.stderr
        assert_untouched(repo, lp, tip, {"a.txt": "a\n", "b.txt": "b\n"})
    assert "locked" not in (wt_block(repo, lp) or "")  # only a dirty lane gets locked

    r = repo.jlane("release", "alpha", *CONFIRM)
    assert (r.rc, r.code) == (0, "released"), r.stderr
    assert r.json["tip"] == tip and len(r.json["discarded_commits"]) == 2
    assert_removed(repo, lp)
    # the discarded commits are still objects; the recovery command brings them back
    repo.git(*r.json["recover"].split()[1:])
    assert repo.sha("refs/heads/lane/alpha") == tip


@pytest.mark.parametrize("kind", ["untracked", "modified", "staged"])
def test_dirty_lane_is_refused_and_locked(repo: Repo, kind: str) -> None:
    lp = repo.create("alpha")
    tip = repo.sha("refs/heads/lane/alpha")
    if kind == "untracked":
        (lp / "notes dir").mkdir()
        (lp / "notes dir" / "n.txt").write_text("n\n")
        files, lost = {"notes dir/n.txt": "n\n"}, ["notes dir/n.txt"]
    elif kind == "modified":
        (lp / "README.md").write_text("edited\n")
        files, lost = {"README.md": "edited\n"}, ["README.md"]
    else:
        (lp / "s.txt").write_text("s\n")
        repo.git("add", "s.txt", cwd=lp)
        files, lost = {"s.txt": "s\n"}, ["s.txt"]
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work")
    assert r.json["details"]["dirty_paths"] == lost and r.json["details"]["commits"] == []
    assert_untouched(repo, lp, tip, files)
    block = wt_block(repo, lp)
    assert block is not None and "\nlocked" in block
    # locked: even a plain `git worktree remove --force` leaves it alone now
    assert repo.git("worktree", "remove", "--force", str(lp), check=False).returncode != 0
    assert lp.exists()

    r = repo.jlane("release", "alpha", *CONFIRM)
    assert (r.rc, r.code) == (0, "released"), r.stderr
    assert r.json["discarded_paths"] == lost
    assert_removed(repo, lp)


def test_landed_clean_lane_goes_without_confirmation(repo: Repo) -> None:
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    repo.git("merge", "-q", "--ff-only", "lane/alpha")  # main now contains the lane
    assert repo.sha() == tip
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (0, "released"), r.stderr
    assert r.json["discarded_commits"] == [] and r.json["recover"] is None
    assert_removed(repo, lp)
    assert repo.sha() == tip
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (0, "already_released")


def test_fresh_empty_lane_goes_without_confirmation(repo: Repo) -> None:
    lp = repo.create("alpha")
    assert repo.jlane("release", "alpha").code == "released"
    assert_removed(repo, lp)
    # the key is free again and the old record is replaced
    assert repo.jlane("create", "alpha").rc == 0
    assert record(repo, "alpha")["status"] == "active"


def test_landed_lane_with_dirt_is_still_refused(repo: Repo) -> None:
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    repo.git("merge", "-q", "--ff-only", "lane/alpha")
    (lp / "later.txt").write_text("unsaved\n")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work")
    assert r.json["details"]["commits"] == [] and r.json["details"]["dirty_paths"] == ["later.txt"]
    assert_untouched(repo, lp, tip, {"later.txt": "unsaved\n"})


def test_orphaned_lane_with_unlanded_commits(repo: Repo) -> None:
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    shutil.rmtree(lp)
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work")
    assert repo.sha("refs/heads/lane/alpha") == tip
    r = repo.jlane("release", "alpha", *CONFIRM)
    assert r.rc == 0, r.stderr
    assert repo.sha("refs/heads/lane/alpha") is None
    assert wt_block(repo, lp) is None
    assert record(repo, "alpha")["status"] == "released"


def test_release_with_main_checked_out_nowhere(repo: Repo) -> None:
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    repo.git("checkout", "-q", "--detach")
    assert repo.jlane("release", "alpha").code == "unlanded_work"
    assert repo.jlane("release", "alpha", *CONFIRM).code == "released"
    assert_removed(repo, lp)
    assert repo.sha() is not None


def _next_releases(hub: Repo, r: LaneRun, lp: Path) -> None:
    """The refusal's next, run as printed with sh, releases the lane at `lp`."""
    done = subprocess.run(
        ["sh", "-c", join_next(r.json["next"])], cwd=hub.path, text=True, capture_output=True
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert_removed(hub, lp)


def test_a_branch_delete_the_hook_refuses_is_told_as_the_hooks_refusal(hub: Repo) -> None:
    """main made a symbolic ref: the reference-transaction hook refuses every branch delete
    (it may be a rename's first step). release says so, with the hook's code and next,
    never that the branch moved (it did not); the lane is put back, and the next as
    printed releases it."""
    lp = hub.create("alpha")
    tip = hub.commit(lp, "a.txt", "a\n")
    assert hub.jlane("land", "alpha").rc == 0
    hub.git("branch", "aside")
    hub.git("symbolic-ref", "refs/heads/main", "refs/heads/aside")
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "main_mutation_refused"), r.stdout
    assert r.json["next"] == ["git lane restore-main", "git lane release alpha"]
    assert r.json["details"]["hook"] is True and r.json["details"]["worktree_restored"] is True
    assert_untouched(hub, lp, tip, {"a.txt": "a\n"})
    _next_releases(hub, r, lp)


def test_a_lock_on_the_lane_branch_refuses_before_anything_is_removed(hub: Repo) -> None:
    """`refs/heads/lane/KEY.lock` (a git killed while it wrote the branch) makes git refuse
    the branch's delete and the `worktree add` that would put a removed worktree back:
    release refuses lane_busy before it removes anything, and its next (reconcile removes
    a stale lock) then releases the lane."""
    lp = hub.create("alpha")
    tip = hub.commit(lp, "a.txt", "a\n")
    assert hub.jlane("land", "alpha").rc == 0
    lk = hub.common_dir / "refs" / "heads" / "lane" / "alpha.lock"
    lk.write_text(f"{tip}\n")
    os.utime(lk, (1, 1))  # old: its git is gone
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "lane_busy"), r.stdout
    assert r.json["details"]["stale"] is True and r.json["next"][0] == "git lane reconcile"
    assert_untouched(hub, lp, tip, {"a.txt": "a\n"})
    _next_releases(hub, r, lp)


def test_a_stale_index_lock_in_a_landed_lane_has_a_release_next_that_works(hub: Repo) -> None:
    """A git killed in the lane while it wrote the index left `<admin>/index.lock`, long
    dead (red team 14H-B F8). release judges it as checkpoint and abort do: lane_busy,
    stale, next reconcile (which lifts it, a copy kept) and the release, which then
    releases the lane; never the same release again for ever."""
    lp = hub.create("alpha")
    tip = hub.commit(lp, "a.txt", "a\n")
    assert hub.jlane("land", "alpha").rc == 0
    admin = Path(git(lp, "rev-parse", "--absolute-git-dir").stdout.strip())
    lk = admin / "index.lock"
    lk.write_bytes(b"DIRC")  # what git was writing when it was killed
    os.utime(lk, (1, 1))  # long ago; no git runs anywhere
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "lane_busy"), r.stdout
    assert r.json["details"]["stale"] is True, r.stdout
    assert r.json["next"] == ["git lane reconcile", "git lane release alpha"]
    assert r.json["details"]["locks"] == [str(lk)]
    assert_untouched(hub, lp, tip, {"a.txt": "a\n"})
    _next_releases(hub, r, lp)


@pytest.mark.parametrize(
    "which", ["index.lock", "half-written index.lock", "branch", "packed-refs"]
)
def test_a_stale_lock_of_a_lane_whose_worktree_is_gone_has_a_release_next_that_works(
    hub: Repo, which: str
) -> None:
    """The worktree of a landed lane deleted by hand (`rm -rf`), a stale lock a killed git
    left where release looks: `<admin>/index.lock`, the branch's, packed-refs'. release
    refuses lane_busy (stale), next reconcile then the release. reconcile lifted a lane's
    locks only where its worktree was present, so the next looped for ever; it lifts them
    for a lane whose worktree is gone too, judged as for a present lane (git reads the
    lock against the index and HEAD from the admin dir: one that is the index goes, one
    that is not is kept), and the next as printed releases the lane."""
    lp = hub.create("alpha")
    tip = hub.commit(lp, "a.txt", "a\n")
    assert hub.jlane("land", "alpha").rc == 0
    admin = Path(git(lp, "rev-parse", "--absolute-git-dir").stdout.strip())
    shutil.rmtree(lp)
    lk = {
        "branch": hub.common_dir / "refs" / "heads" / "lane" / "alpha.lock",
        "packed-refs": hub.common_dir / "packed-refs.lock",
    }.get(which, admin / "index.lock")
    data = {"index.lock": (admin / "index").read_bytes(), "half-written index.lock": b"DIRC"}
    lk.write_bytes(data.get(which, f"{tip}\n".encode()))
    os.utime(lk, (1, 1))  # long ago; no git runs anywhere
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "lane_busy"), r.stdout
    assert r.json["details"]["stale"] is True and r.json["details"]["locks"] == [str(lk)]
    assert r.json["next"] == ["git lane reconcile", "git lane release alpha"]
    _next_releases(hub, r, lp)
    assert not lk.exists()
    kept = [k.read_bytes() for k in (hub.state_dir / "kept").glob("alpha-index.lock-*")]
    # a half-written index is never simply dropped; a copy of the index is no staged state
    assert kept == ([b"DIRC"] if which == "half-written index.lock" else [])


def test_a_young_index_lock_is_not_judged_stale_by_release(hub: Repo) -> None:
    """An index.lock just taken may be a git at work: lane_busy, not stale, the release
    again as next (reconcile would not lift it)."""
    lp = hub.create("alpha")
    hub.commit(lp, "a.txt", "a\n")
    assert hub.jlane("land", "alpha").rc == 0
    admin = Path(git(lp, "rev-parse", "--absolute-git-dir").stdout.strip())
    (admin / "index.lock").write_bytes(b"DIRC")
    soon = time.time() + 600  # young however slowly the test runs
    os.utime(admin / "index.lock", (soon, soon))
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "lane_busy"), r.stdout
    assert r.json["details"]["stale"] is False
    assert r.json["next"] == ["git lane release alpha"]
    assert lp.exists()


def test_a_stale_packed_refs_lock_refuses_before_anything_is_removed(hub: Repo) -> None:
    """`packed-refs.lock` a killed gc/pack-refs left (red team 14H-B F9): git takes it
    for every ref delete, so release refuses lane_busy (stale) before it removes the
    worktree (never removed and put back on every retry, ignored files lost each time),
    and its next (reconcile removes the stale lock) releases the lane."""
    lp = hub.create("alpha")
    tip = hub.commit(lp, "a.txt", "a\n")
    assert hub.jlane("land", "alpha").rc == 0
    lk = hub.common_dir / "packed-refs.lock"
    lk.write_text("")
    os.utime(lk, (1, 1))  # long dead
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "lane_busy"), r.stdout
    assert r.json["details"]["stale"] is True and r.json["details"]["locks"] == [str(lk)]
    assert r.json["next"] == ["git lane reconcile", "git lane release alpha"]
    assert_untouched(hub, lp, tip, {"a.txt": "a\n"})
    _next_releases(hub, r, lp)


def test_a_young_packed_refs_lock_refuses_the_release_again(hub: Repo) -> None:
    """A packed-refs.lock just taken (a gc at work): lane_busy, not stale, nothing removed,
    the release again as next; reconcile leaves it."""
    lp = hub.create("alpha")
    tip = hub.commit(lp, "a.txt", "a\n")
    assert hub.jlane("land", "alpha").rc == 0
    lk = hub.common_dir / "packed-refs.lock"
    lk.write_text("")
    soon = time.time() + 600  # young however slowly the test runs
    os.utime(lk, (soon, soon))
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "lane_busy"), r.stdout
    assert r.json["details"]["stale"] is False and r.json["next"] == ["git lane release alpha"]
    assert_untouched(hub, lp, tip, {"a.txt": "a\n"})
    assert hub.jlane("reconcile").rc == 0 and lk.exists()


def test_release_refusals(repo: Repo) -> None:
    assert repo.jlane("release", "nope").code == "unknown_lane"
    assert repo.jlane("release", "../x").code == "invalid_lane_key"
    r = repo.jlane("release")
    assert r.rc in (1, 2) and r.json["ok"] is False


def test_commits_on_a_detached_head_in_the_lane_are_unlanded_work(repo: Repo) -> None:
    lp = repo.create("alpha")
    tip = repo.sha("refs/heads/lane/alpha")
    repo.git("checkout", "-q", "--detach", cwd=lp)
    head = repo.commit(lp, "d.txt", "on no branch\n", "detached work")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work")
    assert [c.split()[0] for c in r.json["details"]["detached_commits"]] == [
        repo.git("rev-parse", "--short", head).stdout.strip()
    ]
    assert repo.sha("refs/heads/lane/alpha") == tip
    assert wt_block(repo, lp) == f"worktree {lp}\nHEAD {head}\ndetached"
    r = repo.jlane("release", "alpha", *CONFIRM)
    assert r.rc == 0, r.stderr
    assert not lp.exists() and repo.sha("refs/heads/lane/alpha") is None
    repo.git(*r.json["recover_detached"].split()[1:])
    assert repo.sha("refs/heads/lane/alpha-detached") == head


def test_detached_head_already_in_main_is_not_work(repo: Repo) -> None:
    lp = repo.create("alpha")
    repo.git("checkout", "-q", "--detach", "HEAD", cwd=lp)
    assert repo.jlane("release", "alpha").code == "released"
    assert not lp.exists()


def test_a_live_owner_keeps_its_lane(repo: Repo) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert repo.jlane("create", "alpha", "--owner-pid", str(owner.pid)).rc == 0
        lp = Path(repo.jlane("status").json["lanes"][0]["path"])
        tip = repo.sha("refs/heads/lane/alpha")
        r = repo.jlane("release", "alpha", *CONFIRM)
        assert (r.rc, r.code) == (1, "lane_owner_conflict")
        assert_untouched(repo, lp, tip, {})
    finally:
        owner.kill()
        owner.wait()
    # the owner is gone: the lane can be released
    assert repo.jlane("release", "alpha").code == "released"
    assert_removed(repo, lp)


def test_commits_only_the_worktree_head_reflog_holds_are_work(repo: Repo) -> None:
    """A commit made on a detached HEAD, then left by switching back to the branch, is on
    no branch: only the lane's HEAD reflog (which goes with the worktree) holds it."""
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n")
    repo.git("merge", "-q", "--ff-only", "lane/alpha")  # landed: nothing else to keep
    git(path, "switch", "-q", "--detach")
    precious = repo.commit(path, "p.txt", "p\n", "precious")
    git(path, "switch", "-q", "lane/alpha")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert any("precious" in c for c in r.json["details"]["detached_commits"]), r.stdout
    assert path.is_dir()
    r = repo.jlane("release", "alpha", "--confirm", "yes-discard-lane")
    assert r.code == "released", r.stdout
    assert git(repo.path, "cat-file", "-t", precious).stdout.strip() == "commit"


def test_a_commit_reset_away_is_work_but_a_rebased_one_is_not(repo: Repo) -> None:
    """A tip the branch had before `reset --hard` (or an amend) lives only in the branch's
    reflog, which release deletes with the branch: work. What a sync rebased is on the
    branch in another form: not work."""
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n", "kept")
    repo.commit(repo.path, "m.txt", "m\n")  # main moves: the sync rebases "kept"
    assert repo.jlane("sync", "alpha").rc == 0
    repo.git("merge", "-q", "--ff-only", "lane/alpha")  # landed
    assert repo.jlane("release", "alpha").code == "released"
    path = repo.create("beta")
    valuable = repo.commit(path, "v.txt", "v\n", "valuable")
    git(path, "reset", "-q", "--hard", "HEAD~1")
    r = repo.jlane("release", "beta")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert any("valuable" in c for c in r.json["details"]["detached_commits"]), r.stdout
    assert valuable


def test_a_flagged_file_edited_in_the_lane_is_work(repo: Repo) -> None:
    path = repo.create("alpha")
    repo.commit(path, "f.txt", "one\n")
    repo.git("merge", "-q", "--ff-only", "lane/alpha")
    git(path, "update-index", "--assume-unchanged", "f.txt")
    (path / "f.txt").write_text("WORK\n")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert (path / "f.txt").read_text() == "WORK\n"


def test_reconcile_keeps_an_unlanded_branch_a_releasing_journal_names(repo: Repo) -> None:
    """A releasing journal is a file in the state dir: reconcile asks git what finishing
    would lose. One saying `discarded_commits: 0` for a lane with an unlanded commit whose
    worktree went (moved away) never has the branch deleted; nor git's record of the
    worktree, so `repair` can still bring it back."""
    import os

    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    tip = repo.commit(path, "work.txt", "precious\n", "unlanded work")
    moved = path.parent / "alpha-moved"
    os.rename(path, moved)
    (repo.state_dir / "releasing").mkdir(exist_ok=True)
    (repo.state_dir / "releasing" / "alpha.json").write_text(
        json.dumps(
            {
                "lane": "alpha",
                "path": str(path),
                "tip": tip,
                "discarded_commits": 0,
                "at": "2026-01-01T00:00:00Z",
            }
        )
    )
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout
    assert {"action": "release_not_finished", "lane": "alpha", "tip": tip} in r.json["changes"]
    assert repo.git("rev-parse", "refs/heads/lane/alpha").stdout.strip() == tip
    assert record(repo, "alpha")["status"] != "released"
    assert not (repo.state_dir / "releasing" / "alpha.json").exists()
    os.rename(moved, path)  # put back: the worktree is git's again, the work there
    assert repo.git("-C", str(path), "log", "-1", "--format=%H").stdout.strip() == tip


def _many_files_landed(repo: Repo, key: str, n: int) -> Path:
    assert repo.lane("install").rc == 0
    assert repo.lane("config", "set", "gate_command", "true").rc == 0
    path = repo.create(key)
    (path / "d").mkdir()
    for i in range(n):
        (path / "d" / f"f{i}").write_text(str(i))
    git(path, "add", "-A")
    git(path, "commit", "-qm", "many files")
    assert repo.jlane("land", key).rc == 0
    return path


def test_a_release_killed_mid_removal_is_finished_so_the_key_can_be_created_again(
    repo: Repo,
) -> None:
    """release SIGKILLed with its git while `git worktree remove` deletes the lane's
    files: reconcile finishes the removal (what is left is the landed tip's files, byte
    for byte) and drops git's record of the worktree; the key can be created again."""
    import os
    import signal
    import time

    path = _many_files_landed(repo, "r", 3000)
    p = subprocess.Popen(
        [sys.executable, "-m", "guard", "release", "r", "--json"],
        cwd=repo.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        try:
            if len(os.listdir(path / "d")) < 2700:
                break
        except OSError:
            break
        time.sleep(0.001)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    if not path.exists():
        pytest.skip("the release ended before it was killed mid-removal")
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout
    assert {"action": "release_leftover_removed", "lane": "r", "path": str(path)} in r.json[
        "changes"
    ], r.stdout
    assert not path.exists() and wt_block(repo, path) is None
    assert repo.jlane("create", "r").rc == 0


def test_a_release_leftover_holding_other_files_is_kept_not_deleted(repo: Repo) -> None:
    """What is left of a lane a killed release was removing, with a file the lane's tip
    does not hold (or holds otherwise), is moved whole to kept/, never deleted."""
    import os

    path = _many_files_landed(repo, "r", 3)
    tip = git(path, "rev-parse", "HEAD").stdout.strip()
    (path / "d" / "f0").unlink()  # what the killed removal had done, .git file first
    (path / ".git").unlink()
    (path / "d" / "f1").write_text("changed\n")
    (path / "notes.txt").write_text("not in any commit\n")
    (repo.state_dir / "releasing").mkdir(exist_ok=True)
    (repo.state_dir / "releasing" / "r.json").write_text(
        json.dumps({"lane": "r", "path": str(path), "tip": tip, "discarded_commits": 0})
    )
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout
    kept = [c for c in r.json["changes"] if c["action"] == "release_leftover_kept"]
    assert kept and {c["action"] for c in r.json["changes"]} >= {"release_finished"}, r.stdout
    aside = Path(kept[0]["to"])
    assert (aside / "notes.txt").read_text() == "not in any commit\n"
    assert (aside / "d" / "f1").read_text() == "changed\n"
    assert not os.path.lexists(path) and wt_block(repo, path) is None
    assert repo.jlane("create", "r").rc == 0


def test_create_beside_a_released_lanes_stale_worktree_record_refuses_with_a_way_out(
    repo: Repo, tmp_path: Path
) -> None:
    """git still registers a released lane's half-removed worktree on lane/KEY (a
    reconcile older than finish_removal left it): create, from another worktrees_root
    too, refuses worktree_path_exists (git said "already checked out"), never exit 3;
    its next (reconcile, then create) creates the lane."""
    path = _many_files_landed(repo, "r", 3)
    assert repo.jlane("release", "r").code == "released"
    git(repo.path, "worktree", "add", "-q", "-b", "lane/r", str(path), "main")
    git(repo.path, "update-ref", "-d", "refs/heads/lane/r")
    (path / ".git").unlink()
    repo.config("worktrees_root", str(tmp_path / "elsewhere"))
    r = repo.jlane("create", "r")
    assert r.rc == 1 and r.code == "worktree_path_exists", (r.rc, r.stdout, r.stderr[-300:])
    assert r.json["next"] == ["git lane reconcile", "git lane create r"]
    for cmd in r.json["next"]:
        r = repo.jlane(*cmd.split()[2:])
        assert r.rc == 0, r.stdout
    assert r.code == "created" and wt_block(repo, path) is None


def test_release_confirm_copies_admin_modules_without_following_a_link_or_opening_a_fifo(
    repo: Repo, tmp_path: Path
) -> None:
    """The confirmed release copies the lane's submodule git dirs (`<admin>/modules/`,
    writable from the lane) into kept/ and unsets core.worktree in each copy's config
    (release.keep_modules). Red team 13U (findings 1 and 2): a `config` there that is a
    link to a file outside was copied as a link and `git config --file` rewrote the file
    it names; a FIFO made copytree raise (exit 3, every retry, a partial copy each time).
    The sandbox now refuses both (no SPECIALS nor REFER anywhere in the admin dir,
    tests/test_sandbox.py); a plain process in the lane still plants them: the copy
    goes through directory fds, regular files and directories only, and names what it
    left out; nothing outside is written, and the lane is released."""
    lp = repo.create("alpha")
    admin = Path(repo.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    victim = tmp_path / "outside" / "config"
    victim.parent.mkdir()
    text = "[core]\n\tbare = false\n\tworktree = ../../../elsewhere\n"
    victim.write_text(text)
    sub, other = admin / "modules" / "sub", admin / "modules" / "other"
    sub.mkdir(parents=True)
    other.mkdir()
    (sub / "HEAD").write_text("ref: refs/heads/main\n")
    (sub / "config").symlink_to(victim)
    os.mkfifo(sub / "packed-refs")
    (other / "HEAD").write_text("ref: refs/heads/main\n")
    (other / "config").write_text(text)
    os.mkfifo(other / "fifo")
    r = repo.jlane("release", "alpha", *CONFIRM)
    assert (r.rc, r.code) == (0, "released"), (r.rc, r.stdout, r.stderr)
    assert victim.read_text() == text, "release wrote through a link in <admin>/modules"
    kept = Path(r.json["kept_modules"])
    assert sorted(r.json["kept_modules_skipped"]) == [
        "modules/other/fifo", "modules/sub/config", "modules/sub/packed-refs",
    ]  # fmt: skip
    assert (kept / "sub" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert not (kept / "sub" / "config").exists()
    assert "worktree" not in (kept / "other" / "config").read_text()  # a repository again
    assert_removed(repo, lp)


def test_a_deep_modules_tree_in_the_admin_dir_never_makes_the_confirmed_release_loop(
    repo: Repo,
) -> None:
    """keep_modules walks <admin>/modules through fds but makes the copy by path: a tree
    the lane made with long names gave a copy path past PATH_MAX, ENAMETOOLONG, and a
    `worktree_remove_failed` refusal whose next met the same (red team 13X). What no
    path can name is left out and named; the release ends."""
    lp = repo.create("alpha")
    admin = Path(repo.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    (admin / "modules").mkdir()
    fd = os.open(admin / "modules", os.O_RDONLY | os.O_DIRECTORY)
    name = "d" * 250
    for _ in range(20):  # 20 * 251 > PATH_MAX: made relative to a dir fd, as a lane can
        os.mkdir(name, dir_fd=fd)
        nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)
    r = repo.jlane("release", "alpha", *CONFIRM)
    assert (r.rc, r.code) == (0, "released"), r.stdout
    if r.rc != 0:
        nxt = r.json.get("next") or []
        assert nxt, r.stdout
        again = repo.jlane(*nxt[0].split()[2:])
        assert again.rc == 0, (
            f"the release refused {r.code} and its next `{nxt[0]}` refuses again: "
            f"{again.stdout[:600]}"
        )


@contextlib.contextmanager
def small_disk(target: Path, size: str = "64m") -> Iterator[None]:
    """A tmpfs of `size` at `target` (made empty): a disk that fills, where the test runs
    as root (else skipped)."""
    target.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
        capture_output=True, text=True,
    )  # fmt: skip
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN): {res.stderr}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def _allocated(root: Path) -> int:
    return sum(f.lstat().st_blocks * 512 for f in root.rglob("*") if f.is_file())


def test_release_copies_a_sparse_modules_file_as_a_sparse_file(repo: Repo) -> None:
    """Red team 14C (MED): a lane makes `<admin>/modules/sub/big` a file of a terabyte that
    takes no space (truncate; the sandbox grants TRUNCATE in the admin dir, a plain lane
    needs nothing). The confirmed release copied it into kept/ byte by byte, writing its
    holes as zeros until the owner's disk was full, and its refusal named the same
    release, which filled it again into a second copy. The copy keeps holes as holes
    (SEEK_DATA/SEEK_HOLE); the data around them is copied exactly. Here kept/ is a 64 MiB
    tmpfs."""
    lp = repo.create("alpha")
    admin = Path(repo.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    sub = admin / "modules" / "sub"
    sub.mkdir(parents=True)
    (sub / "HEAD").write_text("ref: refs/heads/main\n")
    with open(sub / "big", "wb") as f:
        f.write(b"head")
        f.seek(1 << 40)
        f.write(b"tail")
    kept_dir = repo.state_dir / "kept"
    with small_disk(kept_dir):
        r = repo.jlane("release", "alpha", *CONFIRM)
        assert (r.rc, r.code) == (0, "released"), r.stdout
        kept = Path(r.json["kept_modules"])
        big = kept / "sub" / "big"
        assert big.stat().st_size == (1 << 40) + 4
        assert _allocated(kept_dir) < 1 << 20, "release wrote the lane's holes out as zeros"
        with open(big, "rb") as f:
            assert f.read(4) == b"head"
            f.seek(1 << 40)
            assert f.read() == b"tail"
        assert (kept / "sub" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert_removed(repo, lp)


def test_a_release_leftover_with_a_file_the_lane_grew_is_kept_never_read_whole(
    repo: Repo,
) -> None:
    """What is left of a lane a killed release was removing: reconcile tells whether it
    holds only the tip's files by hashing each, read whole with no limit. A lane still
    running there grew one (`truncate -s 3G`, no disk used): MemoryError, exit 3 under
    1.5 GiB. A file whose size is not its blob's is no tip file: the leftover is kept,
    never read whole (the pattern of red team 15A F7)."""
    import resource

    path = _many_files_landed(repo, "r", 3)
    tip = git(path, "rev-parse", "HEAD").stdout.strip()
    (path / ".git").unlink()  # what the killed removal had done first
    with open(path / "d" / "f1", "r+b") as f:
        f.truncate(3 << 30)
    (repo.state_dir / "releasing").mkdir(exist_ok=True)
    (repo.state_dir / "releasing" / "r.json").write_text(
        json.dumps({"lane": "r", "path": str(path), "tip": tip, "discarded_commits": 0})
    )

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    r = subprocess.run(
        [sys.executable, "-m", "guard", "reconcile", "--json"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=120,
    )
    assert r.returncode == 0, (r.returncode, r.stdout[-300:], r.stderr[-300:])
    kept = [c for c in json.loads(r.stdout)["changes"] if c["action"] == "release_leftover_kept"]
    assert kept, r.stdout
    assert (Path(kept[0]["to"]) / "d" / "f1").stat().st_size == 3 << 30


def test_a_copy_of_a_lanes_file_keeps_holes_as_holes_and_writes_no_zeros(tmp_path: Path) -> None:
    """The engine's one copy of a file a lane may write (release's copy of git dirs,
    reconcile's kept/ copy of an index.lock, the copies of a lane's index: dirfd.copy_data
    through git.copy_regular): a hole stays a hole (`truncate -s 1T` takes no disk, nor
    may its copy), and a run of zeros a filesystem reports as data is not written out
    either; the copy reads back the same, as long as the file was."""
    import hashlib

    from guard import git as guard_git

    src, dest = tmp_path / "src", tmp_path / "dest"
    with open(src, "wb") as f:
        f.write(b"head")
        f.seek(64 << 20)
        f.write(b"middle" + bytes(4 << 20) + b"tail")  # 4 MiB of zeros written as data
        f.truncate(80 << 20)
    guard_git.copy_regular(src, dest, times=True)
    assert dest.stat().st_size == 80 << 20
    assert dest.stat().st_blocks * 512 < (1 << 20), dest.stat().st_blocks
    assert dest.stat().st_mtime_ns == src.stat().st_mtime_ns

    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    assert digest(dest) == digest(src)
    with pytest.raises(FileExistsError):  # never over anything
        guard_git.copy_regular(src, dest)
    (tmp_path / "link").symlink_to(src)
    with pytest.raises(OSError):  # never through a link
        guard_git.copy_regular(tmp_path / "link", tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_a_release_that_fills_the_disk_leaves_no_partial_copy_and_its_next_works(
    repo: Repo,
) -> None:
    """A modules file of real data larger than the disk kept/ is on: the copy would not
    fit, the release is refused state_write_failed (red team 14E: counted before anything
    is written; it was worktree_remove_failed once the copy failed on ENOSPC) with
    nothing removed, and no partial copy is left (each retry left one more, never
    deleted). With space again, the next works as written."""
    lp = repo.create("alpha")
    admin = Path(repo.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    sub = admin / "modules" / "sub"
    sub.mkdir(parents=True)
    (sub / "pack").write_bytes(os.urandom(3 << 20))
    kept_dir = repo.state_dir / "kept"
    with small_disk(kept_dir, "1m"):
        r = repo.jlane("release", "alpha", *CONFIRM)
        assert (r.rc, r.code) == (1, "state_write_failed"), r.stdout
        assert r.json["alternatives"] == [f"df -h {shlex.quote(str(kept_dir))}"], r.stdout
        assert list(kept_dir.iterdir()) == [], "a partial copy was left in kept/"
    assert (sub / "pack").stat().st_size == 3 << 20 and lp.exists()
    nxt = r.json["next"]
    assert nxt == ["git lane release alpha --confirm yes-discard-lane"]
    again = repo.jlane(*nxt[0].split()[2:])
    assert (again.rc, again.code) == (0, "released"), again.stdout
    assert (Path(again.json["kept_modules"]) / "sub" / "pack").stat().st_size == 3 << 20


def test_releases_tar_next_archives_a_sparse_ignored_file_sparsely(repo: Repo) -> None:
    """Red team 14C (MED): an ignored `build/big` of a terabyte that takes no space. Release
    refuses unlanded_work (nothing to land) and its first next archives the ignored files
    with tar: without --sparse GNU tar wrote every hole as zeros into kept/ until the disk
    was full, and the `&&` chain stopped there. With --sparse the archive holds the data
    and a map; it lists the file at its size. Here kept/ is a 64 MiB tmpfs."""
    exclude = repo.common_dir / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    with exclude.open("a") as f:
        f.write("build/\n")
    lp = repo.create("alpha")
    (lp / "build").mkdir()
    with open(lp / "build" / "big", "wb") as f:
        f.truncate(1 << 40)
    kept_dir = repo.state_dir / "kept"
    with small_disk(kept_dir):
        r = repo.jlane("release", "alpha")
        assert r.code == "unlanded_work", r.stdout
        tar = r.json["next"][0]
        assert tar.startswith("tar "), r.json["next"]
        done = subprocess.run(["sh", "-c", tar], cwd=repo.path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert _allocated(kept_dir) < 1 << 20, f"the next wrote the holes out: {tar}"
        (archive,) = kept_dir.glob("*.tar")
        listing = subprocess.run(
            ["tar", "-tvf", str(archive)], capture_output=True, text=True, check=True
        ).stdout
        assert str(1 << 40) in listing and "build/big" in listing, listing
        r = repo.jlane(*r.json["next"][1].split()[2:])
        assert (r.rc, r.code) == (0, "released"), r.stdout


@pytest.mark.parametrize("confirm", [True, False], ids=["confirm", "clean"])
def test_release_confirm_never_removes_a_running_lanes_worktree_by_path(
    repo: Repo, confirm: bool
) -> None:
    """release --confirm removed the lane worktree with `git worktree remove --force
    --force LANE` (after _drop_modules' fd removal of `<admin>/modules`): by path, while a
    process of the lane may still run (nothing checks). It exchanged a directory git was
    emptying with a link (renameat2 RENAME_EXCHANGE, both names in its worktree) and the
    owner's release unlinked every file of a directory outside the lane (red team 14A).
    The release of a lane with nothing to lose (`git worktree remove LANE`) did the same.
    The worktree and its admin dir go through directory fds only: a chain deeper than
    dirfd.TREE_DEPTH (which git's removal by path took, and remove_tree would leave) is
    refused before anything is removed (red team 14G F4: release looks at every directory
    for git dirs first, worktree_unreadable), the branch and the lane's record kept, and
    its next, which moves the worktree aside whole, works as written."""
    from guard import dirfd

    lp = repo.create("alpha")
    if confirm:
        (lp / "wip.txt").write_text("the lane's\n")
    tip = repo.sha("refs/heads/lane/alpha")
    admin = Path(repo.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    fd = os.open(lp, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(dirfd.TREE_DEPTH + 5):  # what the lane's process may write
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    try:
        r = repo.jlane("release", "alpha", *(CONFIRM if confirm else ()))
        assert (r.rc, r.code) == (1, "worktree_unreadable"), r.stdout
        assert (lp / "d").is_dir(), "release removed the lane's deep tree by path (git)"
        assert (lp / "wip.txt").exists() == confirm  # nothing removed
        assert repo.sha("refs/heads/lane/alpha") == tip
        assert record(repo, "alpha")["status"] == "active"
        assert admin.is_dir() and wt_block(repo, lp) is not None  # git's record kept
        mv, again = r.json["next"]
        aside = Path(r.json["details"]["aside"])
        subprocess.run(mv, shell=True, check=True)  # the owner's, as written
        r = repo.jlane(*again.split()[2:])
        assert (r.rc, r.code) == (0, "released"), r.stdout
        assert (aside / "d" / "d").is_dir() and (aside / "wip.txt").exists() == confirm
    finally:  # pytest's own rmtree of its temp dirs would recurse as deep
        subprocess.run(["rm", "-rf", str(lp)], check=False)
        for left in lp.parent.glob(lp.name + ".moved-aside-*"):
            subprocess.run(["rm", "-rf", str(left)], check=False)
    assert_removed(repo, lp)
    assert not admin.exists()


# -- red team 14E: a worktree gone (or its .git), embedded repositories, hard links ----------
def test_release_of_a_lane_whose_worktree_is_gone_keeps_its_detached_commits(
    repo: Repo,
) -> None:
    """Red team 14E (HIGH): a lane commits on a detached HEAD (`commit --no-verify`: the
    reference-transaction hook passes HEAD) and holds it in refs/worktree/keep too; then
    its worktree directory goes (an agent's `rm -rf`, a cache cleaner: lanes live in
    ~/.cache). Release inspected nothing but the branch when the worktree was not there,
    then removed the admin dir: HEAD, logs/HEAD and refs/worktree/keep went, and the
    commit was referenced by nothing, reported nowhere. The admin dir is read (GIT_DIR
    pinned): refused unlanded_work naming both, and its next (repair, then the release)
    works as written; the confirmed release says how to get the commit back."""
    lp = repo.create("gamma")
    git(lp, "switch", "-q", "--detach")
    (lp / "w.txt").write_text("w\n")
    git(lp, "add", "w.txt")
    git(lp, "commit", "--no-verify", "-q", "-m", "detached work")
    work = git(lp, "rev-parse", "HEAD").stdout.strip()
    git(lp, "update-ref", "refs/worktree/keep", work)
    shutil.rmtree(lp)
    r = repo.jlane("release", "gamma")
    kept = git(repo.path, "for-each-ref", "--contains", work).stdout.strip()
    assert r.rc == 1 and r.code == "unlanded_work", (
        f"release removed the lane's admin dir with its only reference to {work} "
        f"(refs now holding it: {kept!r}):\n{r.stdout}"
    )
    d = r.json["details"]
    assert [c.split()[1:] for c in d["detached_commits"]] == [["detached", "work"]], r.stdout
    assert [w["ref"] for w in d["worktree_refs"]] == ["refs/worktree/keep"], r.stdout
    assert r.json["next"] == ["git lane repair gamma", "git lane release gamma"]
    assert r.json["alternatives"] == ["git lane release gamma --confirm yes-discard-lane"]
    assert repo.jlane(*r.json["next"][0].split()[2:]).rc == 0  # repair, as written
    assert git(lp, "rev-parse", "HEAD").stdout.strip() == work and (lp / "w.txt").is_file()
    assert repo.jlane(*r.json["next"][1].split()[2:]).code == "unlanded_work"
    shutil.rmtree(lp)
    r = repo.jlane(*r.json["alternatives"][0].split()[2:])
    assert (r.rc, r.code) == (0, "released"), r.stdout
    assert r.json["recover_detached"] == f"git branch lane/gamma-detached {work}", r.stdout


def test_release_of_a_lane_whose_worktree_is_gone_keeps_its_submodule_git_dirs(
    repo: Repo,
) -> None:
    """Red team 14E (HIGH): the same path (the worktree gone by hand, no --confirm):
    `<admin>/modules`, the submodule git dirs keep_modules copies into kept/ before a
    confirmed release, was removed with the admin dir, uncopied and unreported
    (kept_modules None). A copy loses nothing: it is made, and named, before the admin
    dir goes."""
    lp = repo.create("eps")
    admin = Path(repo.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    sub = admin / "modules" / "sub"
    sub.mkdir(parents=True)
    (sub / "HEAD").write_text("ref: refs/heads/main\n")
    (sub / "pack").write_text("submodule commits\n")
    shutil.rmtree(lp)
    r = repo.jlane("release", "eps")
    kept = r.json.get("kept_modules") if r.rc == 0 else None
    assert (sub / "pack").exists() or (
        kept is not None and (Path(kept) / "sub" / "pack").exists()
    ), f"the lane's submodule git dirs were deleted uncopied: {r.stdout}"
    assert (r.rc, r.code) == (0, "released"), r.stdout
    assert (Path(kept) / "sub" / "pack").read_text() == "submodule commits\n"
    assert not admin.exists()


@pytest.mark.parametrize(
    "confirm,kind",
    [(False, None), (True, None), (False, "file"), (True, "dir")],
    ids=["clean", "confirm", "clean-backup-file-taken", "confirm-backup-dir-taken"],
)
def test_release_never_deletes_uncommitted_files_of_a_worktree_without_its_git_file(
    repo: Repo, confirm: bool, kind: str | None
) -> None:
    """Red team 14E (HIGH): a lane's worktree holds uncommitted work; its `.git` file goes
    (an agent's `rm -rf .git` to start afresh). Worktree.exists is then False, so release
    took the worktree for gone by hand, looked at nothing but the branch, and removed the
    whole directory with every file in it, unconfirmed and unreported (discarded_paths
    []). A directory with no `.git` is not the lane's checkout as git knows it: never
    removed, confirmed or not (worktree_path_exists); the `mv` of its next keeps it aside,
    and the release after it works as written, also when the backup name it would take is
    taken already (never replaced, nothing moved into it)."""
    lp = repo.create("zeta")
    (lp / "notes.txt").write_text("precious uncommitted\n")
    r = repo.jlane("release", "zeta")
    assert r.rc == 1 and r.code == "unlanded_work", r.stdout
    (lp / ".git").unlink()
    backup = Path(f"{lp}.moved-aside")
    aside = take_name(backup, kind)
    r = repo.jlane("release", "zeta", *(CONFIRM if confirm else ()))
    assert (lp / "notes.txt").exists(), f"release deleted the lane's uncommitted file: {r.stdout}"
    assert (r.rc, r.code) == (1, "worktree_path_exists"), r.stdout
    assert repo.sha("refs/heads/lane/zeta") is not None
    assert record(repo, "zeta")["status"] == "active"
    mv, again = r.json["next"]
    subprocess.run(mv, shell=True, check=True)  # the owner's, as written
    assert (aside / "notes.txt").read_text() == "precious uncommitted\n"
    r = repo.jlane(*again.split()[2:])
    assert (r.rc, r.code) == (0, "released"), r.stdout
    assert (aside / "notes.txt").read_text() == "precious uncommitted\n"
    earlier_kept(backup, kind)


def test_release_next_keeps_a_landed_submodule_commit_of_a_lane_made_repository(
    hub: Repo,
) -> None:
    """Red team 14E (HIGH): a lane makes a repository in its worktree (`git init sub`, a
    commit there) and commits the gitlink (`git add sub`: an embedded repository, its git
    dir `sub/.git`, not `<admin>/modules`); land puts it on main. The clean release
    refuses worktree_remove_failed (a populated submodule) and names the confirmed
    release as its next; that one copied only `<admin>/modules` and removed `sub/.git`
    with the worktree: the submodule commit main records existed nowhere any more. The
    `.git` of every gitlink of the lane is copied into kept/ too."""
    lp, s = _landed_repository(hub)
    res = _release_as_told(hub)
    kept = res.get("kept_modules")
    assert isinstance(kept, str) and _kept_has(kept, s), (
        f"submodule commit {s}, recorded on main, was deleted with the lane: {res}"
    )
    copy = Path(kept) / "worktree-gitdirs" / "sub" / ".git"
    assert git(copy, "log", "-1", "--format=%s", s).stdout.strip() == "sub work"
    assert not lp.exists()


def _landed_repository(hub: Repo) -> tuple[Path, str]:
    """Lane alpha makes repository `sub` (a commit), commits it as a gitlink and lands:
    main records sub's commit, which only `sub/.git` holds. Returns (the lane's path,
    sub's commit)."""
    lp = hub.create("alpha")
    sub = lp / "sub"
    git(lp, "init", "-q", "-b", "main", "sub")
    (sub / "s.txt").write_text("s\n")
    git(sub, "add", "s.txt")
    git(sub, "commit", "-q", "-m", "sub work")
    s = git(sub, "rev-parse", "HEAD").stdout.strip()
    git(lp, "add", "sub")
    git(lp, "commit", "-q", "-m", "add sub")
    r = hub.jlane("land", "alpha")
    assert r.rc == 0, r.stdout
    assert f"160000 commit {s}\tsub" in git(hub.path, "ls-tree", "main", "sub").stdout
    return lp, s


def _kept_has(kept: str | None, sha: str) -> bool:
    """Does a repository in the kept copy `kept` hold commit `sha`?"""
    return kept is not None and any(
        git(d, "cat-file", "-e", sha, check=False).returncode == 0
        for d in [Path(kept), *Path(kept).rglob("*")]
        if d.is_dir() and (d / "HEAD").is_file()
    )


def _nested_lane(hub: Repo) -> tuple[Path, str]:
    """Lane alpha makes repository `sub` and in it repository `sub/inner` (a commit,
    recorded in sub as a gitlink); the lane commits sub and lands: main records sub's
    commit, which records inner's. Returns (the lane's path, inner's commit)."""
    lp = hub.create("alpha")
    sub = lp / "sub"
    git(lp, "init", "-q", "-b", "main", "sub")
    inner = sub / "inner"
    git(sub, "init", "-q", "-b", "main", "inner")
    (inner / "i.txt").write_text("i\n")
    git(inner, "add", "i.txt")
    git(inner, "commit", "-q", "-m", "inner work")
    i = git(inner, "rev-parse", "HEAD").stdout.strip()
    git(sub, "add", "inner")
    git(sub, "commit", "-q", "-m", "sub work")
    git(lp, "add", "sub")
    git(lp, "commit", "-q", "-m", "add sub")
    r = hub.jlane("land", "alpha")
    assert r.rc == 0, r.stdout
    return lp, i


def _release_as_told(hub: Repo) -> dict[str, object]:
    """The clean release (refused: a populated gitlink), then the confirmed one it names."""
    r = hub.jlane("release", "alpha")
    assert r.rc == 1 and r.code == "worktree_remove_failed", r.stdout
    confirm = [n for n in r.json["next"] if n.startswith("git lane release")]
    assert confirm, r.stdout
    r = hub.jlane(*confirm[0].split()[2:])
    assert r.rc == 0, r.stdout
    out: dict[str, object] = r.json
    return out


def test_release_keeps_the_commit_of_a_repository_nested_in_an_embedded_one(hub: Repo) -> None:
    """Red team 14F F1: keep_modules copied the `.git` of each gitlink of the lane's own
    index/HEAD/tip, one level only. A repository `sub` made in the lane holds a
    repository `sub/inner` committed in sub as a gitlink; main records sub's commit,
    which records inner's. The confirmed release (the clean one's next) copied
    `sub/.git` and deleted `sub/inner/.git`, the only place inner's commit was. The
    gitlinks of each kept repository are looked into as well."""
    lp, i = _nested_lane(hub)
    res = _release_as_told(hub)
    kept = res.get("kept_modules")
    assert isinstance(kept, str) and _kept_has(kept, i), (
        f"inner commit {i}, recorded by sub's commit that main records, was deleted: {res}"
    )
    copy = Path(kept) / "worktree-gitdirs" / "sub" / "inner" / ".git"
    assert git(copy, "log", "-1", "--format=%s", i).stdout.strip() == "inner work"
    assert not lp.exists()


def test_release_runs_no_fsmonitor_of_a_nested_repository(hub: Repo, tmp_path: Path) -> None:
    """The gitlinks of a repository nested in the lane are listed by git with that
    repository's config, which is the lane's to write: its `core.fsmonitor` (and hooks,
    a clean filter) never run as the owner during the release."""
    lp, i = _nested_lane(hub)
    marker = tmp_path / "MARKER"
    prog = tmp_path / "evil.sh"
    prog.write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{marker}'\n")
    prog.chmod(0o755)
    for repo_dir in (lp / "sub", lp / "sub" / "inner"):
        git(repo_dir, "config", "core.fsmonitor", str(prog))
        git(repo_dir, "config", "core.hooksPath", str(tmp_path))
        git(repo_dir, "config", "filter.evil.clean", str(prog))
        (repo_dir / ".git" / "info").mkdir(exist_ok=True)
        (repo_dir / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    # sanity: git run the ordinary way in the nested repository runs its fsmonitor
    git(lp / "sub" / "inner", "status", "--porcelain", check=False)
    assert marker.exists(), "the attack is not armed: plain git status ran nothing"
    marker.unlink()
    res = _release_as_told(hub)
    assert not marker.exists(), (
        f"the release ran a nested repository's program: {marker.read_text()}"
    )
    kept = res.get("kept_modules")
    assert isinstance(kept, str) and _kept_has(kept, i), res


def test_release_keeps_a_repository_embedded_in_a_submodule_checkout(
    repo: Repo, tmp_path: Path
) -> None:
    """A repository the lane makes inside a populated submodule's checkout (`sub/emb`,
    committed in the submodule as a gitlink, the submodule's commit landed): its `.git`
    is in the worktree, not in `<admin>/modules`; it is kept with them."""
    from enginehelp import add_submodule

    add_submodule(repo, tmp_path)
    assert repo.lane("install").rc == 0
    repo.config("gate_command", "true")
    hub = repo
    lp = hub.create("alpha")
    git(lp, "submodule", "update", "--init", "-q")
    sub = lp / "sub"
    git(sub, "init", "-q", "-b", "main", "emb")
    (sub / "emb" / "e.txt").write_text("e\n")
    git(sub / "emb", "add", "e.txt")
    git(sub / "emb", "commit", "-q", "-m", "emb work")
    e = git(sub / "emb", "rev-parse", "HEAD").stdout.strip()
    git(sub, "add", "emb")
    git(sub, "commit", "-q", "-m", "sub records emb")
    git(lp, "add", "sub")
    git(lp, "commit", "-q", "-m", "move sub")
    r = hub.jlane("land", "alpha")
    assert r.rc == 0, r.stdout
    res = _release_as_told(hub)
    kept = res.get("kept_modules")
    assert isinstance(kept, str) and _kept_has(kept, e), res
    assert (Path(kept) / "worktree-gitdirs" / "sub" / "emb" / ".git" / "HEAD").is_file()


def test_release_copies_a_hard_linked_modules_file_once(repo: Repo) -> None:
    """Red team 14E (MED): keep_modules copied every name of `<admin>/modules` as a file of
    its own: a lane (plain, or sandboxed: MAKE_REG in its admin dir is all a
    same-directory link(2) needs) writes one 4 MiB file and 40 hard links to it (no space
    taken), and the confirmed release wrote 164 MiB into kept/ (a 1 GiB file and 60000
    links: 60 TiB); the disk filled, the release was refused and its next (the same
    release) filled it again. An inode is copied once, its other names links in the copy.
    Here kept/ is a 64 MiB tmpfs."""
    lp = repo.create("alpha")
    admin = Path(repo.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    sub = admin / "modules" / "sub"
    sub.mkdir(parents=True)
    (sub / "HEAD").write_text("ref: refs/heads/main\n")
    data = os.urandom(4 << 20)
    (sub / "pack").write_bytes(data)
    for i in range(40):
        os.link(sub / "pack", sub / f"pack{i}")
    kept_dir = repo.state_dir / "kept"
    with small_disk(kept_dir):
        r = repo.jlane("release", "alpha", *CONFIRM)
        assert (r.rc, r.code) == (0, "released"), r.stdout
        copy = Path(r.json["kept_modules"]) / "sub"
        assert (copy / "pack").read_bytes() == data
        inodes = {(copy / n).stat().st_ino for n in ["pack", *(f"pack{i}" for i in range(40))]}
        vfs = os.statvfs(kept_dir)
        assert len(inodes) == 1 and (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize < 5 << 20


# -- red team 14G: every git dir in the worktree, found by a walk -----------------------------
def test_a_confirmed_release_keeps_a_landed_repository_the_lane_no_longer_tracks(
    hub: Repo,
) -> None:
    """Red team 14G F4 (HIGH): after landing repository `sub` the lane drops its gitlink
    (`git rm --cached sub`, committed): sub/ is untracked, its `.git` the only home of the
    commit main's tree points at. The confirmed release (the refusal's discard) kept the
    `.git` of gitlinks in the lane's index, HEAD and tip only, and deleted `sub/.git`.
    Every git dir in the worktree is kept, found by a walk, not by listing gitlinks."""
    lp, s = _landed_repository(hub)
    git(lp, "rm", "-q", "--cached", "sub")
    git(lp, "commit", "-q", "-m", "untrack sub")
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    discard = r.json["next"][-1]
    assert discard == "git lane release alpha --confirm yes-discard-lane", r.stdout
    r = hub.jlane(*discard.split()[2:])
    assert (r.rc, r.code) == (0, "released"), r.stdout
    kept = r.json["kept_modules"]
    assert _kept_has(kept, s), f"sub's commit {s}, recorded on main, was deleted: {r.stdout}"
    copy = Path(kept) / "worktree-gitdirs" / "sub" / ".git"
    assert git(copy, "log", "-1", "--format=%s", s).stdout.strip() == "sub work"
    assert not lp.exists()


def test_a_clean_release_keeps_a_git_dir_that_git_status_never_shows(hub: Repo) -> None:
    """A `.git` in a tracked directory is one `git status` never lists (git skips every
    entry named `.git`): the lane lands repository `sub`, then untracks it and moves its
    `.git` into tracked `docs/`, and lands that. The lane is clean and landed, so the
    release needs no confirmation, and removed `docs/.git`, the only home of a commit
    main's history records, unasked. The clean release keeps every git dir too."""
    lp, s = _landed_git_dir_in_docs(hub)
    assert git(lp, "status", "--porcelain", "--ignored").stdout == ""
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (0, "released"), r.stdout
    kept = r.json["kept_modules"]
    assert _kept_has(kept, s), f"sub's commit {s}, in main's history, was deleted: {r.stdout}"
    assert (Path(kept) / "worktree-gitdirs" / "docs" / ".git" / "HEAD").is_file()
    assert_removed(hub, lp)


def test_a_confirmed_release_keeps_a_separate_git_dir_in_the_worktree(hub: Repo) -> None:
    """`git init --separate-git-dir`: `sub/.git` is a file naming `.sub-git`, a git dir
    in the worktree under another name; main records sub's commit. release followed a
    gitlink's `.git` file only into `<admin>/modules/`: `.sub-git` was deleted. A
    directory that looks like a git dir to git (HEAD, objects/, refs/) is kept whole."""
    lp = hub.create("alpha")
    git(lp, "init", "-q", "-b", "main", "--separate-git-dir", str(lp / ".sub-git"), "sub")
    (lp / "sub" / "s.txt").write_text("s\n")
    git(lp / "sub", "add", "s.txt")
    git(lp / "sub", "commit", "-q", "-m", "sub work")
    s = git(lp / "sub", "rev-parse", "HEAD").stdout.strip()
    (lp / ".gitignore").write_text("/.sub-git/\n")
    git(lp, "add", "sub", ".gitignore")
    git(lp, "commit", "-q", "-m", "add sub")
    assert hub.jlane("land", "alpha").rc == 0
    r = hub.jlane("release", "alpha", *CONFIRM)
    assert (r.rc, r.code) == (0, "released"), r.stdout
    kept = r.json["kept_modules"]
    assert _kept_has(kept, s), f"sub's commit {s}, recorded on main, was deleted: {r.stdout}"
    assert (Path(kept) / "worktree-gitdirs" / ".sub-git" / "HEAD").is_file()


def test_release_refuses_a_worktree_with_more_git_dirs_than_it_keeps(repo: Repo) -> None:
    """Past GITDIR_MAX git dirs release refuses (worktree_unreadable) rather than delete
    one it did not keep; nothing is removed, and its next (the worktree moved aside
    whole, then the release again) works as written."""
    from guard.commands import release

    lp = repo.create("alpha")
    for i in range(release.GITDIR_MAX + 1):
        (lp / f"r{i}" / ".git").mkdir(parents=True)
    r = repo.jlane("release", "alpha", *CONFIRM)
    assert (r.rc, r.code) == (1, "worktree_unreadable"), r.stdout
    assert (lp / "r0" / ".git").is_dir() and repo.sha("refs/heads/lane/alpha") is not None
    assert record(repo, "alpha")["status"] == "active"
    mv, again = r.json["next"]
    aside = Path(r.json["details"]["aside"])
    subprocess.run(mv, shell=True, check=True)  # the owner's, as written
    r = repo.jlane(*again.split()[2:])
    assert (r.rc, r.code) == (0, "released"), r.stdout
    assert (aside / "r0" / ".git").is_dir()


def test_release_refuses_a_worktree_directory_it_may_not_read(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory of the worktree release may not open (a lane may chmod its own 000; the
    tests run as root, so the open's EACCES is made here) could hold a `.git`: refused
    worktree_unreadable, its next the worktree moved aside, its alternative a chmod."""
    from guard import dirfd
    from guard.commands import release
    from guard.errors import Refusal

    lp = repo.create("alpha")
    (lp / "locked" / "sub").mkdir(parents=True)
    real_open = os.open

    def no_locked(name: str, flags: int, *a: object, **kw: object) -> int:
        if name == "locked" and kw.get("dir_fd") is not None:
            raise PermissionError(13, "Permission denied", name)
        return real_open(name, flags, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(dirfd.os, "open", no_locked)
    with pytest.raises(Refusal) as exc:
        release._embedded_git_dirs("alpha", str(lp), "git lane release alpha")
    assert exc.value.code == "worktree_unreadable", exc.value.message
    assert "locked" in exc.value.message
    assert exc.value.next[0].startswith(f"mv -T -- {shlex.quote(str(lp))} ")
    assert exc.value.alternatives == [
        f"chmod -R u+rwX -- {shlex.quote(str(lp))} && git lane release alpha"
    ]


def _deep_dir(base: Path, total: int) -> Path:
    """A chain of directories under `base` whose absolute path is `total` bytes long."""
    d = base
    while len(os.fsencode(d)) < total - 60:
        d = d / ("d" * 50)
    return d / ("e" * (total - len(os.fsencode(d)) - 1))


def _git_at(d: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git with the repository `d` as its git dir, whatever the length of `d`'s path: run
    from a directory above it whose path is short enough, naming `d` relative to it."""
    at = d
    while len(os.fsencode(at)) > 2048:
        at = at.parent
    return subprocess.run(
        ["git", "--git-dir", os.path.relpath(d, at), *args],
        cwd=at,
        text=True,
        capture_output=True,
        check=False,
    )


def test_a_clean_release_keeps_a_git_dir_whose_copy_path_is_too_long(hub: Repo) -> None:
    """Red team 14H-B F1: the lane lands repository `sub` (main records its commit),
    untracks it and moves its `.git` into a deep tracked directory, and lands that: clean,
    landed, no confirmation needed. Its copy in kept/ has a longer path than the lane's
    own: each file past PATH_MAX there was 'named, not copied' and the removal deleted
    the original. The copy goes through directory fds (no path limit): all of it is
    kept, nothing named as left out, and the copy holds sub's commit."""
    lp, s = _landed_repository(hub)
    kept_prefix = hub.state_dir / "kept" / "alpha-modules-20260101T000000Z" / "worktree-gitdirs"
    extra = len(os.fsencode(kept_prefix)) - len(os.fsencode(lp))
    assert extra > 0
    deep = _deep_dir(lp / "docs", 4095 - 60 - extra // 2)
    deep.mkdir(parents=True)
    (deep / "a.txt").write_text("a\n")
    git(lp, "add", "docs")
    git(lp, "rm", "-q", "--cached", "sub")
    git(lp, "commit", "-q", "-m", "docs, and sub untracked")
    (lp / "sub" / ".git").rename(deep / ".git")
    shutil.rmtree(lp / "sub")
    assert hub.jlane("land", "alpha").rc == 0
    r = hub.jlane("release", "alpha")
    assert (r.rc, r.code) == (0, "released"), r.stdout[:2000]
    assert r.json["kept_modules_skipped"] == []
    rel = deep.relative_to(lp)
    copy = Path(r.json["kept_modules"]) / "worktree-gitdirs" / rel / ".git"
    assert len(os.fsencode(copy / "objects" / s[:2] / s[2:])) >= 4096  # past PATH_MAX
    done = _git_at(copy, "cat-file", "-t", s)
    assert done.stdout.strip() == "commit", done.stderr
    assert not lp.exists()


def _landed_git_dir_in_docs(hub: Repo) -> tuple[Path, str]:
    """Repository `sub` landed, then untracked and its `.git` moved into tracked `docs/`,
    landed: the lane is clean and landed, `docs/.git` the only home of the commit main
    records."""
    lp, s = _landed_repository(hub)
    (lp / "docs").mkdir()
    (lp / "docs" / "a.txt").write_text("a\n")
    git(lp, "add", "docs")
    git(lp, "rm", "-q", "--cached", "sub")
    git(lp, "commit", "-q", "-m", "docs, and sub untracked")
    (lp / "sub" / ".git").rename(lp / "docs" / ".git")
    shutil.rmtree(lp / "sub")
    assert hub.jlane("land", "alpha").rc == 0
    return lp, s


def _owner_may_not_open(monkeypatch: pytest.MonkeyPatch, name: str, parent: str) -> None:
    """As a non-root owner meets what the lane chmod-ed 000 (the tests run as root, so
    the open's EACCES is made here): opening `name` in a directory whose path ends with
    `parent` for reading (O_NONBLOCK, as every read of the walk and the copy; remove_tree
    gives the owner's bits back through an O_PATH fd, which is left to work) fails."""
    from guard import dirfd

    real_open = os.open

    def fake(path: object, flags: int, *a: object, **kw: object) -> int:
        dfd = kw.get("dir_fd")
        if (
            path == name
            and isinstance(dfd, int)
            and not flags & os.O_PATH
            and os.readlink(f"/proc/self/fd/{dfd}").endswith(parent)
        ):
            raise PermissionError(13, "Permission denied", name)
        return real_open(path, flags, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(dirfd.os, "open", fake)


@pytest.mark.parametrize(
    "name, parent", [("objects", "/docs/.git"), (".git", "/docs"), ("HEAD", "/docs/.git")]
)
def test_a_clean_release_never_deletes_a_git_dir_part_it_could_not_copy(
    hub: Repo, monkeypatch: pytest.MonkeyPatch, name: str, parent: str
) -> None:
    """Red team 14H-B F2, F3: a part of a git dir found in the worktree that the copy may
    not open (`docs/.git/objects` chmod 000 by the lane) was named as left out, and the
    removal then gave the owner's bits back and deleted it: the only copy of a commit
    main records. `docs/.git` itself unopenable was refused worktree_remove_failed, its
    next the same release, refused the same way for ever. Both (and a file of it) are
    refused worktree_unreadable before anything is removed; its next, run as written
    (the worktree moved aside whole), releases the lane, the git dir kept in the moved
    worktree."""
    from guard.commands import release
    from guard.errors import Refusal
    from guard.repo import Repo as GRepo

    lp, s = _landed_git_dir_in_docs(hub)
    monkeypatch.chdir(hub.path)
    _owner_may_not_open(monkeypatch, name, parent)
    with pytest.raises(Refusal) as exc:
        release.run(GRepo.discover(str(hub.path)), "alpha")
    ref = exc.value
    assert ref.code == "worktree_unreadable", ref.message
    assert git(lp / "docs", "--git-dir", ".git", "cat-file", "-t", s).stdout.strip() == "commit"
    assert git(hub.path, "rev-parse", "-q", "--verify", "refs/heads/lane/alpha").returncode == 0
    assert ref.next[0].startswith(f"mv -T -- {shlex.quote(str(lp))} ")
    assert ref.next[1:] == ["git lane release alpha"]
    assert not list((hub.state_dir / "kept").glob("alpha-modules-*")), "no partial copy left"
    subprocess.run(["sh", "-c", ref.next[0]], check=True, cwd=hub.path)
    res = release.run(GRepo.discover(str(hub.path)), "alpha")
    assert res["code"] == "released"
    aside = Path(ref.details["aside"])
    assert git(aside / "docs", "--git-dir", ".git", "cat-file", "-t", s).stdout.strip() == "commit"


def test_a_refused_branch_delete_says_where_the_git_dirs_it_took_are(hub: Repo) -> None:
    """Red team 14H-B F7: the branch delete is refused (the hook's: main made a symbolic
    ref) after the worktree, with `docs/.git` (the only home of a commit main records),
    was removed; `git worktree add` puts back the branch's files, not `docs/.git`, which
    is in kept/ only: the refusal names the copy (details and message)."""
    lp, s = _landed_git_dir_in_docs(hub)
    hub.git("branch", "aside")
    hub.git("symbolic-ref", "refs/heads/main", "refs/heads/aside")
    r = hub.jlane("release", "alpha")
    assert r.rc == 1 and r.json["details"]["worktree_restored"] is True, r.stdout
    named = r.json["details"]["kept_modules"]
    assert isinstance(named, str) and _kept_has(named, s)
    assert named in r.json["message"]
    assert (lp / "docs" / "a.txt").is_file() and not (lp / "docs" / ".git").exists()


def _modules_part_refused(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path, Refusal]:
    """Lane alpha with `<admin>/modules/sub` whose `objects` the owner may not open (the
    lane's chmod 000, faked: the tests run as root): the confirmed release refuses
    worktree_unreadable. (its path, the submodule's git dir, the refusal)"""
    from guard.commands import release
    from guard.repo import Repo as GRepo

    lp = repo.create("alpha")
    admin = Path(repo.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    sub = admin / "modules" / "sub"
    (sub / "objects" / "ab").mkdir(parents=True)
    (sub / "objects" / "ab" / "cd").write_text("an object\n")
    (sub / "HEAD").write_text("ref: refs/heads/main\n")
    monkeypatch.chdir(repo.path)
    with monkeypatch.context() as m:
        _owner_may_not_open(m, "objects", "/modules/sub")
        with pytest.raises(Refusal) as exc:
            release.run(GRepo.discover(str(repo.path)), "alpha", "yes-discard-lane")
    ref = exc.value
    assert ref.code == "worktree_unreadable", ref.message
    return lp, sub, ref


def test_a_confirmed_release_never_deletes_a_submodule_git_dir_part_it_could_not_copy(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As red team 14H-B F2, in the admin dir: a directory of `<admin>/modules/sub` the
    copy may not open (the lane's chmod 000) was named as left out and then deleted with
    the admin dir. Refused worktree_unreadable, nothing removed; its next gives the
    owner's bits back, then the release (here, the open allowed again) keeps it."""
    from guard.commands import release
    from guard.repo import Repo as GRepo

    lp, sub, ref = _modules_part_refused(repo, monkeypatch)
    assert ref.next == ["git lane release alpha --confirm yes-discard-lane"]
    assert (sub / "objects" / "ab" / "cd").is_file() and lp.is_dir()
    assert not list((repo.state_dir / "kept").glob("alpha-modules-*")), "no partial copy left"
    res = release.run(GRepo.discover(str(repo.path)), "alpha", "yes-discard-lane")
    assert res["code"] == "released"
    kept = res.get("kept_modules")
    assert kept is not None
    assert (Path(kept) / "sub" / "objects" / "ab" / "cd").read_text() == "an object\n"


def test_release_modules_chmod_next_never_changes_a_directory_the_lane_linked_there(
    hub: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team 14I F4: worktree_unreadable for `<admin>/modules` named `chmod -R u+rwX --
    <admin>/modules`, a path in the lane's admin dir (granted to it by exec --sandbox).
    Between the print and the run the lane puts a link at `modules` to a directory of the
    owner's: GNU chmod follows a link named on its command line, -R and all, and the
    owner's read-only tree became writable. The next is the release again, which gives
    the owner's bits back itself through directory fds (no link followed); run as written,
    it changes no mode of the owner's."""
    _, sub, ref = _modules_part_refused(hub, monkeypatch)
    admin = sub.parent.parent
    mine = tmp_path / "owner-readonly"  # the owner's read-only tree, outside every lane
    mine.mkdir()
    (mine / "keep.txt").write_text("read-only on purpose\n")
    (mine / "keep.txt").chmod(0o400)
    mine.chmod(0o500)
    # the lane (its admin dir is granted to it) re-points the name a next could act on
    shutil.move(str(admin / "modules"), str(admin / "modules-elsewhere"))
    os.symlink(mine, admin / "modules")
    try:
        for step in ref.next:
            subprocess.run(["sh", "-c", step], cwd=hub.path, check=False, capture_output=True)
        modes = (oct(mine.stat().st_mode & 0o777), oct((mine / "keep.txt").stat().st_mode & 0o777))
    finally:
        mine.chmod(0o700)
    assert modes == ("0o500", "0o400"), f"{ref.next} changed the owner's {mine}: {modes}"
    assert (mine / "keep.txt").read_text() == "read-only on purpose\n"


@needs_modes
def test_a_confirmed_release_gives_the_owner_its_bits_back_in_admin_modules(hub: Repo) -> None:
    """Red team 14I F4, as a non-root owner meets it: the lane chmod-ed `<admin>/modules/
    sub/objects` 000 and a file in it 000. The confirmed release gives the owner's bits
    back there itself (through directory fds) and keeps the submodule git dir whole: no
    refusal whose next is a `chmod -R` by path on a name the lane can re-point."""
    lp = hub.create("alpha")
    admin = Path(hub.git("-C", str(lp), "rev-parse", "--absolute-git-dir").stdout.strip())
    sub = admin / "modules" / "sub"
    (sub / "objects" / "ab").mkdir(parents=True)
    (sub / "objects" / "ab" / "cd").write_text("an object\n")
    (sub / "HEAD").write_text("ref: refs/heads/main\n")
    (sub / "objects" / "ab" / "cd").chmod(0)
    (sub / "objects").chmod(0)
    try:
        r = owner_lane("release", "alpha", "--confirm", "yes-discard-lane", "--json", cwd=hub.path)
    finally:
        if (sub / "objects").exists():
            (sub / "objects").chmod(0o755)
    out = json.loads(r.stdout)
    assert out["code"] == "released", out
    kept = Path(out["kept_modules"])
    assert (kept / "sub" / "objects" / "ab" / "cd").read_text() == "an object\n"
