"""`git lane checkpoint [KEY] [-m MSG]`: commit every current change of a lane (untracked
files included, ignored ones left out) as one commit on its branch, with the hooks
running as for a plain `git commit` (never `--no-verify`).

A checkpoint is what that plain commit in the lane would be, so it follows the same
rules: the pre-commit hook's refusals (conflict markers, ...) refuse it with their own
code, and a stale lane gets the hook's sync notice and is checkpointed (a commit saves
work and leaves main alone; the land gate, not the commit, demands freshness).

The lane's index is never left half-changed: the commit is built in a copy of it held
as the index's own lock file (`index.lock`, so no other git writes the lane meanwhile)
and renamed over the index only when the commit is made; when a hook refuses, the lock
is removed and the index, staged parts included, is exactly as it was."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from guard import dirfd, git, gitlocks, lane, objects
from guard.errors import Refusal, hook_line
from guard.repo import Repo
from guard.store import open_regular
from guard.results import CheckpointResult

PATHS_CAP = 500


@git.in_own_context
def run(repo: Repo, key: str | None, message: str | None) -> CheckpointResult:
    key = lane.current(repo, key, "checkpoint")
    rec = lane.get(repo, key)
    if rec.status == "released":
        raise lane.not_active_refusal(repo, rec, "is released: it has no worktree")
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
    if wt is None or not wt.exists:
        raise lane.missing_worktree_refusal(key, rec.path, "checkpoint")
    lane.owner_conflict(repo, rec, "checkpoint")
    lane.check_pointers(repo, rec)  # its git would commit in another repository, admin dir
    path = rec.path
    objects.use(repo, path)  # its commits may be in its own store only
    if git.rebase_in_progress(path):
        raise lane.rebase_refusal(key, "in the middle of a sync (a rebase stopped on conflicts)")
    if wt.branch != f"refs/heads/{rec.branch}":
        raise lane.branch_mismatch_refusal(repo, key, path, rec.branch, wt.branch)
    parent = git.run(["rev-parse", "--verify", "HEAD^{commit}"], path).stdout.strip()
    result: CheckpointResult = {
        "ok": True,
        "code": "nothing_to_checkpoint",
        "lane": key,
        "path": path,
        "commit": None,
        "parent": parent,
        "message": "",
        "paths": [],
        "paths_count": 0,
        "warnings": [],
    }
    if not git.dirty_paths(path):
        return result
    index = git.run(["rev-parse", "--path-format=absolute", "--git-path", "index"], path)
    own = index.stdout.removesuffix("\n")
    lock = own + ".lock"
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        admin = os.path.dirname(lock)
        dead = gitlocks.stale(repo, key, path, Path(admin))
        if os.path.realpath(lock) in (os.path.realpath(p) for p in dead):
            raise gitlocks.stale_refusal(key, [lock], "checkpoint") from None
        raise Refusal(
            "lane_busy",
            f"a git command is writing in lane {key} (its index.lock exists); nothing was "
            "committed",
            next=[f"git lane checkpoint {key}"],
            alternatives=[f"rm -f {git.q(lock)}  # only when no git command runs there"],
            details={"lane": key, "index_lock": lock},
        ) from None
    committed = False
    try:
        # reconcile tells this lock from a live git's by it, if this process is killed
        gitlocks.hold(repo.state_dir, key, lock, os.fstat(fd).st_ino)
        with os.fdopen(fd, "wb") as f:
            git.check_index_file(os.path.dirname(own), path)  # a FIFO there blocks open(2)
            if os.path.lexists(own):
                with os.fdopen(open_regular(own, follow=False), "rb") as src:
                    try:  # holes stay holes: a lane's index may be a terabyte of one hole
                        dirfd.copy_data(src.fileno(), f.fileno(), os.fstat(src.fileno()).st_size)
                    except OSError as exc:
                        raise git.index_copy_refusal(
                            path, own, exc, f"git lane checkpoint {key}"
                        ) from None
            f.flush()
            with contextlib.suppress(OSError):  # the index's mtime: a racy entry stays racy
                st = os.stat(own)
                # through our fd: a link the lane put at the lock's name since is not followed
                os.utime(f.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
        env = {"GIT_INDEX_FILE": lock}
        # every name, before git touches it: `git add -A` over a name git refuses as a
        # path (`../x`, which sorts first) writes a tree with entries twice
        bad = git.unsafe_index_entries(path, env)
        if bad:  # an entry the lane wrote into its index by hand: never committed
            raise _unsafe_refusal(key, path, bad)
        again = f"git lane checkpoint {key}" + (f" -m {git.q(message)}" if message else "")
        added = git.add_all(path, env, retry=again, key=key)  # never git inside a submodule
        if not added.ok:  # a file git cannot read or clean: nothing is committed
            raise _commit_refusal(key, path, added)
        staged = git.run(
            ["diff", "--cached", "--name-only", "--no-renames", "-z", "HEAD", "--"], path, env=env
        ).z()
        if not staged:  # only what add -A does not take (a submodule's own changes)
            return result
        bad = [p for p in staged if git.unsafe_entry_name(p)]
        if bad:  # a file add -A took that HFS+ reads as .git (git on Linux takes
            # `.g\u200cit/x`): never committed; the index is as it was, the file is
            # moved aside by the next (read-tree would leave it to be taken again)
            raise _worktree_unsafe_refusal(repo, key, path, bad)
        msg = message or f"Checkpoint of lane {key} ({len(staged)} path(s))"
        res = git.run(
            # as `git commit -m MSG`: whitespace cleanup (a line starting with # is kept)
            [*_encoding(msg), "commit", "-q", "-F", "-", "--cleanup=whitespace"],
            path,
            env={**env, "GIT_EDITOR": "true"},
            input=msg + "\n",
            check=False,
        )
        if not res.ok:
            raise _commit_refusal(key, path, res)
        os.replace(lock, own)  # the index git commit left, as a plain commit leaves it
        committed = True
    finally:
        if not committed:
            try:
                os.unlink(lock)
            except FileNotFoundError:
                pass
        gitlocks.release(repo.state_dir, key)
    commit = git.run(["rev-parse", "--verify", "HEAD^{commit}"], path).stdout.strip()
    notices = [
        ln.removeprefix("git-lane: ")
        for ln in (res.stderr + res.stdout).splitlines()
        if ln.startswith("git-lane: notice")
    ]
    result["code"] = "checkpointed"
    result["commit"] = commit
    result["message"] = git.run(
        ["log", "-1", *_log_encoding(msg), "--format=%B", commit], path
    ).stdout.rstrip("\n")
    result["paths"] = staged[:PATHS_CAP]
    result["paths_count"] = len(staged)
    result["warnings"] = notices
    repo.store.event(
        "checkpoint", lane=key, code="checkpointed", commit=commit, parent=parent, paths=len(staged)
    )
    return result


def _unsafe_refusal(key: str, path: str, bad: list[str]) -> Refusal:
    """The lane's index names a path git refuses as one it is given (`../x`, `.git/x`):
    git commit takes names from an index as they are, and the owner's commit would put
    the tree into the shared store, which the lane's own commits reach only through
    fsck (index-pack --strict). Rebuilding the index from the lane's commit keeps every
    file of the worktree (checkpoint stages them all again)."""
    shown = git.shown_some(bad)
    return Refusal(
        "lane_index_unsafe",
        f"lane {key}'s index names {len(bad)} path(s) outside its worktree or in a git dir "
        f"({shown}); nothing was committed and the index is as it was",
        next=[f"{git.owner_git(path)} read-tree HEAD", f"git lane checkpoint {key}"],
        alternatives=[f"{git.owner_git(path)} ls-files -s  # the index as it is"],
        details={"lane": key, "paths": bad[:PATHS_CAP]},
    )


def _worktree_unsafe_refusal(repo: Repo, key: str, path: str, bad: list[str]) -> Refusal:
    """Files of the lane's worktree whose names git on Linux takes and another file
    system reads as `.git` (HFS+ ignores some characters): each is moved, from its first
    such component down, into a directory of git-lane's kept/ made for this refusal."""
    tops: list[str] = []
    for name in bad:
        comps = name.split("/")
        i = next(i for i in range(len(comps)) if git.unsafe_entry_name(comps[i]))
        top = "/".join(comps[: i + 1])
        if top not in tops:
            tops.append(top)
    kept, keep = repo.lane_kept_next(key, tops)
    return Refusal(
        "lane_index_unsafe",
        f"lane {key} holds {len(bad)} file(s) whose names another file system reads as a "
        f"git dir ({git.shown_some(bad)}); nothing was committed and the index is as it was",
        next=[keep, f"git lane checkpoint {key}"],
        details={"lane": key, "paths": bad[:PATHS_CAP], "kept": str(kept)},
    )


def _commit_refusal(key: str, path: str, res: git.GitResult) -> Refusal:
    """A hook (or git) refused the commit. Our own hooks' refusals keep their code; any
    other failure (a foreign pre-commit or commit-msg hook, no identity) is
    checkpoint_failed with git's output. Nothing was committed and the index is as it was."""
    out = res.stderr + res.stdout
    found = hook_line(out)
    again = f"git lane checkpoint {key}"
    details = {"lane": key, "exit": res.returncode, "output": out[-4000:]}
    if found is not None:
        code, why, _ = found
        return Refusal.from_dict(
            {
                "code": code,
                "message": f"the pre-commit hook refused the checkpoint of lane {key} "
                f"(nothing was committed, the index is as it was): {why}",
                "next": ["git lane doctor", again] if code == "hook_facts_unknown" else [again],
                "alternatives": [],
                "details": {**details, "hook": True},
            }
        )
    return Refusal(
        "checkpoint_failed",
        f"git commit refused the checkpoint of lane {key} (exit {res.returncode}): "
        f"{_last_line(out)}; fix what it says in the lane, then checkpoint again (nothing "
        "was committed, the index is as it was)",
        next=[again],
        alternatives=[git.owner_status(path)],
        details=details,
    )


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


# A message that is not UTF-8 (`-m $'msg \xff'`: surrogate escapes in the str) is stored as
# the bytes given. Under git's default i18n.commitEncoding (UTF-8) `git commit` would
# rewrite each such byte as if it were Latin-1 (0xff became U+00FF, bytes c3 bf); naming
# an encoding every byte string is valid in makes git store the bytes as they are, with an
# `encoding ISO-8859-1` header, and `git log` shows them as git shows them anyway.
RAW_ENCODING = "ISO-8859-1"


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _encoding(msg: str) -> list[str]:
    """The `-c` git needs so that `msg` is committed as its bytes."""
    return [] if _is_utf8(msg) else ["-c", f"i18n.commitEncoding={RAW_ENCODING}"]


def _log_encoding(msg: str) -> list[str]:
    """Read such a message back as its bytes (no re-encoding to UTF-8)."""
    return [] if _is_utf8(msg) else [f"--encoding={RAW_ENCODING}"]
