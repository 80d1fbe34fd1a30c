"""A lane's worktree against an in-lane gate and the engine's reads (red team 16E): files
the lane puts in an unpopulated submodule's directory (no `.git`: git never lists them) send
the gate to a clean worktree; a FIFO at a .gitignore or .gitattributes (git opens each it
meets) no longer blocks land or status for ever: worktree_blocked, whose next works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo, git

TIMEOUT = "3"  # GITLANE_TEST_LANE_READ_TIMEOUT: the engine's bound on a git reading the lane


def test_files_in_an_unpopulated_submodules_directory_send_the_gate_to_a_clean_worktree(
    repo: Repo, tmp_path: Path
) -> None:
    sub = tmp_path / "subrepo"
    sub.mkdir()
    git(sub, "init", "-q")
    (sub / "check.sh").write_text("exit 1\n")
    git(sub, "add", "check.sh")
    git(sub, "commit", "-q", "-m", "s")
    git(repo.path, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(repo.path, "commit", "-q", "--no-verify", "-m", "sub")
    repo.config("gate_command", json.dumps("test -f sub/check.sh && sh sub/check.sh"))
    lane = repo.create("k1")
    assert (lane / "sub").is_dir() and not any((lane / "sub").iterdir())
    (lane / "sub" / "check.sh").write_text("exit 0\n")  # no .git: git never lists it
    repo.commit(lane, "b.txt", "work\n")
    assert git(lane, "status", "--porcelain", "--untracked-files=all").stdout == ""
    main = repo.sha()
    r = repo.jlane("land", "k1")
    assert repo.sha() == main, "main moved to a tip whose gate fails in a clean worktree"
    assert r.rc == 1 and r.code == "gate_failed", r.stdout + r.stderr


@pytest.mark.parametrize("name", [".gitattributes", ".gitignore"])
@pytest.mark.parametrize("cmd", [["land", "k2"], ["status", "k2"], ["status"]])
def test_a_fifo_where_git_opens_a_file_in_the_lane_never_hangs(
    repo: Repo, name: str, cmd: list[str]
) -> None:
    repo.config("gate", "off")
    lane = repo.create("k2")
    (lane / "d").mkdir()
    repo.commit(lane, "d/b.txt", "work\n")
    os.mkfifo(lane / "d" / name)
    env = {**os.environ, "GITLANE_TEST_LANE_READ_TIMEOUT": TIMEOUT}
    try:
        r = subprocess.run(
            [sys.executable, "-m", "guard", "--json", *cmd],
            cwd=repo.path, env=env, capture_output=True, text=True, timeout=90,
            start_new_session=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"git lane {' '.join(cmd)} hung on a FIFO at d/{name}")
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["code"] == "worktree_blocked", r.stdout + r.stderr
    # the next, as written: the FIFO goes, nothing else, and the command works again
    for step in out["next"]:
        done = subprocess.run(step, shell=True, cwd=repo.path, env=env, capture_output=True,
                              text=True, timeout=90)  # fmt: skip
        assert done.returncode == 0, (step, done.stdout, done.stderr)
    assert not os.path.lexists(lane / "d" / name) and (lane / "d" / "b.txt").exists()
    again = repo.jlane(*cmd)
    assert again.rc == 0, again.stdout + again.stderr
