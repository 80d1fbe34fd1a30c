"""Reads of files a lane's processes write (its worktree, its admin dir), made by the engine
outside any sandbox, are bounded and never block (red team 15B/15C): the G9 conflict-marker
scan streams a conflicted file in chunks (policy.MarkerScan) and refuses
conflict_file_unreadable for what it cannot read as a regular file; the rebase-state files
are read at most to their bound (sync.STATE_LINE_MAX, STATE_LIST_MAX); restore-main's copy
of a hard-linked ref and release's compare of an ignored copy read through fds checked
against the lstat, in chunks.

Whatever could take memory runs in a child under RLIMIT_AS (the unfixed read of a sparse
3 GB file fails there with a MemoryError, never on the machine), with a timeout (a hang
fails the test)."""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import Repo
from test_sync import _admin, _stopped_sync

from guard import policy

GIB3 = 3 << 30
MEM = 768 << 20  # the child's address space: far less than the 3 GB a whole read takes
BLOCK = b"<<<<<<< ours\nbeta\n=======\nalpha\n>>>>>>> theirs\n"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM, MEM))


def _run(
    argv: Sequence[str], cwd: Path | str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=_limited,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv} hung")


def _glane(hub: Repo, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    res = _run([sys.executable, "-m", "guard", *args, "--json"], hub.path)
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    return res, json.loads(res.stdout)


def _sparse(p: Path, head: bytes = b"", size: int = GIB3) -> None:
    with open(p, "wb") as f:
        f.write(head)
        f.truncate(size)


# -- the scan itself: MarkerScan, chunk by chunk, against the per-line regexes ------------


def _by_lines(data: bytes, size: int) -> list[int]:
    """conflict_blocks as it was (every line split whole, then the four regexes): the
    oracle a streaming scan must agree with."""
    _open, _base, _mid, _close = policy.marker_res(size)
    found: list[int] = []
    state = start = 0
    for i, raw in enumerate(data.split(b"\n"), 1):
        line = raw.rstrip(b"\r")
        if _open.match(line):
            state, start = 1, i
        elif state in (1, 2) and _base.match(line):
            state = 2
        elif state in (1, 2) and _mid.match(line):
            state = 3
        elif state == 3 and _close.match(line):
            found.append(start)
            state = 0
    return found


def _fed(data: bytes, size: int, chunk: int) -> list[int]:
    scan = policy.MarkerScan(size)
    for at in range(0, len(data), chunk):
        scan.feed(data[at : at + chunk])
    return scan.close()


CASES = [
    (b"a\n" + BLOCK + b"b\n", 7),
    (BLOCK.replace(b"\n", b"\r\n"), 7),
    (b"<<<<<<<\n|||||||\n=======\r\r\n>>>>>>>\r\n", 7),
    (b"<<<<<<<< x\n=======\n>>>>>>> y\n", 7),  # eight: no opener
    (b"<<<<<<< x\n======= \n>>>>>>> y\n", 7),  # a mid with a space: none
    (b"<<<<<<< x\n=======\n>>>>>>>x\n>>>>>>> y", 7),  # no newline at the end
    (b"<<<<<<<<<< a\nx\n==========\ny\n>>>>>>>>>> b\n" + BLOCK, 10),
    (b"x" * 5000 + b"\n<<<<<<< a" + b"y" * 5000 + b"\n=======\n>>>>>>>\n", 7),
    (b"=======\nTitle\n=======\n", 7),  # setext underlines: no block
    (b"<<<<<<< a\n<<<<<<< b\n=======\n>>>>>>> c\n", 7),  # the second opener counts
]


@pytest.mark.parametrize("data,size", CASES, ids=[str(i) for i in range(len(CASES))])
def test_marker_scan_finds_a_marker_line_split_at_every_chunk_boundary(
    data: bytes, size: int
) -> None:
    """Fed in chunks of every size from one byte up (so each marker line is cut at each of
    its bytes, its CRs and its newline too), MarkerScan answers what the whole-file
    regexes answer, custom conflict-marker-size included; conflict_blocks is MarkerScan."""
    want = _by_lines(data, size)
    assert policy.conflict_blocks(data, size) == want
    for chunk in range(1, 64):
        assert _fed(data, size, chunk) == want, chunk


def test_marker_scan_agrees_with_the_line_regexes_on_random_text() -> None:
    rnd = random.Random(15)
    alphabet = [b"<", b"=", b">", b"|", b" ", b"\r", b"\n", b"x", b"\0"]
    for _ in range(3000):
        size = rnd.choice([1, 2, 3, 7])
        data = b"".join(
            rnd.choice(alphabet) * rnd.choice([1, size, size, size + 1, rnd.randint(1, 12)])
            for _ in range(rnd.randint(0, 40))
        )
        want = _by_lines(data, size)
        assert _fed(data, size, rnd.randint(1, 16)) == want, (data, size)


def test_marker_scan_of_a_hole_is_what_reading_its_zeros_gives() -> None:
    for head in (b"<<<<<<< a\nx\n=======\ny\n>>>>>>> b", b"<<<<<<<", b"======="):
        for n in (0, 1, 5, 100):
            scan = policy.MarkerScan()
            scan.feed(head)
            scan.feed_zeros(n)
            scan.feed(b"\n=======\n>>>>>>>\n")
            assert scan.close() == _by_lines(head + bytes(n) + b"\n=======\n>>>>>>>\n", 7)


def test_marker_scan_keeps_at_most_keep_blocks_and_counts_the_rest() -> None:
    scan = policy.MarkerScan(keep=2)
    scan.feed(BLOCK * 5)
    assert scan.close() == [1, 6] and scan.more == 3


def test_scan_markers_reads_a_file_in_chunks_of_scan_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file scan itself, with a 5-byte chunk: a block cut at every place is found,
    holes included; a FIFO, a link, a directory and a missing file are told apart."""
    from guard.commands import sync

    monkeypatch.setattr(sync, "SCAN_CHUNK", 5)
    data = b"x\n" * 7 + BLOCK
    (tmp_path / "f").write_bytes(data)
    assert sync.scan_markers(str(tmp_path), "f") == [8]
    _sparse(tmp_path / "g", BLOCK, 1 << 20)
    assert sync.scan_markers(str(tmp_path), "g") == [1]
    (tmp_path / "d").mkdir()
    os.symlink("f", tmp_path / "l")
    assert sync.scan_markers(str(tmp_path), "d") is None  # a submodule, a nested repository
    assert sync.scan_markers(str(tmp_path), "l") is None  # git stages the link itself
    assert sync.scan_markers(str(tmp_path), "gone") is None
    os.mkfifo(tmp_path / "p")
    with pytest.raises(OSError):
        sync.scan_markers(str(tmp_path), "p")
    os.symlink("d", tmp_path / "ld")
    (tmp_path / "d" / "x").write_bytes(BLOCK)
    with pytest.raises(OSError):  # a directory on the way that is a link: never followed
        sync.scan_markers(str(tmp_path), "ld/x")


# -- G9 through the CLI -------------------------------------------------------------------


def test_continue_scans_a_sparse_3g_conflicted_file_in_bounded_memory(hub: Repo) -> None:
    """A conflicted file made 3 GB (`truncate -s 3G`, no disk) with its conflict block at the
    top: `git lane continue` read it whole (MemoryError, a traceback); it streams it now,
    under a 768 MiB address space, and finds the block."""
    beta, _rm = _stopped_sync(hub)
    _sparse(beta / "a.txt", BLOCK)
    res, out = _glane(hub, "continue", "beta")
    assert res.returncode == 1 and out["code"] == "conflict_markers_present", res.stdout[-2000:]
    assert out["details"]["markers"] == ["a.txt:1"]  # type: ignore[index]


def test_a_fifo_at_a_conflicted_path_refuses_conflict_file_unreadable(hub: Repo) -> None:
    """A FIFO where the conflicted file was: the scan skipped it (`not is_file()`), so
    continue staged what it could not check. Now conflict_file_unreadable, naming it, and
    the next (once the file is a regular one again) carries the sync on."""
    beta, _rm = _stopped_sync(hub)
    (beta / "a.txt").unlink()
    os.mkfifo(beta / "a.txt")
    res, out = _glane(hub, "continue", "beta")
    assert res.returncode == 1 and out["code"] == "conflict_file_unreadable", res.stdout[-2000:]
    assert out["details"]["file"] == "a.txt"  # type: ignore[index]
    assert out["next"] == ["git lane continue beta"]
    (beta / "a.txt").unlink()
    (beta / "a.txt").write_text("resolved\n")
    for cmd in out["next"]:  # type: ignore[attr-defined]
        done = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    assert (beta / "a.txt").read_text() == "resolved\n"


def test_an_unreadable_conflicted_file_refuses_instead_of_passing(hub: Repo) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a file whatever its mode")
    beta, _rm = _stopped_sync(hub)
    (beta / "a.txt").write_bytes(BLOCK)
    (beta / "a.txt").chmod(0)
    try:
        res, out = _glane(hub, "continue", "beta")
    finally:
        (beta / "a.txt").chmod(0o644)
    assert res.returncode == 1 and out["code"] == "conflict_file_unreadable", res.stdout[-2000:]


# -- the rebase state ---------------------------------------------------------------------


def test_a_3g_rebase_todo_is_never_read_whole(hub: Repo) -> None:
    """git-rebase-todo, which the first step's oversize check does not hold (git reads it
    in that lane only), made 3 GB: continue read it whole; now at most STATE_LIST_MAX
    bytes, and refused rebase_todo_untrusted."""
    _beta, rm = _stopped_sync(hub)
    _sparse(rm / "git-rebase-todo", b"pick 0000000000000000000000000000000000000000 x\n")
    res, out = _glane(hub, "continue", "beta")
    assert res.returncode == 1 and out["code"] == "rebase_todo_untrusted", res.stdout[-2000:]


def test_an_oversized_head_name_answers_a_code(hub: Repo) -> None:
    """rebase-merge/head-name made 3 GB: through the CLI the first step moves it into
    kept/ (git_file_oversized's bound) and continue refuses rebase_state_untrusted; read
    by the engine directly (grown after that first step), it is read to REF_MAX bytes at
    most and judged untrusted, in a 768 MiB address space."""
    beta, rm = _stopped_sync(hub)
    _sparse(rm / "head-name", b"refs/heads/lane/beta\n")
    script = textwrap.dedent(
        f"""
        from guard.repo import Repo
        from guard.commands import sync
        repo = Repo.discover({str(hub.path)!r})
        print(sync.rebase_state_doubt(repo, {str(beta)!r}, "lane/beta"))
        """
    )
    res = _run([sys.executable, "-c", script], hub.path)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "head-name" in res.stdout or "too large" in res.stdout, res.stdout
    res, out = _glane(hub, "continue", "beta")
    assert res.returncode == 1, res.stdout[-2000:]
    assert out["code"] in ("rebase_state_untrusted", "git_file_oversized"), res.stdout[-2000:]
    assert rm == _admin(beta) / "rebase-merge"


# -- restore-main's copy, release's compare -------------------------------------------------


def test_restore_mains_copy_of_a_linked_ref_reads_at_most_ref_max(hub: Repo) -> None:
    """own_file gives a hard-linked ref a file of its own by copying it: a 3 GB one was read
    whole; now the copy is through an fd checked against the lstat, at most REF_MAX bytes:
    refused main_update_failed, nothing read, nothing changed."""
    d = hub.path / ".git" / "refs" / "git-lane"
    d.mkdir(parents=True, exist_ok=True)
    _sparse(d / "big")
    os.link(d / "big", d / "big2")
    script = textwrap.dedent(
        f"""
        from guard.errors import Refusal
        from guard.repo import Repo
        from guard.commands import restore_main
        try:
            restore_main.own_file(Repo.discover({str(hub.path)!r}), "refs/git-lane/big")
        except Refusal as r:
            print(r.code)
        """
    )
    res = _run([sys.executable, "-c", script], hub.path)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert res.stdout.strip() == "main_update_failed", res.stdout
    assert os.stat(d / "big").st_nlink == 2 and not (d / "big.lock").exists()


def test_restore_mains_copy_keeps_a_ref_and_gives_it_its_own_inode(hub: Repo) -> None:
    from guard.commands import restore_main
    from guard.repo import Repo as GRepo

    d = hub.path / ".git" / "refs" / "git-lane"
    d.mkdir(parents=True, exist_ok=True)
    sha = hub.sha("HEAD")
    (d / "small").write_text(sha + "\n")
    os.link(d / "small", d / "other")
    restore_main.own_file(GRepo.discover(str(hub.path)), "refs/git-lane/small")
    assert (d / "small").read_text() == sha + "\n"
    assert os.stat(d / "small").st_nlink == 1 and os.stat(d / "other").st_nlink == 1


SWAP = """
import os, sys
from guard import include
hub, lane, decoy = sys.argv[1:4]
real_lstat, real_stat = os.lstat, os.stat
def lie(p, *a, dir_fd=None, follow_symlinks=True):
    # the lstat of the lane's `x` as it was before the swap: a regular file like the hub's
    if os.path.basename(os.fspath(p)) == "x" and (dir_fd is not None or lane in os.fspath(p)):
        st = real_stat(p, dir_fd=dir_fd, follow_symlinks=False)
        if st.st_ino != real_stat(os.path.join(hub, "x")).st_ino:
            return real_stat(decoy)
    return real_stat(p, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
os.lstat = lambda p, dir_fd=None: lie(p, dir_fd=dir_fd, follow_symlinks=False)
os.stat = lie
print(include.unchanged_copy(hub, lane, "x"))
"""


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_releases_compare_never_waits_on_nor_follows_what_is_swapped_in(
    tmp_path: Path, kind: str
) -> None:
    """The lane's ignored copy `x` is lstat'ed as a regular file like the hub's, then
    swapped (what the child's os.stat/os.lstat report stands for that moment): for a
    FIFO, filecmp's open by path waited for a writer for ever; for a link to the hub's
    own file, it read through it and called the copy unchanged (release then deletes
    without asking). Both are different now (release asks), at once."""
    hub, lane_dir = tmp_path / "hub", tmp_path / "lane"
    hub.mkdir()
    lane_dir.mkdir()
    (hub / "x").write_bytes(b"same\n")
    decoy = tmp_path / "decoy"
    decoy.write_bytes(b"same\n")
    if kind == "fifo":
        os.mkfifo(lane_dir / "x")
    else:
        os.symlink(hub / "x", lane_dir / "x")
    res = _run(
        [sys.executable, "-c", SWAP, str(hub), str(lane_dir), str(decoy)], tmp_path, timeout=30
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "False", res.stdout


def test_releases_compare_still_finds_an_unchanged_tree(tmp_path: Path) -> None:
    from guard import include

    for root in (tmp_path / "hub", tmp_path / "lane"):
        (root / "d" / "e").mkdir(parents=True)
        (root / "d" / "e" / "f").write_bytes(b"x" * 3_000_000)
        os.symlink("e/f", root / "d" / "l")
    assert include.unchanged_copy(str(tmp_path / "hub"), str(tmp_path / "lane"), "d/")
    (tmp_path / "lane" / "d" / "e" / "f").write_bytes(b"x" * 2_999_999 + b"y")
    assert not include.unchanged_copy(str(tmp_path / "hub"), str(tmp_path / "lane"), "d/")
