"""Recovery of a lane from what git still knows, after something outside git-lane broke
it: its worktree deleted by hand (with or without `git worktree prune` since), its branch
deleted or moved by hand, its record unreadable. Facts first (what status, doctor, land
and sync ask), then the repairs (`git lane repair`, `git lane reconcile`). A repair never
discards work: a branch value it replaces is kept on a rescue branch when it holds
commits the restored value lacks, and an unreadable record is moved aside, never deleted.

Where a lane's commit is recorded when its branch is gone: the HEAD reflog of its
worktree (`<admin>/logs/HEAD`), which every commit, rebase and reset made in the lane
writes, and which a ref update from any other worktree does not."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from guard import dirfd, git
from guard.errors import Refusal
from guard.repo import Repo
from guard.store import LaneRecord, admin_by_gitdir, now_iso, read_regular

ZERO = "0" * 40
RESCUE_PREFIX = "refs/heads/git-lane-rescue/"


# -- facts ----------------------------------------------------------------------------------
def admin_dir(repo: Repo, path: str) -> Path | None:
    """The administrative dir (`<common>/worktrees/<id>`) of the worktree registered at
    `path`, found from the worktree's .git file, or, when the directory is gone, from the
    `gitdir` file git keeps for it (until `git worktree prune` removes both)."""
    gd = git.worktree_git_dir(path)
    if gd is not None and gd.is_dir():
        return gd
    want = os.path.realpath(os.path.join(path, ".git"))
    return admin_by_gitdir(Path(os.path.realpath(repo.common_dir)) / "worktrees", want)


def _read(p: Path) -> str | None:
    """A pointer file (the lane's `.git`, its admin dir's `gitdir`): both the lane's to
    write, so never followed nor waited on, and at most 64 KiB (a path) read."""
    try:
        return read_regular(p, follow=False, limit=1 << 16).decode().rstrip("\n")
    except (OSError, UnicodeDecodeError):
        return None


def _read_bytes(p: Path) -> bytes | None:
    try:
        return read_regular(p, follow=False, limit=4096)
    except OSError:
        return None


def pointer_faults(repo: Repo, rec: LaneRecord, checkout: bool = True) -> list[str]:
    """What is wrong with the lane's three git pointers, measured against trusted state
    (the record's admin dir, the real common dir): its `.git` file names the admin dir,
    the admin dir's `commondir` resolves to the common dir, its `gitdir` names `<lane>/.git`.
    `checkout` False: the worktree is gone by hand (no `.git` there), the admin dir's two
    pointers alone are measured."""
    admin = repo.store.admin_dir(rec)
    common = os.path.realpath(repo.store.common_dir)
    if admin is None or not admin.is_dir():
        return [f"no admin dir for it under {git.shown(common)}/worktrees"]
    faults = []
    dotgit = Path(rec.path) / ".git"
    text = _read(dotgit)
    named = text[len("gitdir: ") :] if text and text.startswith("gitdir: ") else None
    if checkout and (
        named is None or os.path.realpath(os.path.join(rec.path, named)) != os.path.realpath(admin)
    ):
        faults.append(f"{git.shown(dotgit)} does not name {git.shown(admin)}")
    # only what git writes, `../..` and a newline: git reads the whole file (a second
    # line is part of the name, a NUL ends it) and the hooks read that form alone, so
    # any other one naming the common dir too is no pointer of git's making
    cd = _read_bytes(admin / "commondir")
    if cd != b"../..\n":
        faults.append(f"{git.shown(admin / 'commondir')} does not name {git.shown(common)}")
    gd = _read(admin / "gitdir")
    if gd is None or os.path.realpath(gd) != os.path.realpath(dotgit):
        faults.append(f"{git.shown(admin / 'gitdir')} does not name {git.shown(dotgit)}")
    return faults


def _replace(p: Path, text: str) -> None:
    """Atomically, in `p`'s directory (the lane's root or its admin dir: trusted paths,
    whose insides a sandboxed lane writes): a new file under a random name (O_EXCL|
    O_NOFOLLOW: never through a link the lane planted at a name it could guess), renamed
    over `p` (a symlink at p is replaced, never followed)."""
    dirfd.write_file(str(p.parent), p.name, text.encode())


def repair_pointers(repo: Repo, rec: LaneRecord, move_aside: bool = False) -> list[dict[str, Any]]:
    """Rewrite the lane's pointers from trusted state (each atomically). A `.git` that is
    a directory is a repository someone made there: refused, never touched, unless
    `move_aside` (the owner's `repair --move-aside`, the refusal's next): then it is
    renamed, through a descriptor on the lane's root, to the first free of
    `.git.moved-aside`, `.git.moved-aside.1`, ... (kept, never replaced nor deleted), and
    the pointer is written in its place. Never a shell redirect into the lane's path (the
    lane can make `.git` a link to a file of the owner's between the print and the run)."""
    admin = repo.store.admin_dir(rec)
    if admin is None or not admin.is_dir() or not os.path.isdir(rec.path):
        return []
    if not pointer_faults(repo, rec):
        return []
    _never_anothers(repo, rec, admin)
    dotgit = Path(rec.path) / ".git"
    changes: list[dict[str, Any]] = []
    if not os.path.lexists(dotgit):
        return []  # no worktree of git's there (a foreign directory?): restore_worktree's call
    if dotgit.is_dir() and not dotgit.is_symlink():
        if move_aside:
            changes.append(_dotgit_aside(rec, dotgit))
        else:
            # a repository of its own at the lane's path (made there, or someone's):
            # never touched by a plain repair; moved aside (kept) by the command below
            raise Refusal(
                "lane_pointers_tampered",
                f"lane {rec.key}'s {git.shown(dotgit)} is a directory (a repository of its "
                "own), not git's pointer to the lane's admin dir; it was left as it is: "
                "`repair --move-aside` moves it aside (kept) and writes the pointer",
                next=[f"git lane repair {rec.key} --move-aside"],
                details={"lane": rec.key, "path": str(dotgit)},
            )
    want = {
        dotgit: f"gitdir: {admin}\n",
        admin / "commondir": "../..\n",
        admin / "gitdir": f"{dotgit}\n",
    }
    for p, text in want.items():
        if _read(p) != text.rstrip("\n"):
            try:
                _replace(p, text)
            except OSError as exc:  # a directory put back at `.git` meanwhile: left as it is
                raise Refusal(
                    "lane_pointers_tampered",
                    f"lane {rec.key}'s pointer {git.shown(p)} could not be written "
                    f"({exc.strerror}); what is there was left as it is",
                    next=[f"git lane repair {rec.key} --move-aside"],
                    details={"lane": rec.key, "path": str(p), "error": exc.strerror},
                ) from exc
            changes.append({"action": "pointer_rewritten", "lane": rec.key, "file": str(p)})
    return changes


def _dotgit_aside(rec: LaneRecord, dotgit: Path) -> dict[str, Any]:
    """The directory at the lane's `.git` renamed to a fresh name beside it, through a
    descriptor on the lane's root (trusted: its path is the owner's): only a directory
    found there now is moved (a link or file the lane put there since is left for the
    pointer's write, which replaces it and never writes through it)."""
    fd = os.open(rec.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        st = os.stat(".git", dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            return {"action": "dotgit_gone", "lane": rec.key}
        got = dirfd.move_aside(fd, ".git", ".git.moved-aside")
    except OSError as exc:
        raise Refusal(
            "lane_pointers_tampered",
            f"lane {rec.key}'s {git.shown(dotgit)} (a directory) could not be moved aside "
            f"({exc.strerror}); it was left as it is",
            next=[f"git lane repair {rec.key} --move-aside"],
            details={"lane": rec.key, "path": str(dotgit), "error": exc.strerror},
        ) from exc
    finally:
        os.close(fd)
    return {"action": "dotgit_moved_aside", "lane": rec.key, "to": os.path.join(rec.path, got)}


_KEPT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")


def _check_into(rec: LaneRecord, name: str) -> None:
    """`--into NAME`: a name git-lane gives a kept/ directory, or refused keep_failed."""
    if not _KEPT_NAME.match(name):
        raise Refusal(
            "keep_failed",
            f"--into {git.shown(name)} is no name git-lane gives a kept/ directory; nothing "
            "was moved",
            next=[f"git lane status {rec.key}"],
            details={"lane": rec.key, "into": name},
        )


def keep_paths(
    repo: Repo, rec: LaneRecord, rels: list[str], into: str | None
) -> list[dict[str, Any]]:
    """Move each of `rels` (paths in the lane's worktree) into kept/`into` (a fresh
    kept_dir when None), keeping its relative path: the owner's `repair --keep`, the
    `next` of ignored_in_the_way and of checkpoint's lane_index_unsafe. The directory of
    each is reached from the lane's root one component at a time, O_NOFOLLOW (a link the
    lane put on the way since the refusal fails the walk: refused, nothing moved past
    it), and the last name is renamed itself (a link is moved, never what it names),
    never over anything (RENAME_NOREPLACE: a taken name gets `.1`, `.2`, ...). A path
    with nothing at it any more is skipped. Where kept/ is on another file system than
    the lane, a `.git-lane-kept/` beside the lane (the owner's directory) takes them."""
    name = into if into is not None else repo.kept_dir(rec.key).name
    _check_into(rec, name)
    bad = [r for r in rels if _keep_parts(r) is None]
    if bad:
        raise Refusal(
            "keep_failed",
            f"--keep names path(s) that are not inside lane {rec.key}'s worktree or name its "
            f".git ({git.shown_some(bad)}); nothing was moved",
            next=[f"git lane status {rec.key}"],
            details={"lane": rec.key, "paths": bad[:100]},
        )
    changes: list[dict[str, Any]] = []
    for rel in rels:
        parts = _keep_parts(rel) or []
        where = "/".join(parts[:-1]) or "."
        try:
            sfd, _ = dirfd.walk(rec.path, where)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _keep_refused(rec, rel, exc) from None
        try:
            try:
                os.stat(parts[-1], dir_fd=sfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            got = _keep_one(repo, rec, sfd, parts, name)
        except OSError as exc:
            raise _keep_refused(rec, rel, exc) from None
        finally:
            os.close(sfd)
        changes.append({"action": "kept", "lane": rec.key, "path": rel, "to": got})
    return changes


def add_ignores(rec: LaneRecord, patterns: list[str]) -> list[dict[str, Any]]:
    """Append `patterns` (one line each, after an empty line) to the lane's top
    `.gitignore`: the owner's `repair --ignore`, the `next` of lane_changed_during_gate
    when the gate left only new files. Read O_NOFOLLOW (a link or anything but a regular
    file there: refused) and replaced through a descriptor on the lane's root (a link put
    there since is replaced, never written through): never a shell `>>` into the lane's
    path, which a process of the lane can make a link to a file of the owner's between
    the print and the run."""
    bad = [p for p in patterns if not p or "\n" in p or "\r" in p or "\0" in p]
    if bad:
        raise Refusal(
            "keep_failed",
            f"--ignore names pattern(s) that are not one .gitignore line ({git.shown_some(bad)}); "
            "nothing was written",
            next=[f"git lane status {rec.key}"],
            details={"lane": rec.key, "paths": bad[:100]},
        )
    fd = os.open(rec.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            old = dirfd.read(fd, ".gitignore", limit=1 << 20)
            mode: int | None = stat.S_IMODE(
                os.stat(".gitignore", dir_fd=fd, follow_symlinks=False).st_mode
            )
        except FileNotFoundError:
            old, mode = b"", None
        new = old + "".join(f"\n{p}\n" for p in patterns).encode("utf-8", "surrogateescape")
        dirfd.replace(fd, ".gitignore", [new], mode)
    except OSError as exc:
        raise Refusal(
            "keep_failed",
            f"lane {rec.key}'s .gitignore could not be read or written ({exc.strerror or exc}): "
            "it is a link or no regular file now (the lane changed it); nothing was written",
            next=[f"git lane status {rec.key}"],
            details={"lane": rec.key, "paths": [".gitignore"], "error": exc.strerror},
        ) from None
    finally:
        os.close(fd)
    return [{"action": "ignored", "lane": rec.key, "patterns": patterns}]


def set_aside_submodules(
    repo: Repo, rec: LaneRecord, rels: list[str], into: str | None = None
) -> list[dict[str, Any]]:
    """The owner's `repair --set-aside-submodule`, the `next` of submodule_unreadable and
    (with `into`) of submodule_differs: each of `rels` (a gitlink of the lane's index, or
    a path below one: a nested submodule) is renamed to the first free one of
    `NAME.moved-aside`, `NAME.moved-aside.1`, ... beside it (RENAME_NOREPLACE: nothing
    there is ever replaced), or with `into` to kept/`into`/PATH (keep_paths' move: the
    lane is then clean, and land goes on without the submodule's own changes, kept), and
    an empty directory is made in its place, so git sees the submodule unpopulated and
    its files stay, untracked beside it or in kept/ (its commits stay in its git dir, in
    the lane's admin dir). Its directory is reached from the lane's root one component at a
    time, O_NOFOLLOW, and the last name must be a directory itself: a link or anything
    else on the way or there (a process of the lane changed it since the refusal) is
    refused keep_failed, nothing renamed from it on, never followed out of the lane (a
    shell `mv -- LANE/a/sub` renamed what a link at `a` named). Nothing there, or an empty
    directory (unpopulated already): left as it is. No git runs inside the submodule."""
    if into is not None:
        _check_into(rec, into)
    bad = [r for r in rels if _keep_parts(r) is None or ".git" in r.lower().split("/")]
    if not bad and rels:
        repo.store.pin(rec)  # an admin dir repair made just now
        if not git.lane_pointers(rec.path):  # git there would follow the lane's .git
            raise Refusal(
                "keep_failed",
                f"lane {rec.key} has no admin dir of git's, so its index cannot be read to "
                "tell its submodules; nothing was moved",
                next=[f"git lane status {rec.key}"],
                details={"lane": rec.key, "paths": list(rels)[:100]},
            )
        links = {e.path for e in git.unseen_entries(rec.path) if e.gitlink}
        bad = [r for r in rels if not any(r == s or r.startswith(s + "/") for s in links)]
    if bad:
        raise Refusal(
            "keep_failed",
            f"--set-aside-submodule names path(s) that are no submodule of lane {rec.key}, "
            f"none a gitlink of its index nor below one ({git.shown_some(bad)}); nothing "
            "was moved",
            next=[f"git lane status {rec.key}"],
            details={"lane": rec.key, "paths": bad[:100]},
        )
    changes: list[dict[str, Any]] = []
    for rel in rels:
        where, _, name = rel.rpartition("/")
        try:
            pfd, _ = dirfd.walk(rec.path, where or ".")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _set_aside_refused(rec, rel, exc) from None
        try:
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise OSError(errno.ENOTDIR, "not a directory", rel)
            sfd = os.open(name, dirfd.DIR | os.O_NONBLOCK, dir_fd=pfd)
            try:
                with os.scandir(sfd) as it:  # one entry read, however many the lane made
                    empty = next(it, None) is None
            finally:
                os.close(sfd)
            if empty:
                continue
            if into is None:
                got = dirfd.move_aside(pfd, name, f"{name}.moved-aside")
                to = f"{where}/{got}" if where else got
            else:  # out of the worktree: nothing of it left for `git status` to see
                to = _keep_one(repo, rec, pfd, _keep_parts(rel) or [name], into)
            change = {"action": "submodule_set_aside", "lane": rec.key, "path": rel, "to": to}
            try:
                os.mkdir(name, 0o777, dir_fd=pfd)
            except FileExistsError:  # the lane made one meanwhile: its own, left to it
                change["left"] = "something the lane made since is at the path: left as it is"
            changes.append(change)
        except OSError as exc:
            raise _set_aside_refused(rec, rel, exc) from None
        finally:
            os.close(pfd)
    return changes


def submodule_differs(
    repo: Repo, key: str, subs: list[git.SubmoduleState], then: str, why: str
) -> Refusal:
    """submodule_differs, for land (G4) and export: `subs` are populated submodules of
    lane `key` at another commit than the tip records, or with changes of their own, read
    by the engine (git.submodule_head, git.submodule_dirty: a fresh git dir of ours) and
    shown here. The next sets each aside into a new kept_dir (`repair --into NAME
    --set-aside-submodule PATH`: the engine's renames through directory fds, an empty
    directory left), then `then`: never git run inside the submodule (a `stash` there,
    a `submodule update --checkout`, even a `status`), whose git dir
    (`<admin>/modules/<name>/`: config, hooks, info/attributes) a sandboxed lane writes,
    so the owner would run the lane's program."""
    kept = repo.kept_dir(key)
    aside = " ".join(f"--set-aside-submodule {git.q(s.path)}" for s in subs)

    def what(s: git.SubmoduleState) -> str:
        if s.head != s.recorded:
            return f"{s.path} at {(s.head or '?')[:12]}, the tip records {(s.recorded or '?')[:12]}"
        return f"{s.path} with changes of its own ({', '.join(s.dirty[:5])})"

    return Refusal(
        "submodule_differs",
        f"in lane {key}, submodule(s) {'; '.join(what(s) for s in subs[:10])}: {why}. The "
        f"next moves each submodule's files into {git.shown(kept)} and leaves it unpopulated "
        "(its commits stay in its git dir): the lane then holds the tip as it records it; "
        "or the lane records the new commit itself",
        next=[f"git lane repair {key} --into {git.q(kept.name)} {aside}", then],
        details={
            "lane": key,
            "kept": str(kept),
            "submodules": [
                {
                    "path": s.path,
                    "recorded": s.recorded,
                    "head": s.head,
                    "dirty_paths": s.dirty[:50],
                }
                for s in subs
            ],
        },
    )


def _set_aside_refused(rec: LaneRecord, rel: str, exc: OSError) -> Refusal:
    return Refusal(
        "keep_failed",
        f"submodule {git.shown(rel)} of lane {rec.key} could not be set aside "
        f"({exc.strerror or exc}): it or a name on its way is a link or no directory now "
        "(the lane changed it since the refusal), and is never followed; nothing was moved "
        "from it on",
        next=[f"git lane status {rec.key}"],
        details={"lane": rec.key, "paths": [rel], "error": exc.strerror},
    )


def _keep_parts(rel: str) -> list[str] | None:
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") for p in parts) or parts[0] == ".git":
        return None
    return parts


def _keep_one(repo: Repo, rec: LaneRecord, sfd: int, parts: list[str], name: str) -> str:
    """Rename `parts[-1]` (in `sfd`) to kept/`name`/`parts`: the state's kept/ first,
    on another file system (EXDEV) a `.git-lane-kept/` beside the lane."""
    sub = "/".join([name, *parts[:-1]])
    roots = [repo.state_dir / "kept", Path(rec.path).parent / ".git-lane-kept"]
    for i, root in enumerate(roots):
        root.mkdir(parents=True, exist_ok=True)
        dfd, _ = dirfd.walk(str(root), sub, create=True)
        try:
            n, last = 0, parts[-1]
            while True:
                dest = last if n == 0 else f"{last}.{n}"
                try:
                    dirfd.rename_noreplace(sfd, last, dfd, dest)
                    return os.path.join(root, sub, dest)
                except FileExistsError:
                    n += 1
                except OSError as exc:
                    if exc.errno != errno.EXDEV or i == len(roots) - 1:
                        raise
                    break
        finally:
            os.close(dfd)
    raise OSError(errno.EXDEV, "no kept directory on the lane's file system")


def _keep_refused(rec: LaneRecord, rel: str, exc: OSError) -> Refusal:
    return Refusal(
        "keep_failed",
        f"{git.shown(rel)} in lane {rec.key} could not be moved into kept/ "
        f"({exc.strerror or exc}): a name on its way is a link or no directory now (the lane "
        "changed it), or kept/ could not be written; nothing was moved past it",
        next=[f"git lane status {rec.key}"],
        details={"lane": rec.key, "paths": [rel], "error": exc.strerror},
    )


def _never_anothers(repo: Repo, rec: LaneRecord, admin: Path) -> None:
    """An admin dir another recorded lane has is never pointed at this lane's path (nor
    named in a next that would): a record without `admin` finds its admin dir by the
    `gitdir` file that names its path, which another lane writes (red team 13Q: a lane
    naming `OTHER/.git` there had OTHER, the owner's other repository, handed to it).
    An admin dir a record names (or that has the lane's directory's name) is that lane's."""

    def named(r: LaneRecord) -> bool:
        return (r.admin or os.path.basename(os.path.realpath(r.path))) == admin.name

    if named(rec):
        return
    mine = os.path.realpath(admin)
    for k in repo.store.lane_keys():
        other = repo.store.read_lane(k) if k != rec.key else None
        if other is None or other.status == "released" or not named(other):
            continue
        theirs = repo.store.admin_dir(other)
        if theirs is not None and os.path.realpath(theirs) == mine:
            raise Refusal(
                "lane_pointers_tampered",
                f"lane {rec.key}'s admin dir, found by the `gitdir` file that names "
                f"{git.shown(rec.path)}, is lane {k}'s ({git.shown(admin)}): lane {k}'s "
                f"pointer was changed; nothing at {git.shown(rec.path)} was touched",
                next=[f"git lane repair {k}"],
                details={"lane": rec.key, "path": rec.path, "admin": str(admin), "owner": k},
            )


def head_ref(admin: Path) -> str | None:
    """What the worktree's HEAD names: a full ref when symbolic, else None."""
    try:
        text = git.read_admin(admin / "HEAD").strip()
    except OSError:
        return None
    return text[len("ref: ") :] if text.startswith("ref: ") else None


def newest_head_log(admin: Path) -> str | None:
    """The new value of the newest entry of the worktree's HEAD reflog, read from the end
    of the file (a reflog of years stays cheap), or None when there is none."""
    p = admin / "logs" / "HEAD"
    try:
        with os.fdopen(git.open_regular(p, follow=False), "rb") as f:  # a FIFO never blocks
            f.seek(0, os.SEEK_END)
            size = f.tell()
            chunk = 4096
            while True:
                start = max(0, size - chunk)
                f.seek(start)
                data = f.read(size - start)
                lines = [ln for ln in data.split(b"\n") if ln.strip()]
                if lines and (start == 0 or len(lines) > 1):
                    last = lines[-1]
                    break
                if start == 0:
                    return None
                chunk *= 4
    except OSError:
        return None
    fields = last.split(b" ", 2)
    if len(fields) < 2:
        return None
    new = fields[1].decode("ascii", "replace")
    return new if len(new) == 40 and new != ZERO else None


@dataclass(frozen=True)
class BranchFacts:
    """The lane branch against what its worktree recorded: "ok", "missing" (the ref is
    gone), or "moved" (the ref names another commit than the worktree last had checked
    out on it). `recorded` is that commit (None when nothing in git records it)."""

    state: str
    tip: str | None
    recorded: str | None
    symbolic: str | None = None  # the ref made a symbolic ref: what it names (tip is its value)


def loose_symbolic(repo: Repo, branch: str) -> str | None:
    """What the loose ref of `branch` names when it was made a symbolic ref, by its text
    (`ref: refs/heads/main`) or as a symlink, else None. git follows either, so the lane's
    "tip" would be another branch's value, and a plain `update-ref -d` of it deletes that
    branch. git-lane never makes one; only a writer in the common dir's lane refs can (a
    lane, by hand). A packed ref is never symbolic."""
    p = Path(repo.common_dir) / "refs" / "heads" / branch
    try:
        if stat.S_ISLNK(os.lstat(p).st_mode):
            return os.readlink(p)
        text = git.read_regular(p, follow=False, limit=4096)
    except FileNotFoundError:
        return None
    except OSError as exc:
        # not a file git reads as a ref (a directory, a FIFO): git sees no branch there
        if exc.errno in (errno.EISDIR, errno.EINVAL, errno.ENOTDIR):
            return None
        raise Refusal(
            "state_corrupt",
            f"the ref file of {branch} cannot be read ({exc.strerror}): whether it is a "
            "symbolic ref is unknown",
            next=["git lane doctor"],
            details={"path": str(p), "error": exc.strerror},
        ) from exc
    if text.startswith(b"ref:"):
        return text[4:].strip().decode("utf-8", "replace")
    return None


def branch_facts(repo: Repo, path: str, branch: str, tip: str | None) -> BranchFacts:
    """Only a worktree whose HEAD names the lane branch speaks for it: a detached or
    switched worktree is the branch-mismatch case, which status and land name themselves.
    A branch ref made a symbolic ref is "moved" whatever value it resolves to: its value is
    another branch's, and every write to it would be that branch's."""
    symbolic = loose_symbolic(repo, branch)
    admin = admin_dir(repo, path)
    recorded = None
    if admin is not None and head_ref(admin) == f"refs/heads/{branch}":
        recorded = newest_head_log(admin)
        # the reflog is the lane's to write: a commit no store holds is no evidence of
        # anything (the branch was never there), so it cannot call the branch moved
        # (asked only when it would: the branch's own tip is held)
        if recorded not in (None, tip) and not git.commit_held(admin, str(recorded)):
            recorded = None
    if symbolic is not None:
        return BranchFacts("moved", tip, recorded, symbolic)
    if tip is None:
        return BranchFacts("missing", None, recorded)
    if recorded is not None and recorded != tip:
        return BranchFacts("moved", tip, recorded)
    return BranchFacts("ok", tip, recorded)


def branch_refusal(key: str, facts: BranchFacts, action: str) -> Refusal:
    """land and sync (and a plain release) on a lane whose branch was deleted or moved by
    hand: acting would land, rebase or drop the wrong commits."""
    rec = facts.recorded
    if facts.state == "missing":
        return Refusal(
            "lane_branch_missing",
            f"the branch lane/{key} is gone (deleted outside git-lane)"
            + (
                f"; its worktree last had {rec[:12]} checked out on it"
                if rec
                else "; nothing in git records its last commit"
            ),
            next=[f"git lane repair {key}", f"git lane {action} {key}"],
            details={"lane": key, "recorded": rec},
        )
    if facts.symbolic is not None:  # the lane wrote it: one printable line
        named = facts.symbolic[:200]
        how = "made a symbolic ref to " + (
            named if named.isprintable() else json.dumps(named, ensure_ascii=True)
        )
    else:
        how = f"moved outside the lane: it is at {str(facts.tip)[:12]}"
    had = (
        f"its worktree has {rec[:12]} checked out on it"
        if rec
        else "nothing in git records its last commit"
    )
    return Refusal(
        "lane_branch_moved",
        f"the branch lane/{key} was {how}, but {had}",
        next=[f"git lane repair {key}", f"git lane {action} {key}"],
        details={"lane": key, "tip": facts.tip, "recorded": rec, "symbolic": facts.symbolic},
    )


# -- repairs --------------------------------------------------------------------------------
def restore_branch(repo: Repo, rec: LaneRecord, facts: BranchFacts) -> list[dict[str, Any]]:
    """Put the lane branch back at the commit its worktree recorded. A moved branch's value
    is kept on a `git-lane-rescue/` branch first when it holds commits the restored value
    lacks; the move itself is a compare-and-swap, run in the lane's worktree when it is
    there so its HEAD reflog records it."""
    if facts.state == "ok":
        return []
    key, ref = rec.key, f"refs/heads/{rec.branch}"
    target = facts.recorded
    admin = admin_dir(repo, rec.path)
    held = target is not None and (
        git.commit_held(admin, target)
        if admin is not None
        else git.has_commit(repo.common_dir, target)
    )
    if not held and facts.symbolic is not None and facts.tip is not None:
        # nothing records the lane's own commit: the ref keeps the value it resolves to,
        # as a plain ref, so no write to it reaches the branch it named
        target, held = facts.tip, True
    if not held and facts.tip is not None:
        return []  # no commit to put an existing branch back at: it stays as it is, whole
    if target is None or not held:
        raise Refusal(
            "lane_branch_missing",
            f"the branch {rec.branch} is gone and nothing in git records the lane's last commit "
            "(its worktree's HEAD reflog is gone or names a commit no longer here); nothing was changed",
            next=[f"git lane release {key} --confirm yes-discard-lane"],
            alternatives=[
                "git fsck --no-reflogs --lost-found  # dangling commits; if the lane's is one: "
                f"git branch {rec.branch} <sha> && git lane repair {key}"
            ],
            details={"lane": key, "recorded": target},
        )
    where: str | os.PathLike[str] = rec.path if os.path.isdir(rec.path) else repo.common_dir
    out: list[dict[str, Any]] = []
    old = facts.tip or ""
    # a symbolic ref's value is the named branch's, which keeps it: no rescue of it
    if facts.symbolic is None and facts.tip is not None and not _contains(repo, target, facts.tip):
        rescue = f"{RESCUE_PREFIX}{key}-{facts.tip[:12]}"
        if repo.ref_sha(rescue) != facts.tip:
            git.run(
                ["update-ref", "-m", f"git-lane: repair {key}: keep", rescue, facts.tip, ""],
                repo.common_dir,
            )
        out.append({"action": "moved_value_kept", "lane": key, "ref": rescue, "sha": facts.tip})
    res = git.run(  # --no-deref: a branch ref made a symref (to main) is replaced, never followed
        ["update-ref", "--no-deref", "-m", f"git-lane: repair {key}", ref, target, old],
        where,
        check=False,
    )
    if not res.ok:  # the compare-and-swap lost: something moved the branch meanwhile
        raise Refusal(
            "lane_branch_moved",
            f"the branch {rec.branch} changed while repair ran ({res.stderr.strip()[:200]}); nothing was restored",
            next=[f"git lane status {key}", f"git lane repair {key}"],
            details={"lane": key, "tip": repo.ref_sha(ref), "recorded": target},
        )
    out.append(
        {
            "action": "branch_restored",
            "lane": key,
            "from": facts.tip,
            "to": target,
            "source": "the worktree's HEAD reflog" if target == facts.recorded else "its value",
            **({"was_symbolic_to": facts.symbolic} if facts.symbolic is not None else {}),
        }
    )
    return out


def _contains(repo: Repo, tip: str, other: str) -> bool:
    """Is `other` an ancestor of (or equal to) `tip`?"""
    res = git.run(["merge-base", "--is-ancestor", other, tip], repo.common_dir, check=False)
    return res.returncode == 0


def restore_worktree(repo: Repo, rec: LaneRecord) -> list[dict[str, Any]]:
    """Check the lane out again at its recorded path. While git still has the worktree's
    admin dir (no `git worktree prune` since), the directory is linked back to it (its
    `.git` file and the admin dir's `gitdir` and `commondir`, written by us from trusted
    state, never by `git worktree repair`: git's repair rewrites *every* registered
    worktree, and writes `DIR/.git` wherever another lane's lane-written `gitdir` file
    points) and filled from its index: staged work, the HEAD reflog, per-worktree refs
    and a lock all survive. Once pruned, a plain `git worktree add <path> <branch>`."""
    path = rec.path
    if os.path.lexists(path) and (not os.path.isdir(path) or os.listdir(path)):
        raise Refusal(
            "worktree_path_exists",
            f"{path} exists and is not lane {rec.key}'s worktree; it was left as it is",
            next=[git.mv_aside(path, path + ".moved-aside"), f"git lane repair {rec.key}"],
            details={"lane": rec.key, "path": path},
        )
    admin = repo.store.admin_dir(rec)  # the record's, never one a lane's gitdir file names
    if admin is not None and not admin.is_dir():
        admin = None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise Refusal(
            "worktree_restore_failed",
            f"cannot make {path}: {exc.strerror}",
            next=[f"mkdir -p {git.q(path)}", f"git lane repair {rec.key}"],
            details={"lane": rec.key, "path": path},
        ) from None
    if admin is not None:
        dotgit = Path(path, ".git")
        dirfd.write_file(path, ".git", f"gitdir: {admin}\n".encode())
        try:
            repair_pointers(repo, rec)  # gitdir and commondir too, before git reads its index
            if not (admin / "index").exists():
                _restore_steps(repo, rec, [["reset", "-q"]])  # the index from HEAD
            _check_index_names(rec, admin, repo.common_dir)
        except Refusal:
            dotgit.unlink()  # the directory as it was found: empty
            raise
        steps = [["checkout-index", "-a"]]
        how = "relinked"
    else:
        os.rmdir(path)
        steps = [["worktree", "add", "-q", path, rec.branch]]
        how = "added"
    _restore_steps(repo, rec, steps)
    return [{"action": "worktree_restored", "lane": rec.key, "path": path, "how": how}]


def _restore_steps(repo: Repo, rec: LaneRecord, steps: list[list[str]]) -> None:
    for argv in steps:
        cwd = repo.common_dir if argv[0] == "worktree" else rec.path
        res = git.run(argv, cwd, check=False)
        if not res.ok:
            raise Refusal(
                "worktree_restore_failed",
                f"git could not check lane {rec.key} out again at {rec.path} "
                f"(`git {' '.join(argv)}`: {res.stderr.strip()[:300]}); the branch {rec.branch} is untouched",
                next=[git.owner_status(rec.path), f"git lane repair {rec.key}"],
                details={"lane": rec.key, "path": rec.path, "stderr": res.stderr},
            )


def _check_index_names(rec: LaneRecord, admin: Path, common: str | os.PathLike[str]) -> None:
    """The lane's index is what fills its worktree (checkout-index -a keeps its staged
    work), and the lane writes it: git takes an entry's name from an index as it is, so
    one named `../../.git/hooks/post-checkout` would be written there, outside the lane.
    Every name is checked first (one ls-files); a name git would refuse as a path it is
    given refuses the restore, and the index rebuilt from the lane's commit (which git
    checks as it reads it) lets repair fill the worktree from that."""
    git.check_index_file(admin, rec.path)
    bad = git.unsafe_index_entries(rec.path)
    if not bad:
        return
    shown = git.shown_some(bad)
    raise Refusal(
        "lane_index_unsafe",
        f"lane {rec.key}'s index names {len(bad)} path(s) outside its worktree or in a git "
        f"dir ({shown}), which git would write where they point; its worktree was not "
        "filled from it (nothing was written). The lane's commits are untouched",
        next=[
            f"{git.owner_git_dir(admin, common)} read-tree HEAD",
            f"git lane repair {rec.key}",
        ],
        alternatives=[
            f"{git.owner_git_dir(admin, common)} ls-files -s  # the index as the "
            "lane left it (read-tree drops what it staged)"
        ],
        details={"lane": rec.key, "path": rec.path, "index": str(admin / "index"), "paths": bad},
    )


# -- corrupt records ------------------------------------------------------------------------
def set_aside_record(repo: Repo, key: str) -> Path:
    """Move the lane record (a file or a directory) to a `.corrupt-` name with the UTC time
    beside it, never over an earlier one."""
    from guard.store import move_aside

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return move_aside(repo.store.lane_path(key), stamp)


def salvage(repo: Repo, key: str) -> dict[str, Any]:
    """Whatever of an unreadable record is still intact (path, created_at, goal)."""
    try:
        d = json.loads(read_regular(repo.store.lane_path(key)))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(d, dict):
        return {}
    out: dict[str, Any] = {}
    p = d.get("path")
    if isinstance(p, str) and p and "\0" not in p and os.path.isabs(p):
        out["path"] = p
    for k in ("created_at", "goal"):
        if isinstance(d.get(k), str):
            out[k] = d[k]
    return out


def own_admin(repo: Repo, path: str, known: Iterable[LaneRecord]) -> Path | None:
    """The admin dir of the unregistered worktree git lists at `path`, when it is one
    (reconcile's adoption, rebuild_record):
    `git worktree list` takes a worktree's path from its admin dir's `gitdir` file, which
    the lane writes, so a lane naming `OTHER/.git` there would have OTHER (any directory
    of the owner's) adopted as a lane. Only a worktree whose `.git` file and its admin
    dir's `gitdir` name each other, and whose admin dir is no recorded lane's, is one."""
    real = os.path.realpath(path)
    admin = admin_by_gitdir(repo.common_dir / "worktrees", os.path.join(real, ".git"))
    if admin is None:
        return None
    try:
        text = git.read_admin(Path(real) / ".git")
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    named = os.path.join(real, text[len("gitdir: ") :].rstrip("\n"))
    if os.path.realpath(named) != os.path.realpath(admin):
        return None
    for rec in known:
        theirs = repo.store.admin_dir(rec) if rec.status != "released" else None
        if theirs is not None and os.path.realpath(theirs) == os.path.realpath(admin):
            return None
    return admin


def rebuild_record(
    repo: Repo, key: str, wts: list[git.Worktree], default_path: str | None
) -> tuple[LaneRecord | None, list[dict[str, Any]]]:
    """reconcile / repair: the unreadable record of `key` is set aside (kept), and a new
    one derived from git: a worktree that has lane/<key> checked out (active when its
    directory is there, orphaned when not), else the branch alone (orphaned, at the
    path the old record named, else where create puts the lane). Nothing in git: no
    record, and the change says so."""
    old = salvage(repo, key)
    aside = set_aside_record(repo, key)
    changes: list[dict[str, Any]] = [
        {"action": "corrupt_record_moved", "lane": key, "to": str(aside)}
    ]
    branch = f"lane/{key}"
    # never a path only a (lane-writable) gitdir file names: another lane naming lane/KEY
    # in its admin HEAD and any directory in its gitdir would have the record name it
    others = [r for r in repo.store.lanes() if r.key != key]
    on = [
        w
        for w in wts
        if w.branch == f"refs/heads/{branch}" and own_admin(repo, w.path, others) is not None
    ]
    on.sort(key=lambda w: not w.exists)  # a worktree that is there first
    path: str | None = None
    status = "orphaned"
    if on:
        path, status = on[0].path, "active" if on[0].exists else "orphaned"
    elif repo.ref_sha(f"refs/heads/{branch}") is not None:
        path = old.get("path") or default_path
    if path is None:
        changes.append(
            {
                "action": "record_not_rebuilt",
                "lane": key,
                "reason": f"git has no branch {branch} and no worktree on it",
            }
        )
        return None, changes
    rec = LaneRecord(
        key=key,
        branch=branch,
        path=path,
        created_at=old.get("created_at") or now_iso(),
        status=status,
        goal=old.get("goal"),
    )
    repo.store.write_lane(rec)
    changes.append({"action": "record_rebuilt", "lane": key, "path": path, "status": status})
    return rec, changes


def mend_admin(repo: Repo) -> list[dict[str, Any]]:
    """What admin_unreadable names, mended (reconcile's first step: every other one lists
    the worktrees, which git cannot while these are there). In each worktree's admin dir,
    through directory fds only (a lane still running may swap a directory of its admin dir
    for a link to one of the owner's at any moment): a FIFO, socket, device or link is
    unlinked from the directory it was listed in (it holds nothing committed); a tree
    deeper than git.ADMIN_DEPTH is moved whole into kept/ (renamed: nothing of it lost);
    an active lane's HEAD git would not take is written back naming its branch (from
    its record); a commondir removed is written back as git writes it; an index removed
    (or the shared index it named) is read back from HEAD, the worktree's files kept."""
    changes: list[dict[str, Any]] = []
    heads = repo.lane_heads()
    todo: dict[str, list[git.AdminBlock]] = {}
    for b in git.admin_blocks(repo.common_dir):
        todo.setdefault(b.admin, []).append(b)
    for admin in heads:
        if not git.head_takes(admin) or git.index_unreadable(admin):
            todo.setdefault(admin, [])
    for admin, blocks in todo.items():
        try:
            afd = _open_admin(admin)
        except OSError:
            continue  # gone (a release) or no directory: nothing of git's to mend
        try:
            changes.extend(_mend_one(repo, admin, afd, blocks, heads.get(admin)))
        finally:
            os.close(afd)
    return changes


def _open_admin(admin: str) -> int:
    """An fd on the admin dir; one its lane made unlistable (chmod 0100) gets its owner's
    bits back first, through an O_PATH fd (no link followed: never another file's mode)."""
    try:
        return dirfd.walk(admin)[0]
    except PermissionError:
        pfd = os.open(admin, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            mode = stat.S_IMODE(os.fstat(pfd).st_mode)
            os.chmod(f"/proc/self/fd/{pfd}", mode | 0o700)
        finally:
            os.close(pfd)
        return dirfd.walk(admin)[0]


def _writable(dfd: int, change: Callable[[], object]) -> None:
    """`change` (an unlink, a rename, a write in the directory of `dfd`), once more after
    giving the directory its owner's write bit back when it was refused for the lack of
    it: a lane may chmod a directory of its admin dir 0555 (no sandbox right covers
    modes), and the owner, the same user, may chmod it back."""
    try:
        change()
    except PermissionError:
        mode = stat.S_IMODE(os.fstat(dfd).st_mode)
        if mode & 0o700 == 0o700:
            raise  # not the mode (an immutable dir, another owner): named by the caller
        os.fchmod(dfd, mode | 0o700)
        change()


def _mend_one(
    repo: Repo, admin: str, afd: int, blocks: list[git.AdminBlock], branch: str | None
) -> list[dict[str, Any]]:
    removed: list[str] = []
    moved: dict[str, str] = {}
    # a lane still running put something back: named (the path, and why), never a crash
    failed: list[dict[str, str]] = []
    kept: Path | None = None

    def aside(name: str) -> None:
        nonlocal kept
        if name in moved:
            return
        if kept is None:
            kept = repo.kept_dir(f"admin-{os.path.basename(admin)}")
            kept.mkdir(parents=True)
        kfd = os.open(kept, dirfd.DIR)
        try:
            _writable(afd, lambda: os.rename(name, name, src_dir_fd=afd, dst_dir_fd=kfd))
        finally:
            os.close(kfd)
        moved[name] = str(kept / name)

    for b in blocks:
        top = b.rel.split("/")[0]
        if top == ".":
            continue  # the admin dir itself: opened for its owner by _open_admin
        try:
            if b.kind == "deep":
                aside(top)
                continue
            if top in moved:
                continue
            dfd, _ = dirfd.walk(admin, os.path.dirname(b.rel))
            try:
                st = os.stat(os.path.basename(b.rel), dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                    continue  # not what was listed any more: the next listing judges it
                _writable(dfd, partial(os.unlink, os.path.basename(b.rel), dir_fd=dfd))
            finally:
                os.close(dfd)
            removed.append(b.rel)
        except FileNotFoundError:
            continue
        except OSError as exc:  # kept/ not writable, an immutable dir: named, left
            failed.append({"path": b.rel, "why": str(exc.strerror)})
    if branch is not None and not git.head_takes(admin):
        try:
            st = os.stat("HEAD", dir_fd=afd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                aside("HEAD")
            elif not stat.S_ISREG(st.st_mode):
                _writable(afd, lambda: os.unlink("HEAD", dir_fd=afd))
        except FileNotFoundError:
            pass
        except OSError:
            pass  # the write below fails too, and names it
        try:
            _writable(
                afd, lambda: dirfd.replace(afd, "HEAD", [f"ref: refs/heads/{branch}\n".encode()])
            )
            removed.append("HEAD (written back)")
        except OSError:
            failed.append({"path": "HEAD", "why": "not written back"})
    if git.index_unreadable(admin):  # git cannot read it: kept, and read back from HEAD
        try:
            aside("index")
        except OSError as exc:
            failed.append({"path": "index", "why": str(exc.strerror)})
    if "commondir" in removed or "commondir" in moved:
        try:
            _writable(afd, lambda: dirfd.replace(afd, "commondir", [b"../..\n"]))
        except OSError:
            failed.append({"path": "commondir", "why": "not written back"})
    gone = [n for n in [*removed, *moved] if n == "index" or n.startswith("sharedindex.")]
    rebuilt = False
    tree = _index_commit(repo, afd, branch) if gone else None
    if gone and tree is not None:
        if "index" not in gone:  # a split index whose shared file went: the index too
            try:
                os.unlink("index", dir_fd=afd)
            except FileNotFoundError:
                pass
        rebuilt = _index_back(repo, afd, tree)
        if not rebuilt:
            failed.append({"path": "index", "why": "not read back from HEAD"})
    if not (removed or moved or failed):
        return []
    return [
        {
            "action": "admin_mended",
            "admin": admin,
            "removed": removed,
            "kept": moved,
            "index_rebuilt": rebuilt,
            "failed": failed,
        }
    ]


def _index_back(repo: Repo, afd: int, tree: str) -> bool:
    """Read `tree` into a new index, then put it at the admin dir's `index`. git reads it
    in the common dir (its configuration, its store: never the repository a lane-written
    commondir names, whose config could name a program to fetch with) into a file of
    git-lane's own state dir: git's lock follows a link at the path it locks (the lock is
    made beside the link's target), so it never writes a path in the admin dir; the file
    goes in through the admin dir's fd (dirfd.replace: a link there is replaced)."""
    try:
        tmp = tempfile.mkdtemp(prefix="mend-index-", dir=repo.state_dir)
    except OSError:
        return False
    try:
        with git.shared_store_only():
            res = git.run(
                ["read-tree", tree],
                repo.common_dir,
                env={"GIT_INDEX_FILE": os.path.join(tmp, "index")},
                check=False,
            )
        if not res.ok:
            return False
        with open(os.path.join(tmp, "index"), "rb") as f:
            data = f.read()
        _writable(afd, lambda: dirfd.replace(afd, "index", [data]))
        return True
    except OSError:
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _index_commit(repo: Repo, afd: int, branch: str | None) -> str | None:
    """The commit a worktree's index is read back from: a lane's branch (its record, the
    common dir's ref), else what the admin dir's HEAD names (an owner's worktree: no
    lane writes its admin dir), resolved in the common dir; None: none can be told."""
    name = f"refs/heads/{branch}" if branch else None
    if name is None:
        try:
            text = dirfd.read(afd, "HEAD", limit=4096).decode("utf-8", "replace").strip()
        except OSError:
            return None
        name = text[4:].strip() if text.startswith("ref:") else text
        if not name or not name.isprintable() or name.startswith("-"):
            return None  # no ref or object name git writes (a NUL would not reach git)
    res = git.run(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", name + "^{commit}"],
        repo.common_dir,
        check=False,
    )
    sha = res.stdout.strip()
    return sha if res.ok and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha) else None
