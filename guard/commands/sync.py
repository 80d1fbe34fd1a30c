"""`git lane sync|continue|abort [KEY]`: rebase a lane onto main's tip, and walk the
conflicts with a worklist until the rebase is done and no conflict markers are left (G9)."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from guard import dirfd, git, gitlocks, lane, objects, oversize, recovery, sandbox
from guard.crashpoint import crash_point
from guard.errors import Refusal
from guard.policy import MARKER_SIZE, SCAN_CHUNK, MarkerScan, marker_sizes
from guard.repo import Repo
from guard.results import AbortResult, SyncResult, Worklist, WorklistFile
from guard.store import read_regular

# Passed with -c on every rebase: never written into the repository's config.
REBASE_CFG = [
    # rerere off, whatever the owner's config or an existing <common>/rr-cache says: that
    # cache is one for every lane and the owner, and nothing tells who recorded a
    # resolution there (a lane's plain cp, a MERGE_RR in a lane's own admin dir steering
    # a rerere run outside the sandbox in it, a lane replaying another's conflict). Taken
    # as settled, it would commit one lane's text into another's branch, and into main
    # with land --sync (red team 15B F4); nor does a sync record one there for the
    # owner's merges to take. Every conflict is the lane's to resolve, each sync.
    "-c",
    "rerere.enabled=false",
    "-c",
    "merge.conflictStyle=zdiff3",
    "-c",
    "core.editor=true",
    "-c",
    "advice.mergeConflict=false",
    # a sync rebases the lane's branch alone: never another branch that points into it
    # (an update-ref line would make its own todo untrusted), never an autostash
    "-c",
    "rebase.updateRefs=false",
    "-c",
    "rebase.autoStash=false",
    # the todo's lines are git's one-line default, whatever a config says (%B would make a
    # commit message line `exec PROG` a command the rebase runs)
    "-c",
    "rebase.instructionFormat=",
]
REBASE_ENV = {"GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true"}
MAX_AUTO_STEPS = 10_000

KINDS = {
    frozenset({1, 2, 3}): "both modified",
    frozenset({2, 3}): "added by both",
    frozenset({1, 2}): "deleted by them",
    frozenset({1, 3}): "deleted by us",
    frozenset({2}): "added by us",
    frozenset({3}): "added by them",
    frozenset({1}): "deleted by both",
}


def _lane(repo: Repo, key: str | None, action: str) -> tuple[str, str, str]:
    key = lane.current(repo, key, action)
    rec = lane.get(repo, key)
    # the rebase is git writing the lane's worktree: while a process of the lane runs (an
    # exec's CMD) it could swap a directory for a link between git's check of it and its
    # writes through it, and the owner's git would write where CMD's sandbox cannot (red
    # team 16A F2). From inside that exec the rebase runs confined, as CMD does.
    lane.owner_conflict(repo, rec, action)
    lane.check_pointers(repo, rec)  # git in the lane would use another repository
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
    if rec.status == "released":
        raise lane.not_active_refusal(repo, rec, "is released")
    if wt is None or not wt.exists:
        raise lane.missing_worktree_refusal(key, rec.path, action)
    objects.use(repo, rec.path)  # its commits may be in its own store only
    objects.catch_up(repo, key, rec.path, rec.branch)
    return key, rec.branch, rec.path


def _check_locks(repo: Repo, key: str, path: str, action: str) -> None:
    """A sync killed with its git leaves git's lock files (HEAD.lock) with the rebase:
    `git rebase --abort`/`--continue` would fail on them."""
    rec = lane.get(repo, key)
    gitlocks.check(repo, key, path, repo.store.admin_dir(rec), action)


def _git(path: str, args: list[str], check: bool = False) -> git.GitResult:
    # the commit a rebase step makes computes a status of the worktree: never one that
    # runs git inside a submodule (its config is in the lane's admin dir)
    off = git.submodule_status_off(path)
    return git.run([*REBASE_CFG, *off, *args], path, check=check, env=REBASE_ENV)


BUILTIN_STRATEGIES = frozenset({"ort", "recursive", "resolve", "octopus", "ours", "subtree"})


def _trusted_rebase(repo: Repo, key: str, path: str, branch: str, action: str) -> None:
    """Refuse unless the lane's stopped rebase is one sync could have started, before
    `git rebase --continue`/`--skip`: first its state (`check_rebase_state`:
    rebase_state_untrusted), then its todo (`rebase_todo_untrusted`): what is left of the
    todo is run, and it lives in the lane's admin dir (a sandboxed CMD can write it, and can
    start a rebase of its own with the real git by path). A sync's todo holds only picks; an
    `exec` line, a merge, a non-built-in strategy (git runs `git-merge-<name>` from PATH) or
    an am-based rebase-apply/ are refused. The admin dir comes from trusted state, never
    the lane's .git."""
    check_rebase_state(repo, key, path, branch, action)
    gd = git.worktree_git_dir(path)
    if gd is not None and os.path.isdir(gd / "rebase-merge"):
        odd = _state_files_doubt(repo, gd / "rebase-merge", "rebase-merge", settings=True)
        if odd is not None:  # what git's continue would obey as the owner (its signing key)
            raise untrusted_state_refusal(key, path, branch, odd, action)
    why = None
    if gd is None:
        why = "its admin dir cannot be found"
    elif os.path.lexists(gd / "rebase-apply"):
        why = "it is an am-based rebase (rebase-apply/), which sync never starts"
    else:
        try:
            todo = gd / "rebase-merge" / "git-rebase-todo"
            lines = _state_bytes(todo, limit=STATE_LIST_MAX).splitlines()
            strategy = _state_bytes(gd / "rebase-merge" / "strategy", missing=b"")
        except OSError as exc:
            lines, strategy = [], b""
            why = f"its todo cannot be read: {exc}"
        for raw in lines:
            ln = raw.decode("utf-8", "surrogateescape")
            words = ln.split()
            if not words or words[0].startswith("#") or words == ["noop"]:
                continue
            if words[0] in ("pick", "p") and len(words) >= 2 and _is_sha(words[1]):
                continue
            why = f"its todo holds a line sync never writes: {git.shown(ln.strip()[:200])}"
            break
        # as git's read_oneliner reads it: one trailing newline dropped, nothing else
        # (`ort ` is no built-in: git would run `git-merge-ort ` from PATH)
        named = strategy.decode("utf-8", "surrogateescape")
        named = named[:-1] if named.endswith("\n") else named
        if (
            why is None
            and os.path.lexists(gd / "rebase-merge" / "strategy")
            and (named not in BUILTIN_STRATEGIES)
        ):
            why = f"it names merge strategy {git.shown(named[:100])}, not a built-in one"
    if why is not None:
        raise Refusal(
            "rebase_todo_untrusted",
            f"the rebase stopped in lane {key} is not one git lane sync started ({why}): "
            "continuing it would run what it names outside any sandbox; abort it (that runs "
            "none of its todo), then sync again",
            next=[f"git lane abort {key}", f"git lane sync {key}"],
            details={"lane": key, "path": path, "why": why},
        )


REBASE_DIRS = ("rebase-merge", "rebase-apply")


# What the engine reads of a file of the lane's rebase state at most (the lane writes its
# admin dir: a sparse 3 GB `head-name` takes no disk): a one-line file (head-name, onto,
# orig-head, autostash, strategy, gpg_sign_opt, update-refs, as a sync leaves them) is a
# ref's value or a name, REF_MAX as oversize holds git's own reads to; the todo and
# `done`, a line per commit, LOG_MAX (a quarter of a million commits). Past it the read
# fails (EFBIG) and the caller refuses (rebase_state_untrusted, rebase_todo_untrusted).
STATE_LINE_MAX = oversize.REF_MAX
STATE_LIST_MAX = oversize.LOG_MAX


def _state_bytes(p: Path, missing: bytes | None = None, limit: int = STATE_LINE_MAX) -> bytes:
    """A file of the lane's rebase state, as git would read it: a regular file only (a
    FIFO there would hang the command, a symlink is nothing git writes; opened O_NOFOLLOW|
    O_NONBLOCK and fstat-checked), at most `limit` bytes (OSError EFBIG past it, read no
    further); `missing` is returned when there is none, else OSError."""
    try:
        return read_regular(p, follow=False, limit=limit)
    except FileNotFoundError:
        if missing is None:
            raise
        return missing


def _oneliner(p: Path) -> str:
    """What git's read_oneliner makes of a state file: one trailing newline dropped."""
    text = _state_bytes(p).decode("utf-8", "surrogateescape")
    return text[:-1] if text.endswith("\n") else text


def _is_oid(word: str) -> bool:
    return len(word) in (40, 64) and _is_sha(word)


# The files a sync's own rebase (REBASE_CFG, merge backend, picks only) leaves in
# rebase-merge/, as git 2.39 writes them (a sync stopped on a conflict, the owner's config
# default or with commit.gpgSign / rebase.rescheduleFailedExec): any other file is a
# setting the lane asked for (signoff, strategy_opts, allow_rerere_autoupdate...), which
# git's continue would obey as the owner. Their content is judged below or elsewhere
# (head-name, orig-head, onto, update-refs, autostash here, the todo and the strategy by
# _trusted_rebase); the others git only tests for, or keeps as the lane's own record.
SYNC_STATE_FILES = frozenset(
    {
        "amend",  # a stop after a commit (the lane's own `edit`): HEAD is amended, no more
        "author-script",
        "done",
        "drop_redundant_commits",
        "dropped",
        "end",
        "git-rebase-todo",
        "git-rebase-todo.backup",
        "gpg_sign_opt",
        "head-name",
        "interactive",
        "message",
        "msgnum",
        "no-reschedule-failed-exec",
        "reschedule-failed-exec",
        "onto",
        "orig-head",
        "patch",
        "quiet",  # the lane's own `git rebase -q`: output only
        "verbose",
        "rewritten-list",
        "stopped-sha",
        "strategy",
        "update-refs",
        "autostash",
    }
)
MAX_STATE_ENTRIES = 10_000


def _state_files_doubt(repo: Repo, d: Path, name: str, settings: bool) -> str | None:
    """Why the entries of the rebase state dir `d` are not what a sync's rebase leaves:
    anything not a regular file (git opens them with a plain open(2): a FIFO blocks the
    owner's abort/continue for ever; git makes no directory or link there), and with
    `settings` (before a continue or skip: an abort commits nothing, so the lane's own
    `git rebase -i` can still be aborted) in rebase-merge/ a file outside SYNC_STATE_FILES,
    or a gpg_sign_opt other than the `-S` the owner's own commit.gpgSign writes (the lane's
    key id, or a signature the owner did not ask for, made with the owner's program)."""
    try:
        entries = []
        with os.scandir(d) as it:
            for e in it:
                entries.append(e)
                if len(entries) > MAX_STATE_ENTRIES:
                    return f"{name}/ holds more than {MAX_STATE_ENTRIES} entries"
        for e in entries:
            if not e.is_file(follow_symlinks=False):
                return f"{name}/{git.shown(e.name[:100])} is not a regular file"
    except OSError as exc:
        return f"its {name}/ cannot be listed: {exc}"
    if name != "rebase-merge" or not settings:
        return None  # rebase-apply/ is never continued (_trusted_rebase)
    for e in sorted(entries, key=lambda e: e.name):
        if e.name not in SYNC_STATE_FILES:
            return f"{name}/{git.shown(e.name[:100])} is a setting no sync writes"
    try:
        sign = _state_bytes(d / "gpg_sign_opt", missing=b"")
    except OSError as exc:
        return f"its {name}/ cannot be read as git wrote it: {exc}"
    if os.path.lexists(d / "gpg_sign_opt"):
        owner_signs = git.config_bool(repo.common_dir, "commit.gpgSign", False)
        if sign != b"-S\n" or not owner_signs:
            shown = git.shown(sign.decode("utf-8", "surrogateescape").strip()[:80])
            return (
                f"{name}/gpg_sign_opt asks git to sign with {shown}, which the owner's "
                "commit.gpgSign does not"
            )
    return None


def rebase_state_doubt(repo: Repo, path: str, branch: str) -> str | None:
    """Why the lane's rebase state (in its admin dir, which the lane can write: exec
    --sandbox grants it) would make git act past the lane, or None. git moves the ref
    `head-name` names: `--abort` resets it to `orig-head`, the rebase's end moves it from
    `orig-head` to the new HEAD; it applies `update-refs` (any ref, from any value to any
    commit) at the end, and an `autostash` (at the end, at `--abort`, `--quit`: one that
    does not apply is stored in refs/stash, the repository's, shared by every worktree).
    A sync's rebase names `refs/heads/<its branch>` (or, begun on a detached HEAD,
    `detached HEAD`), the commit that branch is at as orig-head, a commit as onto, and
    no update-refs nor autostash."""
    gd = git.worktree_git_dir(path)
    if gd is None:
        return "its admin dir cannot be found"
    here = [d for d in REBASE_DIRS if os.path.lexists(gd / d)]
    if len(here) != 1:
        return "it has both rebase-merge/ and rebase-apply/" if here else "it has no rebase state"
    d = gd / here[0]
    if os.path.islink(d) or not d.is_dir():
        return f"{here[0]} is not a directory"
    odd = _state_files_doubt(repo, d, here[0], settings=False)
    if odd is not None:
        return odd
    try:
        head_name = _oneliner(d / "head-name")
        orig = _oneliner(d / "orig-head")
        onto = _oneliner(d / "onto")
        update_refs = _state_bytes(d / "update-refs", missing=b"")
        autostash = _state_bytes(d / "autostash", missing=b"")
    except OSError as exc:
        return f"its {here[0]}/ cannot be read as git wrote it: {exc}"
    own = f"refs/heads/{branch}"
    if head_name not in (own, "detached HEAD"):
        return f"{here[0]}/head-name names {git.shown(head_name[:200])}, not {own}"
    if update_refs.strip():
        return f"{here[0]}/update-refs lists refs for git to move at its end"
    if os.path.lexists(d / "autostash"):
        shown = git.shown(autostash.decode("utf-8", "surrogateescape").strip()[:80])
        return f"{here[0]}/autostash names {shown}, which git would apply or store in refs/stash"
    if not _is_oid(orig) or not _is_oid(onto):
        return f"{here[0]}/orig-head or onto is not a full commit id"
    if head_name == own:
        at = repo.ref_sha(own)
        if orig != at:
            return (
                f"{here[0]}/orig-head is {orig[:12]}, not the commit {branch} is at "
                f"({at[:12] if at else 'none'}): git would move {branch} from or to it"
            )
    if git.ref_sha(path, orig) != orig or git.ref_sha(path, onto) != onto:
        return f"{here[0]}/orig-head or onto names no commit"
    return None


def check_rebase_state(repo: Repo, key: str, path: str, branch: str, action: str) -> None:
    """Refuse `rebase_state_untrusted` before any `git rebase --abort/--continue/--skip`
    the engine runs in a lane whose rebase state names more than the lane
    (`rebase_state_doubt`): nothing is run, and the `next` takes the state away by hand
    without git reading it, then puts the lane back on its branch."""
    why = rebase_state_doubt(repo, path, branch)
    if why is not None:
        raise untrusted_state_refusal(key, path, branch, why, action)


def _autostash(path: str, gd: Path) -> str | None:
    """The commit the lane's rebase state names as its autostash (the stashed uncommitted
    edits: that file is their only name), read as the engine reads the state, when it is a
    full commit id of a commit the lane sees (the shared store or its own); else None."""
    for d in REBASE_DIRS:
        try:
            word = _oneliner(gd / d / "autostash").strip()
        except OSError:
            continue
        if _is_oid(word) and git.ref_sha(path, word) == word:
            return word
    return None


def untrusted_state_refusal(key: str, path: str, branch: str, why: str, action: str) -> Refusal:
    gd = git.worktree_git_dir(path) or Path(path) / ".git"
    dirs = " ".join(git.q(gd / d) for d in REBASE_DIRS)
    stash = _autostash(path, gd)
    keep: list[str] = []
    said = ""
    if stash is not None:  # the rm below drops the stash's only name: give it one first
        msg = f"git lane: autostash of the rebase in lane {key}"
        keep = [f"{git.owner_git(path)} stash store -m {git.q(msg)} {stash}"]
        said = (
            f" The rebase's autostash (the lane's uncommitted edits, {stash[:12]}) is first "
            f"stored in the stash: `{git.owner_git(path)} stash pop --quiet` brings the edits back."
        )
    return Refusal(
        "rebase_state_untrusted",
        f"the rebase stopped in lane {key} names more than the lane ({why}): `git rebase "
        f"{action}` would move what it names outside any sandbox, so nothing was run. Remove "
        "the lane's rebase state by hand and switch the lane back to its branch (no ref "
        "moves; what the rebase did so far is dropped, as an abort drops it), then sync again."
        + said,
        next=[
            *keep,
            f"rm -rf -- {dirs}",
            f"{git.owner_git(path)} switch --discard-changes {git.q(branch)}",
            f"git lane sync {key}",
        ],
        alternatives=[git.owner_status(path)],
        details={"lane": key, "path": path, "why": why, "admin": str(gd), "autostash": stash},
    )


def _is_sha(word: str) -> bool:
    return 4 <= len(word) <= 64 and all(c in "0123456789abcdef" for c in word)


def _step_files(path: str) -> list[str]:
    """Every file the current step touches: unmerged, staged or changed against HEAD, and
    untracked ones. A sync starts only in a clean lane, so an untracked (not ignored) file
    was made while resolving: it belongs to the resolution, is scanned for markers and is
    staged with it (left out, the lane would end dirty with a commit missing a file)."""
    files = set(git.unmerged(path))
    # --ignore-submodules=dirty: a submodule's commit is compared in-process; its own
    # changes would need git run inside it (with the config the lane can write)
    diff = ["diff", "--ignore-submodules=dirty", "--name-only", "-z", "HEAD"]
    files.update(git.run(diff, path, check=False).z())
    files.update(
        git.run(["ls-files", "--others", "--exclude-standard", "-z"], path, check=False).z()
    )
    return sorted(files)


def _add_step(path: str, files: list[str]) -> None:
    """`git add -A` the step's files. A path already gone from both the index and the
    worktree (a deletion the user staged with `git rm`) is left out: naming it would make
    git add fail with "pathspec did not match any files"."""
    staged = git.run(["--literal-pathspecs", "ls-files", "-s", "-z", "--", *files], path).z()
    indexed = {rec.partition("\t")[2] for rec in staged}
    keep = [f for f in files if f in indexed or os.path.lexists(os.path.join(path, f))]
    # a populated submodule is not given to add (it would run `git status` inside it, with
    # the config the lane can write): its entry becomes the commit it has checked out,
    # read from its files, as `git add` would stage it
    links = {r.partition("\t")[2] for r in staged if r.startswith("160000 ")}
    subs = [f for f in keep if f in links and os.path.lexists(os.path.join(path, f, ".git"))]
    keep = [f for f in keep if f not in subs]
    for f in subs:
        _, head = git.submodule_head(os.path.join(path, f))
        git.run(["update-index", "--cacheinfo", f"160000,{head},{f}"], path)
    if keep:
        git.run(["--literal-pathspecs", "add", "-A", "--", *keep], path)


def _undecided(path: str) -> list[str]:
    """Unmerged paths git could write no conflict markers into, still exactly as git left
    them: a side deleted the file and the other side's version sits there untouched, or
    the file is binary (or a symlink) and still holds our side. Staging them as they are
    (what `continue` does with a resolved text file) would silently keep one side and
    drop the other's change; deleting, editing or staging the path is a decision."""
    out: list[str] = []
    for p, um in sorted(git.unmerged(path).items()):
        st = um.stages
        if 2 in st and 3 in st:
            (mode2, ours), (mode3, theirs) = st[2], st[3]
            if mode2 in ("100644", "100755") and mode3 in ("100644", "100755"):
                num = git.run(
                    ["diff", "--numstat", "--no-renames", ours, theirs], path, check=False
                )
                attr = git.run(["check-attr", "merge", "--", p], path, check=False).stdout
                binary = num.stdout.startswith("-\t-\t") or attr.rstrip().endswith(
                    (": unset", ": binary")
                )
                if not binary:
                    continue  # a text conflict: the marker check decides
            left = ours
        elif 2 in st or 3 in st:
            left = (st.get(2) or st[3])[1]  # the side that kept the file
        else:
            continue  # deleted on both sides: nothing to lose
        full = os.path.join(path, p)
        if os.path.islink(full):
            now = git.run(
                ["hash-object", "--stdin"], path, input=os.readlink(full), check=False
            ).stdout.strip()
        elif os.path.isfile(full):
            now = git.run(["hash-object", "--", p], path, check=False).stdout.strip()
        else:
            continue  # deleted (or replaced by a directory) by the user: a decision
        if now == left:
            out.append(p)
    return out


# the blocks of one file G9 lists at most (the refusal's details): one is enough to refuse
MARKERS_KEPT = 1000


def scan_markers(root: str, rel: str, size: int = MARKER_SIZE) -> list[int] | None:
    """The conflict blocks (MarkerScan) of the file `rel` of the worktree `root`, read in
    chunks of SCAN_CHUNK (a hole of a sparse file is not read at all): never held whole,
    whatever its size. None when there is no file git would read for markers there: gone
    (a deletion), a symlink (git stages the link, never what it names) or a directory (a
    submodule, a nested repository, a file replaced by one). OSError when there is one
    that cannot be read as a regular file: its directories reached without following a
    link (ELOOP), then opened O_NOFOLLOW|O_NONBLOCK (a FIFO never blocks the open) and
    fstat-checked against the lstat (a regular file, the same inode: nothing swapped in
    between); a FIFO, socket or device, EACCES, EIO."""
    parent, name = os.path.split(rel)
    try:
        dfd, _ = dirfd.walk(root, parent or ".")
    except FileNotFoundError:
        return None  # a directory on its way is gone: so is the file
    except NotADirectoryError:  # (what O_NOFOLLOW|O_DIRECTORY says of a link, too)
        parts = parent.split("/")
        for i in range(1, len(parts) + 1):
            if os.path.islink(os.path.join(root, *parts[:i])):
                raise OSError(errno.ELOOP, "a directory on its way is a symlink", rel) from None
        return None  # a directory on its way is a file now: the file is deleted
    try:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
            return None
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", rel)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise OSError(errno.ESTALE, "replaced while it was opened", rel)
        scan = MarkerScan(size, keep=MARKERS_KEPT)
        at = 0
        for start, end in dirfd.data_runs(fd, now.st_size):
            scan.feed_zeros(start - at)
            at = start
            while at < end:
                chunk = os.pread(fd, min(SCAN_CHUNK, end - at), at)
                if not chunk:
                    break  # shrunk since the fstat
                scan.feed(chunk)
                at += len(chunk)
            if at < end:
                break
        else:
            scan.feed_zeros(now.st_size - at)  # a hole at the end
        return scan.close()
    finally:
        os.close(fd)


def _markers(path: str, files: list[str], key: str) -> list[str]:
    """`file:line` of each conflict block left in the step's `files` (G9). A file that
    cannot be read (scan_markers' OSError) refuses conflict_file_unreadable: what it
    holds cannot be ruled out, and `git add` would stage it."""
    hits: list[str] = []
    attr = (
        git.run(["check-attr", "-z", "conflict-marker-size", "--", *files], path, check=False)
        if files
        else None
    )
    sizes = marker_sizes(attr.stdout) if attr is not None and attr.ok else {}
    for f in files:
        try:
            found = scan_markers(path, f, sizes.get(f, MARKER_SIZE))
        except OSError as exc:
            raise Refusal(
                "conflict_file_unreadable",
                f"{git.shown(f)} in lane {key} cannot be read as a regular file "
                f"({exc.strerror or exc}): whether it still holds a conflict block cannot "
                f"be told, and continuing would stage it. Make it a regular file you can "
                f"read (or delete it) in {git.shown(path)}, then continue",
                next=[f"git lane continue {key}"],
                alternatives=[f"git lane abort {key}"],
                details={"lane": key, "file": f, "path": path, "error": str(exc)},
            ) from None
        hits.extend(f"{f}:{n}" for n in found or ())
    return hits


def _read(gd: Path, name: str) -> str | None:
    """A one-line file of the rebase state (msgnum, end, onto...), at most STATE_LINE_MAX
    bytes, read as _state_bytes reads it; None when it cannot be (shown or defaulted only)."""
    try:
        return git.read_admin(gd / name, limit=STATE_LINE_MAX).strip()
    except OSError:
        return None


def _count(text: str | None) -> int:
    """A step number of the rebase state (msgnum, end), shown only: the lane can write it,
    so anything but a few digits is shown as 0 (never a crash of the owner's command)."""
    if text is None or not (0 < len(text) <= 9) or not all(c in "0123456789" for c in text):
        return 0
    return int(text)


def worklist(path: str) -> Worklist:
    gd = git.worktree_git_dir(path) or Path(path) / ".git"
    step = total = 0
    for d in ("rebase-merge", "rebase-apply"):
        if (gd / d).is_dir():
            msg = _read(gd / d, "msgnum") or _read(gd / d, "next")
            end = _read(gd / d, "end") or _read(gd / d, "last")
            step, total = _count(msg), _count(end)
            break
    sha = git.run(["rev-parse", "-q", "--verify", "REBASE_HEAD"], path, check=False).stdout.strip()
    subject = (
        git.run(["log", "-1", "--format=%s", sha], path, check=False).stdout.strip() if sha else ""
    )
    files: list[WorklistFile] = [
        {"path": p, "kind": KINDS.get(frozenset(um.stages), "unmerged")}
        for p, um in sorted(git.unmerged(path).items())
    ]
    return {"step": step, "total": total, "commit": sha or None, "subject": subject, "files": files}


def _conflicts(repo: Repo, key: str, path: str, stderr: str | None = None) -> SyncResult:
    """The rebase stopped on conflicts: the worklist, exit 1 (`sync_conflicts`, as `git
    rebase` exits non-zero), `continue` to run once the files are resolved, `abort` as
    the other way out."""
    wl = worklist(path)
    repo.store.event(
        "sync",
        lane=key,
        code="sync_conflicts",
        step=wl["step"],
        total=wl["total"],
        files=wl["files"],
    )
    res: SyncResult = {
        "ok": False,
        "code": "sync_conflicts",
        "lane": key,
        "state": "conflicts",
        "path": path,
        "worklist": wl,
        "message": f"the sync of lane {key} stopped on conflicts at step {wl['step']} of "
        f"{wl['total']}: resolve the files of the worklist in {path} (remove every "
        "<<<<<<< ======= >>>>>>> block), then continue",
        "next": [f"git lane continue {key}"],
        "alternatives": [f"git lane abort {key}"],
    }
    if stderr is not None:
        res["stderr"] = stderr
    return res


def _fresh(
    repo: Repo, key: str, code: str, tip: str, main_sha: str, event: bool = True
) -> SyncResult:
    """The lane ends fresh: the next step is to land it (when it has anything to land)."""
    if event:
        repo.store.event("sync", lane=key, code="fresh", main=main_sha, tip=tip)
    return {
        "ok": True,
        "code": code,
        "lane": key,
        "state": "fresh",
        "tip": tip,
        "main": main_sha,
        "next": [f"git lane land {key}"] if tip != main_sha else [],
    }


def _position(path: str) -> tuple[str, bytes, bytes]:
    """Where the lane's rebase is: HEAD, what is left of its todo and what is done."""
    head = git.run(["rev-parse", "-q", "--verify", "HEAD"], path, check=False).stdout.strip()
    gd = git.worktree_git_dir(path) or Path(path) / ".git"
    got: list[bytes] = []
    for name in ("git-rebase-todo", "done"):
        try:
            got.append(_state_bytes(gd / "rebase-merge" / name, b"", STATE_LIST_MAX))
        except OSError:
            got.append(b"?")
    return head, got[0], got[1]


def _failed(
    key: str, path: str, result: git.GitResult, message: str, also: tuple[str, ...] = ()
) -> Refusal:
    """sync_failed for a rebase that cannot go on by itself: abort, then sync again.
    `message` names {key}, {step}, {total} and {stderr} (git's, cut short)."""
    wl = worklist(path)
    return Refusal(
        "sync_failed",
        message.format(
            key=key, step=wl["step"], total=wl["total"], stderr=result.stderr.strip()[:500]
        ),
        next=[f"git lane abort {key}", f"git lane sync {key}"],
        alternatives=[git.owner_status(path), *also],
        details={"lane": key, "stderr": result.stderr, "worklist": wl},
    )


def _stuck(key: str, path: str, result: git.GitResult) -> Refusal:
    """`--continue` then `--skip` both failed, no conflict came up and the rebase stands
    where it stood: going round again would do the same, up to MAX_AUTO_STEPS times."""
    return _failed(
        key,
        path,
        result,
        "git rebase --continue and --skip both failed in lane {key} and the rebase did not "
        "move on (step {step} of {total}): {stderr}; abort it (the lane goes back to its "
        "branch), then sync again",
    )


def _rescheduled(key: str, path: str, result: git.GitResult) -> Refusal:
    """Two rounds of `--continue` left the rebase's todo as it was: git rescheduled the
    step it could not carry out (something in the lane's admin dir it cannot update), and
    would again, up to MAX_AUTO_STEPS times."""
    return _failed(
        key,
        path,
        result,
        "git rebase in lane {key} rescheduled step {step} of {total} twice without carrying "
        "it out: {stderr}; abort it (the lane goes back to its branch), then sync again",
    )


def _uncommitted(key: str, path: str, result: git.GitResult) -> Refusal:
    """`--continue` failed with the step resolved and staged, no conflict, and the rebase
    did not move on: git could not make the commit (its signing program, a hook). Another
    `continue` fails the same way until that is fixed."""
    return _failed(
        key,
        path,
        result,
        "git rebase --continue could not commit the resolved step {step} of {total} in lane "
        "{key}: {stderr}; nothing conflicts. Abort it (the lane goes back to its branch) and "
        "sync again once what git reports is fixed (or fix it and continue: the resolution "
        "is still staged)",
        also=(f"git lane continue {key}",),
    )


def _drop_junk_pick(path: str) -> None:
    """A `CHERRY_PICK_HEAD` in the lane's admin dir that names no commit (the lane writes
    that dir: `zz`, a symref) is removed before a rebase: git's every pick then fails to
    update it and reschedules itself, a round that never ends. It holds nothing committed
    (a pseudo-ref naming no commit); a real pick's, or one that is no regular file (the
    admin walk's to refuse), is left as it is."""
    gd = git.worktree_git_dir(path)
    if gd is None:
        return
    try:
        text = dirfd.read_file(str(gd), "CHERRY_PICK_HEAD", limit=4096).decode("latin-1")
    except OSError as exc:
        if exc.errno != errno.EFBIG:
            return  # none, or no regular file (the admin walk's); _drive ends a spin anyway
        text = ""
    text = text.strip()
    if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", text):
        kind = git.run(["cat-file", "-t", text], path, check=False)
        if kind.ok and kind.stdout.strip() == "commit":
            return
    try:
        dirfd.unlink(str(gd), "CHERRY_PICK_HEAD")
    except OSError:
        pass  # gone meanwhile, or the lane made its dir unwritable: _drive ends a spin anyway


def _drive(
    repo: Repo,
    key: str,
    path: str,
    branch: str,
    main_sha: str,
    result: git.GitResult,
    chase: bool = False,
) -> SyncResult:
    """After a rebase command: done, stopped on conflicts, or stopped on a step already
    settled (resolved by hand before `continue`, or an emptied commit), which we continue
    ourselves (rerere is off: REBASE_CFG). With
    `chase` (continue), a main that moved meanwhile is rebased onto as well. A step git
    can neither continue nor skip ends it (sync_failed), never a loop; so does a step git
    reschedules twice without carrying it out (its todo as it was: a pick that cannot
    write its CHERRY_PICK_HEAD)."""
    again = 0
    for _ in range(MAX_AUTO_STEPS):
        if not git.rebase_in_progress(path):
            sandbox.clear_stale_pick(path)  # what a sandboxed git could not delete
            if result.ok or git.is_ancestor(path, main_sha, "HEAD"):
                now = repo.main_sha()
                if chase and now != main_sha and not git.is_ancestor(path, now, "HEAD"):
                    # main moved while the conflicts were being resolved: go again onto
                    # the new tip rather than report fresh a lane that is stale
                    main_sha = now
                    repo.store.event("sync_start", lane=key, main=main_sha, again=True)
                    _drop_junk_pick(path)
                    result = _git(path, ["rebase", main_sha])
                    continue
                tip = git.run(["rev-parse", "HEAD"], path).stdout.strip()
                return _fresh(repo, key, "synced", tip, main_sha)
            raise Refusal(
                "sync_failed",
                f"git rebase failed in lane {key}: {result.stderr.strip()[:500]}",
                next=[git.owner_status(path), f"git lane sync {key}"],
                details={"lane": key, "stderr": result.stderr},
            )
        if git.unmerged(path):
            return _conflicts(repo, key, path)
        files = _step_files(path)
        if _markers(path, files, key):
            return _conflicts(repo, key, path)
        if files:
            _add_step(path, files)
        crash_point("sync_step")  # the rebase stopped between steps, this one settled
        at = _position(path)
        _drop_junk_pick(path)
        _trusted_rebase(repo, key, path, branch, "--continue")
        result = _git(path, ["rebase", "--continue"])
        if not result.ok and git.rebase_in_progress(path) and not git.unmerged(path):
            # continue refused without new conflicts (e.g. an emptied commit): skip it
            if not _step_files(path):
                _trusted_rebase(repo, key, path, branch, "--skip")
                result = _git(path, ["rebase", "--skip"])
                if (
                    not result.ok
                    and git.rebase_in_progress(path)
                    and not git.unmerged(path)
                    and _position(path) == at
                ):
                    raise _stuck(key, path, result)
            elif _position(path) == at:
                # git could not commit the step (a signing program or hook that failed):
                # `continue` again would fail the same way, never a conflict to resolve
                raise _uncommitted(key, path, result)
            else:
                return _conflicts(repo, key, path, result.stderr)
        if git.rebase_in_progress(path) and not git.unmerged(path) and _position(path)[1] == at[1]:
            again += 1  # no step of the todo was carried out: git rescheduled it
            if again >= 2:
                raise _rescheduled(key, path, result)
    raise Refusal("sync_failed", "the rebase did not settle", next=[f"git lane abort {key}"])


@git.in_own_context
def sync(repo: Repo, key: str | None) -> SyncResult:
    key, branch, path = _lane(repo, key, "sync")
    sandbox.clear_stale_pick(path)  # left by a rebase in the sandbox (git lane sync clears it)
    if git.rebase_in_progress(path):
        raise lane.rebase_refusal(
            key, "already in the middle of a sync", {"worklist": worklist(path)}
        )
    head = git.run(["symbolic-ref", "-q", "HEAD"], path, check=False).stdout.strip()
    if head != f"refs/heads/{branch}":
        raise lane.branch_mismatch_refusal(repo, key, path, branch, head or None)
    facts = recovery.branch_facts(repo, path, branch, repo.ref_sha(head))
    if facts.state != "ok":  # deleted or moved by hand: a rebase would act on the wrong commits
        raise recovery.branch_refusal(key, facts, "sync")
    dirty = git.dirty_paths(path)
    if dirty:
        raise lane.dirty_refusal(key, path, dirty, "sync")
    main_sha = repo.main_sha()  # pinned: the rebase targets this sha, whatever lands meanwhile
    before = git.run(["rev-parse", "HEAD"], path).stdout.strip()
    with objects.decided_in_shared_store(repo, path, main_sha, before):
        fresh = git.is_ancestor(repo.common_dir, main_sha, before)
    if fresh:
        return _fresh(repo, key, "already_fresh", before, main_sha, event=False)
    return rebase(repo, key, path, main_sha, before, branch=branch)


@git.in_own_context
def rebase(
    repo: Repo,
    key: str,
    path: str,
    main_sha: str,
    before: str | None = None,
    then: list[str] | None = None,
    branch: str | None = None,
) -> SyncResult:
    """Rebase the (clean, on its branch, not mid-rebase) lane at `path` onto `main_sha`:
    what `sync` does after its checks, and what `land --sync`, the queue and auto_sync do
    (under their locks). `then`: what the user runs after the `next` of a refusal here;
    `branch`: the lane's (read from its record when not given)."""
    objects.use(repo, path)
    branch = branch if branch is not None else lane.get(repo, key).branch
    if before is None:
        before = git.run(["rev-parse", "HEAD"], path).stdout.strip()
    then = then if then is not None else [f"git lane sync {key}"]
    # git's rebase asks where the lane forks from main: the shared store's answer, once
    # it holds the lane's commits (a lane's forged commit-graph made it a no-op)
    with objects.decided_in_shared_store(repo, path, main_sha, before):
        check_merges(repo, key, path, main_sha, before, then)
        check_ignored(repo, key, path, main_sha, before, then)
        repo.store.event("sync_start", lane=key, main=main_sha, tip_before=before)
        _drop_junk_pick(path)
        res = _git(path, ["rebase", main_sha])
        return _drive(repo, key, path, branch, main_sha, res)


def check_merges(repo: Repo, key: str, path: str, main: str, tip: str, then: list[str]) -> None:
    """Every rebase of a lane goes through here first (sync, land --sync, the queue, a
    batch's stacking, auto_sync): a plain `git rebase` drops merge commits, and with them
    whatever a merge alone changed (a fix-up made while merging). A lane with a merge of
    its own since main is never rebased: merging main into it makes it fresh instead (the
    queue and land then move main to it as it is: main's tip when the `next` runs)."""
    merges = git.run(["rev-list", "--merges", f"{main}..{tip}"], repo.common_dir).stdout.split()
    if not merges:
        return
    base = git.merge_base(repo.common_dir, main, tip) or main
    g = git.owner_git(path)
    raise Refusal(
        "lane_has_merges",
        f"lane {key} has {len(merges)} merge commit(s) of its own ({merges[0][:12]}); a rebase "
        "would drop them and what they alone changed: it was not touched. Merge main into "
        "the lane instead (it is then fresh: nothing is replayed)",
        next=[f"{g} merge --no-edit {git.q(repo.main_ref)}", *then],
        alternatives=[
            f"{g} reset --soft {base} && {g} commit "
            f"-m {git.q(f'lane {key}, flattened')}  # one commit, the same tree: then {then[0]}"
        ],
        details={"lane": key, "merges": merges, "main": main, "tip": tip},
    )


def check_ignored(repo: Repo, key: str, path: str, onto: str, tip: str, then: list[str]) -> None:
    """Every rebase (or batch move) of a lane onto `onto` checks it first: git overwrites an
    ignored file without a word where the new base tracks one. It is never touched: the
    `next` moves the lane's own file out of the way, into git-lane's kept/ directory."""
    hit = ignored_in_the_way(repo, path, tip, onto)
    if not hit:
        return
    kept, keep = repo.lane_kept_next(key, hit)  # a new dir: never over an earlier's
    raise Refusal(
        "ignored_in_the_way",
        f"lane {key} has ignored (untracked) files where main now tracks files "
        f"({', '.join(map(git.shown, hit[:5]))}); a rebase would overwrite them: the lane "
        "was not touched. Move them out of the way (kept under git-lane's state), then go on",
        next=[keep, *then],
        alternatives=[
            f"{git.owner_git(path)} --literal-pathspecs add -f -- {' '.join(git.q(p) for p in hit)} && "
            f"{git.owner_git(path)} commit -m {git.q('track them')}  # the sync then shows them as conflicts"
        ],
        details={"lane": key, "paths": hit[:100], "onto": onto, "tip": tip, "kept": str(kept)},
    )


def ignored_in_the_way(repo: Repo, path: str, tip: str, main_sha: str) -> list[str]:
    """Paths main changed since the lane's base where the lane's worktree holds something
    git does not track at the tip (in a clean lane: an ignored file or directory), at the
    path itself or at one of its parent directories: a rebase would overwrite it."""
    base = git.merge_base(repo.common_dir, main_sha, tip)
    if not base:
        return []
    changed = git.changed_paths(repo.common_dir, base, main_sha)
    if not changed:
        return []
    tracked = set(
        git.run(["ls-tree", "-r", "-z", "--name-only", "--full-tree", tip], repo.common_dir).z()
    )
    tracked_dirs = {t.rsplit("/", i)[0] for t in tracked for i in range(1, t.count("/") + 1)}
    hit: list[str] = []
    for p in changed:
        if p not in tracked and os.path.lexists(os.path.join(path, p)):
            hit.append(p)
            continue
        parts = p.split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            full = os.path.join(path, d)
            if d in tracked:  # a file the tip tracks: git's rebase handles it as such
                break
            if d in tracked_dirs:
                continue
            if os.path.islink(full) or (os.path.lexists(full) and not os.path.isdir(full)):
                hit.append(d)
                break
    return list(dict.fromkeys(hit))


@git.in_own_context
def continue_(repo: Repo, key: str | None) -> SyncResult:
    key, branch, path = _lane(repo, key, "continue")
    _check_locks(repo, key, path, "continue")
    if not git.rebase_in_progress(path):
        main_sha = repo.main_sha()
        fresh = git.is_ancestor(repo.common_dir, main_sha, f"refs/heads/{branch}")
        raise Refusal(
            "no_sync_in_progress",
            f"lane {key} has no sync to continue"
            + (" (it is fresh)" if fresh else " and is behind main"),
            next=[f"git lane land {key}" if fresh else f"git lane sync {key}"],
            alternatives=["git lane status"],
            details={"lane": key, "fresh": fresh},
        )
    _trusted_rebase(repo, key, path, branch, "--continue")  # first: nothing untrusted is acted on
    files = _step_files(path)
    hits = _markers(path, files, key)
    if hits:
        raise Refusal(
            "conflict_markers_present",
            f"conflict markers are still in {', '.join(map(git.shown, hits[:10]))}: edit those files in {path} "
            "to remove the markers, then continue",
            next=[f"git lane continue {key}"],
            alternatives=[f"git lane abort {key}"],
            details={"lane": key, "markers": hits, "path": path, "worklist": worklist(path)},
        )
    undecided = _undecided(path)
    if undecided:
        quoted = " ".join(git.q(f) for f in undecided[:10])
        lq = git.owner_git(path) + " --literal-pathspecs"  # a name like `*` is no pattern here
        raise Refusal(
            "conflicts_unresolved",
            f"{len(undecided)} conflicted path(s) hold no conflict markers and were not resolved "
            f"(a deleted side, or a binary file still as git left it): {', '.join(map(git.shown, undecided[:10]))}; "
            "continuing would silently keep one side: decide each (keep ours, keep theirs, or "
            "delete), then continue",
            next=[f"git lane continue {key}"],
            alternatives=[
                f"{lq} checkout --ours -- {quoted} && {lq} add -- {quoted} && git lane continue {key}",
                f"{lq} checkout --theirs -- {quoted} && {lq} add -- {quoted} && git lane continue {key}",
                f"{lq} rm -q -- {quoted} && git lane continue {key}",
                f"git lane abort {key}",
            ],
            details={"lane": key, "paths": undecided[:100]},
        )
    if files:
        _add_step(path, files)
    crash_point("sync_step")  # the step settled, the rebase not yet carried on
    onto = _read(git.worktree_git_dir(path) or Path(path), "rebase-merge/onto") or repo.main_sha()
    _trusted_rebase(repo, key, path, branch, "--continue")
    res = _git(path, ["rebase", "--continue"])
    return _drive(repo, key, path, branch, onto, res, chase=True)


@git.in_own_context
def abort(repo: Repo, key: str | None) -> AbortResult:
    key, branch, path = _lane(repo, key, "abort")
    _check_locks(repo, key, path, "abort")
    if not git.rebase_in_progress(path):
        raise Refusal(
            "no_sync_in_progress",
            f"lane {key} has no sync to abort",
            next=["git lane status"],
            details={"lane": key},
        )
    res = abort_rebase(repo, key, path, branch)
    if not res.ok:  # never a traceback: what git said, and where to look
        raise Refusal(
            "sync_failed",
            f"git rebase --abort failed in lane {key}: {res.stderr.strip()[:500]}",
            next=[git.owner_status(path)],
            alternatives=["git lane reconcile", f"git lane abort {key}"],
            details={"lane": key, "stderr": res.stderr},
        )
    tip = git.run(["rev-parse", "HEAD"], path).stdout.strip()
    fresh = git.is_ancestor(repo.common_dir, repo.main_sha(), tip)
    repo.store.event("abort", lane=key, tip=tip)
    return {
        "ok": True,
        "code": "aborted",
        "lane": key,
        "state": "fresh" if fresh else "stale",
        "tip": tip,
    }


def abort_rebase(repo: Repo, key: str, path: str, branch: str) -> git.GitResult:
    """`git rebase --abort` in a lane (abort, and the queue and auto_sync giving up a rebase
    they started), only once its rebase state names nothing past the lane: refused
    rebase_state_untrusted otherwise, nothing run."""
    check_rebase_state(repo, key, path, branch, "--abort")
    return git.run(["rebase", "--abort"], path, check=False)
