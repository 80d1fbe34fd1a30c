"""`git lane sync / continue / abort` against real repositories and real processes (G9)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import LaneRun, Repo, git
from enginehelp import head, is_ancestor, lane_status, parents, rebase_dir, subjects


def conflicting(repo: Repo, key: str = "alpha", name: str = "f.txt") -> tuple[Path, str]:
    """A lane and main that both changed `name` from the same base."""
    repo.commit(repo.path, name, "base\n", "base")
    path = repo.create(key)
    tip = repo.commit(path, name, "lane\n", "lane edit")
    repo.commit(repo.path, name, "main\n", "main edit")
    return path, tip


# -- sync ---------------------------------------------------------------------------------
def test_clean_sync_rebases_onto_main_and_reports_fresh(repo: Repo) -> None:
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n", "lane a")
    repo.commit(path, "b.txt", "b\n", "lane b")
    main = repo.commit(repo.path, "m.txt", "m\n", "main m")
    assert lane_status(repo, "alpha")["fresh"] is False
    cfg_before = (repo.common_dir / "config").read_text()

    r = repo.jlane("sync", "alpha")
    assert r.rc == 0, r.stderr
    assert r.json["ok"] is True
    assert r.json["state"] == "fresh"
    assert r.json["main"] == main
    assert r.json["tip"] == head(path)
    assert subjects(path, f"{main}..HEAD") == ["lane b", "lane a"]
    assert is_ancestor(repo.path, main, head(path))
    assert not rebase_dir(path)
    st = lane_status(repo, "alpha")
    assert st["fresh"] is True and st["behind"] == 0 and st["ahead"] == 2
    # rerere and zdiff3 are passed with -c, never written into the repository
    cfg_after = (repo.common_dir / "config").read_text()
    assert cfg_after == cfg_before
    assert "rerere" not in cfg_after.lower() and "conflictstyle" not in cfg_after.lower()


def test_a_configured_instruction_format_never_makes_a_sync_run_a_message_line(
    repo: Repo, tmp_path: Path
) -> None:
    """rebase.instructionFormat=%B in the repository's config (the owner's, or one written
    past every shim) puts each commit's whole message into the todo, where a line `exec
    PROG` is a command the rebase runs; sync's rebase names git's one-line default (an
    empty value) itself, so the line stays text and the sync is fresh."""
    mark = tmp_path / "mark"
    git(repo.path, "config", "rebase.instructionFormat", "%B")
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n", f"lane a\n\nexec touch {mark}")
    repo.commit(repo.path, "m.txt", "m\n", "main m")
    r = repo.jlane("sync", "alpha")
    assert r.rc == 0 and r.json["state"] == "fresh", (r.stdout, r.stderr)
    assert not mark.exists()


def test_sync_of_a_fresh_lane_changes_nothing(repo: Repo) -> None:
    path = repo.create("alpha")
    tip = repo.commit(path, "a.txt", "a\n")
    r = repo.jlane("sync", "alpha")
    assert r.rc == 0 and r.json["state"] == "fresh"
    assert head(path) == tip


def test_sync_without_key_uses_the_lane_of_the_cwd(repo: Repo) -> None:
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n")
    main = repo.commit(repo.path, "m.txt", "m\n")
    r = repo.jlane("sync", cwd=path)
    assert r.rc == 0, r.stderr
    assert r.json["lane"] == "alpha" and r.json["state"] == "fresh"
    assert is_ancestor(repo.path, main, head(path))


def test_sync_refuses_a_dirty_lane(repo: Repo) -> None:
    path = repo.create("alpha")
    tip = repo.commit(path, "a.txt", "a\n")
    repo.commit(repo.path, "m.txt", "m\n")
    (path / "a.txt").write_text("changed\n")
    r = repo.jlane("sync", "alpha")
    assert r.rc == 1
    assert r.json["ok"] is False and r.code == "lane_dirty"
    assert "a.txt" in r.json["details"]["dirty_paths"]
    assert head(path) == tip and not rebase_dir(path)
    # an untracked file is dirty too
    git(path, "checkout", "--", "a.txt")
    (path / "new.txt").write_text("x\n")
    assert repo.jlane("sync", "alpha").code == "lane_dirty"


def test_sync_refuses_while_a_rebase_is_in_progress(repo: Repo) -> None:
    path, _ = conflicting(repo)
    assert repo.jlane("sync", "alpha").json["state"] == "conflicts"
    r = repo.jlane("sync", "alpha")
    assert r.rc == 1 and r.code == "rebase_in_progress"
    assert rebase_dir(path)
    assert r.json["details"]["worklist"]["files"] == [{"path": "f.txt", "kind": "both modified"}]


def test_sync_rebases_onto_the_main_read_at_start(repo: Repo) -> None:
    """Main moves while the rebase runs (a pre-rebase hook moves it): the lane lands on
    the sha sync pinned, never on a moving target."""
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n", "lane a")
    pinned = repo.commit(repo.path, "m1.txt", "1\n", "main 1")
    later = git(
        repo.path, "commit-tree", "-p", pinned, "-m", "moved meanwhile", f"{pinned}^{{tree}}"
    ).stdout.strip()
    hook = repo.common_dir / "hooks" / "pre-rebase"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ngit update-ref refs/heads/main {later} {pinned}\n")
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)

    r = repo.jlane("sync", "alpha")
    assert r.rc == 0, r.stderr
    assert repo.sha() == later  # the hook did run
    assert r.json["main"] == pinned
    assert parents(path, "HEAD") == [pinned]


def test_sync_passes_editor_true_so_no_editor_ever_opens(repo: Repo) -> None:
    # the hermetic env has GIT_EDITOR=false: any editor call would fail the rebase
    assert os.environ["GIT_EDITOR"] == "false"
    path, _ = conflicting(repo)
    assert repo.jlane("sync", "alpha").json["state"] == "conflicts"
    (path / "f.txt").write_text("merged\n")
    r = repo.jlane("continue", "alpha")
    assert r.rc == 0, r.stderr
    assert r.json["state"] == "fresh"
    assert subjects(path, "-1") == ["lane edit"]


# -- empty steps --------------------------------------------------------------------------
def test_a_lane_commit_identical_to_what_landed_is_skipped(repo: Repo) -> None:
    path = repo.create("alpha")
    dup = repo.commit(path, "a.txt", "a\n", "lane a")
    repo.commit(path, "b.txt", "b\n", "lane b")
    git(repo.path, "cherry-pick", dup)  # the same change reached main another way
    main = repo.commit(repo.path, "m.txt", "m\n", "main m")
    r = repo.jlane("sync", "alpha")
    assert r.rc == 0, r.stderr
    assert r.json["state"] == "fresh"
    assert subjects(path, f"{main}..HEAD") == ["lane b"]


def test_a_commit_that_becomes_empty_is_dropped(repo: Repo) -> None:
    """Not a cherry-pick (different patch id), but main already holds its result."""
    repo.commit(repo.path, "a.txt", "1\n2\n", "base")
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "one\ntwo\n", "lane both lines")
    repo.commit(repo.path, "a.txt", "one\n2\n", "main line 1")
    main = repo.commit(repo.path, "a.txt", "one\ntwo\n", "main line 2")
    r = repo.jlane("sync", "alpha")
    assert r.rc == 0, r.stderr
    assert r.json["state"] == "fresh"
    assert head(path) == main
    assert lane_status(repo, "alpha")["ahead"] == 0


# -- conflicts and the worklist -----------------------------------------------------------
def test_conflict_leaves_the_rebase_in_progress_with_a_worklist(repo: Repo) -> None:
    path, lane_tip = conflicting(repo)
    r = repo.jlane("sync", "alpha")
    # stopped, like `git rebase`: exit 1 with a stable code, the worklist still printed
    assert (r.rc, r.code) == (1, "sync_conflicts"), r.stderr
    assert r.json["ok"] is False
    assert r.json["state"] == "conflicts"
    assert r.json["next"] == ["git lane continue alpha"]
    assert r.json["alternatives"] == ["git lane abort alpha"]
    wl = r.json["worklist"]
    assert wl["step"] == 1 and wl["total"] == 1
    assert wl["commit"] == lane_tip
    assert wl["subject"] == "lane edit"
    assert wl["files"] == [{"path": "f.txt", "kind": "both modified"}]
    assert rebase_dir(path)
    # zdiff3 (passed with -c): the base section is there
    assert "|||||||" in (path / "f.txt").read_text()
    st = lane_status(repo, "alpha")
    assert st["rebase_in_progress"] is True


def test_worklist_kinds(repo: Repo) -> None:
    repo.commit(repo.path, "mod.txt", "base\n", "base mod")
    repo.commit(repo.path, "del_main.txt", "base\n", "base del_main")
    repo.commit(repo.path, "del_lane.txt", "base\n", "base del_lane")
    path = repo.create("alpha")
    repo.commit(path, "mod.txt", "lane\n")
    repo.commit(path, "both_new.txt", "lane\n")
    repo.commit(path, "del_main.txt", "lane\n")
    git(path, "rm", "-q", "del_lane.txt")
    git(path, "commit", "-q", "-m", "lane deletes del_lane")
    git(path, "reset", "-q", "--soft", "HEAD~4")
    git(path, "commit", "-q", "-m", "lane all")  # one commit: one stop with every kind
    repo.commit(repo.path, "mod.txt", "main\n")
    repo.commit(repo.path, "both_new.txt", "main\n")
    git(repo.path, "rm", "-q", "del_main.txt")
    git(repo.path, "commit", "-q", "-m", "main deletes del_main")
    repo.commit(repo.path, "del_lane.txt", "main\n")

    r = repo.jlane("sync", "alpha")
    assert r.json["state"] == "conflicts", r.stdout
    kinds = {f["path"]: f["kind"] for f in r.json["worklist"]["files"]}
    # during a rebase "us" is main (upstream) and "them" is the lane commit, as git says
    assert kinds == {
        "mod.txt": "both modified",
        "both_new.txt": "added by both",
        "del_main.txt": "deleted by us",
        "del_lane.txt": "deleted by them",
    }
    porcelain = git(path, "status", "--porcelain=v1").stdout.splitlines()
    assert {ln[3:]: ln[:2] for ln in porcelain if ln[:2] in ("UU", "AA", "DU", "UD")} == {
        "mod.txt": "UU",
        "both_new.txt": "AA",
        "del_main.txt": "DU",
        "del_lane.txt": "UD",
    }
    # resolve each the plain way (edit, rm) and let continue stage it
    (path / "mod.txt").write_text("merged\n")
    (path / "both_new.txt").write_text("merged\n")
    (path / "del_main.txt").unlink()
    (path / "del_lane.txt").unlink()
    r = repo.jlane("continue", "alpha")
    assert r.rc == 0 and r.json["state"] == "fresh", r.stdout + r.stderr
    assert git(path, "ls-files").stdout.split() == ["README.md", "both_new.txt", "mod.txt"]
    assert git(path, "status", "--porcelain").stdout == ""


def test_continue_walks_every_conflicting_commit(repo: Repo) -> None:
    for n in "abc":
        repo.commit(repo.path, f"{n}.txt", "base\n", f"base {n}")
    path = repo.create("alpha")
    lane_commits = [repo.commit(path, f"{n}.txt", f"lane {n}\n", f"lane {n}") for n in "abc"]
    for n in "abc":
        repo.commit(repo.path, f"{n}.txt", f"main {n}\n", f"main {n}")
    main = repo.sha()

    r = repo.jlane("sync", "alpha")
    for step, n in enumerate("abc", 1):
        assert (r.rc, r.code) == (1, "sync_conflicts"), r.stderr
        assert r.json["state"] == "conflicts"
        wl = r.json["worklist"]
        assert (wl["step"], wl["total"]) == (step, 3)
        assert wl["commit"] == lane_commits[step - 1]
        assert wl["subject"] == f"lane {n}"
        assert wl["files"] == [{"path": f"{n}.txt", "kind": "both modified"}]
        (path / f"{n}.txt").write_text(f"merged {n}\n")
        r = repo.jlane("continue", "alpha")
    assert r.rc == 0, r.stderr
    assert r.json["state"] == "fresh"
    assert not rebase_dir(path)
    assert subjects(path, f"{main}..HEAD") == ["lane c", "lane b", "lane a"]
    for n in "abc":
        assert (path / f"{n}.txt").read_text() == f"merged {n}\n"
    assert git(path, "status", "--porcelain").stdout == ""


def test_continue_refuses_while_markers_remain_even_when_staged(repo: Repo) -> None:
    path, _ = conflicting(repo)
    repo.jlane("sync", "alpha")
    text = (path / "f.txt").read_text()
    opener = (
        text.splitlines().index(next(ln for ln in text.splitlines() if ln.startswith("<<<<<<<")))
        + 1
    )
    r = repo.jlane("continue", "alpha")
    assert r.rc == 1 and r.code == "conflict_markers_present"
    assert r.json["details"]["markers"] == [f"f.txt:{opener}"]
    assert rebase_dir(path)

    git(path, "add", "f.txt")  # staging does not make markers go away
    r = repo.jlane("continue", "alpha")
    assert r.rc == 1 and r.code == "conflict_markers_present"
    assert r.json["details"]["markers"] == [f"f.txt:{opener}"]
    assert rebase_dir(path)


def test_continue_flags_markers_in_any_file_the_step_changed(repo: Repo) -> None:
    """A hand-written diff3 block left in a non-conflicting file of the step counts."""
    path, _ = conflicting(repo)
    repo.jlane("sync", "alpha")
    (path / "f.txt").write_text("resolved\n")
    (path / "other.txt").write_text(
        "x\n<<<<<<< ours\na\n||||||| base\nb\n=======\nc\n>>>>>>> theirs\n"
    )
    r = repo.jlane("continue", "alpha")
    assert r.rc == 1 and r.code == "conflict_markers_present"
    assert r.json["details"]["markers"] == ["other.txt:2"]


def test_continue_accepts_setext_underlines_and_lone_separators(repo: Repo) -> None:
    path, _ = conflicting(repo, name="doc.md")
    repo.jlane("sync", "alpha")
    (path / "doc.md").write_text(
        "Title\n=======\n\ntext\n\n=======\n\n>>>>>>> not a closer either\n"
    )
    r = repo.jlane("continue", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert r.json["state"] == "fresh"
    assert not rebase_dir(path)
    assert git(path, "show", "HEAD:doc.md").stdout.startswith("Title\n=======\n")


def test_continue_stages_the_resolution_including_new_files(repo: Repo) -> None:
    """The sync started in a clean lane, so a file made while resolving belongs to the
    resolution: it is committed with the step, and the lane ends clean (landable)."""
    path, _ = conflicting(repo)
    repo.jlane("sync", "alpha")
    (path / "f.txt").write_text("resolved\n")
    (path / "helper.txt").write_text("split out while resolving\n")
    (path / ".gitignore").write_text("*.log\n")
    (path / "build.log").write_text("ignored stays out\n")
    r = repo.jlane("continue", "alpha")
    assert r.rc == 0 and r.json["state"] == "fresh", r.stdout + r.stderr
    assert git(path, "show", "HEAD:f.txt").stdout == "resolved\n"
    assert git(path, "show", "HEAD:helper.txt").stdout == "split out while resolving\n"
    assert git(path, "ls-files", "build.log").stdout == ""
    assert git(path, "status", "--porcelain").stdout == ""


def test_continue_without_a_sync_in_progress(repo: Repo) -> None:
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n")
    r = repo.jlane("continue", "alpha")
    # refused like abort with no sync, even when fresh: the next step is to land
    assert (r.rc, r.code) == (1, "no_sync_in_progress")
    assert r.json["next"] == ["git lane land alpha"]
    repo.commit(repo.path, "m.txt", "m\n")
    r = repo.jlane("continue", "alpha")
    assert r.rc == 1 and r.code == "no_sync_in_progress"
    assert r.json["next"] == ["git lane sync alpha"]


# -- abort --------------------------------------------------------------------------------
def test_abort_puts_the_lane_back_and_reports_it_stale(repo: Repo) -> None:
    path, lane_tip = conflicting(repo)
    repo.jlane("sync", "alpha")
    (path / "f.txt").write_text("half done\n")
    r = repo.jlane("abort", "alpha")
    assert r.rc == 0, r.stderr
    assert r.json["state"] == "stale"
    assert r.json["tip"] == lane_tip
    assert head(path) == lane_tip
    assert git(path, "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/lane/alpha"
    assert not rebase_dir(path)
    assert git(path, "status", "--porcelain").stdout == ""
    st = lane_status(repo, "alpha")
    assert st["fresh"] is False and st["rebase_in_progress"] is False
    r = repo.jlane("abort", "alpha")
    assert r.rc == 1 and r.code == "no_sync_in_progress"


# -- rerere -------------------------------------------------------------------------------
def test_sync_never_takes_a_resolution_recorded_in_rr_cache(repo: Repo) -> None:
    """rr-cache is one for every lane and the owner, and nothing tells who recorded a
    resolution there: sync rebases with rerere off, whatever the owner's config or an
    existing cache says, so a recorded resolution is never replayed, let alone committed
    as settled (red team 15B F4; the sandbox side in tests/test_sandbox.py)."""
    path, lane_tip = conflicting(repo)
    git(repo.path, "config", "rerere.enabled", "true")  # the owner's own rerere
    r = repo.jlane("sync", "alpha")
    assert r.json["state"] == "conflicts"
    assert not (repo.common_dir / "rr-cache").exists()  # sync records nothing
    # recorded as a lane could (its git records the preimage, then the resolution)
    git(path, "-c", "rerere.enabled=true", "rerere")
    (path / "f.txt").write_text("merged\n")
    git(path, "-c", "rerere.enabled=true", "rerere")
    assert [*(repo.common_dir / "rr-cache").glob("*/postimage")]
    assert repo.jlane("abort", "alpha").json["tip"] == lane_tip

    r = repo.jlane("sync", "alpha")
    assert r.rc == 1 and r.json["state"] == "conflicts", r.stdout
    assert "<<<<<<<" in (path / "f.txt").read_text()
    assert git(path, "ls-files", "-u").stdout  # unmerged: nothing staged for the lane
    assert repo.jlane("abort", "alpha").json["tip"] == lane_tip
    assert head(path) == lane_tip


def test_a_resolution_made_through_continue_is_not_recorded(repo: Repo) -> None:
    path, lane_tip = conflicting(repo)
    (repo.common_dir / "rr-cache").mkdir()  # rerere on for the repository's plain git
    repo.jlane("sync", "alpha")
    (path / "f.txt").write_text("merged\n")
    assert repo.jlane("continue", "alpha").json["state"] == "fresh"
    assert not [*(repo.common_dir / "rr-cache").iterdir()]
    # throw the rebased lane away and sync the original commits again: a conflict again
    git(path, "reset", "-q", "--hard", lane_tip)
    r = repo.jlane("sync", "alpha")
    assert r.rc == 1 and r.json["state"] == "conflicts", r.stdout


def test_a_worker_syncs_only_its_own_lane(repo: Repo) -> None:
    alpha = repo.create("alpha")
    repo.commit(alpha, "a.txt", "a\n")
    repo.create("beta")
    main = repo.commit(repo.path, "m.txt", "m\n")
    r = repo.jlane("sync", "beta", env={"GITLANE_LANE": "alpha"})
    assert r.rc == 1 and r.code == "role_forbidden"
    r = repo.jlane("sync", env={"GITLANE_LANE": "alpha"})  # no key: its own lane
    assert r.rc == 0 and r.json["lane"] == "alpha" and r.json["state"] == "fresh"
    assert is_ancestor(repo.path, main, head(alpha))


def test_sync_continue_abort_with_the_hooks_installed(repo: Repo) -> None:
    """The real hooks run on every ref move of the rebase; none of them stands in the way."""
    path, lane_tip = conflicting(repo)  # main moved by hand: before the hooks are in
    assert repo.jlane("install").rc == 0
    r = repo.jlane("sync", "alpha")
    assert r.rc == 1 and r.json["state"] == "conflicts", r.stdout + r.stderr
    assert repo.jlane("abort", "alpha").json["tip"] == lane_tip
    assert repo.jlane("sync", "alpha").json["state"] == "conflicts"
    (path / "f.txt").write_text("merged\n")
    r = repo.jlane("continue", "alpha")
    assert r.rc == 0 and r.json["state"] == "fresh", r.stdout + r.stderr
    assert is_ancestor(repo.path, repo.sha() or "", head(path))


def test_continue_goes_again_when_main_moved_during_the_resolution(repo: Repo) -> None:
    """A land while a sync's conflicts are being resolved: continue rebases onto the new
    main too, so the lane it reports fresh really is fresh."""

    repo.config("gate", "off")
    a = repo.create("a1")
    b = repo.create("b1")
    c = repo.create("c1")
    repo.commit(a, "f.txt", "from a\n")
    assert repo.jlane("land", "a1").rc == 0
    repo.commit(b, "f.txt", "from b\n")
    r = repo.jlane("sync", "b1")
    assert r.json["state"] == "conflicts"
    repo.commit(c, "other.txt", "from c\n")  # c lands meanwhile
    assert repo.jlane("sync", "c1").json["state"] == "fresh"
    assert repo.jlane("land", "c1").rc == 0
    (b / "f.txt").write_text("a and b\n")
    r = repo.jlane("continue", "b1")
    assert r.rc == 0, r.stderr
    assert r.json["state"] == "fresh"
    main = repo.sha()
    assert (
        repo.git("merge-base", "--is-ancestor", main, "refs/heads/lane/b1", check=False).returncode
        == 0
    )
    assert (b / "other.txt").read_text() == "from c\n"


def test_abort_after_a_killed_sync_left_a_git_lock_refuses_instead_of_crashing(
    repo: Repo,
) -> None:
    """A sync killed with its git (kill -9 of the process group) leaves the rebase in
    progress and git's `HEAD.lock` in the lane's admin dir. abort and continue refuse
    lane_busy (stale: no git works in the lane), never exit 3 nor an empty worklist;
    doctor names the lock; their next (reconcile removes it, then the command) aborts."""
    path, _ = conflicting(repo, "s")
    r = repo.jlane("sync", "s")
    assert r.code == "sync_conflicts", r.stdout
    admin = Path(git(path, "rev-parse", "--absolute-git-dir").stdout.strip())
    (admin / "HEAD.lock").write_text("")  # what the killed `git rebase` left...
    os.utime(admin / "HEAD.lock", (1, 1))  # ...noticed a while later
    for action in ("continue", "abort"):
        r = repo.jlane(action, "s")
        assert r.rc == 1 and r.code == "lane_busy", (r.rc, r.stdout, r.stderr[-300:])
        assert r.json["details"]["stale"] is True
        assert r.json["next"] == ["git lane reconcile", f"git lane {action} s"]
    doctor = repo.jlane("doctor")
    assert any("HEAD.lock" in c["message"] for c in doctor.json["checks"]), doctor.stdout
    for cmd in r.json["next"]:
        r = repo.jlane(*cmd.split()[2:])
        assert r.rc == 0, r.stdout
    assert r.code == "aborted" and not (admin / "HEAD.lock").exists()
    assert not rebase_dir(path)


# -- the lane's rebase state: in its admin dir, the lane's to write -----------------------
def _stopped_rebase_naming(
    repo: Repo, head_name: str | None = None, orig_head: str | None = None
) -> tuple[Path, str, Path]:
    """Lane alpha with two commits, stopped in a rebase of its own (an `edit` of the last
    one), whose `<admin>/rebase-merge/head-name` (and orig-head) the lane then rewrites:
    the admin dir is the lane's to write (exec --sandbox grants it; git keeps HEAD, index
    and rebase state there). The hooks are installed: they guard main and refs/git-lane/
    only. Returns the lane's path, its tip and its rebase-merge dir."""
    from hookfix import install, run

    install(repo)
    repo.config("gate", "off")
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n")
    repo.commit(path, "b.txt", "b\n")
    tip = head(path)
    r = run(path, "rebase", "-i", "HEAD~1", env={"GIT_SEQUENCE_EDITOR": "sed -i 1s/^pick/edit/"})
    assert r.returncode == 0, r.stderr
    rm = Path(git(path, "rev-parse", "--absolute-git-dir").stdout.strip()) / "rebase-merge"
    assert (rm / "head-name").read_text().strip() == "refs/heads/lane/alpha"
    if head_name is not None:
        (rm / "head-name").write_text(head_name + "\n")
    if orig_head is not None:  # git's finish moves head-name from orig-head (a CAS)
        (rm / "orig-head").write_text(orig_head + "\n")
    return path, tip, rm


def _refs(repo: Repo) -> str:
    return repo.git("for-each-ref", "--format=%(refname) %(objectname)").stdout


@pytest.mark.parametrize("target", ["refs/heads/release", "refs/tags/v1"])
def test_owner_abort_never_moves_a_ref_the_lane_named_in_its_rebase_state(
    repo: Repo, target: str
) -> None:
    """`git lane abort` ran `git rebase --abort` unconfined, and git's abort moves the ref
    named in `rebase-merge/head-name` to `orig-head` (and points the lane's HEAD at it):
    the lane named the owner's branch release (or tag v1), and the owner's abort moved it
    to the lane's commit. Refused rebase_state_untrusted now, nothing run (red team 13G)."""
    git(repo.path, "branch", "release")
    git(repo.path, "tag", "v1")
    _path, _tip, rm = _stopped_rebase_naming(repo, target)
    before = _refs(repo)
    r = repo.jlane("abort", "alpha")
    assert r.rc == 1 and r.code == "rebase_state_untrusted", r.stdout + r.stderr
    assert target in r.json["details"]["why"]
    assert _refs(repo) == before
    assert rm.is_dir()  # left as it was: the next removes it by hand


def test_owner_continue_never_moves_a_ref_the_lane_named_in_its_rebase_state(
    repo: Repo,
) -> None:
    """The same through `git lane continue`: at the end of the rebase git moves
    `head-name` from `orig-head` to the new HEAD (both the lane's to write: it reads
    release's value and names it). Refused before any git rebase runs."""
    git(repo.path, "branch", "release")
    release = repo.sha("refs/heads/release")
    assert release is not None
    _stopped_rebase_naming(repo, "refs/heads/release", orig_head=release)
    before = _refs(repo)
    r = repo.jlane("continue", "alpha")
    assert r.rc == 1 and r.code == "rebase_state_untrusted", r.stdout + r.stderr
    assert _refs(repo) == before


def test_owner_continue_never_runs_a_lane_written_update_refs_file(repo: Repo) -> None:
    """Quieter than head-name: `rebase-merge/update-refs` (git 2.38+, three lines per
    ref: name, before, after) is applied by git when the rebase ends, whatever the todo
    says: the lane listed tag v1 with its value and a commit of its own, and the owner's
    continue moved the tag, the lane's HEAD back on lane/alpha as if nothing else moved."""
    git(repo.path, "tag", "v1")
    v1 = repo.sha("refs/tags/v1")
    _path, tip, rm = _stopped_rebase_naming(repo)
    (rm / "update-refs").write_text(f"refs/tags/v1\n{v1}\n{tip}\n")
    before = _refs(repo)
    for action in ("continue", "abort"):
        r = repo.jlane(action, "alpha")
        assert r.rc == 1 and r.code == "rebase_state_untrusted", r.stdout + r.stderr
        assert "update-refs" in r.json["details"]["why"]
    assert _refs(repo) == before


def test_owner_abort_never_stores_a_lane_written_autostash_in_the_shared_stash(
    repo: Repo,
) -> None:
    """An `autostash` in the rebase state is applied by git's abort (and end); one that
    does not apply is stored in refs/stash, the repository's, shared with the hub: the
    owner's next `git stash pop` in the hub would apply the lane's change there."""
    path, _tip, rm = _stopped_rebase_naming(repo)
    (path / "a.txt").write_text("the lane's\n")
    stash = git(path, "stash", "create").stdout.strip()
    git(path, "checkout", "-q", "--", "a.txt")
    (path / "a.txt").write_text("conflicting\n")
    (rm / "autostash").write_text(stash + "\n")
    before = _refs(repo)
    r = repo.jlane("abort", "alpha")
    assert r.rc == 1 and r.code == "rebase_state_untrusted", r.stdout + r.stderr
    assert "autostash" in r.json["details"]["why"]
    assert _refs(repo) == before and repo.sha("refs/stash") is None


def test_owner_abort_never_resets_a_branch_moved_since_the_rebase_began(repo: Repo) -> None:
    """git's abort resets the lane's branch to `orig-head` whatever it is at now: a commit
    the branch was moved onto meanwhile (here from the hub) would drop off it. Refused
    while orig-head is not the commit the branch is at; the next keeps the branch."""
    path, tip, _rm = _stopped_rebase_naming(repo)
    tree = git(path, "rev-parse", f"{tip}^{{tree}}").stdout.strip()
    moved = git(repo.path, "commit-tree", "-p", tip, "-m", "on top", tree).stdout.strip()
    git(repo.path, "update-ref", "refs/heads/lane/alpha", moved, tip)
    r = repo.jlane("abort", "alpha")
    assert r.rc == 1 and r.code == "rebase_state_untrusted", r.stdout + r.stderr
    assert "orig-head" in r.json["details"]["why"]
    assert repo.sha("refs/heads/lane/alpha") == moved


def test_the_untrusted_rebase_state_recovery_runs_as_printed_and_moves_no_ref(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """The next of rebase_state_untrusted, run as printed by a shell: the state is removed
    (git never reads it), the lane is back on its branch at its tip, every other ref is
    where it was, and the sync goes through."""
    git(repo.path, "branch", "release")
    git(repo.path, "tag", "v1")
    path, tip, rm = _stopped_rebase_naming(repo, "refs/tags/v1")
    (rm / "update-refs").write_text(f"refs/heads/release\n{repo.sha('release')}\n{tip}\n")
    (path / "b.txt").write_text("half done\n")
    beta = repo.create("beta")
    repo.commit(beta, "m.txt", "m\n", "main moves")
    assert repo.jlane("land", "beta").rc == 0
    before = _refs(repo)
    r = repo.jlane("abort", "alpha")
    assert r.rc == 1 and r.code == "rebase_state_untrusted", r.stdout + r.stderr
    assert r.json["next"][-1] == "git lane sync alpha"
    for cmd in r.json["next"][:-1]:
        res = subprocess.run(cmd, shell=True, cwd=repo.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stderr)
    assert _refs(repo) == before
    assert not rebase_dir(path)
    assert git(path, "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/lane/alpha"
    assert head(path) == tip and git(path, "status", "--porcelain").stdout == ""
    s = repo.jlane(*r.json["next"][-1].split()[2:])
    assert s.rc == 0 and s.code == "synced", s.stdout + s.stderr
    assert is_ancestor(repo.path, repo.sha() or "", head(path))
    assert _refs(repo).replace(f"lane/alpha {head(path)}", f"lane/alpha {tip}") == before


def test_a_detached_rebase_state_as_git_writes_it_is_aborted(repo: Repo) -> None:
    """`detached HEAD` is what git writes for a rebase begun on a detached HEAD: abort
    runs, moves no branch, and leaves the lane detached at orig-head."""
    path, tip, _rm = _stopped_rebase_naming(repo, "detached HEAD")
    before = _refs(repo)
    r = repo.jlane("abort", "alpha")
    assert r.rc == 0 and r.code == "aborted", r.stdout + r.stderr
    assert _refs(repo) == before and head(path) == tip and not rebase_dir(path)


def test_owner_continue_on_a_rebase_git_cannot_move_on_ends_with_a_refusal(
    repo: Repo,
) -> None:
    """When `git rebase --continue` fails with no conflict and no step files, sync._drive
    answers with `--skip`; here (a todo pick of a commit that does not exist: git cannot
    parse its todo) that fails the same way, and it went round again up to MAX_AUTO_STEPS
    (10,000) times, several git calls each: the owner's continue spun for minutes. Now it
    refuses sync_failed at once, and its next (abort, then sync) works as printed."""
    import sys

    path, tip, rm = _stopped_rebase_naming(repo)
    (rm / "git-rebase-todo").write_text("pick " + "0123456789abcdef" * 2 + "01234567 x\n")
    t0 = time.monotonic()
    try:
        res = subprocess.run(
            [sys.executable, "-m", "guard", "continue", "alpha", "--json"],
            cwd=repo.path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"git lane continue still running after {time.monotonic() - t0:.0f} s")
    out = json.loads(res.stdout)
    assert res.returncode == 1 and out["code"] == "sync_failed", res.stdout + res.stderr
    assert "invalid line" in out["details"]["stderr"]
    assert out["next"] == ["git lane abort alpha", "git lane sync alpha"]
    a = repo.jlane(*out["next"][0].split()[2:])
    assert a.rc == 0 and a.code == "aborted", a.stdout + a.stderr
    assert head(path) == tip and not rebase_dir(path)
    assert repo.jlane(*out["next"][1].split()[2:]).rc == 0


def test_owner_continue_on_a_rebase_naming_a_ref_it_cannot_move_refuses_at_once(
    repo: Repo,
) -> None:
    """Red team 13G's case: head-name names release, whose compare-and-swap against
    orig-head fails at the rebase's end; continue and skip failed the same way round and
    round. The state is refused before any git rebase runs."""
    import sys

    git(repo.path, "branch", "release")
    _stopped_rebase_naming(repo, "refs/heads/release")
    res = subprocess.run(
        [sys.executable, "-m", "guard", "continue", "alpha", "--json"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1, res.stdout + res.stderr
    assert json.loads(res.stdout)["code"] == "rebase_state_untrusted"


def test_sync_moves_no_other_branch_even_with_rebase_update_refs_set(repo: Repo) -> None:
    """The owner's `rebase.updateRefs = true` would make sync's own rebase list every
    branch that points into the lane (its todo gets update-ref lines, its state an
    update-refs file): sync passes rebase.updateRefs=false, so its rebase moves the lane's
    branch alone and its continue is not refused as one sync never started."""
    repo.git("config", "rebase.updateRefs", "true")
    path, _tip = conflicting(repo)
    first = repo.commit(path, "g.txt", "g\n", "lane more")
    git(path, "branch", "backup", f"{first}~1")
    backup = repo.sha("refs/heads/backup")
    r = repo.jlane("sync", "alpha")
    assert r.code == "sync_conflicts", r.stdout + r.stderr
    (path / "f.txt").write_text("merged\n")
    r = repo.jlane("continue", "alpha")
    assert r.rc == 0 and r.json["state"] == "fresh", r.stdout + r.stderr
    assert repo.sha("refs/heads/backup") == backup


# -- the rest of the rebase state git reads (red teams 13J, 13L) ---------------------------


def _admin(lane: Path) -> Path:
    return Path(git(lane, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())


def _stopped_sync(hub: Repo, picks: int = 1, owner: list[str] | None = None) -> tuple[Path, Path]:
    """Lane beta's sync stopped on a conflict in a.txt (main changed it too), resolved in
    the worktree: the lane's path and its rebase-merge dir. `owner`: `git config` pairs of
    the owner's, set just before the sync."""
    beta = hub.create("beta")
    hub.commit(beta, "a.txt", "beta\n")
    for i in range(1, picks):
        hub.commit(beta, f"b{i}.txt", "more\n")
    alpha = hub.create("alpha")
    hub.commit(alpha, "a.txt", "alpha\n")
    assert hub.jlane("land", "alpha").rc == 0
    for k, v in zip((owner or [])[::2], (owner or [])[1::2], strict=True):
        hub.git("config", k, v)
    s = hub.jlane("sync", "beta")
    assert s.rc == 1 and s.code == "sync_conflicts", s.stdout
    rm = _admin(beta) / "rebase-merge"
    assert rm.is_dir()
    (beta / "a.txt").write_text("resolved\n")
    return beta, rm


def test_continue_never_runs_a_merge_strategy_the_lane_named_with_a_trailing_space(
    hub: Repo, tmp_path: Path
) -> None:
    """git's read_oneliner drops one newline from rebase-merge/strategy, nothing else:
    `ort ` is no built-in, git would run `git-merge-ort ` from PATH (a relative entry
    finds the lane's, git runs from the worktree's top). Judged as git reads it: refused
    rebase_todo_untrusted, nothing run (red team 13L #1)."""
    beta, rm = _stopped_sync(hub, picks=2)  # a second pick: the strategy runs for it
    ran = tmp_path / "lane-program-ran"
    tool = beta / "node_modules" / ".bin" / "git-merge-ort "
    tool.parent.mkdir(parents=True)
    tool.write_text(f"#!/bin/sh\nid > '{ran}'\nexit 2\n")
    tool.chmod(0o755)
    (rm / "strategy").write_text("ort \n")
    env = {"PATH": f"node_modules/.bin{os.pathsep}{os.environ['PATH']}"}
    r = hub.jlane("continue", "beta", env=env)
    assert not ran.exists(), (r.rc, r.stdout[-600:])
    assert r.rc == 1 and r.code == "rebase_todo_untrusted", r.stdout
    (rm / "strategy").write_text("ort\n")  # as git writes a built-in one: continued
    r = hub.jlane("continue", "beta", env=env)
    assert r.rc == 0 and r.code == "synced", r.stdout
    assert not ran.exists()


@pytest.mark.parametrize(
    "name,content",
    [
        ("gpg_sign_opt", "-Sthe-owners-release-key\n"),
        ("gpg_sign_opt", "-S\n"),
        ("signoff", "--signoff\n"),
    ],
)
def test_continue_never_signs_with_the_owners_key_because_the_lane_asked(
    hub: Repo, tmp_path: Path, name: str, content: str
) -> None:
    """git's sequencer obeys rebase-merge/gpg_sign_opt (`-S<keyid>`: the owner's
    gpg.program signs every commit the rest of the rebase makes, with the lane's key id)
    and `signoff` (the owner's Signed-off-by), files a sync never writes (the owner's
    config says no commit.gpgSign here) and the lane can. Refused rebase_state_untrusted,
    nothing run; the next runs as printed (red team 13L #2, 13J J4)."""
    ran = tmp_path / "gpg-ran"
    prog = tmp_path / "owners-gpg"
    prog.write_text(f"#!/bin/sh\necho \"$@\" >> '{ran}'\nexit 1\n")
    prog.chmod(0o755)
    with open(Path(os.environ["HOME"]) / ".gitconfig", "a") as f:
        f.write(f"[gpg]\n\tprogram = {prog}\n")
    beta, rm = _stopped_sync(hub)
    tip = hub.sha("refs/heads/lane/beta")
    (rm / name).write_text(content)  # the lane writes it
    r = hub.jlane("continue", "beta")
    assert not ran.exists(), (r.rc, r.stdout[-600:], ran.read_text())
    assert r.rc == 1 and r.code == "rebase_state_untrusted", r.stdout
    assert name in r.json["details"]["why"]
    assert hub.sha("refs/heads/lane/beta") == tip
    assert r.json["next"][-1] == "git lane sync beta"  # stops on the conflict again
    for cmd in r.json["next"][:-1]:
        res = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert not rebase_dir(beta) and not ran.exists() and head(beta) == tip


@pytest.mark.parametrize("action", ["abort", "continue"])
@pytest.mark.parametrize("name", ["gpg_sign_opt", "quiet"])
def test_a_fifo_in_the_rebase_state_hangs_no_owner_command(
    hub: Repo, action: str, name: str
) -> None:
    """git opens every file of its rebase state it looks for (gpg_sign_opt, quiet,
    signoff...) with a plain open(2): a FIFO the lane put there blocked the owner's abort
    and continue for ever. Every entry is lstat'ed first: rebase_state_untrusted (red team
    13J J6)."""
    _beta, rm = _stopped_sync(hub)
    os.mkfifo(rm / name)

    try:
        res = subprocess.run(
            [sys.executable, "-m", "guard", action, "beta", "--json"],
            cwd=hub.path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"git lane {action} hung on a FIFO at rebase-merge/{name}")
    finally:
        try:
            os.close(os.open(rm / name, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    out = json.loads(res.stdout)
    if out["code"] == "admin_unreadable":  # the listing of the worktrees saw it first
        assert out["details"]["paths"] == [str(rm / name)], res.stdout
        assert out["next"] == ["git lane reconcile"], res.stdout
        assert hub.jlane("reconcile").code == "reconciled"
        assert not os.path.lexists(rm / name)  # removed through fds, nothing else
        assert hub.jlane("abort", "beta").rc == 0
        return
    # planted after the listing: the rebase state's own check
    assert res.returncode == 1 and out["code"] == "rebase_state_untrusted", res.stdout
    assert name in out["details"]["why"]


def test_a_sync_the_owners_commit_gpgsign_signs_is_continued_and_a_failed_signature_ends(
    hub: Repo,
) -> None:
    """With the owner's own commit.gpgSign the sync's rebase writes gpg_sign_opt `-S`: that
    one is continued, not refused. When git then cannot sign (nor commit), continue said
    sync_conflicts with no file and `git lane continue` as its next, which failed the same
    way for ever (red team 13J J4): now sync_failed with git's words, and its next (abort,
    then sync) runs as printed."""
    beta, rm = _stopped_sync(hub, owner=["commit.gpgSign", "true", "gpg.program", "false"])
    assert (rm / "gpg_sign_opt").read_text() == "-S\n"
    tip = hub.sha("refs/heads/lane/beta")
    r = hub.jlane("continue", "beta")
    assert r.rc == 1 and r.code == "sync_failed", r.stdout
    assert "sign" in r.json["details"]["stderr"]
    assert r.json["next"] == ["git lane abort beta", "git lane sync beta"]
    a = hub.jlane(*r.json["next"][0].split()[2:])
    assert a.rc == 0 and a.code == "aborted", a.stdout
    assert head(beta) == tip and not rebase_dir(beta)


def test_untrusted_state_next_never_drops_the_lanes_autostash(hub: Repo) -> None:
    """The owner's rebase.autoStash = true; the agent's own `git rebase main` in lane beta
    stashes its uncommitted edits as a commit named only by rebase-merge/autostash and
    stops on a conflict. abort is refused rebase_state_untrusted (an autostash) and its
    next removed the state, the stash's only name with it: it now stores that commit in
    the stash first, and `git stash pop` brings the edits back (red team 13L #3)."""
    with open(Path(os.environ["HOME"]) / ".gitconfig", "a") as f:
        f.write("[rebase]\n\tautoStash = true\n")
    beta = hub.create("beta")
    hub.commit(beta, "a.txt", "beta\n")
    alpha = hub.create("alpha")
    hub.commit(alpha, "a.txt", "alpha\n")
    assert hub.jlane("land", "alpha").rc == 0
    (beta / "README.md").write_text("the agent's uncommitted work\n")
    reb = git(beta, "rebase", "main", check=False)  # the agent's own rebase, in its lane
    admin = _admin(beta)
    assert (admin / "rebase-merge" / "autostash").is_file(), reb.stdout + reb.stderr
    r = hub.jlane("abort", "beta")
    assert r.code == "rebase_state_untrusted", r.stdout
    # the lane's repository named, never its pointers followed (red team 13S)
    assert r.json["next"][0].startswith("GIT_DIR="), r.json["next"]
    assert f"git -C {beta} " in r.json["next"][0] and " stash store " in r.json["next"][0]
    for cmd in r.json["next"][:-1]:
        res = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stderr)
    assert git(beta, "stash", "pop").returncode == 0
    assert (beta / "README.md").read_text() == "the agent's uncommitted work\n"


def test_a_lane_written_msgnum_never_crashes_the_owners_land(hub: Repo) -> None:
    """worklist() turned rebase-merge/msgnum and end into numbers with a bare int(): `one`
    there (the lane's admin dir) made land, sync and ready exit 3. They are shown only:
    anything but a few digits is shown as 0 (red team 13J J7)."""
    alpha = hub.create("alpha")
    rm = _admin(alpha) / "rebase-merge"
    rm.mkdir()
    (rm / "msgnum").write_text("one\n")
    (rm / "end").write_text("9" * 40 + "\n")
    for args in (["land", "alpha"], ["sync", "alpha"], ["ready", "alpha"]):
        res = hub.jlane(*args)
        assert res.rc in (0, 1) and "Traceback" not in res.stderr, (args, res.rc, res.stderr)
        assert res.code, (args, res.stdout)


@pytest.mark.parametrize("name", ["gpg_sign_opt", "quiet"])
def test_a_fifo_planted_in_the_rebase_state_after_the_listing_is_doubted(
    hub: Repo, name: str
) -> None:
    """A FIFO planted after the worktree listing's walk (which names it admin_unreadable
    first: the test above) is still never opened: the rebase state's own check lstat's
    every entry before git runs."""
    from guard.commands import sync as sync_cmd
    from guard.repo import Repo as GRepo

    beta, rm = _stopped_sync(hub)
    os.mkfifo(rm / name)
    try:
        why = sync_cmd.rebase_state_doubt(GRepo.discover(hub.path), str(beta), "lane/beta")
    finally:
        try:
            os.close(os.open(rm / name, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert why is not None and name in why, why


def test_a_junk_cherry_pick_head_in_the_admin_dir_never_spins_sync(hub: Repo) -> None:
    """MED (red team 13Q, finding 10: a sync that did not end, ~40 min). The lane writes
    `<admin>/CHERRY_PICK_HEAD` as `zz`: every pick of the rebase failed to update it and
    was rescheduled, and sync went round `rebase --continue` MAX_AUTO_STEPS times. A
    CHERRY_PICK_HEAD naming no commit holds nothing committed: removed before the rebase,
    which then syncs the lane."""
    lane_path = hub.create("alpha")
    hub.commit(lane_path, "b.txt", "b\n")
    hub.commit(lane_path, "c.txt", "c\n")
    beta = hub.create("beta")
    hub.commit(beta, "m.txt", "m\n")
    assert hub.jlane("land", "beta").code == "landed"
    (_admin(lane_path) / "CHERRY_PICK_HEAD").write_text("zz\n")
    try:
        r = subprocess.run(
            [sys.executable, "-m", "guard", "sync", "alpha", "--json"],
            cwd=hub.path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("git lane sync alpha still ran after 60 s (rebase --continue in a loop)")
    assert r.returncode == 0, (r.returncode, r.stdout[:300], r.stderr[-300:])
    main = hub.sha()
    assert main is not None and is_ancestor(hub.path, main, "refs/heads/lane/alpha")
    assert len(subjects(hub.path, f"{main}..lane/alpha")) == 2  # its two commits, once each
    assert (lane_path / "b.txt").read_text() == "b\n" and (lane_path / "m.txt").exists()
    assert not (_admin(lane_path) / "CHERRY_PICK_HEAD").exists()


def test_a_step_git_reschedules_twice_ends_sync_coded_with_a_next_that_works(
    hub: Repo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """MED (red team 13Q, finding 10): whatever makes git reschedule a pick without
    carrying it out (here the junk CHERRY_PICK_HEAD, left in place), _drive stops after
    the second round whose todo did not move: sync_failed, whose next (abort, sync) ends
    in a synced lane."""
    from guard import cli
    from guard.commands import sync as gsync

    lane_path = hub.create("alpha")
    hub.commit(lane_path, "b.txt", "b\n")
    hub.commit(lane_path, "c.txt", "c\n")
    beta = hub.create("beta")
    hub.commit(beta, "m.txt", "m\n")
    assert hub.jlane("land", "beta").code == "landed"
    (_admin(lane_path) / "CHERRY_PICK_HEAD").write_text("zz\n")
    real = gsync._git
    rounds: list[list[str]] = []

    def counted(path: str, args: list[str], check: bool = False) -> Any:
        rounds.append(args)
        assert len(rounds) < 20, "sync went round rebase --continue"
        return real(path, args, check)

    monkeypatch.setattr(gsync, "_drop_junk_pick", lambda path: None)
    monkeypatch.setattr(gsync, "_git", counted)
    monkeypatch.chdir(hub.path)
    with pytest.raises(SystemExit):
        cli.main(["sync", "alpha", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["code"] == "sync_failed" and "rescheduled" in out["message"], out
    assert out["next"] == ["git lane abort alpha", "git lane sync alpha"], out
    monkeypatch.undo()
    for cmd in out["next"]:
        r = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert r.returncode == 0, (cmd, r.stdout, r.stderr)
    main = hub.sha()
    assert main is not None and is_ancestor(hub.path, main, "refs/heads/lane/alpha")
    assert len(subjects(hub.path, f"{main}..lane/alpha")) == 2


def _ignored_in_the_way(hub: Repo) -> tuple[Path, LaneRun]:
    """Lane alpha with an ignored `x/f.txt` where main (beta landed it) now tracks one:
    (its path, sync's ignored_in_the_way refusal)."""
    lp = hub.create("alpha")
    beta = hub.create("beta")
    hub.commit(beta, "x/f.txt", "main's\n")
    assert hub.jlane("land", "beta").rc == 0
    (hub.common_dir / "info").mkdir(exist_ok=True)
    with open(hub.common_dir / "info" / "exclude", "a") as f:
        f.write("/x/\n")
    (lp / "x").mkdir()
    (lp / "x" / "f.txt").write_text("the lane's ignored file\n")
    r = hub.jlane("sync", "alpha")
    assert (r.rc, r.code) == (1, "ignored_in_the_way"), r.stdout
    return lp, r


def test_ignored_in_the_way_next_never_moves_a_file_outside_the_lane(
    hub: Repo, tmp_path: Path
) -> None:
    """sync refuses ignored_in_the_way for an ignored file of the lane where main now
    tracks one (`x/f.txt`). Its next was `mkdir -p KEPT/x && mv -n -T -- LANE/x/f.txt
    KEPT/x/f.txt`: between the refusal and the owner's run, the lane made `x` a link to a
    directory of the owner's, and `mv` moved the owner's `f.txt` into kept/ (red team
    14H-B F5). The next is `git lane repair alpha --keep x/f.txt`: the engine reaches `x`
    from the lane's root without following a link, refuses, and moves nothing."""
    from guard.errors import join_next

    lp, r = _ignored_in_the_way(hub)
    owner = tmp_path / "owner-dir"  # the owner's, outside every lane
    owner.mkdir()
    (owner / "f.txt").write_text("the owner's own\n")
    shutil.rmtree(lp / "x")  # the lane, before the owner runs the next
    (lp / "x").symlink_to(owner)
    subprocess.run(join_next(r.json["next"]), shell=True, cwd=hub.path, capture_output=True)
    assert (owner / "f.txt").exists(), (
        f"the next of ignored_in_the_way, run as written, moved {owner / 'f.txt'} (outside "
        "the lane) into kept/ through a link the lane put at x"
    )
    assert hub.jlane("repair", "alpha", "--keep", "x/f.txt").code == "keep_failed"
    assert sorted(os.listdir(owner)) == ["f.txt"]


def test_ignored_in_the_way_next_keeps_the_file_and_syncs(hub: Repo) -> None:
    """Run as written (nothing changed in between), the next moves the lane's ignored file
    into the kept/ directory the refusal names, and the sync goes through."""
    lp, r = _ignored_in_the_way(hub)
    assert r.json["next"][0].startswith("git lane repair alpha --into ")
    for cmd in r.json["next"]:
        done = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    kept = Path(r.json["details"]["kept"])
    assert (kept / "x" / "f.txt").read_text() == "the lane's ignored file\n"
    assert (lp / "x" / "f.txt").read_text() == "main's\n"
