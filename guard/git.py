"""The one place that spawns git, and every git fact and `-z` parser the engine reads.

Runs the real git by absolute path (never a shim), with an explicit environment, and
returns frozen results. Output is parsed only from `-z` / `--porcelain` forms. Facts here
know nothing of lanes or config: they take a directory and answer from git."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import secrets
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
import contextlib
import errno
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from guard import dirfd
from guard.errors import GitError, Refusal

if TYPE_CHECKING:
    from guard.reap import Workers

# Variables git sets for hooks and for `git --git-dir=...`; an engine call names its
# repository with -C, so inherited ones would point it at the wrong place.
REPO_POINTERS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
)


# a program git would run (its file-system monitor, difftool's command) and what
# rewrites history as git reads it (another replace namespace, another shallow file)
_PROGRAM_OR_HISTORY = (
    "GIT_TEST_FSMONITOR", "GIT_DIFFTOOL_EXTCMD", "GIT_DIFF_TOOL",
    "GIT_REPLACE_REF_BASE", "GIT_SHALLOW_FILE",
    "GIT_TEST_COMMIT_GRAPH",  # reads a commit-graph whatever core.commitGraph says
)  # fmt: skip

_real_git: str | None = None

# Lane worktrees this process knows from trusted state (guard/store.py pins each lane record
# it reads): realpath of the lane -> (its admin dir, the real common dir). Every git run
# with its cwd in a pinned lane names its repository (GIT_DIR, GIT_COMMON_DIR,
# GIT_WORK_TREE) instead of following the lane's `.git` file and `commondir`, which the
# lane itself can write (exec --sandbox grants them): a rewritten pointer cannot hand the
# engine another repository's config (core.fsmonitor: a program) or git-lane state.
_LANES: dict[str, tuple[str, str]] = {}
# each pinned lane's key, by the same real path: a refusal about a path in a lane names the
# lane's own engine command (lane_of), never an owner's command acting by that path
_LANE_KEYS: dict[str, str] = {}
# No program on an engine call in a lane (core.fsmonitor), and git never descends into a
# submodule there: it would run git inside it with the submodule's own config and
# info/attributes (<admin>/modules/<name>/, in the lane's admin dir, which exec --sandbox
# grants), so a filter, textconv, fsmonitor or hook it names would run as the owner.
# Checkout-like commands recurse only with submodule.recurse; `status` (G2) is given
# --ignore-submodules=dirty and looks at submodules' own changes itself
# (submodule_changes), `add -A` leaves gitlinks out (add_all).
NO_SUBMODULE_RECURSION = (
    "-c",
    "submodule.recurse=false",
    "-c",
    "status.submoduleSummary=false",
    "-c",
    "diff.submodule=short",
)
LANE_CONFIG = ("-c", "core.fsmonitor=false", *NO_SUBMODULE_RECURSION)


def pin_lane(path: str | os.PathLike[str], admin: str, common: str, key: str) -> None:
    real = os.path.realpath(path)
    _LANES[real] = (admin, common)
    _LANE_KEYS[real] = key


def lane_of(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """(key, the path relative to the lane's root) when `path` lies inside a pinned lane,
    else None. The root is the shortest of `path`'s ancestors, taken as written, whose
    real path is a pinned lane's: a lane cannot change the directories above its root, so
    a link it put inside itself (at `a` of `LANE/a/sub`) is never resolved. Nor is a `..`
    (a name a lane's index gave): it stays in the relative path, which repair refuses."""
    full = os.fspath(path)
    parts = (full if os.path.isabs(full) else os.path.join(os.getcwd(), full)).split(os.sep)
    for i in range(2, len(parts)):
        key = _LANE_KEYS.get(os.path.realpath(os.sep.join(parts[:i])))
        if key is not None:
            return key, "/".join(parts[i:])
    return None


def lane_pointers(cwd: Where) -> dict[str, str] | None:
    """The repository variables for a git run in a pinned lane (None elsewhere)."""
    if not _LANES or cwd is None:
        return None
    real = os.path.realpath(cwd)
    for lp, (admin, common) in _LANES.items():
        if real == lp or real.startswith(lp.rstrip(os.sep) + os.sep):
            if _nested_repo(real, lp):
                return {}  # a submodule's own repository: not the lane's
            return {"GIT_DIR": admin, "GIT_COMMON_DIR": common, "GIT_WORK_TREE": lp}
    return None


def owner_git(path: str | os.PathLike[str]) -> str:
    """`git -C PATH` for a refusal's `next` that the owner runs by hand in a worktree. In a
    pinned lane, with its repository named from trusted state (GIT_DIR, GIT_COMMON_DIR,
    GIT_WORK_TREE) and LANE_CONFIG: a plain `git -C LANE` follows the lane's `.git`,
    `<admin>/commondir` and `gitdir`, which a lane still running can repoint after the
    refusal at a repository whose config names a program (core.fsmonitor), and the owner
    would run it unconfined."""
    pinned = lane_pointers(path)
    here = f"git -C {q(path)}"
    if not pinned:
        return here
    env = " ".join(f"{k}={q(pinned[k])}" for k in ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE"))
    return f"{env} {here} {' '.join(LANE_CONFIG)}"


def owner_status(path: str | os.PathLike[str]) -> str:
    """`git status` for a refusal's `next` in a lane (owner_git): with
    `--ignore-submodules=all` on its command line, which overrides every
    `submodule.<name>.ignore` (the lane's .gitmodules, any config) and `diff.ignoreSubmodules`,
    so git runs no `git status` inside a populated submodule. There git would read the
    submodule's config and info/attributes in `<admin>/modules/<name>/`, which a sandboxed
    lane writes: a clean filter named there ran as the owner (core.fsmonitor=false reaches
    that child, a filter is not switched off by it). A submodule's own state is what the
    engine reads and names (submodule_differs), never git's status inside it."""
    return f"{owner_git(path)} status --ignore-submodules=all"


def owner_git_dir(admin: str | os.PathLike[str], common: str | os.PathLike[str]) -> str:
    """owner_git for a lane's repository with no worktree (its index, its refs): GIT_DIR
    and GIT_COMMON_DIR named, never `--git-dir=ADMIN` alone (git would follow the admin
    dir's `commondir`, the lane's to write)."""
    return f"GIT_DIR={q(admin)} GIT_COMMON_DIR={q(common)} git {' '.join(LANE_CONFIG)}"


# A sandboxed lane's own object store (guard/objects.py): its commits live there until exec
# copies them, verified, into the shared store, which never lists a lane's store as an
# alternate (a lane's store would shadow objects written later). An engine call that
# reads a lane's commits names that lane's store for that call only: every call whose cwd
# is in a pinned lane names its own, and `lane_objects`/`name_lane_stores` name exactly
# the given ones for the calls made from the hub or the common dir (threads of `parallel`
# inherit them). A function run `in_own_context` forgets what it named when it returns.
_READ_STORES: ContextVar[tuple[str, ...]] = ContextVar("gitlane_lane_stores", default=())
F = TypeVar("F", bound=Callable[..., Any])


def name_lane_stores(*stores: str | None) -> None:
    """From now on in this context, engine git calls also read exactly these stores."""
    _READ_STORES.set(tuple(dict.fromkeys(s for s in stores if s)))


def named_lane_stores() -> tuple[str, ...]:
    return _READ_STORES.get()


@contextmanager
def lane_objects(*stores: str | None) -> Iterator[None]:
    """Within: engine git calls also read exactly these lane stores (after the shared one)."""
    token = _READ_STORES.set(tuple(dict.fromkeys(s for s in stores if s)))
    try:
        yield
    finally:
        _READ_STORES.reset(token)


# Decisions about ancestry, freshness and what lands (land's gates, the queue) are made
# once the lane's objects are in the shared store, imported through objects.import_lane
# (every object re-hashed): from then on, within `shared_store_only()`, engine git calls
# read the shared store alone. No lane store is named, not even the own store of a lane
# the call runs in: git looks an object up in every pack (an alternate's too) before any
# loose object, so a pack a lane wrote could stand in for a loose commit of the shared
# store. And no commit-graph is read (core.commitGraph=false): git takes a commit's
# parents from the first object directory's commit-graph, unchecked, and a graph file is
# a plain file anyone who writes a store can forge (red team 13I). What a lane's own
# worktree holds (its status: staged objects may be in its store only) is read with
# `shared_store_only(False)`.
_SHARED_ONLY: ContextVar[bool] = ContextVar("gitlane_shared_only", default=False)
SHARED_ONLY_CONFIG = ("-c", "core.commitGraph=false")
# every engine git: a symbolic ref (a lane's HEAD after a rebase) is written as a file,
# never as the symlink core.preferSymlinkRefs asks for, which _admin_blocked refuses
ENGINE_CONFIG = ("-c", "core.preferSymlinkRefs=false")


@contextmanager
def shared_store_only(on: bool = True) -> Iterator[None]:
    """Within (when `on`): engine git calls read the shared object store alone, without
    any commit-graph; `on=False` reads lanes' stores again (a lane's own worktree facts)."""
    token = _SHARED_ONLY.set(on)
    try:
        yield
    finally:
        _SHARED_ONLY.reset(token)


def reading_shared_store_only() -> bool:
    return _SHARED_ONLY.get()


def in_own_context(fn: F) -> F:
    """`fn` runs in a copy of the caller's context: the lane stores it names are forgotten
    when it returns (a land's lane store is not named for the lanes auto_sync rebases)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return copy_context().run(fn, *args, **kwargs)

    return cast(F, wrapper)


def _store_of(admin: str) -> str | None:
    store = os.path.join(admin, "objects")
    return store if os.path.isdir(store) and not os.path.islink(store) else None


def _with_stores(stores: Sequence[str], env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """`env` with GIT_ALTERNATE_OBJECT_DIRECTORIES naming `stores`, unless the call names
    its own object directories (objects.py's view, export's scratch store) or runs inside
    exec --sandbox (where the lane's store is already GIT_OBJECT_DIRECTORY)."""
    if not stores or (
        env and ("GIT_OBJECT_DIRECTORY" in env or "GIT_ALTERNATE_OBJECT_DIRECTORIES" in env)
    ):
        return env
    from guard import binding

    if os.environ.get(binding.OBJECTS):
        return env
    alts = ":".join(alternate_entry(s) for s in dict.fromkeys(stores))
    return {**(env or {}), "GIT_ALTERNATE_OBJECT_DIRECTORIES": alts}


def _nested_repo(real: str, lane: str) -> bool:
    """Is `real` (inside `lane`) in a repository of its own below the lane's top (a
    submodule)? Its `.git` is nearer than the lane's."""
    d = real
    while d != lane and d.startswith(lane.rstrip(os.sep) + os.sep):
        if os.path.lexists(os.path.join(d, ".git")):
            return True
        d = os.path.dirname(d)
    return False


_WTCONFIG_ON: dict[str, bool] = {}


def worktree_config_on(common: str | os.PathLike[str]) -> bool:
    """extensions.worktreeConfig in the common config (read as git reads repository
    extensions: that file alone, no includes), once per process."""
    key = os.fspath(common)
    if key not in _WTCONFIG_ON:
        cfg = os.path.join(key, "config")
        try:
            proc = _wtconfig_get(cfg)
        except subprocess.TimeoutExpired:  # cannot tell: on (refuse, never allow)
            _WTCONFIG_ON[key] = True
            return True
        if proc.returncode not in (0, 1):  # cannot tell: treat it as on (refuse, never allow)
            _WTCONFIG_ON[key] = True
        else:
            _WTCONFIG_ON[key] = proc.stdout.strip() == b"true"
    return _WTCONFIG_ON[key]


def _wtconfig_get(cfg: str) -> subprocess.CompletedProcess[bytes]:
    """`git config --file CFG --get extensions.worktreeConfig`, bounded."""
    return subprocess.run(
        [
            real_git(),
            "config",
            "--file",
            cfg,
            "--type=bool",
            "--get",
            "extensions.worktreeConfig",
        ],
        env=base_env(),
        capture_output=True,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=lane_read_timeout(),  # a FIFO at a config a lane named never blocks
    )


def check_no_worktree_config(common: str | os.PathLike[str], file: str = "") -> None:
    """Refuse `untrusted_git_config` while extensions.worktreeConfig is on (git would read
    a lane's config.worktree, `file` when one lane is meant): before any engine git runs
    in a lane, and before `create` makes one it could then not use. The lane's
    `<admin>/config.worktree` is a process of the lane's to write, and swap by a rename,
    at any moment: a check of the file before git runs vouched for nothing (git read it
    again after, and a filter swapped in between ran in the owner's `git lane status`, red
    team 14A). So no engine git runs in a lane while the extension is on, whatever the
    file holds now (or whether it is there at all)."""
    if not worktree_config_on(common):
        return
    which = f"lane's own worktree config {shown(file)}" if file else "lanes' config.worktree"
    raise Refusal(
        "untrusted_git_config",
        f"extensions.worktreeConfig is on in the repository's config: git would read the "
        f"{which}, which a process of the lane can change under any git call, and run what "
        "it names (a filter, a hook path) in the engine's git, outside any sandbox; "
        "git-lane runs no git in a lane while it is on",
        next=[f"git -C {q(common)} config --unset extensions.worktreeConfig"],
        details={"file": file, "key": "extensions.worktreeConfig"},
    )


# A lane's index (`<admin>/index`) is the lane's to write (exec --sandbox grants its admin
# dir). Something there that is no regular file blocks git's open(2) of it for ever (a
# FIFO) or is not the lane's index at all (a symlink): every engine git call in a pinned
# lane checks it first, one lstat. And git takes an entry's name from an index as it is:
# the checks it makes on a name it is given (verify_path) are not made on one it reads,
# so `checkout-index` (or `checkout -- .`, `commit`) would write or commit `../x` as named.
def _fault(mode: int) -> str | None:
    """Why git must not open a file of this mode (None: a regular file)."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"))
    return next((f"is {what}" for test, what in kinds if test(mode)), "is a socket or a device")


def index_file_fault(admin: str | os.PathLike[str]) -> tuple[str, str] | None:
    """The file of `<admin>/index` git must not open, and why (None: all regular, or no
    index): the index itself, and with a split index (its `link` extension) each
    `<admin>/sharedindex.<sha>`, which git opens as well."""
    index = os.path.join(admin, "index")
    try:
        fault = _fault(os.lstat(index).st_mode)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return index, f"cannot be looked at ({exc.strerror})"
    if fault is not None:
        return index, fault
    try:
        with os.scandir(admin) as it:
            for e in it:
                if e.name.startswith("sharedindex."):
                    fault = _fault(e.stat(follow_symlinks=False).st_mode)
                    if fault is not None:
                        return e.path, fault
    except OSError as exc:
        return os.fspath(admin), f"cannot be listed ({exc.strerror})"
    return None


def index_unreadable(admin: str | os.PathLike[str]) -> bool:
    """Is `<admin>/index` a regular file (and each shared index it names too) that git
    cannot read: a bad signature, version or checksum, an emptied `sharedindex.*`? Every
    git call in the lane then dies (`index file corrupt`). Asked of git itself, with the
    common dir as its repository (`<common>/worktrees/<id>` is an admin dir's place) and
    the index named by GIT_INDEX_FILE: never the lane's pointers, no fsmonitor. A git
    that fails to say, whatever the reason, is an index not vouched for: True. No index,
    or one that is no regular file (index_file_fault names it), is False."""
    index = os.path.join(admin, "index")
    if not os.path.isfile(index) or os.path.islink(index) or index_file_fault(admin) is not None:
        return False
    common = os.path.dirname(os.path.dirname(os.path.abspath(admin)))
    res = run(
        ["-c", "core.fsmonitor=false", "rev-parse", "--shared-index-path"],
        common,
        check=False,
        env={"GIT_INDEX_FILE": os.path.abspath(index)},
        timeout=lane_read_timeout(),
    )
    return not res.ok


def check_index_file(admin: str | os.PathLike[str], lane: str | os.PathLike[str]) -> None:
    """Refuse (lane_index_unsafe) when the lane's index (or a shared index it may
    name) is no regular file."""
    found = index_file_fault(admin)
    if found is None:
        return
    path, fault = found
    index = os.path.join(admin, "index")
    rm = [index] if path in (index, os.fspath(admin)) else [path, index]
    how = "rm -rf" if fault == "is a directory" else "rm -f"  # nothing committed is there
    raise Refusal(
        "lane_index_unsafe",
        f"the index of the lane at {shown(lane)} ({shown(path)}) {fault}, not a file git "
        "can read (a FIFO blocks git for ever); nothing was done. It holds nothing "
        "committed: removing it and reading the lane's commit back into a new index "
        "keeps every file of the worktree",
        next=[f"{how} -- {' '.join(q(p) for p in rm)}", f"{owner_git(lane)} read-tree HEAD"],
        details={"lane_path": os.fspath(lane), "index": path, "fault": fault},
    )


def index_copy_refusal(
    lane: str | os.PathLike[str], index: str, exc: OSError, again: str
) -> Refusal:
    """The lane's index (`index`) could not be copied (copy_regular) for a git of the
    engine's own to read: the copy keeps its holes as holes, so what stopped it is a
    file-size limit, a full disk, or the index turned into no regular file meanwhile.
    git rewrites an index with what it knows only (an extension a lane padded out to a
    terabyte with a hole is dropped, every staged entry kept)."""
    try:
        size: int | None = os.lstat(index).st_size
    except OSError:
        size = None
    return Refusal(
        "index_copy_failed",
        f"the index of the lane at {shown(lane)} ({shown(index)}, {size} bytes) could not be "
        f"copied ({exc.strerror or exc}): holes are copied as holes, so a file-size limit, "
        "a full disk or a change meanwhile stopped it; nothing was done. git rewrites an "
        "index with only what it knows of it, every staged entry kept",
        next=[f"{owner_git(lane)} update-index --force-write-index", again],
        details={"lane_path": os.fspath(lane), "index": index, "size": size, "error": str(exc)},
    )


# Characters HFS+ ignores in a name (git's is_hfs_dotgit): `.g\u200cit` is `.git` there.
_HFS_IGNORED = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


def unsafe_entry_name(name: str) -> bool:
    """Would git refuse `name` as a path it is given (read-cache.c verify_path, with
    core.protectNTFS and core.protectHFS both on, as they are where they matter)? An
    absolute name, an empty, `.` or `..` component, or one that names `.git` on any file
    system git knows (any case; NTFS's trailing dots and spaces, `:stream` and `git~1`;
    HFS+'s ignored characters)."""
    if not name or name.startswith("/"):
        return True
    for comp in name.split("/"):
        if comp in ("", ".", ".."):
            return True
        low = comp.lower()
        ntfs = low.split(":", 1)[0].rstrip(". ")
        if ntfs in (".git", "git~1") or low.translate(_HFS_IGNORED) == ".git":
            return True
    return False


def unsafe_index_entries(cwd: Where, env: Mapping[str, str] | None = None) -> list[str]:
    """The names in the index (of the worktree whose top is `cwd`) git would refuse as a
    path: what checkout-index or a commit would write or commit outside the worktree."""
    out = run(["ls-files", "-z", "--full-name"], cwd, env=env).stdout
    return [n for n in out.split("\0") if n and unsafe_entry_name(n)]


def _argv_env(
    args: Sequence[str], cwd: Where, env: Mapping[str, str] | None
) -> tuple[tuple[str, ...], Mapping[str, str] | None]:
    pinned = lane_pointers(cwd)
    only = _SHARED_ONLY.get()
    stores = [] if only else list(_READ_STORES.get())
    pre = SHARED_ONLY_CONFIG if only else ()
    if pinned is None:
        return (real_git(), *ENGINE_CONFIG, *pre, *args), _with_stores(stores, env)
    if not pinned:  # a submodule inside a lane: its own repository, no program of its config
        return (real_git(), *ENGINE_CONFIG, *LANE_CONFIG, *pre, *args), env
    check_no_worktree_config(
        pinned["GIT_COMMON_DIR"], os.path.join(pinned["GIT_DIR"], "config.worktree")
    )
    if not (env and "GIT_INDEX_FILE" in env):  # git opens the lane's own index
        check_index_file(pinned["GIT_DIR"], pinned["GIT_WORK_TREE"])
    own = None if only else _store_of(pinned["GIT_DIR"])
    if own is not None:
        stores.insert(0, own)
    argv = (real_git(), *ENGINE_CONFIG, *LANE_CONFIG, *pre, *args)
    return argv, _with_stores(stores, {**pinned, **(env or {})})


Where = str | os.PathLike[str] | None


def q(word: str | os.PathLike[str]) -> str:
    """One shell word, for `next` commands: a path with a quote in it still runs. A word
    with a control character (a newline in a file name) is spelled with POSIX printf's
    octal escapes, one per byte (a name that is not UTF-8 too), so the command stays on one
    line and still names exactly that word (command substitution drops trailing newlines:
    those are quoted as they are, after it)."""
    s = os.fspath(word)
    if s.isprintable():
        return shlex.quote(s)
    body = s.rstrip("\n")
    tail = shlex.quote(s[len(body) :]) if len(body) < len(s) else ""
    if body.isprintable():
        return shlex.quote(s)
    # octal escapes are bytes: a character beyond one byte (U+2028) or a byte that is not
    # UTF-8 (a surrogate-escaped file name) is spelled byte by byte, as the file system has it
    fmt = "".join(
        "".join(f"\\{b:03o}" for b in c.encode("utf-8", "surrogateescape"))
        # a leading `-` would be read as an option of printf (dash: "Illegal option")
        if not c.isprintable() or c in "\\%" or (i == 0 and c == "-")
        else c
        for i, c in enumerate(body)
    )
    return '"$(printf ' + shlex.quote(fmt) + ')"' + tail


def mv_aside(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> str:
    """The `next` step that moves `src` aside to `dest`, or, when that name is taken now
    (a file, a directory, a link, an earlier refusal's backup), to the first of `dest.1`,
    `dest.2`, ... that is free. `-n` never replaces what is there (it would be lost), `-T`
    never moves into a directory of that name."""
    base = os.fspath(dest)
    fresh, n = base, 0
    while os.path.lexists(fresh):
        n += 1
        fresh = f"{base}.{n}"
    return f"mv -n -T -- {q(src)} {q(fresh)}"


def shown_some(paths: Sequence[str], most: int = 5) -> str:
    """The first `most` of `paths` for a message, each as `shown` gives it."""
    more = " ..." if len(paths) > most else ""
    return ", ".join(shown(p) for p in paths[:most]) + more


def shown(path: str | os.PathLike[str]) -> str:
    """A path for a message, on one line: as it is when every character prints, else in
    double quotes with C escapes (as git shows it with core.quotePath), so a name with a
    newline cannot split a refusal over lines or pass for two names."""
    s = os.fspath(path)
    if s and ", " not in s and all(c.isprintable() and c not in '"\\' for c in s):
        return s
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8: octal escapes, as git shows them
        return c_quote(s.encode("utf-8", "surrogateescape"), high=True)
    return json.dumps(s, ensure_ascii=False)


def c_quote(raw: bytes, high: bool) -> str:
    """`raw` in double quotes with git's C escapes (what core.quotePath shows and what git
    reads back); bytes of 0x80 and up as octal too when `high`, else as they are."""
    esc = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r"}
    out = []
    for b in raw:
        if b in esc:
            out.append(esc[b])
        elif b in (0x22, 0x5C):
            out.append("\\" + chr(b))
        elif b < 0x20 or b == 0x7F or (high and b >= 0x80):
            out.append(f"\\{b:03o}")
        else:
            out.append(chr(b))
    return '"' + "".join(out).encode("latin-1").decode("utf-8", "surrogateescape") + '"'


def alternate_entry(path: str) -> str:
    """One entry of GIT_ALTERNATE_OBJECT_DIRECTORIES, a colon-separated list: a path with
    a colon (or a quote, or a control character) in it goes C-quoted, as git reads it."""
    if not any(c in path for c in ':"\\') and path.isprintable():
        return path
    return c_quote(path.encode("utf-8", "surrogateescape"), high=False)


def json_safe(obj: Any) -> Any:
    """`obj` for strict JSON (UTF-8): a string holding bytes that are not UTF-8 (a file
    name, a commit subject: lone surrogates here) is given as git quotes it with
    core.quotePath, in double quotes with octal escapes; everything else as it is."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return c_quote(obj.encode("utf-8", "surrogateescape"), high=True)
    if isinstance(obj, dict):
        return {json_safe(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, os.PathLike):  # what json.dumps would give as str() (default=str)
        return json_safe(os.fspath(obj))
    return obj


def _shim_dirs() -> set[str]:
    dirs = set()
    here = Path(__file__).resolve().parent
    for cand in (here / "_data" / "shims", here.parent / "shims"):
        dirs.add(str(cand))
    extra = os.environ.get("GITLANE_SHIMS_DIR")
    if extra:
        dirs.add(os.path.realpath(extra))
    return dirs


def real_git() -> str:
    """Absolute path of the real git: GITLANE_REAL_GIT, else PATH without our shims."""
    global _real_git
    if _real_git is None:
        forced = os.environ.get("GITLANE_REAL_GIT")
        if forced and os.access(forced, os.X_OK):
            _real_git = forced
        else:
            shims = _shim_dirs()
            path = os.pathsep.join(
                p
                for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
                if p and os.path.realpath(p) not in shims
            )
            found = shutil.which("git", path=path)
            _real_git = found or "/usr/bin/git"
    return _real_git


def base_env(extra: Mapping[str, str] | None = None, scrub: bool = True) -> dict[str, str]:
    from guard.binding import TRACE_NOT_A_FILE

    env = dict(os.environ)
    for k in [k for k, v in env.items() if k.startswith("GIT_TRACE")]:
        if env[k].strip().lower() not in TRACE_NOT_A_FILE:
            del env[k]  # no engine call appends its trace to a file a caller named
    for k in _PROGRAM_OR_HISTORY:
        env.pop(k, None)
    # ancestry is the commits' own: a replacement ref (refs/replace/*, which a lane can
    # write by hand) or a graft file (info/grafts, GIT_GRAFT_FILE) would make
    # `merge-base --is-ancestor` say main is in a lane that drops a landed commit.
    # The graft file named cannot exist (/dev/null is read, and git warns of grafts).
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    env["GIT_GRAFT_FILE"] = "/proc/self/git-lane-no-grafts"
    if scrub:
        for k in REPO_POINTERS:
            env.pop(k, None)
        _keep_lane_store(env)
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    env["GITLANE_INTERNAL"] = "1"  # our own call: the git shim lets it through (shims/git)
    if extra:
        env.update(extra)
    return env


def _keep_lane_store(env: dict[str, str]) -> None:
    """Inside `exec --sandbox` the shared object store is not writable: the engine's git
    calls (a sync's rebase, a commit's hooks) keep writing into the lane's private store
    that exec named (guard/objects.py). Only that exact pairing is kept; whatever it
    names, the kernel lets CMD's git write no other store."""
    from guard import binding

    store = os.environ.get(binding.OBJECTS)
    if store and os.environ.get("GIT_OBJECT_DIRECTORY") == store:
        env["GIT_OBJECT_DIRECTORY"] = store
        env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = os.environ.get(
            "GIT_ALTERNATE_OBJECT_DIRECTORIES", ""
        )


@dataclass(frozen=True)
class GitResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False  # killed (its whole process group) after run()'s `timeout`

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def z(self) -> list[str]:
        """Fields of -z output."""
        return [f for f in self.stdout.split("\0") if f]

    def lines(self) -> list[str]:
        return [ln for ln in self.stdout.splitlines() if ln]


def open_regular(path: Path | str, follow: bool = True) -> int:
    """A read-only descriptor of the regular file at `path` (symlinks followed), opened
    without ever blocking: a FIFO, socket or device where a state file belongs is not
    one (reading it would hang every command, or never end), so it raises OSError as a
    directory does (EISDIR for a directory, EINVAL for the others). `follow=False`: a
    symlink is not one either (ELOOP)."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | nofollow)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
        raise OSError(code, "not a regular file", os.fspath(path))
    return fd


def copy_regular(src: Path | str, dest: Path | str, times: bool = False, mode: int = 0o644) -> None:
    """Copy the regular file `src` (never through a link, never blocking on a FIFO: as
    `open_regular` opens it) to the new file `dest` (never through a link there either),
    holes kept as holes (dirfd.copy_data): a lane's index, index.lock or a file of its
    worktree may be a terabyte that takes no disk. `times`: `dest` gets `src`'s atime
    and mtime (git tells racily clean index entries by the index file's mtime). OSError
    when `src` is no such file or the copy cannot be made (EFBIG past a file-size limit,
    ENOSPC); a `dest` left half written is removed."""
    fd = open_regular(src, follow=False)
    try:
        st = os.fstat(fd)
        out = os.open(
            dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
        )
        try:
            dirfd.copy_data(fd, out, st.st_size)
            if times:
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        except BaseException:
            os.close(out)
            with contextlib.suppress(OSError):
                os.unlink(dest)
            raise
        os.close(out)
    finally:
        os.close(fd)


def read_regular(path: Path | str, follow: bool = True, limit: int | None = None) -> bytes:
    """The bytes of a state file, read as `open_regular` opens it; more than `limit`
    bytes is not a state file of ours: OSError (EFBIG)."""
    fd = open_regular(path, follow)
    try:
        chunks = []
        size = 0
        # never more than limit+1 bytes asked for: past the bound nothing more is read
        while chunk := os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                raise OSError(errno.EFBIG, "too large for a state file", os.fspath(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_admin(path: Path | str, limit: int = 1 << 20) -> str:
    """The text of a file in a lane's admin dir or worktree that git-lane reads by itself
    (HEAD, logs/HEAD, gitdir, commondir, rebase-merge/*, a .git file...): the lane may
    write there (exec --sandbox grants its admin dir), so a FIFO, a device or a symlink in
    its place is never opened to block or followed (OSError, as read_regular); more than
    `limit` bytes is not one of git's small files (OSError EFBIG); undecodable bytes are
    kept (surrogateescape)."""
    return read_regular(path, follow=False, limit=limit).decode("utf-8", "surrogateescape")


# A git call that reads a store a sandboxed CMD may write while it runs (a lane's own
# object store) can block for ever: a FIFO planted there blocks git's open(2). Such calls
# pass `timeout`; git then runs in its own process group, killed whole when it expires.
LANE_READ_TIMEOUT = 120.0


def lane_read_timeout() -> float:
    """LANE_READ_TIMEOUT, or GITLANE_TEST_LANE_READ_TIMEOUT's seconds (the tests' way to see
    a timeout fire without waiting two minutes; a bad value is ignored)."""
    try:
        t = float(os.environ.get("GITLANE_TEST_LANE_READ_TIMEOUT", ""))
    except ValueError:
        return LANE_READ_TIMEOUT
    return t if 0 < t <= 3600 else LANE_READ_TIMEOUT


# What git may take reading a lane: a sandboxed CMD commits a "tree bomb" (N subtrees that
# are all one subtree, D levels deep: N**D paths from N*D small objects, red team 17
# sandbox F1) and git's status, diff or ls-tree of it lists every path; `git status`
# queues every difference before it prints the first, so no cap on its output bounds its
# memory. Such calls run with this much data memory (RLIMIT_DATA, set on the child as it
# starts: git's heap and anonymous maps; its mapped packs and index are not counted) and
# fail "out of memory", which the caller refuses with a code; what git prints is read up
# to LANE_READ_ENTRIES entries or LANE_READ_BYTES bytes, git killed past that.
LANE_READ_MEMORY = 1 << 30
LANE_READ_ENTRIES = 10_000
LANE_READ_BYTES = 16 << 20


def lane_read_memory() -> int:
    """LANE_READ_MEMORY, or GITLANE_TEST_LANE_READ_MEMORY's bytes (the tests' way to see
    the bound hold on a small tree bomb; a bad value is ignored)."""
    try:
        m = int(os.environ.get("GITLANE_TEST_LANE_READ_MEMORY", ""))
    except ValueError:
        return LANE_READ_MEMORY
    return m if (16 << 20) <= m <= (64 << 30) else LANE_READ_MEMORY


def _limit_memory(pid: int, limit: int) -> None:
    """Hold the started child `pid` to `limit` bytes of data memory: set right after the
    spawn (never a preexec_fn: the engine runs git from threads), before git has read
    anything of the lane's. A child gone already needs none."""
    import resource

    inf = resource.RLIM_INFINITY
    try:  # never above what the child has already (a limit its caller runs under)
        soft, hard = resource.prlimit(pid, resource.RLIMIT_DATA)
        soft = limit if soft == inf else min(soft, limit)
        hard = limit if hard == inf else min(hard, limit)
        resource.prlimit(pid, resource.RLIMIT_DATA, (min(soft, hard), hard))
    except (ProcessLookupError, PermissionError):
        pass


def out_of_memory(res: GitResult) -> bool:
    """Did git stop for want of memory (LANE_READ_MEMORY, or a limit its caller runs
    under)? git says so and exits 128 (xmalloc, zlib's inflateInit); a child killed
    (SIGKILL, SIGSEGV, SIGABRT) by the kernel for it is one too."""
    if res.timed_out:
        return False
    if res.returncode in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT):
        return True
    return res.returncode == 128 and "out of memory" in res.stderr.lower()


# the git processes this context starts, when a caller must know them (exec's Absorber:
# its git is exec's own worker, not part of CMD's tree: guard/reap.py Workers)
_SPAWNED: ContextVar[Workers | None] = ContextVar("gitlane_spawned", default=None)


@contextmanager
def recording(workers: Workers) -> Iterator[None]:
    """Within: each git run() starts is in `workers.pids` from its spawn until waited for."""
    token = _SPAWNED.set(workers)
    try:
        yield
    finally:
        _SPAWNED.reset(token)


def _popen(
    argv: Sequence[str], cwd: Where | None, env: Mapping[str, str], **kw: Any
) -> subprocess.Popen[bytes]:
    """Popen of git with stdin/stdout/stderr as `kw` says, recorded in the workers' spawned
    set when a `workers` block runs (under its lock: its kill sees every child or none)."""
    spawned = _SPAWNED.get()
    with spawned.lock if spawned is not None else contextlib.nullcontext():
        child = subprocess.Popen(
            argv, cwd=os.fspath(cwd) if cwd is not None else None, env=env, **kw
        )
        if spawned is not None:
            spawned.pids.add(child.pid)
    return child


def _reaped(child: subprocess.Popen[bytes]) -> None:
    """Drop a child `_popen` recorded once it has been waited for (one still running stays
    for the workers' kill)."""
    spawned = _SPAWNED.get()
    if spawned is not None and child.poll() is not None:
        with spawned.lock:
            spawned.pids.discard(child.pid)


def run(
    args: Sequence[str],
    cwd: Where = None,
    *,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    scrub: bool = True,
    timeout: float | None = None,
    memory: int | None = None,
) -> GitResult:
    """git `args` in `cwd`, its output captured whole. `timeout`: its process group is
    killed past it (timed_out); `memory`: its data memory is held to that many bytes
    (out_of_memory tells the failure). A call whose output grows with what a lane
    commits reads it through run_capped instead."""
    argv, env = _argv_env(args, cwd, env)
    data = input.encode("utf-8", "surrogateescape") if input is not None else None
    spawned = _SPAWNED.get()
    timed_out = False
    if timeout is None and spawned is None and memory is None:
        proc = subprocess.run(
            argv,
            cwd=os.fspath(cwd) if cwd is not None else None,
            env=base_env(env, scrub=scrub),
            input=data,
            capture_output=True,
            stdin=None if input is not None else subprocess.DEVNULL,
            check=False,
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    else:
        child = _popen(
            argv,
            cwd,
            base_env(env, scrub=scrub),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=timeout is not None,  # its group is killed whole on timeout
        )
        if memory is not None:
            _limit_memory(child.pid, memory)
        try:
            out, err = child.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = child.communicate()
            err += f"\ngit {args[0] if args else ''} timed out after {timeout:g} s".encode()
        finally:
            _reaped(child)
        code = child.returncode
    res = GitResult(
        argv=("git", *args),
        returncode=code,
        stdout=out.decode("utf-8", "surrogateescape"),
        stderr=err.decode("utf-8", "surrogateescape"),
        timed_out=timed_out,
    )
    if check and code != 0:
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    return res


@dataclass(frozen=True)
class Capped:
    """run_capped's answer: git's result (its stdout what was read, cut after the last
    whole entry), and `truncated` when git was stopped at the cap with more to say."""

    result: GitResult
    truncated: bool = False


def run_capped(
    args: Sequence[str],
    cwd: Where,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    entries: int = LANE_READ_ENTRIES,
    size: int = LANE_READ_BYTES,
    sep: bytes = b"\0",
) -> Capped:
    """git `args` over what a lane wrote or committed, bounded every way: its output read
    as it comes up to `entries` entries (`sep`-ended) or `size` bytes, then git's group
    killed and `truncated` set (what was read is a true prefix: whole entries only); its
    data memory held to lane_read_memory (out_of_memory); past `timeout` (default
    lane_read_timeout) killed (timed_out). stderr goes to a temporary file (a pipe could
    fill and stall git), of which STDERR_MAX is kept."""
    import select
    import tempfile

    argv, env = _argv_env(args, cwd, env)
    t = lane_read_timeout() if timeout is None else timeout
    deadline = time.monotonic() + t
    chunks: list[bytes] = []
    got = count = 0
    truncated = timed_out = False
    with tempfile.TemporaryFile() as errf:
        child = _popen(
            argv,
            cwd,
            base_env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errf,
            start_new_session=True,  # its group is killed whole past a bound
        )
        _limit_memory(child.pid, lane_read_memory())
        assert child.stdout is not None
        fd = child.stdout.fileno()
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    timed_out = True
                    break
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                chunks.append(data)
                got += len(data)
                count += data.count(sep)
                if count >= entries or got >= size:
                    truncated = True
                    break
            if not (timed_out or truncated):
                try:  # its output ended: git is exiting (or stuck past it: bounded too)
                    child.wait(timeout=max(deadline - time.monotonic(), 0.01))
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:
            if child.returncode is None:
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            child.stdout.close()
            code = child.wait()
            _reaped(child)
        errf.seek(0)
        err = errf.read(STDERR_MAX).decode("utf-8", "surrogateescape")
    out = b"".join(chunks)
    if truncated:
        out = out[: out.rfind(sep) + 1]  # whole entries only
        code = 0  # stopped by us, not failed: what it printed is what it found
    elif timed_out:
        err += f"\ngit {args[0] if args else ''} timed out after {t:g} s"
    res = GitResult(
        argv=("git", *args),
        returncode=code,
        stdout=out.decode("utf-8", "surrogateescape"),
        stderr=err,
        timed_out=timed_out,
    )
    return Capped(res, truncated)


# a commit's subject as `git log` lists it for the engine: its first 200 characters (git
# cuts it, `..` at the end): a lane's commit message can be hundreds of MB (red team 17
# sandbox F1); commit_lines reads them itself, cheaper still
SUBJECT_FORMAT = "--format=%h %<(200,trunc)%s"


SUBJECT_MAX = 200
_MESSAGE_HEAD = 1 << 16  # of each commit object, what is kept to find its subject


def commit_lines(args: Sequence[str], cwd: Where, *, check: bool = False) -> GitResult:
    """ "%h %s" lines of the commits `git rev-list ARGS` lists, each subject cut to
    SUBJECT_MAX characters: the names from `rev-list --abbrev-commit` (read up to
    run_capped's bound: a last line says how many were listed when git had more), each
    subject from the first 64 KiB of its commit object through one `cat-file --batch`,
    the rest of the object read and dropped. `git log --format=%s` formatted and held every
    message whole (4 commits of a 200 MB one-line message: 18 s, 1 GB in git; 2.4 GB in
    the owner's process). Bounded by lane_read_timeout and lane_read_memory; a git that
    fails gives a result that is not ok (GitError with `check`)."""
    capped = run_capped(["rev-list", "--abbrev-commit", *args], cwd, sep=b"\n")
    res = capped.result
    names = [ln for ln in res.stdout.split("\n") if ln] if res.ok else []
    lines: list[str] = []
    if names:
        subjects = _subjects(cwd, names)
        if subjects is None:
            res = GitResult(res.argv, 1, "", "git cat-file could not read the commits", False)
        else:
            lines = [f"{n} {sub}" for n, sub in zip(names, subjects, strict=True)]
    if check and not res.ok:
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    if capped.truncated and res.ok:
        lines.append(f"(more commits than the {len(lines)} listed)")
    text = "".join(f"{ln}\n" for ln in lines)
    return GitResult(res.argv, res.returncode, text, res.stderr, res.timed_out)


def _subject(head: bytes) -> str:
    """git's %s of a commit object's first bytes: the message's first paragraph, its lines
    joined with spaces, cut to SUBJECT_MAX characters (`..` at the end, as %<(N,trunc))."""
    _, sep, msg = head.partition(b"\n\n")
    if not sep:
        return "(no message within its first 64 KiB)"
    para = msg.lstrip(b"\n").split(b"\n\n", 1)[0]
    text = " ".join(ln.strip() for ln in para.decode("utf-8", "replace").split("\n"))
    text = text.strip()
    return text if len(text) <= SUBJECT_MAX else text[: SUBJECT_MAX - 2] + ".."


def _subjects(cwd: Where, names: list[str]) -> list[str] | None:
    """The subject of each commit `names` gives, in order (None: git could not give one)."""
    argv, env = _argv_env(["cat-file", "--batch"], cwd, None)
    t = lane_read_timeout()
    child = subprocess.Popen(
        argv,
        cwd=os.fspath(cwd) if cwd is not None else None,
        env=base_env(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _limit_memory(child.pid, lane_read_memory())
    assert child.stdin is not None and child.stdout is not None
    data = "".join(f"{n}\n" for n in names).encode()

    def feed() -> None:
        try:
            assert child.stdin is not None
            child.stdin.write(data)
            child.stdin.close()
        except OSError:
            pass

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)

    writer = threading.Thread(target=feed, daemon=True)
    watchdog = threading.Timer(t, kill)  # a blocked read ends when git is killed
    writer.start()
    watchdog.start()
    out: list[str] = []
    try:
        for _ in names:
            header = child.stdout.readline(4096).split()
            if len(header) != 3 or header[1] != b"commit" or not header[2].isdigit():
                return None
            left = int(header[2])
            head = child.stdout.read(min(left, _MESSAGE_HEAD))
            left -= len(head)
            while left > 0:
                chunk = child.stdout.read(min(left, 1 << 20))
                if not chunk:
                    return None
                left -= len(chunk)
            if child.stdout.read(1) != b"\n":
                return None
            out.append(_subject(head))
        return out
    finally:
        watchdog.cancel()
        kill()
        child.stdout.close()
        child.wait()
        writer.join()


T = TypeVar("T")
R = TypeVar("R")


def parallel(fn: Callable[[T], R], items: Iterable[T], workers: int = 8) -> list[R]:
    """Map fn over items on a few threads (git calls spend their time in the child)."""
    todo = list(items)
    if len(todo) <= 1:
        return [fn(x) for x in todo]
    results: list[R | None] = [None] * len(todo)
    errors: list[BaseException] = []
    nxt = iter(range(len(todo)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(nxt, None)
            if i is None or errors:
                return
            try:
                results[i] = fn(todo[i])
            except BaseException as exc:  # re-raised in the caller's thread
                errors.append(exc)
                return

    # each thread runs in a copy of the caller's context: the lane stores it names
    threads = [
        threading.Thread(target=copy_context().run, args=(worker,))
        for _ in range(min(workers, len(todo)))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]


def both(a: Callable[[], T], b: Callable[[], R]) -> tuple[T, R]:
    """Run two fact-gathering calls side by side (each mostly waits on a git child)."""
    out: list[object] = parallel(lambda f: f(), [a, b])
    return out[0], out[1]  # type: ignore[return-value]


# -- refs and commits ---------------------------------------------------------------------
def ref_sha(cwd: Where, ref: str) -> str | None:
    """The commit `ref` names, or None when there is none."""
    res = run(["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], cwd, check=False)
    return res.stdout.strip() if res.ok else None


def refs(cwd: Where, *patterns: str) -> dict[str, str]:
    """`for-each-ref` over `patterns`: full ref name -> sha, in one git call (ref names
    hold no spaces or newlines, so plain lines parse safely)."""
    res = run(["for-each-ref", "--format=%(objectname) %(refname)", *patterns], cwd)
    out: dict[str, str] = {}
    for ln in res.lines():
        sha, _, ref = ln.partition(" ")
        out[ref] = sha
    return out


# A plain, parseable patch whatever the user's diff config says (used by land and the hook).
PATCH_ARGS = (
    "-U0",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--src-prefix=a/",  # whatever diff.noprefix / diff.mnemonicPrefix say
    "--dst-prefix=b/",
    "--diff-filter=d",
)


def plain_refs(cwd: Where, *patterns: str) -> dict[str, str]:
    """Like `refs`, leaving out symbolic refs: `git symbolic-ref` writes outside any ref
    transaction (no hook sees it), so a symbolic ref under a namespace the hooks guard is
    a forgery, never something to trust."""
    res = run(["for-each-ref", "--format=%(objectname) %(refname) %(symref)", *patterns], cwd)
    out: dict[str, str] = {}
    for ln in res.lines():
        sha, _, rest = ln.partition(" ")
        ref, _, sym = rest.partition(" ")
        if not sym:
            out[ref] = sha
    return out


def is_ancestor(cwd: Where, a: str, b: str) -> bool:
    res = run(["merge-base", "--is-ancestor", a, b], cwd, check=False)
    if res.returncode not in (0, 1):
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    return res.returncode == 0


def symref(cwd: Where, ref: str, *, first: bool = False) -> str | None:
    """What `ref` points to when it is a symbolic ref, else None: the end of its chain of
    symbolic refs (git's default), or with `first` the ref it names itself (a git before
    2.39 has no --no-recurse: then the end too)."""
    res = run(["symbolic-ref", "-q", *(["--no-recurse"] if first else []), ref], cwd, check=False)
    if first and res.returncode == 129:
        res = run(["symbolic-ref", "-q", ref], cwd, check=False)
    target = res.stdout.strip()
    return target if res.ok and target else None


def has_commit(cwd: Where, sha: str) -> bool:
    return run(["cat-file", "-e", f"{sha}^{{commit}}"], cwd, check=False).ok


def commits(cwd: Where, rng: str, limit: int = 20) -> list[tuple[str, str]]:
    """(sha, subject) of the commits in `rng`, newest first, at most `limit`."""
    res = run(["log", f"--max-count={limit}", "-z", "--format=%H %s", rng, "--"], cwd)
    return [(sha, subject) for sha, _, subject in (c.partition(" ") for c in res.z())]


def merge_base(cwd: Where, a: str, b: str) -> str | None:
    res = run(["merge-base", a, b], cwd, check=False)
    return res.stdout.strip() or None


def changed_paths(cwd: Where, a: str, b: str) -> list[str]:
    return run(["diff", "--name-only", "--no-renames", "-z", a, b], cwd).z()


# what a land reads of the paths a lane's commits change: far more than any change a
# person or an agent makes, far less than a tree bomb lists
CHANGED_MAX = 1_000_000
CHANGED_BYTES = 256 << 20


def changed_and_added(cwd: Where, a: str, b: str) -> tuple[list[str], set[str]]:
    """changed_paths(a, b), and of those the ones `b` adds (no entry at `a`: a file that
    replaces a directory too), from the same single diff."""
    # a lane's tip can be a tree bomb (millions of paths from a few objects): git's memory,
    # its time and what is read are bounded, and past them the lane is refused
    capped = run_capped(
        ["diff", "--name-status", "--no-renames", "-z", a, b],
        cwd,
        entries=2 * CHANGED_MAX,
        size=CHANGED_BYTES,
    )
    res = capped.result
    if capped.truncated or out_of_memory(res) or res.timed_out:
        raise worktree_too_large(os.fspath(cwd or "."), lane_read_memory(), b)
    if not res.ok:
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    out = res.z()
    changed: list[str] = []
    added: set[str] = set()
    for status, path in zip(out[0::2], out[1::2], strict=False):
        changed.append(path)
        if status == "A":
            added.add(path)
    return changed, added


def ahead_behind(cwd: Where, base: str, tip: str) -> tuple[int, int]:
    """(behind, ahead) of `tip` against `base`."""
    counts = run(["rev-list", "--left-right", "--count", f"{base}...{tip}"], cwd).stdout.split()
    return int(counts[0]), int(counts[1])


# -- shallow -------------------------------------------------------------------------------
def shallow_cut(cwd: Where, shas: Sequence[str]) -> list[str]:
    """Of the commits a `shallow` file lists, those whose real parents are here: the
    history that file hides from git, and that `gc` would delete. A commit a shallow clone
    was cut at has its parents missing, so it is not among them."""
    if not shas:
        return []
    # --shallow-file "": git reads commits as they are, not as the shallow file cuts them
    res = run(
        ["--shallow-file", "", "log", "--no-walk", "--ignore-missing", "--format=%H %P", *shas],
        cwd,
        check=False,
    )
    parents: dict[str, list[str]] = {}
    for ln in res.lines():
        sha, *ps = ln.split()
        parents[sha] = ps
    wanted = sorted({p for ps in parents.values() for p in ps})
    if not wanted:
        return []
    check = run(
        ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
        cwd,
        input="\n".join(wanted) + "\n",
    )
    present = {ln.split()[0] for ln in check.lines() if ln.endswith(" commit")}
    return [sha for sha, ps in parents.items() if any(p in present for p in ps)]


def complete_without_shallow(cwd: Where) -> bool:
    """Is every commit reachable from every ref here, once the shallow file is ignored?
    Then removing that file loses nothing and breaks nothing."""
    return run(["--shallow-file", "", "rev-list", "--quiet", "--all"], cwd, check=False).ok


# -- worktrees ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Worktree:
    path: str
    head: str | None
    branch: str | None  # full ref, e.g. refs/heads/main; None when detached or bare
    bare: bool = False
    locked: bool = False
    prunable: bool = False

    @property
    def exists(self) -> bool:
        """The checkout is there: its directory, with the .git that links it to the
        repository (a directory someone made at a vanished worktree's path is not it)."""
        return os.path.isdir(self.path) and (
            self.bare or os.path.lexists(os.path.join(self.path, ".git"))
        )


def parse_worktrees(z: str) -> list[Worktree]:
    """`git worktree list --porcelain -z`: records separated by an empty field."""
    out: list[Worktree] = []
    cur: dict[str, str] = {}

    def flush() -> None:
        if "worktree" in cur:
            out.append(
                Worktree(
                    path=cur["worktree"],
                    head=cur.get("HEAD"),
                    branch=cur.get("branch"),
                    bare="bare" in cur,
                    locked="locked" in cur,
                    prunable="prunable" in cur,
                )
            )
        cur.clear()

    for field_ in z.split("\0"):
        if not field_:
            flush()
            continue
        name, _, value = field_.partition(" ")
        cur[name] = value
    flush()
    return out


# How deep git-lane looks into a worktree's admin dir (refs/worktree/a/b/..., logs/refs/...,
# rebase-merge/...): git makes nothing near it; a tree deeper than this is one git-lane
# cannot vouch for, and is moved aside by reconcile like a FIFO.
ADMIN_DEPTH = 24


@dataclass(frozen=True)
class AdminBlock:
    """A thing in a worktree's admin dir git must not be let open: `rel` under the admin
    dir `admin`, `kind` "special" (a FIFO, socket or device: git's open(2) blocks),
    "link" (git follows it, anywhere), or "deep" (a directory tree past ADMIN_DEPTH, or a
    directory where git reads a file: ADMIN_FILES)."""

    admin: str
    rel: str
    kind: str

    @property
    def path(self) -> str:
        return os.path.join(self.admin, self.rel)


# The directories of a worktree's admin dir whose files git opens (per-worktree refs and
# their logs, the rebase and sequencer state); other directories there (none of git's)
# git never enters, nor names starting with a dot (git-lane's temporary names).
ADMIN_GIT_DIRS = ("refs", "logs", "rebase-merge", "rebase-apply", "sequencer", "info")
# The names at the top of an admin dir git reads as files: a directory there fails git
# ("Is a directory") for every command that lists the worktrees.
ADMIN_FILES = frozenset(
    {
        "HEAD",
        "index",
        "commondir",
        "gitdir",
        "locked",
        "config.worktree",
        "ORIG_HEAD",
        "FETCH_HEAD",
        "MERGE_HEAD",
        "MERGE_MSG",
        "MERGE_MODE",
        "CHERRY_PICK_HEAD",
        "REVERT_HEAD",
        "AUTO_MERGE",
        "BISECT_LOG",
        "BISECT_START",
        "BISECT_EXPECTED_REV",
        "BISECT_TERMS",
        "BISECT_ANCESTORS_OK",
        "BISECT_NAMES",
        "BISECT_RUN",
        "BISECT_HEAD",
        "SQUASH_MSG",
    }
)


def admin_blocks(common: str | os.PathLike[str]) -> list[AdminBlock]:
    """What every worktree's admin dir holds, where git opens files, that git must not be
    let open: walked through directory fds (dirfd.scan: no link followed, no open that
    blocks): its top (HEAD, index, a split index's sharedindex.*, commondir, gitdir, the
    pseudo-refs...) and ADMIN_GIT_DIRS; never its object store (the lane's own, whose
    reads are bounded). git itself makes no link, FIFO or device there."""
    base = os.path.join(common, "worktrees")
    try:
        ids = sorted(os.listdir(base))
    except OSError:
        return []
    out: list[AdminBlock] = []
    for wid in ids:
        admin = os.path.join(base, wid)
        if os.path.islink(admin) or not os.path.isdir(admin):
            continue
        refused: list[str] = []
        try:
            walk = [d for d in ADMIN_GIT_DIRS if _is_real_dir(os.path.join(admin, d))]
            for rel, depth in [(".", 0), *((d, ADMIN_DEPTH) for d in walk)]:
                try:
                    listed = list(dirfd.scan(admin, rel, depth, refused=refused))
                except PermissionError:
                    refused.append(rel)  # its mode: git opens files in it by name
                    if rel == ".":
                        break
                    continue
                for here, _fd, entries in listed:
                    level = 0 if here == "." else here.count("/") + 1
                    for name, kind in entries:
                        if here == "." and name.startswith("."):
                            continue
                        r = os.path.normpath(os.path.join(here, name))
                        if kind == stat.S_IFLNK:
                            out.append(AdminBlock(admin, r, "link"))
                        elif kind == 0:
                            out.append(AdminBlock(admin, r, "special"))
                        elif kind == stat.S_IFDIR and here != "." and level >= ADMIN_DEPTH:
                            out.append(AdminBlock(admin, r, "deep"))
                        elif kind == stat.S_IFDIR and here == "." and name in ADMIN_FILES:
                            out.append(AdminBlock(admin, r, "deep"))  # moved aside whole
        except OSError:
            continue  # the admin dir went away (a release) or is no directory: git's to say
        # a directory the owner may not list could hide any of the above: named, and
        # moved aside whole (the admin dir itself: its owner's bits given back)
        out.extend(AdminBlock(admin, r, "deep") for r in refused)
    return out


def _is_real_dir(p: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(p).st_mode)
    except OSError:
        return False


def head_takes(admin: str | os.PathLike[str]) -> bool:
    """Would git take `<admin>/HEAD` (a regular file: `ref: refs/...` or the name of a
    commit the store holds)? A detached HEAD of the right form naming no commit passes
    git's look at the admin dir and fails every later call in the lane (`bad object
    HEAD`): asked of the common dir (`<common>/worktrees/<id>` is an admin dir's place),
    never of the lane's pointers."""
    try:
        text = read_admin(os.path.join(admin, "HEAD"), limit=4096).strip()
    except OSError:
        return False
    if text.startswith("ref:"):
        return text[4:].strip().startswith("refs/")
    if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", text) is None:
        return False
    return commit_held(admin, text)


def commit_held(admin: str | os.PathLike[str], sha: str) -> bool:
    """Is `sha` a commit of the shared store or of the own store of the worktree whose
    admin dir is `admin` (a sandboxed lane's commits live there until exec absorbs
    them)? Asked in the common dir (`<common>/worktrees/<id>` is an admin dir's place),
    never through the lane's pointers."""
    common = os.path.dirname(os.path.dirname(os.path.abspath(admin)))
    own = _store_of(os.fspath(admin))
    env = {"GIT_ALTERNATE_OBJECT_DIRECTORIES": alternate_entry(own)} if own else None
    return run(["cat-file", "-e", f"{sha}^{{commit}}"], common, check=False, env=env).ok


def admin_blockers(common: str | os.PathLike[str]) -> list[str]:
    """The paths of admin_blocks."""
    return [b.path for b in admin_blocks(common)]


def worktrees(cwd: Where) -> list[Worktree]:
    """git's worktree list, bounded (lane_read_timeout): it opens every lane's admin files,
    which the lanes may write; a git killed on expiry is a GitError."""
    res = run(["worktree", "list", "--porcelain", "-z"], cwd, timeout=lane_read_timeout())
    return parse_worktrees(res.stdout)


def by_path(wts: list[Worktree]) -> dict[str, Worktree]:
    """Worktrees keyed by their real path."""
    return {os.path.realpath(w.path): w for w in wts}


def worktree_git_dir(path: str | os.PathLike[str]) -> Path | None:
    """The administrative dir of the worktree checked out at `path`: a pinned lane's from
    trusted state, else from its .git file."""
    pinned = _LANES.get(os.path.realpath(path))
    if pinned is not None:
        return Path(pinned[0])
    dotgit = Path(path) / ".git"
    try:
        if dotgit.is_dir():
            return dotgit
        text = read_admin(dotgit)
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    gd = Path(text[len("gitdir: ") :].rstrip("\n"))
    return gd if gd.is_absolute() else (Path(path) / gd).resolve()


def rebase_in_progress(path: str | os.PathLike[str]) -> bool:
    gd = worktree_git_dir(path)
    return gd is not None and ((gd / "rebase-merge").is_dir() or (gd / "rebase-apply").is_dir())


# -- the index and the worktree -----------------------------------------------------------
def parse_status_z(out: str) -> list[str]:
    """The paths of `git status --porcelain=v1 -z` output (both sides of a rename)."""
    paths: list[str] = []
    fields = out.split("\0")
    i = 0
    while i < len(fields):
        f = fields[i]
        i += 1
        if len(f) < 4:
            continue
        paths.append(f[3:])
        if f[0] in "RC":  # a rename carries its source in the next field
            paths.append(fields[i])
            i += 1
    return paths


RISKY_CONFIG = r"^(filter\..*|core\.attributesfile)$"


def risky_config(path: Where) -> list[tuple[str, str]]:
    """(scope, key) of the settings that change what a checkout holds against what is
    committed, when they come from the repository's own config (local or worktree scope),
    which any process working in a lane can write: a clean/smudge filter pair that are not
    inverses lets the gate test one content while main gets another; an attributes file
    can give any path such a filter. Owner-wide ones (global, system: `git lfs install`)
    are the owner's choice and not listed."""
    res = run(["config", "--show-scope", "-z", "--get-regexp", RISKY_CONFIG], path, check=False)
    if res.returncode not in (0, 1):
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    fields = res.z()  # scope, then "key\nvalue", for each setting
    pairs = zip(fields[0::2], fields[1::2], strict=False)
    return [(sc, kv.partition("\n")[0]) for sc, kv in pairs if sc in ("local", "worktree")]


def dirty_paths(path: Where, pathspecs: Sequence[str] | None = None) -> list[str]:
    """Changed, staged, unmerged and untracked (not ignored) paths of a worktree; with
    `pathspecs`, only those (taken literally). In a lane, a submodule is looked at without
    running git inside it (submodule_changes), and at most LANE_READ_ENTRIES of them are
    read (dirty_read says whether there were more): dirty is dirty however many."""
    return _dirty(path, pathspecs)[0]


def dirty_read(path: Where) -> tuple[list[str], bool]:
    """dirty_paths, and whether git had more to list than was read (a lane's status is
    read up to LANE_READ_ENTRIES entries: run_capped)."""
    paths, _, truncated = _dirty(path, None)
    return paths, truncated


def untracked_only(path: str, paths: list[str]) -> list[str]:
    """When `paths` (a worktree's dirty paths) are exactly its untracked, not ignored files:
    them as `ls-files --directory` lists them (a wholly untracked directory once, with a
    trailing /). Otherwise, or when git cannot say: []."""
    if not paths:
        return []
    base = ["-c", "core.fsmonitor=false", "ls-files", "-z", "--others", "--exclude-standard"]
    env = {"GIT_OPTIONAL_LOCKS": "0"}
    files = run(base, path, check=False, env=env)
    if not files.ok or {x for x in files.stdout.split("\0") if x} != set(paths):
        return []
    dirs = run([*base, "--directory"], path, check=False, env=env)
    return [x for x in dirs.stdout.split("\0") if x] if dirs.ok else []


def worktree_blocked(path: str, seconds: float) -> Refusal:
    """worktree_blocked: git ran past `seconds` reading a lane's worktree (git opens every
    .gitignore and .gitattributes it meets: a FIFO there blocks it for ever). The next
    removes what is neither a file, a directory nor a link in the worktree (a FIFO, a
    socket, a device: never work; `find -delete` unlinks each where it found it and
    never follows a link), then looks again."""
    p = q(path)
    return Refusal(
        "worktree_blocked",
        f"git read the lane worktree {shown(path)} for longer than {seconds:g} s: something "
        "in it blocks a read (a FIFO at a .gitignore or .gitattributes, which git opens); "
        "nothing was done",
        next=[
            f"find {p} ! -type f ! -type d ! -type l -print -delete",
            "git lane status",
        ],
        details={"path": path, "seconds": seconds},
    )


def lane_key(path: str | os.PathLike[str]) -> str | None:
    """The key of the pinned lane whose root, or a path inside it, is `path`."""
    key = _LANE_KEYS.get(os.path.realpath(path))
    if key is not None:
        return key
    at = lane_of(path)
    return at[0] if at else None


def worktree_too_large(path: str, memory: int, commit: str = "") -> Refusal:
    """worktree_too_large: git ran out of the memory a lane's read is given (lane_read_memory)
    comparing the lane's HEAD, index and worktree: one of them holds millions of paths (a
    commit of a tree bomb: N subtrees that are all one subtree, D deep, N**D paths from a few
    hundred KB of objects, red team 17 sandbox F1). Nothing was done; what the lane
    committed is kept. The next shows its last commits (subjects cut short: a subject can be
    hundreds of MB), to tell which commit brought them."""
    key = lane_key(path)
    fmt = q("%h %<(72,trunc)%s")
    if commit:  # the paths a lane's tip changes, read from the common dir
        what = (
            f"to list the paths commit {commit[:12]} changes (or more than {CHANGED_MAX:,} of them)"
        )
        show = f"git -C {q(path)} log --no-decorate --format={fmt} -5 {commit} --"
    else:
        what = f"to compare the lane worktree {shown(path)} with its HEAD commit and index"
        show = f"{owner_git(path)} log --no-decorate --format={fmt} -5 HEAD --"
    return Refusal(
        "worktree_too_large",
        f"git needed more than {memory >> 20} MiB of memory, or {lane_read_timeout():g} s, "
        f"{what}: the lane holds more paths than git-lane reads (a commit of a tree of "
        "millions of paths, which costs its maker a few objects); nothing was done, nothing "
        "was lost",
        next=[show, f"git lane status {q(key)}" if key else "git lane status"],
        alternatives=(
            [f"git lane release {q(key)} --confirm yes-discard-lane  # discards the lane"]
            if key
            else []
        ),
        details={"path": path, "memory": memory, **({"lane": key} if key else {})},
    )


def dirty_and_hidden(path: str, tree: str) -> tuple[list[str], Hidden]:
    """dirty_paths and hidden_differences(path, tree) of one worktree, its index listed
    once for both (in a lane; at 100,000 files each `ls-files` is ~200 ms)."""
    dirty, entries, _ = _dirty(path, None)
    return dirty, hidden_differences(path, tree, entries)


def _dirty(
    path: Where, pathspecs: Sequence[str] | None
) -> tuple[list[str], list[IndexEntry] | None, bool]:
    """dirty_paths, in a lane the unseen_entries it read (None elsewhere), and whether git
    had more to say than was read."""
    # GIT_OPTIONAL_LOCKS=0: no opportunistic index refresh, so looking at a lane never holds
    # its index.lock and never makes the agent's own `git add`/`git commit` there fail
    # core.fsmonitor=false: a monitor (any command the repository's config names) could
    # report a changed file unchanged, and G2 would pass a dirty lane
    in_lane = bool(lane_pointers(path))
    args = ["status", "--porcelain=v1", "-z", "--untracked-files=all"]
    if in_lane:
        # a submodule's HEAD against the index is read in-process (its ref files); its
        # own changes would need git run inside it, which is never done: see below
        args = ["status", "--porcelain=v2", "-z", "--untracked-files=all"]
        args.append("--ignore-submodules=dirty")
    if pathspecs is not None:
        args = ["--literal-pathspecs", *args, "--", *pathspecs]
    args = ["-c", "core.fsmonitor=false", *args]
    if not in_lane:
        return (
            parse_status_z(run(args, path, env={"GIT_OPTIONAL_LOCKS": "0"}).stdout),
            None,
            False,
        )
    assert path is not None
    # a FIFO the lane put at a .gitignore or .gitattributes blocks git's open for ever (red
    # team 16E F2: the land held the lock): bounded, then refused; a tree bomb the lane
    # committed (red team 17 sandbox F1) makes git list millions of paths: its memory and
    # what is read of its output are bounded (run_capped), dirty is dirty at the first
    t = lane_read_timeout()
    capped, entries = both(
        lambda: run_capped(args, path, env={"GIT_OPTIONAL_LOCKS": "0"}, timeout=t),
        lambda: unseen_entries(path),
    )
    res = capped.result
    if res.timed_out:
        raise worktree_blocked(os.fspath(path), t)
    if out_of_memory(res):
        raise worktree_too_large(os.fspath(path), lane_read_memory())
    if not res.ok:
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    paths, links = parse_status_v2_z(res.stdout)
    paths = [p for p in paths if p]  # a rename's source cut off at the cap
    gitlinks = [e for e in entries if e.gitlink]
    dirty = submodule_changes(os.fspath(path), paths, links, gitlinks, pathspecs)
    return dirty, entries, capped.truncated


StatView = dict[str, "tuple[int, int, int, int, int, int] | None"]
# a tracked path lstat could not look at (EACCES, ELOOP, ENAMETOOLONG: not merely gone):
# what it is cannot be told, so it never counts as unchanged
UNREADABLE = (-1, -1, -1, -1, -1, -1)


def tracked_paths(path: str) -> list[str]:
    """Every path of the index of the worktree at `path` (gitlinks left out: a submodule
    is never entered), `/`-separated from its root, as git's bytes (surrogate-escaped)."""
    res = run(
        ["-c", "core.fsmonitor=false", "ls-files", "-s", "-z"],
        path,
        env={"GIT_OPTIONAL_LOCKS": "0"},
    )
    # `MODE SHA STAGE\tPATH`: an unmerged path once per stage (the view's dict keeps one)
    return [r.partition("\t")[2] for r in res.stdout.split("\0") if r and r[:7] != "160000 "]


def stat_view(path: str, names: list[str] | None = None) -> StatView:
    """Every tracked path of the worktree at `path` (each path of its index, gitlinks left
    out: a submodule is never entered), with the engine's own lstat of it now (dev, ino,
    mode, size, mtime, ctime; None: gone). Taken before and after an in-lane gate: a file
    swapped and put back while the gate ran (a FIFO that fed the gate other bytes, then the
    tip's bytes renamed back) reads as clean to `git status`, which compares content, but
    it is a new file, or an old one with a new ctime, to this. Only the list of paths comes
    from the index; its stat data, which the lane can rewrite (`git update-index
    --refresh`, `git add`), is never trusted. lstat, never stat: a link is looked at as a
    link, and a directory where a file was is a new mode. A path lstat cannot look at for
    another reason than its absence is UNREADABLE. `names`: the tracked paths, when the
    caller already read them (tracked_paths)."""
    if names is None:
        names = tracked_paths(path)
    out: StatView = {}
    root = os.path.join(path, "")
    lstat = os.lstat
    for p in names:
        try:
            st = lstat(root + p)
        except (FileNotFoundError, NotADirectoryError):
            out[p] = None
            continue
        except OSError:
            out[p] = UNREADABLE
            continue
        out[p] = (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return out


# a throwaway index for content_differs: no monitor, no stat shortcut, no sparse or split
# index (the index file alone, beside nothing else: a shared index would go to the admin dir)
_CONTENT_CONFIG = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.ignoreStat=false",
    "-c",
    "index.sparse=false",
    "-c",
    "core.sparseCheckout=false",
    "-c",
    "core.splitIndex=false",
)


# what makes git's hash of a worktree file other than its bytes' (its checkin conversion):
# unset for the raw compare, from a throwaway git dir's info/attributes, which outranks
# every .gitattributes of the worktree (red team 16D D1: `ident` took `$Id: PASS $` for the
# blob's `$Id$`; text/eol/crlf and working-tree-encoding hide changes the same way)
_RAW_ATTRIBUTES = "* -text -eol -crlf -ident -filter -working-tree-encoding\n"


@dataclass(frozen=True)
class Content:
    """content_differs' answer: `differs`, the tracked files whose content is not the
    tree's; `clean`, why an in-lane gate cannot be vouched for by content at all (the gate
    then runs in a clean worktree of the tip), "" when it can."""

    differs: list[str]
    clean: str = ""


def content_differs(
    path: str, tree: str, tmp_under: str | os.PathLike[str], common: str | os.PathLike[str]
) -> Content:
    """The tracked files of the worktree at `path` whose content is not `tree`'s, compared
    BY CONTENT and RAW: a throwaway git dir (its objects the shared store's, through an
    alternate: the tip is in it by now, land's import) and a throwaway index of `tree`,
    which carries no stat data, so its refresh hashes every file; the git dir's
    info/attributes switches every checkin conversion off (_RAW_ATTRIBUTES), so no
    attribute a lane writes can make other bytes hash as the blob's. The lane's own index,
    whose stat data the lane writes (a MAP_SHARED write into a page already dirty, then
    `update-index --refresh`: red team 16B F1), is never read, nor its git dir's config.
    Files whose raw bytes differ are compared again as git checks them in (the lane's own
    attributes): none differing then means the tip's attributes convert on checkout (CRLF,
    `ident`): `clean` says so, and the gate runs in a clean worktree; some differing: those
    are `differs`. A populated submodule (its files are its own index's to vouch for, which
    the lane writes: red team 16D D2) makes `clean` too. Everything is in a fresh private
    dir under `tmp_under` (git-lane's state dir: no lane writes there), removed after. A
    git that fails to say raises GitError: never "same"."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="content-", dir=tmp_under)
    try:
        gd = os.path.join(tmp, "git")
        for d in ("objects/info", "refs", "info"):
            os.makedirs(os.path.join(gd, d))
        shared = os.path.join(os.path.realpath(common), "objects")
        files = {
            "objects/info/alternates": alternate_entry(shared) + "\n",
            "HEAD": tree + "\n",
            "config": "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tautocrlf = false\n",
            "info/attributes": _RAW_ATTRIBUTES,
        }
        for name, text in files.items():
            with open(os.path.join(gd, name), "w") as f:
                f.write(text)
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index"), "GIT_OPTIONAL_LOCKS": "0"}
        raw = ["--git-dir", gd, "--work-tree", path, *LANE_CONFIG, *_CONTENT_CONFIG]
        raw += ["-c", "core.autocrlf=false", "-c", "core.attributesFile=/dev/null"]
        t = lane_read_timeout()  # a FIFO at a .gitattributes the lane made blocks git's open
        run([*raw, "read-tree", tree], tmp, env=env, timeout=t, memory=lane_read_memory())
        subs = [
            p
            for meta, _, p in (r.partition("\t") for r in run([*raw, "ls-files", "-s", "-z"], tmp, env=env, timeout=t, memory=lane_read_memory()).z())
            if meta.startswith("160000 ") and _holds_anything(os.path.join(path, p))
        ]  # fmt: skip
        names = _refreshed(raw, tmp, env)
        hiders = _hidden_ignores(path, t)
        if hiders:
            return Content(
                names,
                f"the lane has .gitignore files the tip does not track ({shown_some(hiders)}), "
                "which can hide from its status files the gate would read",
            )
        if subs:
            return Content(
                names,
                f"the lane has populated submodules ({shown_some(subs)}): their files are "
                "vouched for by their own index, which the lane writes",
            )
        if not names:
            return Content([])
        # as git checks them in, by the lane's own attributes: fewer (or none) differ when
        # the tip's attributes convert on checkout
        env2 = {"GIT_INDEX_FILE": os.path.join(tmp, "index2"), "GIT_OPTIONAL_LOCKS": "0"}
        run(
            [*_CONTENT_CONFIG, "read-tree", tree],
            path,
            env=env2,
            timeout=t,
            memory=lane_read_memory(),
        )
        conv = _refreshed(list(_CONTENT_CONFIG), path, env2)
        if conv:
            return Content(conv)
        return Content(
            [],
            f"the tip's attributes convert {shown_some(names)} on checkout (text, eol, ident, "
            "a filter, working-tree-encoding): their bytes cannot be compared with the "
            "tip's raw",
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _hidden_ignores(path: str, t: float) -> list[str]:
    """The `.gitignore` files of the lane's worktree that are not tracked and are ignored
    themselves (`*` in one ignores it and all beside it): they hide untracked files from
    G2's status, and an in-lane gate reads those (a `calc/__init__.py` shadowing the tracked
    `calc.py`: red team 16F F1). One that is not ignored is untracked, which G2 refuses."""
    res = run(
        ["-c", "core.fsmonitor=false", "ls-files", "-z", "--others", "--ignored",
         "--exclude-standard", "--", ":(glob)**/.gitignore"],
        path, env={"GIT_OPTIONAL_LOCKS": "0"}, check=False, timeout=t, memory=lane_read_memory(),
    )  # fmt: skip
    if res.timed_out:
        raise worktree_blocked(path, t)
    if not res.ok:
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    return sorted(x for x in res.stdout.split("\0") if x)


def _holds_anything(d: str) -> bool:
    """Is there anything at a gitlink's path but an empty directory? A `.git`, or files with
    none (git takes a gitlink directory with no `.git` for an unpopulated submodule and
    never lists what is in it: red team 16E F1), or no directory at all."""
    try:
        with os.scandir(d) as it:
            return next(it, None) is not None
    except FileNotFoundError:
        return False
    except OSError:
        return True  # a file, a link, a directory it may not list: nothing to vouch for


def _refreshed(base: list[str], cwd: str, env: dict[str, str]) -> list[str]:
    """The entries of a throwaway index (its GIT_INDEX_FILE in `env`) whose worktree
    content differs: `update-index --refresh` without -q exits 1 and says "needs update"
    for each, the index written all the same; the names as -z output gives them. Any
    other answer raises GitError."""
    t = lane_read_timeout()
    ref = run([*base, "update-index", "--ignore-submodules", "--refresh"], cwd, env=env,
              check=False, timeout=t, memory=lane_read_memory())  # fmt: skip
    if ref.timed_out:
        raise GitError(ref.argv, ref.returncode, ref.stdout, ref.stderr)
    if ref.returncode == 0:
        return []
    if ref.returncode != 1:
        raise GitError(ref.argv, ref.returncode, ref.stdout, ref.stderr)
    res = run([*base, "diff-files", "-z", "--name-only", "--ignore-submodules"], cwd, env=env,
              timeout=t, memory=lane_read_memory())  # fmt: skip
    names = sorted({x for x in res.stdout.split("\0") if x})
    if not names:  # it said something differs, and nothing is listed: never "same"
        raise GitError(ref.argv, ref.returncode, ref.stdout, ref.stderr)
    return names


def rewritten(before: StatView, after: StatView) -> list[str]:
    """The paths whose lstat differs between the two views, those tracked in one view and
    not the other, and those either view could not lstat (UNREADABLE)."""
    if before == after and UNREADABLE not in after.values():
        return []
    keys = before.keys() | after.keys()
    return sorted(
        p
        for p in keys
        if p not in before or p not in after or before[p] != after[p] or after[p] == UNREADABLE
    )


def parse_status_v2_z(out: str) -> tuple[list[str], set[str]]:
    """The paths of `git status --porcelain=v2 -z` output (both sides of a rename), and
    which of them are submodules (their `S...` field)."""
    paths: list[str] = []
    links: set[str] = set()
    fields = out.split("\0")
    i = 0
    while i < len(fields):
        f = fields[i]
        i += 1
        if not f or f[0] == "#":
            continue
        kind = f[0]
        if kind in "?!":
            paths.append(f[2:])
            continue
        # 1 XY sub mH mI mW hH hI path | 2 ... Xscore path \0 orig | u XY sub m1 m2 m3 mW h1 h2 h3 path
        nsep = {"1": 8, "2": 9, "u": 10}.get(kind)
        if nsep is None:
            continue
        parts = f.split(" ", nsep)
        p = parts[nsep]
        paths.append(p)
        if parts[2].startswith("S"):
            links.add(p)
        if kind == "2":  # the rename's source is the next field
            paths.append(fields[i])
            i += 1
    return paths, links


# -- a lane's submodules, without running git inside them ------------------------------------
# A populated submodule's git dir (`<admin>/modules/<name>/` in a lane) is writable from a
# sandboxed lane: its config, hooks and info/attributes can name programs. The engine reads
# only data from it: HEAD and refs as files, objects through an alternate, and its index
# (a copy); the one git call that looks at its worktree runs with a fresh git dir of ours.
_SHA = frozenset("0123456789abcdef")
_MAX_DEPTH = 8


def kept_name(name: str) -> str:
    """The name of a new directory of git-lane's kept/ for one refusal's moves: `name`,
    the UTC time and a random part (Repo.kept_dir)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{name}.{stamp}.{secrets.token_hex(4)}"


def _unreadable(work: str, why: str) -> Refusal:
    # set aside, not deleted: repair moves its files into a new kept/ directory through
    # directory fds from the lane's root (a link a process of the lane puts on the way
    # since is refused, never followed: a shell `mv` by this path renamed what the link
    # named) and makes an empty one in its place, so the lane is clean of it (set aside
    # beside it, its files were untracked in the lane: land then refused lane_dirty, and
    # a checkpoint committed them as an embedded repository). Nothing here runs git
    # inside it (that would read the config in question).
    at = lane_of(work)
    if at is not None:
        key, rel = at
        into = q(kept_name(key))
        nxt = [f"git lane repair {q(key)} --into {into} --set-aside-submodule {q(rel)}"]
    else:  # in no lane this run read the record of: no command that acts on it by path
        nxt = ["git lane status"]
    return Refusal(
        "submodule_unreadable",
        f"cannot tell the state of submodule {shown(work)} without running git inside it "
        f"({why}); its git dir can be written from the lane, so git-lane reads only its "
        "HEAD, refs, objects and index and does not treat it as clean",
        next=nxt,
        details={"submodule": work, "why": why, **({"lane": at[0]} if at else {})},
    )


def _small_file(path: str, limit: int = 1 << 16) -> str | None:
    """A regular file's text (not through a symlink, at most `limit` bytes), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", "surrogateescape")
    finally:
        os.close(fd)


def submodule_git_dir(work: str) -> str:
    """The git dir of the populated submodule at `work`: its `.git` directory, or where its
    `.git` file points (read as data: nothing in it is run)."""
    dotgit = os.path.join(work, ".git")
    if os.path.isdir(dotgit) and not os.path.islink(dotgit):
        return dotgit
    text = _small_file(dotgit, 4096)
    if text is None or not text.startswith("gitdir: "):
        raise _unreadable(work, "its .git is neither a directory nor a gitdir file")
    gd = text[len("gitdir: ") :].rstrip("\n")
    gd = os.path.realpath(os.path.join(work, gd))
    if not os.path.isdir(gd):
        raise _unreadable(work, f"its .git names {shown(gd)}, which is no directory")
    return gd


def _resolve_ref(gitdir: str, ref: str) -> str | None:
    common = gitdir
    cd = _small_file(os.path.join(gitdir, "commondir"), 4096)
    if cd is not None:
        common = os.path.realpath(os.path.join(gitdir, cd.strip()))
    for _ in range(5):
        if not ref.startswith("refs/") or ".." in ref.split("/"):
            return None
        text = None
        for d in (gitdir, common):
            text = _small_file(os.path.join(d, ref))
            if text is not None:
                break
        if text is None:
            packed = _small_file(os.path.join(common, "packed-refs"), 1 << 26) or ""
            for line in packed.splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and len(sha) == 40 and set(sha) <= _SHA:
                    return sha
            return None
        text = text.strip()
        if text.startswith("ref: "):
            ref = text[5:]
            continue
        return text if len(text) == 40 and set(text) <= _SHA else None
    return None


def submodule_head(work: str) -> tuple[str, str]:
    """(git dir, the commit checked out) of the populated submodule at `work`, read from
    its HEAD and ref files."""
    gd = submodule_git_dir(work)
    head = (_small_file(os.path.join(gd, "HEAD"), 4096) or "").strip()
    if head.startswith("ref: "):
        sha = _resolve_ref(gd, head[5:])
    else:
        sha = head if len(head) == 40 and set(head) <= _SHA else None
    if sha is None:
        raise _unreadable(work, "its HEAD names no commit git-lane can read from its ref files")
    return gd, sha


def _objects_dir(gitdir: str) -> str:
    cd = _small_file(os.path.join(gitdir, "commondir"), 4096)
    base = os.path.realpath(os.path.join(gitdir, cd.strip())) if cd is not None else gitdir
    return os.path.join(base, "objects")


def submodule_dirty(
    work: str, gitdir: str, head: str, untracked: bool = True, depth: int = 0
) -> list[str]:
    """The submodule's own uncommitted paths (staged, changed, and untracked unless
    `untracked` is false; a nested submodule that is not at its recorded commit or has
    changes of its own), from a `git status` whose git dir is a fresh one of ours: HEAD the
    commit read from its files, its objects through an alternate, a copy of its index. Its
    config, hooks and info/ are never read."""
    import tempfile

    if depth > _MAX_DEPTH:
        raise _unreadable(work, "submodules nested deeper than 8 levels")
    with tempfile.TemporaryDirectory(prefix="git-lane-sub-") as t:
        os.makedirs(os.path.join(t, "objects", "info"))
        os.makedirs(os.path.join(t, "refs"))
        with open(os.path.join(t, "objects", "info", "alternates"), "w") as f:
            f.write(alternate_entry(_objects_dir(gitdir)) + "\n")
        with open(os.path.join(t, "HEAD"), "w") as f:
            f.write(head + "\n")
        with open(os.path.join(t, "config"), "w") as f:
            f.write("[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
        index = os.path.join(gitdir, "index")
        if os.path.lexists(index):
            if _small_file(index, 0) is None:
                raise _unreadable(work, "its index is not a regular file")
            # git reads an entry as racily clean by the index file's mtime: the copy keeps
            # it (taken first: an index rewritten meanwhile only makes more entries racy),
            # or a same-size change written in the index's second would pass for clean
            try:  # holes stay holes: the submodule's index is the lane's to grow
                copy_regular(index, os.path.join(t, "index"), times=True)
            except OSError as exc:
                raise _unreadable(
                    work, f"its index could not be copied ({exc.strerror or exc})"
                ) from None
        base = ["--git-dir", t, "--work-tree", work, *LANE_CONFIG]
        base += ["-c", "core.untrackedCache=false", "-c", "core.splitIndex=false"]
        st = run(
            [
                *base,
                "status",
                "--porcelain=v1",
                "-z",
                f"--untracked-files={'all' if untracked else 'no'}",
                "--ignore-submodules=all",
            ],
            t,
            check=False,
        )
        ls = run([*base, "ls-files", "-s", "-z"], t, check=False)
        if not st.ok or not ls.ok:
            raise _unreadable(work, (st.stderr or ls.stderr).strip()[:300] or "git status failed")
        dirty = parse_status_z(st.stdout)
        for rec in ls.z():
            meta, _, p = rec.partition("\t")
            parts = meta.split(" ")
            if len(parts) != 3 or parts[0] != "160000" or parts[2] != "0" or p in dirty:
                continue
            nested = os.path.join(work, p)
            if not os.path.lexists(os.path.join(nested, ".git")):
                continue
            ngd, nhead = submodule_head(nested)
            if nhead != parts[1] or submodule_dirty(nested, ngd, nhead, untracked, depth + 1):
                dirty.append(p)
    return dirty


# What `git add -A` is not asked to hash (red team 17 sandbox F3): `truncate -s 64G big.bin`
# costs a lane no disk and no time, and git reads and deflates every zero of it (8 GB took
# 2 min 10 s). A file stored in far fewer blocks than its size (more than SPARSE_MIN bytes
# in less than an eighth of them: a hole) or larger than ADD_MAX is refused by name before
# git starts; what passes is added within lane_read_timeout.
SPARSE_MIN = 64 << 20
ADD_MAX = 4 << 30


@dataclass(frozen=True)
class Adding:
    """A file `git add -A` would read: its path from the lane root, size and allocated
    bytes, and whether the index tracks it (modified) or not (untracked)."""

    path: str
    size: int
    allocated: int
    tracked: bool

    @property
    def refused(self) -> bool:
        sparse = self.size > SPARSE_MIN and self.size > 8 * self.allocated
        return sparse or self.size > ADD_MAX

    def why(self) -> str:
        what = f"{self.size >> 20} MiB in {self.allocated >> 20} MiB of disk"
        return f"{shown(self.path)} ({what}{': sparse' if self.size > 8 * self.allocated else ''})"


def _adding(path: str, env: Mapping[str, str], cfg: Sequence[str], excl: list[str]) -> list[Adding]:
    """The regular files of the worktree at `path` that `git add -A` would read (untracked
    and not ignored, or tracked and changed by their stat), each lstat'ed: read up to
    run_capped's bound (past it, the add's own time bound holds)."""
    capped = run_capped(
        [*cfg, "ls-files", "-z", "--others", "--exclude-standard", "--", ":/", *excl],
        path,
        env={**env, "GIT_OPTIONAL_LOCKS": "0"},
    )
    changed = run_capped(
        [*cfg, "diff-files", "-z", "--name-only", "--ignore-submodules", "--", ":/", *excl],
        path,
        env={**env, "GIT_OPTIONAL_LOCKS": "0"},
    )
    out: list[Adding] = []
    root = os.path.join(path, "")
    for res, tracked in ((capped.result, False), (changed.result, True)):
        if res.timed_out:
            raise worktree_blocked(path, lane_read_timeout())
        for p in dict.fromkeys(x for x in res.stdout.split("\0") if x):
            try:
                st = os.lstat(root + p)
            except OSError:
                continue  # gone, or no file: git's add says what it finds
            if stat.S_ISREG(st.st_mode):
                out.append(Adding(p, st.st_size, st.st_blocks * 512, tracked))
    return out


def _ignore_line(p: str) -> str | None:
    """A .gitignore line matching exactly the untracked file `p` (from the root), or None
    when its name cannot be written as one."""
    if any(c in p for c in "\n\r\\") or p.endswith(" "):
        return None
    esc = "".join("\\" + c if c in "*?[" else c for c in p)
    return "/" + esc


def oversized_refusal(path: str, key: str | None, files: list[Adding], retry: str) -> Refusal:
    """worktree_file_oversized: files of the lane `git add -A` would have hashed whole, each
    named (sparse: its size far beyond its allocated blocks; or past ADD_MAX). The next
    moves each out of the add's way and runs `retry` again: an untracked one is ignored
    (`repair --ignore`: the file stays where it is), a tracked one is moved into
    git-lane's kept/ (`repair --keep`: nothing is deleted) and checked out from HEAD."""
    untracked = [f for f in files if not f.tracked]
    tracked = [f for f in files if f.tracked]
    lines = [_ignore_line(f.path) for f in untracked]
    nxt: list[str] = []
    if key is None or any(x is None for x in lines):
        nxt = [owner_status(path)]
    else:
        if untracked:
            ign = " ".join(f"--ignore {q(x or '')}" for x in lines)
            nxt.append(f"git lane repair {q(key)} {ign}")
        if tracked:
            keeps = " ".join(f"--keep {q(f.path)}" for f in tracked)
            nxt.append(f"git lane repair {q(key)} --into {q(kept_name(key))} {keeps}")
            paths = " ".join(q(f.path) for f in tracked)
            nxt.append(f"{owner_git(path)} checkout HEAD -- {paths}")
        nxt.append(retry)
    return Refusal(
        "worktree_file_oversized",
        f"the lane worktree {shown(path)} has file(s) git-lane does not ask git to add: "
        f"{', '.join(f.why() for f in files[:5])}{' ...' if len(files) > 5 else ''} (git "
        f"would read and compress every byte: a sparse file of {ADD_MAX >> 30} GiB costs its "
        "maker nothing and git minutes to hours); nothing was committed",
        next=nxt,
        alternatives=[
            f"{owner_git(path)} add -- {' '.join(q(f.path) for f in files[:20])} && {retry}"
            "  # add them anyway: git reads every byte"
        ],
        details={
            "path": path,
            "files": [
                {"path": f.path, "size": f.size, "allocated": f.allocated, "tracked": f.tracked}
                for f in files[:100]
            ],
            **({"lane": key} if key else {}),
        },
    )


def add_blocked(
    path: str, key: str | None, seconds: float, largest: list[Adding], retry: str
) -> Refusal:
    """worktree_blocked, for a `git add -A` that ran past `seconds`: the files it was
    adding, largest first, are named (one may be too big to hash in that time); a FIFO
    where git opens a file blocks it too, and the next removes those first."""
    r = worktree_blocked(path, seconds)
    lines = [_ignore_line(f.path) for f in largest if not f.tracked]
    named = ", ".join(f.why() for f in largest) or "none"
    alts = []
    if key is not None and lines and all(x is not None for x in lines):
        ign = " ".join(f"--ignore {q(x or '')}" for x in lines)
        alts.append(f"git lane repair {q(key)} {ign} && {retry}")
    return Refusal(
        "worktree_blocked",
        f"git add read the lane worktree {shown(path)} for longer than {seconds:g} s: "
        f"something in it blocks a read (a FIFO at a .gitignore or .gitattributes), or a "
        f"file is too big to hash in that time (the largest it was adding: {named}); nothing "
        "was committed",
        next=[r.next[0], retry],
        alternatives=alts,
        details={**r.details, "largest": [f.path for f in largest]},
    )


def add_all(
    path: str,
    env: Mapping[str, str],
    cfg: Sequence[str] = ("-c", "core.fsmonitor=false"),
    retry: str = "git lane status",
    key: str | None = None,
) -> GitResult:
    """`git add -A -- :/` into the index `env` names, without git descending into a
    submodule (add -A runs `git status` inside each populated one, with its own config):
    the index's gitlinks are left out of the add and each is then set to the commit its
    submodule has checked out, read from its files (submodule_head). Bounded (red team 17
    sandbox F3): a sparse or huge file it would read is refused first
    (worktree_file_oversized), and the add runs within lane_read_timeout
    (worktree_blocked, naming the largest files); `retry` is the caller's command, the
    last step of either refusal's next; `key`, the lane's (the rest of the next acts on it)."""
    out = run([*cfg, "ls-files", "-s", "-z"], path, env=env).stdout
    links: list[tuple[str, str]] = []
    if "160000 " in out:
        for rec in out.split("\0"):
            meta, _, p = rec.partition("\t")
            parts = meta.split(" ")
            if len(parts) == 3 and parts[0] == "160000":
                links.append((p, parts[1]))
    excl = [f":(exclude,literal,top){p}" for p, _ in links]
    adding = _adding(path, env, cfg, excl)
    refused = [f for f in adding if f.refused]
    if refused:
        raise oversized_refusal(path, key, refused, retry)
    t = lane_read_timeout()
    res = run([*cfg, "add", "-A", "--", ":/", *excl], path, env=env, check=False, timeout=t)
    if res.timed_out:
        raise add_blocked(path, key, t, sorted(adding, key=lambda f: -f.size)[:3], retry)
    if not res.ok:
        return res
    for p, sha in links:
        work = os.path.join(path, p)
        if not os.path.lexists(os.path.join(work, ".git")):
            continue
        _, head = submodule_head(work)
        if head != sha:
            run([*cfg, "update-index", "--cacheinfo", f"160000,{head},{p}"], path, env=env)
    return res


def submodule_status_off(path: str) -> list[str]:
    """`-c` settings under which git's own look at the worktree at `path` (the status a
    `rebase --continue` commit computes, `diff HEAD`) reads no submodule's contents, so
    runs no git inside one: diff.ignoreSubmodules=all, and submodule.<name>.ignore=all for
    every name in its .gitmodules (a name's own setting would win over the default)."""
    out = ["-c", "diff.ignoreSubmodules=all"]
    gm = os.path.join(path, ".gitmodules")
    if _small_file(gm, 0) is None:
        return out
    res = run(["config", "--file", gm, "-z", "--name-only", "--list"], path, check=False)
    names = {
        k[len("submodule.") :].rpartition(".")[0] for k in res.z() if k.startswith("submodule.")
    }
    for n in sorted(names):
        out += ["-c", f"submodule.{n}.ignore=all"]
    return out


def _submodule_ignores(path: str) -> dict[str, str]:
    """gitlink path -> its `ignore` setting (the repository's config over .gitmodules), as
    `git status` honours it. Read with `git config`, which runs nothing it reads."""
    names: dict[str, str] = {}
    ignore: dict[str, str] = {}
    gm = os.path.join(path, ".gitmodules")
    if _small_file(gm, 0) is not None:
        res = run(
            ["config", "--file", gm, "-z", "--get-regexp", r"^submodule\..*\.(path|ignore)$"],
            path,
            check=False,
        )
        for kv in res.z():
            k, _, v = kv.partition("\n")
            name, _, leaf = k[len("submodule.") :].rpartition(".")
            if leaf == "path":
                names[name] = v
            else:
                ignore[name] = v
    res = run(["config", "-z", "--get-regexp", r"^submodule\..*\.ignore$"], path, check=False)
    for kv in res.z():
        k, _, v = kv.partition("\n")
        ignore[k[len("submodule.") :].rpartition(".")[0]] = v
    return {names.get(n, n): v for n, v in ignore.items()}


def submodule_changes(
    path: str,
    paths: list[str],
    links: set[str],
    gitlinks: list[IndexEntry],
    pathspecs: Sequence[str] | None,
) -> list[str]:
    """`paths` (git status with --ignore-submodules=dirty in the lane at `path`) made what
    plain `git status` reports: a submodule whose `ignore` is `all` dropped, and a populated
    one with changes of its own added (not for `ignore = dirty`; without its untracked
    files for `untracked`), found by submodule_dirty, never by git run inside it.
    `gitlinks`: the index's submodule entries."""
    if pathspecs is not None:
        gitlinks = [
            e for e in gitlinks if any(e.path == s or e.path.startswith(s + "/") for s in pathspecs)
        ]
    if not gitlinks and not links:
        return paths
    ignores = _submodule_ignores(path)
    out = [p for p in paths if not (p in links and ignores.get(p) == "all")]
    todo = [
        e
        for e in gitlinks
        if e.path not in out
        and ignores.get(e.path, "none") not in ("all", "dirty")
        and os.path.lexists(os.path.join(path, e.path, ".git"))
    ]

    def changed(e: IndexEntry) -> bool:
        work = os.path.join(path, e.path)
        gd, head = submodule_head(work)
        untracked = ignores.get(e.path, "none") != "untracked"
        return head != e.sha or bool(submodule_dirty(work, gd, head, untracked))

    for e, yes in zip(todo, parallel(changed, todo), strict=True):
        if yes:
            out.append(e.path)
    return out


@dataclass(frozen=True)
class Unmerged:
    """One unmerged path: its index stages (1 base, 2 ours, 3 theirs) as (mode, sha)."""

    path: str
    stages: dict[int, tuple[str, str]]


def unmerged(path: Where) -> dict[str, Unmerged]:
    """`git ls-files -u -z`, by path."""
    out: dict[str, Unmerged] = {}
    for entry in run(["ls-files", "-u", "-z"], path).z():
        meta, _, p = entry.partition("\t")
        mode, sha, stage = meta.split()
        out.setdefault(p, Unmerged(p, {})).stages[int(stage)] = (mode, sha)
    return out


# -- what `git status` does not show --------------------------------------------------------
@dataclass(frozen=True)
class IndexEntry:
    """One stage-0 index entry as `git ls-files -s -v` shows it."""

    path: str
    mode: str
    sha: str
    tag: str  # H plain, S skip-worktree; lowercase: assume-unchanged as well

    @property
    def assume_unchanged(self) -> bool:
        return self.tag.islower()

    @property
    def skip_worktree(self) -> bool:
        return self.tag.upper() == "S"

    @property
    def gitlink(self) -> bool:
        return self.mode == "160000"


def unseen_entries(path: Where) -> list[IndexEntry]:
    """Index entries whose worktree side `git status` may not look at: files flagged
    assume-unchanged or skip-worktree (a sparse checkout sets the latter), and gitlinks (a
    submodule's `ignore` setting can hide it). One `ls-files`; when every entry is a plain
    file (the common case) two counts over its output say so and nothing is parsed."""
    out = run(["ls-files", "-s", "-v", "-z"], path).stdout
    framed = "\0" + out
    if framed.count("\0H ") == out.count("\0") and "\0H 160000 " not in framed:
        return []
    entries: list[IndexEntry] = []
    for rec in out.split("\0"):
        meta, _, p = rec.partition("\t")
        parts = meta.split(" ")
        if len(parts) != 4 or parts[3] != "0":
            continue  # the trailing empty field; an unmerged stage is G2's business
        e = IndexEntry(p, parts[1], parts[2], parts[0])
        if e.gitlink or e.assume_unchanged or e.skip_worktree:
            entries.append(e)
    return entries


def tree_entries(cwd: Where, tree: str, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
    """The file and link entries of `tree` at `paths` (taken literally): path -> (mode,
    sha); a path that is a directory there, or absent, is left out. Only those are asked of
    git, a few hundred at a time: `tree` may be a lane's tree bomb (millions of paths from
    a few objects, red team 17 sandbox F1), whose whole listing no caller may hold; git
    walks only the subtrees on the way to them. A batch whose listing runs past its bound
    (a path that is a directory of the tree lists all beneath it) is asked path by path,
    each bounded to its first two entries. A git that cannot answer raises GitError."""
    out: dict[str, tuple[str, str]] = {}
    todo = list(dict.fromkeys(paths))

    def ask(part: list[str], cap: int) -> bool:
        capped = run_capped(
            ["--literal-pathspecs", "ls-tree", "-r", "-z", "--full-tree", tree, "--", *part],
            cwd,
            entries=cap,
        )
        res = capped.result
        if not res.ok:
            raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
        wanted = set(part)
        for rec in res.z():
            meta, _, p = rec.partition("\t")
            mode, _type, sha = meta.split(" ")
            if p in wanted:
                out[p] = (mode, sha)
        return capped.truncated

    for i in range(0, len(todo), 500):
        part = todo[i : i + 500]
        if ask(part, len(part) + 1):
            for p in part:
                if p not in out:
                    ask([p], 2)
    return out


def hash_files(path: str, files: Sequence[str]) -> dict[str, str]:
    """The blob git would store for each worktree file (its clean filters applied), in one
    `hash-object --stdin-paths` (a name with a newline in it is hashed on its own)."""
    plain = [f for f in files if "\n" not in f]
    out: dict[str, str] = {}
    if plain:
        res = run(["hash-object", "--stdin-paths"], path, input="\n".join(plain) + "\n")
        out.update(zip(plain, res.stdout.split(), strict=True))
    for f in files:
        if "\n" in f:
            out[f] = run(["hash-object", "--", f], path).stdout.strip()
    return out


def hash_link(path: str, target: str) -> str:
    """The blob of a symbolic link whose target is `target`."""
    return run(["hash-object", "--no-filters", "--stdin"], path, input=target).stdout.strip()


def config_bool(path: Where, key: str, default: bool) -> bool:
    res = run(["config", "--type=bool", "--get", key], path, check=False)
    return res.stdout.strip() == "true" if res.returncode == 0 else default


@dataclass(frozen=True)
class SubmoduleState:
    """A populated submodule that is not what the superproject's tree records."""

    path: str
    recorded: str | None  # the commit the tree records (None: the tree has no gitlink there)
    head: str | None  # what the submodule has checked out
    dirty: list[str]  # its own uncommitted paths (when it is at the recorded commit)


@dataclass(frozen=True)
class Hidden:
    """Where a worktree differs from a tree without `git status` saying so."""

    assume_unchanged: list[str] = field(default_factory=list)  # content (or type) differs
    skip_worktree: list[str] = field(default_factory=list)  # present, and differs
    missing: list[str] = field(default_factory=list)  # skip-worktree and absent (sparse)
    submodules: list[SubmoduleState] = field(default_factory=list)
    sparse: bool = False  # core.sparseCheckout is on (only looked up when files are missing)

    @property
    def changed(self) -> list[str]:
        return sorted(set(self.assume_unchanged) | set(self.skip_worktree))


def hidden_differences(path: str, tree: str, entries: list[IndexEntry] | None = None) -> Hidden:
    """What the worktree at `path` holds that is not `tree` and that `git status` hides:
    flagged files whose content, type or executable bit differ from the tree's (hashed as
    `git add` would), skip-worktree files that are not there at all, and submodules at
    another commit than the tree records or with changes of their own. An unpopulated
    submodule is as a checkout of the tree leaves it, so it is no difference."""
    if entries is None:  # else unseen_entries(path), read by the caller just now
        entries = unseen_entries(path)
    if not entries:
        return Hidden()
    want = tree_entries(path, tree, [e.path for e in entries])
    assume: list[str] = []
    skip: list[str] = []
    missing: list[str] = []
    to_hash: list[IndexEntry] = []
    exec_checked: list[tuple[IndexEntry, bool]] = []

    def differs(e: IndexEntry) -> None:
        if e.assume_unchanged:
            assume.append(e.path)
        if e.skip_worktree:
            skip.append(e.path)

    for e in entries:
        if e.gitlink:
            continue
        full = os.path.join(path, e.path)
        mode, sha = want.get(e.path, ("", ""))
        if not os.path.lexists(full):
            if e.skip_worktree:
                missing.append(e.path)
            if e.assume_unchanged:
                assume.append(e.path)  # deleted, and the flag hides that
            continue
        if mode == "120000":
            if not os.path.islink(full) or hash_link(path, os.readlink(full)) != sha:
                differs(e)
        elif mode in ("100644", "100755") and os.path.isfile(full) and not os.path.islink(full):
            to_hash.append(e)
            exec_checked.append((e, mode == "100755"))
        else:
            differs(e)  # not in the tree, or a file where a link (or a directory) should be
    if to_hash:
        hashes = hash_files(path, [e.path for e in to_hash])
        for e in to_hash:
            if hashes[e.path] != want[e.path][1]:
                differs(e)
        if config_bool(path, "core.fileMode", True):  # as git add: the owner's x bit
            for e, executable in exec_checked:
                if bool(os.lstat(os.path.join(path, e.path)).st_mode & 0o100) != executable:
                    differs(e)

    def sub_state(e: IndexEntry) -> SubmoduleState | None:
        full = os.path.join(path, e.path)
        if not os.path.lexists(os.path.join(full, ".git")):
            return None  # not populated: what a checkout of the tree gives
        mode, recorded = want.get(e.path, ("", ""))
        rec = recorded if mode == "160000" else None
        gd, head = submodule_head(full)  # its files, never git run inside it
        if head != rec:
            return SubmoduleState(e.path, rec, head, [])
        dirty = submodule_dirty(full, gd, head)
        return SubmoduleState(e.path, rec, head, dirty) if dirty else None

    subs = [s for s in parallel(sub_state, [e for e in entries if e.gitlink]) if s is not None]
    sparse = bool(missing) and config_bool(path, "core.sparseCheckout", False)
    return Hidden(sorted(set(assume)), sorted(set(skip)), sorted(missing), subs, sparse)


def index_matches(cwd: Where, tree: str, paths: Sequence[str]) -> bool:
    """Does the index of the worktree at `cwd` hold exactly `tree`'s entries at `paths`?"""
    args = [
        "--literal-pathspecs",
        "diff-index",
        "--cached",
        "--quiet",
        "--no-renames",
        tree,
        "--",
        *paths,
    ]
    res = run(args, cwd, check=False, env={"GIT_OPTIONAL_LOCKS": "0"})
    if res.returncode not in (0, 1):
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    return res.returncode == 0


@dataclass(frozen=True)
class Touched:
    """A file of `git diff --raw`: its status letter, the mode and blob of its new side."""

    status: str
    mode: str
    blob: str
    path: str


def pickaxe_files(cwd: Where, a: str, b: str, regex: str) -> list[Touched]:
    """The files from `a` to `b` whose added or removed lines match `regex` (`git diff
    -G`), as `--raw -z` names them: no patch text is printed, so none is held (a blob of
    any size). Every file is read as text (--text): a `binary` or `-diff` attribute,
    which an attributes file outside the tree can give any path, must not hide a conflict
    block from land (which then looks at the blob's content itself)."""
    res = run(
        [
            "diff",
            "--raw",
            "-z",
            "--no-abbrev",
            "--text",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--diff-filter=d",
            f"-G{regex}",
            a,
            b,
            "--",
        ],
        cwd,
        check=False,
        timeout=lane_read_timeout(),  # b may be a lane's tree bomb: bounded, then refused
        memory=lane_read_memory(),
    )
    if res.timed_out or out_of_memory(res):
        raise worktree_too_large(os.fspath(cwd or "."), lane_read_memory(), b)
    if not res.ok:
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    fields = res.stdout.split("\0")
    out: list[Touched] = []
    for head, path in zip(fields[0::2], fields[1::2], strict=False):
        if not head.startswith(":"):
            continue
        _old_mode, mode, _old, blob, status = head[1:].split(" ")
        out.append(Touched(status[:1], mode, blob, path))
    return out


class Stream:
    """The stdout of a git child (git.stream), iterated chunk by chunk; `done` once read
    to its end; `result` (returncode, stderr) once the child is waited for."""

    def __init__(self, fd: int, chunk: int) -> None:
        self._fd = fd
        self._chunk = chunk
        self.done = False
        self.result: GitResult | None = None

    def __iter__(self) -> Iterator[bytes]:
        while data := os.read(self._fd, self._chunk):
            yield data
        self.done = True


@dataclass(frozen=True)
class TooBig:
    """A blob blob_upto() did not read: `size` bytes, past its bound."""

    size: int


_BLOB_HEADER = re.compile(rb"blob (\d+)\n")


def blob_upto(cwd: Where, name: str, limit: int) -> bytes | TooBig | None:
    """The blob `name` (`REV:PATH`) names, read only when it is at most `limit` bytes;
    TooBig (its size) when it is larger, not a byte of it read; None when `name` names no
    blob (no such path or revision, a tree, git failed). One `cat-file --batch`, which says
    the type and size before the content: past the bound git is stopped there, so a file
    anyone who lands can make any size (main's `.git-lane.toml`, `.worktreeinclude`) is
    never held whole, nor inflated by git's stream (red team 17 gate F2)."""
    if "\n" in name or "\r" in name:
        return None  # --batch reads one name a line
    argv, env = _argv_env(["cat-file", "--batch=%(objecttype) %(objectsize)"], cwd, None)
    proc = _popen(
        argv,
        cwd,
        base_env(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        try:
            proc.stdin.write(name.encode("utf-8", "surrogateescape") + b"\n")
            proc.stdin.close()  # one name: git answers it and exits
        except OSError:
            return None  # git is gone before it read the name
        # "blob SIZE", or "NAME missing" / "tree SIZE"...: no blob
        head = _BLOB_HEADER.fullmatch(proc.stdout.readline(64))
        if head is None:
            return None
        size = int(head.group(1))
        if size > limit:
            return TooBig(size)
        data = proc.stdout.read(size)
        return data if len(data) == size else None  # git died midway: not the blob
    finally:
        proc.stdout.close()  # what git still writes (the rest of a big one) fails: it ends
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        _reaped(proc)


STDERR_MAX = 1 << 16  # of a streamed git's stderr, what a GitError shows


@contextmanager
def stream(
    args: Sequence[str],
    cwd: Where,
    *,
    env: Mapping[str, str] | None = None,
    chunk: int = 1 << 20,
) -> Iterator[Stream]:
    """Run git (as run() does: same argv hardening, same env) with its stdout read chunk by
    chunk, at most `chunk` bytes held at once, however much git prints (a blob, a patch of
    any size); stderr goes to a temporary file (a pipe could fill and stall git). Read to
    its end, git's exit status is checked as the block ends (GitError when it failed, so
    what was read is trusted only then); left before its end, git is killed and nothing
    is checked (the caller needed no more of it); an exception in the block kills git too."""
    import tempfile

    argv, env = _argv_env(args, cwd, env)
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv,
            cwd=os.fspath(cwd) if cwd is not None else None,
            env=base_env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
        assert proc.stdout is not None
        out = Stream(proc.stdout.fileno(), chunk)
        try:
            yield out
            if not out.done:
                proc.kill()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            proc.stdout.close()
        rc = proc.wait()
        err.seek(0)
        stderr = err.read(STDERR_MAX).decode("utf-8", "surrogateescape")
    out.result = GitResult(("git", *args), rc, "", stderr)
    if out.done and rc != 0:
        raise GitError(out.result.argv, rc, "", stderr)


def pipe(
    args: Sequence[str],
    cwd: Where,
    sink: Callable[[bytes], None],
    *,
    env: Mapping[str, str] | None = None,
    chunk: int = 1 << 20,
) -> GitResult:
    """Run git with its stdout handed to `sink` chunk by chunk, never held whole (an export
    of any size streams: git.stream). A sink that raises (a closed stdout) stops git. The
    result's stdout is empty."""
    with stream(args, cwd, env=env, chunk=chunk) as out:
        for data in out:
            sink(data)
    assert out.result is not None
    return out.result
