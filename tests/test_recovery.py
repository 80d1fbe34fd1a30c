"""Recovery through the real CLI: a lane worktree or branch removed or moved by hand, a
corrupt lane record, and a land interrupted while its gate runs. Nothing committed is
lost on the way out, and every refusal names a command that works."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import signal
from pathlib import Path

import pytest

from conftest import Repo
from enginehelp import events, owner_file, pid_alive, ready_lane, spawn_lane, wait_for


# -- 4. a land interrupted while its gate runs ------------------------------------------------
@pytest.mark.parametrize(
    ("sig", "as_json"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["sigint", "sigterm", "sigterm-json"],
)
def test_interrupted_gate_leaves_main_and_frees_the_lock(
    repo: Repo, tmp_path: Path, sig: signal.Signals, as_json: bool
) -> None:
    pidfile = tmp_path / "gate.pid"
    repo.config("gate_command", f"sleep 30 & echo $! > {shlex.quote(str(pidfile))}; wait")
    ready_lane(repo, "alpha")
    main = repo.sha()
    assert main is not None
    proc = spawn_lane("land", "alpha", *(["--json"] if as_json else []), cwd=repo.path)
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 20, "the gate")
    assert "pid=" in owner_file(repo).read_text()  # the land holds the lock while its gate runs
    sleeper = int(pidfile.read_text())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, (proc.returncode, out, err)
    assert err.splitlines() == [
        f"git-lane: interrupted: main unchanged at {main[:12]}; the integration lock is released"
    ], err
    if as_json:
        res = json.loads(out)
        assert (res["ok"], res["code"]) == (False, "land_interrupted")
        assert res["details"]["signal"] == sig.name and res["next"] == ["git lane land alpha"]
    else:
        assert out == ""
    # the gate's whole group is gone, the lock is really free, main did not move
    wait_for(lambda: not pid_alive(sleeper), 10, "the gate's child to die")
    assert not owner_file(repo).exists()
    fd = os.open(repo.state_dir / "locks" / "integration.flock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while anyone holds it
    finally:
        os.close(fd)
    assert repo.sha() == main and not (repo.state_dir / "landing.json").exists()
    ev = events(repo, "land_interrupted")
    assert [(e["lane"], e["signal"], e["main"]) for e in ev] == [("alpha", sig.name, main)]
    # and the next land goes through
    repo.config("gate_command", "true")
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout + r.stderr
