"""The owner's bits back on the way to main and to git-lane's state.

Landlock has no right over file modes: a sandboxed lane can `chmod 000` any file its
owner owns, `refs/heads/main` or `git-lane/locks` included (red team 15B F6). git then
cannot read main, every land refuses, and restore-main cannot lock the ref: each next
named the other, and none named the mode. So before a command reads anything, the engine
gives back the owner's read and write bits (and search on a directory) to the fixed list
of what git and git-lane must reach here, each through a directory fd from the common dir,
never through a link (one on the way is `main_not_plain`'s, and is left as it is). A mode
that cannot be given back (another owner's file) stays, and what then fails says so.
Every change is returned, for a warning and the event `mode_restored`.

Cost: one fstatat per name (about twenty), no process.
"""

from __future__ import annotations

import os
import stat

from guard import dirfd

DIR_BITS = 0o700  # read, write, search
FILE_BITS = 0o600  # read, write

# what git reads to find main, and what git-lane writes to land; relative to the common dir
_DIRS = ("refs", "refs/heads", "logs", "logs/refs", "logs/refs/heads", "objects", "git-lane")
_STATE_DIRS = ("locks", "lanes", "kept", "ready", "releasing", "gates", "setup")
_FILES = ("HEAD", "config", "packed-refs")
_STATE_FILES = ("epoch.json", "events.jsonl", "landing.json", "config.toml")


def _give(dfd: int, name: str, want_dir: bool) -> str | None:
    """The owner's bits back on `name` in `dfd` (never through a link); its old mode in
    octal when it changed, else None."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return None
    bits = DIR_BITS if want_dir else FILE_BITS
    if stat.S_ISDIR(st.st_mode) != want_dir or stat.S_ISLNK(st.st_mode):
        return None
    if not want_dir and not stat.S_ISREG(st.st_mode):
        return None
    mode = stat.S_IMODE(st.st_mode)
    if mode & bits == bits:
        return None
    try:
        qfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return None
    try:
        now = os.fstat(qfd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return None  # changed since: the next command looks again
        os.chmod(f"/proc/self/fd/{qfd}", mode | bits)
    except OSError:
        return None
    finally:
        os.close(qfd)
    return oct(mode)


def _give_top(common: str) -> str | None:
    """The owner's bits back on the common dir itself, through an O_PATH fd (a directory
    of mode 0 cannot be opened to read: red team 17 F2b); its old mode in octal when it
    changed, else None."""
    o_path = getattr(os, "O_PATH", 0)  # Linux; elsewhere a readable directory's only
    try:
        fd = os.open(common, dirfd.DIR | o_path)
    except OSError:
        return None
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & DIR_BITS == DIR_BITS:
            return None
        if o_path:
            os.chmod(f"/proc/self/fd/{fd}", mode | DIR_BITS)
        else:
            os.fchmod(fd, mode | DIR_BITS)
    except OSError:
        return None
    finally:
        os.close(fd)
    return oct(mode)


def _walk(common: str, rel: str, changed: list[tuple[str, str]]) -> int | None:
    """An fd on directory `rel` of the common dir, each directory on the way given the
    owner's bits first; None when one is no directory, a link, or cannot be opened."""
    fd = os.open(common, dirfd.DIR)
    try:
        at = ""
        for part in [p for p in rel.split("/") if p]:
            was = _give(fd, part, True)
            at = f"{at}/{part}" if at else part
            if was is not None:
                changed.append((at, was))
            try:
                nfd = os.open(part, dirfd.DIR | os.O_NONBLOCK, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def give_back(common: str, branches: list[str]) -> list[tuple[str, str]]:
    """Give the owner's bits back along the way to each of `branches` (main's candidates:
    its loose ref, its reflog, every directory of its name), packed-refs, HEAD, config,
    and git-lane's state dir and its parts. Returns (path relative to the common dir, old
    mode) of each change."""
    changed: list[tuple[str, str]] = []
    was = _give_top(common)
    if was is not None:
        changed.append((".", was))
    try:
        top = os.open(common, dirfd.DIR)
    except OSError:
        return changed
    try:
        for name in _FILES:
            was = _give(top, name, False)
            if was is not None:
                changed.append((name, was))
    finally:
        os.close(top)
    dirs = list(_DIRS)
    for branch in branches:
        parts = branch.split("/")
        for base in ("refs/heads", "logs/refs/heads"):
            dirs.extend("/".join([base, *parts[:i]]) for i in range(1, len(parts)))
    for rel in dict.fromkeys(dirs):
        fd = _walk(common, rel, changed)
        if fd is not None:
            os.close(fd)
    for branch in branches:
        parts = branch.split("/")
        for base in ("refs/heads", "logs/refs/heads"):
            where = "/".join([base, *parts[:-1]])
            fd = _walk(common, where, changed)
            if fd is None:
                continue
            try:
                was = _give(fd, parts[-1], False)
                if was is not None:
                    changed.append((f"{where}/{parts[-1]}", was))
            finally:
                os.close(fd)
    fd = _walk(common, "git-lane", changed)
    if fd is not None:
        try:
            for name in _STATE_DIRS:
                was = _give(fd, name, True)
                if was is not None:
                    changed.append((f"git-lane/{name}", was))
            for name in _STATE_FILES:
                was = _give(fd, name, False)
                if was is not None:
                    changed.append((f"git-lane/{name}", was))
        finally:
            os.close(fd)
    return changed


def note(changed: list[tuple[str, str]]) -> str:
    shown = ", ".join(f"{p} (was {m})" for p, m in changed[:5])
    more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
    return (
        f"gave the owner's read and write bits back to {shown}{more} in the git dir: "
        "something changed their mode (a sandbox cannot stop chmod), and git could not "
        "read main or git-lane its state without them"
    )
