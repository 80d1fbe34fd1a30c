"""Landing from inside `git lane exec`: the supervisor's land socket.

A process bound by exec (and, with the sandbox, unable to write main or git-lane's state)
does not land itself: its `git lane land` sends the request to the supervising exec,
which lands the lane as the owner, outside CMD (and outside any sandbox), and passes the
land's output and exit status back. The socket's whole authority is "land this lane":

- a Unix socket file in a fresh 0700 directory of the supervisor's (a path, not an
  inherited fd: agent CLIs start their tools with every fd but 0-2 closed);
- a peer must run as our uid and descend from the supervisor (SO_PEERCRED, then the
  /proc parent chain): another lane's worker, or any other process, is refused;
- the request is one bounded line of JSON with exactly {lane, sync, wait, json}: lane
  this exec's own (or null), sync and json booleans, wait a finite number of seconds or
  null; nothing else reaches the land's argv (no flag, no other lane, no command);
- worker_land = "allow" in the owner's config (read afresh per request), else the same
  role_forbidden a worker's own land gets;
- one request at a time (a second one while a land runs is refused), 10 s to send it.

The land runs as `git lane land KEY [--sync] [--wait S] [--json]` in a child of the
supervisor with the supervisor's own environment, its stdout and stderr streamed back
unchanged and its exit status passed on: the worker prints exactly what a land of its
own would have. When exec sandboxes CMD, the land's gate (and only the gate: the land
writes main, the lock and the state) runs under the lane's sandbox: guard/gate.py
CONFINE, set from the land child's argv, never from anything CMD sends or sets. A client that goes away (Ctrl-C) interrupts the land (SIGINT), which
cleans up as an interrupted land does.

Frames, server to client: one type byte, a 4-byte big-endian length, the payload:
`o` stdout bytes, `e` stderr bytes, `x` the exit status (ASCII), `r` a refusal (JSON)."""

from __future__ import annotations

import json
import math
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from guard import binding, procs, reap
from guard.errors import GitError, Refusal
from guard.store import Store

MAX_REQUEST = 4096  # bytes of the one request line
MAX_FRAME = 1 << 20  # bytes of one frame's payload (the client refuses a larger one)
REQUEST_TIMEOUT = 10.0  # seconds for a client to connect and send its request
SEND_TIMEOUT = 60.0  # seconds a client may leave the land's output unread
FIELDS = {"lane", "sync", "wait", "json"}
# A sandboxed CMD cannot write git-lane's state either, so its `git lane ready` comes
# this way too: exactly these fields, op "ready"; the supervisor runs `git lane ready`
# for the lane as a worker of it (GITLANE_LANE: the mark says by "worker").
READY_FIELDS = {"op", "lane", "unset", "json"}
# The land child: PYPATH first on sys.path (the guard this supervisor runs), `-P` so the
# lane (its cwd, worker-written) is never on it; the signal mask it inherits from the
# supervisor's thread (signals blocked for sigwaitinfo) cleared and SIGINT its usual
# KeyboardInterrupt even if exec was started with it ignored: the client's going away is
# passed on as SIGINT, and the land cleans up as an interrupted land does. Its second
# argument is the supervisor's word on the gate: "confine" (CMD is sandboxed, so is the
# gate: guard/gate.py CONFINE) or "plain".
_BOOT = (
    "import signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, set()); "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.path.insert(0, sys.argv.pop(1)); import guard.gate; "
    "guard.gate.CONFINE = {'confine': True, 'plain': False}[sys.argv.pop(1)]; "
    "from guard.cli import main; main()"
)
_ucred = struct.Struct("3i")


def available() -> bool:
    """Can a supervisor here tell who its peer is (SO_PEERCRED and /proc)? Where it
    cannot, exec serves no socket and a bound land runs as it always did."""
    return hasattr(socket, "SO_PEERCRED") and hasattr(socket, "AF_UNIX") and os.path.isdir("/proc")


# -- the client: `git lane land` inside CMD -----------------------------------------------
def routed() -> bool:
    """Does this process's land go through its supervisor? Only a process bound to a lane
    (GITLANE_LANE) with GITLANE_LAND_SOCKET set; an unbound one ignores the name."""
    return bool(os.environ.get(binding.LANE)) and bool(os.environ.get(binding.LAND_SOCKET))


def _failed(key: str, why: str, reason: str) -> Refusal:
    return Refusal(
        "land_via_supervisor_failed",
        f"this process's land of lane {key} goes through its `git lane exec` supervisor "
        f"({binding.LAND_SOCKET}), and {why}; nothing was landed",
        next=[f"git lane land {key}  # as the repository owner, outside the lane"],
        alternatives=[f"git lane status {key}"],
        details={"lane": key, "reason": reason, "socket": os.environ.get(binding.LAND_SOCKET)},
    )


def request(
    key: str,
    wait: float | None,
    sync: bool,
    as_json: bool,
    out: IO[bytes],
    err: IO[bytes],
) -> int:
    """Ask the supervisor to land `key` (this process's own lane); write the land's
    output as it comes and return its exit status. Refusals the supervisor makes before
    the land starts are raised here, as a local land would raise them."""
    req = {"lane": key, "sync": sync, "wait": wait, "json": as_json}
    return _ask(key, req, out, err)


def request_ready(key: str, unset: bool, as_json: bool, out: IO[bytes], err: IO[bytes]) -> int:
    """Ask the supervisor to mark `key` (this process's own lane) ready, or take the mark
    back: for a sandboxed CMD, which cannot write git-lane's state itself."""
    return _ask(key, {"op": "ready", "lane": key, "unset": unset, "json": as_json}, out, err)


def _ask(key: str, request: dict[str, Any], out: IO[bytes], err: IO[bytes]) -> int:
    where = os.environ.get(binding.LAND_SOCKET, "")
    req = json.dumps(request).encode() + b"\n"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(REQUEST_TIMEOUT)
        try:
            s.connect(where)
            s.sendall(req)
        except (OSError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise _failed(key, f"its socket {where} does not answer ({why})", "no_socket") from None
        s.settimeout(None)  # the land takes what its lock wait and gate take
        while True:
            kind, payload = _read_frame(s, key)
            if kind == b"o":
                out.write(payload)
                out.flush()
            elif kind == b"e":
                err.write(payload)
                err.flush()
            elif kind == b"x" and payload.isdigit() and len(payload) <= 3:
                return int(payload)
            elif kind == b"r":
                raise _refusal(payload, key)
            else:
                raise _failed(key, f"it sent a frame of unknown type {kind!r}", "bad_answer")
    finally:
        s.close()


def _read_frame(s: socket.socket, key: str) -> tuple[bytes, bytes]:
    head = _recv_exact(s, 5, key)
    n = int.from_bytes(head[1:], "big")
    if n > MAX_FRAME:
        raise _failed(key, f"it sent a frame of {n} bytes", "bad_answer")
    return head[:1], _recv_exact(s, n, key)


def _recv_exact(s: socket.socket, n: int, key: str) -> bytes:
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except OSError as exc:
            raise _failed(key, f"the connection broke ({exc.strerror or exc})", "gone") from None
        if not chunk:
            raise _failed(key, "it closed the connection before the land ended", "gone")
        buf += chunk
    return buf


def _refusal(payload: bytes, key: str) -> Refusal:
    try:
        return Refusal.from_dict(json.loads(payload))
    except ValueError:
        return _failed(key, "its refusal could not be read", "bad_answer")


# -- the server: in the supervising exec ----------------------------------------------------
class Server:
    """The land socket of one `git lane exec` of lane `key` (lane worktree `lane_path`),
    served by a thread from start() to close()."""

    def __init__(self, key: str, lane_path: str, env: dict[str, str], store: Store) -> None:
        self.key = key
        self.store = store
        self.lane_path = lane_path
        self.env = env  # the land child's environment: the supervisor's own
        # the land's gate runs under the lane's sandbox: exec sets it when it confines CMD
        self.confine_gate = False
        # CMD runs in a sandbox of its own (exec --own-objects: Codex's) or ours: its land
        # never rebases the worktree CMD writes (_args)
        self.own_store = False
        self.pid = os.getpid()
        self.dir = tempfile.mkdtemp(prefix="git-lane-land-")  # 0700, ours
        if len(os.path.join(self.dir, "s").encode()) > 100:  # sun_path holds 108 bytes
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = tempfile.mkdtemp(prefix="git-lane-land-", dir="/tmp")
        self.path = os.path.join(self.dir, "s")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(self.path)
            self.sock.listen(8)
            self.sock.settimeout(0.2)  # the accept loop looks at _stop this often
        except OSError:
            self.sock.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self._stop = threading.Event()
        self._busy = threading.Lock()
        # held while this server may have a child (the land, git): exec's reaping of
        # CMD's orphans (guard/reap.py) must not wait for a child that is ours to wait for
        self.spawning = threading.Lock()
        # the land processes it runs (and so, below them, their git and gate): exec's own,
        # spared by the end of CMD's tree, which comes before exec waits for them
        self.workers = reap.Workers()
        self._closed = False  # stop() was called: no land starts any more
        self._threads: list[threading.Thread] = []
        self._loop: threading.Thread | None = None

    def start(self) -> None:
        self._loop = threading.Thread(target=self._accept_loop, name="land-socket", daemon=True)
        self._loop.start()

    def stop(self) -> None:
        """Stop accepting: no land starts from now on (one in progress goes on)."""
        self._stop.set()
        wake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:  # the accept loop ends now, not at its next 0.2 s timeout (exec's exit waits)
            wake.settimeout(1.0)
            wake.connect(self.path)
        except OSError:
            pass
        finally:
            wake.close()
        if self._loop is not None:
            self._loop.join()
        with self.workers.lock:
            self._closed = True

    def close(self) -> None:
        """stop(), then wait for a land in progress to end (it holds the integration lock:
        it finishes or is interrupted by its client going away, never cut off; its reads of
        the lane's store are bounded, guard/git.py LANE_READ_TIMEOUT)."""
        self.stop()
        for t in list(self._threads):
            t.join()
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._stop.is_set():  # close()'s wake-up (or a client too late): no land
                conn.close()
                return
            t = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
            t.start()

    # one connection ------------------------------------------------------------------
    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(REQUEST_TIMEOUT)
            try:
                peer = self._peer(conn)
                if not self._busy.acquire(blocking=False):
                    raise self._refused(
                        "another land of this lane through this supervisor is running",
                        "busy",
                        [f"git lane status {self.key}", f"git lane land {self.key}"],
                    )
                try:
                    req = self._read_request(conn)
                    with self.spawning:
                        self._land(conn, self._args(req), peer)
                finally:
                    self._busy.release()
            except GitError as exc:  # git could not read the repository: refused, no traceback
                last = (exc.stderr.strip().splitlines() or ["no message"])[-1]
                r = self._refused(f"git could not read the repository ({last})", "git_failed")
                _send(conn, b"r", json.dumps(r.to_dict(), default=str).encode())
            except Refusal as r:
                _send(conn, b"r", json.dumps(r.to_dict(), default=str).encode())
            except Exception as exc:  # never a traceback in the owner's terminal: exec goes on
                self._error(conn, exc)
        except OSError:
            pass  # the client went away: nothing to tell it
        finally:
            _close(conn)

    def _error(self, conn: socket.socket, exc: Exception) -> None:
        """Whatever else went wrong with one request: logged, and refused to the client."""
        what = f"{type(exc).__name__}: {exc}"[:500]
        try:
            self.store.event("land_via_supervisor", lane=self.key, code="error", error=what)
        except Exception:  # the log is what failed: the refusal still goes out
            pass
        r = self._refused(f"it failed ({what})", "error")
        _send(conn, b"r", json.dumps(r.to_dict(), default=str).encode())

    def _refused(self, why: str, reason: str, nxt: list[str] | None = None) -> Refusal:
        return Refusal(
            "land_via_supervisor_failed",
            f"the `git lane exec` supervisor of lane {self.key} refused the land request: {why}; "
            "nothing was landed",
            next=nxt or [f"git lane land {self.key}  # as the repository owner, outside the lane"],
            alternatives=[f"git lane status {self.key}"],
            details={"lane": self.key, "reason": reason},
        )

    def _peer(self, conn: socket.socket) -> int:
        """The peer's pid: our uid and a descendant of this supervisor, else refused."""
        try:
            pid, uid, _gid = _ucred.unpack(  # (int, int, int)
                conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _ucred.size)
            )
            pid, uid = int(pid), int(uid)
        except (OSError, struct.error):
            raise self._refused("the peer's credentials could not be read", "peer") from None
        if uid != os.getuid():
            raise self._refused(f"the peer runs as uid {uid}", "peer")
        if not descends_from(pid, self.pid):
            raise self._refused(
                f"process {pid} was not started by it (only CMD and its children may ask)",
                "not_descendant",
            )
        return pid

    def _read_request(self, conn: socket.socket) -> Any:
        buf = b""
        while b"\n" not in buf:
            try:
                chunk = conn.recv(MAX_REQUEST + 1 - len(buf))
            except TimeoutError:
                raise self._refused("no request within 10 s", "bad_request") from None
            if not chunk:
                raise self._refused("the request ended early", "bad_request")
            buf += chunk
            if len(buf) > MAX_REQUEST:
                raise self._refused(f"the request is over {MAX_REQUEST} bytes", "bad_request")
        line, _, rest = buf.partition(b"\n")
        if rest:
            raise self._refused("more than one request line", "bad_request")
        try:
            return json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested too deep
            raise self._refused("the request is not JSON", "bad_request") from None

    def _ready_args(self, req: dict[str, Any]) -> list[str]:
        """`ready`'s argv after `git lane`, from a request that holds exactly READY_FIELDS."""
        if set(req) != READY_FIELDS or req["op"] != "ready":
            raise self._refused(
                f"a ready request holds exactly {sorted(READY_FIELDS)}", "bad_request"
            )
        key, unset, as_json = req["lane"], req["unset"], req["json"]
        if not (isinstance(unset, bool) and isinstance(as_json, bool)):
            raise self._refused("unset and json are true or false", "bad_request")
        if key is not None and key != self.key:
            raise Refusal(
                "role_forbidden",
                f"this process is bound to lane {self.key} and may not mark lane {key} ready",
                next=[f"git lane ready {self.key}"],
                details={"lane": key, "bound": self.key},
            )
        return [
            "ready",
            self.key,
            *(["--unset"] if unset else []),
            *(["--json"] if as_json else []),
        ]

    def _args(self, req: Any) -> list[str]:
        """The land's argv after `git lane`, from a request that holds exactly FIELDS."""
        if isinstance(req, dict) and "op" in req:
            return self._ready_args(req)
        if not isinstance(req, dict) or set(req) != FIELDS:
            raise self._refused(f"a request holds exactly {sorted(FIELDS)}", "bad_request")
        key, sync, wait, as_json = req["lane"], req["sync"], req["wait"], req["json"]
        if not (isinstance(sync, bool) and isinstance(as_json, bool)):
            raise self._refused("sync and json are true or false", "bad_request")
        ok_wait = wait is None or (
            isinstance(wait, int | float)
            and not isinstance(wait, bool)
            and _finite(wait)
            and wait >= 0
        )
        if not ok_wait:
            raise self._refused("wait is null or a finite number of seconds", "bad_request")
        if key is not None and key != self.key:
            raise Refusal(
                "role_forbidden",
                f"this process is bound to lane {self.key} and may not land lane {key}",
                next=[f"git lane land {self.key}"],
                details={"lane": key, "bound": self.key},
            )
        usage = " --sync" if sync else ""
        from guard.commands import land
        from guard.repo import Repo

        # the owner's word as it is now (config set may have changed it since exec began),
        # from the supervisor's own repository: never one found through the lane's
        # pointers, which CMD can rewrite
        if Repo(self.store.common_dir, None, None).config["worker_land"] != "allow":
            raise land.worker_land_refusal(self.key, usage)
        if sync and (self.confine_gate or self.own_store):
            # the land runs as the owner, unconfined, and its rebase would be the owner's
            # git writing files in a worktree CMD writes at the same time: a directory CMD
            # swaps for a link while git writes through it takes the owner's writes outside
            # the lane (red team 16A F2). CMD's own sync runs confined.
            raise Refusal(
                "role_forbidden",
                f"a land through the exec of lane {self.key} (its CMD sandboxed) does not rebase the "
                "lane (the rebase would be the owner's git writing a worktree this sandbox "
                "writes at the same time): sync inside, then land",
                next=[f"git lane sync {self.key}", f"git lane land {self.key}"],
                details={"lane": self.key, "sync": True},
            )
        args = ["land", self.key]
        if sync:
            args.append("--sync")
        if wait is not None:
            args.append(f"--wait={float(wait)!r}")
        if as_json:
            args.append("--json")
        return args

    def _land(self, conn: socket.socket, args: list[str], peer: int) -> None:
        pypath = str(Path(__file__).resolve().parent.parent)
        with self.workers.lock:
            if self._closed:
                raise self._refused("exec is ending (CMD has exited)", "closing")
            child = subprocess.Popen(
                [sys.executable, "-P", "-c", _BOOT, pypath, _gate_word(self.confine_gate), *args],
                cwd=self.store.common_dir,  # the real repository; the key is named in args
                # a ready mark is the worker's word, said through its supervisor
                env={**self.env, binding.LANE: self.key} if args[0] == "ready" else self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            self.workers.pids.add(child.pid)
        conn.settimeout(SEND_TIMEOUT)
        try:
            gone = _relay(conn, child)
            rc = child.wait()
        finally:
            if child.poll() is not None:
                with self.workers.lock:
                    self.workers.pids.discard(child.pid)
        rc = 128 - rc if rc < 0 else rc  # killed by a signal: as a shell reports it
        if not gone:
            try:
                _send(conn, b"x", str(rc).encode())
            except OSError:
                gone = True
        self.store.event(
            "land_via_supervisor" if args[0] == "land" else "ready_via_supervisor",
            lane=self.key,
            code="ok" if rc == 0 else "land_exit",
            peer_pid=peer,
            land_pid=child.pid,
            exit_status=rc,
            client_gone=gone,
        )


def _gate_word(confine: bool) -> str:
    return "confine" if confine else "plain"


def _relay(conn: socket.socket, child: subprocess.Popen[bytes]) -> bool:
    """Stream the land child's stdout and stderr to the client until both close. A client
    that goes away (EOF or anything sent on the connection) gets the child a SIGINT: the
    land cleans up as an interrupted land does. True when the client went away."""
    assert child.stdout is not None and child.stderr is not None
    sel = selectors.DefaultSelector()
    kinds = {child.stdout.fileno(): b"o", child.stderr.fileno(): b"e"}
    for fd in kinds:
        sel.register(fd, selectors.EVENT_READ)
    sel.register(conn, selectors.EVENT_READ)
    gone = False

    def interrupt() -> None:
        nonlocal gone
        gone = True
        sel.unregister(conn)
        try:
            child.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass

    try:
        while len(sel.get_map()) > (0 if gone else 1):
            for k, _ in sel.select():
                if k.fileobj is conn:
                    interrupt()
                    continue
                fd = int(k.fd)
                data = os.read(fd, 65536)
                if not data:
                    sel.unregister(fd)
                    continue
                if not gone:
                    try:
                        _send(conn, kinds[fd], data)
                    except OSError:
                        interrupt()
    finally:
        sel.close()
    return gone


def _finite(x: int | float) -> bool:
    """A number a float holds (an int too large for one is not: OverflowError)."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _close(conn: socket.socket) -> None:
    """Close after the client has what we sent: unread bytes of its own (a request we
    refused without reading) would make the close reset the connection under its read."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(1.0)
        for _ in range(16):
            if not conn.recv(MAX_REQUEST):
                break
    except OSError:
        pass
    conn.close()


def _send(conn: socket.socket, kind: bytes, payload: bytes) -> None:
    for i in range(0, max(len(payload), 1), MAX_FRAME):
        part = payload[i : i + MAX_FRAME]
        conn.sendall(kind + len(part).to_bytes(4, "big") + part)


def descends_from(pid: int, ancestor: int) -> bool:
    """Is `pid` `ancestor` or started (directly or not) by it? From the /proc parent
    chain; False where it cannot be read (fail closed)."""
    for _ in range(4096):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            fields = procs.stat_fields(pid)
            if fields is None:
                return False
            pid = int(fields[1])  # proc(5) field 4: ppid
        except (OSError, IndexError, ValueError):
            return False
    return False
