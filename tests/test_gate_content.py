"""The in-lane gate tests the tip's bytes (red team 16B F1): a tracked file whose bytes differ
from the tip though no lstat field moved (a MAP_SHARED write into a page already dirty)
refuses before the gate; a land a live lane process may race (the land socket's, a
queue land of a lane whose live owner marked it ready) gates in a clean worktree."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import Repo, git
from enginehelp import add_submodule, epoch, head, ready_lane, status_porcelain
from sandboxhelp import NEEDS_LANDLOCK


def gate(repo: Repo, command: str) -> None:
    repo.config("gate_command", json.dumps(command))


# -- F1: a tracked file's bytes changed through a shared mapping: no lstat field moves ---------
def _mmap_rewrite(path: Path, new: bytes) -> None:
    """What any lane process (a sandboxed CMD too: it may write its lane's files) can do:
    dirty the page of a tracked file through a MAP_SHARED mapping with the bytes it holds
    (the one write fault updates mtime/ctime), let git record that stat in the index, then
    write other bytes into the page that is already dirty and writable: no fault, so no
    time, size or inode changes, and git status (stat data first) and the engine's lstat
    both call the file unchanged."""
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        assert len(new) == size
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m[0:1] = m[0:1]  # the one write fault: file_update_time, page dirty
        time.sleep(1.2)  # the index written in a later second: the entry is not racy
        git(path.parent, "update-index", "-q", "--refresh")
        m[:] = new  # the page is dirty and writable: no fault, no timestamp
        m.close()
    finally:
        os.close(fd)


def test_f1_gate_runs_on_bytes_that_are_not_the_tip_after_a_shared_mapping_write(
    repo: Repo,
) -> None:
    """The tip's check.txt says FAIL, so a gate at the exact tip fails. The lane rewrites
    its worktree copy through a shared mapping (same size); stat unchanged, git status
    clean, the in-lane gate reads PASS and the land goes through with a tip whose gate
    fails. Must be refused (lane_dirty / lane_changed_during_gate), main unmoved."""
    gate(repo, "grep -q PASS check.txt")
    path = ready_lane(repo, "alpha", {"check.txt": "FAIL\n"})
    tip = head(path)
    st0 = os.lstat(path / "check.txt")
    _mmap_rewrite(path / "check.txt", b"PASS\n")
    st1 = os.lstat(path / "check.txt")
    assert (path / "check.txt").read_bytes() == b"PASS\n"  # what the gate will read
    assert git(path, "show", "HEAD:check.txt").stdout == "FAIL\n"  # what would land
    assert status_porcelain(path) == ""  # git status: clean
    assert st1.st_ino == st0.st_ino
    before = repo.sha()
    r = repo.jlane("land", "alpha")
    assert repo.sha() == before, ("landed a tip whose gate fails", r.stdout[-800:])
    assert r.rc == 1 and head(path) == tip and epoch(repo) == 0


MMAP_AGENT = r"""
import mmap, os, subprocess, sys, time
fd = os.open("check.txt", os.O_RDWR)
m = mmap.mmap(fd, 5, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:1] = m[0:1]
time.sleep(1.2)
subprocess.run(["git", "update-index", "-q", "--refresh"], check=True)
m[:] = b"PASS\n"
sys.exit(subprocess.run(["git", "lane", "land", "alpha"]).returncode)
"""


@NEEDS_LANDLOCK
def test_f1_sandboxed_cmd_lands_a_tip_whose_gate_fails_through_a_shared_mapping(
    hub: Repo, tmp_path: Path
) -> None:
    """The same from a sandboxed CMD (exec --sandbox, land through the socket): the
    mapping write and the index refresh are in the lane and its admin dir, both granted."""
    hub.config("worker_land", "allow")
    gate(hub, "grep -q PASS check.txt")
    lane = hub.create("alpha")
    tip = hub.commit(lane, "check.txt", "FAIL\n")
    before = hub.sha()
    agent = tmp_path / "agent.py"
    agent.write_text(MMAP_AGENT)
    res = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", sys.executable, str(agent)],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert git(lane, "show", "HEAD:check.txt").stdout == "FAIL\n"
    assert hub.sha() == before, (
        f"main moved to {tip[:12]}, whose check.txt the gate fails: " + res.stdout[-600:]
    )


def test_f1_the_refusal_names_the_path_and_its_next_lands_what_the_worktree_holds(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """The content check refuses lane_dirty with the path and says why `git status` did not
    show it; its `next`, run as written, commits the bytes the worktree holds (the lane's
    index is made to hash them again first) and lands them: the gate then passes at a tip
    that holds PASS, as the gate read it."""
    gate(repo, "grep -q PASS check.txt")
    path = ready_lane(repo, "alpha", {"check.txt": "FAIL\n"})
    _mmap_rewrite(path / "check.txt", b"PASS\n")
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.json["code"] == "lane_dirty", r.stdout
    d = r.json["details"]
    assert d["dirty_paths"] == ["check.txt"] and d["content_differs"] == ["check.txt"]
    assert r.json["next"][-1] == "git lane land alpha"
    for cmd in r.json["next"]:
        res = subprocess.run(cmd, shell=True, cwd=repo.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert git(repo.path, "show", "main:check.txt").stdout == "PASS\n"


def test_an_honest_lane_still_gates_in_the_lane(repo: Repo, tmp_path: Path) -> None:
    """No live process of the lane: the content check passes (a link and a file at the
    tip's bytes), the gate runs in the lane itself (its `pwd`), and the summary says where
    it ran."""
    out = tmp_path / "gate-pwd"
    gate(repo, f"pwd > {out}; true")
    path = ready_lane(repo, "alpha", {"ok.txt": "ok\n", "link": "x"})
    git(path, "rm", "-q", "--cached", "link")
    os.unlink(path / "link")
    os.symlink("ok.txt", path / "link")
    git(path, "add", "link")
    git(path, "commit", "-q", "-m", "a link")
    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    where = out.read_text().strip()
    assert os.path.realpath(where) == os.path.realpath(path)
    assert r.json["gate"]["worktree"] == "lane" and "why" not in r.json["gate"]


def test_a_lane_with_a_submodule_still_lands_with_its_gate_in_the_lane(
    repo: Repo, tmp_path: Path
) -> None:
    """A gitlink is never entered by the content check (G4's hidden check looks at it)."""
    add_submodule(repo, tmp_path)
    gate(repo, "true")
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n")
    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert r.json["gate"]["worktree"] == "lane"


def test_a_socket_land_gates_in_a_clean_worktree_of_the_tip(hub: Repo, tmp_path: Path) -> None:
    """A land through exec's land socket: CMD runs while the gate does, so the gate runs in
    a fresh worktree of the tip (its `pwd` is not the lane), and the result says so."""
    hub.config("worker_land", "allow")
    out = tmp_path / "gate-pwd"
    gate(hub, f"pwd > {out}; true")
    lane = hub.create("alpha")
    hub.commit(lane, "b.txt", "b\n")
    res = subprocess.run(
        ["git", "lane", "exec", "alpha", "--", "git", "lane", "land", "alpha", "--json"],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    where = out.read_text().strip()
    assert os.path.realpath(where) != os.path.realpath(lane)
    assert os.path.basename(where).startswith("git-lane-gate-")
    g = json.loads(res.stdout.strip().splitlines()[-1])["gate"]
    assert g["worktree"] == "clean" and "git lane exec" in g["why"]


def test_a_queue_land_of_a_lane_whose_live_owner_marked_it_gates_clean(
    hub: Repo, tmp_path: Path
) -> None:
    """The queue lands a lane its live exec marked ready while CMD still runs: the gate
    runs in a fresh worktree of the tip, never in the lane CMD writes."""
    out = tmp_path / "gate-pwd"
    gate(hub, f"pwd > {out}; true")
    lane = hub.create("alpha")
    hub.commit(lane, "b.txt", "b\n")
    marked, done = tmp_path / "marked", tmp_path / "done"
    script = (
        f"git lane ready alpha && : > '{marked}' || exit 3; n=0;"
        f" while [ ! -e '{done}' ] && [ $n -lt 600 ]; do n=$((n+1)); sleep 0.1; done"
    )
    p = subprocess.Popen(
        ["git", "lane", "exec", "alpha", "--", "sh", "-c", script],
        cwd=lane, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        n = 0
        while not marked.exists() and n < 600 and p.poll() is None:
            n += 1
            time.sleep(0.1)
        assert marked.exists(), p.communicate()
        q = hub.jlane("queue", "alpha")
    finally:
        done.write_text("")
        p.communicate(timeout=60)
    assert q.rc == 0 and q.json["landed"] == ["alpha"], q.stdout
    where = out.read_text().strip()
    assert os.path.realpath(where) != os.path.realpath(lane)
    g = q.json["lanes"][0]["gate"]
    assert g["worktree"] == "clean" and "owner" in g["why"]


def test_content_differs_hashes_every_file_and_names_odd_paths(repo: Repo) -> None:
    """git.content_differs compares by content alone: a file rewritten with its old mtime
    put back (the index's stat data then matches) is listed, by its exact name (a newline
    in it, bytes that are not UTF-8), and nothing else; a link at its target is not."""
    from guard import git as ggit

    odd = "new\nline \udcff.txt"
    (repo.path / odd).write_text("one\n")
    (repo.path / "same.txt").write_text("same\n")
    os.symlink("same.txt", repo.path / "ln")
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-q", "-m", "odd")
    tip = head(repo.path)
    st = os.stat(repo.path / odd)
    (repo.path / odd).write_text("two\n")
    os.utime(repo.path / odd, ns=(st.st_atime_ns, st.st_mtime_ns))
    git(repo.path, "update-index", "-q", "--refresh")
    tmp = repo.path.parent / "tmp-content"
    tmp.mkdir()
    assert ggit.content_differs(str(repo.path), tip, tmp, repo.common_dir) == ggit.Content([odd])
    assert list(tmp.iterdir()) == []  # its private index is removed after


def test_a_content_check_git_cannot_make_refuses_never_passes() -> None:
    """A git that fails to compare (or no temp dir) is lane_content_unverified, whose next
    gates in a clean worktree: never "the same"."""
    from guard import git as ggit
    from guard.commands import land as land_cmd
    from guard.errors import GitError, Refusal

    t = land_cmd.Target("alpha", "lane/alpha", "/nowhere", "0" * 40, "1" * 40)
    for err in (GitError(["git", "read-tree"], 128, "", "fatal: bad tree\n"), OSError(28, "full")):
        try:
            land_cmd.g4_content(t, err)
        except Refusal as r:
            assert r.code == "lane_content_unverified"
            assert r.next == ["git lane config set gate_worktree clean", "git lane land alpha"]
        else:
            raise AssertionError("no refusal")
    assert land_cmd.g4_content(t, ggit.Content([])) == ""  # nothing differs: no refusal
