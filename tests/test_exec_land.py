"""Landing from inside `git lane exec` (guard/landsock.py), with real processes: CMD's
`git lane land` goes through the supervisor's land socket and the supervisor lands
(main moves although CMD itself could not write it: under Landlock, where the kernel
has it); output and exit status are a local land's, --json and --sync included; gate
failure, worker_land = "deny", another lane, a forged or dead socket and a raw client
that is not CMD's are refused cleanly."""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import LaneRun, Repo, lane
from sandboxhelp import NEEDS_LANDLOCK
from enginehelp import events, head, owner_file, ready_lane

from guard import binding


@pytest.fixture
def hub(repo: Repo, gitlane_on_path: Path) -> Repo:
    """`git lane` on PATH runs this checkout's guard (as it would, installed)."""
    repo.config("gate_command", "echo gate-says-hi; true")
    return repo


def in_exec(repo: Repo, key: str, script: str, *args: str) -> LaneRun:
    return repo.lane("exec", key, "--", "sh", "-c", script, "sh", *args)


def test_land_inside_exec_is_done_by_the_supervisor(hub: Repo) -> None:
    hub.config("worker_land", "allow")
    path = ready_lane(hub, "alpha")
    tip = head(path)
    r = in_exec(hub, "alpha", "git lane land")
    assert r.rc == 0, r.stderr
    assert hub.sha() == tip
    # the text a local land prints, and the gate's output streamed as it ran
    assert r.stdout.startswith("landed alpha: main "), r.stdout
    assert "gate-says-hi" in r.stderr
    # who landed: a child of the supervisor (the exec's own pid), not CMD
    (ex,) = events(hub, "exec")
    (via,) = events(hub, "land_via_supervisor")
    (landed,) = events(hub, "land")
    assert via["pid"] == ex["pid"] and via["exit_status"] == 0
    assert landed["pid"] == via["land_pid"] != via["peer_pid"]
    assert landed["main_after"] == tip


def test_land_json_and_exit_status_as_local(hub: Repo) -> None:
    hub.config("worker_land", "allow")
    path = ready_lane(hub, "alpha")
    r = in_exec(hub, "alpha", "git lane land --json")
    assert r.rc == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["code"] == "landed" and out["main_after"] == head(path) == hub.sha()
    assert [e["exit_status"] for e in events(hub, "land_via_supervisor")] == [0]
    # nothing to land: the refusal a local land gives, exit 1, as JSON on stdout
    r = in_exec(hub, "alpha", "git lane --json land")
    assert r.rc == 1
    assert json.loads(r.stdout)["code"] == "nothing_to_land"
    assert "refused [nothing_to_land]" in r.stderr


def test_gate_failure_propagates(hub: Repo) -> None:
    hub.config("worker_land", "allow")
    hub.config("gate_command", "echo broken-test; exit 3")
    ready_lane(hub, "alpha")
    main = hub.sha()
    r = in_exec(hub, "alpha", "git lane land; echo rc=$?")
    assert "rc=1" in r.stdout
    assert "refused [gate_failed]" in r.stderr and "broken-test" in r.stderr
    r = in_exec(hub, "alpha", "git lane land --json")
    assert r.rc == 1 and json.loads(r.stdout)["code"] == "gate_failed"
    assert hub.sha() == main
    assert [e["exit_status"] for e in events(hub, "land_via_supervisor")] == [1, 1]


def test_worker_land_deny_names_the_owner_command(hub: Repo) -> None:
    ready_lane(hub, "alpha")  # worker_land is "deny" by default
    main = hub.sha()
    r = in_exec(hub, "alpha", "git lane land --sync --json")
    assert r.rc == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["code"] == "role_forbidden"
    assert out["next"] == [
        "git lane land alpha --sync  # as the repository owner, outside the lane"
    ]
    assert hub.sha() == main
    assert events(hub, "land_via_supervisor") == []  # refused before any land started


def test_another_lane_is_refused(hub: Repo) -> None:
    hub.config("worker_land", "allow")
    ready_lane(hub, "alpha")
    ready_lane(hub, "beta")
    main = hub.sha()
    r = in_exec(hub, "alpha", "git lane land beta --json")
    assert r.rc == 1 and json.loads(r.stdout)["code"] == "role_forbidden"
    # a raw client in CMD naming beta, or smuggling a field, is refused by the supervisor
    raw = f"{shlex.quote(sys.executable)} -c {shlex.quote(RAW)}"
    for req in ('{"lane":"beta","sync":false,"wait":null,"json":true}',
                '{"lane":null,"sync":false,"wait":null,"json":true,"confirm":true}',
                '{"lane":null,"sync":"--force","wait":null,"json":true}',
                '{"lane":null,"sync":false,"wait":1e999,"json":true}',
                "not json"):  # fmt: skip
        r = in_exec(hub, "alpha", f'{raw} "$1"', req)
        assert r.rc == 0, r.stderr
        kind, payload = r.stdout.split(" ", 1)
        assert kind == "r", r.stdout
        code = json.loads(payload)["code"]
        assert code == ("role_forbidden" if "beta" in req else "land_via_supervisor_failed")
    assert hub.sha() == main
    assert events(hub, "land") == []


# A raw client: sends argv[1] as the request line, prints the first frame's type and body.
RAW = textwrap.dedent(
    """
    import os, socket, sys
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["GITLANE_LAND_SOCKET"])
    s.sendall(sys.argv[1].encode() + b"\\n")
    buf = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        buf += c
    n = int.from_bytes(buf[1:5], "big")
    print(buf[:1].decode(), buf[5:5 + n].decode())
    """
)


def test_forged_socket_is_refused_cleanly(hub: Repo, tmp_path: Path) -> None:
    hub.config("worker_land", "allow")
    ready_lane(hub, "alpha")
    path = ready_lane(hub, "beta")
    main = hub.sha()
    # pointing at nothing
    r = in_exec(hub, "alpha", f"{binding.LAND_SOCKET}={tmp_path}/nothing git lane land --json")
    assert r.rc == 1 and "Traceback" not in r.stderr
    out = json.loads(r.stdout)
    assert out["code"] == "land_via_supervisor_failed"
    assert out["details"]["reason"] == "no_socket"
    assert out["next"] == ["git lane land alpha  # as the repository owner, outside the lane"]
    # pointing at alpha's supervisor from a beta worker that alpha's exec did not start
    ready = tmp_path / "ready"
    hold = f'echo "${binding.LAND_SOCKET}" > {shlex.quote(str(ready))}; sleep 30'
    sup = subprocess.Popen(
        [sys.executable, "-m", "guard", "exec", "alpha", "--", "sh", "-c", hold],
        cwd=hub.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from enginehelp import wait_for

        wait_for(lambda: ready.exists() and ready.read_text().strip() != "", what="exec")
        sock = ready.read_text().strip()
        env = {binding.LANE: "beta", binding.ROLE: "worker", binding.LAND_SOCKET: sock}
        r = lane("land", "--json", cwd=path, env=env)
        assert r.rc == 1 and "Traceback" not in r.stderr
        out = json.loads(r.stdout)
        assert out["code"] == "land_via_supervisor_failed"
        assert out["details"]["reason"] == "not_descendant"
        # naming alpha from beta is refused before it reaches the socket
        r = lane("land", "alpha", "--json", cwd=path, env=env)
        assert r.rc == 1 and json.loads(r.stdout)["code"] == "role_forbidden"
    finally:
        sup.terminate()
        sup.wait(timeout=30)
    assert hub.sha() == main


def test_land_sync_through_the_socket(hub: Repo) -> None:
    hub.config("worker_land", "allow")
    path = ready_lane(hub, "alpha")
    beta = ready_lane(hub, "beta")
    assert hub.lane("land", "beta").rc == 0  # alpha is stale now
    r = in_exec(hub, "alpha", "git lane land --json")
    assert r.rc == 1 and json.loads(r.stdout)["code"] == "stale_lane"
    r = in_exec(hub, "alpha", "git lane land --sync --json")
    assert r.rc == 0, r.stderr
    assert json.loads(r.stdout)["code"] == "landed"
    assert hub.sha() == head(path)
    assert [e["exit_status"] for e in events(hub, "land_via_supervisor")] == [1, 0]
    assert (path / "beta.txt").exists() and (beta / "beta.txt").exists()


def test_exec_ends_and_the_socket_goes(hub: Repo) -> None:
    hub.config("worker_land", "allow")
    ready_lane(hub, "alpha")
    r = in_exec(hub, "alpha", f'echo "${binding.LAND_SOCKET}"')
    sock = r.stdout.strip()
    assert sock and not os.path.exists(sock) and not os.path.exists(os.path.dirname(sock))


# -- CMD under Landlock: it cannot write main, and its land still lands ------------------------
def _landlock_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    return max(int(libc.syscall(444, None, 0, 1)), 0)


CONFINE = textwrap.dedent(
    """
    # Apply Landlock (write rights only, granted on argv[1] ':'-separated dirs), then exec.
    import ctypes, os, sys
    abi = int(sys.argv[1]); dirs = sys.argv[2].split(":"); argv = sys.argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    bits = [1, 4, 5, 6, 7, 8, 9, 10, 11, 12] + ([13] if abi >= 2 else []) + ([14] if abi >= 3 else [])
    handled = sum(1 << b for b in bits)
    attr = ctypes.c_uint64(handled)
    fd = libc.syscall(444, ctypes.byref(attr), 8, 0)
    assert fd >= 0, ctypes.get_errno()
    class PB(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]
    for d in dirs:
        dfd = os.open(d, os.O_PATH)
        pb = PB(handled, dfd)
        assert libc.syscall(445, fd, 1, ctypes.byref(pb), 0) == 0, (d, ctypes.get_errno())
    assert libc.prctl(38, 1, 0, 0, 0) == 0
    assert libc.syscall(446, fd, 0) == 0, ctypes.get_errno()
    os.execvp(argv[0], argv)
    """
)


@pytest.mark.skipif(_landlock_abi() == 0, reason="this kernel has no Landlock")
def test_land_from_a_cmd_that_cannot_write_main(hub: Repo, tmp_path: Path) -> None:
    hub.config("worker_land", "allow")
    path = ready_lane(hub, "alpha")
    tip, main = head(path), hub.sha()
    common = hub.common_dir
    gd = Path(hub.git("rev-parse", "--path-format=absolute", "--git-dir", cwd=path).stdout.strip())
    cmdtmp = tmp_path / "cmd-tmp"  # the repository is under the system temp dir here
    cmdtmp.mkdir()
    grants = [str(path), str(common / "objects"), str(gd), str(cmdtmp), "/dev"]
    confine = tmp_path / "confine.py"
    confine.write_text(CONFINE)
    attempt = (
        f"export TMPDIR={shlex.quote(str(cmdtmp))}; "
        '"$GITLANE_REAL_GIT" -c core.hooksPath=/dev/null update-ref refs/heads/main HEAD '
        "&& echo WROTE-MAIN; "
        f"echo x > {shlex.quote(str(hub.path / 'hub-file'))} && echo WROTE-HUB; "
        "git lane land --json"
    )
    r = hub.lane(
        "exec", "alpha", "--",
        sys.executable, str(confine), str(_landlock_abi()), ":".join(grants),
        "sh", "-c", attempt,
    )  # fmt: skip
    assert "WROTE-MAIN" not in r.stdout and "WROTE-HUB" not in r.stdout, r.stdout
    assert "cannot lock ref" in r.stderr and "Permission denied" in r.stderr
    assert r.rc == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["code"] == "landed" and out["main_before"] == main
    assert hub.sha() == tip


def test_a_land_request_from_outside_any_exec_is_not_routed(hub: Repo) -> None:
    """GITLANE_LAND_SOCKET means nothing to an unbound process: the owner's land runs
    itself, whatever the variable says."""
    ready_lane(hub, "alpha")
    r = hub.jlane("land", "alpha", env={binding.LAND_SOCKET: "/nonexistent/s"})
    assert r.rc == 0 and r.code == "landed", r.stderr


def test_a_connection_not_from_cmd_is_refused(hub: Repo, tmp_path: Path) -> None:
    """A process of ours that the supervisor did not start (this test) gets
    not_descendant, whatever it asks."""
    hub.config("worker_land", "allow")
    ready_lane(hub, "alpha")
    ready = tmp_path / "ready"
    hold = f'echo "${binding.LAND_SOCKET}" > {shlex.quote(str(ready))}; sleep 30'
    sup = subprocess.Popen(
        [sys.executable, "-m", "guard", "exec", "alpha", "--", "sh", "-c", hold],
        cwd=hub.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from enginehelp import wait_for

        wait_for(lambda: ready.exists() and ready.read_text().strip() != "", what="exec")
        s = socket.socket(socket.AF_UNIX)
        s.connect(ready.read_text().strip())
        s.sendall(b'{"lane":null,"sync":false,"wait":null,"json":true}\n')
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        s.close()
        assert got[:1] == b"r"
        assert json.loads(got[5:])["details"]["reason"] == "not_descendant"
    finally:
        sup.terminate()
        sup.wait(timeout=30)
    assert events(hub, "land") == []


def test_a_client_that_goes_away_interrupts_its_land(hub: Repo, tmp_path: Path) -> None:
    """CMD's land killed while the gate runs: the supervisor interrupts the land it runs
    (the gate killed, the lock released, main unchanged) and exec waits for that."""
    hub.config("worker_land", "allow")
    hub.config("gate_command", "echo gate-started; sleep 60")
    ready_lane(hub, "alpha")
    main = hub.sha()
    err = tmp_path / "client.err"
    script = (
        f"{shlex.quote(sys.executable)} -m guard land 2> {shlex.quote(str(err))} & p=$!; "
        f"while ! grep -q gate-started {shlex.quote(str(err))} 2>/dev/null; do sleep 0.1; done; "
        "kill -TERM $p; wait $p; echo client=$?"
    )
    r = in_exec(hub, "alpha", script)
    assert r.rc == 0 and "client=143" in r.stdout, (r.stdout, r.stderr)
    assert hub.sha() == main
    (via,) = events(hub, "land_via_supervisor")
    assert via["client_gone"] is True and via["exit_status"] == 130
    (stopped,) = events(hub, "land_interrupted")
    assert stopped["main_state"] == "unchanged" and stopped["pid"] == via["land_pid"]
    assert not owner_file(hub).exists()  # the integration lock is released


def test_one_land_at_a_time(hub: Repo, tmp_path: Path) -> None:
    hub.config("worker_land", "allow")
    hub.config("gate_command", "echo gate-started; sleep 2")
    path = ready_lane(hub, "alpha")
    err = shlex.quote(str(tmp_path / "first.err"))
    script = (
        f"git lane land > /dev/null 2> {err} & p=$!; "
        f"while ! grep -q gate-started {err} 2>/dev/null; do sleep 0.1; done; "
        "git lane land --json; echo second=$?; wait $p; echo first=$?"
    )
    r = in_exec(hub, "alpha", script)
    assert "second=1" in r.stdout and "first=0" in r.stdout, (r.stdout, r.stderr)
    busy = json.loads(r.stdout.splitlines()[0])
    assert busy["code"] == "land_via_supervisor_failed" and busy["details"]["reason"] == "busy"
    assert busy["next"] == ["git lane status alpha", "git lane land alpha"]
    assert hub.sha() == head(path)


def test_close_wakes_the_accept_loop(tmp_path: Path) -> None:
    """exec's exit does not wait for the accept loop's poll timeout: close() wakes it (it
    used to add up to 0.2 s to every exec); a connection made after close lands nothing."""
    import time

    from guard import landsock
    from guard.store import Store

    srv = landsock.Server("alpha", str(tmp_path), dict(os.environ), Store(tmp_path / "state"))
    srv.sock.settimeout(30.0)  # a loop that waited for its timeout would hold close() 30 s
    srv.start()
    time.sleep(0.2)
    t = time.monotonic()
    srv.close()
    assert time.monotonic() - t < 5.0
    assert not os.path.exists(srv.path) and srv._threads == []


@NEEDS_LANDLOCK
@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep")
@pytest.mark.parametrize(
    ("refresh", "nap"),
    [("", "0417"), ("git update-index -q --refresh", "0423")],
    ids=["put-back", "put-back-refreshed"],
)
def test_a_lane_never_shows_the_gate_other_bytes_than_the_tip_it_lands(
    hub: Repo, tmp_path: Path, refresh: str, nap: str
) -> None:
    """G4 with the gate in the lane (gate_worktree = "lane", the default): before the gate
    the lane must be clean at the tip, after it the tip and the worktree must be as they
    were. A process of the lane (here CMD of a sandboxed exec whose land goes through the
    socket, worker_land = "allow"; a leftover of a plain exec does the same to the
    owner's land) waits for the gate to start, replaces a tracked file with a FIFO, feeds
    the gate's reader the bytes it wants, and renames the committed bytes back the moment
    the reader has them. The check after the gate finds the tip's content (a new inode,
    same bytes: git status hashes it and calls it clean), and main moves to a tip whose
    file the gate rejects. The sandbox lets CMD write the lane's index: refreshed after
    the put-back, it holds the new file's stat, so only the engine's own lstat sees it.
    Since red team 16B F1 a land through the socket gates in a clean worktree of the tip
    (CMD may write the lane while the gate runs): the gate never reads the lane's FIFO, it
    reads the tip's BAD and fails. The in-lane gate's swap checks are tests/test_land.py's
    (test_a_swap_put_back_and_refreshed_in_the_lanes_index_is_refused and the ones after)."""
    hub.config("worker_land", "allow")
    # a name pgrep finds, one a case (the cases may run side by side); after the read,
    # the gate waits (20 s at most) for the agent's put-back to be done, so the check
    # after it never races the agent's last step
    wait = "$(git rev-parse --git-dir)/put-back"
    hub.config(
        "gate_command",
        f"sleep 2.{nap}; ! grep -q BAD f.txt || exit 1; n=0;"
        f' while [ ! -e "{wait}" ] && [ $n -lt 2000 ]; do n=$((n+1)); sleep 0.01; done',
    )
    lane = hub.create("alpha")
    tip = hub.commit(lane, "f.txt", "BAD\n")
    agent = tmp_path / "agent.sh"
    agent.write_text(
        """#!/bin/sh
(
  n=0
  while ! pgrep -f 'sleep 2[.]NAP' >/dev/null; do n=$((n+1)); [ $n -gt 3000 ] && exit 1; sleep 0.01; done
  cp -p f.txt "$TMPDIR/bad"
  rm f.txt && mkfifo f.txt
  timeout 20 sh -c 'echo GOOD > f.txt'
  mv "$TMPDIR/bad" f.txt
  REFRESH
  : > "$(git rev-parse --git-dir)/put-back"
) &
git lane land alpha
wait
""".replace("REFRESH", refresh).replace("NAP", nap)
    )
    res = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "sh", str(agent)],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert hub.sha() != tip, (
        f"main moved to {tip[:12]}, whose f.txt the gate rejects: the gate read other bytes"
    )
    assert "gate_failed" in res.stdout + res.stderr, res.stdout + res.stderr
    assert (lane / "f.txt").read_text() == "BAD\n"  # the lane's file, put back, is left be
    r = hub.jlane("land", "alpha")  # the next, as written: the gate now sees the tip
    assert r.rc != 0 and r.json["code"] == "gate_failed", r.stdout
