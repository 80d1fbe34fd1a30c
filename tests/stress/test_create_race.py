"""13 agents run `git lane create KEY` at the same moment (the processes are started,
import git-lane, then wait at a barrier on the clock before calling the CLI): each gets its
lane, or a refusal whose code says to retry, and the retry gets it; no half-made lane
(a worktree without a record, a record without a worktree, a branch of neither) is left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stresshelp import Outcome, assert_contract

from conftest import Repo, git

pytestmark = pytest.mark.slow

N = 13
# the codes a create may answer because another process held what it needed at that moment
RETRYABLE = {"lock_busy", "lane_busy"}  # docs/codes.md "Retrying"

LAUNCH = """
import sys, time
import guard.cli, guard.commands.create  # imported before the barrier: the race is the create
t0 = float(sys.argv[1])
while time.time() < t0:
    pass
from guard.entry import main
main(sys.argv[2:])
"""


def create_at_once(repo: Repo, keys: list[str], extra: tuple[str, ...] = ()) -> list[Outcome]:
    t0 = time.time() + 1.0 + 0.15 * len(keys)  # every process started and imported by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LAUNCH, repr(t0), "create", k, *extra, "--json"],
            cwd=repo.path,
            env=dict(os.environ),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for k in keys
    ]
    outs = []
    for k, p in zip(keys, procs, strict=True):
        out, err = p.communicate(timeout=300)
        outs.append(Outcome(("create", k), p.returncode, out, err, 0.0))
    assert time.time() > t0
    return outs


def registry(repo: Repo) -> dict[str, dict[str, object]]:
    out = {}
    for p in (repo.state_dir / "lanes").glob("*.json"):
        rec = json.loads(p.read_text())
        out[rec["key"]] = rec
    return out


def worktree_paths(repo: Repo) -> set[str]:
    paths = set()
    for line in repo.worktrees().splitlines():
        if line.startswith("worktree "):
            paths.add(os.path.realpath(line.removeprefix("worktree ")))
    return paths - {os.path.realpath(repo.path)}


def assert_no_half_lane(repo: Repo, keys: list[str]) -> None:
    recs = registry(repo)
    assert set(recs) == set(keys)
    assert {os.path.realpath(str(r["path"])) for r in recs.values()} == worktree_paths(repo)
    branches = git(repo.path, "for-each-ref", "--format=%(refname:short)", "refs/heads/lane/")
    assert sorted(branches.stdout.split()) == sorted(f"lane/{k}" for k in keys)
    for k, r in recs.items():
        assert r["status"] == "active"
        got = git(Path(str(r["path"])), "symbolic-ref", "HEAD").stdout.strip()
        assert got == f"refs/heads/lane/{k}"
    st = repo.jlane("status").json
    assert sorted(ln["key"] for ln in st["lanes"] if ln["state"] == "active") == sorted(keys)
    rec = repo.jlane("reconcile")
    assert rec.rc == 0 and rec.json["changes"] == [], rec.stdout


@pytest.mark.parametrize("hooks", [False, True], ids=["plain", "hooks"])
def test_thirteen_creates_at_the_same_moment(repo: Repo, hooks: bool) -> None:
    if hooks:
        assert repo.jlane("install").rc == 0
    repo.config("max_lanes", str(2 * N))
    keys = [f"agent-{i}" for i in range(N)]
    outs = create_at_once(repo, keys)
    retried = []
    for o in outs:
        assert_contract(o)
        if o.rc != 0:
            assert o.code in RETRYABLE, o.stdout
            retried.append(o.argv[1])
    for k in retried:  # the retry an agent would make
        r = repo.jlane("create", k)
        assert r.rc == 0, r.stdout + r.stderr
    sys.stderr.write(f"\n[{N} creates at once: {len(retried)} retried]\n")
    assert_no_half_lane(repo, keys)


def test_thirteen_auto_keys_at_the_same_moment(repo: Repo) -> None:
    """No key given: each process picks the next free `adhoc-N` under the registry lock,
    so no two pick the same key and none fails for it."""
    repo.config("max_lanes", str(2 * N))
    t0 = time.time() + 1.0 + 0.15 * N
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LAUNCH, repr(t0), "create", "--json"],
            cwd=repo.path,
            env=dict(os.environ),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(N)
    ]
    keys = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        o = Outcome(("create",), p.returncode, out, err, 0.0)
        assert_contract(o)
        assert o.rc == 0, o.stdout
        keys.append(o.json["lane"]["key"])
    assert len(set(keys)) == N
    assert_no_half_lane(repo, keys)
