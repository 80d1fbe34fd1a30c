"""Red team 17 F2, F2b, F6: a sandboxed CMD chmods the git dirs it can reach (Landlock has
no right over modes). exec's hook-mode watcher holds fds on the hooks dir and each hook,
opened before CMD starts, and reads and puts back modes through them, whatever the modes
of the directories on the way (F2); exec's supervisor ends cleanly when CMD leaves the
common dir unsearchable, its last hook check and unclaim done (F2b); every owner command
gives the owner's bits back before it reads the state dir (F6). The owner is played
without DAC override (conftest.owner_argv): modes apply to it as to any non-root owner.
Real kernel, real processes, the real CLI."""

from __future__ import annotations

import json
import shutil
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Repo, needs_modes, owner_argv
from sandboxhelp import NEEDS_LANDLOCK

HOOKS = ("reference-transaction", "pre-commit", "pre-rebase")

# CMD: an fd on the hooks dir, the common dir's search bit off, the hook made
# non-executable through the fd (no search of the common dir needed), the common dir's
# mode back: the only event was on the common dir
_FLIP = r"""
import os, sys, time
common = sys.argv[1]
hooks = os.open(os.path.join(common, "hooks"), os.O_RDONLY | os.O_DIRECTORY)
mode = os.stat(common).st_mode & 0o7777
os.chmod(common, 0)
os.chmod("reference-transaction", 0o644, dir_fd=hooks)
time.sleep(0.5)
os.chmod(common, mode)
open("flipped", "w").close()
time.sleep(20)
"""

# the same, with the common dir left at mode 0 while CMD chmods all three hooks, and
# CMD ends that way
_FLIP_AND_LEAVE = r"""
import os, sys
common = sys.argv[1]
hooks = os.open(os.path.join(common, "hooks"), os.O_RDONLY | os.O_DIRECTORY)
os.chmod(common, 0)
for h in ("reference-transaction", "pre-commit", "pre-rebase"):
    os.chmod(h, 0o644, dir_fd=hooks)
"""


def _exec(lane_path: Path, script: Path, *args: str) -> list[str]:
    return owner_argv(
        sys.executable, "-m", "guard", "exec", "alpha", "--sandbox", "--",
        sys.executable, str(script), *args,
    )  # fmt: skip


def _events(hub: Repo, kind: str) -> list[dict[str, object]]:
    log = hub.state_dir / "events.jsonl"
    out = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [e for e in out if e.get("kind") == kind]


@NEEDS_LANDLOCK
@needs_modes
def test_hook_mode_watch_sees_through_common_dir_mode(hub: Repo, tmp_path: Path) -> None:
    """F2: the watcher reads the hook's mode through its own fd: the common dir's mode 0
    for half a second does not blind it, the hook is executable again while CMD still
    runs, and the owner's update-ref of main in the hub is refused by it."""
    lane_path = hub.create("alpha")
    (tmp_path / "flip.py").write_text(_FLIP)
    os.chmod(tmp_path, 0o755)
    hook = hub.common_dir / "hooks" / "reference-transaction"
    before = hub.sha()
    parent = hub.git("rev-parse", "HEAD~1").stdout.strip()
    argv = _exec(lane_path, tmp_path / "flip.py", str(hub.common_dir))
    proc = subprocess.Popen(
        argv, cwd=lane_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(200):
            if (lane_path / "flipped").exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert (lane_path / "flipped").exists(), proc.communicate(timeout=30)
        time.sleep(1.5)  # the watcher's poll interval and more
        executable = os.stat(hook).st_mode & 0o111
        moved = hub.git("update-ref", "refs/heads/main", parent, check=False)
        after = hub.sha()
    finally:
        proc.terminate()  # exec ends CMD's tree (its reaper) on the way out
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    if after != before:  # leave the repository as it was for the assertions' sake
        subprocess.run(
            ["git", "-c", "core.hooksPath=/dev/null", "update-ref", "refs/heads/main", before],
            cwd=hub.path,
        )
    assert executable, "reference-transaction left non-executable while CMD runs"
    assert moved.returncode != 0 and after == before, (moved.returncode, before, after)
    assert "Traceback" not in err, err[-3000:]
    restored = _events(hub, "hook_mode_restored")
    assert any(str(e.get("path", "")).endswith("reference-transaction") for e in restored)


@NEEDS_LANDLOCK
@needs_modes
def test_cmd_leaves_common_dir_unsearchable(hub: Repo, tmp_path: Path) -> None:
    """F2b: CMD ends with the common dir at mode 0 and all three hooks 0644: exec gives
    the owner's bits back, puts the hooks' modes back through its fds, unclaims the lane
    and ends with no traceback."""
    lane_path = hub.create("alpha")
    (tmp_path / "flip.py").write_text(_FLIP_AND_LEAVE)
    os.chmod(tmp_path, 0o755)
    common = hub.common_dir
    mode = os.stat(common).st_mode & 0o7777
    try:
        r = subprocess.run(
            _exec(lane_path, tmp_path / "flip.py", str(common)),
            cwd=lane_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        searchable = os.stat(common).st_mode & 0o700 == 0o700
    finally:
        os.chmod(common, mode)  # whatever happened, the assertions read the repository
    hooks = common / "hooks"
    off = [h for h in HOOKS if not os.stat(hooks / h).st_mode & 0o111]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode in (0, 1), (r.returncode, r.stderr[-3000:])
    assert searchable, "exec left the common dir without the owner's bits"
    assert not off, f"hooks left non-executable after exec ended: {off}"
    rec = json.loads((hub.state_dir / "lanes" / "alpha.json").read_text())
    assert rec.get("owner_pid") is None, rec  # unclaimed
    assert _events(hub, "exec_end"), "exec's end was not recorded"


@NEEDS_LANDLOCK
@needs_modes
@pytest.mark.parametrize("cmd", [["status"], ["land", "alpha"], ["create", "beta"]])
def test_state_dir_mode_0_owner_commands(hub: Repo, cmd: list[str]) -> None:
    """F6: a sandboxed `chmod 0 <common>/git-lane`: exec's supervisor ends cleanly, and
    the owner's next command gives the bits back before it reads the state dir: a
    result or a refusal with a code, never a traceback."""
    lane_path = hub.create("alpha")
    hub.commit(lane_path, "x.txt", "x\n")
    state = hub.state_dir
    argv = owner_argv(
        sys.executable, "-m", "guard", "exec", "alpha", "--sandbox", "--", "chmod", "0", str(state)
    )
    r = subprocess.run(argv, cwd=lane_path, capture_output=True, text=True, timeout=120)
    try:
        res = subprocess.run(
            owner_argv(sys.executable, "-m", "guard", "--json", *cmd),
            cwd=hub.path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.chmod(state, 0o755)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert res.returncode in (0, 1), (res.returncode, res.stderr[-3000:])
    out = json.loads(res.stdout)
    assert out["code"], out


NOFOWNER = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search,-fowner",
    "--ambient-caps=-dac_override,-dac_read_search,-fowner",
    "--bounding-set=-dac_override,-dac_read_search,-fowner",
    "--",
]


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root to give a hook another owner, and setpriv to drop CAP_FOWNER",
)
def test_hook_mode_that_cannot_be_put_back_stops_cmd(hub: Repo, tmp_path: Path) -> None:
    """A mode the watcher cannot put back (here: a hook of another owner, made 0644 by a
    process that may, while exec may not) is never carried on with: exec kills CMD at
    once and refuses hook_mode_lost, with the event; it does not wait for CMD's end."""
    lane_path = hub.create("alpha")
    hook = hub.common_dir / "hooks" / "pre-rebase"
    os.chown(hook, 65534, 65534)
    cmd = [sys.executable, "-c", "import time; open('up', 'w').close(); time.sleep(60)"]
    argv = [*NOFOWNER, sys.executable, "-m", "guard", "--json", "exec", "alpha", "--", *cmd]
    proc = subprocess.Popen(
        argv, cwd=lane_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(200):
            if (lane_path / "up").exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert (lane_path / "up").exists(), proc.communicate(timeout=30)
        begun = time.monotonic()
        os.chmod(hook, 0o644)  # this process may (CAP_FOWNER); exec may not
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - begun
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.chown(hook, 0, 0)
        os.chmod(hook, 0o755)
    assert "Traceback" not in err, err[-3000:]
    assert proc.returncode == 1, (proc.returncode, err)
    res = json.loads(out)
    assert res["code"] == "hook_mode_lost" and res["details"]["path"] == str(hook), res
    assert took < 10, took  # stopped, not waited for (CMD sleeps 60 s)
    assert _events(hub, "hook_mode_lost")
    assert [e["code"] for e in _events(hub, "exec_end")] == ["hook_mode_lost"]
