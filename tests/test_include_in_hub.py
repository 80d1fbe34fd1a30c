"""`.worktreeinclude` with the lanes inside the hub (`allow_in_repo_worktrees = true`,
`worktrees_root` under the hub, red team 17 gate F3): the copy into a clean gate's
worktree or a new lane takes the hub's ignored files, never a lane's. A lane that deleted
its own `.git` file is a plain ignored directory to the hub's `git ls-files -o -i`, yet
still a lane by its record and by worktrees_root: nothing at or under it is copied. And
no source of the copy is opened where it could block: a FIFO swapped in between the
look and the open (in a lane, or anywhere in the hub) is skipped, never waited on while
the land holds the integration lock."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import Repo, git, lane

# a CMD in the lane (exec --sandbox may: it is its worktree) unlinks the lane's `.git`,
# then swaps a directory of regular `.env` files with one of FIFOs, atomically, in a loop
SWAP = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
os.unlink(".git")  # the lane is no nested repository to the hub's `ls-files -o` any more
for side, fifo in (("xa", False), ("xb", True)):
    for i in range(int(sys.argv[1])):
        d = f"{side}/d{i:05}"
        os.makedirs(d, exist_ok=True)
        if fifo:
            os.mkfifo(f"{d}/.env")
        else:
            with open(f"{d}/.env", "w") as f:
                f.write("x\n")
os.rename("xa", "x")
print("ready", flush=True)
end = time.time() + float(sys.argv[2])
while time.time() < end:  # x <-> xb: regular .env files <-> FIFOs, atomically
    if libc.renameat2(-100, b"x", -100, b"xb", 2) != 0:
        break
"""


def _in_repo_hub(repo: Repo) -> tuple[Path, Path]:
    (repo.path / ".gitignore").write_text(".env\nlanes/\n")
    (repo.path / ".worktreeinclude").write_text(".env\n")
    (repo.path / ".env").write_text("SECRET=hub\n")
    git(repo.path, "add", ".gitignore", ".worktreeinclude")
    git(repo.path, "commit", "-qm", "include .env")
    assert repo.lane("install").rc == 0
    repo.config("gate_worktree", "clean")
    repo.config("allow_in_repo_worktrees", "true")
    repo.config("worktrees_root", str(repo.path / "lanes"))
    return repo.create("alpha"), repo.create("beta")


def _included(r: object) -> object:
    return getattr(r, "json", {}).get("details", {}).get("included") or getattr(r, "json", {})


def test_a_lane_without_its_git_file_never_reaches_the_clean_gate(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """F3a: alpha removes its `.git` file and plants `.env`; beta's clean gate gets the
    hub's `.env` and nothing of alpha's."""
    alpha, beta = _in_repo_hub(repo)
    rel = alpha.relative_to(repo.path)
    (alpha / ".git").unlink()  # a sandboxed CMD may: the file is in its worktree
    (alpha / ".env").write_text("PLANTED_BY_ALPHA\n")
    repo.config("gate_command", f"test ! -e '{rel}/.env' && grep -q SECRET=hub .env")
    repo.commit(beta, "b.txt", "b\n")
    r = repo.jlane("land", "beta")
    assert r.code == "landed", (r.code, _included(r))
    assert r.json["gate"]["included"]["files"] == 1


def test_a_new_lane_never_gets_another_lanes_files(repo: Repo, gitlane_on_path: Path) -> None:
    """The same at create: the new lane gets the hub's `.env`, no `lanes/` at all."""
    alpha, _ = _in_repo_hub(repo)
    (alpha / ".git").unlink()
    (alpha / ".env").write_text("PLANTED_BY_ALPHA\n")
    r = repo.jlane("create", "gamma")
    assert r.rc == 0, r.stdout + r.stderr
    gamma = Path(r.json["lane"]["path"])
    assert (gamma / ".env").read_text() == "SECRET=hub\n"
    assert not (gamma / "lanes").exists()
    assert r.json["included"]["files"] == 1, r.json["included"]


def test_a_lane_outside_worktrees_root_is_still_a_lane_by_its_record(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """worktrees_root moved elsewhere since alpha was made, and alpha is in git's
    worktree list no more (no `.git`, its admin dir pruned): alpha is still excluded by
    its record; and a directory under the configured worktrees_root that is no lane's by
    the root."""
    alpha, _ = _in_repo_hub(repo)
    (alpha / ".git").unlink()
    git(repo.path, "worktree", "prune")
    assert str(alpha) not in repo.worktrees()
    (alpha / ".env").write_text("PLANTED_BY_ALPHA\n")
    repo.config("worktrees_root", str(repo.path / "lanes2"))
    stray = repo.path / "lanes2" / "nobody"
    stray.mkdir(parents=True)
    (stray / ".env").write_text("PLANTED_UNDER_ROOT\n")
    r = repo.jlane("create", "gamma")
    assert r.rc == 0, r.stdout + r.stderr
    gamma = Path(r.json["lane"]["path"])
    assert (gamma / ".env").read_text() == "SECRET=hub\n"
    assert not (gamma / "lanes").exists() and not (gamma / "lanes2").exists()


def test_a_fifo_swapped_into_a_lane_never_hangs_anothers_land(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """F3b: alpha's CMD swaps a directory of regular `.env` files with one of FIFOs in a
    loop; beta's land (under the integration lock) never waits on one."""
    alpha, beta = _in_repo_hub(repo)
    repo.config("gate_command", "true")
    script = tmp_path / "swap.py"
    script.write_text(SWAP)
    ex = subprocess.Popen(
        [sys.executable, str(script), "3000", "120"],
        cwd=alpha, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert ex.stdout is not None
        assert ex.stdout.readline().strip() == "ready"
        repo.commit(beta, "b.txt", "b\n")
        try:
            r = lane("land", "beta", "--json", cwd=repo.path, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("beta's land hung (in fifo_open, under the integration lock)")
        assert r.code == "landed", r.stdout[-500:]
        assert r.json["gate"]["included"]["files"] == 1
    finally:
        ex.kill()
        ex.wait()


# -- include.copy itself: the hub's own files, reached through directory fds ------------------
COPY = """
import json, sys
from guard import include
print(json.dumps(include.copy(sys.argv[1], sys.argv[2], b".env\\n")))
"""


def _copy(hub: Path, dest: Path, timeout: float, **env: str) -> dict[str, object]:
    dest.mkdir()
    try:
        res = subprocess.run(
            [sys.executable, "-c", COPY, str(hub), str(dest)],
            capture_output=True, text=True, timeout=timeout, env={**os.environ, **env},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("include.copy hung")
    assert res.returncode == 0, res.stderr
    out: dict[str, object] = json.loads(res.stdout)
    return out


def test_a_fifo_swapped_in_the_hub_is_skipped_never_waited_on(tmp_path: Path) -> None:
    """Anywhere in the hub: each source is opened O_NONBLOCK through directory fds and
    fstat-checked against the lstat that chose it; a FIFO (or another file) swapped in
    between is skipped with a reason."""
    hub = tmp_path / "hub"
    hub.mkdir()
    git(hub, "init", "-q")
    (hub / ".gitignore").write_text(".env\n")
    n = 2000
    for side, fifo in (("x", False), ("xb", True)):
        for i in range(n):
            d = hub / side / f"d{i:05}"
            d.mkdir(parents=True)
            if fifo:
                os.mkfifo(d / ".env")
            else:
                (d / ".env").write_text("x\n")
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()
    x, xb = os.fsencode(hub / "x"), os.fsencode(hub / "xb")

    def swap() -> None:
        while not stop.is_set():
            libc.renameat2(-100, x, -100, xb, 2)

    t = threading.Thread(target=swap, daemon=True)
    t.start()
    try:
        out = _copy(hub, tmp_path / "dest", 60)
    finally:
        stop.set()
        t.join()
    skipped = out["skipped"]
    assert isinstance(skipped, list) and isinstance(out["files"], int)
    assert all(s["reason"] for s in skipped)
    copied = [p for p in (tmp_path / "dest").rglob(".env")]
    assert all(p.is_file() and not p.is_symlink() for p in copied)
    assert len(copied) == out["files"]


def test_a_git_call_that_blocks_in_the_hub_is_bounded(tmp_path: Path) -> None:
    """A FIFO `.gitignore` in a directory of the hub (the owner's: no lane's) blocks git's
    `ls-files --exclude-standard`: the copy gives up after the timeout, copies nothing,
    and says why."""
    hub = tmp_path / "hub"
    (hub / "sub").mkdir(parents=True)
    git(hub, "init", "-q")
    (hub / ".gitignore").write_text(".env\n")
    (hub / ".env").write_text("SECRET=hub\n")
    os.mkfifo(hub / "sub" / ".gitignore")
    t = time.monotonic()
    out = _copy(hub, tmp_path / "dest", 60, GITLANE_TEST_LANE_READ_TIMEOUT="2")
    assert time.monotonic() - t < 30
    assert out["files"] == 0
    skipped = out["skipped"]
    assert isinstance(skipped, list) and len(skipped) == 1 and "timed out" in skipped[0]["reason"]
