"""The state store under `<common-dir>/git-lane/`: lane identity records, the epoch, the
append-only event log. Every write is temp file + fsync + rename; a corrupt file reads as
absent (logged as a warning event) and is repaired by `git lane reconcile`."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from guard import git
from guard.git import open_regular as open_regular  # here for its callers
from guard.git import read_regular as read_regular
from guard.errors import Refusal
from guard.policy import KEY_RE

EVENTS_MAX_BYTES = 4 * 1024 * 1024
# a JSON state file larger is none of ours (a link to a huge file took 17 s and MemoryError)
STATE_MAX_BYTES = 64 * 1024 * 1024
LANE_SCHEMA = 1
EPOCH_SCHEMA = 1
# the largest epoch a land may count to: the landed refs name it in 10 digits
# (guard/landed.py WIDTH is its length); a bigger one was never written by a land (10**400
# would name a landed ref longer than a file name may be) and makes the file corrupt
EPOCH_MAX = 10**10 - 1


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def set_aside(path: Path) -> Path | None:
    """Move a directory that sits where a state or lock file belongs out of the way, to
    `<name>.corrupt-<pid>[-n]` beside it (kept, never deleted); None when `path` is not a
    directory. The move is a rename onto a fresh empty directory, which the kernel allows
    only for a directory: a file that a racing process put there meanwhile (and may hold
    a lock on) is never moved."""
    if not path.is_dir() or path.is_symlink():
        return None
    n = 0
    while True:
        aside = path.with_name(f"{path.name}.corrupt-{os.getpid()}" + (f"-{n}" if n else ""))
        try:
            aside.mkdir()
            break
        except FileExistsError:
            n += 1
    try:
        os.rename(path, aside)
    except OSError:  # a file now (EISDIR/ENOTDIR), or gone: nothing of ours to move
        aside.rmdir()
        return None
    return aside


def not_a_directory(path: Path) -> Refusal:
    """The refusal for a file (or anything else) where a state directory belongs: nothing
    under it can be read or written until `reconcile` moves it aside (kept, not deleted)."""
    return Refusal(
        "state_corrupt",
        f"{path} should be a directory of git-lane's state but is not; "
        "reconcile moves it aside (kept) and makes the directory",
        next=["git lane reconcile"],
        details={"path": str(path)},
    )


def ensure_dir(path: Path) -> None:
    """mkdir -p, refusing (state_corrupt) when a non-directory sits on the way."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        bad = path
        for p in [path, *path.parents]:
            if os.path.lexists(p) and not p.is_dir():
                bad = p
        raise not_a_directory(bad) from None


def move_aside(path: Path, tag: str) -> Path:
    """Rename `path` to `<name>.corrupt-<tag>[-n]` beside it, never over an earlier one."""
    n = 0
    while True:
        aside = path.with_name(f"{path.name}.corrupt-{tag}" + (f"-{n}" if n else ""))
        if not os.path.lexists(aside):
            break
        n += 1
    os.rename(path, aside)
    return aside


def set_aside_file(path: Path) -> Path | None:
    """Move a non-directory that sits where a state directory belongs to
    `<name>.corrupt-<pid>[-n]` beside it (kept); None when there is nothing to move."""
    if not os.path.lexists(path) or (path.is_dir() and not path.is_symlink()):
        return None
    return move_aside(path, str(os.getpid()))


def special(path: Path | str) -> bool:
    """Is something other than a regular file or a directory (symlinks followed: a FIFO, a
    socket, a device) where a state file belongs? A missing or dangling one is not."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    import tempfile  # writers only: `status` never needs it

    ensure_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        try:
            os.replace(tmp, path)
        except OSError:
            # a directory where the file belongs (read as absent): set it aside, once
            if set_aside(path) is None:
                raise
            os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.filename is None and exc.errno:
            # a write or fsync that found no space names no file: name the one we wrote
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _validate(kw: dict[str, Any], checks: dict[str, Callable[[Any], bool]], what: str) -> None:
    """A JSON-valid record whose fields have the wrong types is corrupt, not a crash later."""
    for name, ok in checks.items():
        if name in kw and not ok(kw[name]):
            raise ValueError(f"{what}: field {name} has a bad value {kw[name]!r}")


@dataclass(frozen=True)
class LaneRecord:
    key: str
    branch: str
    path: str
    created_at: str
    status: str = "active"  # active | orphaned | released
    goal: str | None = None
    owner_pid: int | None = None
    owner_start: float | None = None
    released_at: str | None = None
    released_tip: str | None = None
    # setup_command's outcome: None (none ran), running, ok, failed, timeout; while it
    # runs, the process running it (a `running` whose process is gone reads as failed)
    setup: str | None = None
    setup_pid: int | None = None
    setup_start: float | None = None
    # the lane's admin dir name under <common>/worktrees/ (recorded at create: trusted; the
    # lane's own `.git` file, which it can write, is never asked)
    admin: str | None = None
    # has a `git lane exec` ever run in the lane? Set True (under the registry lock, before
    # CMD starts) and never back: what its processes leave in files the tip ignores, or
    # leave running, an in-lane gate would read, so such a lane gates in a clean worktree.
    # create writes False; None (a record older than the field, or one rebuilt from git)
    # cannot say no exec ran, and reads as one did (land.why_clean_gate)
    exec_seen: bool | None = None
    schema: int = LANE_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LaneRecord:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for req in ("key", "branch", "path", "created_at"):
            if not isinstance(kw.get(req), str):
                raise ValueError(f"lane record without {req}")
        if not KEY_RE.fullmatch(kw["key"]):
            raise ValueError("lane record key is not a lane key")
        path = kw["path"]
        if not path or "\0" in path or not os.path.isabs(path):
            # every command acts in this directory (release removes it): an empty or
            # relative path would name the cwd, wherever the command was started
            raise ValueError(f"lane record path {path!r} is not an absolute path")
        if kw.get("status", "active") not in ("active", "orphaned", "released"):
            raise ValueError("bad status")
        if kw["branch"] != f"lane/{kw['key']}":
            # release deletes this branch: a record naming any other ref is not ours
            raise ValueError("lane record branch is not lane/<key>")
        _validate(
            kw,
            {
                "goal": _opt_str,
                "owner_pid": lambda v: v is None or (_is_int(v) and v > 0),
                "owner_start": lambda v: v is None or _is_int(v) or isinstance(v, float),
                "released_at": _opt_str,
                "released_tip": _opt_str,
                "setup": lambda v: v in (None, "running", "ok", "failed", "timeout"),
                "setup_pid": lambda v: v is None or (_is_int(v) and v > 0),
                "setup_start": lambda v: v is None or _is_int(v) or isinstance(v, float),
                "schema": _is_int,
                "exec_seen": lambda v: v is None or isinstance(v, bool),
                "admin": lambda v: (
                    v is None
                    or (
                        isinstance(v, str)
                        and v not in ("", ".", "..")
                        and "/" not in v
                        and "\0" not in v
                    )
                ),
            },
            "lane record",
        )
        return cls(**kw)


@dataclass(frozen=True)
class Epoch:
    epoch: int = 0
    lane: str | None = None
    main_before: str | None = None
    main_after: str | None = None
    paths: list[str] = field(default_factory=list)
    truncated: bool = False
    at: str | None = None
    schema: int = EPOCH_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Epoch:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        if not _is_int(kw.get("epoch")) or not 0 <= kw["epoch"] <= EPOCH_MAX:
            raise ValueError("epoch is not a non-negative int of a land count")
        _validate(
            kw,
            {
                "lane": _opt_str,
                "main_before": _opt_str,
                "main_after": _opt_str,
                "paths": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                "truncated": lambda v: isinstance(v, bool),
                "at": _opt_str,
                "schema": _is_int,
            },
            "epoch",
        )
        return cls(**kw)


class Store:
    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir
        self.lanes_dir = state_dir / "lanes"
        self.locks_dir = state_dir / "locks"
        self.events_path = state_dir / "events.jsonl"
        self.epoch_path = state_dir / "epoch.json"
        self.landing_path = state_dir / "landing.json"
        self.config_path = state_dir / "config.toml"
        self.crash_dir = state_dir / "crash"

    # -- generic ---------------------------------------------------------------
    def read_json(self, path: Path, lane: str | None = None) -> dict[str, Any] | None:
        """The object in `path`, or None when missing or corrupt (corrupt is logged)."""
        try:
            raw = read_regular(path, limit=STATE_MAX_BYTES)
        except FileNotFoundError:
            return None
        except NotADirectoryError:  # lanes/ (or the state dir) is a file: nothing can be told
            bad = next((p for p in path.parents if os.path.lexists(p) and not p.is_dir()), path)
            raise not_a_directory(bad) from None
        except OSError as exc:
            self.event(
                "warning", lane=lane, code="state_unreadable", path=str(path), error=str(exc)
            )
            return None
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise ValueError("not an object")
            return obj
        except (ValueError, RecursionError) as exc:
            self.event("warning", lane=lane, code="state_corrupt", path=str(path), error=str(exc))
            return None

    # -- lanes -----------------------------------------------------------------
    def lane_path(self, key: str) -> Path:
        return self.lanes_dir / f"{key}.json"

    def lane_file_exists(self, key: str) -> bool:
        """Is there anything at the lane's record path (readable or not)?"""
        return os.path.lexists(self.lane_path(key))

    def read_lane(self, key: str) -> LaneRecord | None:
        d = self.read_json(self.lane_path(key), lane=key)
        if d is None:
            return None
        try:
            rec = LaneRecord.from_dict(d)
        except (TypeError, ValueError) as exc:
            self.event(
                "warning",
                lane=key,
                code="state_corrupt",
                path=str(self.lane_path(key)),
                error=str(exc),
            )
            return None
        if rec.key == key:
            self.pin(rec)
        if rec.key != key:
            self.event(
                "warning",
                lane=key,
                code="state_corrupt",
                path=str(self.lane_path(key)),
                error="key mismatch",
            )
            return None
        return rec

    @property
    def common_dir(self) -> Path:
        """The real common dir (the state dir's parent, symlinks resolved)."""
        return Path(os.path.realpath(self.dir)).parent

    def admin_dir(self, rec: LaneRecord) -> Path | None:
        """The lane's admin dir, from trusted state only: the recorded name, else (a record
        older than the field) the entry of <common>/worktrees/ named as the lane's
        directory or, failing that, the one whose `gitdir` names the lane; never the
        lane's `.git` file."""
        base = self.common_dir / "worktrees"
        if rec.admin:
            d = base / rec.admin
            # a symlink (`worktrees/evil -> ..`), a file, or a directory with no `gitdir`
            # of git's is no admin dir: None, never acted on as the lane's
            if d.is_symlink() or (os.path.lexists(d) and not _git_admin(d)):
                return None
            return d
        name = os.path.basename(rec.path)
        if name and (base / name).is_dir() and not (base / name).is_symlink():
            return base / name
        return admin_by_gitdir(base, os.path.join(os.path.realpath(rec.path), ".git"))

    def pin(self, rec: LaneRecord) -> None:
        """Every later git run in this lane names its repository (guard/git.py)."""
        if rec.status == "released":
            return
        admin = self.admin_dir(rec)
        if admin is not None and admin.is_dir():
            git.pin_lane(rec.path, str(admin), str(self.common_dir), rec.key)

    def write_lane(self, rec: LaneRecord) -> None:
        atomic_write_json(self.lane_path(rec.key), rec.to_dict())

    def lane_keys(self) -> list[str]:
        try:
            names = os.listdir(self.lanes_dir)
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            raise not_a_directory(self.lanes_dir) from None
        return sorted(n[:-5] for n in names if n.endswith(".json") and not n.startswith("."))

    def lanes(self) -> list[LaneRecord]:
        out = []
        for key in self.lane_keys():
            rec = self.read_lane(key)
            if rec is not None:
                out.append(rec)
        return out

    # -- setup manifests -------------------------------------------------------
    # setup/KEY.json (setup/alpha.json for lane alpha): the ignored files a lane's setup left (type, size, mtime_ns, ctime_ns, inode each),
    # for the lane of that path and creation time only. Release counts as work only the
    # ignored files that are not in it as they were; missing or unreadable, every ignored
    # file counts (the safe side).
    def setup_manifest_path(self, key: str) -> Path:
        return self.dir / "setup" / f"{key}.json"

    def read_setup_manifest(
        self, rec: LaneRecord
    ) -> dict[str, tuple[int, int, int, int, int]] | None:
        d = self.read_json(self.setup_manifest_path(rec.key), lane=rec.key)
        if d is None or d.get("path") != rec.path or d.get("created_at") != rec.created_at:
            return None
        files = d.get("files")
        if not isinstance(files, dict):
            return None
        out: dict[str, tuple[int, int, int, int, int]] = {}
        for rel, st in files.items():
            # an older manifest (type, size, mtime only) cannot tell a same-size edit
            # with its mtime set back: unread, so every ignored file counts as work
            if not (isinstance(st, list) and len(st) == 5 and all(_is_int(x) for x in st)):
                return None
            out[rel] = (st[0], st[1], st[2], st[3], st[4])
        return out

    def write_setup_manifest(
        self, rec: LaneRecord, files: dict[str, tuple[int, int, int, int, int]]
    ) -> None:
        obj = {
            "schema": 2,
            "lane": rec.key,
            "path": rec.path,
            "created_at": rec.created_at,
            "files": {rel: list(st) for rel, st in sorted(files.items())},
        }
        atomic_write(self.setup_manifest_path(rec.key), (json.dumps(obj) + "\n").encode())

    def drop_setup_manifest(self, key: str) -> None:
        try:
            os.unlink(self.setup_manifest_path(key))
        except OSError:
            pass

    # -- epoch -----------------------------------------------------------------
    def read_epoch(self) -> Epoch:
        d = self.read_json(self.epoch_path)
        if d is None:
            return Epoch()
        try:
            return Epoch.from_dict(d)
        except (TypeError, ValueError) as exc:
            self.event("warning", code="state_corrupt", path=str(self.epoch_path), error=str(exc))
            return Epoch()

    def epoch_is_valid(self) -> bool:
        if not self.epoch_path.exists():
            return True
        try:
            obj = json.loads(read_regular(self.epoch_path, limit=STATE_MAX_BYTES))
            if not isinstance(obj, dict):  # valid JSON, but a list, a string, null...
                return False
            Epoch.from_dict(obj)
            return True
        except (OSError, TypeError, ValueError, RecursionError):
            return False

    def write_epoch(self, ep: Epoch) -> None:
        atomic_write_json(self.epoch_path, ep.to_dict())

    # -- events ----------------------------------------------------------------
    def event(self, kind: str, *, lane: str | None = None, code: str = "ok", **data: Any) -> None:
        """Append one audit line. Never raises: the log must not break a command."""
        rec = {
            "time": now_iso(),
            "ts": round(time.time(), 3),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "kind": kind,
            "lane": lane,
            "code": code,
            **data,
        }
        line = (json.dumps(rec, sort_keys=True, default=str) + "\n").encode()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._rotate_if_needed(len(line))
            fd = self._open_log()
            try:
                n = os.write(fd, line)
                if n < len(line):  # the disk filled up mid-line: no half line stays behind
                    os.ftruncate(fd, max(0, os.fstat(fd).st_size - n))
            finally:
                os.close(fd)
        except (OSError, ValueError):
            pass

    def _open_log(self) -> int:
        """The log, opened to append: never through a symlink (it would write outside the
        state dir) and never blocking on a FIFO; whatever sits in its place instead (a
        directory, a symlink, a FIFO, a device) is set aside, kept, and a new log begun."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        for _ in range(2):
            try:
                fd = os.open(self.events_path, flags | os.O_CLOEXEC, 0o644)
            except IsADirectoryError:
                set_aside(self.events_path)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENXIO):
                    raise
                move_aside(self.events_path, str(os.getpid()))  # a symlink, a FIFO
                continue
            if stat.S_ISREG(os.fstat(fd).st_mode):
                return fd
            os.close(fd)
            move_aside(self.events_path, str(os.getpid()))  # a FIFO with a reader, a device
        raise OSError(errno.EINVAL, "no log file can be made", str(self.events_path))

    def _rotate_if_needed(self, incoming: int) -> None:
        try:
            size = self.events_path.stat().st_size
        except FileNotFoundError:
            return
        if size + incoming <= EVENTS_MAX_BYTES:
            return
        import fcntl

        ensure_dir(self.locks_dir)
        with open(self.locks_dir / "events.flock", "a") as lf:
            fcntl.flock(lf, fcntl.LOCK_EX)
            try:
                if self.events_path.stat().st_size + incoming > EVENTS_MAX_BYTES:
                    os.replace(self.events_path, self.events_path.with_name("events.jsonl.1"))
            except FileNotFoundError:
                pass

    def events(self) -> Iterator[dict[str, Any]]:
        """Every readable event, oldest first (the rotated file, then the current one)."""
        for p in (self.events_path.with_name("events.jsonl.1"), self.events_path):
            try:
                with os.fdopen(open_regular(p), "rb") as f:
                    for raw in f:
                        try:
                            obj = json.loads(raw)
                        except ValueError:
                            continue
                        if isinstance(obj, dict):
                            yield obj
            except OSError:  # missing, or not a file: no events there
                continue

    # -- repair ----------------------------------------------------------------
    def layout_paths(self) -> list[Path]:
        """Every fixed path where git-lane keeps a file (lane records are per key)."""
        return [
            self.config_path,
            self.epoch_path,
            self.events_path,
            self.landing_path,
            self.locks_dir / "integration.owner",
            self.locks_dir / "integration.flock",
            self.locks_dir / "registry.flock",
            self.locks_dir / "events.flock",
        ]

    def repair_layout(self) -> list[dict[str, Any]]:
        """reconcile: set aside anything that is not a directory where a state directory
        belongs, and any directory that sits where a state file belongs."""
        out: list[dict[str, Any]] = []
        for d in (self.dir, self.lanes_dir, self.locks_dir):
            moved = set_aside_file(d)
            if moved is not None:
                out.append({"action": "file_set_aside", "path": str(d), "to": str(moved)})
        for p in self.layout_paths():
            aside = set_aside(p)
            if aside is not None:
                out.append({"action": "directory_set_aside", "path": str(p), "to": str(aside)})
            elif special(p):  # a FIFO, socket or device (or a symlink to one): kept aside
                to = move_aside(p, str(os.getpid()))
                out.append({"action": "special_file_set_aside", "path": str(p), "to": str(to)})
        return out


class FileLock:
    """An exclusive flock on a file under locks/; the kernel drops it if we die."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, timeout: float | None = None) -> bool:
        import fcntl

        ensure_dir(self.path.parent)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except IsADirectoryError:
            # a directory where the lock file belongs: no one can hold a lock on it
            # through us, so it is set aside (kept) and the lock file made
            set_aside(self.path)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.fd = fd
                return True
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.02)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _git_admin(d: Path) -> bool:
    """A real directory holding a regular `gitdir` file, as git makes for a worktree."""
    try:
        return stat.S_ISDIR(os.lstat(d).st_mode) and stat.S_ISREG(os.lstat(d / "gitdir").st_mode)
    except OSError:
        return False


def admin_by_gitdir(base: Path, want: str) -> Path | None:
    """The entry of `<common>/worktrees/` (`base`) whose `gitdir` file names `want` (a
    worktree's `.git`, real path): git's own back-pointer, never the worktree's `.git`
    file. Symlinked entries are not git's and never count."""
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return None
    for d in entries:
        try:
            got = (d / "gitdir").read_text().strip()
        except OSError:
            continue
        if got and os.path.realpath(got) == want and not d.is_symlink():
            return d
    return None
