"""Process identity: who is the caller (worker or main), and is a recorded owner still
the same live process (pid plus start time, so a reused pid is not mistaken for it)."""

from __future__ import annotations

import os
import socket

from guard.errors import Refusal


def bound_lane() -> str | None:
    return os.environ.get("GITLANE_LANE") or None


def is_worker() -> bool:
    return bound_lane() is not None or os.environ.get("GITLANE_ROLE") == "worker"


def forbid_worker(action: str) -> None:
    if is_worker():
        who = f"lane {bound_lane()}" if bound_lane() else "a GITLANE_ROLE=worker process"
        raise Refusal(
            "role_forbidden",
            f"{action} is for the repository owner, not for a worker ({who})",
            next=[f"ask the owner to run: git lane {action}"],
            details={"action": action, "lane": bound_lane()},
        )


def resolve_lane_key(key: str | None, action: str) -> str | None:
    """A worker may only name its own lane; with no key it gets its own."""
    own = bound_lane()
    if own is None:
        if key is None and is_worker():
            raise Refusal(
                "role_forbidden",
                f"a GITLANE_ROLE=worker process must name its lane for {action}",
                next=[f"git lane {action} <KEY>"],
            )
        return key
    if key is not None and key != own:
        raise Refusal(
            "role_forbidden",
            f"this process is bound to lane {own} and may not {action} lane {key}",
            next=[f"git lane {action} {own}"],
            details={"lane": key, "bound": own},
        )
    return own


def hostname() -> str:
    return socket.gethostname()


_BOOT: float | None = None


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
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # after "pid (comm) ": comm may hold spaces
    if fields[0] == b"Z":  # killed, not yet reaped: not alive
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
