"""Nothing a sandboxed CMD starts outlives `git lane exec --sandbox` (guard/reap.py).

exec is a child subreaper: what CMD's tree orphans (setsid, a double fork, a daemon) is
re-parented to exec, waited for while CMD runs, and ended when CMD ends (SIGTERM, then
SIGKILL after 2 s, until none is left), before exec stops watching the hooks. Through
the real CLI, in a real repository, with real processes."""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sandboxhelp import NEEDS_LANDLOCK
from conftest import LaneRun, Repo
from enginehelp import events, pid_alive, wait_for

from guard import reap

pytestmark = NEEDS_LANDLOCK


def _exec(hub: Repo, tmp_path: Path, body: str, *args: str, key: str = "alpha") -> LaneRun:
    script = tmp_path / f"body-{key}.sh"
    script.write_text(body)
    return hub.lane("exec", "--sandbox", key, "--", "sh", str(script), *args)


# CMD: leave a grandchild behind (fork, setsid, fork again: it is nobody's child but init's,
# or a subreaper's), print its pid, CMD's own and the time, exit with argv[1]. The
# grandchild sleeps (its output to /dev/null: it holds no pipe of the test's open); with
# argv[2] "ignore" it ignores SIGTERM, with "note" it writes argv[3] when SIGTERM comes.
LEAVE = textwrap.dedent(
    """
    import os, signal, sys, time
    status, how = int(sys.argv[1]), sys.argv[2]
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            if how == "ignore":
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            elif how == "note":
                def note(*_):
                    open(sys.argv[3], "w").write("term")
                    os._exit(0)
                signal.signal(signal.SIGTERM, note)
            os.write(w, b"%d\\n" % os.getpid())
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    os.wait()
    print(os.read(r, 64).decode().strip(), os.getpid(), flush=True)
    print("%.3f" % time.time(), flush=True)
    sys.exit(status)
    """
)


def _leave(
    hub: Repo, tmp_path: Path, status: int, how: str, *more: str
) -> tuple[LaneRun, int, float, float]:
    """(exec's run, the grandchild's pid, when CMD ended, when exec had returned)"""
    script = tmp_path / "leave.py"
    script.write_text(LEAVE)
    argv = [sys.executable, str(script), str(status), how, *more]
    r = hub.lane("exec", "--sandbox", "alpha", "--", *argv)
    done = time.time()
    words = r.stdout.split()
    assert len(words) == 3, (r.rc, r.stdout, r.stderr)
    return r, int(words[0]), float(words[2]), done


def test_hole_lingering_process_disables_hooks_after_exec(hub: Repo, tmp_path: Path) -> None:
    """The second red-team pass's reproduction (tests/test_redteam_sandbox2.py on i11-rt2):
    CMD leaves a setsid'd child; exec returns; the child then `chmod -x`es the hooks
    (Landlock has no right over modes), and the owner's next `git commit` on main went
    through. Now the child ends with exec, and the hooks keep their modes."""
    hub.create("alpha")
    hooks = hub.common_dir / "hooks"
    modes = {p.name: p.stat().st_mode for p in hooks.iterdir()}
    body = f"setsid sh -c 'sleep 2; chmod -x \"$1\"/*' x '{hooks}' </dev/null >/dev/null 2>&1 &\n"
    r = _exec(hub, tmp_path, body)
    assert r.rc == 0, r.stderr
    time.sleep(4)
    assert {p.name: p.stat().st_mode for p in hooks.iterdir()} == modes
    main = hub.sha()
    (hub.path / "a.txt").write_text("moved\n")
    hub.git("commit", "-qam", "owner side", check=False)
    assert hub.sha() == main


def test_a_detached_grandchild_gets_sigterm_and_is_gone_when_exec_returns(
    hub: Repo, tmp_path: Path
) -> None:
    """SIGTERM first (a daemon may clean up), the exit status is CMD's, the pid is gone
    (not even a zombie) the moment exec returns, and exec says what it ended."""
    lane = hub.create("alpha")
    r, pid, _, _ = _leave(hub, tmp_path, 7, "note", str(lane / "termed"))
    assert r.rc == 7, r.stderr
    assert not os.path.exists(f"/proc/{pid}")
    assert (lane / "termed").read_text() == "term"
    assert "ended 1 process(es) CMD left running" in r.stderr
    assert events(hub, "exec_end")[-1]["ended"] == [pid]


def test_a_grandchild_that_ignores_sigterm_is_killed_after_2_s(hub: Repo, tmp_path: Path) -> None:
    hub.create("alpha")
    r, pid, cmd_end, done = _leave(hub, tmp_path, 0, "ignore")
    assert r.rc == 0, r.stderr
    assert not os.path.exists(f"/proc/{pid}")
    assert reap.GRACE <= done - cmd_end < reap.GRACE + 4, done - cmd_end


def test_a_signal_to_exec_ends_cmd_and_the_tree_and_hurries_the_grace(
    hub: Repo, tmp_path: Path
) -> None:
    """SIGTERM to exec is passed on to CMD (which dies of it: 143, CMD's status); the tree
    CMD left is ended after it. A second SIGTERM while exec waits out the grace for a
    process that ignores SIGTERM skips the rest of it: SIGKILL at once, exec still
    ending as it should, with CMD's status (not killed by the signal itself)."""
    hub.create("alpha")
    script = tmp_path / "hold.py"
    script.write_text(LEAVE.replace("sys.exit(status)", "time.sleep(300)"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--",
         sys.executable, str(script), "0", "ignore"],
        cwd=hub.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    pid, cmd = map(int, proc.stdout.readline().split())
    proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: not os.path.exists(f"/proc/{cmd}"), what="CMD to end and be waited for")
    assert pid_alive(pid)  # exec gives it the grace: it ignores SIGTERM
    t = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: not pid_alive(pid), what="the hurried SIGKILL")
    assert time.monotonic() - t < reap.GRACE - 0.5  # not the grace's end
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err  # CMD's, not exec killed by it
    assert not os.path.exists(f"/proc/{pid}")


# CMD: two orphans, one that sleeps and one that exits at once; then, from inside, who is
# the sleeper's parent, and how many ended children exec has not waited for (zombies).
ORPHANS = textwrap.dedent(
    """
    import os, time
    def orphan(sleep):
        r, w = os.pipe()
        if os.fork() == 0:
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                os.write(w, b"%d\\n" % os.getpid())
                time.sleep(sleep)
                os._exit(0)
            os._exit(0)
        os.wait()
        return int(os.read(r, 64))
    sleeper = orphan(300)
    for _ in range(5):
        orphan(0)
    time.sleep(1.5)
    exec_pid = os.getppid()
    def stat(pid):
        raw = open("/proc/%d/stat" % pid, "rb").read()
        return raw[raw.rfind(b")") + 2 :].split()
    zombies = 0
    for name in os.listdir("/proc"):
        try:
            f = stat(int(name))
        except (ValueError, OSError):
            continue
        zombies += int(f[1]) == exec_pid and f[0] == b"Z"
    print(int(stat(sleeper)[1]) == exec_pid, zombies, sleeper)
    """
)


def test_orphans_are_reparented_to_exec_and_waited_for_while_cmd_runs(
    hub: Repo, tmp_path: Path
) -> None:
    hub.create("alpha")
    script = tmp_path / "orphans.py"
    script.write_text(ORPHANS)
    r = hub.lane("exec", "--sandbox", "alpha", "--", sys.executable, str(script))
    assert r.rc == 0, r.stderr
    reparented, zombies, sleeper = r.stdout.split()
    assert (reparented, zombies) == ("True", "0"), r.stdout
    assert not os.path.exists(f"/proc/{sleeper}")


# A detached process that ignores SIGTERM and keeps forking children that ignore it too
# (and fork once more); it stops by itself after 20 s or 300 forks if nobody ends it.
FORKER = textwrap.dedent(
    """
    import os, signal, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            end, n = time.time() + 20, 0
            while time.time() < end and n < 300:
                if os.fork() == 0:
                    if os.fork() == 0:
                        time.sleep(30)
                        os._exit(0)
                    time.sleep(30)
                    os._exit(0)
                n += 1
                time.sleep(0.005)
            os._exit(0)
        os._exit(0)
    os.wait()
    time.sleep(0.5)
    """
)


def _marked(marker: str) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    out.append(int(name))
        except (ValueError, OSError):
            continue
    return out


def test_a_tree_that_keeps_forking_ends(hub: Repo, tmp_path: Path) -> None:
    hub.create("alpha")
    script = tmp_path / "forker.py"
    script.write_text(FORKER)
    marker = f"forker-{os.getpid()}-{time.monotonic_ns()}"
    try:
        t = time.monotonic()
        r = hub.lane("exec", "--sandbox", "alpha", "--", sys.executable, str(script), marker)
        assert r.rc == 0, r.stderr
        assert time.monotonic() - t < 20
        assert _marked(marker) == []
        assert len(events(hub, "exec_end")[-1]["ended"]) > 1
    finally:
        for _ in range(100):  # only when the test fails: leave nothing running
            left = _marked(marker)
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.1)


def test_plain_exec_leaves_a_detached_process_alone(hub: Repo, tmp_path: Path) -> None:
    """Without --sandbox nothing changes: CMD can do all its user can (there is no
    sandbox for a leftover to keep), and a daemon it starts on purpose keeps running."""
    hub.create("alpha")
    script = tmp_path / "leave.py"
    script.write_text(LEAVE)
    r = hub.lane("exec", "alpha", "--", sys.executable, str(script), "3", "plain")
    assert r.rc == 3, r.stderr
    pid = int(r.stdout.split()[0])
    try:
        assert pid_alive(pid)
        assert events(hub, "exec_end")[-1]["ended"] == []
    finally:
        os.kill(pid, signal.SIGKILL)


# Start argv with prctl(PR_SET_CHILD_SUBREAPER, ...) failing (EPERM) under a seccomp filter.
_ARCH = {"x86_64": (0xC000003E, 157), "aarch64": (0xC00000B7, 167)}


def _no_subreaper() -> None:
    arch, nr = _ARCH[platform.machine()]
    prog = [
        (0x20, 0, 0, 4),  # ld arch
        (0x15, 0, 4, arch),  # not ours: allow
        (0x20, 0, 0, 0),  # ld nr
        (0x15, 0, 2, nr),  # not prctl: allow
        (0x20, 0, 0, 16),  # ld args[0]
        (0x15, 1, 0, reap.PR_SET_CHILD_SUBREAPER),
        (0x06, 0, 0, 0x7FFF0000),  # allow
        (0x06, 0, 0, 0x00050000 | 1),  # EPERM
    ]
    raw = b"".join(struct.pack("HBBI", *i) for i in prog)
    buf = ctypes.create_string_buffer(raw)

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
    fprog = Fprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, filter


@pytest.mark.skipif(platform.machine() not in _ARCH, reason="no syscall numbers for this machine")
def test_no_subreaper_no_cmd(hub: Repo, tmp_path: Path) -> None:
    """exec that cannot become a subreaper does not run CMD (what it left would outlive
    exec): sandbox_failed, nothing run."""
    lane = hub.create("alpha")
    res = subprocess.run(
        [sys.executable, "-m", "guard", "--json", "exec", "--sandbox", "alpha", "--",
         "sh", "-c", "echo ran > ran"],
        cwd=hub.path, capture_output=True, text=True, preexec_fn=_no_subreaper, timeout=120,
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    r = LaneRun(res.returncode, res.stdout, res.stderr)
    assert r.code == "sandbox_failed" and "subreaper" in r.json["message"]
    assert not (lane / "ran").exists()
    # the same filter leaves a plain exec alone: it makes no subreaper
    res = subprocess.run(
        [sys.executable, "-m", "guard", "exec", "alpha", "--", "sh", "-c", "echo ran > ran"],
        cwd=hub.path, capture_output=True, text=True, preexec_fn=_no_subreaper, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (lane / "ran").exists()
