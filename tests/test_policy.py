"""Sync policies (status `sync_required` per lane, and the pure decision table) and the
conflict-marker detector behind G9."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from conftest import Repo
from enginehelp import lane_status, ready_lane
from guard.policy import POLICIES, conflict_blocks, sync_required


# -- status, per policy ---------------------------------------------------------------------
def test_sync_required_in_status_under_each_policy(repo: Repo) -> None:
    repo.config("gate", "off")
    repo.commit(repo.path, "a.txt", "a base\n")
    repo.commit(repo.path, "dir/x.txt", "x base\n")
    ready_lane(repo, "overlapping", {"a.txt": "a lane\n"})
    ready_lane(repo, "elsewhere", {"b.txt": "b lane\n"})
    ready_lane(repo, "indir", {"dir/y.txt": "y lane\n"})
    ready_lane(repo, "lander", {"a.txt": "a landed\n", "dir/x.txt": "x landed\n"})
    assert repo.jlane("land", "lander").code == "landed"
    fresh = repo.create("fresh")  # made after the land: fresh, never sync_required
    repo.commit(fresh, "f.txt", "f\n")

    expected = {
        "on_land_mandatory": {
            "overlapping": True,
            "elsewhere": True,
            "indir": True,
            "fresh": False,
        },
        # only the lane whose own paths (since its merge-base) meet main's must sync;
        # a new file next to a changed one is no overlap
        "overlap_mandatory": {
            "overlapping": True,
            "elsewhere": False,
            "indir": False,
            "fresh": False,
        },
        "land_time_only": {
            "overlapping": False,
            "elsewhere": False,
            "indir": False,
            "fresh": False,
        },
    }
    for pol, want in expected.items():
        repo.config("sync_policy", pol)
        r = repo.jlane("status")
        assert r.rc == 0, r.stderr
        lanes = {ln["key"]: ln for ln in r.json["lanes"]}
        assert {k: lanes[k]["sync_required"] for k in want} == want, pol
        # stale under every policy; only what it demands differs
        assert {k: lanes[k]["fresh"] for k in want} == {k: k == "fresh" for k in want}


def test_overlap_counts_every_land_since_the_merge_base(repo: Repo) -> None:
    repo.config("gate", "off")
    repo.config("sync_policy", "overlap_mandatory")
    ready_lane(repo, "slow", {"a.txt": "slow\n"})
    ready_lane(repo, "first", {"a.txt": "first\n"})
    assert repo.jlane("land", "first").code == "landed"
    second = ready_lane(repo, "second", {"z.txt": "z\n"})
    assert second.exists()
    assert repo.jlane("land", "second").code == "landed"
    # the newest land (z.txt) does not overlap, the earlier one (a.txt) does
    assert lane_status(repo, "slow")["sync_required"] is True
    assert repo.jlane("sync", "slow").code == "sync_conflicts"


def test_land_is_refused_stale_under_every_policy(repo: Repo) -> None:
    """Whatever the policy says about writing, G3 alone decides at land time."""
    repo.config("gate", "off")
    for n, pol in enumerate(POLICIES):
        repo.config("sync_policy", pol)
        ready_lane(repo, f"l{n}", {f"l{n}.txt": "x\n"})
        repo.commit(repo.path, f"main{n}.txt", "m\n")
        r = repo.jlane("land", f"l{n}")
        assert r.code == "stale_lane", (pol, r.stdout)


# -- the decision table ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "fresh", "lane_paths", "main_paths", "want"),
    [
        ("on_land_mandatory", True, None, None, False),
        ("on_land_mandatory", False, None, None, True),
        ("on_land_mandatory", False, ["a"], ["b"], True),
        ("overlap_mandatory", True, ["a"], ["a"], False),
        ("overlap_mandatory", False, ["a", "b"], ["b"], True),
        ("overlap_mandatory", False, ["a"], ["b"], False),
        ("overlap_mandatory", False, [], ["b"], False),
        ("overlap_mandatory", False, None, ["b"], True),  # facts missing: the safe answer
        ("overlap_mandatory", False, ["a"], None, True),
        ("land_time_only", False, ["a"], ["a"], False),
        ("land_time_only", True, None, None, False),
    ],
)
def test_sync_required_table(
    policy: str, fresh: bool, lane_paths: list[str] | None, main_paths: list[str] | None, want: bool
) -> None:
    assert sync_required(policy, fresh, lane_paths, main_paths) is want


@given(
    st.sampled_from(POLICIES),
    st.booleans(),
    st.lists(st.sampled_from("abcdef"), max_size=4),
    st.lists(st.sampled_from("abcdef"), max_size=4),
)
def test_sync_required_properties(policy: str, fresh: bool, lp: list[str], mp: list[str]) -> None:
    got = sync_required(policy, fresh, lp, mp)
    if fresh or policy == "land_time_only":
        assert got is False
    elif policy == "on_land_mandatory":
        assert got is True
    else:
        assert got is bool(set(lp) & set(mp))


# -- conflict markers -----------------------------------------------------------------------
# Lines free of any marker shape, and "noise" lines that look like parts of a block but
# cannot open one (a setext underline, a stray closer or base line).
plain = st.text(
    st.characters(blacklist_characters="\n\r", blacklist_categories=["Cs"]), max_size=30
).filter(lambda s: not s.startswith(("<<<<<<<", "=======", ">>>>>>>", "|||||||")))
noise = st.sampled_from(
    ["=======", ">>>>>>> theirs", ">>>>>>>", "||||||| base", "Title", "<<<<<<<<", "<<<<<<x"]
)
no_opener = st.lists(st.one_of(plain, noise), max_size=30)


def enc(lines: list[str], crlf: bool = False) -> bytes:
    return ("\r\n" if crlf else "\n").join(lines).encode("utf-8", "surrogatepass")


@given(no_opener, st.booleans())
@example(["Title", "=======", "", "text"], False)
@example(["=======", "=======", ">>>>>>> x"], False)
def test_text_without_an_opener_is_never_flagged(lines: list[str], crlf: bool) -> None:
    assert conflict_blocks(enc(lines, crlf)) == []


@given(
    st.lists(st.one_of(plain, noise), max_size=20),
    st.lists(plain, max_size=5),
    st.lists(plain, max_size=5),
    st.lists(plain, max_size=5),
    st.booleans(),
    st.booleans(),
    st.data(),
)
def test_a_real_block_is_flagged_at_its_line(
    around: list[str],
    ours: list[str],
    base: list[str],
    theirs: list[str],
    diff3: bool,
    crlf: bool,
    data: st.DataObject,
) -> None:
    at = data.draw(st.integers(0, len(around)))
    block = ["<<<<<<< HEAD", *ours]
    if diff3:
        block += ["||||||| parent of 1234567 (lane)", *base]
    block += ["=======", *theirs, ">>>>>>> 1234567 (lane)"]
    lines = around[:at] + block + around[at:]
    assert conflict_blocks(enc(lines, crlf)) == [at + 1]


@given(st.lists(plain, max_size=5), st.integers(1, 4))
def test_every_block_is_flagged(filler: list[str], n: int) -> None:
    lines: list[str] = []
    want = []
    for _ in range(n):
        lines += filler
        want.append(len(lines) + 1)
        lines += ["<<<<<<< ours", "a", "=======", "b", ">>>>>>> theirs"]
    assert conflict_blocks(enc(lines)) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (b"<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n", [1]),
        (b"<<<<<<<\na\n=======\nb\n>>>>>>>\n", [1]),  # bare markers (custom labels off)
        (b"x\n<<<<<<< HEAD\n||||||| base\n=======\n>>>>>>> x\n", [2]),  # empty sides
        (b"<<<<<<< HEAD\na\n=======\nb\n", []),  # never closed
        (b"Title\n=======\n", []),  # setext underline
        (b"<<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n", []),  # eight: not a marker
        (b"<<<<<<< a\n=======\n<<<<<<< b\n=======\n>>>>>>> c\n", [3]),
        (b"  <<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n", []),  # indented: not at line start
        (b"\xff\xfe<<<\n<<<<<<< HEAD\n\xff\n=======\n\x00\n>>>>>>> x", [2]),  # binary bytes
    ],
)
def test_conflict_block_table(text: bytes, want: list[int]) -> None:
    assert conflict_blocks(text) == want
