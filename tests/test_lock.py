"""The integration lock (G1): take-over of a dead owner on this host only, never of
another host's record, and only the token holder releases."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import Repo
from enginehelp import events, flock_holder, head, owner_file, pid_alive, ready_lane
from guard import lock
from guard.errors import Refusal
from guard.repo import Repo as Engine


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def write_owner(repo: Repo, **fields: object) -> str:
    rec = {
        "pid": dead_pid(),
        "start": "",
        "host": socket.gethostname(),
        "token": "feedfacecafebeef",
        "lane": "ghost",
        "main_before": repo.sha(),
        "tip": repo.sha(),
        "since": "2026-01-01T00:00:00Z",
    }
    rec.update(fields)
    body = "".join(f"{k}={v}\n" for k, v in rec.items())
    p = owner_file(repo)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(body)
    return body


def test_a_lock_left_by_a_dead_process_is_taken_over(repo: Repo) -> None:
    repo.config("gate", "off")
    path = ready_lane(repo, "alpha")
    pid = dead_pid()
    write_owner(repo, pid=pid)
    r = repo.jlane("land", "alpha")
    assert r.rc == 0 and r.code == "landed", r.stdout
    assert repo.sha() == head(path)
    (ev,) = [e for e in events(repo) if e.get("code") == "lock_taken_over"]
    assert ev["previous"]["pid"] == pid and ev["lane"] == "alpha"
    assert not owner_file(repo).exists()


def test_a_reused_pid_is_not_the_recorded_owner(repo: Repo) -> None:
    """Same pid, different start time: the recorded owner is dead (pid reuse)."""
    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    other = subprocess.Popen(["sleep", "60"])
    try:
        write_owner(repo, pid=other.pid, start="1000.0")
        r = repo.jlane("land", "alpha")
        assert r.code == "landed", r.stdout
    finally:
        other.kill()
        other.wait()
    assert any(e.get("code") == "lock_taken_over" for e in events(repo))


def test_a_live_owner_on_this_host_is_respected(repo: Repo) -> None:
    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    other = flock_holder(repo)  # a live land holds the flock as long as its record
    try:
        start = psutil.Process(other.pid).create_time()
        body = write_owner(repo, pid=other.pid, start=repr(start))
        r = repo.jlane("land", "alpha")
        assert r.rc == 1 and r.code == "lock_busy", r.stdout
        assert r.json["details"]["holder"]["pid"] == other.pid
        assert owner_file(repo).read_text() == body
        # reconcile leaves a live owner alone
        repo.jlane("reconcile")
        assert owner_file(repo).read_text() == body
    finally:
        other.kill()
        other.wait()
    assert repo.jlane("land", "alpha").code == "landed"


def test_another_hosts_lock_is_never_taken_automatically(repo: Repo) -> None:
    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    body = write_owner(repo, host="otherhost", pid=dead_pid())
    before = repo.sha()
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code == "lock_busy", r.stdout
    d = r.json["details"]
    assert d["foreign_host"] is True
    assert d["holder"]["host"] == "otherhost" and d["holder"]["since"] == "2026-01-01T00:00:00Z"
    t0 = time.monotonic()
    assert repo.jlane("land", "alpha", "--wait", "0.3").code == "lock_busy"
    assert time.monotonic() - t0 >= 0.3
    rec = repo.jlane("reconcile")
    assert rec.rc == 0
    st = repo.jlane("status").json
    assert st["lock"]["host"] == "otherhost" and st["lock"]["lane"] == "ghost"
    assert owner_file(repo).read_text() == body
    assert repo.sha() == before
    assert not any(e.get("code") == "lock_taken_over" for e in events(repo))
    # the owner removes it by hand (the refusal says how), then lands work again
    owner_file(repo).unlink()
    assert repo.jlane("land", "alpha").code == "landed"


def test_reconcile_clears_a_dead_owner_record(repo: Repo) -> None:
    write_owner(repo, pid=dead_pid())
    r = repo.jlane("reconcile")
    assert r.rc == 0
    assert any(c["action"] == "lock_cleared" for c in r.json["changes"])
    assert not owner_file(repo).exists()
    assert repo.jlane("status").json["lock"] is None


def test_only_the_token_holder_releases(repo: Repo) -> None:
    eng = Engine.discover(repo.path)
    main = repo.sha() or ""
    held = lock.acquire(eng, "alpha", main, main)
    assert owner_file(repo).exists()
    mine = owner_file(repo).read_text()
    assert f"token={held.token}\n" in mine and f"pid={os.getpid()}\n" in mine
    # someone else's record replaced ours (a take-over elsewhere, a hand edit)
    theirs = mine.replace(held.token, "0" * 16)
    owner_file(repo).write_text(theirs)
    with pytest.raises(Refusal) as exc:
        lock.update(eng, held, tip=main)
    assert exc.value.code == "lock_lost"
    lock.release(eng, held)
    assert owner_file(repo).read_text() == theirs  # not ours: left alone
    owner_file(repo).unlink()

    held = lock.acquire(eng, "alpha", main, main)
    lock.update(eng, held, tip="f" * 40)
    assert "tip=" + "f" * 40 in owner_file(repo).read_text()
    lock.release(eng, held)
    assert not owner_file(repo).exists()


def test_a_second_acquire_in_the_same_process_is_busy(repo: Repo) -> None:
    eng = Engine.discover(repo.path)
    main = repo.sha() or ""
    held = lock.acquire(eng, "alpha", main, main)
    try:
        with pytest.raises(Refusal) as exc:
            lock.acquire(eng, "beta", main, main)
        assert exc.value.code == "lock_busy"
        assert exc.value.details["holder"]["lane"] == "alpha"
    finally:
        lock.release(eng, held)


def _hammer(path: str, n: int, out: str, wid: int) -> None:
    eng = Engine.discover(path)
    for i in range(n):
        held = lock.acquire(eng, f"w{wid}", "x", "y", wait=60)
        t0 = time.time()
        time.sleep(0.005)
        t1 = time.time()
        with open(out, "a") as f:
            f.write(f"{wid} {i} {t0!r} {t1!r}\n")
        lock.release(eng, held)


@pytest.mark.slow
def test_lock_excludes_across_processes(repo: Repo, tmp_path: Path) -> None:
    out = tmp_path / "intervals.txt"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(str(repo.path), 15, str(out), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    spans = sorted(tuple(map(float, ln.split()[2:])) for ln in out.read_text().splitlines())
    assert len(spans) == 60
    for (_, a1), (b0, _) in itertools.pairwise(spans):
        assert a1 <= b0, "two holders at once"
    assert not owner_file(repo).exists()


# -- the gate record a land killed mid-gate leaves (locks/integration.gate) ----------------
def _session_of_its_own() -> subprocess.Popen[bytes]:
    """A process of its own session that git-lane never started (a login shell, a daemon)."""
    p = subprocess.Popen(["sleep", "600"], start_new_session=True)
    time.sleep(0.2)
    return p


def _ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def _plant_gate(repo: Repo, body: str) -> None:
    (repo.state_dir / "locks").mkdir(parents=True, exist_ok=True)
    (repo.state_dir / "locks" / "integration.gate").write_text(body)


@pytest.mark.parametrize(
    "record",
    [
        # started before the leader (a record left before the pid was reused)
        "pid={pid}\nticks={before}\nlane=alpha\nland=1\n",
        # the leader's very start time, but no token (a planted record)
        "pid={pid}\nticks={exact}\nlane=alpha\nland=1\n",
        # the leader's start time and a token the leader does not hold
        "pid={pid}\nticks={exact}\nlane=alpha\nland=1\ntoken=feedfacecafebeef\n",
    ],
    ids=["earlier-ticks", "no-token", "wrong-token"],
)
def test_reconcile_never_kills_a_session_a_gate_record_names_but_git_lane_did_not_start(
    repo: Repo, record: str
) -> None:
    """A gate record is trusted only as far as the session proves it: the leader started
    at exactly the recorded ticks and holds the recorded GITLANE_GATE_TOKEN."""
    assert repo.lane("install").rc == 0
    victim = _session_of_its_own()
    try:
        t = _ticks(victim.pid)
        _plant_gate(repo, record.format(pid=victim.pid, before=t - 1, exact=t))
        r = repo.jlane("reconcile")
        assert r.rc == 0, r.stdout
        assert "gate_stopped" not in [c["action"] for c in r.json["changes"]]
        time.sleep(0.2)
        assert pid_alive(victim.pid), f"reconcile killed an unrelated session: {r.stdout}"
        assert not (repo.state_dir / "locks" / "integration.gate").exists()
    finally:
        victim.kill()
        victim.wait()


def test_land_never_kills_a_session_a_planted_gate_record_names(repo: Repo) -> None:
    """Every land that takes the lock stops a dead land's gate: `ticks=0` in a planted
    record once had it kill every process of the named session."""
    assert repo.lane("install").rc == 0
    repo.config("gate_command", "true")
    path = ready_lane(repo, "alpha")
    victim = _session_of_its_own()
    try:
        _plant_gate(repo, f"pid={victim.pid}\nticks=0\nlane=alpha\nland=1\n")
        r = repo.jlane("land", "alpha")
        assert r.rc == 0 and r.code == "landed", r.stdout
        assert repo.sha() == head(path)
        time.sleep(0.2)
        assert pid_alive(victim.pid), f"land killed an unrelated session: {r.stdout}"
        assert not any(e.get("kind") == "gate_stopped" for e in events(repo))
    finally:
        victim.kill()
        victim.wait()


def test_a_fifo_as_the_gate_record_hangs_nothing_and_is_set_aside(repo: Repo) -> None:
    """A FIFO in the gate record's place is never read (reconcile, and every land holding
    the integration flock, would hang on it): set aside, kept; doctor tells of it."""
    assert repo.lane("install").rc == 0
    repo.config("gate_command", "true")
    ready_lane(repo, "alpha")
    gate = repo.state_dir / "locks" / "integration.gate"
    gate.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(gate)
    d = repo.jlane("doctor")
    (c,) = [c for c in d.json["checks"] if c["name"] == "gate record"]
    assert c["status"] == "warn" and c["fix"] == "git lane reconcile", c
    for args in (["reconcile"], ["land", "alpha"]):
        p = subprocess.Popen(
            [sys.executable, "-m", "guard", *args, "--json"],
            cwd=repo.path,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise AssertionError(f"git lane {args[0]} hung on a FIFO gate record") from None
        assert p.returncode == 0, out
        res = json.loads(out)
        if args[0] == "reconcile":
            (ch,) = [c for c in res["changes"] if c["action"] == "gate_record_set_aside"]
            assert stat.S_ISFIFO(os.lstat(ch["to"]).st_mode)  # kept
            os.mkfifo(gate)  # again, for the land
        else:
            assert res["code"] == "landed", out
    assert not os.path.lexists(gate)
    assert all(c["name"] != "gate record" for c in repo.jlane("doctor").json["checks"])


def test_a_lock_record_cut_short_naming_a_live_pid_is_taken_over(repo: Repo) -> None:
    """`pid=1` alone (no start time, so any live pid 1 passed for its owner) with the flock
    free once had every land refused lock_busy, its `--wait` waiting in vain. A land of
    this host holds the flock as long as its record exists: whoever takes the flock takes
    such a record over. Doctor warns of it; reconcile clears it."""
    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    owner_file(repo).parent.mkdir(parents=True, exist_ok=True)
    owner_file(repo).write_text("pid=1\n")
    d = repo.jlane("doctor")
    (c,) = [c for c in d.json["checks"] if c["name"] == "lock"]
    assert c["status"] == "warn" and c["fix"] == "git lane reconcile", c
    r = repo.jlane("reconcile")
    assert r.rc == 0 and {"action": "lock_cleared", "pid": 1, "lane": ""} in r.json["changes"]
    assert not owner_file(repo).exists()
    owner_file(repo).write_text("pid=1\n")
    r = repo.jlane("land", "alpha")
    assert r.rc == 0 and r.code == "landed", r.stdout
    (ev,) = [e for e in events(repo) if e.get("kind") == "lock_takeover"]
    assert ev["previous"]["pid"] == 1
    assert not owner_file(repo).exists()
