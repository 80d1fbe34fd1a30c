"""The lane model every command shares: a lane's key, branch and worktree, who may act on
it (roles and owners), the refusals every command raises the same way, and the view of a
lane that status and create report. A lane's record holds identity only; freshness,
dirtiness and ahead/behind are derived from git at every look."""

from __future__ import annotations

import os
from pathlib import Path

from guard import dirfd, git, objects, policy, procs, recovery
from guard.config import cache_home
from guard.errors import Refusal
from guard.gate import CLEAN_PREFIX as GATE_PREFIX
from guard.repo import REPO_MARKER, Foreign, Repo, packed_refs_words, read_repo_marker
from guard.results import LaneView
from guard.store import FileLock, LaneRecord, admin_by_gitdir, read_regular

MARKER_MAX = 4096  # the most read of KEY_FILE: a key and a newline are far less
KEY_FILE = "gitlane-lane"  # in a lane worktree's admin dir: its key (the hooks tell a lane by it)
CONFIRM = "yes-discard-lane"
LOCK_REASON = "git-lane: lane has uncommitted work"
LOCK_PREFIX = "git-lane: "  # every lock reason git-lane writes (release's, gc's) starts so


def own_lock(reason: str | None) -> bool:
    """Is a `git worktree lock` reason one git-lane wrote (release and gc lift their own
    locks once the lane has nothing left to keep; anyone else's stays)?"""
    return reason is not None and reason.startswith(LOCK_PREFIX)


def registry_lock(repo: Repo) -> FileLock:
    return FileLock(repo.store.locks_dir / "registry.flock")


def branch_of(key: str) -> str:
    return f"lane/{key}"


def check_key(key: str, creating: bool = False) -> None:
    """Refuse a key that does not match the key pattern. Its next lists the lanes (the
    key was likely mistyped); only for create itself is a new lane with an automatic key
    another way out: elsewhere it would make a lane that has nothing to do with the one
    that was meant."""
    if not policy.valid_key(key):
        raise Refusal(
            "invalid_lane_key",
            f"{key!r} is not a lane key: use 1-63 characters of a-z, 0-9 and -, "
            "starting and ending with a letter or digit",
            next=["git lane status"],
            alternatives=["git lane create"] if creating else [],
            details={"key": key},
        )
    if creating and key.startswith(GATE_PREFIX):
        # git names a worktree's admin dir after its basename, and git-lane takes every
        # `worktrees/git-lane-gate-*` for a clean gate worktree's (never trusted, swept
        # when a land was killed): a lane of that key was orphaned from birth
        raise Refusal(
            "invalid_lane_key",
            f"{key!r} is not a lane key: keys starting {GATE_PREFIX} are git-lane's own "
            "(its gate worktrees are named so)",
            next=["git lane status"],
            alternatives=["git lane create"],
            details={"key": key},
        )


def get(repo: Repo, key: str) -> LaneRecord:
    check_key(key)
    rec = repo.store.read_lane(key)
    if rec is None and repo.store.lane_file_exists(key):
        raise corrupt_refusal(repo, key)
    if rec is None:
        active = sorted(r.key for r in repo.store.lanes() if r.status == "active")
        listed = f"active lanes: {', '.join(active)}" if active else "there are no active lanes"
        worker = is_worker()
        raise Refusal(
            "unknown_lane",
            f"there is no lane {key}; {listed}"
            + (
                "; this process is a worker: lanes are created by the repository owner"
                if worker
                else ""
            ),
            next=["git lane reconcile", f"git lane status {key}"]
            if (interrupted := _interrupted_create(repo, key))
            else ["git lane status"],
            # a worker's own `create` is refused (role_forbidden): the owner runs it
            alternatives=["git lane status"]
            if interrupted
            else [f"git lane create {key}" + (OWNER_NOTE if worker else "")],
            details={"lane": key, "active": active},
        )
    return rec


def _interrupted_create(repo: Repo, key: str) -> bool:
    """A create killed between `worktree add` and the registry write left a worktree
    with lane/KEY checked out and no record: `create KEY` refuses create_interrupted,
    reconcile adopts it."""
    branch = f"refs/heads/{branch_of(key)}"
    if repo.ref_sha(branch) is None:
        return False
    return any(w.branch == branch and w.exists for w in repo.worktrees())


def corrupt_refusal(repo: Repo, key: str) -> Refusal:
    """The lane's record is there but unreadable: nothing may act on the lane (which
    worktree, which branch?) until reconcile sets the record aside and re-derives it
    from git."""
    return Refusal(
        "state_corrupt",
        f"the record of lane {key} ({repo.store.lane_path(key)}) is unreadable or not a lane record",
        next=["git lane reconcile", f"git lane status {key}"],
        details={"lane": key, "file": str(repo.store.lane_path(key))},
    )


# -- roles ------------------------------------------------------------------------------
_REPO: list[Repo] = []  # the repository this process acts on (attach), for ancestry
_ANCESTRY: dict[str, str | None] = {}  # state dir -> lane found by ancestry (once a process)


def attach(repo: Repo) -> None:
    """The CLI calls this once it knows the repository a command acts on: from then on a
    process whose ancestor is a lane's recorded live owner that is a `git lane exec`
    (exec records itself while CMD runs) is a worker bound to that lane, whatever
    its environment says (unsetting GITLANE_LANE and GITLANE_ROLE grants nothing)."""
    _REPO[:] = [repo]
    ensure_repo_markers(repo)


def owned_by_ancestor(repo: Repo) -> str | None:
    """The lane whose recorded live owner, a `git lane exec` of it, is the nearest
    ancestor of this process, if any. Where the ancestry cannot be read, every active lane with a live recorded owner
    is taken to be this process's (never allow by default): such a lane is returned."""
    cached = _ANCESTRY.get(str(repo.state_dir), "")
    if cached != "":
        return cached
    owners: dict[int, LaneRecord] = {}
    try:
        records = repo.store.lanes()
    except Refusal:
        # no lane records to read (a file where the directory should be): no lane has a
        # recorded owner to descend from; reconcile, the repair, must still run
        records = []
    for rec in records:
        if rec.status == "active" and rec.owner_pid and rec.owner_pid != os.getpid():
            owners[rec.owner_pid] = rec
    found: str | None = None
    if owners:
        try:
            chain = procs.ancestors()
        except (OSError, ValueError, IndexError):
            chain = list(owners)  # cannot tell: any live owner may be ours
        for pid in chain:
            owner = owners.get(pid)
            if (
                owner is not None
                and procs.alive(owner.owner_pid, owner.owner_start)
                and _is_exec(pid, owner.key)
            ):
                found = owner.key
                break
    _ANCESTRY[str(repo.state_dir)] = found
    return found


def _is_exec(pid: int, key: str) -> bool:
    """Is the recorded owner `pid` a `git lane exec KEY` (which binds what it runs to the
    lane), not an owner process named by `create --owner-pid` (whose children act for
    it, land included)? Read from its argv, which its descendants cannot change; an argv
    that cannot be read counts as exec (the safe side)."""
    argv = procs.cmdline(pid)
    if not argv:
        return True
    own = argv[: argv.index("--")] if "--" in argv else argv
    return "exec" in own and key in own[own.index("exec") :]


def bound_lane() -> str | None:
    return policy.bound_lane(os.environ) or (owned_by_ancestor(_REPO[0]) if _REPO else None)


def is_worker() -> bool:
    return policy.is_worker(os.environ) or bound_lane() is not None


OWNER_NOTE = "  # as the repository owner, outside the lane"


def packed_refs_refusal(repo: Repo, found: Foreign) -> Refusal:
    """main_not_plain for a `packed-refs` git cannot read as a file (Repo.packed_refs_blocks),
    raised before any git reads a ref: each would wait on a FIFO for ever. restore-main
    (the owner's) moves it into kept/ first, then puts main back."""
    note = OWNER_NOTE if is_worker() else ""
    path = os.path.join(repo.common_dir, found.path)
    return Refusal(
        "main_not_plain",
        f"{packed_refs_words(found)}, so nothing was run; `git lane restore-main` keeps it "
        "in kept/ and puts main back",
        next=["git lane restore-main" + note],
        alternatives=[f"ls -ld -- {git.q(path)}"],
        details={"ref": found.path, "link": found.text, "path": path},
    )


def forbid_worker(action: str, command: str | None = None) -> None:
    """Refuse a worker (GITLANE_LANE or GITLANE_ROLE=worker) an owner act. `next` is the
    owner's own command (default `git lane ACTION`), exactly as the owner runs it outside
    any lane; the trailing shell comment says who, and leaves it runnable as written.
    Callers pass the plain command: a discard or force flag the worker asked for is the
    owner's own decision, after seeing what the plain command refuses."""
    if is_worker():
        who = f"lane {bound_lane()}" if bound_lane() else "a GITLANE_ROLE=worker process"
        cmd = command or f"git lane {action}"
        raise Refusal(
            "role_forbidden",
            f"{action} is for the repository owner, not for a worker ({who}); "
            f"the owner runs `{cmd}` outside the lane",
            next=[cmd + OWNER_NOTE],
            details={"action": action, "lane": bound_lane(), "owner_command": cmd},
        )


def resolve_key(key: str | None, action: str) -> str | None:
    """A worker may only name its own lane; with no key it gets its own."""
    own = bound_lane()
    if own is None:
        return key
    if key is not None and key != own:
        raise Refusal(
            "role_forbidden",
            f"this process is bound to lane {own} and may not {action} lane {key}",
            next=[f"git lane {action} {own}"],
            details={"lane": key, "bound": own},
        )
    return own


def lane_at(repo: Repo) -> str | None:
    """The lane whose worktree the command runs in (the cwd, or `-C PATH`; any
    subdirectory of it): the registered, unreleased lane whose path is that worktree's
    top level. None in the hub, outside any worktree, or in an unregistered one."""
    if repo.toplevel is None:
        return None
    real = os.path.realpath(repo.toplevel)
    for rec in repo.store.lanes():
        if rec.status != "released" and os.path.realpath(rec.path) == real:
            return rec.key
    return None


def _process_lane(repo: Repo) -> str | None:
    """The lane whose worktree this process really runs in (its own cwd, not `-C`)."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:
        return None
    for rec in repo.store.lanes():
        root = os.path.realpath(rec.path)
        if rec.status != "released" and (here == root or here.startswith(root + os.sep)):
            return rec.key
    return None


def _unbound_worker_may(repo: Repo, key: str, action: str) -> None:
    """A GITLANE_ROLE=worker process without GITLANE_LANE is bound by where it runs: it
    may act only on the lane its cwd is in (naming another, or reaching one with `-C`,
    is refused; outside every lane it acts on none)."""
    own = _process_lane(repo)
    if own == key:
        return
    raise Refusal(
        "role_forbidden",
        "this GITLANE_ROLE=worker process runs in "
        + (f"lane {own}" if own else "no lane's worktree")
        + f" and may not {action} lane {key}",
        next=[f"git lane {action} {own}" if own else "git lane status"],
        details={"lane": key, "own": own},
    )


def current(repo: Repo, key: str | None, action: str, usage: str = "") -> str:
    """The lane a command acts on, for every command that takes [KEY]: the argument, else
    GITLANE_LANE, else the lane worktree the cwd (or `-C PATH`) is in. A worker may name
    only its own lane (resolve_key). With none found: unknown_lane, listing the active
    lanes, with `git lane status` to run and the command for each lane as alternatives.
    `usage` is what follows `git lane ACTION KEY` in those alternatives (e.g. ` --sync`)."""
    key = resolve_key(key, action)
    if key is None:
        key = lane_at(repo)
    if key is not None and is_worker() and bound_lane() is None:
        _unbound_worker_may(repo, key, action)
    if key is not None:
        check_key(key)
        return key
    active = sorted(r.key for r in repo.store.lanes() if r.status == "active")
    where = f"{repo.toplevel or os.getcwd()} is not a lane worktree and GITLANE_LANE is not set"
    role = " (a GITLANE_ROLE=worker process names its own lane)" if is_worker() else ""
    listed = f"active lanes: {', '.join(active)}" if active else "there are no active lanes"
    return _raise_unknown(
        f"{action} needs a lane{role}: {where}; {listed}",
        ["git lane status"] if active or is_worker() else ["git lane status", "git lane create"],
        [f"git lane {action} {k}{usage}" for k in active],
        {"action": action, "active": active},
    )


def _raise_unknown(
    message: str, nxt: list[str], alternatives: list[str], details: dict[str, object]
) -> str:
    raise Refusal("unknown_lane", message, next=nxt, alternatives=alternatives, details=details)


def owner_conflict(repo: Repo, rec: LaneRecord, action: str) -> None:
    """Refuse when the lane's recorded owner is a different, still-live process. Who the
    owner is comes only from what the engine recorded (pid + start time); the caller is
    that owner when the recorded process is itself or one of its ancestors. No
    environment variable says otherwise: any process can set one."""
    if not rec.owner_pid or not procs.alive(rec.owner_pid, rec.owner_start):
        return
    import psutil

    try:
        me = psutil.Process()
        lineage = {me.pid, *(p.pid for p in me.parents())}
    except psutil.Error:
        lineage = {os.getpid()}
    if rec.owner_pid in lineage:
        return
    raise Refusal(
        "lane_owner_conflict",
        f"lane {rec.key} belongs to live process {rec.owner_pid}; only it may {action} the lane",
        next=[
            f"git lane {action} {rec.key}  # from process {rec.owner_pid} or a process it started"
        ],
        alternatives=[f"kill {rec.owner_pid} && git lane {action} {rec.key}"],
        details={"lane": rec.key, "owner_pid": rec.owner_pid},
    )


# -- where lanes live ---------------------------------------------------------------------
def worktrees_root(repo: Repo) -> Path:
    cfg = repo.config
    raw = cfg.get("worktrees_root")
    root = Path(os.path.expanduser(raw)) if raw else cache_home() / "git-lane" / "worktrees"
    if not root.is_absolute():
        root = repo.repo_root() / root
    real = Path(os.path.realpath(root))
    inside = real == repo.repo_root() or repo.repo_root() in real.parents
    if inside and not cfg.get("allow_in_repo_worktrees"):
        raise Refusal(
            "invalid_config",
            f"worktrees_root {real} is inside the repository {repo.repo_root()}; lane checkouts "
            "there would show up in the hub",
            next=[
                "git lane config set worktrees_root ~/.cache/git-lane/worktrees",
                "git lane config set allow_in_repo_worktrees true",
            ],
            details={
                "key": "worktrees_root",
                "file": cfg.files.get("worktrees_root"),
                "value": str(real),
            },
        )
    return real


def read_marker(path: str) -> str | None:
    gd = git.worktree_git_dir(path)
    try:
        # never through a link: the admin dir is the lane's to write when it is sandboxed;
        # never past a key's size (a lane's `truncate -s 3G` of it, no disk used)
        return (
            read_regular(gd / KEY_FILE, follow=False, limit=MARKER_MAX).decode().strip()
            if gd
            else None
        )
    except (OSError, UnicodeDecodeError):
        return None


def write_marker(repo: Repo, path: str, key: str) -> None:
    """Put the lane's key marker in its admin dir, a directory directly under the real
    `<common>/worktrees/` (any other git dir the lane's `.git` may name is left alone),
    reached without a symlink and written by a new file renamed over the marker: a link
    the lane planted there (or at a temp name) is replaced, never written through."""
    gd = git.worktree_git_dir(path)
    base = os.path.realpath(os.path.join(repo.common_dir, "worktrees"))
    real = os.path.realpath(gd) if gd is not None else ""
    if os.path.dirname(real) != base:
        return
    try:
        dirfd.write_file(base, os.path.basename(real) + "/" + KEY_FILE, (key + "\n").encode())
    except OSError:
        pass


# -- a lane's git pointers -------------------------------------------------------------------
# In the directory that holds a repository's lanes (<worktrees_root>/<slug>/, which exec
# --sandbox does not grant): the real common dir, so that a command started inside a lane
# finds its repository without trusting the lane's `.git` file (guard/repo.py).


def new_admin(repo: Repo, path: str) -> str | None:
    """The admin dir name `git worktree add` just gave the lane at `path` (read once, at
    create, before anything ran in the lane)."""
    gd = git.worktree_git_dir(path)
    base = repo.store.common_dir / "worktrees"
    if gd is not None and Path(os.path.realpath(gd)).parent == base:
        return Path(os.path.realpath(gd)).name
    return None


def write_repo_marker(repo: Repo, path: str) -> None:
    """Name the real common dir in the lane's parent dir (atomically; best effort: a
    directory git-lane cannot write keeps no marker, and discovery there is git's)."""
    import json
    import tempfile

    parent = os.path.dirname(os.path.realpath(path))
    want = str(repo.store.common_dir)
    if read_repo_marker(parent) == want:
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=".git-lane-repo.", dir=parent)
        with os.fdopen(fd, "w") as f:
            json.dump({"common_dir": want}, f)
        os.replace(tmp, os.path.join(parent, REPO_MARKER))
    except OSError:
        pass


def ensure_repo_markers(repo: Repo) -> None:
    """Lanes created before the marker existed get it at the next owner command run
    from outside every lane (never from a worker, nor from inside a lane, where the
    repository found may be one the lane pointed at)."""
    try:
        records = [r for r in repo.store.lanes() if r.status == "active"]
    except Refusal:
        return
    missing = [r for r in records if read_repo_marker(os.path.dirname(r.path)) is None]
    if not missing or is_worker():
        return
    here = os.path.realpath(repo.start_dir)
    wts = None
    for rec in missing:
        parent = os.path.dirname(os.path.realpath(rec.path))
        if here != parent and not here.startswith(parent.rstrip(os.sep) + os.sep):
            wts = wts if wts is not None else repo.worktrees()
            if path_taken(repo, rec, wts) is None:  # never beside the hub's own files
                write_repo_marker(repo, rec.path)


def path_taken(repo: Repo, rec: LaneRecord, wts: list[git.Worktree]) -> str | None:
    """Whose the lane's recorded path is when it is not the lane's (a corrupt or planted
    record): the repository's main checkout or the hub, its git dir, another lane's
    worktree, or a worktree git has registered on another branch or admin dir; or a
    directory inside one of them (the hub's submodule checkout, a new directory in the
    hub, a subdirectory of a lane), or one that holds one of them. repair rewrites the
    `.git` pointers at that path, checks the lane out there and writes `.git-lane-repo`
    beside it, so it would take that checkout over or write into it. Measured after
    symlinks and `..` are resolved."""
    real = os.path.realpath(rec.path)
    hub = repo.hub(wts)
    try:
        own_place: str | None = str(worktrees_root(repo) / repo.slug / rec.key)
    except Refusal:
        own_place = None
    # a worktrees_root inside the repository (allow_in_repo_worktrees) puts every lane in
    # the hub: the place create gives this lane is the one directory there that is its
    home = own_place is not None and os.path.realpath(own_place) == real
    mains = [str(repo.repo_root()), *(w.path for w in wts[:1]), *([hub.path] if hub else [])]
    for p in mains:
        if _overlaps(real, p, nested_ok=home):
            return "the repository's main checkout" + _how(real, p)
    common = str(repo.store.common_dir)
    if _overlaps(real, common):
        return "the repository's git dir" + _how(real, common)
    for k in repo.store.lane_keys():
        other = repo.store.read_lane(k) if k != rec.key else None
        if other is not None and other.status != "released" and _overlaps(real, other.path):
            return f"lane {k}'s worktree" + _how(real, other.path)
    wt = git.by_path(wts).get(real)
    if (
        wt is not None
        and wt.branch is not None
        and wt.branch != f"refs/heads/{rec.branch}"
        and not _own_checkout(repo, rec, real)
    ):
        return f"the worktree git has on {wt.branch}"
    main_reals = {os.path.realpath(p) for p in mains}
    for w in wts:
        them = os.path.realpath(w.path)
        if them != real and _overlaps(real, them, nested_ok=home and them in main_reals):
            return f"the worktree git has at {w.path}" + _how(real, w.path)
    theirs = admin_by_gitdir(repo.common_dir / "worktrees", os.path.join(real, ".git"))
    own = repo.store.admin_dir(rec)
    if theirs is not None and (own is None or os.path.realpath(own) != os.path.realpath(theirs)):
        return f"the worktree of git's admin dir {git.shown(theirs)}"
    return None


def _own_checkout(repo: Repo, rec: LaneRecord, real: str) -> bool:
    """Is the worktree git has at `real` the lane's own, on another branch (its HEAD
    switched, by the lane or by hand)? Its admin dir is the one the record names, whose
    `gitdir` names `real/.git`: repair writes its HEAD back, never moves it aside."""
    own = repo.store.admin_dir(rec)
    if own is None or not rec.admin or not own.is_dir() or own.is_symlink():
        return False
    try:
        named = git.read_admin(own / "gitdir").strip()
    except OSError:
        return False
    return bool(named) and os.path.realpath(named) == os.path.join(real, ".git")


def _overlaps(real: str, other: str, nested_ok: bool = False) -> bool:
    """Is `real` (resolved) the directory `other`, inside it, or holding it? With
    `nested_ok`, only the first and the last count."""
    them = os.path.realpath(other)
    if real == them or _within(them, real):
        return True
    return not nested_ok and _within(real, them)


def _within(inner: str, outer: str) -> bool:
    return inner != outer and inner.startswith(outer.rstrip(os.sep) + os.sep)


def _how(real: str, other: str) -> str:
    them = os.path.realpath(other)
    if real == them:
        return ""
    return f" ({'a directory inside it' if _within(real, them) else 'a directory that holds it'})"


def pointers_refusal(repo: Repo, key: str, faults: list[str]) -> Refusal:
    root = repo.repo_root()
    return Refusal(
        "lane_pointers_tampered",
        f"lane {key}'s git pointers were changed outside git ({'; '.join(faults)}): git "
        "run there would use another repository; nothing was done",
        next=[f"git -C {git.q(root)} lane repair {key}"],
        alternatives=[f"git -C {git.q(root)} lane status {key}"],
        details={"lane": key, "faults": faults, "repository": str(root)},
    )


def check_pointers(repo: Repo, rec: LaneRecord) -> None:
    """lane_pointers_tampered unless the lane's `.git`, `commondir` and `gitdir` name
    its own admin dir, the real common dir and the lane (recovery.pointer_faults)."""
    if rec.status != "active" or not os.path.lexists(os.path.join(rec.path, ".git")):
        return  # a lane gone by hand: the commands' own worktree checks tell it
    faults = recovery.pointer_faults(repo, rec)
    if faults:
        raise pointers_refusal(repo, rec.key, faults)


def check_path_owner(repo: Repo, rec: LaneRecord) -> None:
    """lane_pointers_tampered when another lane's record names the same worktree: the
    pointers there are that lane's (a record whose path and admin dir both name lane
    beta's passes check_pointers), and release would remove beta's worktree as alpha's.
    Its next, repair, points the record back at the lane's own checkout."""
    real = os.path.realpath(rec.path)
    for other in repo.store.lanes():
        if (
            other.key != rec.key
            and other.status != "released"
            and os.path.realpath(other.path) == real
        ):
            raise pointers_refusal(
                repo, rec.key, [f"its recorded path {rec.path} is lane {other.key}'s worktree"]
            )


# -- refusals every command raises the same way -------------------------------------------
def dirty_refusal(key: str, path: str, dirty: list[str], action: str) -> Refusal:
    """lane_dirty (G2), the same for every command that needs a clean lane."""
    return Refusal(
        "lane_dirty",
        f"lane {key} has {len(dirty)} uncommitted path(s): {', '.join(map(git.shown, dirty[:5]))}",
        next=[  # checkpoint: add -A and commit, the lane's pointers checked when it runs
            f"git lane checkpoint {key} -m " + git.q(f"Work in lane {key} before {action}"),
            f"git lane {action} {key}",
        ],
        details={"lane": key, "dirty_paths": dirty[:100]},
    )


def not_active_refusal(repo: Repo, rec: LaneRecord, why: str) -> Refusal:
    """lane_not_active. A lane whose worktree vanished but whose branch is there gets its
    worktree back (prune the stale entry, check the branch out again at the recorded
    path, reconcile marks it active); a released lane or a lost branch has nothing to
    act on: status, and a new lane of that key as the other way."""
    key = rec.key
    branch_there = repo.ref_sha(f"refs/heads/{rec.branch}") is not None
    if rec.status != "released" and branch_there and not os.path.lexists(rec.path):
        return Refusal(
            "lane_not_active",
            f"lane {key} {why}; its branch {rec.branch} is there, so the worktree can be "
            "checked out again",
            next=[
                "git worktree prune",
                f"git worktree add {git.q(rec.path)} {rec.branch}",
                "git lane reconcile",
            ],
            alternatives=[f"git lane release {key} --confirm {CONFIRM}"],
            details={"lane": key, "state": rec.status, "path": rec.path},
        )
    return Refusal(
        "lane_not_active",
        f"lane {key} {why}",
        next=["git lane reconcile", "git lane status"]
        if rec.status != "released"
        else ["git lane status"],
        alternatives=[f"git lane create {key}"] if rec.status == "released" else [],
        details={"lane": key, "state": rec.status},
    )


def missing_worktree_refusal(key: str, path: str, action: str) -> Refusal:
    """The lane's worktree directory is gone (deleted or moved by hand): its branch still
    holds the commits, and `git lane repair` checks it out there again."""
    return Refusal(
        "lane_not_active",
        f"lane {key} has no worktree (missing: {path}); its branch {branch_of(key)} is kept",
        next=[f"git lane repair {key}", f"git lane {action} {key}"],
        alternatives=[f"git lane release {key} --confirm {CONFIRM}"],
        details={"lane": key, "path": path, "state": "orphaned"},
    )


def rebase_refusal(key: str, what: str, details: dict[str, object] | None = None) -> Refusal:
    return Refusal(
        "rebase_in_progress",
        f"lane {key} is {what}",
        next=[f"git lane continue {key}"],
        alternatives=[f"git lane abort {key}"],
        details={"lane": key, **(details or {})},
    )


def branch_mismatch_refusal(
    repo: Repo, key: str, path: str, branch: str, head: str | None
) -> Refusal:
    """The lane worktree has another branch (or a detached HEAD) checked out: switch back
    to the lane branch, or, when that branch is gone, make it again at what is checked out
    (a `git switch` to a deleted branch would fail). Commits made on a detached HEAD are
    never left on no branch (see _detached_commits). A lane branch made a symbolic ref
    reads as the branch it names checked out: that is the branch's fault, not the
    worktree's (a switch would check the named branch's files out), so `git lane repair`."""
    tip = repo.ref_sha(f"refs/heads/{branch}")
    facts = recovery.branch_facts(repo, path, branch, tip)
    if facts.symbolic is not None:
        return recovery.branch_refusal(key, facts, "status")
    there = tip is not None
    g = git.owner_git(path)  # the lane's repository named, never its pointers followed
    # --quiet: a switch that changes files reports the local changes, a status that runs
    # git inside every populated submodule (its config, the lane's to write): git.owner_status
    switch = f"{g} switch --quiet {branch}" if there else f"{g} switch --quiet -c {branch}"
    details: dict[str, object] = {"lane": key, "head": head, "branch_exists": there}
    first: list[str] = []
    extra = ""
    if head is None and tip is not None:
        first, extra = _detached_commits(repo, key, path, branch, tip, details)
    return Refusal(
        "lane_branch_mismatch",
        f"the worktree of lane {key} has {head or 'a detached HEAD'} checked out, not {branch}"
        + ("" if there else f" (and {branch} no longer exists)")
        + extra,
        next=[*first, switch],
        details=details,
    )


def _detached_commits(
    repo: Repo, key: str, path: str, branch: str, tip: str, details: dict[str, object]
) -> tuple[list[str], str]:
    """What must run before the switch back to `branch` so that the commits of the
    detached HEAD the branch lacks stay on a branch: when they build on its tip, the
    branch moves onto them (a compare-and-swap from the tip seen here; the switch then
    changes no file); otherwise they are kept on a branch of their own, and named. No
    such commit (HEAD on the branch's history): nothing. Fills `details`."""
    res = git.run(["rev-parse", "--verify", "-q", "HEAD^{commit}"], path, check=False)
    sha = res.stdout.strip() if res.ok else ""
    if not sha or sha == tip or git.is_ancestor(repo.common_dir, sha, tip):
        return [], ""
    made = git.commits(repo.common_dir, f"{tip}..{sha}")
    shown = ", ".join(f"{c[:12]} {subject[:60]}" for c, subject in made[:5])
    details.update(detached=sha, commits=[c for c, _ in made])
    g = git.owner_git(path)
    if git.is_ancestor(repo.common_dir, tip, sha):
        why = git.q(f"git-lane: {branch} onto the commits of its detached HEAD")
        return [f"{g} update-ref -m {why} refs/heads/{branch} {sha} {tip}"], (
            f"; its detached HEAD has commit(s) on top of {branch} ({shown}): the next moves "
            f"{branch} onto them before the switch"
        )
    keep = f"lane-{key}-detached-{sha[:12]}"
    details["kept_as"] = keep
    return [f"{g} branch {keep} {sha}"], (
        f"; its detached HEAD has commit(s) that are not on {branch} ({shown}) and do not "
        f"build on its tip: the next keeps them on branch {keep} before the switch (bring "
        f"them into the lane with `{g} cherry-pick`)"
    )


# -- the view of a lane -------------------------------------------------------------------
def _ahead_behind(repo: Repo, main_sha: str, tip: str) -> tuple[int, int]:
    """(behind, ahead) of a lane's tip. A sandboxed lane's (its store named: objects.use)
    is read from the shared store alone (git.shared_store_only) when that holds the tip,
    as it does once exec absorbed it: a commit-graph or a pack the lane wrote into its own
    store cannot make it look fresh. Its newest commits in its own store only (not
    absorbed yet, or refused): read there too, for this report; land decides from the
    shared store, after its verified import."""
    if git.named_lane_stores():
        with git.shared_store_only():
            res = git.run(
                ["rev-list", "--left-right", "--count", f"{main_sha}...{tip}"],
                repo.common_dir,
                check=False,
            )
        counts = res.stdout.split()
        if res.ok and len(counts) == 2:
            return int(counts[0]), int(counts[1])
    return git.ahead_behind(repo.common_dir, main_sha, tip)


def overlap(repo: Repo, main_sha: str, tip: str) -> tuple[list[str], list[str]]:
    """Paths the lane and main each changed since their merge-base."""
    mb = git.merge_base(repo.common_dir, main_sha, tip)
    if not mb:
        return [], []
    return git.changed_paths(repo.common_dir, mb, tip), git.changed_paths(
        repo.common_dir, mb, main_sha
    )


def sync_required(repo: Repo, main_sha: str, tip: str | None, fresh: bool) -> bool:
    pol = repo.config["sync_policy"]
    if fresh or tip is None or pol == "land_time_only":
        return False
    if pol == "overlap_mandatory":
        lp, mp = overlap(repo, main_sha, tip)
        return policy.sync_required(pol, fresh, lp, mp)
    return policy.sync_required(pol, fresh)


@git.in_own_context
def view(
    repo: Repo,
    rec: LaneRecord,
    main_sha: str,
    wts: dict[str, git.Worktree],
    tips: dict[str, str] | None = None,
) -> LaneView:
    """Everything status reports about one lane, derived from git now. `tips` (from
    `git.refs`) saves a git call per lane when many lanes are looked at together."""
    branch_ref = f"refs/heads/{rec.branch}"
    wt = wts.get(os.path.realpath(rec.path))
    exists = wt is not None and wt.exists
    state = rec.status
    if state == "active" and not exists:
        state = "orphaned"
    recorded: str | None = None
    v: LaneView = {
        "key": rec.key,
        "branch": rec.branch,
        "path": rec.path,
        "state": state,
        "goal": rec.goal,
        "fresh": False,
        "sync_required": False,
        "dirty": False,
        "dirty_paths": [],
        "ahead": 0,
        "behind": 0,
        "rebase_in_progress": False,
        "owner_pid": rec.owner_pid,
        "owner_alive": procs.alive(rec.owner_pid, rec.owner_start) if rec.owner_pid else False,
        "exec_seen": rec.exec_seen,
        "tip": None,
        "head": None,
        "advice": "",
        "port": policy.lane_port(rec.key),
        "setup": setup_state(rec),
        "branch_state": "ok",
    }
    if state != "released":
        objects.use(repo, rec.path)  # its commits may be in its own store only
        tip = tips.get(branch_ref) if tips is not None else repo.ref_sha(branch_ref)
        v["tip"] = tip
        if tip == main_sha:
            v["fresh"] = True  # 0 ahead, 0 behind: no need to ask git
        elif tip is not None:
            v["behind"], v["ahead"] = _ahead_behind(repo, main_sha, tip)
            v["fresh"] = v["behind"] == 0
        if exists and wt is not None:
            dp = git.dirty_paths(rec.path)
            v["dirty_paths"] = dp[:50]
            v["dirty"] = bool(dp)
            v["rebase_in_progress"] = git.rebase_in_progress(rec.path)
            v["head"] = wt.branch
        v["sync_required"] = sync_required(repo, main_sha, tip, v["fresh"])
        facts = recovery.branch_facts(repo, rec.path, rec.branch, tip)
        v["branch_state"] = facts.state
        recorded = facts.recorded
    v["advice"] = policy.advice(
        policy.LaneFacts(
            key=v["key"],
            path=v["path"],
            state=v["state"],
            exists=exists,
            dirty=v["dirty"],
            rebase=v["rebase_in_progress"],
            fresh=v["fresh"],
            sync_required=v["sync_required"],
            ahead=v["ahead"],
            behind=v["behind"],
            head=v["head"],
            branch=v["branch"],
            branch_state=v["branch_state"] if state != "released" else "ok",
            recorded=recorded,
        )
    )
    if v["setup"] in ("failed", "timeout") and state == "active":
        v["advice"] += f" Setup {v['setup']}: `git lane setup {rec.key}`."
    return v


def setup_state(rec: LaneRecord) -> str | None:
    """The setup's outcome as recorded; a setup recorded as running whose process is gone
    (killed with its create) failed."""
    if rec.setup == "running" and not procs.alive(rec.setup_pid, rec.setup_start):
        return "failed"
    return rec.setup
