"""`write` and `edit`, the file tools of the PATH shims, and the path policy they share with
`git lane check write`.

- decide_write(target, lane): the pure decision (a table over facts): protected_path,
  path_outside_lane (symlinks, `..`, absolute paths, hard links), sync_required.
- target_facts(path, cwd) and lane_facts(...): the facts, gathered from the filesystem
  and git (the decision never asks either).
- write_file / edit_file: the atomic replacement (temp file in the same directory, fsync,
  rename, fsync of the directory), reached by an O_NOFOLLOW walk from the lane's root.
- main_write / main_edit: the shims' Python step (guard.shim dispatches here).

A process is bound when GITLANE_LANE is set (guard.binding): then every check applies,
and a binding that is incomplete or disagrees with the lane's record refuses
[shim_facts_unknown]. Unbound (a person running `write` anywhere), no lane check applies;
the atomic replacement still does. Standard library only: the shims import this.

Races (TOCTOU). The decision is made on realpath(); the write then walks from the lane's
root one directory at a time with O_NOFOLLOW|O_DIRECTORY, so a directory swapped for a
symlink after the check fails the walk instead of leading out of the lane, and the final
name is replaced by rename(2), which replaces a symlink or hard link planted there since
instead of writing through it. Not closed: the lane root's own ancestors being swapped
(that needs write access above the lane), and a concurrent writer of the same file
between edit's read and its rename (the last rename wins, as with any editor).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from guard import binding, dirfd, git, policy
from guard.errors import GitError, Refusal

WRITE_HELP = """\
usage: write [--json] PATH
       write --check [--json] PATH

Write standard input to PATH, atomically: a temporary file in PATH's directory,
fsync, then rename over PATH. An existing file keeps its mode; a new one gets
0666 minus the umask; missing parent directories are created. A symlink at PATH
is written through (the link stays). Content is copied byte for byte.

In a lane-bound process (GITLANE_LANE, set by `git lane exec`) the write is
refused unless PATH resolves inside the lane's worktree [path_outside_lane],
outside any git dir [protected_path], and the lane need not sync first
[sync_required]; unbound, only the atomic write applies.

options:
  --json      print one JSON object (path, bytes, created directories)
  --check     write nothing: exit 0 when the write would be allowed, else
              the refusal (`git lane check write PATH` at the shim's cost)
  -h, --help  show this help

examples:
  printf 'hello\\n' | write notes/hello.txt
  write src/app.py < /tmp/new-app.py
  git show main:README.md | write README.md
  write --check --json src/app.py
"""

EDIT_HELP = """\
usage: edit [--json] PATH --old TEXT --new TEXT [--count N | --all]

Replace the exact text TEXT of --old with --new in PATH (bytes, no patterns, no
newline handling: a multi-line TEXT is one argument). By default --old must occur
exactly once [edit_no_match, edit_ambiguous]; --count N requires exactly N
occurrences and replaces them all; --all replaces every occurrence (at least
one). The file is replaced atomically and keeps its mode.

In a lane-bound process the same path checks as `write` apply.

options:
  --old TEXT   the text to find (not empty; --old=TEXT if it starts with -)
  --new TEXT   its replacement (may be empty)
  --count N    require exactly N occurrences
  --all        replace every occurrence
  --json       print one JSON object (path, replaced)
  -h, --help   show this help

examples:
  edit src/app.py --old 'DEBUG = True' --new 'DEBUG = False'
  edit README.md --old 'colour' --new 'color' --all
  edit setup.cfg --old='-v' --new='-q' --count 2
"""


# -- facts ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """Where a write to `given` would really go, and what is there now."""

    given: str  # as the caller wrote it
    absolute: str  # joined with the cwd, nothing resolved
    real: str  # realpath: every symlink and `..` resolved, a final symlink too
    kind: str  # file | dir | other | missing (what is at `real`)
    nlink: int  # link count of the file at `real` (0 unless a file)
    nearest: str  # the nearest existing directory at or above real's directory
    create: tuple[str, ...]  # directories a write would create, outermost first
    via: str | None  # the first symlink met on the way, if any


@dataclass(frozen=True)
class Lane:
    """What the decision needs to know about the lane a bound process writes for."""

    key: str
    path: str  # realpath of the lane worktree
    git_dirs: tuple[str, ...]  # realpaths: the common dir and the lane's own git dir
    enabled: bool
    policy: str
    must_sync: bool  # stale under a mandatory policy (derived from git)
    main: str


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def target_facts(given: str, cwd: str) -> Target:
    absolute = os.path.join(cwd, given)
    real = os.path.realpath(absolute)
    via = None
    probe = "/"
    for part in absolute.split("/"):
        if part in ("", "."):
            continue
        probe = os.path.join(probe, part)
        if part != ".." and os.path.islink(probe):
            via = probe
            break
    kind, nlink = "missing", 0
    try:
        st = os.stat(real)
        if stat.S_ISREG(st.st_mode):
            kind, nlink = "file", st.st_nlink
        else:
            kind = "dir" if stat.S_ISDIR(st.st_mode) else "other"
    except OSError:
        pass
    nearest = os.path.dirname(real) or "/"
    create: list[str] = []
    while not os.path.isdir(nearest) and nearest != "/":
        create.insert(0, nearest)
        nearest = os.path.dirname(nearest)
    return Target(given, absolute, real, kind, nlink, nearest, tuple(create), via)


def _state_refusal(key: str, what: str, **details: object) -> Refusal:
    nxt = f'eval "$(git lane shellenv {git.q(key)})"' if policy.valid_key(key) else None
    return Refusal(
        "shim_facts_unknown",
        f"this process is bound to lane {key} but {what}, so it refuses rather than guess",
        next=[nxt] if nxt else ["git lane status"],
        alternatives=["git lane doctor"],
        details={"lane": key, "fact": what, **details},
    )


def lane_git_dir(lane_path: str) -> str | None:
    """The realpath of the lane worktree's own git dir (from its `.git` file)."""
    gd = git.worktree_git_dir(lane_path)
    return os.path.realpath(gd) if gd is not None else None


def lane_facts(
    key: str, lane_path: str, common: str, cfg: Mapping[str, object], t: Target | None = None
) -> Lane:
    """The lane's facts, from git now: is it stale under a mandatory policy? `t` is the
    target about to be written (its path counts for overlap_mandatory)."""
    rel = os.path.relpath(t.real, lane_path) if t and inside(t.real, lane_path) else None
    gd = lane_git_dir(lane_path)
    if gd is None:
        raise _state_refusal(key, f"{lane_path}/.git names no git dir", lane_path=lane_path)
    enabled = cfg.get("enabled") is not False
    pol = str(cfg.get("sync_policy") or "on_land_mandatory")
    main_cfg = str(cfg.get("main_branch") or "")
    gdirs = (os.path.realpath(common), gd)
    if not enabled:
        return Lane(key, lane_path, gdirs, False, pol, False, main_cfg)
    try:
        main, must = _must_sync(key, lane_path, common, gd, pol, main_cfg, rel)
    except GitError as e:
        raise _state_refusal(
            key, "git gave no answer about the lane's freshness", error=str(e)
        ) from None
    return Lane(key, lane_path, gdirs, True, pol, must, main)


def _must_sync(
    key: str, lane_path: str, common: str, gd: str, pol: str, main_cfg: str, rel: str | None
) -> tuple[str, bool]:
    """(main's name, must the lane sync before it writes?) — fresh when main's tip is an
    ancestor of the lane branch's tip, or while a sync's rebase onto main's tip is in
    progress (its writes resolve conflicts: they lead to fresh)."""
    if pol == "land_time_only":
        return main_cfg or "main", False  # freshness is the land gate's business alone
    branch = f"refs/heads/lane/{key}"
    cands = [f"refs/heads/{main_cfg}"] if main_cfg else ["refs/heads/main", "refs/heads/master"]
    found = git.refs(common, *cands, branch)
    main = next((c for c in cands if c in found), None)
    if main is None:
        raise _state_refusal(key, f"no main branch ({' or '.join(cands)}) to compare it with")
    if branch not in found:
        raise Refusal(
            "lane_branch_missing",
            f"lane {key}'s branch {branch} does not exist, so whether it is fresh cannot be told",
            next=[f"git lane repair {key}"],
            details={"lane": key},
        )
    name = main.removeprefix("refs/heads/")
    main_sha, tip = found[main], found[branch]
    fresh = main_sha == tip or git.is_ancestor(common, main_sha, tip)
    if not fresh and (
        os.path.isdir(os.path.join(gd, "rebase-merge"))
        or os.path.isdir(os.path.join(gd, "rebase-apply"))
    ):
        fresh = git.is_ancestor(lane_path, main_sha, "HEAD")
    if fresh:
        return name, False
    if pol != "overlap_mandatory":
        return name, policy.sync_required(pol, False)
    mb = git.merge_base(common, main_sha, tip)
    if mb is None:
        return name, True
    dirty, more = git.dirty_read(lane_path)
    if more:  # more dirty paths than a lane read takes (a tree bomb): any may overlap
        return name, True
    lane_paths = set(git.changed_paths(common, mb, tip)) | set(dirty)
    if rel:
        lane_paths.add(rel)
    return name, policy.sync_required(
        pol, False, lane_paths, git.changed_paths(common, mb, main_sha)
    )


# -- the decision -----------------------------------------------------------------------
def decide_write(t: Target, lane: Lane, action: str = "write") -> Refusal | None:
    """May a process bound to `lane` write `t`? None, or the refusal. Pure: no I/O."""
    if not lane.enabled:
        return None
    key = lane.key
    details: dict[str, object] = {
        "lane": key,
        "path": t.given,
        "real": t.real,
        "lane_path": lane.path,
    }
    rel = os.path.relpath(t.real, lane.path) if inside(t.real, lane.path) else None
    for g in lane.git_dirs:
        if inside(t.real, g) or inside(os.path.normpath(t.absolute), g):
            return _protected(t, key, f"is inside the git dir {g}", details)
    if rel is not None and any(p.casefold() == ".git" for p in rel.split("/")):
        return _protected(t, key, "is a .git file or inside a .git directory", details)
    if rel is None:
        how = f" (through the symlink {git.shown(t.via)})" if t.via else ""
        return Refusal(
            "path_outside_lane",
            # shown: a name with a newline must not split the refusal's one line
            f"{action} {git.shown(t.given)} would write {git.shown(t.real)}{how}, outside "
            f"lane {key}'s worktree "
            f"{lane.path}; write inside the lane",
            next=[f"git lane path {key}"],
            details={**details, "via": t.via},
        )
    if t.kind == "file" and t.nlink > 1:
        tmp = t.real + ".gitlane-copy"
        return Refusal(
            "path_outside_lane",
            f"{t.real} has {t.nlink} hard links; the other names may be outside lane {key} and "
            f"git-lane cannot tell, so it does not {action} it: give the lane its own copy "
            f"first, then {action} again",
            next=[
                f"cp -p -- {git.q(t.real)} {git.q(tmp)} && mv -f -- {git.q(tmp)} {git.q(t.real)}"
            ],
            details={**details, "nlink": t.nlink},
        )
    for d in (t.nearest, *t.create):  # implied by real being inside; kept as a backstop
        if not inside(d, lane.path):
            return Refusal(
                "path_outside_lane",
                f"{action} {t.given} would create {d}, outside lane {key}'s worktree {lane.path}",
                next=[f"git lane path {key}"],
                details={**details, "directory": d},
            )
    if lane.must_sync:
        return Refusal(
            "sync_required",
            f"main ({lane.main}) moved and lane {key} must sync before it writes again "
            f"(sync_policy = {lane.policy}); then {action} again",
            next=[f"git lane sync {key}"],
            details={**details, "policy": lane.policy, "main": lane.main},
        )
    return None


def _protected(t: Target, key: str, why: str, details: dict[str, object]) -> Refusal:
    return Refusal(
        "protected_path",
        f"{t.given} ({t.real}) {why}: git's and git-lane's own state is changed with git "
        "and git lane commands, never by writing files",
        next=[f"git lane status {key}"],
        details=details,
    )


# -- the binding of a bound process -----------------------------------------------------
def bound_lane(b: binding.Binding, t: Target | None = None) -> Lane:
    """The lane of a bound process, its binding checked against the lane's record:
    anything missing or inconsistent refuses [shim_facts_unknown]."""
    from pathlib import Path

    from guard import config

    key = b.lane
    if not policy.valid_key(key):
        raise _state_refusal(key, f"{binding.LANE}={key!r} is not a lane key")
    for name, value in ((binding.LANE_PATH, b.lane_path), (binding.COMMON, b.common)):
        if not value or not os.path.isabs(value) or not os.path.isdir(value):
            raise _state_refusal(key, f"{name}={value!r} is not a directory")
        if os.path.realpath(value) != value:
            raise _state_refusal(key, f"{name}={value!r} is not a real path")
    if not os.path.isdir(os.path.join(b.common, "refs")):
        raise _state_refusal(key, f"{binding.COMMON}={b.common!r} is not a git common dir")
    rec = _record(b.state, key)
    if rec is None:
        raise _state_refusal(key, f"it has no readable lane record in {b.state}/lanes")
    status, rec_path = rec
    if status != "active":
        raise Refusal(
            "lane_not_active",
            f"lane {key} is {status}; this process may not write for it",
            next=["git lane status"],
            details={"lane": key, "status": status},
        )
    if os.path.realpath(rec_path) != b.lane_path:
        raise _state_refusal(
            key, f"{binding.LANE_PATH} is {b.lane_path} but the lane's record says {rec_path}"
        )
    gd = lane_git_dir(b.lane_path)
    common_of = _common_of(gd) if gd else None
    if common_of != b.common:
        raise _state_refusal(
            key, f"the lane's .git does not lead to {binding.COMMON}={b.common}", found=common_of
        )
    user = None
    if b.xdg_config_home:
        user = Path(b.xdg_config_home) / "git-lane" / "config.toml"
    elif b.home:
        user = Path(b.home) / ".config" / "git-lane" / "config.toml"
    cfg = config.load(Path(b.state) / "config.toml", user)
    return lane_facts(key, b.lane_path, b.common, cfg.values, t)


def _record(state: str, key: str) -> tuple[str, str] | None:
    """(status, path) from the lane's record (guard.store LaneRecord's JSON), or None when
    it is missing or not of that form. Read here rather than through guard.store, whose
    import costs more than `git lane check write` may spend."""
    import json

    try:
        with open(os.path.join(state, "lanes", f"{key}.json"), "rb") as f:
            d = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(d, dict) or d.get("key") != key:
        return None
    status, path = d.get("status", "active"), d.get("path")
    if not isinstance(status, str) or not isinstance(path, str) or not path:
        return None
    return status, path


def _common_of(gd: str) -> str | None:
    try:
        rel = git.read_admin(os.path.join(gd, "commondir")).rstrip("\n")  # never a FIFO's
    except OSError:
        return None
    return os.path.realpath(os.path.join(gd, rel)) if rel else None


# -- git lane check write ----------------------------------------------------------------
def allowed(t: Target, lane: Lane) -> dict[str, object]:
    """`git lane check write`'s answer (results.CheckWriteResult), or its refusal."""
    if not t.given:
        raise Refusal(
            "not_a_file",
            "check write needs a PATH (got an empty one)",
            next=["git lane check write -h"],
        )
    refusal = decide_write(t, lane)
    if refusal is not None:
        raise refusal
    return {
        "ok": True,
        "code": "allowed",
        "path": t.real,
        "given": t.given,
        "lane": lane.key,
        "lane_path": lane.path,
    }


def exec_bound(env: Mapping[str, str]) -> binding.Binding | None:
    """The binding of a process `git lane exec` started (GITLANE_LANE and
    GITLANE_LANE_PATH set): `check write` then checks it as the shims do. None otherwise
    (GITLANE_LANE alone names a lane as for every `git lane` command)."""
    b = binding.from_env(env)
    return b if b is not None and env.get(binding.LANE_PATH) else None


def check_bound(b: binding.Binding, path: str, cwd: str) -> dict[str, object]:
    """`git lane check write PATH` for an exec-bound process: standard library only, so
    guard.entry answers it without loading the CLI or the engine."""
    t = target_facts(path, cwd)
    return allowed(t, bound_lane(b, t))


# -- the writers ------------------------------------------------------------------------
def _walk(base: str, directory: str, create: bool) -> tuple[int, list[str]]:
    """An fd on `directory` (a realpath at or under `base`), reached from `base` one
    component at a time, never through a symlink (guard/dirfd.py); missing ones made
    when `create`."""
    rel = os.path.relpath(directory, base)
    if rel == ".." or rel.startswith("../"):  # the decision keeps this from happening
        raise Refusal(
            "path_outside_lane",
            f"{directory} is not under {base}; nothing was written",
            next=[f"ls -ld -- {git.q(directory)}"],
            details={"path": directory, "base": base},
        )
    try:
        return dirfd.walk(base, rel, create)
    except FileNotFoundError:
        raise
    except OSError:
        here = base
        for part in [] if rel == "." else rel.split("/"):
            here = os.path.join(here, part)
            if os.path.islink(here):
                raise Refusal(
                    "path_outside_lane",
                    f"{here} became a symlink while writing under it; nothing was written",
                    next=[f"ls -l -- {git.q(here)}"],
                    details={"path": here},
                ) from None
        raise


_replace = dirfd.replace


def _existing(dfd: int, name: str, t: Target, hardlinks: bool) -> os.stat_result | None:
    """What is at `name` now (not following a symlink): None when nothing or a symlink
    (rename replaces the link itself). A directory or a special file is refused; so is a
    hard-linked file when `hardlinks` (bound: checked again here, after the walk)."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_file(t, "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file")
    if hardlinks and st.st_nlink > 1:
        raise Refusal(
            "path_outside_lane",
            f"{t.real} has {st.st_nlink} hard links; nothing was written",
            next=[f"ls -li -- {git.q(t.real)}"],
            details={"path": t.given, "real": t.real, "nlink": st.st_nlink},
        )
    return st


def _not_a_file(t: Target, what: str) -> Refusal:
    parent = os.path.dirname(t.real) or "/"
    return Refusal(
        "not_a_file",
        f"{t.given} ({t.real}) is {what}",
        next=[f"ls -la -- {git.q(parent)}"],
        details={"path": t.given, "real": t.real},
    )


def _os_refusal(t: Target, e: OSError) -> Refusal:
    parent = os.path.dirname(t.real) or "/"
    return Refusal(
        "write_failed",
        f"cannot write {t.given} ({t.real}): {e.strerror or e}; nothing was changed",
        next=[f"ls -la -- {git.q(parent)}"],
        details={"path": t.given, "real": t.real, "errno": e.errno},
    )


def write_file(t: Target, data: bytes | BinaryIO, base: str, checks: bool) -> dict[str, object]:
    """Write `data` (bytes, or a stream copied 1 MiB at a time) at t.real, atomically.
    `base`: where the O_NOFOLLOW walk starts (the lane's root when bound, `/` unbound)."""
    chunks: Iterable[bytes] = (
        [data] if isinstance(data, bytes) else iter(lambda: data.read(1 << 20), b"")
    )
    try:
        dfd, made = _walk(base, os.path.dirname(t.real), create=True)
        try:
            st = _existing(dfd, os.path.basename(t.real), t, checks)
            mode = stat.S_IMODE(st.st_mode) if st is not None else None
            size = _replace(dfd, os.path.basename(t.real), chunks, mode)
        finally:
            os.close(dfd)
    except OSError as e:
        raise _os_refusal(t, e) from None
    return {"path": t.real, "bytes": size, "created": made}


def edit_file(
    t: Target, old: bytes, new: bytes, count: int | None, all_: bool, base: str, checks: bool
) -> dict[str, object]:
    """Replace `old` with `new` in t.real: exactly once by default, exactly `count` times,
    or every time (`all_`, at least once)."""
    name = os.path.basename(t.real)
    try:
        dfd, _ = _walk(base, os.path.dirname(t.real), create=False)
    except FileNotFoundError:
        raise _not_a_file(t, "missing (edit changes an existing file; write makes one)") from None
    except OSError as e:
        raise _os_refusal(t, e) from None
    try:
        try:
            # lstat first: a FIFO or device is never opened; O_NONBLOCK besides, so one
            # swapped in after the lstat does not hang the open either
            if not stat.S_ISREG(os.lstat(name, dir_fd=dfd).st_mode):
                raise _not_a_file(t, "not a regular file")
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
            fd = os.open(name, flags, dir_fd=dfd)
        except FileNotFoundError:
            raise _not_a_file(
                t, "missing (edit changes an existing file; write makes one)"
            ) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _not_a_file(t, "not a regular file")
            if checks and st.st_nlink > 1:
                raise Refusal(
                    "path_outside_lane",
                    f"{t.real} has {st.st_nlink} hard links; nothing was written",
                    next=[f"ls -li -- {git.q(t.real)}"],
                    details={"path": t.given, "real": t.real, "nlink": st.st_nlink},
                )
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            data = b"".join(chunks)
        finally:
            os.close(fd)
        found = data.count(old)
        _check_count(t, old, found, count, all_)
        out = data.replace(old, new) if (all_ or count is not None) else data.replace(old, new, 1)
        _replace(dfd, name, [out], stat.S_IMODE(st.st_mode))
    except OSError as e:
        raise _os_refusal(t, e) from None
    finally:
        os.close(dfd)
    return {"path": t.real, "replaced": found, "bytes": len(out)}


def _look(old: bytes, real: str) -> str:
    """A command that shows where (or whether) the --old text's first line is in the file."""
    first = next((ln.strip() for ln in old.splitlines() if ln.strip()), b"")
    if not first:
        return f"head -n 50 -- {git.q(real)}"
    return f"grep -n -F -e {git.q(os.fsdecode(first))} -- {git.q(real)}"


def _check_count(t: Target, old: bytes, found: int, count: int | None, all_: bool) -> None:
    text = os.fsdecode(old)
    shown = repr(text) if len(text) <= 60 and "\n" not in text else f"({len(old)} bytes)"
    details = {"path": t.given, "real": t.real, "found": found, "old": text}
    if found == 0:
        raise Refusal(
            "edit_no_match",
            f"{t.given} does not contain the --old text {shown}; nothing was changed",
            next=[_look(old, t.real)],
            details=details,
        )
    if count is not None and found != count:
        raise Refusal(
            "edit_ambiguous",
            f"{t.given} contains the --old text {shown} {found} times, not the {count} "
            "--count asks for; nothing was changed",
            next=[_look(old, t.real)],
            details={**details, "count": count},
        )
    if count is None and not all_ and found > 1:
        raise Refusal(
            "edit_ambiguous",
            f"{t.given} contains the --old text {shown} {found} times; give a longer --old "
            "that occurs once, or --all to replace every one; nothing was changed",
            next=[_look(old, t.real)],
            details=details,
        )


# -- the shims' entry points ------------------------------------------------------------
class Usage(Exception):
    """A usage error: exit 2, the message and the usage line on stderr."""


def _parse(
    argv: Sequence[str], takes: Sequence[str], flags: Sequence[str]
) -> tuple[dict[str, str], set[str], list[str]]:
    """Options with a value (`--old TEXT`, `--old=TEXT`: the next word verbatim, even one
    starting with -), flags, and positionals (everything after `--` too)."""
    opts: dict[str, str] = {}
    seen: set[str] = set()
    pos: list[str] = []
    it = iter(argv)
    for a in it:
        if a == "--":
            pos.extend(it)
            break
        name, eq, val = a.partition("=")
        if name in takes:
            if not eq:
                try:
                    val = next(it)
                except StopIteration:
                    raise Usage(f"{name} needs a value") from None
            if name in opts:
                raise Usage(f"{name} given twice")
            opts[name] = val
        elif a in flags:
            seen.add(a)
        elif a.startswith("-") and a != "-":
            raise Usage(f"unknown option {a}")
        else:
            pos.append(a)
    return opts, seen, pos


def _run(tool: str, argv: Sequence[str], fn: Callable[[set[str]], dict[str, object]]) -> int:
    """The shims' boundary: usage errors exit 2, refusals 1 (logged for a bound process),
    bugs 3 with a crash file (guard.boundary). `fn` gets the set its parse fills with the
    flags it saw (`--json` as an option, not as the value of --old)."""
    from pathlib import Path

    from guard import boundary

    seen: set[str] = set()
    b = binding.from_env(os.environ)

    def want_json() -> bool:
        return "--json" in seen

    def go() -> int:
        try:
            res = fn(seen)
        except Usage as u:
            usage = (WRITE_HELP if tool == "write" else EDIT_HELP).split("\n", 1)[0]
            if want_json() or (not seen and "--json" in argv):
                out = {
                    "ok": False,
                    "code": "usage_error",
                    "message": str(u),
                    "next": [f"{tool} -h"],
                    "details": {},
                }
                sys.stdout.write(boundary.dumps(out) + "\n")
            sys.stderr.write(f"{usage}\n{tool}: error: {u} (try '{tool} -h')\n")
            return boundary.EXIT_USAGE
        if want_json() and res:
            sys.stdout.write(boundary.dumps(res) + "\n")
        return boundary.EXIT_OK

    def state_dir() -> Path | None:
        if b is None or not b.common or not os.path.isdir(os.path.join(b.common, "git-lane")):
            return None
        return Path(b.common) / "git-lane"

    return boundary.guarded(go, [tool, *argv], want_json, state_dir)


def _prepare(given: str, tool: str) -> tuple[Target, str, bool]:
    """The target, the walk's base, and whether lane checks apply; refuses what the
    lane may not write."""
    try:
        cwd = os.getcwd()
    except OSError as e:
        raise Usage(f"the current directory is gone ({e.strerror})") from None
    t = target_facts(given, cwd)
    b = binding.from_env(os.environ)
    if b is None:
        return t, "/", False
    lane = bound_lane(b, t)
    r = decide_write(t, lane, tool)
    if r is not None:
        raise r
    return t, (lane.path if lane.enabled else "/"), lane.enabled


def main_write(argv: Sequence[str]) -> int:
    def body(seen: set[str]) -> dict[str, object]:
        _opts, flags, pos = _parse(argv, (), ("--json", "--check", "-h", "--help"))
        seen.update(flags, ["parsed"])
        if flags & {"-h", "--help"}:
            sys.stdout.write(WRITE_HELP)
            return {}
        if len(pos) != 1 or not pos[0]:
            raise Usage("write takes exactly one PATH")
        if "--check" in flags:
            return _check(pos[0], "--json" in flags)
        t, base, checks = _prepare(pos[0], "write")
        res = write_file(t, sys.stdin.buffer, base, checks)
        return {"ok": True, "code": "written", **res}

    return _run("write", argv, body)


def _check(given: str, as_json: bool) -> dict[str, object]:
    """`write --check PATH`: `git lane check write PATH` for a process bound by exec, at
    the shim's cost (no site-packages, no engine); unbound, `write` checks nothing, so
    every path is allowed (lane null). Nothing is written, stdin is not read."""
    try:
        cwd = os.getcwd()
    except OSError as e:
        raise Usage(f"the current directory is gone ({e.strerror})") from None
    b = binding.from_env(os.environ)
    if b is None:
        t = target_facts(given, cwd)
        res: dict[str, object] = {"ok": True, "code": "allowed", "path": t.real}
        res.update(given=given, lane=None, lane_path=None)
    else:
        res = check_bound(b, given, cwd)
    if not as_json:
        who = f"lane {res['lane']}" if res["lane"] else "unbound: no lane checks"
        sys.stdout.write(f"allowed: {res['path']} ({who})\n")
    return res


def main_edit(argv: Sequence[str]) -> int:
    def body(seen: set[str]) -> dict[str, object]:
        opts, flags, pos = _parse(
            argv, ("--old", "--new", "--count"), ("--json", "--all", "-h", "--help")
        )
        seen.update(flags, ["parsed"])
        if flags & {"-h", "--help"}:
            sys.stdout.write(EDIT_HELP)
            return {}
        if len(pos) != 1 or not pos[0]:
            raise Usage("edit takes exactly one PATH")
        if "--old" not in opts or "--new" not in opts:
            raise Usage("edit needs --old TEXT and --new TEXT")
        old, new = os.fsencode(opts["--old"]), os.fsencode(opts["--new"])
        if not old:
            raise Usage("--old may not be empty")
        count = None
        if "--count" in opts:
            if "--all" in flags:
                raise Usage("--count and --all exclude each other")
            digits = opts["--count"]
            if not (digits.isascii() and digits.isdigit()) or int(digits) < 1:
                raise Usage("--count needs a whole number >= 1")
            count = int(digits)
        t, base, checks = _prepare(pos[0], "edit")
        res = edit_file(t, old, new, count, "--all" in flags, base, checks)
        return {"ok": True, "code": "edited", **res}

    return _run("edit", argv, body)
