"""`git lane ready` and `git lane queue [--batch N]` through the real CLI, in real
repositories: the queue lands what is landable and leaves every other lane exactly as it
was (refs, worktree, index); a batch bisects to its failing lane; a batch killed part way
is finished or rolled back by reconcile."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
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
    rebase_dir,
    ready_lane,
    status_porcelain,
)

GATE = (
    'echo "checking $GITLANE_GATE_LANE"; if [ -e bad.txt ]; then echo "bad.txt is here"; exit 1; fi'
)


@pytest.fixture(autouse=True)
def hooked(repo: Repo) -> None:
    """The real hooks guard main: every move the queue makes passes the
    reference-transaction hook (main only to the lock record's tip, from its main)."""
    r = repo.lane("install")
    assert r.rc == 0, r.stderr
    repo.config("max_lanes", "10")


def snapshot(repo: Repo, key: str, path: Path) -> dict[str, Any]:
    """Everything a skipped lane must keep: its branch, HEAD, index, worktree files."""
    files = {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(path).parts
    }
    return {
        "branch": repo.sha(f"refs/heads/lane/{key}"),
        "head": head(path),
        "index": git(path, "ls-files", "-s").stdout,
        "status": status_porcelain(path),
        "files": files,
        "rebase": rebase_dir(path),
    }


def lands(repo: Repo) -> list[dict[str, Any]]:
    return [e for e in events(repo, "land") if e.get("code") == "landed"]


def mark(repo: Repo, key: str, env: dict[str, str] | None = None) -> None:
    r = repo.jlane("ready", key, env=env)
    assert r.rc == 0 and r.code == "ready", r.stdout + r.stderr


# -- ready ----------------------------------------------------------------------------------
def test_ready_marks_the_tip_and_status_shows_it(repo: Repo) -> None:
    alpha = ready_lane(repo, "alpha")
    tip = head(alpha)
    assert repo.jlane("status").json["lanes"][0]["ready"] is None
    mark(repo, "alpha")
    (view,) = repo.jlane("status").json["lanes"]
    assert view["ready"]["tip"] == tip and view["ready"]["current"] is True
    assert view["ready"]["by"] == "owner"

    # a commit after the mark: the new state was not said to be ready
    repo.commit(alpha, "more.txt", "more\n")
    (view,) = repo.jlane("status").json["lanes"]
    assert view["ready"]["current"] is False
    repo.config("gate", "off")
    r = repo.jlane("queue")
    assert r.rc == 0, r.stderr
    assert r.json["landed"] == []
    assert [(s["lane"], s["code"]) for s in r.json["skipped"]] == [("alpha", "ready_stale")]
    assert r.json["skipped"][0]["next"][0] == "git lane ready alpha"

    r = repo.jlane("ready", "alpha", "--unset")
    assert r.code == "ready_unset"
    assert repo.jlane("status").json["lanes"][0]["ready"] is None


def test_ready_refuses_what_is_not_a_ready_state(repo: Repo) -> None:
    alpha = repo.create("alpha")
    assert repo.jlane("ready", "alpha").code == "nothing_to_land"
    repo.commit(alpha, "a.txt", "a\n")
    (alpha / "a.txt").write_text("changed\n")
    r = repo.jlane("ready", "alpha")
    assert r.rc == 1 and r.code == "lane_dirty"
    assert not (repo.state_dir / "ready" / "alpha.json").exists()
    assert repo.jlane("ready", "nope").code == "unknown_lane"


def test_a_worker_marks_its_own_lane_but_may_not_queue(repo: Repo) -> None:
    ready_lane(repo, "alpha")
    ready_lane(repo, "beta")
    env = {"GITLANE_LANE": "alpha"}
    r = repo.jlane("ready", env=env)
    assert r.code == "ready" and r.json["lane"] == "alpha" and r.json["mark"]["by"] == "worker"
    assert repo.jlane("ready", "beta", env=env).code == "role_forbidden"
    r = repo.jlane("queue", env=env)
    assert r.rc == 1 and r.code == "role_forbidden"
    assert r.json["next"][0].startswith("git lane queue")


# -- the queue, one lane at a time ----------------------------------------------------------
def test_queue_lands_the_landable_and_leaves_the_rest_exactly_as_they_were(repo: Repo) -> None:
    repo.config("gate_command", GATE)
    base = repo.sha()
    alpha = ready_lane(repo, "alpha", {"README.md": "alpha\n"})
    beta = ready_lane(repo, "beta", {"b.txt": "b\n"})  # stale once alpha lands; syncs cleanly
    gamma = ready_lane(repo, "gamma", {"README.md": "gamma\n"})  # conflicts with alpha
    delta = ready_lane(repo, "delta", {"d.txt": "d\n"})
    eps = ready_lane(repo, "eps", {"bad.txt": "x\n"})  # stale, syncs cleanly, fails the gate
    zeta = ready_lane(repo, "zeta", {"z.txt": "z\n"})  # never marked
    for k in ("alpha", "beta", "gamma", "delta", "eps"):
        mark(repo, k)
    (delta / "d.txt").write_text("uncommitted\n")  # dirty after the mark
    (delta / "new.txt").write_text("untracked\n")
    keep = {
        k: snapshot(repo, k, p)
        for k, p in (("gamma", gamma), ("delta", delta), ("eps", eps), ("zeta", zeta))
    }

    r = repo.jlane("queue", "alpha", "beta", "gamma", "delta", "eps", "zeta")
    assert r.rc == 0, r.stdout + r.stderr
    res = r.json
    assert res["landed"] == ["alpha", "beta"]
    codes = {s["lane"]: s["code"] for s in res["skipped"]}
    assert codes == {
        "gamma": "sync_conflicts",
        "delta": "lane_dirty",
        "eps": "gate_failed",
        "zeta": "not_ready",
    }
    failed = next(s for s in res["skipped"] if s["lane"] == "eps")
    assert "bad.txt is here" in failed["gate"]["tail"]
    assert res["gate_runs"] == 3 and res["gate_runs_saved"] == 0

    # every skipped lane is exactly as it was: branch, HEAD, index, files, no rebase
    for k, p in (("gamma", gamma), ("delta", delta), ("eps", eps), ("zeta", zeta)):
        assert snapshot(repo, k, p) == keep[k], k
    # main: linear, alpha then beta (synced onto alpha), both reachable
    assert_linear(repo)
    assert repo.sha() == head(beta) == res["main_after"]
    assert is_ancestor(repo.path, head(alpha), head(beta))
    assert git(repo.path, "rev-list", "--count", f"{base}..main").stdout.strip() == "2"
    assert epoch(repo) == 2
    assert [(e["lane"], e["epoch"]) for e in lands(repo)] == [("alpha", 1), ("beta", 2)]
    assert (repo.path / "README.md").read_text() == "alpha\n"  # the hub came along
    # landed lanes lose their mark; skipped ones keep it
    marks = sorted(p.name for p in (repo.state_dir / "ready").iterdir())
    assert marks == ["delta.json", "eps.json", "gamma.json"]
    assert sorted(res["made_stale"]) == ["delta", "eps", "gamma", "zeta"]


def test_queue_order_is_the_ready_order(repo: Repo) -> None:
    repo.config("gate", "off")
    for k in ("one", "two", "three"):
        ready_lane(repo, k)
    for k in ("three", "one", "two"):
        mark(repo, k)
    r = repo.jlane("queue", "--all")
    assert r.json["landed"] == ["three", "one", "two"]
    assert [e["lane"] for e in lands(repo)] == ["three", "one", "two"]


def test_a_live_owner_that_did_not_mark_the_lane_keeps_it(repo: Repo) -> None:
    repo.config("gate", "off")
    mine = subprocess.Popen(
        ["sh", "-c", f"read go; {sys.executable} -m guard ready owned --json; read done"],
        cwd=repo.path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    other = subprocess.Popen(["sleep", "60"])
    try:
        assert repo.jlane("create", "owned", "--owner-pid", str(mine.pid)).rc == 0
        assert repo.jlane("create", "taken", "--owner-pid", str(other.pid)).rc == 0
        for k in ("owned", "taken"):
            p = Path(repo.jlane("path", k).json["path"])
            repo.commit(p, f"{k}.txt", f"{k}\n")
        assert mine.stdin is not None and mine.stdout is not None
        mine.stdin.write("go\n")
        mine.stdin.flush()
        assert json.loads(mine.stdout.readline())["code"] == "ready"  # marked by its owner
        # taken: marked while it had no live owner, then the owner came (an exec started)
        rec_path = repo.state_dir / "lanes" / "taken.json"
        rec = json.loads(rec_path.read_text())
        owner = (rec["owner_pid"], rec["owner_start"])
        rec["owner_pid"] = rec["owner_start"] = None
        rec_path.write_text(json.dumps(rec))
        mark(repo, "taken")
        rec["owner_pid"], rec["owner_start"] = owner
        rec_path.write_text(json.dumps(rec))
        before = repo.sha("refs/heads/lane/taken")

        r = repo.jlane("queue", "owned", "taken")
        assert r.json["landed"] == ["owned"], r.stdout
        assert [(s["lane"], s["code"]) for s in r.json["skipped"]] == [
            ("taken", "lane_owner_conflict")
        ]
        assert repo.sha("refs/heads/lane/taken") == before
    finally:
        if mine.stdin is not None:
            mine.stdin.close()
        mine.wait(10)
        other.kill()
        other.wait()


def test_progress_lines_on_a_terminal(repo: Repo) -> None:
    import pty

    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    ready_lane(repo, "beta")
    mark(repo, "alpha")
    mark(repo, "beta")
    master, slave = pty.openpty()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "guard", "queue"],
            cwd=repo.path,
            stdout=subprocess.PIPE,
            stderr=slave,
            text=True,
            timeout=120,
        )
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    assert r.returncode == 0
    text = out.decode()
    assert "queue 1/2 alpha: landed" in text and "queue 2/2 beta: syncing" in text
    assert "queue 2/2 beta: landed" in text
    assert "2 landed, 0 skipped" in r.stdout


# -- batches --------------------------------------------------------------------------------
def test_batch_bisects_to_the_failing_middle_lane(repo: Repo) -> None:
    repo.config("gate_command", GATE)
    base = repo.sha()
    keys = ["a", "b", "c", "d", "e"]
    paths = {k: ready_lane(repo, k, {f"{k}.txt": f"{k}\n"}) for k in keys}
    repo.commit(paths["c"], "bad.txt", "x\n")
    tips = {k: head(p) for k, p in paths.items()}
    for k in keys:
        mark(repo, k)
    keep_c = snapshot(repo, "c", paths["c"])

    r = repo.jlane("queue", "--batch", "5")
    assert r.rc == 0, r.stdout + r.stderr
    res = r.json
    assert res["landed"] == ["a", "b", "d", "e"]
    assert [(s["lane"], s["code"]) for s in res["skipped"]] == [("c", "gate_failed")]
    assert "bad.txt is here" in res["skipped"][0]["gate"]["tail"]
    # 1 run of the stack of 5, 2 to bisect (a+b passes, a+b+c fails), 1 for d+e: 4 of 5
    assert res["gate_runs"] == 4 and res["gate_runs_saved"] == 1
    assert snapshot(repo, "c", paths["c"]) == keep_c

    assert_linear(repo)
    main = repo.sha()
    assert git(repo.path, "rev-list", "--count", f"{base}..main").stdout.strip() == "4"
    assert subjects_of(repo, f"{base}..main") == [
        "edit e.txt",
        "edit d.txt",
        "edit b.txt",
        "edit a.txt",
    ]
    # each landed lane points at its own stacked tip, clean, on main's line
    for k in ("a", "b", "d", "e"):
        t = head(paths[k])
        assert repo.sha(f"refs/heads/lane/{k}") == t and is_ancestor(repo.path, t, main)
        assert status_porcelain(paths[k]) == ""
    assert head(paths["a"]) == tips["a"]  # the first lane's commits, as they are
    assert head(paths["e"]) == main
    # one epoch, one landed ref and one land event per lane
    assert epoch(repo) == 4
    evs = lands(repo)
    assert [(e["lane"], e["epoch"]) for e in evs] == [("a", 1), ("b", 2), ("d", 3), ("e", 4)]
    assert [e["main_after"] for e in evs] == [head(paths[k]) for k in ("a", "b", "d", "e")]
    assert [e["main_before"] for e in evs[1:]] == [e["main_after"] for e in evs[:-1]]
    refs = git(repo.path, "for-each-ref", "--format=%(objectname)", "refs/git-lane/landed/")
    assert refs.stdout.split() == [e["main_after"] for e in evs]
    # the hooks saw main move: once per batch, each time from the recorded main to the stack's tip
    reflog = git(repo.path, "reflog", "--format=%gs", "refs/heads/main").stdout.splitlines()
    assert len([x for x in reflog if x.startswith("git-lane: land")]) == 2
    st = repo.jlane("status").json
    assert st["lock"] is None and st["landing"] is False and not st["warnings"]
    # a stacked lane's old tip was replayed onto the stack, as a sync would: its work is
    # landed, and release (and gc) let the lane go without a discard confirmation
    r = repo.jlane("release", "b")
    assert (r.rc, r.code) == (0, "released"), r.stdout + r.stderr


def subjects_of(repo: Repo, rng: str) -> list[str]:
    return git(repo.path, "log", "--format=%s", rng).stdout.splitlines()


def test_batch_skips_a_lane_that_does_not_stack_and_leaves_it(repo: Repo) -> None:
    repo.config("gate", "off")
    a = ready_lane(repo, "a", {"README.md": "a\n"})
    b = ready_lane(repo, "b", {"README.md": "b\n"})
    c = ready_lane(repo, "c", {"c.txt": "c\n"})
    for k in ("a", "b", "c"):
        mark(repo, k)
    keep = snapshot(repo, "b", b)
    r = repo.jlane("queue", "--batch", "3")
    assert r.json["landed"] == ["a", "c"]
    assert [(s["lane"], s["code"]) for s in r.json["skipped"]] == [("b", "sync_conflicts")]
    assert snapshot(repo, "b", b) == keep
    assert repo.sha() == head(c) and is_ancestor(repo.path, head(a), head(c))
    assert r.json["gate_runs"] == 0


def test_a_configured_instruction_format_never_makes_a_batch_run_a_message_line(
    repo: Repo, tmp_path: Path
) -> None:
    """rebase.instructionFormat=%B in the repository's config puts each commit's whole
    message into a rebase's todo, where a line `exec PROG` is a command; the batch's
    stacking rebase names git's one-line default itself, so the line stays text."""
    repo.config("gate", "off")
    git(repo.path, "config", "rebase.instructionFormat", "%B")
    flag = tmp_path / "ran"
    ready_lane(repo, "a")
    b = repo.create("b")
    repo.commit(b, "b.txt", "b\n", f"b\n\nexec touch {flag}")
    for k in ("a", "b"):
        mark(repo, k)
    r = repo.jlane("queue", "--batch", "2")
    assert r.json["landed"] == ["a", "b"], (r.stdout, r.stderr)
    assert not flag.exists()


# -- a batch killed part way ----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("point", ["prepared", "main_moved", "batch_lane_moved", "hub_updated"])
def test_reconcile_finishes_or_rolls_back_a_batch(repo: Repo, point: str) -> None:
    repo.config("gate", "off")
    base = repo.sha()
    a = ready_lane(repo, "a")
    b = ready_lane(repo, "b")
    c = ready_lane(repo, "c")
    for k in ("a", "b", "c"):
        mark(repo, k)
    before = {k: snapshot(repo, k, p) for k, p in (("a", a), ("b", b), ("c", c))}
    r = subprocess.run(
        [sys.executable, "-m", "guard", "queue", "--batch", "3", "--json"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env={**os.environ, "GITLANE_TEST_CRASH_AT": point},
        timeout=120,
    )
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stdout, r.stderr)
    assert landing_file(repo).exists() and owner_file(repo).exists()
    moved = point != "prepared"
    stack = json.loads(landing_file(repo).read_text())["stack"]
    assert [e["lane"] for e in stack] == ["a", "b", "c"]
    assert repo.sha() == (stack[-1]["tip"] if moved else base)

    r2 = repo.jlane("reconcile")
    assert r2.rc == 0, r2.stdout + r2.stderr
    actions = {c["action"]: c for c in r2.json["changes"]}
    assert not landing_file(repo).exists() and not owner_file(repo).exists()
    if not moved:
        assert "landing_rolled_back" in actions
        assert repo.sha() == base and lands(repo) == [] and epoch(repo) == 0
        for k, p in (("a", a), ("b", b), ("c", c)):
            assert snapshot(repo, k, p) == before[k]
        return
    assert actions["landing_completed"]["batch"] == ["a", "b", "c"]
    main = repo.sha()
    assert main == stack[-1]["tip"] and main == head(c)
    assert_linear(repo)
    for e, p in zip(stack, (a, b, c), strict=True):
        assert repo.sha(f"refs/heads/lane/{e['lane']}") == e["tip"] == head(p)
        assert status_porcelain(p) == ""
    assert epoch(repo) == 3
    assert [(e["lane"], e["epoch"]) for e in lands(repo)][-3:] == [("a", 1), ("b", 2), ("c", 3)]
    refs = git(repo.path, "for-each-ref", "--format=%(objectname)", "refs/git-lane/landed/")
    assert refs.stdout.split() == [e["tip"] for e in stack]
    assert status_porcelain(repo.path) == ""  # the hub came along
    assert repo.jlane("reconcile").json["changes"] == []
    # and the next land goes on from there
    d = ready_lane(repo, "d")
    mark(repo, "d")
    assert repo.jlane("queue", "d").json["landed"] == ["d"]
    assert repo.sha() == head(d)


# -- cross-rebase after each land (guard/crossrebase.py, engineer G's) -----------------------
def test_queue_calls_cross_rebase_when_auto_sync_is_on(repo: Repo) -> None:
    pytest.importorskip("guard.crossrebase")
    repo.config("gate", "off")
    repo.config("auto_sync", "true")
    ready_lane(repo, "alpha")
    beta = ready_lane(repo, "beta")
    idle = ready_lane(repo, "idle")
    mark(repo, "alpha")
    mark(repo, "beta")
    r = repo.jlane("queue", "alpha", "beta")
    # beta, synced by the cross-rebase after alpha landed, keeps its mark and lands
    assert r.json["landed"] == ["alpha", "beta"], r.stdout
    first, second = r.json["auto_sync"]
    assert first["after"] == "alpha" and {"beta", "idle"} <= set(first["synced"])
    assert second["after"] == "beta" and "idle" in second["synced"]
    assert repo.sha() == head(beta)
    assert is_ancestor(repo.path, repo.sha() or "", head(idle))


def test_a_marked_lane_landed_by_hand_is_not_landed_again(repo: Repo) -> None:
    repo.config("gate", "off")
    ready_lane(repo, "a")
    b = ready_lane(repo, "b")
    mark(repo, "a")
    mark(repo, "b")
    assert repo.jlane("land", "a").code == "landed"
    r = repo.jlane("queue", "--batch", "2")
    assert r.json["landed"] == ["b"]
    assert [(s["lane"], s["code"]) for s in r.json["skipped"]] == [("a", "nothing_to_land")]
    assert repo.sha() == head(b) and epoch(repo) == 2


def test_queue_never_aborts_a_rebase_whose_state_the_lane_rewrote(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue syncs a stale lane and, on conflicts, aborts that rebase at once: the
    lane (a process of its own, its admin dir granted) rewrote `head-name` meanwhile to
    name tag v1, and git's abort would move the tag to the lane's commit. The lane is
    skipped rebase_state_untrusted instead; the other lands, the tag stays."""
    from guard.commands import queue as queue_cmd
    from guard.commands import sync
    from guard.repo import Repo as GRepo

    repo.config("gate", "off")
    repo.git("tag", "v1")
    v1 = repo.sha("refs/tags/v1")
    ready_lane(repo, "alpha", {"README.md": "alpha\n"})
    gamma = ready_lane(repo, "gamma", {"README.md": "gamma\n"})  # conflicts with alpha
    for k in ("alpha", "gamma"):
        mark(repo, k)
    real = sync.rebase

    def rebase_then_the_lane_writes(*a: object, **kw: object) -> object:
        res = real(*a, **kw)  # type: ignore[arg-type]
        gd = Path(git(gamma, "rev-parse", "--absolute-git-dir").stdout.strip())
        (gd / "rebase-merge" / "head-name").write_text("refs/tags/v1\n")
        return res

    monkeypatch.setattr(sync, "rebase", rebase_then_the_lane_writes)
    monkeypatch.chdir(repo.path)
    res = queue_cmd.run(GRepo.discover(str(repo.path)), ["alpha", "gamma"])
    assert res["landed"] == ["alpha"], res
    assert [(s["lane"], s["code"]) for s in res["skipped"]] == [
        ("gamma", "rebase_state_untrusted")
    ], res["skipped"]
    assert repo.sha("refs/tags/v1") == v1
