"""A FIFO (or socket, device) at a file git opens on every call: main's loose ref, a
landed ref, the common HEAD, the common config (red team 15C F2). A process outside the
sandbox makes one with mkfifo; git's open(2) of it blocks for ever. Every git-lane command
(status, doctor, restore-main) looks first, with lstat and no git, and refuses or moves it
into kept/, never hangs: each runs with a timeout, so a hang fails instead of blocking.
Then the printed `next` runs as written and the repository is usable again."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Repo
from enginehelp import ready_lane

LANDED = "refs/git-lane/landed/0000000001"
TIMEOUT = 60


def _lane(hub: Repo, *args: str) -> tuple[int, dict[str, object], str]:
    """`git lane ARGS --json` with a timeout: a hang fails the test, never blocks it (the
    whole process group killed: a git waiting on the FIFO holds the pipes open)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "guard", *args, "--json"],
        cwd=hub.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail(f"git lane {' '.join(args)} hung on the FIFO")
    return p.returncode, json.loads(out), err


def _let_go(paths: list[Path]) -> None:
    """Every process still waiting on one of `paths` (a FIFO) is let go: a writer opens and
    closes it, so a command that hung leaves no git behind."""
    for p in paths:
        try:
            if not stat.S_ISFIFO(os.lstat(p).st_mode):
                continue
            for _ in range(20):
                os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:
            assert exc.errno in (errno.ENXIO, errno.ENOENT), exc


@pytest.fixture
def landed_hub(hub: Repo) -> Iterator[Repo]:
    """A hub with one land (its landed ref loose), and every FIFO the test leaves let go."""
    ready_lane(hub, "a")
    r = hub.jlane("land", "a")
    assert r.rc == 0, r.stderr
    common = hub.common_dir
    assert (common / LANDED).is_file()
    yield hub
    _let_go([p for p in common.rglob("*") if p.is_fifo()])


def _plant(hub: Repo, rel: str) -> None:
    p = hub.common_dir / rel
    if p.is_fifo():
        return
    p.unlink()
    os.mkfifo(p)


def _run_next(hub: Repo, nxt: list[str]) -> None:
    for cmd in nxt:
        r = subprocess.run(
            cmd, shell=True, cwd=hub.path, capture_output=True, text=True, timeout=TIMEOUT
        )
        assert r.returncode == 0, f"{cmd}\n{r.stdout}\n{r.stderr}"


@pytest.mark.parametrize("rel", ["HEAD", "config"])
def test_a_fifo_at_head_or_config_is_refused_before_any_git_runs(
    landed_hub: Repo, rel: str
) -> None:
    """A FIFO at the common HEAD or config: status and restore-main refuse
    git_file_not_plain, doctor fails one line with the same fix; the `next` keeps the
    FIFO in kept/ (it holds nothing) and, for HEAD, writes main's name back."""
    hub = landed_hub
    main = hub.sha()
    _plant(hub, rel)
    rc, out, err = _lane(hub, "status")
    assert rc == 1 and out["code"] == "git_file_not_plain", (out, err)
    nxt = out["next"]
    assert isinstance(nxt, list) and nxt
    rc, out, err = _lane(hub, "restore-main")
    assert rc == 1 and out["code"] == "git_file_not_plain", (out, err)
    rc, out, err = _lane(hub, "doctor")
    assert rc == 1 and out["code"] == "doctor_failed", (out, err)
    checks = out["checks"]
    assert isinstance(checks, list)
    (c,) = checks
    assert c["status"] == "fail" and "git_file_not_plain" in c["message"] and c["fix"], c
    _run_next(hub, [str(x) for x in nxt])
    assert not (hub.common_dir / rel).is_fifo()
    kept = list((hub.state_dir / "kept").glob(f"*/{rel}"))
    assert len(kept) == 1 and kept[0].is_fifo(), kept
    rc, out, err = _lane(hub, "status")
    assert rc == 0, (out, err)
    assert hub.sha() == main


def test_a_fifo_at_mains_loose_ref_is_refused_and_restore_main_keeps_it(
    landed_hub: Repo,
) -> None:
    """A FIFO at refs/heads/main: status refuses main_not_plain (next restore-main), doctor
    fails `main` alone; restore-main moves it into kept/ (never opened) and puts main back
    at the last landed tip."""
    hub = landed_hub
    main = hub.sha()
    _plant(hub, "refs/heads/main")
    rc, out, err = _lane(hub, "status")
    assert rc == 1 and out["code"] == "main_not_plain", (out, err)
    assert out["next"] == ["git lane restore-main"], out
    rc, out, err = _lane(hub, "doctor")
    assert rc == 1 and out["code"] == "doctor_failed", (out, err)
    checks = out["checks"]
    assert isinstance(checks, list)
    assert [c["status"] for c in checks] == ["fail"] and checks[0]["fix"], checks
    _run_next(hub, ["git lane restore-main"])
    assert not (hub.common_dir / "refs" / "heads" / "main").is_fifo()
    assert any(p.is_fifo() for p in (hub.state_dir / "kept").rglob("*"))
    assert hub.sha() == main
    rc, out, err = _lane(hub, "status")
    assert rc == 0, (out, err)


@pytest.mark.parametrize("command", ["status", "doctor", "restore-main"])
def test_a_fifo_at_a_landed_ref_is_kept_and_reconcile_puts_the_ref_back(
    landed_hub: Repo, command: str
) -> None:
    """A FIFO at refs/git-lane/landed/<epoch> holds no commit: every command's first step
    moves it into kept/ (as oversize does a FIFO under the lane refs) and says so; doctor
    then names the land that has no landed ref, and reconcile (vouched by the land event)
    writes it back at the landed tip."""
    hub = landed_hub
    tip = hub.sha(LANDED)
    _plant(hub, LANDED)
    rc, out, err = _lane(hub, command)
    # (restore-main: main is at a land only plain files now name, so it changes nothing)
    assert out["code"] in ("ok", "unchanged", "doctor_failed", "main_ahead"), (out, err)
    assert not (hub.common_dir / LANDED).exists()
    assert any(p.is_fifo() for p in (hub.state_dir / "kept").rglob("*"))
    rc, out, err = _lane(hub, "doctor")
    fails = [c for c in out["checks"] if c["status"] != "ok"]  # type: ignore[union-attr]
    assert any(c["fix"] == "git lane reconcile" for c in fails), fails
    _run_next(hub, ["git lane reconcile"])
    assert hub.sha(LANDED) == tip
    rc, out, err = _lane(hub, "status")
    assert rc == 0, (out, err)


def test_a_fifo_at_another_branch_is_kept_by_every_commands_first_step(landed_hub: Repo) -> None:
    """A FIFO at refs/heads/feature (no lane's, not main): git-lane's look for main lists
    every loose ref under refs/heads/, and would wait on it for ever. It holds no commit:
    the first step moves it into kept/ (said in a warning), and the command runs."""
    hub = landed_hub
    os.mkfifo(hub.common_dir / "refs" / "heads" / "feature")
    rc, out, err = _lane(hub, "status")
    assert rc == 0, (out, err)
    assert not os.path.lexists(hub.common_dir / "refs" / "heads" / "feature")
    (kept,) = (hub.state_dir / "kept").glob("oversized.*/refs/heads/feature")
    assert kept.is_fifo()
    assert any("refs/heads/feature" in str(w) for w in out["warnings"]), out  # type: ignore[union-attr]


def test_a_fifo_at_a_plain_worktrees_head_is_refused_there_and_mended_from_the_hub(
    landed_hub: Repo,
) -> None:
    """A worktree the owner added (no lane) whose admin dir's HEAD is a FIFO: a command
    run there refuses admin_unreadable before any git runs (the admin dir is reconcile's
    to mend), its next (`git -C <hub> lane reconcile`) runs as printed, and the hub works."""
    hub = landed_hub
    wt = hub.path.parent / "plain wt"
    hub.git("worktree", "add", "-q", "--detach", str(wt))
    admin = Path(hub.git("rev-parse", "--absolute-git-dir", cwd=wt).stdout.strip())
    (admin / "HEAD").unlink()
    os.mkfifo(admin / "HEAD")
    hub_path = hub.path
    hub.path = wt  # (run from inside the worktree)
    try:
        rc, out, err = _lane(hub, "status")
    finally:
        hub.path = hub_path
    assert rc == 1 and out["code"] == "admin_unreadable", (out, err)
    _run_next(hub, [str(x) for x in out["next"]])  # type: ignore[union-attr]
    assert not (admin / "HEAD").is_fifo()
    rc, out, err = _lane(hub, "status")
    assert rc == 0, (out, err)
