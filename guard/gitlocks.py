"""git's lock files left by a process killed with its git: a lane's (`index.lock`,
`HEAD.lock`, ... in its admin dir) and its branch's (`refs/heads/lane/KEY.lock` in the
common dir). Every later git write in the lane, or to its branch, fails on them.

A lock is stale only when provably so: it was a checkpoint's (its record under
`locks/checkpoint.KEY` names the lock's inode and a process that is gone), or it is a
few seconds old and no live git process works in the repository (none has its cwd in
the common dir, the hub or any worktree, none names one of them on its command line
(`-C`, `--git-dir`, `--work-tree`, any argument) or in GIT_DIR, GIT_WORK_TREE,
GIT_INDEX_FILE, GIT_COMMON_DIR, GIT_OBJECT_DIRECTORY, relative ones resolved against its
own cwd and `-C` dirs). A git elsewhere can hold a lane's lock (`git branch -m` in the hub
rewrites the HEAD of every worktree on the branch), so the whole repository counts.
Where /proc cannot tell, a lock is held. A lane's locks are acted on only when its admin
dir is git's (a real directory directly under `<common>/worktrees/`, with its `gitdir`)
and its pointers are intact (those of its admin dir alone when its worktree was deleted
by hand: release still refuses on them); never anything outside it, never the hub's own
locks.

The repository's `packed-refs.lock` (a `gc` or `pack-refs` killed with its git; git takes
it for every ref delete) is judged as the branch's: release refuses lane_busy on it before
it removes anything, and reconcile removes it when stale.

reconcile removes stale locks; a stale `index.lock` holding a staged state is never
simply dropped: the one a dead commit left with HEAD's tree (the commit went in, the
rename did not) is moved over the index, any other that differs from the index is kept
under `kept/` first. abort, continue, checkpoint and release refuse lane_busy with it as
next."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from guard import dirfd, git, procs
from guard.errors import GitError, Refusal
from guard.store import atomic_write, now_iso, open_regular

if TYPE_CHECKING:
    from guard.repo import Repo

MIN_AGE = 2.0  # seconds a lock no checkpoint recorded must be old before it can be stale
_ENV = (
    b"GIT_DIR=",
    b"GIT_WORK_TREE=",
    b"GIT_INDEX_FILE=",
    b"GIT_COMMON_DIR=",
    b"GIT_OBJECT_DIRECTORY=",
)


def admin_ok(repo: Repo, admin: Path | None) -> bool:
    """Is `admin` git's admin dir of a worktree: a directory (no symlink) directly under
    the real `<common>/worktrees/`, with a regular `gitdir` file? Only then are locks in
    it a lane's."""
    if admin is None:
        return False
    base = os.path.realpath(os.path.join(repo.common_dir, "worktrees"))
    try:
        st = os.lstat(admin)
        gd = os.lstat(admin / "gitdir")
    except OSError:
        return False
    return (
        stat.S_ISDIR(st.st_mode)
        and stat.S_ISREG(gd.st_mode)
        and os.path.dirname(os.path.realpath(admin)) == base
        and os.path.realpath(os.path.dirname(admin)) == base
    )


def present(admin: Path | None) -> list[Path]:
    """The `*.lock` files directly in the lane's admin dir, by name."""
    if admin is None:
        return []
    try:
        names = sorted(os.listdir(admin))
    except OSError:
        return []
    out = []
    for n in names:
        try:
            if n.endswith(".lock") and stat.S_ISREG(os.lstat(admin / n).st_mode):
                out.append(admin / n)
        except OSError:
            continue
    return out


def _inside(p: str, roots: list[str]) -> bool:
    return any(p == r or p.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def repo_roots(repo: Repo, *more: str) -> list[str] | None:
    """Where a git working on this repository has its cwd or names: the common dir (every
    admin dir is in it), the hub, every worktree git or a `gitdir` file names, and `more`.
    None when git cannot list the worktrees: where a git may work is then unknown."""
    common = os.path.realpath(repo.common_dir)
    roots = {common, os.path.realpath(repo.repo_root()), *map(os.path.realpath, more)}
    try:
        roots.update(os.path.realpath(w.path) for w in git.worktrees(common))
    except GitError:
        return None
    try:
        entries = os.listdir(os.path.join(common, "worktrees"))
    except OSError:
        entries = []
    for e in entries:
        try:
            named = git.read_admin(os.path.join(common, "worktrees", e, "gitdir"), 1 << 16).strip()
        except OSError:
            continue
        if named:
            roots.add(os.path.dirname(os.path.realpath(named)))
    return sorted(roots)


def _is_git(pid: int, comm: bytes) -> bool:
    """Is process `pid` a git: named git* (git, git-upload-pack, ...), or its executable
    or argv[0] is git or git-* (a git run through a link of another name)?"""
    if comm.startswith(b"git"):
        return True
    try:
        exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        exe = ""  # not ours to look into (its comm says it is no git), or a kernel thread
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            arg0 = os.fsdecode(f.read(4096).split(b"\0")[0])
    except OSError:
        arg0 = ""
    names = (os.path.basename(exe), os.path.basename(arg0))
    return any(n == "git" or n.startswith("git-") for n in names)


def _names(cwd: str, argv: list[str], env: list[bytes], roots: list[str]) -> bool:
    """Does a git started in `cwd` with `argv` and `env` work in `roots`? Its cwd, every
    `-C` dir (cumulative, as git applies them), and every argument and repository
    variable resolved against each of those."""
    bases = [cwd]
    values: list[str] = []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-C" and i + 1 < len(argv):
            if argv[i + 1]:
                bases.append(os.path.join(bases[-1], argv[i + 1]))
            i += 2
            continue
        values.append(a)
        if a.startswith("-") and "=" in a:
            values.append(a.partition("=")[2])  # --git-dir=X, --work-tree=X, ...
        i += 1
    for kv in env:
        if kv.startswith(_ENV):
            values.append(os.fsdecode(kv.partition(b"=")[2]))
    if any(_inside(os.path.realpath(b), roots) for b in bases):
        return True
    return any(
        _inside(os.path.realpath(os.path.join(b, v)), roots) for v in values if v for b in bases
    )


_GIT_OPTS_WITH_ARG = {
    "-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix",
}  # fmt: skip


def _ran_git_lane(pid: int) -> bool:
    """Is `pid` the `git` that ran `git lane ...` (it waits for this process, holding no
    lock)? Any other ancestor (a `git commit` whose hook runs git-lane) still counts."""
    argv = procs.cmdline(pid) or []
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in _GIT_OPTS_WITH_ARG else 1
    return i < len(argv) and argv[i] == "lane"


def git_at_work(roots: list[str] | None) -> bool:
    """Does a live git process (other than this one and the `git` that ran `git lane`)
    work in `roots`? True when /proc cannot tell, or the roots are unknown (None)."""
    if roots is None:
        return True
    me = os.getpid()
    try:
        mine = {me, *(a for a in procs.ancestors(me) if _ran_git_lane(a))}
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
        my_ns = os.readlink("/proc/self/ns/mnt")
    except (OSError, ValueError):
        return True
    for pid in pids:
        if pid in mine:
            continue
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                comm = f.read().strip()
        except OSError:
            continue  # gone meanwhile
        if not _is_git(pid, comm):
            continue
        try:
            # a git in another mount namespace or root (a bubblewrap-style sandbox with
            # the lane bind-mounted elsewhere) names its paths in its own view: cannot tell
            if os.readlink(f"/proc/{pid}/ns/mnt") != my_ns or os.readlink(
                f"/proc/{pid}/root"
            ) != os.readlink("/proc/self/root"):
                return True
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [os.fsdecode(a) for a in f.read().split(b"\0")]
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            # gone meanwhile (a read of a process that exited between two reads fails
            # ESRCH), or a zombie (no cwd): it works nowhere
            continue
        except OSError:
            return True  # a git we may not look into: it may be working there
        if argv and argv[-1] == "":
            argv.pop()  # the NUL that ends the last argument
        if not argv or not os.path.isabs(cwd):
            return True  # an argv it rewrote, a cwd /proc cannot name: cannot tell
        if _names(os.path.realpath(cwd), argv, env, roots):
            return True
    return False


# -- a checkpoint's own index.lock ------------------------------------------------------
def _record(state_dir: Path, key: str) -> Path:
    return state_dir / "locks" / f"checkpoint.{key}"


def hold(state_dir: Path, key: str, lock: str, ino: int) -> None:
    """A checkpoint holds `lock` (inode `ino`): recorded with its pid and start ticks."""
    me = os.getpid()
    text = f"pid={me}\nticks={procs.start_ticks(me)}\nlock={lock}\nino={ino}\n"
    atomic_write(_record(state_dir, key), text.encode())


def release(state_dir: Path, key: str) -> None:
    try:
        os.unlink(_record(state_dir, key))
    except OSError:
        pass


def _checkpoint(state_dir: Path, key: str) -> tuple[str, str, int, float]:
    """("alive" | "dead" | "none", lock, inode, when recorded) of the checkpoint recorded
    for `key`: "none" when there is no record or it cannot be read (it tells nothing)."""
    rec = _record(state_dir, key)
    try:
        if not rec.is_file() or rec.is_symlink():
            return "none", "", 0, 0.0
        written = rec.stat().st_mtime
        text = git.read_admin(rec, 1 << 16)
        kv = dict(ln.partition("=")[::2] for ln in text.splitlines())
    except (OSError, UnicodeDecodeError):
        return "none", "", 0, 0.0
    pid, ticks, ino = kv.get("pid", ""), kv.get("ticks", ""), kv.get("ino", "")
    if not (pid.isdigit() and ino.isdigit() and kv.get("lock")):
        return "none", "", 0, 0.0
    now = procs.start_ticks(int(pid))
    # no start time recorded: a live process of that pid may be it
    alive = now == ticks if ticks else bool(now)
    return ("alive" if alive else "dead"), kv["lock"], int(ino), written


def stale(repo: Repo, key: str, path: str, admin: Path | None) -> list[Path]:
    """The lane's lock files that provably belong to no live process (none when its
    admin dir is not git's)."""
    if not admin_ok(repo, admin):
        return []
    assert admin is not None
    locks = present(admin)
    if not locks:
        return []
    state, own, ino, written = _checkpoint(repo.state_dir, key)
    if state == "alive":
        return []  # a checkpoint at work: its git may be between two commands
    out = []
    busy: bool | None = None
    for lk in locks:
        if state == "dead" and os.path.realpath(lk) == os.path.realpath(own):
            try:
                st = os.lstat(lk)
            except OSError:
                continue
            # the dead checkpoint's own (its inode), at once: whoever else is at work when
            # it was not written since the record; written since, a lock a later git made
            # may have reused the freed inode number, so only while no git works there
            if st.st_ino == ino:
                if st.st_mtime > written and busy is None:
                    busy = git_at_work(repo_roots(repo, path))
                if st.st_mtime <= written or not busy:
                    out.append(lk)
                continue
        try:
            young = time.time() - os.lstat(lk).st_mtime < MIN_AGE
        except OSError:
            continue
        if young:
            continue  # just taken: whoever took it may be no git (libgit2, an IDE) at work
        if busy is None:
            busy = git_at_work(repo_roots(repo, path))
        if not busy:
            out.append(lk)
    return out


def _reader(repo: Repo, path: str, admin: Path) -> tuple[str, dict[str, str], str | None]:
    """(cwd, repository variables, the lane's own store) for the git that reads the lane's
    index and HEAD: in its worktree, pinned (guard/git.py); or, the worktree gone by hand,
    from the common dir with GIT_DIR and GIT_COMMON_DIR from trusted state (never the
    admin dir's own `commondir`), the lane's store named (a sandboxed lane's commits may be
    there only), no engine git while a lane's config.worktree would be read."""
    if os.path.lexists(os.path.join(path, ".git")):
        return path, {}, None
    common = str(repo.common_dir)
    git.check_no_worktree_config(common, str(admin / "config.worktree"))
    store = admin / "objects"
    own = str(store) if store.is_dir() and not store.is_symlink() else None
    return common, {"GIT_DIR": str(admin), "GIT_COMMON_DIR": common}, own


def _entries(
    where: tuple[str, dict[str, str], str | None], env: dict[str, str] | None, tree: str | None
) -> set[str] | None:
    """The stage-0 entries (mode, object, path) of an index file (`env` names it) or of
    `tree`; None when git cannot read it, or (an index) it holds a conflict. git runs as
    `where` (_reader) says."""
    cwd, base, store = where
    pre = list(git.LANE_CONFIG) if base else []
    # from the admin dir: what the lane wrote there (a FIFO in its store) never holds
    # reconcile for ever (timed out: no answer, the lock is kept)
    wait = git.lane_read_timeout() if base else None
    with git.lane_objects(store) if store else contextlib.nullcontext():
        if tree is not None:
            res = git.run(
                [*pre, "ls-tree", "-r", "-z", "--full-tree", tree],
                cwd,
                check=False,
                env=base or None,
                timeout=wait,
            )
        else:
            res = git.run(
                [*pre, "ls-files", "-s", "-z"],
                cwd,
                env={**base, **(env or {})},
                check=False,
                timeout=wait,
            )
    if not res.ok:
        return None
    out = set()
    if tree is not None:
        for e in res.z():
            meta, _, name = e.partition("\t")
            mode, _kind, sha = meta.split(" ")
            out.add(f"{mode} {sha}\t{name}")
        return out
    for e in res.z():
        meta, _, name = e.partition("\t")
        mode, sha, stage = meta.split(" ")
        if stage != "0":
            return None
        out.add(f"{mode} {sha}\t{name}")
    return out


def _snapshot(src: Path, dest: Path) -> bool:
    """Copy the regular file `src` (never through a symlink, never blocking on a FIFO
    planted in its place) to the new file `dest`, holes kept as holes (a lane's `truncate
    -s 1T index.lock` takes no disk, nor does its copy in kept/); False when `src` is no
    such file."""
    try:
        fd = open_regular(src, follow=False)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f, open(dest, "xb") as out:
        dirfd.copy_data(f.fileno(), out.fileno(), os.fstat(f.fileno()).st_size)
    return True


def _kept_name(repo: Repo, key: str, what: str) -> Path:
    kept = repo.state_dir / "kept"
    kept.mkdir(parents=True, exist_ok=True)
    stamp = now_iso().replace(":", "")
    dest, n = kept / f"{key}-{what}-{stamp}", 0
    while os.path.lexists(dest):
        n += 1
        dest = kept / f"{key}-{what}-{stamp}-{n}"
    return dest


def _lift_index_lock(repo: Repo, key: str, path: str, lk: Path) -> dict[str, str]:
    """A stale index.lock is a whole index a dead git was about to put in place: when it
    holds HEAD's tree and the index does not (a commit that went in before its rename),
    it is moved over the index, as the commit would have; else, when it differs from the
    index (or cannot be read), a copy is kept under kept/ before it goes. Never a staged
    state lost. Everything is judged on copies taken once (the lane may change them)."""
    snap = _kept_name(repo, key, "index.lock")
    if not _snapshot(lk, snap):
        if stat.S_ISREG(os.lstat(lk).st_mode):
            raise OSError(f"cannot read {lk}")  # a staged state not to be lost: left
        os.unlink(lk)  # no index (a link, a FIFO put there since present() looked)
        return {}
    idx = lk.with_name("index")
    cur = snap.with_name(f".{snap.name}.index")
    try:
        had_index = _snapshot(idx, cur)
        where = _reader(repo, path, lk.parent)
        lock_e = _entries(where, {"GIT_INDEX_FILE": str(snap)}, None)
        index_e = _entries(where, {"GIT_INDEX_FILE": str(cur)}, None) if had_index else set()
        if lock_e is not None and lock_e == index_e:
            os.unlink(snap)
            os.unlink(lk)
            return {}
        out: dict[str, str] = {}
        if lock_e is not None and lock_e == _entries(where, None, "HEAD"):
            parent = _entries(where, None, "HEAD^") if had_index else set()
            if had_index and (index_e is None or index_e != parent):
                kept = _kept_name(repo, key, "index")  # staged before it: kept
                os.replace(cur, kept)
                out["kept_index"] = str(kept)
            # a new file of ours (O_EXCL|O_NOFOLLOW: never through a link the lane
            # planted in its admin dir, which a sandboxed lane can write)
            tmp = lk.with_name(f".index.git-lane-{secrets.token_hex(8)}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out_f, open(snap, "rb") as in_f:
                dirfd.copy_data(in_f.fileno(), out_f.fileno(), os.fstat(in_f.fileno()).st_size)
            os.replace(tmp, idx)  # atomic: the index is the old one or the commit's
            os.unlink(snap)
            out["moved_over_index"] = str(idx)
        else:
            out["kept"] = str(snap)
        os.unlink(lk)
        return out
    finally:
        if os.path.lexists(cur):
            os.unlink(cur)


def clear(repo: Repo, key: str, path: str, admin: Path | None) -> list[dict[str, str]]:
    """reconcile: remove the lane's stale lock files (and a dead checkpoint's record);
    one entry per lock lifted, saying what became of a staged state in it."""
    gone: list[dict[str, str]] = []
    for lk in stale(repo, key, path, admin):
        try:
            if lk.name == "index.lock":
                gone.append({"file": str(lk), **_lift_index_lock(repo, key, path, lk)})
            else:
                os.unlink(lk)
                gone.append({"file": str(lk)})
        except (OSError, GitError):
            pass  # left as it is: the next reconcile looks again
    if _checkpoint(repo.state_dir, key)[0] != "alive":
        release(repo.state_dir, key)
    return gone


# -- the lane's branch lock, in the common dir ------------------------------------------
def ref_lock(repo: Repo, branch: str) -> Path | None:
    """`<common>/refs/heads/<branch>.lock` of a `lane/...` branch when it is a regular
    file there (no symlink on the way): a lock a git writing the branch took."""
    parts = branch.split("/")
    if parts[0] != "lane" or len(parts) < 2 or any(p in ("", ".", "..") for p in parts):
        return None
    heads = Path(os.path.realpath(repo.common_dir)) / "refs" / "heads"
    lk = heads.joinpath(*parts[:-1], parts[-1] + ".lock")
    try:
        if not stat.S_ISREG(os.lstat(lk).st_mode):
            return None
    except OSError:
        return None
    if os.path.realpath(lk) != str(lk):
        return None  # a symlinked directory on the way: not git's
    return lk


def ref_lock_state(repo: Repo, branch: str, path: str) -> tuple[Path | None, str]:
    """(the branch's lock, "young" | "stale" | "held"): stale when a few seconds old and
    no live git works anywhere in the repository (any of them may be writing the branch),
    held when old but some git does."""
    return _lock_state(repo, ref_lock(repo, branch), path)


def _lock_state(repo: Repo, lk: Path | None, path: str) -> tuple[Path | None, str]:
    """(`lk`, "young" | "stale" | "held") for a lock file of the repository's refs (None:
    no lock there): young a few seconds old, stale when older and no live git works
    anywhere in the repository, held when older but some git does."""
    if lk is None:
        return None, ""
    try:
        young = time.time() - os.lstat(lk).st_mtime < MIN_AGE
    except OSError:
        return None, ""
    if young:
        return lk, "young"
    return lk, "held" if git_at_work(repo_roots(repo, path)) else "stale"


def _clear(judged: tuple[Path | None, str]) -> tuple[str | None, str | None]:
    """reconcile: (removed, left) a judged lock (_lock_state), removed when stale; an old
    one a live git may hold is left (doctor names it, with the command to remove it)."""
    lk, state = judged
    if lk is None or state == "young":
        return None, None
    if state == "held":
        return None, str(lk)
    try:
        os.unlink(lk)
    except OSError:
        return None, str(lk)
    return str(lk), None


def clear_ref(repo: Repo, branch: str, path: str) -> tuple[str | None, str | None]:
    """reconcile: the lane's branch lock, removed when stale (_clear)."""
    return _clear(ref_lock_state(repo, branch, path))


# -- the repository's packed-refs lock, in the common dir --------------------------------
def packed_refs_lock_state(repo: Repo, path: str) -> tuple[Path | None, str]:
    """(`<common>/packed-refs.lock` when a regular file there, "young" | "stale" |
    "held"), judged as the branch's lock is: git takes it for every ref delete, so a
    `gc`/`pack-refs` killed with its git makes every branch delete fail."""
    lk = Path(os.path.realpath(repo.common_dir)) / "packed-refs.lock"
    try:
        if not stat.S_ISREG(os.lstat(lk).st_mode):
            return None, ""
    except OSError:
        return None, ""
    return _lock_state(repo, lk, path)


def clear_packed_refs(repo: Repo) -> tuple[str | None, str | None]:
    """reconcile: `packed-refs.lock`, removed when stale (old, and no live git works
    anywhere in the repository; _clear)."""
    return _clear(packed_refs_lock_state(repo, str(repo.repo_root())))


def stale_refusal(key: str, locks: list[str], action: str) -> Refusal:
    return Refusal(
        "lane_busy",
        f"lane {key} has git lock file(s) left by a process that is gone "
        f"({', '.join(map(os.path.basename, locks))}): every git write there would fail; "
        "nothing was done",
        next=["git lane reconcile", f"git lane {action} {key}"],
        details={"lane": key, "locks": locks, "stale": True},
    )


def check(repo: Repo, key: str, path: str, admin: Path | None, action: str) -> None:
    """abort and continue: refuse (lane_busy) before git runs into a lock of the lane:
    reconcile, then the command again, when the lock is stale; else the command again."""
    locks = present(admin)
    if not locks:
        return
    dead = stale(repo, key, path, admin)
    if dead:
        raise stale_refusal(key, [str(p) for p in dead], action)
    raise Refusal(
        "lane_busy",
        f"a git command is writing in lane {key} (its {', '.join(p.name for p in locks)} "
        "exists); nothing was done",
        next=[f"git lane {action} {key}"],
        alternatives=["git lane status"],
        details={"lane": key, "locks": [str(p) for p in locks], "stale": False},
    )
