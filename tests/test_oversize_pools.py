"""The bulk bound of guard/oversize.py (_Tally) by pool (red team 15C F3): what a lane makes
in bulk under the shared lane refs never costs another lane its per-worktree refs, and
what a lane makes in bulk in its own admin dir is still held to STRAY_MAX there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import Repo

from guard import oversize


def _admin(hub: Repo, lane_path: Path) -> Path:
    out = hub.git("rev-parse", "--absolute-git-dir", cwd=lane_path).stdout.strip()
    return Path(out)


def _only_in_worktree_ref(hub: Repo, lane_path: Path) -> str:
    """A commit of lane A's held by `refs/worktree/x` only (its per-worktree ref: in
    `worktrees/<A>/refs/worktree/x`), its branch left where it was."""
    hub.commit(lane_path, "w.txt", "only here\n")
    c = hub.git("rev-parse", "HEAD", cwd=lane_path).stdout.strip()
    hub.git("update-ref", "refs/worktree/x", c, cwd=lane_path)
    hub.git("reset", "-q", "--hard", "HEAD~1", cwd=lane_path)
    hub.git("reflog", "expire", "--expire=now", "--all", cwd=lane_path)
    assert (_admin(hub, lane_path) / "refs" / "worktree" / "x").read_text().strip() == c
    return c


def test_a_lanes_bulk_under_the_lane_refs_never_moves_another_lanes_worktree_refs(
    hub: Repo,
) -> None:
    """Lane B writes 300 one-file refs under refs/heads/lane/ (as a sandboxed process may:
    plain files, no git); lane A holds a commit only in its admin dir's refs/worktree/x.
    The next engine command (`git lane status`) moves B's bulk into kept/ and leaves A's
    ref where it is: `git gc --prune=now` keeps A's commit (run in A's worktree: git 2.39's
    gc elsewhere does not look at another worktree's refs/worktree/, with or without
    git-lane), and release still finds it (refused, unlanded work)."""
    a = hub.create("a")
    hub.create("b")
    only = _only_in_worktree_ref(hub, a)
    heads = hub.common_dir / "refs" / "heads" / "lane"
    tip = (heads / "b").read_text()
    for i in range(300):
        (heads / f"b-bulk{i:03}").write_text(tip)
    r = hub.jlane("status")
    assert r.rc == 0, r.stderr
    x = _admin(hub, a) / "refs" / "worktree" / "x"
    assert x.read_text().strip() == only, "lane A's per-worktree ref was moved"
    left = [p for p in heads.iterdir() if p.name.startswith("b-bulk")]
    assert len(left) <= oversize.STRAY_MAX, len(left)
    kept = list((hub.state_dir / "kept").glob("oversized.*/refs/heads/lane/b-bulk*"))
    assert len(kept) == 300 - len(left) > 0
    assert (heads / "a").exists() and (heads / "b").read_text() == tip
    hub.git("gc", "-q", "--prune=now", cwd=a)
    got = subprocess.run(
        ["git", "cat-file", "-e", f"{only}^{{commit}}"], cwd=hub.path, capture_output=True
    )
    assert got.returncode == 0, "gc dropped lane A's commit"
    r = hub.jlane("release", "a")
    assert r.rc == 1 and r.code == "unlanded_work", r.stdout + r.stderr
    assert only in r.stdout


def test_a_lanes_bulk_in_its_own_admin_dir_is_still_bounded(hub: Repo) -> None:
    """What a lane makes in bulk under its own admin dir's refs/ (its refs/bisect/: 300
    refs) is still held to STRAY_MAX there; another lane's refs/worktree/ and the lanes'
    branches stay."""
    a = hub.create("a")
    b = hub.create("b")
    only = _only_in_worktree_ref(hub, a)
    tip = hub.git("rev-parse", "HEAD", cwd=b).stdout.strip()
    bisect = _admin(hub, b) / "refs" / "bisect"
    bisect.mkdir(parents=True)
    for i in range(300):
        (bisect / f"r{i:03}").write_text(tip + "\n")
    r = hub.jlane("status")
    assert r.rc == 0, r.stderr
    assert not bisect.exists()
    rel = bisect.parent.relative_to(hub.common_dir)
    (kept,) = (hub.state_dir / "kept").glob(f"oversized.*/{rel}")
    assert len(list((kept / "bisect").iterdir())) == 300
    x = _admin(hub, a) / "refs" / "worktree" / "x"
    assert x.read_text().strip() == only
    assert hub.sha("refs/heads/lane/b") == tip
