"""Agents commit in their lanes in a tight loop (plain `git commit` through the installed
hooks, and `git lane checkpoint`) while a land, a sync of another lane, `git lane status
--json` polling and `git lane gc` run at the same time. Every git-lane answer keeps the CLI
contract (a result, or a refusal with a registered code: never exit 3, never a
traceback); an agent's own `git commit` may fail only on git's `index.lock`; every commit
that succeeded is still reachable at the end (lane branch, main, or kept/)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from stresshelp import Outcome, Tally, lane_argv, start_at, tip

from conftest import Repo, git
from enginehelp import assert_linear, is_ancestor, landing_file, owner_file

pytestmark = pytest.mark.slow

AGENTS = 3
COMMITS = 12  # per agent; every third through `git lane checkpoint`
INDEX_LOCK = "index.lock': File exists"


def test_commits_while_land_sync_status_and_gc_run(repo: Repo) -> None:
    assert repo.jlane("install").rc == 0
    repo.config("gate", "off")
    repo.config("max_lanes", "10")
    agents = {f"agent-{i}": repo.create(f"agent-{i}") for i in range(AGENTS)}
    # owned by this process (its land runs as a child of it), so gc does not release it
    # between two of its lands
    r = repo.jlane("create", "lander", "--owner-pid", str(os.getpid()))
    assert r.rc == 0, r.stderr
    lander = Path(r.json["lane"]["path"])
    syncer = repo.create("syncer")
    repo.commit(syncer, "syncer/base.txt", "s\n")

    tally = Tally()
    tally_lock = threading.Lock()
    committed: dict[str, list[str]] = {k: [] for k in agents}
    git_failures: Counter[str] = Counter()
    errors: list[BaseException] = []
    done = threading.Event()

    def check(o: Outcome) -> None:
        with tally_lock:
            tally.check(o)

    def agent(key: str, path: Path) -> None:
        try:
            for n in range(COMMITS):
                (path / key).mkdir(exist_ok=True)
                (path / key / f"{n}.txt").write_text(f"{key} {n}\n")
                if n % 3 == 2:
                    o = start_at(0.0, lane_argv("checkpoint", key, "--json"), path)
                    check(o)
                    if o.rc == 0 and o.code == "checkpointed":
                        committed[key].append(str(o.json["commit"]))
                    continue
                add = git(path, "add", "-A", check=False)
                res = (
                    add if add.returncode else git(path, "commit", "-q", "-m", f"{n}", check=False)
                )
                if res.returncode == 0:
                    committed[key].append(git(path, "rev-parse", "HEAD").stdout.strip())
                else:
                    assert INDEX_LOCK in res.stderr, (key, n, res.stdout, res.stderr)
                    git_failures["add" if add.returncode else "commit"] += 1
        except BaseException as exc:
            errors.append(exc)

    def loop(body: Callable[[], None]) -> None:
        try:
            while not done.is_set():
                body()
        except BaseException as exc:
            errors.append(exc)

    landed: list[str] = []
    rounds = Counter[str]()

    def land_and_sync() -> None:
        n = rounds["land"]
        rounds["land"] += 1
        repo.commit(lander, f"lander/{n}.txt", f"{n}\n")
        o = start_at(0.0, lane_argv("land", "lander", "--wait", "--json"), repo.path)
        check(o)
        if o.rc == 0 and o.code == "landed":
            landed.append(str(o.json["main_after"]))
        repo.commit(syncer, f"syncer/{n}.txt", f"{n}\n")
        check(start_at(0.0, lane_argv("sync", "syncer", "--json"), repo.path))

    def poll_status() -> None:
        check(start_at(0.0, lane_argv("status", "--json"), repo.path))

    def gc() -> None:
        check(start_at(0.0, lane_argv("gc", "--json"), repo.path))

    threads = [threading.Thread(target=agent, args=kv) for kv in agents.items()]
    side = [threading.Thread(target=loop, args=(f,)) for f in (land_and_sync, poll_status, gc)]
    for t in threads + side:
        t.start()
    for t in threads:
        t.join(900)
    done.set()
    for t in side:
        t.join(900)
    assert not errors, errors

    main = repo.sha() or ""
    assert_linear(repo)
    for t in landed:
        assert is_ancestor(repo.path, t, main)
    assert not owner_file(repo).exists() and not landing_file(repo).exists()
    kept = repo.state_dir / "kept"
    kept_text = (
        subprocess.run(["grep", "-r", "-a", "-h", "", str(kept)], capture_output=True).stdout
        if kept.exists()
        else b""
    )
    lost = []
    for key, shas in committed.items():
        assert shas, f"{key} never committed"
        branch = tip(repo, key)
        for sha in shas:
            if not (
                is_ancestor(repo.path, sha, branch)
                or is_ancestor(repo.path, sha, main)
                or sha.encode() in kept_text
            ):
                lost.append((key, sha))
    assert not lost, lost
    st = repo.jlane("status").json
    assert st["lock"] is None
    assert {ln["key"] for ln in st["lanes"] if ln["state"] == "active"} >= set(agents)
    sys.stderr.write(
        f"\n[{AGENTS} agents x {COMMITS}: {sum(map(len, committed.values()))} commits, "
        f"git failures {dict(git_failures)}; {rounds['land']} land/sync rounds, "
        f"{len(landed)} lands; {tally}]\n"
    )
