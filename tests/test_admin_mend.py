"""Reconcile's mend of worktrees' admin dirs (recovery.mend_admin) and what git.admin_blocks
names: a sandboxed lane may write its admin dir; the owner's reconcile must neither run a
program of its choosing nor stop at a directory or a FIFO where git reads a file (red
team 13O)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo


def _admin(lane_path: Path) -> Path:
    return Path((lane_path / ".git").read_text().split(":", 1)[1].strip())


def test_reconcile_mend_runs_read_tree_in_a_repository_the_lane_named_by_commondir(
    hub: Repo, tmp_path: Path
) -> None:
    """A sandboxed CMD (which may write its admin dir: commondir, index) rewrites
    `<admin>/commondir` to a bare repository it made in the lane (a partial clone whose
    promisor remote's uploadpack is PROG, its lane/alpha a commit whose tree is missing)
    and makes `<admin>/index` a link. `git lane reconcile`'s first step, mend_admin,
    unlinks the link and runs `git --git-dir=ADMIN read-tree HEAD` with cwd the common
    dir: no pinned lane, so git follows the lane's commondir, reads that repository's
    config and lazily fetches the missing tree: PROG runs as the owner, unconfined."""
    lane_path = hub.create("alpha")
    admin = _admin(lane_path)
    mark = tmp_path / "ran"
    prog = lane_path / "prog.sh"
    prog.write_text(f'#!/bin/sh\necho ran >> "{mark}"\nexit 1\n')
    prog.chmod(0o755)
    evil = lane_path / "evil.git"
    subprocess.run(["git", "init", "-q", "--bare", str(evil)], check=True)
    body = "tree " + "1" * 40 + "\nauthor a <a@a> 1 +0000\ncommitter a <a@a> 1 +0000\n\nx\n"
    c = subprocess.run(
        ["git", "-C", str(evil), "hash-object", "-t", "commit", "-w", "--stdin", "--literally"],
        input=body,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for args in (
        ["update-ref", "refs/heads/lane/alpha", c],
        ["config", "core.repositoryformatversion", "1"],
        ["config", "extensions.partialClone", "origin"],
        ["config", "remote.origin.url", str(hub.path)],
        ["config", "remote.origin.promisor", "true"],
        ["config", "remote.origin.uploadpack", str(prog)],
    ):
        subprocess.run(["git", "-C", str(evil), *args], check=True)
    (admin / "commondir").write_text(f"{evil}\n")
    (admin / "index").unlink()
    (admin / "index").symlink_to("/nonexistent-index")
    r = hub.lane("reconcile")
    assert not mark.exists(), ("PROG ran as the owner", r.rc, r.stdout, r.stderr)


@pytest.mark.parametrize("name", ["commondir", "locked"])
def test_a_directory_where_git_reads_an_admin_file_is_named_and_mended(
    hub: Repo, name: str
) -> None:
    """A sandboxed CMD makes `<admin>/commondir` (or `<admin>/locked`) a directory: git
    fails every `worktree list` ("failed to read ...: Is a directory"), and admin_blocks
    never reports a directory at the top of an admin dir (only links, specials and deep
    trees), so status, and reconcile (admin_unreadable's own fix) too, end in exit 3
    internal_error (GitError) for ever. Expected: a coded refusal whose next (reconcile)
    moves the directory into kept/ and puts commondir back."""
    lane_path = hub.create("alpha")
    p = _admin(lane_path) / name
    if p.exists():
        p.unlink()
    p.mkdir()
    (p / "x").write_text("x\n")
    env = {"GITLANE_TEST_LANE_READ_TIMEOUT": "3"}
    st = hub.lane("status", env=env)
    assert st.rc != 3 and "internal error" not in st.stderr, (st.rc, st.stderr)
    rc = hub.lane("reconcile", env=env)
    assert rc.rc == 0, (rc.rc, rc.stdout, rc.stderr)
    again = hub.lane("status", env=env)
    assert again.rc == 0, (again.rc, again.stderr)


def test_a_fifo_at_a_lanes_sparse_checkout_file_hangs_no_owner_command(hub: Repo) -> None:
    """`info/sparse-checkout` is per worktree (git's path.c: `<admin>/info/sparse-
    checkout`), and git opens it in every command that reads the index when the owner
    uses sparse checkout (core.sparseCheckout=true: a legitimate state). admin_blocks
    walks only the top, refs/, logs/, rebase-*/ and sequencer/, never info/: a FIFO the
    lane puts there hangs the owner's status (sync and land too: each > 40 s; with a
    regular file there all finish at once). Expected: named (admin_unreadable) and
    mended by reconcile like any FIFO in the admin dir."""
    import os
    import sys

    lane_path = hub.create("alpha")
    hub.commit(lane_path, "a.txt", "a\n")
    subprocess.run(
        ["git", "-C", str(hub.path), "config", "core.sparseCheckout", "true"], check=True
    )
    info = _admin(lane_path) / "info"
    info.mkdir(exist_ok=True)
    fifo = info / "sparse-checkout"
    os.mkfifo(fifo)
    env = {
        **os.environ,
        "GITLANE_TEST_LANE_READ_TIMEOUT": "3",
        "PYTHONPATH": str(Path(__file__).parents[1]),
    }
    try:
        r = subprocess.run(
            [sys.executable, "-m", "guard", "status"],
            cwd=hub.path,
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
    finally:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        fifo.unlink()
    assert not hung, "git lane status hung on <admin>/info/sparse-checkout"
    assert r.returncode != 3, r.stderr


def test_the_mend_never_writes_through_a_link_the_lane_puts_back_at_admin_index(
    hub: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sandboxed CMD (it may write its admin dir) makes `<admin>/index` a link; the
    owner's `git lane reconcile` (mend_admin) unlinks it and then, after a `git rev-parse`
    (_index_commit), runs `GIT_INDEX_FILE=<admin>/index git read-tree SHA`. The lane puts
    the link back in that window (here: just before the read-tree, as a lane looping
    `ln -s` would). git's lockfile.c resolves a symlink at the locked path before it adds
    `.lock` (lock_file without LOCK_NO_DEREF), so git creates `VICTIM.lock` next to the
    link's target and renames it over VICTIM: the owner's file outside the lane is
    replaced by an index. The fix's comment ("through its lock (O_EXCL, then a rename)")
    assumes the lock is made in the admin dir; it is made where the link points."""
    from guard import git as ggit
    from guard import recovery
    from guard.repo import Repo as GRepo

    lane_path = hub.create("alpha")
    admin = _admin(lane_path)
    victim = tmp_path / "owner-file"
    victim.write_text("the owner's file, outside every lane\n")
    (admin / "index").unlink()
    (admin / "index").symlink_to("/nonexistent-index")  # listed: a link, so unlinked

    real_run = ggit.run

    def run(
        args: list[str], *a: Any, **kw: Any
    ) -> Any:  # the lane wins the race: the link is back at read-tree
        if args and args[0] == "read-tree":
            idx = admin / "index"
            if not idx.is_symlink():
                idx.symlink_to(victim)
        return real_run(args, *a, **kw)

    monkeypatch.setattr(ggit, "run", run)
    monkeypatch.chdir(hub.path)
    changes = recovery.mend_admin(GRepo.discover(str(hub.path)))
    assert victim.read_text(errors="replace") == "the owner's file, outside every lane\n", (
        "reconcile's read-tree wrote the owner's file through the lane's link",
        changes,
        victim.read_bytes()[:12],
    )


def test_reconcile_never_writes_through_a_link_a_running_lane_keeps_at_admin_index(
    hub: Repo, tmp_path: Path
) -> None:
    """The same with a real race: a thread (the lane's CMD) keeps putting a link at
    `<admin>/index` back (ln -s in a loop) while the owner runs `git lane reconcile`.
    mend_admin unlinks the link, spends a `git rev-parse` in _index_commit, then read-tree
    follows the new link (git's lockfile resolves symlinks): the owner's file outside
    the lane is overwritten with the index."""
    lane_path = hub.create("alpha")
    admin = _admin(lane_path)
    victim = tmp_path / "owner-file"
    text = "the owner's file, outside every lane\n"
    victim.write_text(text)
    idx = admin / "index"
    idx.unlink()
    idx.symlink_to(victim)
    stop = threading.Event()

    def lane_loop() -> None:
        while not stop.is_set():
            try:
                os.symlink(victim, idx)
            except FileExistsError:
                pass
            except OSError:
                pass
            time.sleep(0.0002)

    t = threading.Thread(target=lane_loop, daemon=True)
    t.start()
    try:
        r = hub.lane("reconcile")
    finally:
        stop.set()
        t.join()
    assert victim.read_text(errors="replace") == text, (
        "reconcile overwrote the owner's file through the lane's link",
        r.rc,
        r.stdout,
        r.stderr,
        victim.read_bytes()[:12],
    )


def test_reconcile_ends_coded_when_a_running_lane_puts_a_directory_back_at_commondir(
    hub: Repo,
) -> None:
    """fb256aa: a directory at `<admin>/commondir` (ADMIN_FILES) is listed "deep", moved
    into kept/ by _mend_one, then commondir is written back with dirfd.replace (a temp
    file, fsync, rename over the name). A lane still running puts an (empty) directory
    back at commondir in that window (mkdir in a loop): rename(file, directory) fails
    EISDIR, an OSError nothing in _mend_one/mend_admin catches: reconcile, the printed
    next of admin_unreadable, ends in exit 3 (internal error) instead of a coded
    refusal."""
    lane_path = hub.create("alpha")
    admin = _admin(lane_path)
    cd = admin / "commondir"
    cd.unlink()
    cd.mkdir()
    stop = threading.Event()

    def lane_loop() -> None:
        while not stop.is_set():
            try:
                os.mkdir(cd)
            except OSError:
                pass
            time.sleep(0.0002)

    t = threading.Thread(target=lane_loop, daemon=True)
    t.start()
    try:
        r = hub.lane("reconcile")
    finally:
        stop.set()
        t.join()
    assert r.rc != 3 and "Traceback" not in r.stderr and "internal" not in r.stderr, (
        r.rc,
        r.stdout,
        r.stderr[-1500:],
    )


def test_the_mend_names_a_tree_it_cannot_move_into_kept_and_goes_on(
    hub: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deep tree is moved into kept/ by a rename; a rename that fails (EXDEV: kept/ on
    another filesystem; EACCES: an admin dir an unprivileged owner cannot write) must be
    named in the result's `failed`, the tree left where it was (nothing lost), and the
    rest of the mend go on: before, the OSError left reconcile in exit 3."""
    import errno

    from guard import git as ggit
    from guard import recovery
    from guard.repo import Repo as GRepo

    lane_path = hub.create("alpha")
    admin = _admin(lane_path)
    deep = admin / "refs" / "worktree"
    for i in range(ggit.ADMIN_DEPTH + 2):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (admin / "logs").mkdir(exist_ok=True)
    os.mkfifo(admin / "logs" / "fifo")
    real_rename = os.rename

    def rename(*a: Any, **kw: Any) -> None:
        if kw.get("src_dir_fd") is not None:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_rename(*a, **kw)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.chdir(hub.path)
    changes = recovery.mend_admin(GRepo.discover(str(hub.path)))
    assert len(changes) == 1, changes
    assert changes[0]["failed"], changes
    assert "logs/fifo" in changes[0]["removed"], changes
    assert deep.is_dir(), "the tree that could not be kept is gone"


def test_an_owner_worktree_head_with_a_nul_is_no_crash_of_the_mend(
    hub: Repo, tmp_path: Path
) -> None:
    """The owner's own worktree (plain `git worktree add`: no lane record) loses its index;
    its admin dir's HEAD holds a NUL. _index_commit handed the text to git as an argument:
    ValueError, exit 3 from reconcile. Expected: the index is not read back (no commit
    can be told) and reconcile ends without a crash."""
    wt = tmp_path / "owner-wt"
    subprocess.run(
        ["git", "-C", str(hub.path), "worktree", "add", "-q", "--detach", str(wt)], check=True
    )
    admin = _admin(wt)
    (admin / "index").unlink()
    (admin / "index").symlink_to("/nonexistent-index")
    (admin / "HEAD").write_bytes(b"ref: refs/heads/ma\0in\n")
    r = hub.lane("reconcile")
    assert r.rc != 3 and "Traceback" not in r.stderr, (r.rc, r.stderr[-1500:])
    assert not (admin / "index").is_symlink()


def test_the_mend_gives_a_directory_the_lane_made_read_only_its_write_bit_back(
    hub: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane puts a FIFO under its admin dir's refs/ and chmods the directory 0555 (no
    sandbox right covers modes): the owner's unlink there fails EACCES (for any user but
    root; simulated here, as the tests run as root). Reconcile, admin_unreadable's only
    fix, exited 3; the owner (the same user) may chmod the lane's directory back, and the
    mend does, then unlinks the FIFO."""
    import errno
    import stat as st

    from guard import recovery
    from guard.repo import Repo as GRepo

    lane_path = hub.create("alpha")
    q = _admin(lane_path) / "refs" / "worktree" / "q"
    q.mkdir(parents=True)
    os.mkfifo(q / "f")
    q.chmod(0o555)
    real_unlink = os.unlink

    def unlink(path: Any, *, dir_fd: int | None = None) -> None:
        if dir_fd is not None and not os.fstat(dir_fd).st_mode & st.S_IWUSR:
            raise PermissionError(errno.EACCES, "Permission denied")
        real_unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.chdir(hub.path)
    try:
        changes = recovery.mend_admin(GRepo.discover(str(hub.path)))
    finally:
        q.chmod(0o755)
    assert not (q / "f").exists(), changes
    assert changes and "refs/worktree/q/f" in changes[0]["removed"], changes


def test_reconcile_ends_coded_on_a_fifo_in_a_directory_it_cannot_write(hub: Repo) -> None:
    """The same with a directory no mode change opens (chattr +i, root's way to refuse
    an unlink): reconcile names it and ends with a code, never exit 3."""
    lane_path = hub.create("alpha")
    q = _admin(lane_path) / "refs" / "worktree" / "q"
    q.mkdir(parents=True)
    os.mkfifo(q / "f")
    if subprocess.run(["chattr", "+i", str(q)], capture_output=True).returncode != 0:
        pytest.skip("no chattr +i here: a directory root cannot write cannot be made")
    try:
        r = hub.jlane("reconcile")
        assert r.rc == 1 and r.code == "admin_unreadable", (r.rc, r.stdout, r.stderr[-1500:])
        assert "refs/worktree/q/f" in r.stdout, r.stdout
        # the next as printed (root here: no sudo) opens the directory and mends
        for step in r.json["next"]:
            done = subprocess.run(step, shell=True, cwd=hub.path, capture_output=True, text=True)
            assert done.returncode == 0, (step, done.stdout, done.stderr)
    finally:
        subprocess.run(["chattr", "-i", str(q)], capture_output=True)
    assert not (q / "f").exists()
    assert hub.lane("status").rc == 0


def test_a_directory_the_owner_may_not_list_hides_nothing_from_the_walk(
    hub: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane chmods its admin dir's `logs/` 0100 after putting a link at `logs/HEAD`:
    git opens `logs/HEAD` by name (search permission is enough) and appends through the
    link, but the walk could not list `logs/` and skipped the whole admin dir (red team
    13Q; for any user but root, simulated here). The directory is named (admin_unreadable)
    and reconcile moves it into kept/ whole."""
    import errno

    from guard import dirfd
    from guard import git as ggit
    from guard import recovery
    from guard.repo import Repo as GRepo

    lane_path = hub.create("alpha")
    admin = _admin(lane_path)
    logs = admin / "logs"
    logs.mkdir(exist_ok=True)
    (logs / "HEAD").unlink(missing_ok=True)
    (logs / "HEAD").symlink_to("/nonexistent-owner-file")
    real_open = os.open

    def refusing_open(path: Any, flags: int, *a: Any, **kw: Any) -> int:
        fd = kw.get("dir_fd")
        where = os.path.join(os.readlink(f"/proc/self/fd/{fd}"), path) if fd else str(path)
        if os.path.realpath(where) == os.path.realpath(logs) and logs.is_dir():
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(dirfd.os, "open", refusing_open)
    blocks = ggit.admin_blocks(hub.common_dir)
    assert [(b.rel, b.kind) for b in blocks] == [("logs", "deep")], blocks
    monkeypatch.chdir(hub.path)
    changes = recovery.mend_admin(GRepo.discover(str(hub.path)))
    assert not logs.exists() and changes and "logs" in changes[0]["kept"], changes
    monkeypatch.undo()
    assert hub.lane("status").rc == 0


def _status_in(lane_path: Path, timeout: str = "3") -> subprocess.CompletedProcess[str] | None:
    """`git lane status --json` started with its cwd in the lane, or None when it hung."""
    import sys

    env = {**os.environ, "GITLANE_TEST_LANE_READ_TIMEOUT": timeout}
    try:
        return subprocess.run(
            [sys.executable, "-m", "guard", "status", "--json"],
            cwd=lane_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        return None


def _unblock(fifo: Path) -> None:
    """Let a git blocked opening the FIFO go (EOF), so none is left behind."""
    for _ in range(20):
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            break


def test_a_fifo_at_the_lanes_admin_head_hangs_no_command_started_in_the_lane(hub: Repo) -> None:
    """A FIFO the lane puts at `<admin>/HEAD`: from the hub, every command names it
    (admin_unreadable); started in the lane, discovery's `git rev-parse` opened it and
    blocked for ever (red team 13Q, 8). It is refused before git runs, and its next, run
    as printed from the lane, mends it; status then works there again."""
    lane_path = hub.create("alpha")
    fifo = _admin(lane_path) / "HEAD"
    fifo.unlink()
    os.mkfifo(fifo)
    try:
        r = _status_in(lane_path, timeout="600")  # the refusal needs no timeout
    finally:
        _unblock(fifo)
    assert r is not None, "git lane status, started in the lane, hung on the FIFO"
    out = json.loads(r.stdout)
    assert (r.returncode, out["code"]) == (1, "admin_unreadable"), (r.stdout, r.stderr)
    assert "HEAD" in out["message"]
    for nxt in out["next"]:
        run = subprocess.run(nxt, shell=True, cwd=lane_path, capture_output=True, text=True)
        assert run.returncode == 0, (nxt, run.stdout, run.stderr)
    assert not stat.S_ISFIFO(os.lstat(fifo).st_mode)
    r = _status_in(lane_path)
    assert r is not None and r.returncode == 0, r


def test_a_fifo_git_reads_through_a_lanes_commondir_is_bounded(hub: Repo, tmp_path: Path) -> None:
    """Not every file git reads to find the repository is one we can look at first: the
    lane's commondir names a directory it made, whose `config` is a FIFO. Started in the
    lane, discovery's git is bounded (the lane read timeout) and the command refuses."""
    lane_path = hub.create("alpha")
    admin = _admin(lane_path)
    fake = lane_path / "fake"
    (fake / "refs").mkdir(parents=True)
    (fake / "objects").mkdir()
    (fake / "HEAD").write_text("ref: refs/heads/main\n")
    os.mkfifo(fake / "config")
    (admin / "commondir").write_text(str(fake) + "\n")
    try:
        r = _status_in(lane_path, timeout="3")
    finally:
        _unblock(fake / "config")
    assert r is not None, "git lane status, started in the lane, hung on the FIFO"
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["code"] in ("admin_unreadable", "lane_pointers_tampered"), (
        r.stdout,
        r.stderr,
    )
