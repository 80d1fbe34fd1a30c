"""Reconcile's mend of worktrees' admin dirs (recovery.mend_admin) and what git.admin_blocks
names: a sandboxed lane may write its admin dir; the owner's reconcile must neither run a
program of its choosing nor stop at a directory or a FIFO where git reads a file (red
team 13O)."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
