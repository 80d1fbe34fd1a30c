"""Process identity: is a recorded owner still the same live process (pid plus start time,
so a reused pid is not mistaken for it)? Which processes are below this one? /proc/PID/stat
is read here and nowhere else."""

from __future__ import annotations

import os
import socket


def hostname() -> str:
    return socket.gethostname()


_BOOT: float | None = None


def stat_fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat from field 3 (state) on, so field N of proc(5) is item N-3; None when
    the process is gone. Raises OSError when /proc is not usable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return raw[raw.rfind(b")") + 2 :].split()  # after "pid (comm) ": comm may hold spaces


def start_ticks(pid: int) -> str:
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot), exactly as the
    reference-transaction hook reads it; empty where /proc cannot tell."""
    try:
        fields = stat_fields(pid)
        return fields[19].decode() if fields else ""
    except (OSError, IndexError, UnicodeDecodeError):
        return ""


def _linux_start_time(pid: int) -> float | None:
    """psutil's create_time, computed the way psutil does on Linux (btime + starttime
    ticks) from /proc, so the land path does not pay for importing psutil; None when
    the process is gone or a zombie. Raises OSError when /proc is not usable."""
    global _BOOT
    if _BOOT is None:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime"):
                    _BOOT = float(line.split()[1])
                    break
            else:
                raise OSError("no btime in /proc/stat")
    fields = stat_fields(pid)
    if fields is None or fields[0] == b"Z":  # gone, or killed and not yet reaped
        return None
    return _BOOT + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def start_time(pid: int) -> float | None:
    if pid <= 0:
        return None
    if os.path.isdir("/proc/self"):
        try:
            return _linux_start_time(pid)
        except (OSError, ValueError, IndexError):
            pass  # an odd /proc: ask psutil
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:  # killed, not yet reaped: not alive
            return None
        return float(proc.create_time())
    except (psutil.Error, ValueError, OverflowError):
        return None


def alive(pid: int | None, start: float | None) -> bool:
    """Is `pid` the very process that was recorded (same start time, to 10 ms)?"""
    if not pid or pid <= 0:
        return False
    now = start_time(pid)
    if now is None:
        return False
    if start is None:
        return True
    return abs(now - start) < 0.05


ANCESTRY_MAX = 128  # parents looked at, at most: a loop in /proc (it cannot be) ends here


def ancestors(pid: int | None = None) -> list[int]:
    """The parent chain of `pid` (default: this process), nearest first, without `pid`
    itself and without pid 1 and 0. From /proc where there is one, else psutil."""
    pid = os.getpid() if pid is None else pid
    out: list[int] = []
    if os.path.isdir("/proc/self"):
        cur = pid
        for _ in range(ANCESTRY_MAX):
            fields = stat_fields(cur)  # OSError: /proc unusable; the caller decides
            if fields is None:
                break
            cur = int(fields[1])  # field 4: ppid
            if cur <= 1:
                break
            out.append(cur)
        return out
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).parents() if p.pid > 1][:ANCESTRY_MAX]
    except psutil.Error:
        return out


def descendants(root: int) -> dict[int, tuple[bytes, str]]:
    """Every process below `root` (its children, theirs, ...), from one pass over /proc,
    as {pid: (state, start ticks)}: state is proc(5)'s letter (b"Z" a zombie), start ticks
    as start_ticks() gives them. A process started during the pass may be missing: callers
    that must see all of them look again. Raises OSError when /proc cannot be listed."""
    kids: dict[int, list[int]] = {}
    info: dict[int, tuple[bytes, str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = stat_fields(int(name))
            if fields is None:
                continue  # ended since the listing
            kids.setdefault(int(fields[1]), []).append(int(name))  # field 4: ppid
            info[int(name)] = (fields[0], fields[19].decode())
        except (OSError, IndexError, ValueError, UnicodeDecodeError):
            continue  # ended while read, or not a process we may read: its parent is seen
    out: dict[int, tuple[bytes, str]] = {}
    todo = list(kids.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in out and pid != root:
            out[pid] = info[pid]
            todo.extend(kids.get(pid, ()))
    return out


def cmdline(pid: int) -> list[str] | None:
    """The argv of process `pid` (/proc/PID/cmdline, else psutil); None when it cannot
    be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
        return [os.fsdecode(a) for a in raw.split(b"\0")[:-1]]
    except OSError:
        pass
    try:
        import psutil

        return [str(a) for a in psutil.Process(pid).cmdline()]
    except Exception:
        return None


def environ_has(pid: int, entry: str) -> bool:
    """Does process `pid` hold `entry` (NAME=value) in the environment it was started
    with (/proc/PID/environ)? False when that cannot be read (gone, a zombie, not ours)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read(1 << 22)
    except OSError:
        return False
    return os.fsencode(entry) in raw.split(b"\0")


def kill_session(sid: int, ticks: str, token: str) -> list[int]:
    """SIGKILL every process of session `sid` (a gate a killed land left running, with all
    it started), only once the session is proven the gate's: its leader, alive, started at
    exactly `ticks` (start_ticks) and holds GITLANE_GATE_TOKEN=`token` in its environment
    (gate.run puts it there). With the leader gone, only the members that hold the token
    themselves. Nothing without /proc, `ticks` or `token`: what cannot be proven the
    gate's (a reused pid, a planted record) is never killed."""
    import signal

    if sid <= 1 or not ticks.isdigit() or not token or not os.path.isdir("/proc/self"):
        return []
    mark = f"GITLANE_GATE_TOKEN={token}"
    members: dict[int, tuple[bytes, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = stat_fields(int(name))
            if fields is None or int(fields[3]) != sid:
                continue  # field 6: session
            members[int(name)] = (fields[0], int(fields[19]))  # state, field 22: start time
        except (OSError, IndexError, ValueError):
            continue
    leader = members.get(sid)
    if leader is not None and leader[0] != b"Z":
        if leader[1] != int(ticks) or not environ_has(sid, mark):
            return []  # the pid names another session now (or one we cannot prove ours)
        doomed = [p for p, (_, t) in members.items() if t >= int(ticks)]
    else:  # the leader ended: each member proves itself
        doomed = [p for p, (_, t) in members.items() if t >= int(ticks) and environ_has(p, mark)]
    killed: list[int] = []
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            continue
    return killed
