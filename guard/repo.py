"""One repository as the engine sees it: where its common dir and state are, what main is
and where it points, which worktree is the hub. Every fact is asked of git."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import stat
from collections.abc import Callable
from functools import cached_property
from typing import NamedTuple, TypeVar
from pathlib import Path

from guard import dirfd, git, policy
from guard.config import COMMITTED_MAX, PROJECT_FILE, Config, load, with_project
from guard.errors import Refusal
from guard.store import LaneRecord, Store, open_regular, read_regular, special

_T = TypeVar("_T")


# In the directory holding a repository's lanes (<worktrees_root>/<slug>/, not granted by
# exec --sandbox): the real common dir, written at create (guard/lane.py). Discovery from
# inside a lane must find that common dir, whatever the lane's `.git` says.
REPO_MARKER = ".git-lane-repo"
REPO_MARKER_MAX = 64 << 10  # a JSON object holding one path (PATH_MAX is 4096)


def read_repo_marker(parent: str) -> str | None:
    try:
        # a lane writes its own worktree (`<lane>/.git-lane-repo` too, read when cwd is
        # below it): never past a path's size (red team 16C F2: a sparse 3 GB one)
        raw = read_regular(os.path.join(parent, REPO_MARKER), limit=REPO_MARKER_MAX)
        got = json.loads(raw).get("common_dir")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return got if isinstance(got, str) and os.path.isabs(got) else None


_REFNAME_BAD = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|/\.|\.lock(?:/|$)|[/.]$")


def symlink_ref(text: str) -> bool:
    """Does git take a symbolic link with this text for a symbolic ref to it? Only text
    that begins `refs/` and that check_refname_format takes (refs/files-backend.c
    read_ref_internal): what `core.preferSymlinkRefs` writes. Any other link git reads
    through, as a plain file wherever it leads. The one rule of hooks/common.sh
    gl_linkref (tests/test_shared_decisions.py holds them equal, and to git)."""
    return text.startswith("refs/") and len(text) > 5 and not _REFNAME_BAD.search(text)


class Foreign(NamedTuple):
    """What Repo.foreign_main_link found: `path` (relative to the common dir), the text of
    the link there (None: no link, a packed-refs that is a directory, a FIFO...), and main's
    ref, which git reads through it. `names` above 1: `path` is a regular file with that
    many names (a hard link: main's loose file, packed-refs, a file under refs/git-lane/),
    written through whichever of them."""

    path: str
    text: str | None
    ref: str
    names: int = 1

    @property
    def hard(self) -> bool:
        return self.names > 1

    @property
    def writer(self) -> str:
        """Who moves main through it, for a message."""
        if self.hard:
            return "whoever may write one of its other names"
        return "whoever may write what it leads to"

    def words(self) -> str:
        """What it is and how git reads main through it, for a message."""
        if self.hard:
            what = (
                f"{self.path} is one of {self.names} names of one file (a hard link: git "
                "writes a ref file by rename and never makes one)"
            )
            if self.path == "packed-refs":
                return f"{what}: git reads every packed ref, main's too, from that file"
            if self.path == self.ref:
                return f"{what}: git reads main from that file"
            return f"{what}: git reads that landed ref from that file"
        if self.text is None and self.path != "packed-refs":
            return (
                f"{self.path} is no regular file (a FIFO, a socket or a device, or a link to "
                "one), where git reads main"
            )
        if self.text is None:
            return (
                f"{self.path} is no regular file (a directory, a FIFO, a socket or a "
                "device), where git reads every packed ref, main's too"
            )
        what = f"{self.path} is a symbolic link to {git.shown(self.text)}"
        if self.path == "packed-refs":
            return f"{what}: git reads every packed ref, main's too, from the file it leads to"
        if self.path == self.ref:
            return f"{what}, which git reads through as a plain ref"
        return f"{what}: git reads main ({self.ref}) through it, from wherever it leads"


def _broken_ref_at(dfd: int, name: str) -> bool:
    """Repo.broken_ref_file's look at the entry NAME of the directory DFD (OSError: the
    caller's "not broken")."""
    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        return not symlink_ref(os.readlink(name, dir_fd=dfd))
    if not stat.S_ISREG(st.st_mode):
        return False  # a directory is branches NAME/*; a FIFO is never opened
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, 80)
    finally:
        os.close(fd)
    # what git's parse_loose_ref_contents takes: `ref:` (a symbolic ref), or an object
    # name followed by the end, a NUL or whitespace
    return not (
        head.startswith(b"ref:") or re.match(rb"(?:[0-9a-f]{40}|[0-9a-f]{64})(?:[\s\x00]|$)", head)
    )


def _anchor(cwd: str) -> tuple[str, str] | None:
    """(the lane dir cwd is in, the real common dir) when an ancestor of cwd is a lanes
    directory with a marker; else None."""
    real = os.path.realpath(cwd)
    child = None
    found = None
    # the outermost marker: one inside a lane (which the lane can write) never outranks
    # the one in the lanes directory above it
    for d in (real, *map(str, Path(real).parents)):
        if child is not None:
            common = read_repo_marker(d)
            if common is not None:
                found = child, common
        child = d
    return found


def lane_repo(where: str) -> Repo | None:
    """The repository whose lane `where` is in (at any depth), its common dir read from
    the marker of its lanes directory, never from the lane's `.git`; None outside every
    marked lane."""
    anchor = _anchor(where)
    return Repo(Path(anchor[1]), None, None) if anchor is not None else None


def _tampered(lane_dir: str, common: str, why: str) -> Refusal:
    root = _root(common)
    key = os.path.basename(lane_dir)
    return Refusal(
        "lane_pointers_tampered",
        f"{git.shown(lane_dir)} is a lane of the repository {git.shown(root)}, but git "
        f"there {why}: its git pointers were changed outside git; nothing was done",
        next=[f"git -C {git.q(root)} lane repair {key}"]
        if policy.valid_key(key)
        else [f"git -C {git.q(root)} lane doctor"],
        alternatives=[f"git -C {git.q(root)} lane status"],
        details={"lane": key, "path": lane_dir, "repository": str(root)},
    )


def _admin_says(d: Path) -> tuple[tuple[str, str | None, str | None], str] | None:
    """What git lists for the admin dir `d`: ((real path, branch ref or None, detached
    HEAD or None), path), from its `gitdir` and HEAD; None when they cannot be read."""
    try:
        gitdir = git.read_admin(d / "gitdir", limit=1 << 16).rstrip("\n")
        head = git.read_admin(d / "HEAD", limit=1 << 12).rstrip("\n")
    except OSError:
        return None
    path = gitdir.removesuffix("/.git").removesuffix("/") if gitdir else ""
    if not path or "\n" in path:
        return None
    if not os.path.isabs(path):  # extensions.relativeWorktrees: from the admin dir
        path = os.path.normpath(os.path.join(d, gitdir, ".."))
    ref = head[len("ref: ") :] if head.startswith("ref: ") else None
    return (os.path.realpath(path), ref, None if ref else head), path


def _root(common: str) -> Path:
    c = Path(common)
    return c.parent if c.name == ".git" else c


def _admin_blocked(lane_dir: str) -> str | None:
    """The first file git reads to find the repository from inside the lane (its `.git`
    file, then the admin dir's HEAD, commondir and config.worktree) that is there but no
    regular file: a FIFO the lane put at HEAD blocks git's open for ever."""
    dotgit = os.path.join(lane_dir, ".git")
    try:
        text = git.read_admin(dotgit, limit=4096)
    except OSError:
        if os.path.lexists(dotgit) and not os.path.isdir(dotgit):
            return dotgit  # a FIFO, a link, a device: never opened
        return None  # gone, or a directory: the pointer check after names it
    if not text.startswith("gitdir: "):
        return None
    admin = os.path.join(lane_dir, text[len("gitdir: ") :].rstrip("\n"))
    for name in ("HEAD", "commondir", "config.worktree"):
        p = os.path.join(admin, name)
        try:
            mode = os.lstat(p).st_mode
        except FileNotFoundError:
            continue
        except OSError:
            return p
        if not stat.S_ISREG(mode):
            return p
    return None


def blocks(path: str, head: bool = False) -> bool:
    """Would git's open(2) of `path` wait for ever or read without end: a FIFO, a socket, a
    device, or a symbolic link to one (red team 15C F2)? Looked at with lstat (and stat
    through a link), never opened. No for a missing name, a regular file, a directory
    (git reads it, or fails at once), a name that cannot be looked at (git's open fails
    there too), and (`head`) a link git takes for a symbolic ref (symlink_ref: never
    opened)."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            if head and symlink_ref(os.readlink(path)):
                return False
            st = os.stat(path)
    except OSError:
        return False
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


def _read_small(path: str) -> str | None:
    """The text of `path` when it is a regular file (lstat first, then an open that never
    follows a link nor blocks), at most 4 KiB; None otherwise."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, 4096).decode("utf-8", "surrogateescape")
    except OSError:
        return None
    finally:
        os.close(fd)


def _git_dir_from(cwd: str) -> tuple[str, str] | None:
    """(the git dir, the worktree's top) git's discovery finds from `cwd` (setup.c, as far
    as a file git opens goes): the first `.git` up from it (a directory, or a file
    `gitdir: PATH`), else a directory that is a git dir itself (a bare repository:
    `objects/` and `refs/`); None when there is none. git-lane's git runs with GIT_DIR and
    the other pointers scrubbed (git.base_env), so they do not count."""
    d = os.path.abspath(cwd)
    while True:
        dot = os.path.join(d, ".git")
        try:
            st = os.stat(dot)  # (a link at .git: git follows it)
        except OSError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            return dot, d
        if st is not None and stat.S_ISREG(st.st_mode):
            text = _read_small(os.path.realpath(dot))
            if text is not None and text.startswith("gitdir: "):
                return os.path.join(d, text[len("gitdir: ") :].rstrip("\n")), d
        if os.path.isdir(os.path.join(d, "objects")) and os.path.isdir(os.path.join(d, "refs")):
            return d, d
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


def git_file_blocking(cwd: str) -> tuple[str, str, str | None] | None:
    """(its path, the common dir, the linked worktree's top or None) of the first file
    every git opens to find and set up the repository from `cwd` that would block it
    (blocks: a FIFO a process outside the sandbox made at the common `HEAD` or `config`,
    or at a linked worktree's `HEAD`, `commondir` or `config.worktree`, in its admin dir):
    looked at before the first git runs (Repo.discover), which would wait on it for ever.
    None when each is a file, a directory or nothing."""
    found = _git_dir_from(cwd)
    if found is None:
        return None
    gitdir, top = found
    commondir = os.path.join(gitdir, "commondir")
    # (an admin dir is <common>/worktrees/<id>: what reconcile is run in, if commondir is
    # what cannot be read)
    guess = os.path.dirname(os.path.dirname(os.path.normpath(gitdir)))
    if blocks(commondir):
        return commondir, guess, top
    text = _read_small(commondir)
    common = gitdir
    if text is not None and text.strip("\n"):
        common = os.path.normpath(os.path.join(gitdir, text.rstrip("\n")))
    linked = top if os.path.normpath(common) != os.path.normpath(gitdir) else None
    for name in ("HEAD", "config.worktree"):
        p = os.path.join(gitdir, name)
        if blocks(p, head=name == "HEAD"):
            return p, common, linked
    for name in ("config", "HEAD"):
        p = os.path.join(common, name)
        if blocks(p, head=name == "HEAD"):
            return p, common, None
    return None


def _main_name(common: str) -> str:
    """main's branch name for a HEAD written back by hand: the owner's main_branch, else
    main, else master when only it has a loose ref."""
    try:
        configured = load(Path(common) / "git-lane" / "config.toml").get("main_branch")
    except (Refusal, OSError, ValueError):
        configured = None  # unreadable: main, as the hooks take it
    if isinstance(configured, str) and configured:
        return configured
    heads = os.path.join(common, "refs", "heads")
    if not os.path.lexists(os.path.join(heads, "main")) and os.path.lexists(
        os.path.join(heads, "master")
    ):
        return "master"
    return "main"


def git_file_refusal(path: str, common: str) -> Refusal:
    """git_file_not_plain for what git_file_blocking found: nothing was run. The `next`
    moves it into a new directory of git-lane's kept/ (a `mv`, which never opens it; the
    common dir and its kept/ are no lane's to re-point) and, for a HEAD, writes main's
    name back there (git finds no repository without one)."""
    name = os.path.basename(path)
    kept = Path(common) / "git-lane" / "kept" / git.kept_name(name)
    nxt = [f"mkdir -p -- {git.q(kept)}", git.mv_aside(path, kept / name)]
    if name == "HEAD":
        nxt.append(f"printf 'ref: refs/heads/%s\\n' {git.q(_main_name(common))} > {git.q(path)}")
    what = {"HEAD": "which branch is checked out", "config": "the repository's settings"}
    return Refusal(
        "git_file_not_plain",
        f"{git.shown(path)} is no regular file (a FIFO, a socket, a device, or a link to "
        "one): every git opens it to find the repository, and waits there for ever (a "
        "FIFO) or reads without end, so nothing was run; it holds no "
        f"{what.get(name, 'value git could read')}: the next keeps it in kept/"
        + (" and writes main's name back" if name == "HEAD" else ""),
        next=nxt,
        details={"path": path, "kept": str(kept)},
    )


def packed_refs_words(found: Foreign) -> str:
    """What Repo.packed_refs_blocks found, and why no git may read a ref while it is there."""
    what = found.words() + (", and that is no regular file" if found.text is not None else "")
    return (
        f"{what}: every git that reads a ref opens it, and waits there for ever (a FIFO) or fails"
    )


def _blocked(lane_dir: str, common: str, what: str) -> Refusal:
    root = _root(common)
    return Refusal(
        "admin_unreadable",
        f"git cannot find the repository from inside lane {git.shown(lane_dir)}: {what}; "
        "nothing was done",
        next=[f"git -C {git.q(root)} lane reconcile"],
        alternatives=[f"git -C {git.q(root)} lane status"],
        details={"path": lane_dir, "repository": str(root), "why": what},
    )


class Repo:
    """Facts about one repository, discovered from any directory inside it."""

    def __init__(
        self, common_dir: Path, git_dir: Path | None, toplevel: Path | None, cwd: str | None = None
    ) -> None:
        self.common_dir = common_dir
        self._git_dir = git_dir
        self._cwd = cwd
        self.toplevel = toplevel
        self.state_dir = common_dir / "git-lane"
        self.store = Store(self.state_dir)
        # what guard.oversize moved into kept/ in this process (doctor names it)
        self.oversized_kept: list[dict[str, object]] = []

    @cached_property
    def hooks_dir(self) -> Path | None:
        """Where git runs hooks from for this process (core.hooksPath from any config
        source, else <common-dir>/hooks); one path per rev-parse call (it may hold a newline)."""
        res = git.run(
            ["rev-parse", "--path-format=absolute", "--git-path", "hooks"],
            self._cwd or self.common_dir,
            check=False,
        )
        if not res.ok or not res.stdout.endswith("\n") or len(res.stdout) < 2:
            return None
        return Path(res.stdout[:-1])

    def kept_dir(self, name: str) -> Path:
        """A directory of git-lane's kept/ for one refusal's moves (`name`, the UTC time and
        a random part: never one an earlier refusal's `next` moved files into, so a second
        `mv` never replaces what the first kept). Not made here: the `next` makes it."""
        return self.state_dir / "kept" / git.kept_name(name)

    def kept_moves(self, name: str, root: str, paths: list[str]) -> tuple[Path, list[str]]:
        """The `next` steps that move each of `paths` (relative to `root`) into a new
        kept_dir(`name`), keeping its relative path: a `mkdir -p` of its parent, then an
        `mv`; every one, however many (the `next` is the whole way)."""
        kept = self.kept_dir(name)
        moves: list[str] = []
        for p in paths:
            dest = kept / p
            moves.append(f"mkdir -p -- {git.q(dest.parent)}")
            moves.append(git.mv_aside(os.path.join(root, p), dest))
        return kept, moves

    def lane_kept_next(self, key: str, paths: list[str]) -> tuple[Path, str]:
        """The `next` step that moves each of `paths` of lane `key`'s worktree into a new
        kept_dir(`key`), keeping its relative path: `git lane repair KEY --into NAME --keep
        PATH ...`, the engine's move (recovery.keep_paths: each directory on the way
        reached from the lane's root without following a link), never an `mv` of a lane
        path, which a process of the lane can re-point at a file of the owner's between
        the print and the run (red team 14H-B F5)."""
        kept = self.kept_dir(key)
        keeps = " ".join(f"--keep {git.q(p)}" for p in paths)
        return kept, f"git lane repair {key} --into {git.q(kept.name)} {keeps}"

    @property
    def start_dir(self) -> str:
        """The directory the repository was discovered from."""
        return self._cwd or os.getcwd()

    @property
    def git_dir(self) -> Path:
        """The git dir of the worktree the repository was discovered from (asked of git
        only when needed: most commands never do)."""
        if self._git_dir is None:
            res = git.run(
                ["rev-parse", "--path-format=absolute", "--git-dir"], self._cwd or self.common_dir
            )
            self._git_dir = Path(res.stdout[:-1] if res.stdout.endswith("\n") else res.stdout)
        return self._git_dir

    @classmethod
    def discover(cls, start: str | os.PathLike[str] | None = None) -> Repo:
        cwd = os.fspath(start) if start is not None else os.getcwd()
        if not os.path.isdir(cwd):
            raise Refusal(
                "not_a_git_repo",
                f"{cwd} is not a directory",
                next=["git lane status"],
                details={"path": cwd},
            )
        # A path may hold any byte but NUL, a newline included, and rev-parse has no -z:
        # so each call asks for at most one path, after answers of a fixed form
        # (true/false), and exactly one trailing newline is taken off.
        anchor = _anchor(cwd)
        # in a lane, git reads files the lane writes: nothing there may block it for ever
        timeout = None
        if anchor is not None:
            if (bad := _admin_blocked(anchor[0])) is not None:
                raise _blocked(*anchor, f"{git.shown(bad)} is no regular file")
            timeout = git.lane_read_timeout()
        # before the first git: each would wait on a FIFO at HEAD or config for ever
        if (found := git_file_blocking(cwd)) is not None:
            path, common_dir, linked = found
            if anchor is not None and os.path.realpath(common_dir) != os.path.realpath(anchor[1]):
                # the lane's own `commondir` names a directory of its choosing: nothing
                # there is looked at, and no next acts on it (red team 16C F1)
                raise _tampered(*anchor, f"takes {git.shown(common_dir)} for its common dir")
            if linked is not None:  # an admin dir's file: reconcile's mend, from the hub
                raise _blocked(linked, common_dir, f"{git.shown(path)} is no regular file")
            raise git_file_refusal(path, common_dir)
        res = git.run(
            ["rev-parse", "--is-bare-repository", "--path-format=absolute", "--git-common-dir"],
            cwd,
            check=False,
            timeout=timeout,
        )
        if res.timed_out and anchor is not None:
            raise _blocked(*anchor, "git timed out reading its files there")
        bare, sep, common = res.stdout.partition("\n")
        if not res.ok or not sep or bare not in ("true", "false") or not common.endswith("\n"):
            if anchor is not None:
                raise _tampered(*anchor, "finds no repository")
            raise Refusal(
                "not_a_git_repo",
                f"{cwd} is not inside a git repository: cd into your repository (or pass "
                "`-C PATH`) and run the command again",
                # no command knows where the repository is; `git init` here would make a
                # repository of whatever directory this is, so it is only the other way out
                next=[],
                alternatives=["git init && git lane install"],
                details={"path": cwd},
            )
        top: Path | None = None
        if bare != "true":
            t = git.run(["rev-parse", "--show-toplevel"], cwd, check=False, timeout=timeout)
            if t.timed_out and anchor is not None:
                raise _blocked(*anchor, "git timed out reading its files there")
            if t.ok and t.stdout.endswith("\n") and len(t.stdout) > 1:
                top = Path(t.stdout[:-1])
        if anchor is not None:
            lane_dir, want = anchor
            if os.path.realpath(common[:-1]) != os.path.realpath(want):
                raise _tampered(lane_dir, want, f"uses {git.shown(common[:-1])}")
            if top is None or os.path.realpath(top) != lane_dir:
                raise _tampered(lane_dir, want, f"finds the worktree {git.shown(str(top))}")
        return cls(Path(common[:-1]), None, top, cwd=cwd)

    # -- config and main ---------------------------------------------------------
    @cached_property
    def config(self) -> Config:
        """The owner's files, with the project's `.git-lane.toml` from main's committed
        tree below them (never a lane's or the hub's worktree copy)."""
        owner = self.owner_config
        try:
            main = self.main_ref
        except Refusal:
            return owner  # no main yet: no committed project file either
        return with_project(owner, self.committed_file(main, PROJECT_FILE), PROJECT_FILE)

    def committed_file(self, rev: str, path: str) -> bytes | git.TooBig | None:
        """A file of `rev`'s tree, or None when it has none there (or not a file); TooBig
        when it is larger than COMMITTED_MAX: anyone who lands writes these files (the
        project's `.git-lane.toml`, `.worktreeinclude`), so one past the bound is never
        read (git.blob_upto learns its size first), and the caller says so."""
        return git.blob_upto(self.common_dir, f"{rev}:{path}", COMMITTED_MAX)

    @cached_property
    def owner_config(self) -> Config:
        """The owner's two files only: what decides protection (main_branch, enabled...)."""
        path = self.store.config_path
        if (path.is_dir() and not path.is_symlink()) or special(path):
            raise Refusal(
                "state_corrupt",
                f"{path} is a directory (or a FIFO, socket or device), not the owner's config file",
                next=["git lane reconcile"],  # sets it aside (kept), then defaults apply
                details={"file": str(path)},
            )
        return load(path)

    def reload_config(self) -> Config:
        self.__dict__.pop("config", None)
        self.__dict__.pop("owner_config", None)
        self.__dict__.pop("main_branch", None)
        return self.config

    def ref_sha(self, ref: str) -> str | None:
        return git.ref_sha(self.common_dir, ref)

    def _loose(self, branch: str) -> bool:
        """Is there a loose ref file (or link) refs/heads/BRANCH, resolving or not? A
        directory there is branches BRANCH/*, no BRANCH."""
        p = os.path.join(self.common_dir, "refs", "heads", branch)
        return os.path.islink(p) or os.path.isfile(p)

    def _at_ref(self, ref: str, read: Callable[[int, str], _T], missing: _T) -> _T:
        """read(DIRFD, NAME) for the loose ref `ref` (refs/heads/NAME), its directory
        reached through directory fds (no link followed); `missing` when that directory or
        the read fails (OSError)."""
        parent, _, name = ref.rpartition("/")
        try:
            dfd, _ = dirfd.walk(os.fspath(self.common_dir), parent)
        except OSError:
            return missing
        try:
            return read(dfd, name)
        except OSError:
            return missing
        finally:
            os.close(dfd)

    def foreign_main_link(self) -> Foreign | None:
        """What git reads main through (Foreign) when that is a file
        git-lane never makes, whatever main reads as: main's loose ref a symbolic link git
        takes for no symbolic ref (symlink_ref), a symbolic link at any directory on the
        way to it (`refs`, `refs/heads`, each directory of a configured main_branch with
        slashes: git reads main from wherever that leads, as a plain file), or a
        `packed-refs` that is no regular file (a link: text; a directory, FIFO...: None).
        Whoever may write what it leads to (a lane's admin dir, the lane namespace) moves
        main with no ref transaction. So do hard links (red team 15B F3): git writes a ref
        file (and packed-refs) by renaming a new file over it, so a protected file with
        more than one name was linked by someone else, and a write through another name
        (one under refs/heads/lane/, a file of a lane's admin dir: both granted to a
        sandboxed lane) changes it in place: main's loose file, packed-refs, and each
        file under refs/git-lane/ (the landed refs' loose files), found by st_nlink of
        the lstat each already gets or of one lstat per file there (the hooks do not
        look: a write through another name is no ref transaction, so none runs). Main is the
        configured name, else main, else master
        (as the hooks read it, gl_init: master only while main has no loose ref and git
        lists none). Looked at through directory fds, never through a link; a look that
        fails otherwise than at a missing name refuses (Refusal main_not_plain)."""
        configured = self.owner_config.get("main_branch")
        names = [configured] if configured else ["main", "master"]
        packed = self._lstat_at("packed-refs")
        if packed is not None and not stat.S_ISREG(packed.st_mode):
            link = self._link_on_path("packed-refs") if stat.S_ISLNK(packed.st_mode) else None
            return Foreign("packed-refs", link[1] if link else None, f"refs/heads/{names[0]}")
        if packed is not None and packed.st_nlink > 1:
            return Foreign("packed-refs", None, f"refs/heads/{names[0]}", packed.st_nlink)
        for name in names:
            ref = f"refs/heads/{name}"
            found = self._link_on_path(ref)
            if found is not None and (
                found[0] != ref or found[1] is None or not symlink_ref(found[1])
            ):
                main = "refs/heads/main"
                if (
                    name == "master"
                    and found[0] == ref
                    and (self._loose("main") or main in git.refs(self.common_dir, main))
                ):
                    break
                return Foreign(found[0], found[1], ref, found[2])
            if self._loose(name):
                break  # main is this name: a plain file, or a symbolic ref
        return self._hard_linked_landed(f"refs/heads/{names[0]}")

    def _hard_linked_landed(self, ref: str) -> Foreign | None:
        """The first regular file under refs/git-lane/ (the landed refs and the baseline,
        loose) with more than one name (Foreign.hard, main's ref `ref`); None when there
        is none. One lstat per file, each directory reached through directory fds (a link
        there is not entered: git-lane never makes one, and forgeries skips it too); a
        `.lock` is git's own, never a ref."""
        refused: list[str] = []
        try:
            for here, dfd, entries in dirfd.scan(
                os.fspath(self.common_dir), "refs/git-lane", 8, refused=refused
            ):
                for name, kind in sorted(entries):
                    if kind != stat.S_IFREG or name.endswith(".lock"):
                        continue
                    try:
                        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # gone since it was listed
                    except OSError as exc:
                        raise self._unseen(f"{here}/{name}", exc) from None
                    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                        return Foreign(f"{here}/{name}", None, ref, st.st_nlink)
        except FileNotFoundError:
            return None  # no refs/git-lane yet
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                return None  # a link or no directory at refs/git-lane: not a hard link (left alone)
            raise self._unseen("refs/git-lane", exc) from None
        if refused:
            raise self._unseen(refused[0], PermissionError(errno.EACCES, "Permission denied"))
        return None

    def packed_refs_blocks(self) -> Foreign | None:
        """`<common>/packed-refs` (Foreign, as foreign_main_link names it) when git cannot
        read it as a file: no regular file (a FIFO, a socket, a device, a directory), or a
        link to one. Every git that reads a ref opens it, and that open(2) waits for ever
        on a FIFO (only a process outside the sandbox can make one there). None for a
        regular file, a link to one, a link git cannot follow (its open fails, it never
        waits), or nothing there. Looked at with lstat and stat only, never opened; an
        lstat that fails otherwise than at a missing name refuses (main_not_plain)."""
        packed = self._lstat_at("packed-refs")
        if packed is None or stat.S_ISREG(packed.st_mode):
            return None
        try:
            main = f"refs/heads/{self.owner_config.get('main_branch') or 'main'}"
        except Refusal:
            main = "refs/heads/main"  # (an unreadable config is said by what reads it)
        if not stat.S_ISLNK(packed.st_mode):
            return Foreign("packed-refs", None, main)
        path = os.path.join(self.common_dir, "packed-refs")
        try:
            if stat.S_ISREG(os.stat(path).st_mode):
                return None
            text = os.readlink(path)
        except OSError:
            return None  # git's own open fails there too (a dangling link, a loop)
        return Foreign("packed-refs", text, main)

    def ref_file_blocks(self) -> Foreign | None:
        """packed_refs_blocks, else main's loose ref file (refs/heads/ and the configured
        main_branch, else main and master: git's look for main lists both) when git's
        open of it would wait for ever or read without end (blocks: a FIFO, a socket, a
        device, or a link to one; red team 15C F2): looked at before any git reads a ref.
        Never opened; a link git takes for a symbolic ref is foreign_main_link's."""
        found = self.packed_refs_blocks()
        if found is not None:
            return found
        try:
            configured = self.owner_config.get("main_branch")
        except Refusal:
            configured = None  # (an unreadable config is said by what reads it)
        names = [configured] if isinstance(configured, str) and configured else ["main", "master"]
        for name in names:
            ref = f"refs/heads/{name}"
            if blocks(os.path.join(self.common_dir, ref), head=True):
                return Foreign(ref, None, ref)
        return None

    def _lstat_at(self, rel: str) -> os.stat_result | None:
        """lstat of `rel` (one name) in the common dir; None when nothing is there."""
        try:
            return os.stat(os.path.join(self.common_dir, rel), follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._unseen(rel, exc) from None

    def _link_on_path(self, rel: str) -> tuple[str, str | None, int] | None:
        """(its path, its text, 1) for the first symbolic link on the path `rel` below the
        common dir, the last name included, each component looked at (lstat) from its
        parent's directory fd, never through a link; (rel, None, its st_nlink) when the
        last name is a regular file with more than one name (a hard link); None when there
        is neither, or a name on the way is missing or no directory (git reads nothing
        through it). Any other error refuses: what cannot be looked at is never taken for
        "no link"."""
        parts = rel.split("/")
        fd = os.open(self.common_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, part in enumerate(parts):
                here = "/".join(parts[: i + 1])
                try:
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode):
                        return here, os.readlink(part, dir_fd=fd), 1
                    if i == len(parts) - 1 and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                        return here, None, st.st_nlink
                    if i == len(parts) - 1 or not stat.S_ISDIR(st.st_mode):
                        return None
                    nfd = os.open(part, dirfd.DIR | os.O_NONBLOCK, dir_fd=fd)
                except FileNotFoundError:
                    return None
                except OSError as exc:
                    raise self._unseen(here, exc) from None
                os.close(fd)
                fd = nfd
        finally:
            os.close(fd)
        return None

    def _unseen(self, rel: str, exc: OSError) -> Refusal:
        path = os.path.join(self.common_dir, rel)
        return Refusal(
            "main_not_plain",
            f"whether git reads main through a link at {git.shown(path)} cannot be "
            f"established ({exc.strerror or exc}): refused, never taken for no link",
            next=[f"ls -ld -- {git.q(path)}"],
            details={"path": path, "error": str(exc)},
        )

    def broken_ref_file(self, ref: str) -> bool:
        """Is the loose ref file `ref` (refs/heads/NAME) one git cannot read as a ref: a
        regular file that starts with neither an object name nor `ref:` (empty or garbled:
        a write cut short), or a link git takes for no symbolic ref (its target not
        `refs/...`: a link to a directory, to nothing)? git then refuses every update of
        the ref ("reference broken"). Read through directory fds, never through a link;
        asked only when git resolves `ref` to no commit."""
        return self._at_ref(ref, _broken_ref_at, False)

    @cached_property
    def main_branch(self) -> str:
        configured = self.owner_config.get("main_branch")
        broken = None
        if configured:
            name = configured if self.ref_sha(f"refs/heads/{configured}") else None
        else:
            found = git.refs(self.common_dir, "refs/heads/main", "refs/heads/master")
            there = {b for b in ("main", "master") if f"refs/heads/{b}" in found or self._loose(b)}
            # a dangling (or looping) symbolic main is still main, broken, never "master,
            # main being absent": the hooks decide the same (gl_main_name), else a symbolic
            # ref the hooks never see would hand main's protection to master
            name = policy.choose_main(None, "main" in there, "master" in there)
            if name and f"refs/heads/{name}" not in found:
                broken = name
                name = None
        if name:
            return str(name)
        landed = self._last_landed()
        if landed is not None:
            # main existed and a land moved it: it was deleted behind git-lane's back. A new
            # first commit would start a history of its own beside every landed one
            raise Refusal(
                "no_main_branch",
                (
                    f"refs/heads/{broken} names no commit (a symbolic ref to a ref that does "
                    f"not exist, or a broken ref file), but git-lane recorded main (last at "
                    f"{landed[:12]}): it was broken outside git-lane"
                    if broken
                    else f"refs/heads/{configured or 'main'} does not exist, but git-lane "
                    f"recorded it (last at {landed[:12]}): it was deleted outside git-lane"
                ),
                next=["git lane restore-main"],
                details={"configured": configured, "landed": landed},
            )
        last = None if configured else self._last_head()
        if last is not None:
            # no land yet, but the main worktree's HEAD reflog says where main last was
            raise Refusal(
                "no_main_branch",
                f"refs/heads/{broken or 'main'} "
                + ("names no commit" if broken else "does not exist")
                + f", but the hub's HEAD was last at {last[:12]}: main was "
                + ("broken" if broken else "deleted")
                + " outside git-lane (a new first commit would start a history of its "
                "own); the next puts it back there",
                next=[
                    f"git update-ref --no-deref refs/heads/{broken} {last}"
                    if broken
                    else f"git update-ref refs/heads/main {last}"
                ],
                details={"configured": configured, "reflog": last},
            )
        raise Refusal(
            "no_main_branch",
            (
                f"the configured main branch {configured!r} does not exist"
                if configured
                else f"refs/heads/{broken} names no commit (a symbolic ref to a ref that "
                "does not exist, or a broken ref file)"
                if broken
                else "this repository has neither a main nor a master branch with a commit"
            ),
            next=(
                [f"git branch {git.q(configured)} HEAD"]
                if configured
                else [f"git update-ref --no-deref refs/heads/{broken} HEAD"]
                if broken
                else [self._first_commit()]
            ),
            details={"configured": configured},
        )

    def _first_commit(self) -> str:
        """The command that makes main's first commit. `git commit` needs a work tree; in
        a bare repository (or from inside its .git) the commit is made of the empty tree
        with plumbing, on the branch HEAD names (master when HEAD says so, else main)."""
        if self.toplevel is not None:
            return "git commit --allow-empty -m init"
        head = git.symref(self.common_dir, "HEAD")
        ref = head if head == "refs/heads/master" else "refs/heads/main"
        return f'git update-ref {ref} "$(git commit-tree -m init "$(git mktree </dev/null)")" ""'

    def _last_head(self) -> str | None:
        """The newest value the main worktree's HEAD reflog recorded, when it still names
        a commit here (read from the file's end: a reflog of years stays cheap)."""
        try:
            fd = open_regular(os.path.join(self.common_dir, "logs", "HEAD"))  # a FIFO's: OSError
            with os.fdopen(fd, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
                lines = f.read().splitlines()
        except OSError:
            return None
        # the delete itself is logged last, old -> zeros: its old value is where main was
        fields = lines[-1].split(b" ", 2) if lines else []
        shas = [f for f in fields[:2] if re.fullmatch(rb"[0-9a-f]{40}|[0-9a-f]{64}", f)]
        if len(shas) != 2:
            return None
        sha = (shas[1] if shas[1].strip(b"0") else shas[0]).decode()
        return sha if sha.strip("0") and git.has_commit(self.common_dir, sha) else None

    def _last_landed(self) -> str | None:
        """The newest landed tip (refs/git-lane/landed/*; before any land, the baseline
        refs/git-lane/baseline, which sorts after them), or None: one git call, made only
        on the way to a no_main_branch refusal."""
        res = git.run(
            [
                "for-each-ref",
                "--sort=-refname",
                "--count=1",
                "--format=%(objectname)",
                "refs/git-lane/landed/",
                "refs/git-lane/baseline",
            ],
            self.common_dir,
            check=False,
        )
        sha = res.stdout.strip() if res.ok else ""
        return sha or None

    @property
    def main_ref(self) -> str:
        return f"refs/heads/{self.main_branch}"

    def main_sha(self) -> str:
        sha = self.ref_sha(self.main_ref)
        if sha is None:
            landed = self._last_landed()
            if landed is not None and self.broken_ref_file(self.main_ref):
                # git lists main (a packed value beneath the file) but cannot read it
                raise Refusal(
                    "no_main_branch",
                    f"{self.main_ref} names no commit (a broken ref file: a link to a "
                    f"directory or to nothing, a file cut short), but git-lane recorded main "
                    f"(last at {landed[:12]}): it was broken outside git-lane",
                    next=["git lane restore-main"],
                    details={"configured": self.owner_config.get("main_branch"), "landed": landed},
                )
            raise Refusal(
                "no_main_branch",
                f"{self.main_ref} vanished",
                next=["git lane doctor"],
            )
        return sha

    # -- worktrees -----------------------------------------------------------------
    def worktrees(self, gates: bool = False) -> list[git.Worktree]:
        """git's worktree list, one entry per path (_one_per_path), without the entries of
        clean gate admin dirs (gate_entries) unless `gates`: what git itself checks
        against (create's prediction of `worktree add`'s refusals)."""
        try:  # reading the lane records pins each lane: git run in one names its repository
            recs = self.store.lanes()
        except Refusal:
            recs = []
        # git opens every lane's admin files to list them: a FIFO there would hang it
        blocked = git.admin_blockers(self.common_dir)
        # a lane whose admin dir lost its HEAD is no worktree to git ("not a git
        # repository" for every call in it): named as the others, HEAD written back
        blocked += [p for p in self._headless(recs) if p not in blocked]
        # an index git cannot read fails every git call in that lane: named the same way
        blocked += [p for p in self._bad_indexes(recs) if p not in blocked]
        if blocked:
            raise self.admin_blocked(blocked)
        res = git.run(
            ["worktree", "list", "--porcelain", "-z"],
            self.common_dir,
            check=False,
            timeout=git.lane_read_timeout(),
        )
        if res.timed_out:  # something planted after the check, or a place it does not know
            raise self.admin_blocked(git.admin_blockers(self.common_dir), res.stderr)
        if not res.ok:
            blocked = git.admin_blockers(self.common_dir)  # put there since the look
            if blocked:
                raise self.admin_blocked(blocked, res.stderr)
            from guard.errors import GitError

            raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
        wts = git.parse_worktrees(res.stdout)
        if not gates:
            drop = self.gate_entries(wts)
            wts = [w for w in wts if not any(w is g for g in drop)]
        return self._one_per_path(wts, recs)

    def _one_per_path(self, wts: list[git.Worktree], recs: list[LaneRecord]) -> list[git.Worktree]:
        """git lists a lane's admin dir at the path its `gitdir` names with the HEAD its
        HEAD file says, both the lane's to write: a lane naming another lane's path (or
        the hub's) adds a second entry there, and a lookup by path (git.by_path) could
        take the lane's word for the other's branch and HEAD (release would miss its
        detached commits). Two entries at one path are one too many: the one kept is the
        main worktree, or the one whose branch and HEAD the admin dir trusted state names
        for that path says (the lane's by its record, the owner's by owned_worktrees);
        none when no trusted admin dir names that path. Nothing is read unless two
        entries share a path."""
        reals = [os.path.realpath(w.path) for w in wts]
        if len(set(reals)) == len(reals):
            return wts
        truth: dict[str, tuple[str | None, str | None]] = {}
        for key in self._owned_admins():
            truth.setdefault(key[0], (key[1], key[2]))
        for rec in recs:
            admin = self.store.admin_dir(rec) if rec.status != "released" else None
            try:
                head = git.read_admin(admin / "HEAD", limit=1 << 12).rstrip("\n") if admin else ""
            except OSError:
                head = ""
            ref = head[len("ref: ") :] if head.startswith("ref: ") else None
            truth[os.path.realpath(rec.path)] = (ref, None if ref or not head else head)
        out: list[git.Worktree] = []
        taken: set[str] = set()
        for i, (wt, real) in enumerate(zip(wts, reals, strict=True)):
            if real in taken:
                continue
            alone = reals.count(real) == 1
            said = (wt.branch, None if wt.branch else wt.head)
            if alone or i == 0 or truth.get(real) == said:  # the first: the main worktree
                out.append(wt)
                taken.add(real)
        return out

    def lane_heads(self, recs: list[LaneRecord] | None = None) -> dict[str, str]:
        """Each active lane's admin dir (from trusted state, there as a directory) and the
        branch its HEAD must name."""
        if recs is None:
            try:
                recs = self.store.lanes()
            except Refusal:
                recs = []
        out: dict[str, str] = {}
        for rec in recs:
            if rec.status != "active":
                continue
            admin = self.store.admin_dir(rec)
            if admin is not None and os.path.isdir(admin) and not os.path.islink(admin):
                out[str(admin)] = rec.branch
        return out

    def _headless(self, recs: list[LaneRecord]) -> list[str]:
        """`<admin>/HEAD` of each active lane whose HEAD git would not take (missing, a
        directory, a link, not `ref: refs/...` nor an object name): git then calls the
        lane "not a git repository" for every call in it."""
        return [os.path.join(a, "HEAD") for a in self.lane_heads(recs) if not git.head_takes(a)]

    def _bad_indexes(self, recs: list[LaneRecord]) -> list[str]:
        """`<admin>/index` of each active lane whose index git cannot read (corrupt, or
        a shared index it names emptied): git.index_unreadable."""
        return [os.path.join(a, "index") for a in self.lane_heads(recs) if git.index_unreadable(a)]

    def admin_blocked(self, paths: list[str], stderr: str = "") -> Refusal:
        """admin_unreadable: what blocks git in lanes' admin dirs. The fix is reconcile's
        (recovery.mend_admin), never a printed `rm` by path: a lane still running could
        swap a directory on that path for a link to one of the owner's between the
        refusal and the `rm`. Reconcile removes each thing through directory fds (a FIFO,
        socket, device or link holds nothing committed; a too-deep tree is moved into
        kept/), writes HEAD back naming the lane's branch (from its record), commondir as
        git writes it, reads the index back from HEAD when it (or its shared index) was
        one (the worktree's files are kept), then goes on as reconcile does."""
        where = ", ".join(git.shown(p) for p in paths[:10]) + (" ..." if len(paths) > 10 else "")
        where = where or f"a file under {self.common_dir}/worktrees/"
        return Refusal(
            "admin_unreadable",
            f"git cannot read a lane's admin dir: {where} is missing, names no branch or "
            "commit, is an index git cannot parse, or is no regular file (a FIFO, a socket "
            "or a device a lane put there, which git blocks opening; a link; a tree too "
            "deep to vouch for), so nothing was done",
            next=["git lane reconcile"],
            details={"paths": paths[:100], "count": len(paths), "stderr": stderr[-2000:]},
        )

    def hub(self, wts: list[git.Worktree] | None = None) -> git.Worktree | None:
        """The first worktree no lane can have named (owned_worktrees) with main checked
        out, or None: a lane that writes `ref: refs/heads/main` into its admin dir's HEAD
        and any path into its `gitdir` is never the hub, whose path owner commands run
        plain git in and copy files from."""
        wts = wts if wts is not None else self.worktrees()
        if wts and not wts[0].bare and wts[0].branch == self.main_ref:
            return wts[0]  # the main worktree on main (the usual case): nothing else read
        for wt in self.owned_worktrees(wts):
            if wt.branch == self.main_ref and not wt.bare:
                return wt
        return None

    def owned_worktrees(self, wts: list[git.Worktree] | None = None) -> list[git.Worktree]:
        """The entries of git's worktree list (`wts`, the whole list) no lane can have put
        there: the main worktree (always the first, read from the common dir), and each
        linked worktree whose admin dir is no lane's, with the path and HEAD that admin
        dir says. git lists a lane's admin dir at the path its `gitdir` names with the
        branch its HEAD names, both the lane's to write (exec --sandbox grants them), so
        such an entry is never taken for a worktree of the owner's. When the lane records
        cannot tell every lane's admin dir, only the main worktree."""
        wts = wts if wts is not None else self.worktrees()
        out = [wts[0]] if wts and not wts[0].bare else []
        owned = self._owned_admins() if len(wts) > 1 else {}
        for wt in wts[1:]:
            key = (os.path.realpath(wt.path), wt.branch, None if wt.branch else wt.head)
            path = owned.pop(key, None)  # once: a lane's entry naming the same is no other
            if path is not None:
                out.append(dataclasses.replace(wt, path=path))
        return out

    def _owned_admins(self) -> dict[tuple[str, str | None, str | None], str]:
        """(real path, branch ref or None, detached sha or None) -> path, as each admin dir
        under <common>/worktrees/ that is no lane's and no clean gate worktree's says (its
        `gitdir` and HEAD: the owner's files); {} when some lane's admin dir cannot be
        told from trusted state. A gate's admin dir (gate.is_gate_admin, by its name) is a
        confined gate's to write while it runs, and a process the gate left running wrote
        it after (red team 14C): never the owner's, running or left over."""
        from guard import gate

        try:
            recs = self.store.lanes()
        except Refusal:
            return {}
        lanes: set[str] = set()
        for rec in recs:
            admin = self.store.admin_dir(rec)
            if admin is None:
                if rec.status != "released":
                    return {}  # that lane's admin dir could be any of them
                continue
            lanes.add(os.path.realpath(admin))
        base = self.common_dir / "worktrees"
        try:
            names = sorted(os.listdir(base))
        except OSError:
            return {}
        out: dict[tuple[str, str | None, str | None], str] = {}
        for name in names:
            d = base / name
            if gate.is_gate_admin(name) or os.path.islink(d) or os.path.realpath(d) in lanes:
                continue
            said = _admin_says(d)
            if said is not None:
                out.setdefault(said[0], said[1])
        return out

    def gate_entries(self, wts: list[git.Worktree]) -> list[git.Worktree]:
        """The entries of git's list `wts` that are clean gate admin dirs' (one per such
        dir, the one at the path and HEAD it says). A confined gate writes its admin dir's
        `gitdir`: an entry at any path it named was fenced for every lane's sandbox
        (`/tmp`) or held a lane's path at create (red team 14C), so git-lane decides from
        the list without them; land finds its gate worktree by its own path and fds,
        never in this list. A gate that rewrites its `gitdir` between git's read and this
        one keeps its entry (another lane's exec may refuse meanwhile: never a grant more)."""
        from guard import gate

        names = gate.admin_names(self.common_dir) if len(wts) > 1 else []
        said = [_admin_says(self.common_dir / "worktrees" / n) for n in names]
        todo = [s[0] for s in said if s is not None]
        out: list[git.Worktree] = []
        for wt in wts[1:]:
            key = (os.path.realpath(wt.path), wt.branch, None if wt.branch else wt.head)
            if key in todo:
                todo.remove(key)
                out.append(wt)
        return out

    # -- identity ------------------------------------------------------------------
    @cached_property
    def slug(self) -> str:
        """`<repo-name>-<8hex>`: stable per repository, unique per common dir."""
        import hashlib

        common = os.path.realpath(self.common_dir)
        base = Path(common).parent.name if Path(common).name == ".git" else Path(common).name
        base = re.sub(r"[^a-z0-9]+", "-", base.lower().removesuffix(".git")).strip("-") or "repo"
        digest = hashlib.sha256(common.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        return f"{base[:40]}-{digest}"

    def repo_root(self) -> Path:
        """The directory that 'inside the repository' is measured against."""
        common = Path(os.path.realpath(self.common_dir))
        return common.parent if common.name == ".git" else common
