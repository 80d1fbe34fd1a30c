"""A sandboxed lane's private object store, and its verified import into the shared one.

Under `git lane exec --sandbox` the shared store `<common>/objects/` is not writable: Landlock
cannot tell a new file from an existing one, so a grant to add objects is a grant to rewrite
main's history in place (git does not re-hash what it reads). CMD's git writes instead into
`<common>/worktrees/<id>/objects` (GIT_OBJECT_DIRECTORY), inside the lane's admin dir, and
reads the shared store as an alternate. The lane's store is never an alternate of the
shared store: git does not write an object it already finds in an alternate, so a loose
object planted there under the name of content someone writes later (the owner's next
commit in the hub, another lane's) would stand in for it. Four steps, all outside the sandbox:

- `enroll`: exec makes the lane's store, and drops from `<common>/objects/info/alternates`
  every lane store an older git-lane listed there (so do `forget`, reconcile, install and
  doctor's check);
- `absorb`: exec copies what the lane's branch holds beyond main into the shared store,
  verified, each time the branch moves while CMD runs (polled) and when CMD ends; until
  then the owner's plain git in the hub does not see the lane's newest commits, and an
  engine git call that reads them names the lane's store for that call only
  (guard/git.py `lane_objects`, and every call whose cwd is in the lane);
- `import_lane` (absorb's and land's step): copies what the tip needs and main lacks
  through `index-pack --strict`, which recomputes every object's name from its bytes, then
  checks the tip is complete in the shared store alone (a view of it without alternates)
  before main moves: an object forged in a lane's store is never copied and cannot become
  main's (objects_corrupt);
- `forget`: drops lane-store entries from the shared alternates (release, reconcile).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from guard import dirfd, git
from guard.errors import Refusal
from guard.store import FileLock, atomic_write

if TYPE_CHECKING:
    from guard.repo import Repo
    from guard.store import LaneRecord

_NO_REPLACE = {"GIT_NO_REPLACE_OBJECTS": "1"}


def shared(common: str | os.PathLike[str]) -> str:
    return os.path.join(os.path.realpath(common), "objects")


def admin_dirs(common: str | os.PathLike[str], lane_path: str) -> list[str]:
    """Every `<common>/worktrees/<id>` whose `gitdir` (git's side, never the lane's own,
    writable `.git` file) names the lane's `.git`, in sorted order."""
    base = os.path.join(os.path.realpath(common), "worktrees")
    want = os.path.join(os.path.realpath(lane_path), ".git")
    try:
        ids = sorted(os.listdir(base))
    except OSError:
        return []
    out: list[str] = []
    for wid in ids:
        try:
            named = git.read_admin(os.path.join(base, wid, "gitdir")).rstrip("\n")
        except OSError:
            continue
        if os.path.realpath(named) == want:
            out.append(os.path.join(base, wid))
    return out


def admin_dir(common: str | os.PathLike[str], lane_path: str) -> str | None:
    """The lane's admin dir `<common>/worktrees/<id>`: the one whose `gitdir` names the
    lane's `.git`. None when none does, or more than one: another lane's `gitdir` (its
    admin dir is granted to its sandboxed CMD) may name this lane, and neither is taken
    for the lane's (own_admin() refuses it, naming the lane to repair)."""
    found = admin_dirs(common, lane_path)
    return found[0] if len(found) == 1 else None


def own_admin(repo: Repo, rec: LaneRecord) -> str:
    """The lane's admin dir, one source of truth for its sandbox's grants, the hard-link
    split (guard/linked.py), its private store and the absorb: the record's
    (repo.store.admin_dir), when it is the one and only `worktrees/*/gitdir` that names
    the lane's `.git`. Refused lane_pointers_tampered otherwise: `next` repairs the lane
    whose `gitdir` was changed to name this one (red team 16B F6), or this lane's own."""
    common = os.path.realpath(repo.common_dir)
    mine = repo.store.admin_dir(rec)
    own = os.path.realpath(mine) if mine is not None else None
    found = [os.path.realpath(d) for d in admin_dirs(common, rec.path)]
    if own is not None and found == [own]:
        return own
    owners: dict[str, str] = {}
    for other in repo.store.lanes():
        theirs = repo.store.admin_dir(other) if other.status != "released" else None
        if theirs is not None and other.key != rec.key:
            owners[os.path.realpath(theirs)] = other.key
    fix = [f"git lane repair {owners[d]}" for d in found if d != own and d in owners]
    strangers = [d for d in found if d != own and d not in owners]
    if own is None or own not in found:
        fix.append(f"git lane repair {rec.key}")
    faults = [f"{git.shown(os.path.join(d, 'gitdir'))} names it too" for d in found if d != own]
    if own is None or own not in found:
        faults.append("its own admin dir's gitdir does not name it")
    return_msg = (
        f"lane {rec.key}'s admin dir cannot be told for certain ({'; '.join(faults)}): "
        "the sandbox's grants, the hard-link split and the lane's object store must be "
        "one admin dir's; nothing was done"
        + (
            f" ({', '.join(git.shown(d) for d in strangers)} is no lane's: move it out of "
            "worktrees/ or point its gitdir back at its own worktree)"
            if strangers
            else ""
        )
    )
    raise Refusal(
        "lane_pointers_tampered",
        return_msg,
        next=fix or ["git lane doctor"],
        details={"lane": rec.key, "admin": own, "named_by": found},
    )


def lane_store(common: str | os.PathLike[str], lane_path: str) -> str | None:
    """The lane's private store, when the lane has one (it was ever sandboxed)."""
    admin = admin_dir(common, lane_path)
    if admin is None:
        return None
    store = os.path.join(admin, "objects")
    return store if os.path.isdir(store) and not os.path.islink(store) else None


def _alternates(common: str | os.PathLike[str]) -> Path:
    return Path(shared(common)) / "info" / "alternates"


def entries(common: str | os.PathLike[str]) -> list[str]:
    try:
        text = _alternates(common).read_text(encoding="utf-8")
    except OSError:
        return []
    return [ln for ln in text.splitlines() if ln.strip()]


def listed_lane_stores(common: str | os.PathLike[str]) -> list[str]:
    """Lane stores an older git-lane listed in the shared store's alternates."""
    return _lane_entries(common)[0]


def _rewrite(repo: Repo) -> list[str]:
    """Drop every lane store's entry from the shared store's alternates, under a lock;
    the user's own entries (a `clone --reference`) stay. Returns what was dropped."""
    with FileLock(repo.store.dir / "locks" / "alternates.lock"):
        path = _alternates(repo.common_dir)
        old = entries(repo.common_dir)
        lanes = set(_lane_entries(repo.common_dir)[0])
        base = shared(repo.common_dir)
        new = [
            e
            for e in old
            if (e if os.path.isabs(e) else os.path.normpath(os.path.join(base, e))) not in lanes
        ]
        if new == old:
            return []
        path.parent.mkdir(parents=True, exist_ok=True)
        if new:
            atomic_write(path, "".join(e + "\n" for e in new).encode("utf-8"))
        else:
            path.unlink(missing_ok=True)
        return sorted(lanes)


def enroll(repo: Repo, lane_path: str) -> str:
    """Make the lane's private store (if it has none); returns its path. Raises OSError
    when it cannot. Never lists it as an alternate of the shared store (and drops any
    lane store an older version listed there)."""
    admin = admin_dir(repo.common_dir, lane_path)
    if admin is None:
        raise OSError(f"no admin dir under {repo.common_dir}/worktrees names {lane_path}")
    store = os.path.join(admin, "objects")
    # CMD could write these (the admin dir is granted; a CMD of an earlier exec may have
    # left a process behind): each is reached from the admin dir through directory fds,
    # and what is not a plain directory is set aside (kept, never followed)
    for parent, name in (("", "objects"), ("objects", "pack"), ("objects", "info")):
        pfd, _ = dirfd.walk(admin, parent)
        try:
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISDIR(st.st_mode):
                aside = f"{name}.aside-{os.getpid()}"
                os.rename(name, aside, src_dir_fd=pfd, dst_dir_fd=pfd)
                st = None
            if st is None:
                os.mkdir(name, 0o755, dir_fd=pfd)
        finally:
            os.close(pfd)
    # the store reads the shared one by itself too: a tool that names its own alternates
    # (GIT_ALTERNATE_OBJECT_DIRECTORIES, as export does) still sees main's objects. CMD may
    # rewrite this file: it only changes what is read through the lane's store, which
    # land never trusts (import_lane re-hashes; the shared store is searched first).
    # Written by a new file renamed over it: a link there is replaced, never followed
    want = (shared(repo.common_dir) + "\n").encode("utf-8")
    try:
        current: bytes | None = dirfd.read_file(admin, "objects/info/alternates", len(want))
    except OSError:
        current = None
    if current != want:
        dirfd.write_file(admin, "objects/info/alternates", want, 0o644)
    _rewrite(repo)
    return store


def forget(repo: Repo) -> list[str]:
    """Drop every lane store's entry from the shared store's alternates (an older
    git-lane listed them; a missing one makes git warn on every run). Returns them."""
    return _rewrite(repo)


def reading(repo: Repo, *lane_paths: str | None) -> AbstractContextManager[None]:
    """Engine git calls within also read these lanes' own stores, no other (guard/git.py)."""
    return git.lane_objects(*(lane_store(repo.common_dir, p) for p in lane_paths if p))


def use(repo: Repo, lane_path: str) -> None:
    """Engine git calls read this lane's own store (and no other lane's) from now until
    the function run `git.in_own_context` around this returns (sanitized first)."""
    store = lane_store(repo.common_dir, lane_path)
    if store is not None:
        sanitize(repo, store)
    git.name_lane_stores(store)


# what a lane's store may hold besides loose objects, packs and their files: git's own
# alternates line for the shared store, which enroll writes (and nothing else)
_ALTERNATES = ("alternates", "http-alternates")


def hostile_entries(common: str | os.PathLike[str], store: str) -> list[str]:
    """What in a lane's store is no object and could stop or mislead the engine's git:
    every entry that is not a regular file or a directory (a FIFO blocks git's open(2), a
    link or a device reads elsewhere), and an `info/alternates` other than the one line
    enroll writes, or any `info/http-alternates`. One walk through directory fds from the
    lane's admin dir, never following a link (guard/dirfd.py)."""
    return _hostile(common, store, remove=False)[0]


def _hostile(
    common: str | os.PathLike[str], store: str, remove: bool
) -> tuple[list[str], list[str]]:
    """(what hostile_entries lists, what of it could not be removed). `remove`: each is
    unlinked through the fd of the directory it was seen in, right when it is seen: a
    directory the lane swaps for a link meanwhile leads nowhere (CMD may be running)."""
    admin, name = os.path.split(store)
    want = (shared(common) + "\n").encode()
    info = os.path.join(name, "info")
    found: list[str] = []
    left: list[str] = []
    try:
        for here, dfd, listed in dirfd.scan(admin, name):
            for n, kind in listed:
                bad = kind not in (stat.S_IFDIR, stat.S_IFREG)
                if here == info and n in _ALTERNATES:
                    try:
                        data: bytes | None = dirfd.read(dfd, n, limit=len(want))
                    except OSError:
                        data = None
                    bad = not (n == "alternates" and data == want)
                if not bad:
                    continue
                path = os.path.join(admin, here, n)
                found.append(path)
                if remove:
                    try:
                        os.unlink(n, dir_fd=dfd)
                    except FileNotFoundError:
                        pass
                    except OSError:
                        left.append(path)
    except OSError:
        pass  # gone, a link, or not a directory we may list: git cannot read it either
    return sorted(found), left


def sanitize(repo: Repo, store: str, lane: str | None = None) -> list[str]:
    """A lane's store is hostile input (CMD writes it): remove hostile_entries() (nothing a
    user committed: a FIFO, link or device is no object; the lane's objects reach the
    shared store through GIT_ALTERNATE_OBJECT_DIRECTORIES, never its alternates), logged.
    Returns what it removed (an entry it could not remove is still listed, and logged)."""
    found, left = _hostile(repo.common_dir, store, remove=True)
    if not found:
        return []
    repo.store.event(
        "lane_store_sanitized",
        lane=lane,
        code="ok" if not left else "left",
        store=store,
        removed=[f for f in found if f not in left][:50],
        left=left[:50],
    )
    return found


def _lane_entries(common: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """(lane stores, the user's own alternates: a `clone --reference`), absolute."""
    base = shared(common)
    lanes_dir = os.path.join(os.path.realpath(common), "worktrees") + "/"
    lanes: list[str] = []
    own: list[str] = []
    for e in entries(common):
        full = e if os.path.isabs(e) else os.path.normpath(os.path.join(base, e))
        (lanes if full.startswith(lanes_dir) else own).append(full)
    return lanes, own


_FANOUT = [f"{i:02x}" for i in range(256)]


def _view(repo: Repo, own: list[str]) -> str:
    """A directory that is the shared store without the lanes' stores: its 256 fan-out
    directories and pack/ linked in (a link may dangle until git makes the directory), and
    only the user's own alternates. Kept in git-lane's state, which no sandbox can write,
    and made once (links are slow to make on some filesystems): a view that is not
    exactly this is rebuilt."""
    real = shared(repo.common_dir)
    os.makedirs(os.path.join(real, "pack"), exist_ok=True)
    view = str(repo.store.dir / "objects-view")
    want = "".join(e + "\n" for e in own)
    if not _view_ok(view, real, want):
        tmp = tempfile.mkdtemp(prefix="objects-view-", dir=repo.store.dir)
        for name in [*_FANOUT, "pack"]:
            os.symlink(os.path.join(real, name), os.path.join(tmp, name))
        if own:
            os.mkdir(os.path.join(tmp, "info"))
            with open(os.path.join(tmp, "info", "alternates"), "w", encoding="utf-8") as fh:
                fh.write(want)
        if os.path.lexists(view):
            old = tempfile.mkdtemp(prefix="objects-view-old-", dir=repo.store.dir)
            try:
                os.replace(view, os.path.join(old, "v"))
            except OSError:
                pass  # another land or exec replaced it first
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, view)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
        if not _view_ok(view, real, want):
            raise OSError(f"cannot make a view of the shared object store at {view}")
    return view


def _view_ok(view: str, real: str, want: str) -> bool:
    try:
        names = sorted(os.listdir(view))
        if names != sorted([*_FANOUT, "pack", *(["info"] if want else [])]):
            return False
        if any(
            os.readlink(os.path.join(view, n)) != os.path.join(real, n)
            for n in names
            if n != "info"
        ):
            return False
        if want:
            if os.path.islink(os.path.join(view, "info")):
                return False
            return sorted(os.listdir(os.path.join(view, "info"))) == ["alternates"] and (
                Path(view, "info", "alternates").read_text(encoding="utf-8") == want
            )
        return True
    except OSError:
        return False


def _missing(repo: Repo, view: str, tip: str, base: str | None) -> list[str]:
    """Objects the tip needs (and `base` does not) that the shared store alone lacks."""
    env = {"GIT_OBJECT_DIRECTORY": view, "GIT_ALTERNATE_OBJECT_DIRECTORIES": "", **_NO_REPLACE}
    revs = [tip] + ([f"^{base}"] if base else [])
    listed = git.run(["rev-list", "--objects", *revs, "--"], repo.common_dir, env=env, check=False)
    if not listed.ok:
        return [tip]
    names = "".join(ln.split(" ", 1)[0] + "\n" for ln in listed.lines())
    res = git.run(
        ["cat-file", "--batch-check=%(objectname)"],
        repo.common_dir,
        env=env,
        input=names,
        check=False,
    )
    if not res.ok:
        return [tip]
    return [ln.split(" ", 1)[0] for ln in res.lines() if ln.endswith(" missing")]


def import_lane(repo: Repo, key: str, lane_path: str, base: str | None, tip: str) -> int:
    """Copy what `tip` needs and `base` (main) lacks from the lane's store into the shared
    one, every object re-hashed; then refuse (objects_corrupt) unless the tip is complete
    in the shared store alone. Returns the number of objects packed (0: nothing to do)."""
    store = lane_store(repo.common_dir, lane_path)
    if store is not None:
        sanitize(repo, store, key)  # CMD may still plant one: pack-objects has a timeout
    lanes, own = _lane_entries(repo.common_dir)
    if store is None and not lanes and not git.named_lane_stores():
        return 0  # no lane store in sight: every object git can read is the shared store's
    try:
        view = _view(repo, own)
        if not _missing(repo, view, tip, base):
            return 0  # the shared store alone already holds all of it
        revs = f"{tip}\n" + (f"^{base}\n" if base else "")
        # read through the lane's own store first, then the shared one (which lists no
        # lane's store: an older version's entries are dropped and left out of the view)
        read_env = {
            "GIT_OBJECT_DIRECTORY": store or shared(repo.common_dir),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": shared(repo.common_dir) if store else "",
            **_NO_REPLACE,
        }
        packed = git.run(
            ["pack-objects", "--revs", "--stdout", "-q"],
            repo.common_dir,
            env=read_env,
            input=revs,
            check=False,
            timeout=git.lane_read_timeout(),  # a FIFO planted since the walk blocks git
        )
        if packed.timed_out:
            raise _unreadable(key, lane_path, tip, packed.stderr)
        if not packed.ok:
            raise _corrupt(key, lane_path, tip, [], packed.stderr)
        data = packed.stdout
        count = int.from_bytes(data.encode("utf-8", "surrogateescape")[8:12], "big")
        # into the real pack dir through the view: every object re-hashed from its bytes,
        # and no lane's store consulted for the collision check or --strict's link check
        res = git.run(
            ["index-pack", "--strict", "--stdin"],
            repo.common_dir,
            env={
                "GIT_OBJECT_DIRECTORY": view,
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
                **_NO_REPLACE,
            },
            input=data,
            check=False,
        )
        if not res.ok:
            raise _corrupt(key, lane_path, tip, [], res.stderr)
        missing = _missing(repo, view, tip, base)
        if missing:
            raise _corrupt(key, lane_path, tip, missing, "")
        return count
    except OSError as exc:
        raise _corrupt(
            key, lane_path, tip, [], f"the shared store could not be checked: {exc}"
        ) from None


@contextmanager
def decided_in_shared_store(repo: Repo, lane_path: str, base: str, tip: str) -> Iterator[None]:
    """Within: a sandboxed lane's ancestry is read from the shared store alone
    (git.shared_store_only: no lane store, no commit-graph) when that store holds all `tip`
    needs beyond `base` (absorbed or imported: verified), so a commit-graph or pack the lane
    wrote into its own store cannot make it look fresh (sync, auto_sync, the queue's sync).
    A lane with no store of its own, or whose newest objects are in its store only (not
    absorbed yet, or refused), is read as before; land decides after its own import."""
    store = lane_store(repo.common_dir, lane_path)
    complete = False
    if store is not None:
        try:
            complete = not _missing(repo, _view(repo, _lane_entries(repo.common_dir)[1]), tip, base)
        except OSError:
            complete = False
    with git.shared_store_only(complete):
        yield


def branch_tip(repo: Repo, branch: str) -> str | None:
    """The lane branch's sha as the ref says (not checked to be a commit: its objects may
    be only in the lane's store)."""
    res = git.run(
        ["rev-parse", "-q", "--verify", f"refs/heads/{branch}"],
        repo.common_dir,
        check=False,
        timeout=git.lane_read_timeout(),  # the ref is CMD's to write (a FIFO there blocks)
    )
    return res.stdout.strip() if res.ok else None


def absorb(repo: Repo, key: str, lane_path: str, branch: str, tip: str | None = None) -> str:
    """While a sandboxed CMD runs (each time its branch moves) and after it ends: copy,
    verified, what the lane's branch holds beyond main into the shared store, so the
    owner's own git sees the lane's commits and they outlive its admin dir (a `git
    worktree prune` after its worktree was deleted by hand takes the lane's store with
    it). Returns "" or why it did not (the objects then stay in the lane's store; a forged
    one is never copied, and the lane's land checks again and refuses objects_corrupt)."""
    tip = tip or branch_tip(repo, branch)
    if tip is None:
        return "no branch"
    try:
        import_lane(repo, key, lane_path, repo.main_sha(), tip)
    except Refusal as r:
        return r.code
    except OSError as exc:
        return str(exc)
    return ""


def catch_up(repo: Repo, key: str, lane_path: str, branch: str) -> None:
    """Before the owner's engine works on a sandboxed lane (sync, land, the queue): what
    exec has not absorbed yet (CMD still runs, or its last commit came after the last
    poll) goes into the shared store now, verified, so plain git (a gate's, a rebase's
    later readers) reads it. What does not verify stays out, logged; land refuses it."""
    if lane_store(repo.common_dir, lane_path) is not None:
        why = absorb(repo, key, lane_path, branch)
        if why:
            repo.store.event("objects_kept_in_lane", lane=key, why=why)


def _corrupt(key: str, lane_path: str, tip: str, missing: list[str], stderr: str) -> Refusal:
    why = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    what = (
        f"{len(missing)} object(s) it needs are not in the shared store ({missing[0][:12]}...)"
        if missing
        else f"its objects do not verify ({why or 'index-pack refused them'})"
    )
    return Refusal(
        "objects_corrupt",
        f"lane {key}'s tip {tip[:12]} cannot land: {what}. Objects in a sandboxed lane's own "
        f"store are re-hashed before main may name them; main was not moved",
        next=[f"{git.owner_git(lane_path)} fsck --full --no-dangling"],
        alternatives=[
            f"git lane export {key}",
            f"git lane release {key} --confirm yes-discard-lane",
        ],
        details={"lane": key, "tip": tip, "missing": missing[:20], "stderr": stderr[-2000:]},
    )


def _unreadable(key: str, lane_path: str, tip: str, stderr: str) -> Refusal:
    return Refusal(
        "objects_unreadable",
        f"lane {key}'s tip {tip[:12]} cannot land: reading the lane's own object store took "
        f"longer than {git.lane_read_timeout():g} s (something in it blocks a read: a FIFO a "
        "sandboxed command planted there), so git was stopped; main was not moved",
        next=["git lane reconcile", f"git lane land {key}"],
        alternatives=[
            f"git lane export {key}",
            f"git lane release {key} --confirm yes-discard-lane",
        ],
        details={"lane": key, "tip": tip, "stderr": stderr[-2000:]},
    )
