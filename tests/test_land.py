"""`git lane land`: every refusal, the gate runner, the hub update, main's shape (G1-G7)."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Repo, git
from guard import git as ggit
from enginehelp import (
    assert_linear,
    epoch,
    events,
    head,
    is_ancestor,
    owner_file,
    pid_alive,
    ready_lane,
    spawn_lane,
    status_porcelain,
    wait_for,
)


def gate(repo: Repo, command: str, timeout: int | None = None) -> None:
    repo.config("gate_command", json.dumps(command))  # a TOML string, whatever the command
    if timeout is not None:
        repo.config("gate_timeout", str(timeout))


def refused(
    repo: Repo, code: str, *args: str, env: dict[str, str] | None = None, lock_free: bool = True
) -> dict[str, object]:
    """Run a land that must be refused with `code` and leave main where it was."""
    before = repo.sha()
    r = repo.jlane("land", *args, env=env)
    assert r.rc == 1, (r.rc, r.stdout, r.stderr)
    assert r.json["ok"] is False
    assert r.code == code, r.stdout
    assert "Traceback" not in r.stderr
    assert repo.sha() == before
    if lock_free:
        assert not owner_file(repo).exists()  # the lock never outlives the land
    return dict(r.json)


# -- success --------------------------------------------------------------------------------
def test_land_fast_forwards_main_and_brings_the_hub_along(repo: Repo, tmp_path: Path) -> None:
    seen = tmp_path / "gate-saw.txt"
    gate(
        repo, f"git rev-parse HEAD > '{seen}'; pwd -P >> '{seen}'; echo GATE-OUT; echo GATE-ERR >&2"
    )
    path = ready_lane(repo, "alpha", {"a.txt": "a\n", "src/b.txt": "b\n"})
    before, tip = repo.sha(), head(path)

    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stderr
    j = r.json
    assert (j["ok"], j["code"], j["lane"]) == (True, "landed", "alpha")
    assert (j["main_before"], j["main_after"], j["epoch"]) == (before, tip, 1)
    assert j["gate"]["status"] == "passed" and j["gate"]["command"].startswith("git rev-parse")
    assert isinstance(j["gate"]["seconds"], float)
    # the gate ran in the lane worktree at the exact tip, its output streamed to stderr
    assert seen.read_text().split() == [tip, os.path.realpath(path)]
    assert "GATE-OUT" in r.stderr and "GATE-ERR" in r.stderr
    assert len(r.stdout.splitlines()) == 1  # stdout holds the one JSON object only
    # main fast-forwarded, never merged; hub index and worktree at the new tip
    assert repo.sha() == tip
    assert git(repo.path, "rev-parse", "HEAD").stdout.strip() == tip
    assert_linear(repo)
    assert status_porcelain(repo.path) == ""
    assert (repo.path / "src" / "b.txt").read_text() == "b\n"
    assert epoch(repo) == 1
    reflog = git(repo.path, "reflog", "show", "--format=%gs", "refs/heads/main").stdout.splitlines()
    assert reflog[0] == "git-lane: land alpha"


def test_lands_in_a_row_keep_main_linear(repo: Repo) -> None:
    repo.config("gate", "off")
    landed = []
    for key in ("one", "two", "three"):
        path = ready_lane(repo, key)
        r = repo.jlane("land", key)
        if r.code == "stale_lane":
            assert repo.jlane("sync", key).json["state"] == "fresh"
            r = repo.jlane("land", key)
        assert r.code == "landed", r.stdout
        landed.append(head(path))
    assert_linear(repo)
    assert all(is_ancestor(repo.path, c, "main") for c in landed)
    assert epoch(repo) == 3
    for ev in events(repo, "land"):
        assert is_ancestor(repo.path, ev["main_before"], ev["main_after"])


def test_land_into_a_repository_where_main_is_checked_out_nowhere(repo: Repo) -> None:
    repo.config("gate", "off")
    path = ready_lane(repo, "alpha")
    git(repo.path, "switch", "-q", "-c", "elsewhere")
    other_head = head(repo.path)
    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stderr
    assert repo.sha() == head(path)
    assert git(repo.path, "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/elsewhere"
    assert head(repo.path) == other_head
    assert status_porcelain(repo.path) == ""
    assert "branch refs/heads/main\n" not in repo.worktrees()


def test_land_from_inside_the_lane_with_no_other_git_context(repo: Repo) -> None:
    repo.config("gate", "off")
    path = ready_lane(repo, "alpha")
    r = repo.jlane("land", "alpha", cwd=path)
    assert r.rc == 0 and r.code == "landed", r.stderr
    assert repo.sha() == head(path)
    assert status_porcelain(repo.path) == ""


def test_gate_off_is_recorded_in_the_land_event(repo: Repo) -> None:
    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    r = repo.jlane("land", "alpha")
    assert r.rc == 0 and r.json["gate"]["status"] == "off"
    log = repo.jlane("log", "--lane", "alpha")
    assert log.rc == 0
    lands = [e for e in log.json["events"] if e["kind"] == "land"]
    assert len(lands) == 1
    assert lands[0]["gate"]["status"] == "off" and lands[0]["gate_off"] is True


def test_gate_on_is_recorded_too(repo: Repo) -> None:
    gate(repo, "exit 0")
    ready_lane(repo, "alpha")
    assert repo.jlane("land", "alpha").code == "landed"
    (ev,) = events(repo, "land")
    assert ev["gate"]["status"] == "passed" and ev["gate_off"] is False
    assert ev["gate"]["command"] == "exit 0"


# -- refusals -------------------------------------------------------------------------------
def test_gate_command_unset(repo: Repo) -> None:
    ready_lane(repo, "alpha")
    refused(repo, "gate_command_unset", "alpha")


def test_lane_dirty(repo: Repo) -> None:
    repo.config("gate", "off")
    path = ready_lane(repo, "alpha")
    (path / "alpha.txt").write_text("edited\n")
    j = refused(repo, "lane_dirty", "alpha")
    assert j["details"]["dirty_paths"] == ["alpha.txt"]  # type: ignore[index]
    git(path, "checkout", "--", "alpha.txt")
    (path / "untracked.txt").write_text("x\n")
    refused(repo, "lane_dirty", "alpha")
    (path / "untracked.txt").unlink()
    git(path, "rm", "-q", "--cached", "alpha.txt")  # staged only
    refused(repo, "lane_dirty", "alpha")


def test_nothing_to_land(repo: Repo) -> None:
    repo.config("gate", "off")
    repo.create("alpha")
    refused(repo, "nothing_to_land", "alpha")
    # a lane whose work has already landed has nothing either
    path = ready_lane(repo, "beta")
    assert repo.jlane("land", "beta").code == "landed"
    assert head(path) == repo.sha()
    refused(repo, "nothing_to_land", "beta")


def test_stale_lane(repo: Repo) -> None:
    repo.config("gate", "off")
    path = ready_lane(repo, "alpha")
    repo.commit(repo.path, "m.txt", "m\n")
    j = refused(repo, "stale_lane", "alpha")
    assert j["details"]["tip"] == head(path)  # type: ignore[index]
    assert repo.jlane("sync", "alpha").json["state"] == "fresh"
    assert repo.jlane("land", "alpha").code == "landed"


def test_rebase_in_progress_refuses_land(repo: Repo) -> None:
    repo.config("gate", "off")
    repo.commit(repo.path, "f.txt", "base\n")
    path = repo.create("alpha")
    repo.commit(path, "f.txt", "lane\n")
    repo.commit(repo.path, "f.txt", "main\n")
    assert repo.jlane("sync", "alpha").json["state"] == "conflicts"
    refused(repo, "rebase_in_progress", "alpha")


def test_unknown_lane(repo: Repo) -> None:
    repo.config("gate", "off")
    refused(repo, "unknown_lane", "nope")
    refused(repo, "invalid_lane_key", "Not_A_Key")


def test_lane_owner_conflict(repo: Repo) -> None:
    repo.config("gate", "off")
    # the owner: a shell that, when told to, lands from a process it starts (a child of
    # the recorded owner, which owner_conflict accepts through the process lineage)
    owner = subprocess.Popen(
        [
            "sh",
            "-c",
            f"read go; {shlex.quote(sys.executable)} -m guard land alpha --json; sleep 60",
        ],
        cwd=repo.path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        r = repo.jlane("create", "alpha", "--owner-pid", str(owner.pid))
        assert r.rc == 0, r.stderr
        path = Path(r.json["lane"]["path"])
        tip = repo.commit(path, "a.txt", "a\n")
        j = refused(repo, "lane_owner_conflict", "alpha")
        assert j["details"]["owner_pid"] == owner.pid  # type: ignore[index]
        # the owner itself (or a process it started) may land
        assert owner.stdin is not None and owner.stdout is not None
        owner.stdin.write("go\n")
        owner.stdin.flush()
        me = json.loads(owner.stdout.readline())
        assert me["code"] == "landed", me
        assert repo.sha() == tip
    finally:
        owner.kill()
        owner.wait()


def test_a_dead_owner_never_conflicts(repo: Repo) -> None:
    repo.config("gate", "off")
    owner = subprocess.Popen(["sleep", "60"])
    r = repo.jlane("create", "alpha", "--owner-pid", str(owner.pid))
    path = Path(r.json["lane"]["path"])
    repo.commit(path, "a.txt", "a\n")
    owner.kill()
    owner.wait()
    assert repo.jlane("land", "alpha").code == "landed"


def test_hub_dirty_only_on_overlap(repo: Repo) -> None:
    repo.config("gate", "off")
    for n in ("a", "b", "c"):
        repo.commit(repo.path, f"{n}.txt", f"{n} base\n")
    path = ready_lane(repo, "alpha", {"a.txt": "a lane\n", "new/deep.txt": "deep\n"})

    (repo.path / "a.txt").write_text("a hub edit\n")
    j = refused(repo, "hub_dirty", "alpha")
    assert j["details"]["paths"] == ["a.txt"]  # type: ignore[index]
    git(repo.path, "add", "a.txt")  # staged overlap blocks too
    refused(repo, "hub_dirty", "alpha")
    git(repo.path, "reset", "-q", "--hard")
    (repo.path / "new").mkdir()
    (repo.path / "new" / "deep.txt").write_text("hub's own\n")  # untracked, same path
    refused(repo, "hub_dirty", "alpha")
    (repo.path / "new" / "deep.txt").unlink()
    (repo.path / "new").rmdir()

    # unrelated hub edits, staged, unstaged and untracked, never block and survive as they were
    (repo.path / "b.txt").write_text("b staged\n")
    git(repo.path, "add", "b.txt")
    (repo.path / "c.txt").write_text("c unstaged\n")
    (repo.path / "u.txt").write_text("untracked\n")
    before = status_porcelain(repo.path)
    cached_before = git(repo.path, "diff", "--cached").stdout
    unstaged_before = git(repo.path, "diff").stdout

    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stderr
    assert repo.sha() == head(path)
    assert status_porcelain(repo.path) == before
    assert git(repo.path, "diff", "--cached").stdout == cached_before
    assert git(repo.path, "diff").stdout == unstaged_before
    assert (repo.path / "a.txt").read_text() == "a lane\n"
    assert (repo.path / "new" / "deep.txt").read_text() == "deep\n"
    assert (repo.path / "b.txt").read_text() == "b staged\n"
    assert (repo.path / "c.txt").read_text() == "c unstaged\n"
    assert (repo.path / "u.txt").read_text() == "untracked\n"


# -- the gate -------------------------------------------------------------------------------
def test_gate_failed_with_tail(repo: Repo) -> None:
    gate(repo, "for i in $(seq 1 100); do echo line $i; done; echo boom >&2; exit 3")
    ready_lane(repo, "alpha")
    j = refused(repo, "gate_failed", "alpha")
    d = j["details"]
    assert d["gate"]["exit"] == 3 and d["gate"]["status"] == "failed"  # type: ignore[index]
    tail = d["tail"]  # type: ignore[index]
    assert tail[-1] == "boom" and tail[-2] == "line 100"
    assert 0 < len(tail) <= 40
    assert epoch(repo) == 0


@pytest.mark.slow
def test_gate_timeout_kills_the_whole_process_group(repo: Repo, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    # the shell ignores SIGTERM (so does its child): only the group SIGKILL ends them
    gate(repo, f"trap '' TERM; sleep 60 & echo $! > '{pidfile}'; wait; wait", timeout=1)
    ready_lane(repo, "alpha")
    t0 = time.monotonic()
    j = refused(repo, "gate_timeout", "alpha")
    assert time.monotonic() - t0 < 20
    assert j["details"]["gate"]["status"] == "timeout"  # type: ignore[index]
    pid = int(pidfile.read_text())
    wait_for(lambda: not pid_alive(pid), 5, "the gate's grandchild to die")
    assert epoch(repo) == 0


def test_lane_changed_during_gate_by_a_commit(repo: Repo) -> None:
    gate(repo, "git commit -q --allow-empty -m sneaky")
    path = ready_lane(repo, "alpha")
    tip = head(path)
    j = refused(repo, "lane_changed_during_gate", "alpha")
    assert j["details"]["tip_before"] == tip  # type: ignore[index]
    assert j["details"]["tip_after"] == head(path) != tip  # type: ignore[index]


def test_lane_changed_during_gate_by_an_edit(repo: Repo) -> None:
    gate(repo, "echo more >> alpha.txt")
    ready_lane(repo, "alpha")
    j = refused(repo, "lane_changed_during_gate", "alpha")
    assert j["details"]["dirty_paths"] == ["alpha.txt"]  # type: ignore[index]


def test_a_tracked_file_put_back_with_the_tips_bytes_during_the_gate_is_refused(
    repo: Repo,
) -> None:
    """git status compares content: a file replaced while the gate ran and put back with
    the tip's bytes reads as clean to it, though the gate may have read other bytes. The
    index's stat data tells it (a new file, a new ctime); a gate that rewrites a file
    itself is told how to gate in a clean worktree instead."""
    gate(repo, "cp alpha.txt t && mv t alpha.txt")
    path = ready_lane(repo, "alpha")
    j = refused(repo, "lane_changed_during_gate", "alpha")
    assert j["details"]["rewritten_paths"] == ["alpha.txt"]  # type: ignore[index]
    assert j["next"] == ["git lane land alpha"]
    assert status_porcelain(path) == ""  # the same bytes: nothing for git status to show
    assert epoch(repo) == 0
    alt = str(j["alternatives"][0]).split("  #")[0]  # type: ignore[index]
    res = subprocess.run(alt, shell=True, cwd=repo.path, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert repo.sha() == head(path)


# a swap the gate reads, then the tip's bytes put back (a copy: a new inode, the same
# mtime) and the lane's own index told of it: `git diff-files` then reads clean, and only
# the engine's own lstat of the tracked files, taken before and after the gate, sees it
SWAP = (
    "cp -p {f} .tip && printf 'not the tip\\n' > .evil && mv .evil {f} && cat {f} >/dev/null"
    " && mv .tip {f} && {put_back}"
)


@pytest.mark.parametrize(
    "put_back", ["git update-index -q --refresh", "git add -- alpha.txt"], ids=["refresh", "add"]
)
def test_a_swap_put_back_and_refreshed_in_the_lanes_index_is_refused(
    repo: Repo, put_back: str
) -> None:
    """The lane can write its own index (a sandboxed lane too): after the swap and the
    put-back, `git update-index --refresh` (or `git add` of the file) records the new
    file's stat there, so the index's stat view is clean after the gate; the engine's own
    lstat of every tracked file (dev, ino, mode, size, mtime, ctime) is not."""
    gate(repo, SWAP.format(f="alpha.txt", put_back=put_back))
    path = ready_lane(repo, "alpha")
    tip = head(path)
    j = refused(repo, "lane_changed_during_gate", "alpha")
    assert j["details"]["rewritten_paths"] == ["alpha.txt"]  # type: ignore[index]
    assert j["next"] == ["git lane land alpha"]
    assert status_porcelain(path) == ""  # the tip's bytes, and an index that agrees
    assert git(path, "diff-files", "--name-only", "-z").stdout == ""
    assert head(path) == tip and epoch(repo) == 0


def test_a_swap_in_a_subdirectory_and_of_odd_names_is_refused(repo: Repo) -> None:
    """The paths come from `ls-files -z` and are lstat'ed as they are: a file deep in the
    tree, one whose name holds a newline, one that is not UTF-8, and a symlink (lstat, never followed) swapped
    for a file and back are each seen."""
    odd = "sub dir/new\nline \u00fc.txt"
    path = ready_lane(repo, "alpha", {"src/deep/b.txt": "b\n", odd: "odd\n"})
    bad = os.fsdecode(b"sub dir/not utf-8 \xff.txt")  # git's bytes, surrogate-escaped
    (path / bad).write_text("bad\n")
    os.symlink("src/deep/b.txt", path / "link")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "a link and a name that is not UTF-8")
    swap_odd = (
        'for f in \'sub dir\'/*; do cp -p "$f" .tip && echo evil > "$f" && mv -f .tip "$f"; done'
    )
    swap_link = "mv link .link && echo evil > link && rm link && mv .link link"
    gate(
        repo,
        SWAP.format(f="src/deep/b.txt", put_back="true")
        + f" && {swap_odd} && {swap_link} && git update-index -q --refresh",
    )
    j = refused(repo, "lane_changed_during_gate", "alpha")
    quoted = '"sub dir/not utf-8 \\377.txt"'  # json_safe's form of that name
    seen = j["details"]["rewritten_paths"]  # type: ignore[index]
    assert sorted(seen) == sorted(["src/deep/b.txt", odd, quoted, "link"])
    assert status_porcelain(path) == ""
    assert epoch(repo) == 0


def test_a_file_replaced_by_a_directory_and_put_back_is_refused(repo: Repo) -> None:
    gate(
        repo,
        "mv alpha.txt .tip && mkdir alpha.txt && ls alpha.txt && rmdir alpha.txt"
        " && mv .tip alpha.txt && git update-index -q --refresh",
    )
    path = ready_lane(repo, "alpha")
    j = refused(repo, "lane_changed_during_gate", "alpha")
    assert j["details"]["rewritten_paths"] == ["alpha.txt"]  # type: ignore[index]
    assert status_porcelain(path) == ""


@pytest.mark.parametrize(
    "where", ["src", "src/deep", "top"], ids=["dir", "subdir", "parent-of-dir"]
)
def test_a_directory_swapped_and_renamed_back_during_the_gate_is_refused(
    repo: Repo, where: str
) -> None:
    """A directory renamed away, an evil one read in its place, then renamed back: every
    tracked file keeps its inode, mtime and ctime (the lstat views agree), but the watch
    on the directory's own identity (IN_MOVE_SELF) was set before the gate. `top` holds
    no file itself, only the directories on the way to one."""
    evil = {"src": "src/deep/b.txt", "src/deep": "src/deep/b.txt", "top": "top/src/c.txt"}[where]
    gate(
        repo,
        f"mv {where} .swap && mkdir -p {os.path.dirname(evil)} && echo evil > {evil}"
        f" && cat {evil} >/dev/null && rm -r {where} && mv .swap {where}"
        " && git update-index -q --refresh",
    )
    files = {"src/deep/b.txt": "b\n", "top/src/c.txt": "c\n"}
    path = ready_lane(repo, "alpha", files)
    j = refused(repo, "lane_changed_during_gate", "alpha")
    assert j["details"]["moved_dirs"] == [where]  # type: ignore[index]
    assert j["details"]["rewritten_paths"] == []  # type: ignore[index]
    assert j["next"] == ["git lane land alpha"]
    assert status_porcelain(path) == "" and epoch(repo) == 0


def test_an_honest_gate_that_builds_into_tracked_directories_lands(repo: Repo) -> None:
    """The watch is on each directory's own identity only: a gate that makes, writes and
    removes files and directories inside the lane's tracked directories (ignored build
    output) raises no event, however many, and lands."""
    gate(
        repo,
        "for i in $(seq 300); do echo $i > src/o$i.pyc; mkdir -p src/c$i; rm -r src/c$i; done"
        " && rm src/*.pyc && mkdir -p out/x && mv out/x out/y && rm -r out",
    )
    ready_lane(repo, "alpha", {".gitignore": "*.pyc\nout/\n", "src/b.txt": "b\n"})
    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stdout


def test_a_watch_that_cannot_be_set_refuses_and_its_next_lands_in_a_clean_worktree(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fs.inotify.max_user_watches reached (ENOSPC at the second directory's watch): the
    in-lane gate never runs unwatched. The refusal's next, run as written, switches to
    the clean-worktree gate (no watch needed) and lands."""
    from guard import dirwatch
    from guard.commands import land
    from guard.errors import Refusal
    from guard.repo import Repo as GRepo

    gate(repo, "touch ran-in-$(basename $PWD)")  # where the gate ran, were it to run
    path = ready_lane(repo, "alpha", {"src/b.txt": "b\n"})
    tip = head(path)
    seen: list[bytes] = []
    real = dirwatch.add_watch

    def full(libc: ctypes.CDLL, fd: int, p: bytes) -> int:
        seen.append(p)
        return -errno.ENOSPC if len(seen) > 1 else real(libc, fd, p)

    monkeypatch.setattr(dirwatch, "add_watch", full)
    monkeypatch.chdir(repo.path)
    with pytest.raises(Refusal) as exc:
        land.run(GRepo.discover(str(repo.path)), "alpha")
    r = exc.value
    assert r.code == "gate_watch_failed"
    assert r.details["dir"] == "src" and r.details["errno"] == "ENOSPC"
    assert r.next == ["git lane config set gate_worktree clean", "git lane land alpha"]
    assert not list(path.glob("ran-in-*")) and repo.sha() != tip and epoch(repo) == 0
    assert not owner_file(repo).exists()
    for cmd in r.next:
        res = subprocess.run(cmd, shell=True, cwd=repo.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert repo.sha() == tip and epoch(repo) == 1
    assert status_porcelain(path) == ""  # the gate ran in a fresh worktree, not the lane


@pytest.mark.parametrize("err", [errno.EMFILE, errno.ENOSYS], ids=["instances", "no-inotify"])
def test_no_inotify_refuses_the_in_lane_gate_not_the_clean_one(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, err: int
) -> None:
    """max_user_instances reached (inotify_init1: EMFILE), or no inotify at all (not
    Linux): gate_watch_failed with the gate in the lane; a clean gate needs no watch."""
    from guard import dirwatch
    from guard.commands import land
    from guard.errors import Refusal
    from guard.repo import Repo as GRepo

    def none() -> object:
        raise dirwatch.WatchFailed("", err)

    gate(repo, "true")
    path = ready_lane(repo, "alpha")
    monkeypatch.setattr(dirwatch, "_libc", none)
    monkeypatch.chdir(repo.path)
    with pytest.raises(Refusal) as exc:
        land.run(GRepo.discover(str(repo.path)), "alpha")
    assert exc.value.code == "gate_watch_failed" and exc.value.details["dir"] is None
    repo.config("gate_worktree", "clean")
    res = land.run(GRepo.discover(str(repo.path)), "alpha")
    assert res["code"] == "landed" and repo.sha() == head(path)


def test_a_lane_directory_that_is_a_link_is_never_watched_through(tmp_path: Path) -> None:
    """IN_ONLYDIR | IN_DONT_FOLLOW: a directory of the lane that is a link (or a file, or
    gone) fails its watch (ENOTDIR, ENOENT); one moved, removed or whose watch the kernel
    dropped is named, parents first in `directories`."""
    from guard import dirwatch

    assert dirwatch.directories(["a", "x/y/z", "x/w", "q/r"]) == [".", "q", "x", "x/y"]
    (tmp_path / "real").mkdir()
    os.symlink("real", tmp_path / "link")
    (tmp_path / "file").write_text("")
    for name, err in [("link", errno.ENOTDIR), ("file", errno.ENOTDIR), ("gone", errno.ENOENT)]:
        with pytest.raises(dirwatch.WatchFailed) as exc:
            dirwatch.DirWatch(str(tmp_path), [".", name])
        assert (exc.value.rel, exc.value.errno) == (name, err)
    (tmp_path / "real" / "d").mkdir()
    (tmp_path / "keep").mkdir()
    with dirwatch.DirWatch(str(tmp_path), [".", "keep", "real", "real/d"]) as w:
        (tmp_path / "keep" / "new").mkdir()
        (tmp_path / "keep" / "f").write_text("x")
        os.rename(tmp_path / "keep" / "new", tmp_path / "keep" / "new2")
        assert w.moved() == []
        os.rename(tmp_path / "real", tmp_path / "away")
        os.rename(tmp_path / "away", tmp_path / "real")
        os.rmdir(tmp_path / "real" / "d")
        assert w.moved() == ["real", "real/d"]
        assert w.moved() == []  # read once


def test_stat_view_lstats_every_tracked_path_itself(tmp_path: Path) -> None:
    """stat_view's paths are the index's (gitlinks left out), its stat data the engine's
    own lstat: a gone file is None, one lstat cannot look at (a leading link that loops)
    is UNREADABLE and always counts; a path in one view only counts."""
    w = tmp_path / "w"
    w.mkdir()
    git(w, "init", "-q", "-b", "main")
    (w / "a").write_text("a\n")
    (w / "d").mkdir()
    (w / "d" / "b").write_text("b\n")
    os.symlink("a", w / "link")
    git(w, "add", "-A")
    blob = git(w, "hash-object", "-w", "--stdin").stdout.strip()
    git(w, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub")
    git(w, "update-index", "--add", "--cacheinfo", f"100644,{blob},loop/x")
    os.symlink("loop", w / "loop")  # loop/x: ELOOP, not absent
    view = ggit.stat_view(str(w))
    assert sorted(view) == ["a", "d/b", "link", "loop/x"]
    assert view["loop/x"] == ggit.UNREADABLE
    assert view["link"] is not None and view["link"][2] == os.lstat(w / "link").st_mode
    assert ggit.rewritten(view, ggit.stat_view(str(w))) == ["loop/x"]
    os.unlink(w / "loop")
    again = ggit.stat_view(str(w))
    assert again["loop/x"] is None and ggit.rewritten(again, ggit.stat_view(str(w))) == []
    assert ggit.rewritten(view, again) == ["loop/x"]
    (w / "a").unlink()
    gone = ggit.stat_view(str(w))
    assert gone["a"] is None and ggit.rewritten(again, gone) == ["a"]
    assert ggit.rewritten({k: v for k, v in again.items() if k != "d/b"}, again) == ["d/b"]
    assert ggit.rewritten(again, {k: v for k, v in again.items() if k != "d/b"}) == ["d/b"]


def test_an_honest_gate_that_refreshes_the_lanes_index_lands(repo: Repo) -> None:
    """A gate that reads every file and runs git (whose `status` may refresh the index)
    changes no tracked file's lstat: it lands."""
    gate(
        repo,
        "git status --porcelain >/dev/null && git update-index -q --really-refresh"
        " && cat alpha.txt src/b.txt >/dev/null && git diff --quiet HEAD",
    )
    path = ready_lane(repo, "alpha", {"alpha.txt": "a\n", "src/b.txt": "b\n"})
    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stdout
    assert repo.sha() == head(path)


def test_a_gate_that_leaves_build_output_behind_is_dirty(repo: Repo) -> None:
    gate(repo, "mkdir -p out && echo x > out/artifact")
    ready_lane(repo, "alpha")
    refused(repo, "lane_changed_during_gate", "alpha")


def test_build_output_of_the_gate_next_ignores_it_and_lands(repo: Repo) -> None:
    # what a Python project with no .gitignore does under `python -m pytest`: every land
    # would leave __pycache__ behind and be refused, landing again making it again
    gate(
        repo,
        "mkdir -p pkg/__pycache__ __pycache__ && touch pkg/__pycache__/m.pyc __pycache__/t.pyc"
        " .coverage 'odd [x]*.log'",
    )
    path = ready_lane(repo, "alpha", {"pkg/m.py": "x = 1\n"})
    j = refused(repo, "lane_changed_during_gate", "alpha")
    d = j["details"]
    assert sorted(d["gate_left"]) == [  # type: ignore[index]
        ".coverage",
        "__pycache__/",
        "odd [x]*.log",
        "pkg/__pycache__/",
    ]
    next_ = j["next"]
    assert isinstance(next_, list) and next_[-1] == "git lane land alpha"
    tip = head(path)
    res = subprocess.run(
        " && ".join(next_), shell=True, cwd=repo.path, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert repo.sha() == head(path) != tip  # landed: the .gitignore commit on the lane's
    assert git(path, "show", "--format=", "--name-only", "HEAD").stdout.strip() == ".gitignore"
    assert status_porcelain(path) == ""  # the gate's output is ignored now, not lost
    assert (path / "odd [x]*.log").exists() and (path / "pkg/__pycache__/m.pyc").exists()


def test_a_gate_that_changes_a_tracked_file_and_leaves_output_is_not_told_to_ignore(
    repo: Repo,
) -> None:
    gate(repo, "touch new.out && echo more >> alpha.txt")
    ready_lane(repo, "alpha")
    j = refused(repo, "lane_changed_during_gate", "alpha")
    assert j["details"]["gate_left"] == []  # type: ignore[index]
    assert not any(".gitignore" in c for c in j["next"])  # type: ignore[union-attr]


# -- the integration lock, seen from land ---------------------------------------------------
@pytest.mark.slow
def test_lock_busy_then_wait_succeeds_once_freed(repo: Repo, tmp_path: Path) -> None:
    # alpha's land holds the lock until the test lets its gate fail: main does not move,
    # so beta (which waited) is still fresh and lands. No sleep decides the order, so a
    # loaded machine cannot free the lock before the refusals are seen.
    go = tmp_path / "gate-may-end"
    gate(
        repo,
        f'if [ "$GITLANE_GATE_LANE" = alpha ]; then i=0; while [ ! -e {shlex.quote(str(go))} ]'
        " && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; exit 1; fi",
    )
    ready_lane(repo, "alpha")
    beta = ready_lane(repo, "beta")
    holder = spawn_lane("land", "alpha", "--json", cwd=repo.path)
    try:
        wait_for(
            lambda: "tip=" in (owner_file(repo).read_text() if owner_file(repo).exists() else ""),
            20,
            "alpha's land to take the lock",
        )
        j = refused(repo, "lock_busy", "beta", lock_free=False)
        h = j["details"]["holder"]  # type: ignore[index]
        assert h["pid"] == holder.pid and h["lane"] == "alpha"
        assert h["since"] and h["host"]
        assert j["details"]["foreign_host"] is False  # type: ignore[index]
        # --wait SECONDS gives up
        t0 = time.monotonic()
        r = repo.jlane("land", "beta", "--wait", "0.3")
        assert r.code == "lock_busy" and time.monotonic() - t0 >= 0.3
        # --wait (for ever) lands once the lock is free
        waiter = spawn_lane("land", "beta", "--wait", "--json", cwd=repo.path)
        time.sleep(0.5)
        assert waiter.poll() is None  # still waiting: alpha holds the lock
        go.touch()
        wout, werr = waiter.communicate(timeout=60)
        assert waiter.returncode == 0 and json.loads(wout)["code"] == "landed", wout + werr
    finally:
        go.touch()
        out, _ = holder.communicate(timeout=60)
    assert json.loads(out)["code"] == "gate_failed"
    assert repo.sha() == head(beta)
    assert not owner_file(repo).exists()


# -- workers --------------------------------------------------------------------------------
def test_worker_land_is_denied_by_default(repo: Repo) -> None:
    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    refused(repo, "role_forbidden", env={"GITLANE_LANE": "alpha"})
    refused(repo, "role_forbidden", "alpha", env={"GITLANE_LANE": "alpha"})
    refused(repo, "role_forbidden", "alpha", env={"GITLANE_ROLE": "worker"})


def test_worker_land_allowed_only_for_its_own_lane(repo: Repo) -> None:
    repo.config("gate", "off")
    repo.config("worker_land", "allow")
    alpha = ready_lane(repo, "alpha")
    ready_lane(repo, "beta")
    refused(repo, "role_forbidden", "beta", env={"GITLANE_LANE": "alpha"})
    r = repo.jlane("land", env={"GITLANE_LANE": "alpha"}, cwd=alpha)  # no key: its own lane
    assert r.rc == 0 and r.code == "landed" and r.json["lane"] == "alpha", r.stdout
    assert repo.sha() == head(alpha)
    # GITLANE_ROLE=main does not lift a binding
    refused(repo, "role_forbidden", "beta", env={"GITLANE_LANE": "alpha", "GITLANE_ROLE": "main"})


def test_worker_cannot_change_the_config_to_let_itself_land(repo: Repo) -> None:
    r = repo.jlane("config", "set", "worker_land", "allow", env={"GITLANE_LANE": "alpha"})
    assert r.rc == 1 and r.code == "role_forbidden"


def test_refusals_are_exit_1_with_no_traceback_in_text_mode(repo: Repo) -> None:
    ready_lane(repo, "alpha")
    r = repo.lane("land", "alpha")
    assert r.rc == 1
    assert r.stdout == ""
    assert r.stderr.startswith("git-lane: refused [gate_command_unset]")
    assert "Traceback" not in r.stderr


def test_land_cli_wait_takes_an_optional_value(repo: Repo) -> None:
    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    r = subprocess.run(
        [sys.executable, "-m", "guard", "land", "alpha", "--wait", "--json"],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["code"] == "landed"


# -- robustness -----------------------------------------------------------------------------
@pytest.mark.slow
def test_interrupting_a_land_kills_its_gate_and_frees_the_lock(repo: Repo, tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) or SIGTERM on `git lane land` must not leave the gate (in its own
    session, out of reach of the terminal's signals) running in the background."""
    import signal

    for n, sig in enumerate((signal.SIGINT, signal.SIGTERM)):
        pidfile = tmp_path / f"gate-{n}.pid"
        gate(repo, f"sleep 60 & echo $! > '{pidfile}'; wait")
        key = f"lane-{n}"
        ready_lane(repo, key)
        proc = spawn_lane("land", key, "--json", cwd=repo.path)
        wait_for(
            lambda p=pidfile: p.exists() and p.read_text().strip() != "", 20, "the gate to start"
        )
        grandchild = int(pidfile.read_text())
        proc.send_signal(sig)
        proc.communicate(timeout=30)
        assert proc.returncode != 0
        wait_for(lambda g=grandchild: not pid_alive(g), 10, "the gate to die")
        assert not owner_file(repo).exists() or "pid=" not in owner_file(repo).read_text()
        assert epoch(repo) == 0
    # and the next land is not blocked
    gate(repo, "true")
    assert repo.jlane("land", "lane-0").code == "landed"


def test_a_gate_that_closes_its_output_early_does_not_spin(repo: Repo) -> None:
    gate(repo, "exec >&- 2>&-; sleep 1")
    ready_lane(repo, "alpha")
    import resource

    def cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    t0 = time.monotonic()
    c0 = cpu()
    r = repo.jlane("land", "alpha")
    assert r.code == "landed", r.stdout
    assert time.monotonic() - t0 >= 1.0
    assert cpu() - c0 < 0.8  # the land process idles while its gate sleeps: no busy loop


def test_main_moved_by_hand_during_the_gate(repo: Repo) -> None:
    """Main moved under the land (hooks not installed): the compare-and-swap refuses, main
    keeps the hand-made value, and no landing record is left to block every later land."""
    path = ready_lane(repo, "alpha")
    base = repo.sha()
    moved = git(
        repo.path, "commit-tree", "-p", str(base), "-m", "by hand", f"{base}^{{tree}}"
    ).stdout.strip()
    gate(repo, f"git update-ref refs/heads/main {moved}")
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "main_update_failed", r.stdout
    assert repo.sha() == moved
    assert not (repo.state_dir / "landing.json").exists()
    assert not owner_file(repo).exists()
    assert epoch(repo) == 0
    rec = repo.jlane("reconcile")
    assert rec.rc == 0, rec.stdout
    repo.config("gate", "off")
    assert repo.jlane("sync", "alpha").json["state"] == "fresh"
    assert repo.jlane("land", "alpha").code == "landed"
    assert is_ancestor(repo.path, moved, head(path))


def test_hub_edit_made_during_the_gate_that_overlaps_is_refused(repo: Repo, tmp_path: Path) -> None:
    """G6 is re-checked after the gate: an overlapping hub edit made while the gate ran
    would otherwise make the hub update fail after main moved."""
    repo.commit(repo.path, "a.txt", "base\n")
    ready_lane(repo, "alpha", {"a.txt": "lane\n"})
    hub_file = repo.path / "a.txt"
    gate(repo, f"echo 'hub edit' > '{hub_file}'")
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "hub_dirty", r.stdout
    assert hub_file.read_text() == "hub edit\n"
    assert epoch(repo) == 0


def test_hub_overlap_edge_paths(repo: Repo) -> None:
    """G6 looks only at the changed paths; the shapes that hides must still be seen."""
    repo.config("gate", "off")
    repo.commit(repo.path, "thing", "a file that becomes a directory\n")
    repo.commit(repo.path, "gone.txt", "deleted by the lane\n")
    path = repo.create("alpha")
    git(path, "rm", "-q", "thing", "gone.txt")
    (path / "thing").mkdir()
    (path / "thing" / "inner.txt").write_text("inner\n")
    (path / "newdir").mkdir()
    (path / "newdir" / "x.txt").write_text("x\n")
    (path / "weird [x]*.txt").write_text("glob characters\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "shapes")

    # an untracked file where the land needs a directory
    (repo.path / "newdir").write_text("hub's own file\n")
    assert refused(repo, "hub_dirty", "alpha")["details"]["paths"] == ["newdir"]  # type: ignore[index]
    (repo.path / "newdir").unlink()
    # an edit to a file the land deletes, or turns into a directory
    (repo.path / "gone.txt").write_text("hub edit\n")
    assert refused(repo, "hub_dirty", "alpha")["details"]["paths"] == ["gone.txt"]  # type: ignore[index]
    git(repo.path, "checkout", "--", "gone.txt")
    (repo.path / "thing").write_text("hub edit\n")
    assert refused(repo, "hub_dirty", "alpha")["details"]["paths"] == ["thing"]  # type: ignore[index]
    git(repo.path, "checkout", "--", "thing")
    # glob characters are literal: "weird a.txt" is not "weird [x]*.txt"
    (repo.path / "weird [x]*.txt").write_text("hub's\n")
    refused(repo, "hub_dirty", "alpha")
    (repo.path / "weird [x]*.txt").unlink()
    (repo.path / "weird a.txt").write_text("unrelated\n")
    (repo.path / "weird x.txt").write_text("unrelated\n")

    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert status_porcelain(repo.path) == '?? "weird a.txt"\n?? "weird x.txt"\n'
    assert (repo.path / "thing" / "inner.txt").read_text() == "inner\n"
    assert not (repo.path / "gone.txt").exists()


def test_land_never_overwrites_an_ignored_file_of_the_hub(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """G6 and the hub's ignored files: `read-tree -m -u`, which carries the hub to the tip
    after main moved, overwrites an ignored file without a word where the tip tracks one
    (the owner's secret.env, never committed, no other copy, replaced by the lane's). So
    before main moves, each shape is refused (ignored_in_the_way, lanes' code for the same
    case): an ignored file at a path the tip adds, an ignored directory where it adds a
    file (git would delete it), an ignored file where it needs a directory. Its `next`,
    run as printed, keeps them under kept/ and lands (red team 13G)."""
    repo.commit(repo.path, ".gitignore", "*.env\ncache\nnotes\nbuild/\n")
    assert repo.lane("install").rc == 0
    repo.config("gate", "off")
    path = repo.create("beta")
    for name in ("secret.env", "cache", "notes/x.txt", "build/README"):
        (path / name).parent.mkdir(exist_ok=True)
        (path / name).write_text(f"lane's {name}\n")
        git(path, "add", "-f", name)
    git(path, "commit", "-q", "-m", "track what the hub ignores")
    hub = repo.path
    mine = {"secret.env": "OWNER_TOKEN=do-not-lose\n", "cache/data": "cached\n", "notes": "n\n"}
    for name, text in mine.items():
        (hub / name).parent.mkdir(exist_ok=True)
        (hub / name).write_text(text)
    (hub / "build").mkdir()
    (hub / "build" / "out.o").write_text("unrelated: the lane adds build/README only\n")
    (hub / "unrelated.env").write_text("never looked at\n")

    j = refused(repo, "ignored_in_the_way", "beta")
    assert j["details"]["paths"] == ["cache", "secret.env", "notes"], j  # type: ignore[index]
    assert (hub / "secret.env").read_text() == mine["secret.env"]
    for cmd in j["next"]:  # type: ignore[attr-defined]
        res = subprocess.run(cmd, shell=True, cwd=hub, text=True, capture_output=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert repo.sha() == head(path)  # landed by the last `next`
    assert (hub / "secret.env").read_text() == "lane's secret.env\n"
    kept = {
        str(f.relative_to(d)): f.read_text()
        for d in (repo.state_dir / "kept").iterdir()
        for f in d.rglob("*")
        if f.is_file()
    }
    assert kept == mine, kept
    assert (hub / "build" / "out.o").exists() and (hub / "unrelated.env").exists()
    assert status_porcelain(hub) == ""


def test_an_ignored_hub_file_made_during_the_gate_is_refused(repo: Repo) -> None:
    """G6's re-check after the gate covers the hub's ignored files too."""
    repo.commit(repo.path, ".gitignore", "secret.env\n")
    path = repo.create("alpha")
    (path / "secret.env").write_text("lane\n")
    git(path, "add", "-f", "secret.env")
    git(path, "commit", "-q", "-m", "track it")
    secret = repo.path / "secret.env"
    gate(repo, f"echo owner > '{secret}'")
    j = refused(repo, "ignored_in_the_way", "alpha")
    assert j["details"]["paths"] == ["secret.env"]  # type: ignore[index]
    assert secret.read_text() == "owner\n"
    assert epoch(repo) == 0


def test_hub_overlap_with_many_changed_paths(repo: Repo) -> None:
    repo.config("gate", "off")
    path = repo.create("alpha")
    for i in range(1100):
        (path / f"f{i:04d}.txt").write_text(f"{i}\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "many")
    (repo.path / "f1099.txt").write_text("hub's\n")
    assert refused(repo, "hub_dirty", "alpha")["details"]["paths"] == ["f1099.txt"]  # type: ignore[index]
    (repo.path / "f1099.txt").unlink()
    (repo.path / "mine.txt").write_text("unrelated\n")
    assert repo.jlane("land", "alpha").code == "landed"
    assert status_porcelain(repo.path) == "?? mine.txt\n"


def test_land_refuses_a_tip_that_names_a_path_outside_the_lane(hub: Repo) -> None:
    """G3: a tip whose tree names `../dotdo` (the owner's git committed a hand-patched
    index with hooks off; fsck keeps it out of a sandboxed lane's import) is refused
    lane_index_unsafe with a next that runs, main unmoved; it used to crash
    internal_error on `git status -- ../dotdo` in the hub (red team 13I)."""
    import hashlib

    alpha = hub.create("alpha")
    (alpha / "dotdotxx").write_text("x\n")
    git(alpha, "add", "dotdotxx")
    index = Path(
        git(alpha, "rev-parse", "--path-format=absolute", "--git-path", "index").stdout.strip()
    )
    data = index.read_bytes()[:-20].replace(b"dotdotxx\0", b"../dotdo\0")
    index.write_bytes(data + hashlib.sha1(data).digest())
    (alpha / "dotdotxx").unlink()
    git(alpha, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "dotdot")
    (alpha.parent / "dotdo").write_text("x\n")  # where git reads it: the lane is clean (G2)
    main = hub.sha()
    land = hub.jlane("land", "alpha")
    assert land.rc == 1 and land.code == "lane_index_unsafe", land.stdout + land.stderr
    assert land.json["details"]["paths"] == ["../dotdo"]
    assert hub.sha() == main
    for cmd in land.json["next"]:
        done = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert done.returncode == 0 and "dotdo" in done.stdout, (cmd, done.stderr)


@pytest.mark.parametrize(
    "name",
    ["../x", "a/../x", "/etc/x", "a//x", "./x", "a/", ".git/hooks/x", "a/.GIT/x", ".git./x",
     ".git :x/y", "git~1/config", ".g\u200cit/x", ""],
)  # fmt: skip
def test_names_git_refuses_as_a_path_are_unsafe_index_entries(name: str) -> None:
    from guard import git as g

    assert g.unsafe_entry_name(name)


@pytest.mark.parametrize("name", ["x", "a/b.txt", "...", ".gitignore", "a/.github/x", "a\\..\\x"])
def test_ordinary_names_are_safe_index_entries(name: str) -> None:
    from guard import git as g

    assert not g.unsafe_entry_name(name)


def test_build_output_next_never_appends_through_a_link_the_lane_put_at_gitignore(
    repo: Repo, tmp_path: Path
) -> None:
    """lane_changed_during_gate for the gate's new files: the next appended the patterns
    with `printf ... >> LANE/.gitignore`. A process of the lane that made `.gitignore` a
    link to a file of the owner's between the print and the run had the owner's shell
    append to that file. The next is `git lane repair KEY --ignore ...` (read O_NOFOLLOW,
    replaced through a descriptor on the lane's root): refused, the owner's file as it was."""
    gate(repo, "touch .coverage")
    path = ready_lane(repo, "alpha", {"pkg/m.py": "x = 1\n"})
    j = refused(repo, "lane_changed_during_gate", "alpha")
    next_ = j["next"]
    assert isinstance(next_, list) and not any(">" in c for c in next_), next_
    victim = tmp_path / "owner-rc"
    victim.write_text("the owner's own\n")
    (path / ".gitignore").symlink_to(victim)  # the lane, before the owner runs the next
    subprocess.run(" && ".join(next_), shell=True, cwd=repo.path, capture_output=True)
    assert victim.read_text() == "the owner's own\n"
