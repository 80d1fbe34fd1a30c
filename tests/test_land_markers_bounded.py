"""G9 at the door (`git lane land`, `git lane queue`) streams what it checks: the -G
pre-filter names files (`diff --raw`, no patch text), each candidate blob streams from
`cat-file` through policy.AddedMarkerScan, and which lines the lane added is read from the
file's -U0 patch alongside (hookcheck.AddedLines), so a small, compressible blob of a
marker block and then hundreds of MB is never held whole by the owner's process. What
counts as a hit is what hookcheck.added_blocks says over the whole blob.

Whatever could take memory runs in a child under RLIMIT_AS (test_bounded_reads' way)."""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo, git

from guard import hookcheck, policy
from guard.errors import GitError

MEM = 768 << 20  # the child's address space: the whole-blob read needed several times BIG
BIG = 200 << 20
BLOCK = b"<<<<<<< ours\nmine\n=======\ntheirs\n>>>>>>> theirs\n"


def _run(
    argv: list[str], cwd: Path, mem: int = MEM, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

    try:
        return subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, preexec_fn=limited
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv} hung")


def _commit_big(lane: Path, name: str, head: bytes, filler: bytes, size: int = BIG) -> None:
    with open(lane / name, "wb") as f:
        f.write(head)
        block = filler * ((1 << 20) // len(filler))
        for _ in range(size // len(block)):
            f.write(block)
    git(lane, "add", "--", name)
    git(lane, "commit", "-q", "--no-verify", "-m", f"big {name}")


# -- the scan: AddedMarkerScan and AddedLines against the whole-blob rule -----------------


def _oracle(added: set[int]) -> hookcheck.AddedLines:
    """AddedLines over a -U0 patch made of `added`'s runs (one hunk each)."""
    runs: list[tuple[int, int]] = []
    for n in sorted(added):
        if runs and runs[-1][0] + runs[-1][1] == n:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((n, 1))
    patch = b"diff --git a/f b/f\n--- a/f\n+++ b/f\n" + b"".join(
        b"@@ -1,0 +%d,%d @@\n" % r + b"+x\n" * r[1] for r in runs
    )
    return hookcheck.AddedLines(iter([patch]))


def test_added_marker_scan_agrees_with_added_blocks_on_random_text() -> None:
    rnd = random.Random(16)
    alphabet = [b"<", b"=", b">", b"|", b" ", b"\r", b"\n", b"x"]
    for _ in range(3000):
        size = rnd.choice([1, 2, 3, 7])
        data = b"".join(
            rnd.choice(alphabet) * rnd.choice([1, size, size, size + 1, rnd.randint(1, 12)])
            for _ in range(rnd.randint(0, 60))
        )
        lines = data.count(b"\n") + 1
        added = {n for n in range(1, lines + 1) if rnd.random() < rnd.choice([0.1, 0.5, 0.9])}
        want = hookcheck.added_blocks(data, added, size)
        chunk = rnd.randint(1, 16)
        scan = policy.AddedMarkerScan(_oracle(added), size)
        for at in range(0, len(data), chunk):
            scan.feed(data[at : at + chunk])
        assert scan.close() == want, (data, size, sorted(added), chunk)


def test_added_lines_reads_hunk_headers_cut_anywhere_and_never_a_body_line() -> None:
    """A header split at every byte is still read; an added `++ x` line (shown `+++ x`)
    and an added `@@ -1 +9 @@` line are body lines, not headers."""
    patch = (
        b"diff --git a/f b/f\nindex 1..2 100644\n--- a/f\n+++ b/f\n"
        b"@@ -1,0 +2,2 @@ func\n+++ README.md\n+@@ -1 +9 @@\n"
        b"@@ -5 +7 @@\n-old\n+" + b"y" * 1000 + b"\n\\ No newline at end of file\n"
    )
    for chunk in range(1, 40):
        pieces = [patch[i : i + chunk] for i in range(0, len(patch), chunk)]
        seen = hookcheck.AddedLines(iter(pieces))
        assert [n for n in range(1, 12) if seen(n)] == [2, 3, 7], chunk


# -- G9 through the CLI -------------------------------------------------------------------


def test_land_refuses_a_block_before_200_mb_of_lines_in_bounded_memory(repo: Repo) -> None:
    """A lane commits a marker block and then 200 MB of one line repeated (a blob of a few
    hundred KB): land read the -G patch and the blob whole, several times over
    (MemoryError under 768 MiB); it streams both now and refuses with the same details.
    (The lines are 1 KB: git's own -G diff keeps a record per line in the git child,
    which a 768 MiB space cannot hold for 200 MB of 12-byte lines, old code or new.)"""
    repo.config("gate", "off")
    lane = repo.create("alpha")
    _commit_big(lane, "big.txt", b"top\n" + BLOCK, b"f" * 1023 + b"\n")
    res = _run([sys.executable, "-m", "guard", "land", "alpha", "--json"], repo.path)
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert res.returncode == 1 and out["code"] == "conflict_markers_present", res.stdout[-2000:]
    assert out["details"]["markers"] == ["big.txt:2"]
    assert out["details"]["files"] == ["big.txt"]


HITS = """
import sys
from guard.commands.land import marker_hits
from guard.repo import Repo
repo = Repo.discover(sys.argv[1])
print(marker_hits(sys.argv[2], sys.argv[3], sys.argv[4], str(repo.common_dir)))
"""


def _hits_in_child(repo: Repo, lane: Path, mem: int) -> subprocess.CompletedProcess[str]:
    main = repo.sha()
    tip = git(lane, "rev-parse", "HEAD").stdout.strip()
    assert main
    argv = [sys.executable, "-c", HITS, str(repo.path), str(lane), main, tip]
    return _run(argv, repo.path, mem)


def test_a_block_then_200_mb_of_zeros_is_binary_and_read_no_further(repo: Repo) -> None:
    """A block, then zeros: binary by content (a NUL in the first 8000 bytes), so no hit,
    and the scan stops there. In a 384 MiB space: the -G patch of the whole blob (git
    building it, then this process holding it) failed there; git's -G child now holds the
    blob once and prints its name only."""
    lane = repo.create("alpha")
    _commit_big(lane, "z.txt", BLOCK, b"\0" * 4096)
    res = _hits_in_child(repo, lane, 384 << 20)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert res.stdout.strip() == "[]"


def _line_of(data: bytes, part: bytes) -> int:
    """The line the last `part` in `data` starts on."""
    return data[: data.rindex(part)].count(b"\n") + 1


def test_a_changed_file_counts_only_blocks_with_an_added_marker_line(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file main has with a block in it, changed by the lane: the old block (its lines
    not added) does not count, the block the lane adds further down does; the blob and
    its patch read alongside, in 64-byte chunks (every header and marker cut somewhere),
    and in 1 MiB ones past a 3 MB middle."""
    from guard.commands.land import marker_hits

    old = b"a\n" + BLOCK + b"b\n" * 50
    repo.commit(repo.path, "f.txt", old.decode())
    lane = repo.create("alpha")
    middle = b"mid line\n" * (3_000_000 // 9)
    new = old.replace(b"b\n" * 50, b"b\n" * 20 + b"c\n" + b"b\n" * 29) + middle + BLOCK + b"end\n"
    (lane / "f.txt").write_bytes(new)
    git(lane, "commit", "-q", "--no-verify", "-am", "more")
    main, tip = repo.sha(), git(lane, "rev-parse", "HEAD").stdout.strip()
    assert main
    want = [f"f.txt:{_line_of(new, BLOCK)}"]
    assert marker_hits(str(lane), main, tip, str(repo.common_dir)) == want
    monkeypatch.setattr(policy, "SCAN_CHUNK", 64)
    middle = b"mid line\n" * 100
    new = old.replace(b"b\n" * 50, b"b\n" * 20 + b"c\n" + b"b\n" * 29) + middle + BLOCK + b"end\n"
    (lane / "f.txt").write_bytes(new)
    git(lane, "commit", "-q", "--no-verify", "-am", "less")
    tip = git(lane, "rev-parse", "HEAD").stdout.strip()
    want = [f"f.txt:{_line_of(new, BLOCK)}"]
    assert marker_hits(str(lane), main, tip, str(repo.common_dir)) == want


def test_an_added_line_shown_as_a_file_header_does_not_hide_a_block(repo: Repo) -> None:
    """`++ README.md` added above a block shows as `+++ README.md` in the patch: the
    whole-patch parser took it for the next file's header and gave the block's lines to
    README.md (no block there): the land went through. Hunk headers alone are read now."""
    repo.config("gate", "off")
    lane = repo.create("alpha")
    (lane / "a.txt").write_bytes(b"++ README.md\n" + BLOCK)
    git(lane, "add", "a.txt")
    git(lane, "commit", "-q", "--no-verify", "-m", "sneaky")
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "conflict_markers_present", r.stdout + r.stderr
    assert r.json["details"]["markers"] == ["a.txt:2"]


def test_a_blob_git_cannot_give_raises_never_passes(repo: Repo) -> None:
    from guard.commands import land
    from guard.git import Touched

    lane = repo.create("alpha")
    f = Touched("A", "100644", "1" * 40, "x.txt")  # no such object
    main = repo.sha()
    assert main
    with pytest.raises(GitError):
        land._blob_hits(str(lane), main, main, f, 7)


@pytest.mark.parametrize(
    "old, added, size",
    [
        # main holds an opener and a closer (no block: no separator); the lane adds only
        # the `=======` between them, which the 7-or-more `<`/`>` pre-filter never named
        (b"<<<<<<< a\nx\n>>>>>>> b\n", b"=======\n", 7),
        # a bare separator ending in CR (a CRLF file)
        (b"<<<<<<< a\r\nx\r\n>>>>>>> b\r\n", b"=======\r\n", 7),
        # a conflict-marker-size below 7 (the tip's .gitattributes give 3)
        (b"<<< a\nx\n>>> b\n", b"===\n", 3),
    ],
    ids=["separator-only", "separator-crlf", "marker-size-3"],
)
def test_a_block_made_by_adding_only_a_separator_is_refused(
    repo: Repo, old: bytes, added: bytes, size: int
) -> None:
    repo.config("gate", "off")
    if size != 7:
        repo.commit(repo.path, ".gitattributes", f"*.txt conflict-marker-size={size}\n")
    repo.commit(repo.path, "f.txt", old.decode())
    lane = repo.create("alpha")
    nl = b"\r\n" if b"\r\n" in old else b"\n"
    first, rest = old.split(nl, 1)
    (lane / "f.txt").write_bytes(first + nl + added + rest)
    git(lane, "commit", "-q", "--no-verify", "-am", "separator")
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "conflict_markers_present", r.stdout + r.stderr
    assert r.json["details"]["markers"] == ["f.txt:1"]
