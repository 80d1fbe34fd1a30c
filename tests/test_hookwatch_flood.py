"""Red team 17 final F2: a CMD that flips a hook's mode in a loop made exec's hook-mode
watcher log one `hook_mode_restored` event and print one warning per repair, unbounded:
the 4 MiB audit log rotated twice and every `land` event (what vouches for the landed
refs, what gc releases a landed lane by) was gone. Now repairs of one path are collapsed
(the first logged at once, later ones at most once a second as one event with a count, a
summary at the end) and past a rate no person makes the watcher stops CMD
(`hook_mode_lost`). The watcher alone (guard/hookwatch.py) and the real CLI."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from conftest import Repo
from sandboxhelp import NEEDS_LANDLOCK

from guard import hookwatch

# a sandboxed CMD flips one hook's mode in a loop for a few seconds
_FLIP_LOOP = r"""
import os, sys, time
hook = os.path.join(sys.argv[1], "hooks", "pre-rebase")
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    try:
        os.chmod(hook, 0o644)
    except OSError:
        pass
    n += 1
print(n)
"""


def _events(hub: Repo) -> list[dict[str, object]]:
    out = []
    for name in ("events.jsonl.1", "events.jsonl"):
        p = hub.state_dir / name
        if p.exists():
            for ln in p.read_bytes().splitlines():
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    continue
    return out


def _kinds(hub: Repo, kind: str) -> list[dict[str, object]]:
    return [e for e in _events(hub) if e.get("kind") == kind]


@NEEDS_LANDLOCK
def test_sandboxed_chmod_loop_floods_the_audit_log_out(hub: Repo, tmp_path: Path) -> None:
    """A sandboxed CMD chmods a hook 0644 in a loop for 8 s: the watcher puts it back,
    stops CMD once the repairs come faster than a person makes them and exec refuses
    hook_mode_lost; a handful of events are logged, the land events survive, the hook is
    executable."""
    p = hub.create("one")
    hub.commit(p, "one.txt", "one\n")
    r = hub.jlane("land", "one")
    assert (r.rc, r.code) == (0, "landed"), r.stdout + r.stderr
    lane_path = hub.create("alpha")
    (tmp_path / "flip.py").write_text(_FLIP_LOOP)
    common = str(hub.common_dir)
    begun = time.monotonic()
    ex = hub.lane(
        "--json", "exec", "alpha", "--sandbox", "--", sys.executable, str(tmp_path / "flip.py"),
        common, "8", cwd=lane_path,
    )  # fmt: skip
    took = time.monotonic() - begun
    evs = _events(hub)
    restored = [e for e in evs if e.get("kind") == "hook_mode_restored"]
    lands = [e for e in evs if e.get("kind") == "land"]
    assert lands and len(restored) < 10, (
        f"{len(restored)} hook_mode_restored events logged, land events left: {len(lands)};"
        f" stderr lines: {ex.stderr.count(chr(10))}"
    )
    assert ex.stderr.count("changed the mode of") < 10, ex.stderr[-3000:]
    assert "Traceback" not in ex.stderr, ex.stderr[-3000:]
    res = json.loads(ex.stdout.strip().splitlines()[-1])
    assert (ex.rc, res["code"]) == (1, "hook_mode_lost"), (ex.rc, res)
    assert res["details"]["path"].endswith("pre-rebase"), res
    # the retry it names is the exec as asked: never one that runs CMD unconfined
    assert any("lane exec --sandbox alpha --" in n for n in res["next"]), res["next"]
    assert took < 8, took  # stopped, not waited for
    assert [e["code"] for e in _kinds(hub, "exec_end")] == ["hook_mode_lost"]
    assert os.access(hub.common_dir / "hooks" / "pre-rebase", os.X_OK)


def test_a_single_chmod_is_put_back_and_logged_once(hub: Repo) -> None:
    """An honest single `chmod -x` of a hook during exec: put back, one event with
    count 1, one warning line, exec ends as CMD did."""
    lane_path = hub.create("alpha")
    hook = hub.common_dir / "hooks" / "pre-commit"
    script = (
        "import os, sys, time\n"
        "os.chmod(sys.argv[1], 0o644)\n"
        "for _ in range(100):\n"
        "    if os.access(sys.argv[1], os.X_OK): break\n"
        "    time.sleep(0.05)\n"
        "time.sleep(1.5)\n"  # past a second: nothing more to say of it
    )
    r = hub.lane("exec", "alpha", "--", sys.executable, "-c", script, str(hook), cwd=lane_path)
    assert r.rc == 0, r.stderr
    assert os.access(hook, os.X_OK)
    restored = _kinds(hub, "hook_mode_restored")
    assert [(e["path"], e["count"]) for e in restored] == [(str(hook), 1)], restored
    assert r.stderr.count("changed the mode of") == 1, r.stderr


def _watch(tmp_path: Path) -> tuple[Path, list[hookwatch.Repair], list[tuple[str, str]]]:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for n in ("pre-commit", "pre-rebase"):
        (hooks / n).write_text("#!/bin/sh\n")
        os.chmod(hooks / n, 0o755)
    return hooks, [], []


def test_repeated_repairs_are_collapsed_with_a_count(tmp_path: Path) -> None:
    """Ten chmods of one hook, slower than the flood rate: every one put back, the first
    reported at once, the rest in fewer reports whose counts add up, the last a summary."""
    hooks, got, lost = _watch(tmp_path)
    w = hookwatch.HookWatch(
        hooks, ["pre-commit", "pre-rebase"], got.append, fatal=lambda p, y: lost.append((p, y))
    )
    assert w.start()
    hook = hooks / "pre-rebase"
    try:
        for _ in range(10):
            os.chmod(hook, 0o644)
            for _ in range(200):
                if os.stat(hook).st_mode & 0o111:
                    break
                time.sleep(0.005)
            time.sleep(0.12)
    finally:
        w.stop()
    assert not lost, lost
    assert os.stat(hook).st_mode & 0o777 == 0o755
    mine = [g for g in got if g.path == str(hook)]
    assert mine[0].count == 1 and not mine[0].final, got
    assert sum(g.count for g in mine) == 10, got
    assert len(mine) < 5, got
    assert mine[-1].total == 10, got


def test_a_flood_of_repairs_stops_cmd(tmp_path: Path) -> None:
    """Past the rate a person never chmods a hook at, the watcher calls `fatal` once,
    naming the flood, and every mode is still put back."""
    hooks, got, lost = _watch(tmp_path)
    w = hookwatch.HookWatch(
        hooks, ["pre-commit", "pre-rebase"], got.append, fatal=lambda p, y: lost.append((p, y))
    )
    assert w.start()
    hook = hooks / "pre-rebase"
    end = time.monotonic() + 2
    try:
        while time.monotonic() < end and not lost:
            os.chmod(hook, 0o644)
    finally:
        w.stop()
    assert len(lost) == 1 and lost[0][0] == str(hook), lost
    assert os.stat(hook).st_mode & 0o777 == 0o755
    assert len(got) < 5, got
