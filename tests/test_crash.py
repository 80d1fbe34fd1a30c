"""A real `git lane land` SIGKILLed at each stage of its landing transaction, then
`git lane reconcile` (or the next land) finishes or rolls it back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from conftest import Repo, git
from enginehelp import (
    assert_linear,
    epoch,
    events,
    head,
    is_ancestor,
    landing_file,
    owner_file,
    ready_lane,
    status_porcelain,
)

pytestmark = pytest.mark.slow

MOVED = ("main_moved", "hub_updated", "epoch_bumped")
NOT_MOVED = ("locked", "prepared")


def crash_land(repo: Repo, key: str, point: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "guard", "land", key, "--json"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env={**os.environ, "GITLANE_TEST_CRASH_AT": point},
        timeout=60,
    )
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""


def completed_lands(repo: Repo) -> list[dict[str, Any]]:
    return [e for e in events(repo, "land") if e.get("code") == "landed"]


def check_invariants(repo: Repo, landed: list[str]) -> None:
    assert_linear(repo)
    for c in landed:
        assert is_ancestor(repo.path, c, "refs/heads/main"), c
    assert epoch(repo) == len(completed_lands(repo)) == len(landed)
    assert not owner_file(repo).exists()
    assert not landing_file(repo).exists()
    st = repo.jlane("status").json
    assert st["lock"] is None and st["landing"] is False and st["epoch"] == len(landed)


@pytest.mark.parametrize("point", NOT_MOVED + MOVED)
def test_reconcile_after_a_crash(repo: Repo, point: str) -> None:
    repo.config("gate", "off")
    base = repo.sha()
    alpha = ready_lane(repo, "alpha", {"a.txt": "a\n", "dir/b.txt": "b\n"})
    tip = head(alpha)
    crash_land(repo, "alpha", point)

    moved = point in MOVED
    assert repo.sha() == (tip if moved else base)
    assert owner_file(repo).exists()  # the dead land's record is still there
    assert landing_file(repo).exists() == (point != "locked")
    if point != "locked":
        assert json.loads(landing_file(repo).read_text())["stage"] == point
    if point == "main_moved":
        assert status_porcelain(repo.path) != ""  # hub index still at the old tree
    assert epoch(repo) == (1 if point == "epoch_bumped" else 0)
    st = repo.jlane("status").json
    assert st["lock"]["alive"] is False

    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout + r.stderr
    actions = [c["action"] for c in r.json["changes"]]
    if moved:
        assert "landing_completed" in actions
        (ev,) = completed_lands(repo)
        assert ev["recovered"] is True and ev["main_after"] == tip and ev["epoch"] == 1
        assert epoch(repo) == 1  # bumped exactly once, whichever stage died
        assert status_porcelain(repo.path) == ""  # hub brought to the tip
        assert (repo.path / "dir" / "b.txt").read_text() == "b\n"
        landed = [tip]
    else:
        assert ("landing_rolled_back" in actions) == (point == "prepared")
        assert repo.sha() == base
        assert completed_lands(repo) == []
        assert status_porcelain(repo.path) == ""
        landed = []
    check_invariants(repo, landed)
    assert repo.jlane("reconcile").json["changes"] == []  # idempotent

    # a following land works (alpha again when it was rolled back, then beta after a sync)
    if not moved:
        assert repo.jlane("land", "alpha").code == "landed"
        landed.append(tip)
    beta = ready_lane(repo, "beta")
    assert repo.jlane("sync", "beta").json["state"] == "fresh"
    assert repo.jlane("land", "beta").code == "landed"
    landed.append(head(beta))
    check_invariants(repo, landed)


@pytest.mark.parametrize("point", ("prepared", "main_moved", "hub_updated"))
def test_the_next_land_recovers_on_its_own(repo: Repo, point: str) -> None:
    repo.config("gate", "off")
    alpha = ready_lane(repo, "alpha")
    beta = ready_lane(repo, "beta")
    crash_land(repo, "alpha", point)
    r = repo.jlane("land", "beta")
    if point == "prepared":  # rolled back: beta is still fresh and lands
        assert r.code == "landed", r.stdout
        landed = [head(beta)]
    else:  # alpha's land was finished first, so beta is stale now
        assert r.code == "stale_lane", r.stdout
        assert repo.jlane("sync", "beta").json["state"] == "fresh"
        assert repo.jlane("land", "beta").code == "landed"
        landed = [head(alpha), head(beta)]
    check_invariants(repo, landed)
    assert any(e.get("code") == "lock_taken_over" for e in events(repo))


@pytest.mark.parametrize("point", ("prepared", "main_moved"))
def test_recovery_with_the_hooks_installed(repo: Repo, point: str) -> None:
    assert repo.jlane("install").rc == 0
    repo.config("gate", "off")
    alpha = ready_lane(repo, "alpha")
    crash_land(repo, "alpha", point)
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout + r.stderr
    landed = [head(alpha)] if point == "main_moved" else []
    check_invariants(repo, landed)
    beta = ready_lane(repo, "beta")
    assert repo.jlane("sync", "beta").json["state"] == "fresh"
    assert repo.jlane("land", "beta").code == "landed"
    check_invariants(repo, [*landed, head(beta)])


def test_a_crash_with_the_gate_on_recovers_the_same(repo: Repo) -> None:
    repo.config("gate_command", '"exit 0"')
    alpha = ready_lane(repo, "alpha")
    crash_land(repo, "alpha", "main_moved")
    r = repo.jlane("reconcile")
    assert r.rc == 0
    (ev,) = completed_lands(repo)
    assert ev["gate"]["status"] == "passed"  # what the gate said is kept in the record
    check_invariants(repo, [head(alpha)])


def test_ambiguous_state_is_refused_and_nothing_changes(repo: Repo) -> None:
    repo.config("gate", "off")
    base = repo.sha() or ""
    ready_lane(repo, "alpha")
    beta = ready_lane(repo, "beta")
    crash_land(repo, "alpha", "prepared")
    # main moved by hand (no hooks installed) to neither the recorded old value nor the tip
    elsewhere = git(
        repo.path, "commit-tree", "-p", base, "-m", "by hand", f"{base}^{{tree}}"
    ).stdout.strip()
    git(repo.path, "update-ref", "refs/heads/main", elsewhere, base)
    snap: dict[str, Any] = {
        "landing": landing_file(repo).read_text(),
        "owner": owner_file(repo).read_text(),
        "lanes": sorted(p.read_text() for p in (repo.state_dir / "lanes").iterdir()),
        "epoch": epoch(repo),
        "worktrees": repo.worktrees(),
        "hub": status_porcelain(repo.path),
    }

    def same() -> None:
        assert repo.sha() == elsewhere
        assert landing_file(repo).read_text() == snap["landing"]
        assert owner_file(repo).read_text() == snap["owner"]
        assert sorted(p.read_text() for p in (repo.state_dir / "lanes").iterdir()) == snap["lanes"]
        assert epoch(repo) == snap["epoch"]
        assert repo.worktrees() == snap["worktrees"]
        assert status_porcelain(repo.path) == snap["hub"]

    r = repo.jlane("reconcile")
    assert r.rc == 1 and r.code == "reconcile_ambiguous", r.stdout
    assert r.json["details"]["main"] == elsewhere
    same()
    # a land will not paper over it either
    r = repo.jlane("land", "beta")
    assert r.rc == 1 and r.code == "reconcile_ambiguous", r.stdout
    landing = json.loads(snap["landing"])
    assert landing["lane"] == "alpha"
    assert repo.sha() == elsewhere and head(beta) != elsewhere
    assert landing_file(repo).exists()


@pytest.mark.parametrize("then", ["reconcile", "land"])
def test_a_land_killed_after_its_land_event_is_not_logged_twice(repo: Repo, then: str) -> None:
    """Killed after its land event was appended and before landing.json went: recovery
    (reconcile, or the next land) finishes the land without logging it again, so the
    epoch stays the number of land events whenever the kill came."""
    repo.config("gate_command", "true")
    alpha = ready_lane(repo, "alpha")
    crash_land(repo, "alpha", "land_logged")
    assert landing_file(repo).exists() and len(completed_lands(repo)) == 1
    landed = [head(alpha)]
    if then == "reconcile":
        r = repo.jlane("reconcile")
        assert r.rc == 0 and "landing_completed" in [c["action"] for c in r.json["changes"]]
    else:
        beta = ready_lane(repo, "beta")
        r = repo.jlane("land", "beta")
        assert r.code == "landed", r.stdout
        landed.append(head(beta))
    assert [e["epoch"] for e in completed_lands(repo)] == list(range(1, len(landed) + 1))
    check_invariants(repo, landed)


def test_recovery_never_carries_the_hub_over_an_ignored_file(repo: Repo) -> None:
    """A land killed once main moved is finished by reconcile, possibly long after: the
    hub's update then meets what is there now. An ignored file that appeared where the
    tip tracks one stops it (read-tree would overwrite it); status says the hub is out of
    step and prints the command that, once it is moved aside, brings it along."""
    repo.commit(repo.path, ".gitignore", "secret.env\n")
    repo.config("gate", "off")
    alpha = repo.create("alpha")
    (alpha / "secret.env").write_text("lane\n")
    git(alpha, "add", "-f", "secret.env")
    git(alpha, "commit", "-q", "-m", "track it")
    crash_land(repo, "alpha", "main_moved")
    secret = repo.path / "secret.env"
    secret.write_text("OWNER\n")
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout + r.stderr
    assert secret.read_text() == "OWNER\n"
    check_invariants(repo, [head(alpha)])
    st = repo.jlane("status").json
    assert st["hub"]["out_of_step"] is True, st
    (warning,) = [w for w in st["warnings"] if "out of step" in w]
    cmd = warning.split("run: ", 1)[1]
    secret.unlink()
    res = subprocess.run(cmd, shell=True, cwd=repo.path, text=True, capture_output=True)
    assert res.returncode == 0, (cmd, res.stderr)
    assert secret.read_text() == "lane\n" and status_porcelain(repo.path) == ""
