"""Red team 16D: the in-lane gate against what git's own conversions and a submodule's index hide:
the content check compares raw bytes (every checkin conversion off), gates in a clean
worktree when the tip's attributes convert or a submodule is populated."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest


from conftest import Repo, git
from sandboxhelp import NEEDS_LANDLOCK


def gate(repo: Repo, command: str) -> None:
    repo.config("gate_command", json.dumps(command))


# -- D1: git's own built-in conversions (ident, text/eol, working-tree-encoding) --------------
# The content check (git.content_differs) and G2's status hash the worktree file through
# convert_to_git, whose attributes come from the worktree's .gitattributes files (an
# ignored, untracked one too). `ident` collapses `$Id: <anything on one line> $` to `$Id$`,
# so a worktree file holding other bytes than the tip hashes as the tip's blob: G2 clean,
# content check "same", lstat stable during the gate. risky_config lists only filter.* and
# core.attributesFile, never the built-in attributes.

LANE_SCRIPT = {
    # .gitattributes ignored (never in the tip): a clean checkout of the tip has no ident
    "ignored": r"""
set -e
printf '/.gitattributes\n' > .gitignore
printf 'FAIL $Id$\n' > check.txt
git add .gitignore check.txt
git commit -q -m 'check: FAIL'
printf 'check.txt ident\n' > .gitattributes
printf 'FAIL $Id: PASS $\n' > check.txt
git add check.txt
""",
    # .gitattributes tracked (in the tip): nothing untracked or ignored in the lane at all;
    # a checkout of the tip holds 'FAIL $Id: <blob id> $'
    "tracked": r"""
set -e
printf 'check.txt ident\n' > .gitattributes
printf 'FAIL $Id$\n' > check.txt
git add .gitattributes check.txt
git commit -q -m 'check: FAIL'
printf 'FAIL $Id: PASS $\n' > check.txt
git add check.txt
""",
}


@pytest.mark.parametrize("attrs", ["ignored", "tracked"])
def test_d1_ident_attribute_makes_the_in_lane_gate_read_other_bytes_than_the_tip(
    hub: Repo, attrs: str
) -> None:
    """A lane process (no sandbox, just git under the shims) commits check.txt = 'FAIL $Id$'
    (a gate at the tip fails), writes an ignored .gitattributes giving it `ident`, and puts
    'FAIL $Id: PASS $' in the worktree. The owner's land from the hub gates in the lane
    (gate_worktree = lane, no live owner): the gate reads PASS, main gets FAIL."""
    gate(hub, "grep -q PASS check.txt")
    lane = hub.create("alpha")
    res = subprocess.run(
        ["git", "lane", "exec", "alpha", "--", "sh", "-c", LANE_SCRIPT[attrs]],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    tip = git(lane, "rev-parse", "HEAD").stdout.strip()
    assert git(lane, "show", "HEAD:check.txt").stdout == "FAIL $Id$\n"
    assert (lane / "check.txt").read_text() == "FAIL $Id: PASS $\n"
    before = hub.sha()
    r = hub.jlane("land", "alpha")
    assert hub.sha() == before, (
        f"main moved to {tip[:12]}, whose check.txt fails the gate: {r.stdout[-600:]}"
    )


@NEEDS_LANDLOCK
@pytest.mark.parametrize("attrs", ["ignored", "tracked"])
def test_d1_sandboxed_cmd_prepares_the_ident_worktree_and_the_owners_land_passes_it(
    hub: Repo, attrs: str
) -> None:
    """The same from a sandboxed CMD (exec --sandbox): every write is in the lane and its
    admin dir. The CMD ends; the owner later runs `git lane land alpha`."""
    gate(hub, "grep -q PASS check.txt")
    lane = hub.create("alpha")
    res = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "sh", "-c", LANE_SCRIPT[attrs]],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    tip = git(lane, "rev-parse", "HEAD").stdout.strip()
    before = hub.sha()
    r = hub.jlane("land", "alpha")
    assert hub.sha() == before, (
        f"main moved to {tip[:12]}, whose check.txt fails the gate: {r.stdout[-600:]}"
    )


# -- D2: a populated submodule's files: the content check skips gitlinks, and G4's look at the
# submodule (git.submodule_dirty) is a `git status` over a copy of the submodule's own index,
# whose stat data and flags the lane writes (assume-unchanged; or the 16B F1 mapping write
# then a refresh). The in-lane gate reads the submodule's worktree files.
def test_d2_submodule_file_hidden_by_its_own_index_is_read_by_the_in_lane_gate(
    repo: Repo, tmp_path: Path
) -> None:
    from enginehelp import add_submodule

    add_submodule(repo, tmp_path)  # sub/s.txt = "s\n" at main
    gate(repo, "grep -q PASS sub/s.txt")
    lane = repo.create("alpha")
    if not (lane / "sub" / "s.txt").exists():
        git(lane, "-c", "protocol.file.allow=always", "submodule", "update", "--init", "-q")
    repo.commit(lane, "a.txt", "a\n")
    tip = git(lane, "rev-parse", "HEAD").stdout.strip()
    # what any process of the lane may do in its submodule (worktree and modules/ git dir)
    git(lane / "sub", "update-index", "--assume-unchanged", "s.txt")
    (lane / "sub" / "s.txt").write_text("PASS\n")
    assert git(lane, "status", "--porcelain").stdout == ""
    before = repo.sha()
    r = repo.jlane("land", "alpha")
    assert repo.sha() == before, (
        f"main moved to {tip[:12]}, whose sub/s.txt fails the gate: {r.stdout[-600:]}"
    )


SUB_SCRIPT = r"""
set -e
[ -f sub/s.txt ] || git submodule update --init -q
printf 'a\n' > a.txt
git add a.txt
git commit -q -m a
/usr/bin/git -C sub update-index --assume-unchanged s.txt  # the real git: the sandbox, not the shim, is the bound
printf 'PASS\n' > sub/s.txt
"""


@NEEDS_LANDLOCK
def test_d2_sandboxed_cmd_hides_a_submodule_change_from_the_owners_land(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    from enginehelp import add_submodule

    add_submodule(repo, tmp_path)
    assert repo.lane("install").rc == 0
    gate(repo, "grep -q PASS sub/s.txt")
    lane = repo.create("alpha")
    if not (lane / "sub" / "s.txt").exists():
        git(lane, "-c", "protocol.file.allow=always", "submodule", "update", "--init", "-q")
    res = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "sh", "-c", SUB_SCRIPT],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    tip = git(lane, "rev-parse", "HEAD").stdout.strip()
    before = repo.sha()
    r = repo.jlane("land", "alpha")
    assert repo.sha() == before, (
        f"main moved to {tip[:12]}, whose sub/s.txt fails the gate: {r.stdout[-600:]}"
    )


def test_an_honest_tip_whose_attributes_convert_lands_gated_in_a_clean_worktree(
    repo: Repo,
) -> None:
    """A tip whose own .gitattributes convert on checkout (`eol=crlf`: the worktree holds
    CRLF, the blob LF) cannot be vouched for by raw bytes: the land goes through, its gate
    run on the tip in a clean worktree, and says why; a tip with no conversion still gates
    in the lane."""
    out = repo.path.parent / "gate-pwd"
    env = {"GITLANE_TEST_OUT": str(out)}
    gate(repo, 'pwd > "$GITLANE_TEST_OUT"; true')
    beta = repo.create("beta")
    repo.commit(beta, "g.txt", "ok\n")
    r = repo.jlane("land", "beta", env=env)
    assert r.rc == 0, r.stdout + r.stderr
    assert r.json["gate"]["worktree"] == "lane"  # no conversion: the gate runs in the lane
    assert os.path.realpath(out.read_text().strip()) == os.path.realpath(beta)
    gate(repo, 'pwd > "$GITLANE_TEST_OUT"; grep -q ok f.txt')
    lane = repo.create("alpha")
    repo.commit(lane, ".gitattributes", "*.txt eol=crlf\n")
    repo.commit(lane, "f.txt", "ok\n")
    (lane / "f.txt").unlink()
    (lane / "g.txt").unlink()
    git(lane, "checkout", "HEAD", "--", "f.txt", "g.txt")
    assert (lane / "f.txt").read_bytes() == b"ok\r\n"
    r = repo.jlane("land", "alpha", env=env)
    assert r.rc == 0, r.stdout + r.stderr
    g = r.json["gate"]
    assert g["worktree"] == "clean" and "attributes convert" in g["why"], g
    assert os.path.realpath(out.read_text().strip()) != os.path.realpath(lane)
