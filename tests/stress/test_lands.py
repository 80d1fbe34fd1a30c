"""Rounds of every lane landing at once (half `--wait`, half not) as real processes, mixed
with syncs of stale lanes, creates of new lanes and releases of landed ones; after every
round: main linear, every landed tip on main, epoch = lands = land events, no lock left,
no lane lost (G1, G3, G5, G7, G11)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from stresshelp import Tally, assert_invariants, lane_argv, run_together, tip

from conftest import Repo, git
from enginehelp import is_ancestor

pytestmark = pytest.mark.slow


def stress(repo: Repo, lanes: int, rounds: int, new_per_round: int = 1, syncs: int = 4) -> Tally:
    repo.config("max_lanes", str(lanes + rounds * new_per_round + 1))
    tally = Tally()
    paths = {f"l{i}": repo.create(f"l{i}") for i in range(lanes)}
    expected = set(paths)
    landed: list[str] = []
    to_release: set[str] = set()
    synced: dict[str, int] = {}
    for rnd in range(rounds):
        main = repo.sha() or ""
        workers = sorted(expected - to_release)
        for k in workers:
            repo.commit(paths[k], f"{k}/r{rnd}.txt", f"{k} {rnd}\n")
        jobs: dict[str, list[list[str]]] = {}
        # a few stale lanes sync (then land) each round, the longest unsynced first: each
        # `git lane` process costs ~0.4 s of CPU, and the lock admits one land a round anyway
        stale = [k for k in workers if not is_ancestor(repo.path, main, tip(repo, k))]
        syncing = set(sorted(stale, key=lambda k: synced.get(k, -1))[:syncs])
        for i, k in enumerate(workers):
            land = lane_argv("land", k, "--json", *(["--wait"] if (i + rnd) % 2 == 0 else []))
            jobs[f"land {k}"] = [*([lane_argv("sync", k, "--json")] if k in syncing else []), land]
            if k in syncing:
                synced[k] = rnd
        for k in sorted(to_release):
            jobs[f"release {k}"] = [lane_argv("release", k, "--json")]
        new = [f"n{rnd}-{j}" for j in range(new_per_round)]
        for k in new:
            jobs[f"create {k}"] = [lane_argv("create", k, "--json")]

        jobs["status -"] = [lane_argv("status", "--json")]  # reads while lanes come and go

        # a release is refused (lock_busy) while any land holds the lock: retried, as an
        # agent would
        busy = frozenset({"lock_busy"})
        outs = run_together(jobs, repo.path, {j: busy for j in jobs if j.startswith("release")})
        landed_now: set[str] = set()
        for name, seq in outs.items():
            verb, k = name.split(" ", 1)
            for o in seq:
                tally.check(o)
            last = seq[-1]
            if verb == "land" and last.argv[0] == "land" and last.code == "landed":
                assert last.json["lane"] == k and last.json["main_after"] == tip(repo, k)
                landed.append(last.json["main_after"])
                landed_now.add(k)
            elif verb == "release" and last.rc == 0:
                expected.discard(k)
                to_release.discard(k)
            elif verb == "create" and last.rc == 0:
                expected.add(k)
                paths[k] = Path(last.json["lane"]["path"])
        assert len(landed_now) >= 1 or not workers, outs  # the lock was won by someone
        to_release |= landed_now
        assert_invariants(repo, landed, expected)
        sys.stderr.write(f"[round {rnd}: {len(landed)} lands, {len(expected)} lanes]\n")
    # every lane's work is on main, or still on its registered branch
    for k in expected:
        assert git(repo.path, "rev-parse", "--verify", f"refs/heads/lane/{k}").returncode == 0
    sys.stderr.write(f"\n[{lanes} lanes x {rounds} rounds: {len(landed)} lands; {tally}]\n")
    return tally


def test_twenty_lanes_land_at_once_for_twenty_rounds(repo: Repo) -> None:
    repo.config("gate", "off")
    t = time.monotonic()
    tally = stress(repo, lanes=20, rounds=20)
    assert tally.codes[("land", "landed")] >= 20
    sys.stderr.write(f"[{time.monotonic() - t:.1f} s]\n")


def test_with_a_real_gate_and_the_hooks(repo: Repo) -> None:
    (repo.path / "a.txt").write_text("a\n")
    git(repo.path, "add", "a.txt")
    git(repo.path, "commit", "-q", "-m", "a")
    assert repo.jlane("install").rc == 0
    repo.config("gate_command", "\"sh -c 'test -f a.txt'\"")
    tally = stress(repo, lanes=6, rounds=4, new_per_round=1)
    assert tally.codes[("land", "landed")] >= 4
