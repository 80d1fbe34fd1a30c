"""Trees the engine removes that a lane's processes wrote (the clean gate worktree and
its admin dir, CMD's private temp and cache dirs): removed through directory fds only
(guard/dirfd.remove_tree), so no link a process still running makes mid-way is
followed, and a tree deeper than any git tree is left, never a RecursionError (red team
13X)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, git, needs_modes, owner_lane

from guard import dirfd

CONFIRM = ("--confirm", "yes-discard-lane")


def test_remove_tree_never_follows_a_link_and_takes_what_its_owner_may_not_write(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o750)
    mode = stat.S_IMODE(outside.stat().st_mode)
    (outside / "keep.txt").write_text("keep\n")
    top = tmp_path / "top"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "f").write_text("x")
    os.symlink(outside, top / "a" / "link")
    os.symlink(outside / "keep.txt", top / "a" / "b" / "flink")
    os.mkfifo(top / "a" / "fifo")
    (top / "a" / "b").chmod(0o500)  # unwritable: its owner gets the bit back
    (top / "a").chmod(0o000)  # unlistable too
    assert dirfd.remove_tree(str(top))
    assert not top.exists()
    assert (outside / "keep.txt").read_text() == "keep\n"
    assert stat.S_IMODE(outside.stat().st_mode) == mode  # its mode untouched


@needs_modes
def test_a_lane_dir_made_readable_only_never_half_removes_a_released_worktree(
    repo: Repo,
) -> None:
    """Red team 15A F2. The lane (a sandboxed one too: chmod is no Landlock right) commits
    `d/f` and `chmod 0400 d`. A non-root owner's confirmed release opened d (r is
    enough), listed it and could not look at `d/f` (no search bit): remove_tree gave no
    bits back (only a directory that would not open got them), half the worktree went
    (its `.git` among it), and the refusal worktree_remove_failed named an `rm -rf` that
    failed as written. Each directory gets its owner's u+rwx through its fd before
    anything in it is looked at."""
    lp = repo.create("beta")
    (lp / "d").mkdir()
    (lp / "d" / "f").write_text("x\n")
    git(lp, "add", "d")
    git(lp, "commit", "-qm", "d")
    (lp / "d").chmod(0o400)
    try:
        r = owner_lane("release", "beta", *CONFIRM, "--json", cwd=repo.path)
        assert (r.rc, r.code) == (0, "released"), r.stdout[-400:]
        assert not lp.exists()
    finally:
        if (lp / "d").exists():
            (lp / "d").chmod(0o755)


def test_remove_tree_leaves_a_tree_deeper_than_git_makes_without_raising(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    _deep(top, 1500)
    try:
        assert dirfd.remove_tree(str(top)) is False  # left, and said
    finally:
        subprocess.run(["rm", "-rf", str(top)], check=False)
    assert dirfd.remove_tree(str(tmp_path / "none")) is True


_RACER = r"""
import os, sys, time
where, victim_home = sys.argv[1], sys.argv[2]
ssh = os.path.join(where, "d", ".ssh")
names = os.listdir(ssh)  # the order rmtree's scandir takes them in
if names.index("authorized_keys") < 50:
    print("unlucky", flush=True)
    sys.exit(0)
first = names[0]
print("ready", flush=True)
end = time.monotonic() + 60
while os.path.lexists(os.path.join(ssh, first)):  # rmtree is not in .ssh yet
    if time.monotonic() > end:
        sys.exit(1)
# rmtree holds fds on d and .ssh and listed authorized_keys as a file: make it a
# directory (its fd unlink fails: EISDIR, onerror) and d a link to the victim's home
os.rename(os.path.join(ssh, "authorized_keys"), os.path.join(where, "parked"))
os.mkdir(os.path.join(ssh, "authorized_keys"))
os.rename(os.path.join(where, "d"), os.path.join(where, "z"))
os.symlink(victim_home, os.path.join(where, "d"))
print("swapped", flush=True)
"""


def test_the_clean_gate_worktree_removal_never_deletes_a_file_outside_it(
    repo: Repo, tmp_path: Path
) -> None:
    """gate.remove_worktree (red team 13U's fix: the clean gate worktree removed through
    fds, shutil.rmtree) hands every failure to _force_rm, which retries by PATH:
    os.chmod(dirname(path)) and os.unlink(path) follow any link on the way. A process the
    sandboxed gate left running (setsid escapes the land's killpg; it keeps the gate's
    grants, the clean worktree among them) turns a file rmtree listed into a directory
    (EISDIR: onerror) and a directory above it into a link: the owner's land unlinks the
    victim's file outside the lane (and chmods its directory)."""
    import subprocess
    import sys

    from guard import gate

    home = tmp_path / "victim home"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "authorized_keys"
    key.write_text("ssh-ed25519 AAAA owner\n")
    common = repo.common_dir
    tip = repo.sha()
    assert tip is not None
    racer = None
    with gate.clean_worktree(common, tip) as where:
        # what the gate wrote (its worktree is its to write, links included)
        ssh = Path(where) / "d" / ".ssh"
        ssh.mkdir(parents=True)
        (ssh / "authorized_keys").write_text("planted\n")
        for i in range(20000):
            (ssh / f"f{i}").write_bytes(b"")
        # ... and the process it left running, outside its killed group
        racer = subprocess.Popen(
            [sys.executable, "-c", _RACER, where, str(home)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert racer.stdout is not None
        first = racer.stdout.readline().strip()
        if first == "unlucky":  # the name rmtree takes among the first: no window to show
            racer.wait()
            import pytest

            pytest.skip("authorized_keys listed too early")
    # the with block's end: gate.remove_worktree(common, where, admin)
    assert racer is not None
    out, _ = racer.communicate(timeout=60)
    assert "swapped" in out, out
    assert key.exists(), (
        "the land's removal of the clean gate worktree unlinked "
        f"{key}, outside it, through a link the gate's process made"
    )


def _deep(top: Path, depth: int) -> None:
    """A chain of `depth` directories under `top`, made through fds (as CMD can)."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)


def test_a_deep_tree_in_the_lanes_private_cache_never_makes_release_exit_3(repo: Repo) -> None:
    """release._drop_private_cache removes CMD's own cache dir (granted whole to CMD:
    `<cache>/git-lane-sandbox/<slug>/<key>`) with shutil.rmtree(ignore_errors=True),
    which on Python 3.11 recurses once per level: a tree deeper than the recursion limit
    raises RecursionError (no OSError: ignore_errors does not catch it) after the record
    says released: a traceback, exit 3, and the journal left behind."""
    lp = repo.create("alpha")
    slug, cache = lp.parent.name, lp.parents[3]
    assert (cache / "git-lane" / "worktrees" / slug / "alpha") == lp
    deep = cache / "git-lane-sandbox" / slug / "alpha"
    _deep(deep, 1500)  # what CMD may write there
    try:
        r = repo.jlane("release", "alpha", *CONFIRM)
    finally:  # pytest's own rmtree of its temp dirs would recurse as deep
        subprocess.run(["rm", "-rf", str(deep)], check=False)
    assert r.rc != 3 and "Traceback" not in r.stderr, (r.rc, r.stderr[-800:])
    assert (r.rc, r.code) == (0, "released"), r.stdout


def test_a_deep_tree_the_gate_leaves_in_its_clean_worktree_never_raises(repo: Repo) -> None:
    """The same shutil.rmtree recursion in gate.remove_worktree (red team 13U's fix, the
    clean gate worktree removed through fds): a sandboxed gate writes its worktree, a
    chain deeper than Python's recursion limit there raises RecursionError out of the
    land (exit 3, internal_error) instead of a refusal or a removal."""
    from guard import gate

    tip = repo.sha()
    assert tip is not None
    where = ""
    try:
        with gate.clean_worktree(repo.common_dir, tip) as where:
            _deep(Path(where) / "deep", 1500)  # what the gate may write there
    finally:  # pytest's own rmtree of its temp dirs would recurse as deep
        if where:
            subprocess.run(["rm", "-rf", where], check=False)
    assert not os.path.lexists(where)


def test_a_gate_tree_deeper_than_remove_tree_goes_is_left_never_handed_to_git_by_path(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gate.remove_worktree, when remove_tree(WHERE) was False (the gate made a chain
    deeper than dirfd.TREE_DEPTH), fell through to `git worktree remove --force --force
    WHERE`, which removes by path (as did the sweep of a killed land's leftover): a
    process the gate left running rewrote `.git`, moved a directory of many files up
    from below the depth remove_tree stops at and, while git unlinked in it, exchanged it
    with a link (renameat2 RENAME_EXCHANGE): the land deleted every file of a directory
    outside the gate worktree (red team 14A). What remove_tree leaves stays, no git runs
    on it; its admin dir goes through fds, so git lists no worktree there."""
    from guard import gate, git

    ran: list[list[str]] = []
    run = git.run

    def spy(args: list[str], *a: Any, **kw: Any) -> git.GitResult:
        ran.append([str(x) for x in args])
        return run(args, *a, **kw)

    tip = repo.sha()
    assert tip is not None
    where = ""
    try:
        with gate.clean_worktree(repo.common_dir, tip) as where:
            _deep(Path(where) / "deep", dirfd.TREE_DEPTH + 5)  # what the gate may write
            monkeypatch.setattr(git, "run", spy)
        # the with block's end: gate.remove_worktree(common, where, admin)
        by_path = [a for a in ran if "worktree" in a and ({"remove", "prune"} & set(a))]
        assert by_path == [], f"the land had git remove the gate worktree by path: {by_path}"
        assert (Path(where) / "deep").is_dir()
        assert f"worktree {where}\n" not in repo.worktrees()  # its admin dir went by fds
        monkeypatch.undo()
    finally:  # pytest's own rmtree of its temp dirs would recurse as deep
        if where:
            subprocess.run(["rm", "-rf", where], check=False)


def test_a_swept_gate_tree_that_stays_is_named_never_removed_by_path(repo: Repo) -> None:
    """The sweep of a killed land's leftover gate worktree (reconcile, the next land)
    removes it through fds like the land does: a tree deeper than dirfd.TREE_DEPTH stays
    (the sweep handed it to `git worktree remove` by path before: red team 14A), its
    admin dir goes (git lists no worktree there), and reconcile names what stays,
    `gate_worktree_left`, with the owner's `rm -rf` as its next, which works as written."""
    import tempfile

    from guard import gate

    tip = repo.sha()
    assert tip is not None
    where = tempfile.mkdtemp(prefix="git-lane-gate-", dir=tempfile.gettempdir())
    os.rmdir(where)
    gate.record(str(repo.common_dir), os.path.basename(where), where)  # as a land does
    try:
        subprocess.run(
            ["git", "-C", str(repo.path), "worktree", "add", "-q", "--detach", where, tip],
            check=True, capture_output=True,
        )  # fmt: skip
        _deep(Path(where) / "deep", dirfd.TREE_DEPTH + 5)  # what the gate wrote
        r = repo.jlane("reconcile")
        named = [c for c in r.json.get("changes", []) if c.get("path") == where]
        assert [c["action"] for c in named] == ["gate_worktree_left"], r.stdout
        assert (Path(where) / "deep").is_dir()
        assert f"worktree {where}\n" not in repo.worktrees()
        subprocess.run(named[0]["next"][0], shell=True, check=True)  # as written
        assert not os.path.lexists(where)
        r = repo.jlane("reconcile")
        assert [c for c in r.json.get("changes", []) if c.get("path") == where] == []
    finally:  # pytest's own rmtree of its temp dirs would recurse as deep
        subprocess.run(["rm", "-rf", where], check=False)
