"""The pre-commit hook in lanes: conflict markers (G9), the lane's own branch, the sync
notice (G8); and that ordinary lane work (commits, rebases, sync, continue, land) is not
disturbed by the installed hooks."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import Repo, git
from hookfix import (
    assert_ok,
    assert_refused,
    commit_file,
    events,
    install,
    make_lane,
    run,
    sha,
    write,
)

from guard import config

CONFLICT = "top\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> lane/b\nbottom\n"
DIFF3 = "<<<<<<< ours\na\n||||||| base\nb\n=======\nc\n>>>>>>> theirs\n"


@pytest.fixture
def lane(repo: Repo) -> Path:
    install(repo)
    return make_lane(repo, "a")


# -- conflict markers ------------------------------------------------------------------
@pytest.mark.parametrize(
    "text", [CONFLICT, DIFF3, "x\r\n<<<<<<< HEAD\r\n1\r\n=======\r\n2\r\n>>>>>>> b\r\n"]
)
def test_conflict_markers_refused(lane: Path, text: str) -> None:
    tip = sha(lane)
    res = commit_file(lane, "f.txt", text)
    assert_refused(res, "conflict_markers_present")
    assert "f.txt:" in res.stderr
    assert sha(lane) == tip


def test_conflict_marker_location_in_odd_paths(lane: Path) -> None:
    name = "dir ü/con flict\u00e9.txt"
    res = commit_file(lane, name, "line\n" + CONFLICT)
    assert_refused(res, "conflict_markers_present")
    assert f"{name}:3" in res.stderr


def test_conflict_markers_refused_with_commit_all(lane: Path) -> None:
    """`git commit -a` hands the hook a temporary index (GIT_INDEX_FILE): it is honoured."""
    assert_ok(commit_file(lane, "f.txt", "clean\n"))
    write(lane / "f.txt", CONFLICT)
    res = run(lane, "commit", "-q", "-a", "-m", "all")
    assert_refused(res, "conflict_markers_present")
    res = run(lane, "commit", "-q", "-m", "only", "--", "f.txt")
    assert_refused(res, "conflict_markers_present")


def test_conflict_marker_refusal_is_logged(repo: Repo, lane: Path) -> None:
    commit_file(lane, "f.txt", CONFLICT)
    evs = [e for e in events(repo) if e.get("code") == "conflict_markers_present"]
    assert evs and evs[-1]["lane"] == "a" and evs[-1]["source"] == "hook"
    assert evs[-1]["markers"] == ["f.txt:2"]


@pytest.mark.parametrize(
    "text",
    [
        "Title\n=======\n\nbody\n",  # a Markdown setext underline
        "quote:\n<<<<<<< only an opener, no block\n",
        "a lone closer\n>>>>>>> nothing\n",
        "<<<<<<<< eight is not a marker\n========\n>>>>>>>> eight\n",
    ],
)
def test_things_that_look_like_markers_are_allowed(lane: Path, text: str) -> None:
    assert_ok(commit_file(lane, "README.md", text))


def test_markers_already_on_main_do_not_block_other_edits(repo: Repo) -> None:
    git(repo.path, "commit", "-q", "--allow-empty", "-m", "x")
    write(repo.path / "fixture.txt", CONFLICT)
    git(repo.path, "add", "fixture.txt")
    git(repo.path, "commit", "-q", "-m", "a test fixture with markers")
    install(repo)
    lane = make_lane(repo, "a")
    assert_ok(commit_file(lane, "fixture.txt", CONFLICT + "one more line\n"))
    # but adding a second block is refused
    res = commit_file(lane, "fixture.txt", CONFLICT + "one more line\n" + CONFLICT)
    assert_refused(res, "conflict_markers_present")
    assert "fixture.txt:10" in res.stderr


def test_markers_outside_lanes_are_not_checked(repo: Repo) -> None:
    """The marker rule is a lane rule (G9); other branches in the hub are the owner's."""
    install(repo)
    git(repo.path, "switch", "-q", "-c", "scratch")
    assert_ok(commit_file(repo.path, "f.txt", CONFLICT))


def test_marker_check_runs_without_python_on_path(lane: Path) -> None:
    """The installed hook names the Python that installed it; PATH is not consulted."""
    env = {"PATH": "/usr/bin:/bin"}
    write(lane / "f.txt", CONFLICT)
    git(lane, "add", "f.txt")
    res = run(lane, "commit", "-q", "-m", "m", env=env)
    assert_refused(res, "conflict_markers_present")


# -- the lane's own branch -------------------------------------------------------------
def test_commit_on_another_branch_in_a_lane_worktree_refused(lane: Path) -> None:
    git(lane, "switch", "-q", "-c", "side")
    res = run(lane, "commit", "-q", "--allow-empty", "-m", "x")
    assert_refused(res, "lane_branch_mismatch")
    assert "git switch lane/a" in res.stderr
    git(lane, "switch", "-q", "--detach")
    assert_refused(run(lane, "commit", "-q", "--allow-empty", "-m", "x"), "lane_branch_mismatch")
    git(lane, "switch", "-q", "lane/a")
    assert_ok(run(lane, "commit", "-q", "--allow-empty", "-m", "x"))


# -- the sync notice -------------------------------------------------------------------
def _land_other(repo: Repo, path: str = "other.txt") -> None:
    config.write(repo.state_dir / "config.toml", "gate", "off")
    b = make_lane(repo, "b")
    assert_ok(commit_file(b, path, "b\n"))
    r = repo.jlane("land", "b")
    assert r.rc == 0, r.stderr


def test_fresh_lane_commit_is_quiet(lane: Path) -> None:
    res = commit_file(lane, "a.txt", "a\n")
    assert_ok(res)
    assert res.stderr == ""


def test_stale_lane_commit_gets_a_notice(repo: Repo, lane: Path) -> None:
    _land_other(repo)
    res = commit_file(lane, "a.txt", "a\n")
    assert res.returncode == 0, res.stderr
    assert "[sync_required]" in res.stderr and "git lane sync a" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_the_owners_commit_in_a_lane_never_writes_through_a_link_at_gitlane_fresh(
    hub: Repo, tmp_path: Path
) -> None:
    """Red team 13S, finding 3 (HIGH). release refuses a dirty lane (unlanded_work) and its
    next has the owner commit the lane's changes: the hooks run as the owner, outside any
    sandbox. pre-commit cached the epoch in `<admin>/gitlane-fresh` after `[ ! -e F ] ||
    ...`: a dangling link passes `! -e`, and `printf > F` created the file it names. The
    cache is now a directory's name (mkdir and rmdir follow no link): a link the lane put
    at the old name or the new one is never written through."""
    repo = hub
    alpha = repo.create("alpha")
    (alpha / "work.txt").write_text("uncommitted\n")
    r = repo.jlane("release", "alpha")
    assert r.rc == 1 and r.code == "unlanded_work", r.stdout
    # release's next is `git lane checkpoint` (red team 13S finding 2), which refuses
    # admin_unreadable on the links below; the owner's own commit in the lane runs the
    # same hooks as the owner, outside any sandbox: neither writes through them
    assert r.json["next"][0].startswith("git lane checkpoint alpha "), r.stdout
    lq = shlex.quote(str(alpha))
    commits = [r.json["next"][0], f"git -C {lq} add -A && git -C {lq} commit -q -m work"]
    # the lane, after the refusal
    admin = repo.common_dir / "worktrees" / "alpha"
    (admin / "gitlane-fresh").unlink(missing_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (admin / "gitlane-fresh").symlink_to(outside / "made-by-the-owner")
    for epoch in range(3):
        (admin / f"gitlane-fresh-{epoch}").symlink_to(outside / f"dir-{epoch}")
    for n in commits:  # the owner runs them as printed
        res = subprocess.run(["sh", "-c", n], cwd=repo.path, capture_output=True, text=True)
        assert res.returncode == (1 if n == commits[0] else 0), res.stdout + res.stderr
    assert git(alpha, "log", "-1", "--format=%s").stdout.strip() != "init"  # committed
    assert not list(outside.iterdir())


def test_the_fresh_cache_is_one_name_per_land_epoch(repo: Repo, lane: Path) -> None:
    """The notice's cache is the name `gitlane-fresh-<epoch>` (one, the older ones
    removed); a land since makes the next commit ask git again, and notice."""
    assert_ok(commit_file(lane, "a.txt", "a\n"))
    gd = Path(git(lane, "rev-parse", "--absolute-git-dir").stdout.strip())
    assert [p.name for p in gd.glob("gitlane-fresh*")] == ["gitlane-fresh-0"]
    _land_other(repo)
    res = commit_file(lane, "b.txt", "b\n")
    assert "[sync_required]" in res.stderr, res.stderr


def test_land_time_only_gives_no_notice(repo: Repo, lane: Path) -> None:
    config.write(repo.state_dir / "config.toml", "sync_policy", "land_time_only")
    _land_other(repo)
    res = commit_file(lane, "a.txt", "a\n")
    assert_ok(res)
    assert "sync" not in res.stderr


def test_overlap_policy_notices_only_overlap(repo: Repo, lane: Path) -> None:
    config.write(repo.state_dir / "config.toml", "sync_policy", "overlap_mandatory")
    _land_other(repo, "shared.txt")
    res = commit_file(lane, "mine.txt", "a\n")
    assert_ok(res)
    assert "sync" not in res.stderr
    res = commit_file(lane, "shared.txt", "a\n")
    assert res.returncode == 0
    assert "[sync_required]" in res.stderr and "git lane sync a" in res.stderr


# -- ordinary lane work keeps working --------------------------------------------------
def test_rebase_in_a_lane(repo: Repo, lane: Path) -> None:
    for i in range(5):
        assert_ok(commit_file(lane, f"f{i}.txt", f"{i}\n"))
    _land_other(repo)
    assert_ok(run(lane, "rebase", "-q", "main"))
    assert run(lane, "merge-base", "--is-ancestor", "main", "HEAD").returncode == 0
    assert_ok(
        run(
            lane,
            "rebase",
            "-q",
            "-i",
            "--exec",
            "true",
            "main",
            env={"GIT_SEQUENCE_EDITOR": "true"},
        )
    )


def test_sync_with_conflicts_continue_and_land(repo: Repo, lane: Path) -> None:
    config.write(repo.state_dir / "config.toml", "gate", "off")
    b = make_lane(repo, "b")
    assert_ok(commit_file(b, "README.md", "from b\n"))
    assert repo.jlane("land", "b").rc == 0
    assert_ok(commit_file(lane, "README.md", "from a\n"))
    r = repo.jlane("sync", "a")
    assert r.rc == 1, r.stderr
    assert r.json["state"] == "conflicts"
    # the hooks do not get in the way of resolving: a commit attempt with markers is refused
    res = run(lane, "commit", "-q", "-am", "with markers")
    assert_refused(res, "conflict_markers_present")
    write(lane / "README.md", "from a and b\n")
    r = repo.jlane("continue", "a")
    assert r.rc == 0, r.stderr
    assert r.json["state"] == "fresh"
    r = repo.jlane("land", "a")
    assert r.rc == 0, r.stderr
    assert (repo.path / "README.md").read_text() == "from a and b\n"


def test_create_and_release_lanes_with_hooks(repo: Repo) -> None:
    install(repo)
    p = make_lane(repo, "tmp")
    r = repo.jlane("release", "tmp")
    assert r.rc == 0, r.stderr
    assert not p.exists()
    assert sha(repo.path, "refs/heads/lane/tmp") is None


def test_lane_marker_written_for_hooks(repo: Repo, lane: Path) -> None:
    gd = Path(run(lane, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())
    assert (gd / "gitlane-lane").read_text().strip() == "a"
    assert os.path.realpath(gd).startswith(os.path.realpath(repo.common_dir))


def test_lane_under_a_path_with_spaces_and_non_ascii(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache dir \u00fc"))
    install(repo)
    lane = make_lane(repo, "sp")
    assert " " in str(lane) and "\u00fc" in str(lane)
    git(lane, "config", "diff.noprefix", "true")  # the marker check does not depend on it
    assert_ok(commit_file(lane, "ok.txt", "fine\n"))
    res = commit_file(lane, "b/f.txt", CONFLICT)
    assert_refused(res, "conflict_markers_present")
    assert "b/f.txt:2" in res.stderr
    git(lane, "rm", "-q", "--cached", "b/f.txt")
    git(lane, "switch", "-q", "-c", "elsewhere")
    assert_refused(run(lane, "commit", "-q", "--allow-empty", "-m", "x"), "lane_branch_mismatch")
    git(lane, "switch", "-q", "lane/sp")
    _land_other(repo)
    res = commit_file(lane, "more.txt", "more\n")
    assert res.returncode == 0 and "git lane sync sp" in res.stderr
