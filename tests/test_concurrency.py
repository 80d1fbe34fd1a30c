"""Many real `git lane land --wait` processes at once (G1, G3, G5, G7)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading

import pytest

from conftest import Repo
from enginehelp import (
    assert_linear,
    epoch,
    events,
    head,
    is_ancestor,
    landing_file,
    owner_file,
    ready_lane,
)

pytestmark = pytest.mark.slow

N = 5


def lock_spans(repo: Repo) -> list[tuple[float, float, str]]:
    acq = {e["token"]: e for e in events(repo, "lock_acquired")}
    rel = {e["token"]: e for e in events(repo, "lock_released")}
    assert set(acq) == set(rel), "every lock taken was released"
    return sorted((acq[t]["ts"], rel[t]["ts"], str(acq[t]["lane"])) for t in acq)


def check_serial(repo: Repo, expect_lands: int) -> None:
    spans = lock_spans(repo)
    for (_, a1, la), (b0, _, lb) in itertools.pairwise(spans):
        assert a1 <= b0, f"{la} and {lb} held the lock at once"
    lands = [e for e in events(repo, "land") if e["code"] == "landed"]
    assert len(lands) == expect_lands == epoch(repo)
    # each land started from where the previous one left main: one chain, no force
    for prev, nxt in itertools.pairwise(lands):
        assert nxt["main_before"] == prev["main_after"]
        assert nxt["epoch"] == prev["epoch"] + 1
    for ev in lands:
        held = [s for s in spans if s[2] == ev["lane"] and s[0] <= ev["ts"] <= s[1]]
        assert held, f"land of {ev['lane']} logged outside its lock"
    assert_linear(repo)
    assert not owner_file(repo).exists()
    assert not landing_file(repo).exists()


def land_proc(repo: Repo, key: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "guard", "land", key, "--wait", "--json"],
        cwd=repo.path,
        env=dict(os.environ),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_simultaneous_lands_one_wins_the_rest_are_stale(repo: Repo) -> None:
    repo.config("gate_command", '"sleep 0.1"')
    keys = [f"lane-{i}" for i in range(N)]
    tips = {k: head(ready_lane(repo, k, {f"{k}/file.txt": f"{k}\n"})) for k in keys}
    procs = {k: land_proc(repo, k) for k in keys}
    codes = {}
    for k, p in procs.items():
        out, err = p.communicate(timeout=120)
        codes[k] = json.loads(out)["code"]
        assert "Traceback" not in err
    winners = [k for k, c in codes.items() if c == "landed"]
    assert len(winners) == 1, codes
    assert sorted(c for c in codes.values() if c != "landed") == ["stale_lane"] * (N - 1)
    assert repo.sha() == tips[winners[0]]
    check_serial(repo, 1)


@pytest.mark.parametrize("hooks", [False, True], ids=["no-hooks", "hooks"])
def test_every_worker_lands_by_syncing_and_retrying(repo: Repo, hooks: bool) -> None:
    if hooks:  # the reference-transaction hook checks every move of main against the lock
        assert repo.jlane("install").rc == 0
    repo.config("gate_command", '"sleep 0.1"')
    keys = [f"lane-{i}" for i in range(N)]
    for k in keys:
        ready_lane(repo, k, {f"{k}/file.txt": f"{k}\n", f"{k}/more.txt": "more\n"})
    results: dict[str, list[str]] = {k: [] for k in keys}
    errors: list[BaseException] = []

    def worker(key: str) -> None:
        try:
            for _ in range(4 * N):
                out, _ = land_proc(repo, key).communicate(timeout=120)
                code = json.loads(out)["code"]
                results[key].append(code)
                if code == "landed":
                    return
                assert code == "stale_lane", code
                sync = repo.jlane("sync", key)
                assert sync.json["state"] == "fresh", sync.stdout
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert all(r[-1] == "landed" for r in results.values()), results
    check_serial(repo, N)
    main = repo.sha() or ""
    assert head(repo.path) == main  # the hub followed every land
    for k in keys:
        lane_tip = repo.git("rev-parse", f"refs/heads/lane/{k}").stdout.strip()
        assert is_ancestor(repo.path, lane_tip, main)  # every landed commit is reachable
    files = repo.git("ls-tree", "-r", "--name-only", "main").stdout.split()
    assert sorted(f for f in files if f.startswith("lane-")) == sorted(
        f"{k}/{n}" for k in keys for n in ("file.txt", "more.txt")
    )
    assert len(repo.git("rev-list", "main").stdout.split()) == 1 + 2 * N
    assert repo.git("status", "--porcelain").stdout == ""
