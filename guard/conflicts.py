"""Conflict prediction (`git lane conflicts`, `git lane status --conflicts`): which lanes
would conflict with main and with each other, and on which paths, from git's own merge:
`git merge-tree --write-tree` (merge-ort, the merge a sync's rebase runs), which writes
objects only, never a worktree, an index or a ref.

Each lane is merged as its tip or, with `include_dirty`, as a commit of its worktree
state: `git add -A` into a copy of the lane's index in a temporary directory (the lane's
own index is only read), `write-tree`, `commit-tree` on the tip; no ref names it. Every
pair is merged (main with each lane, each two lanes; with `keys`, the pairs of those
lanes): `merge-tree --stdin` does many merges in one process, a few such processes run
side by side (one per core), and where git has no `--stdin` each merge is its own process
on the same thread pool. No pair is skipped unmerged: pruning by changed paths would have
to reproduce merge-ort's directory renames, file/directory and criss-cross cases exactly,
and costs more than the merges it would save (bench/conflicts.py). A merge git cannot run
is a refusal (`conflict_check_failed`), never "clean".

A pair that merges cleanly but whose two sides changed the same paths (each side's own
changes since its merge-base with main, by name) is an `overlap`, listed apart from the
conflicts with those paths. A lane that cannot be predicted (worktree or branch missing,
branch moved, a sync stopped half way; with `include_dirty` also another branch checked
out or unmerged paths in its index) is listed with its reason, and no pair names it."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from guard import git, lane, objects, recovery
from guard.errors import GitError, Refusal
from guard.repo import Repo
from guard.results import ConflictKind, ConflictLane, ConflictPair, LaneSkip
from guard.store import LaneRecord

# who "wrote" the commit of a lane's worktree state (no ref names it; never shown)
IDENT = {
    "GIT_AUTHOR_NAME": "git-lane",
    "GIT_AUTHOR_EMAIL": "git-lane@localhost",
    "GIT_COMMITTER_NAME": "git-lane",
    "GIT_COMMITTER_EMAIL": "git-lane@localhost",
}
MERGE_ARGS = (
    "merge-tree",
    "--write-tree",
    "--name-only",
    "--messages",
    "-z",
    "--allow-unrelated-histories",  # as a rebase would: no base, every path added on both sides
)
PER_PROCESS = 8  # fewer merges than this per --stdin process: not worth another process


@dataclass(frozen=True)
class Merge:
    """One merge-tree result: clean or not, the conflicted paths, and the paths git
    had to merge (`Auto-merging`), with each conflict's stable type."""

    clean: bool
    conflicted: list[str] = field(default_factory=list)
    kinds: list[ConflictKind] = field(default_factory=list)


@dataclass(frozen=True)
class Prediction:
    main: str
    include_dirty: bool
    lanes: list[ConflictLane]
    pairs: list[ConflictPair]


class _Skip(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.reason: LaneSkip = {
            "code": refusal.code,
            "message": refusal.message,
            "next": refusal.next,
        }


def jobs_default() -> int:
    return max(1, min(os.cpu_count() or 2, 8))


# -- merge-tree -----------------------------------------------------------------------------
def _failed(argv: list[str], rc: int, stderr: str, what: str) -> Refusal:
    old = rc == 129 and "usage" in stderr
    return Refusal(
        "conflict_check_failed",
        (
            "this git has no `git merge-tree --write-tree` (git 2.38 or later has it): "
            "conflicts cannot be predicted"
            if old
            else f"git could not {what} (exit {rc}): "
            + (stderr.strip().splitlines() or ["no message"])[-1][:200]
            + "; no prediction is made"
        ),
        next=[] if old else ["git fsck --connectivity-only"],
        details={"argv": argv, "returncode": rc, "stderr": stderr[-2000:]},
    )


def parse_merges(fields: list[str], statuses: list[int] | None) -> list[Merge]:
    """merge-tree -z --name-only --messages output, split at NUL. With `statuses` None it
    is `--stdin` output (each merge starts with its status: 1 clean, 0 conflicts, <0
    failed); otherwise one merge per status given (its exit code, the output of one
    process each, joined). Each merge: status, tree, conflicted names up to an empty
    field, then messages (count, that many paths, type, text) up to another."""
    out: list[Merge] = []
    i = 0
    n = len(fields)
    k = 0
    while i < n and (statuses is None or k < len(statuses)):
        if statuses is None:
            if fields[i] == "" and i == n - 1:
                break  # the final NUL's empty tail
            st = int(fields[i])
            i += 1
        else:
            st = 1 if statuses[k] == 0 else 0
        k += 1
        if st < 0:
            raise ValueError(f"merge {k} failed (status {st})")
        i += 1  # the tree
        names: list[str] = []
        while fields[i] != "":
            names.append(fields[i])
            i += 1
        i += 1
        kinds: list[ConflictKind] = []
        while fields[i] != "":
            count = int(fields[i])
            paths = fields[i + 1 : i + 1 + count]
            kind = fields[i + 1 + count]
            i += count + 3  # count, paths, type, message
            kinds.append({"type": kind, "paths": paths})
        i += 1
        out.append(Merge(st == 1, names, kinds))
    return out


def _merge_chunk(
    cwd: str, chunk: list[tuple[str, str]], env: dict[str, str] | None = None
) -> list[Merge]:
    argv = [*MERGE_ARGS, "--stdin"]
    res = git.run(argv, cwd, check=False, input="".join(f"{a} {b}\n" for a, b in chunk), env=env)
    if res.returncode == 129 and "usage" in res.stderr:  # no --stdin: one process per merge
        return _merge_each(cwd, chunk, env)
    if res.returncode != 0:
        raise _failed(["git", *argv], res.returncode, res.stderr, f"merge {len(chunk)} pair(s)")
    try:
        merges = parse_merges(res.stdout.split("\0"), None)
    except (ValueError, IndexError) as exc:
        raise _failed(["git", *argv], res.returncode, f"{exc}\n{res.stderr}", "merge") from None
    if len(merges) != len(chunk):
        raise _failed(["git", *argv], res.returncode, res.stderr, f"answer all {len(chunk)} merges")
    return merges


def _merge_each(
    cwd: str, chunk: list[tuple[str, str]], env: dict[str, str] | None = None
) -> list[Merge]:
    out: list[Merge] = []
    for a, b in chunk:
        argv = [*MERGE_ARGS, a, b]
        res = git.run(argv, cwd, check=False, env=env)
        if res.returncode not in (0, 1):  # 0 clean, 1 conflicts: anything else is no answer
            raise _failed(["git", *argv], res.returncode, res.stderr, f"merge {a} and {b}")
        try:
            (m,) = parse_merges((res.stdout + "\0").split("\0"), [res.returncode])
        except (ValueError, IndexError) as exc:
            raise _failed(["git", *argv], res.returncode, str(exc), "merge") from None
        out.append(m)
    return out


def merge_many(
    cwd: str,
    pairs: list[tuple[str, str]],
    jobs: int | None = None,
    env: dict[str, str] | None = None,
) -> list[Merge]:
    """merge-tree of every (a, b) in `pairs`, in order; the same pair is merged once."""
    uniq = list(dict.fromkeys(p for p in pairs if p[0] != p[1]))
    workers = jobs or jobs_default()
    n = max(1, min(workers, len(uniq) // PER_PROCESS))
    chunks = [uniq[i::n] for i in range(n)] if uniq else []
    done: dict[tuple[str, str], Merge] = {}
    for chunk, merges in zip(
        chunks, git.parallel(lambda c: _merge_chunk(cwd, c, env), chunks, n), strict=True
    ):
        done.update(zip(chunk, merges, strict=True))
    # a commit merged with itself: clean, nothing touched
    return [done.get(p, Merge(True)) for p in pairs]


# -- a lane's worktree state as a commit ----------------------------------------------------
def worktree_commit(
    path: str, key: str, tip: str, tip_tree: str, objenv: dict[str, str] | None = None
) -> tuple[str, bool]:
    """(commit, dirty): the lane's tip when its worktree holds what the tip holds, else a
    commit (parent: the tip) of what `git add -A` would stage: untracked files included,
    ignored ones not, files git is told to assume unchanged or skip as the index says.
    Built in a copy of the lane's index in a temporary directory; the lane's index is
    only read, and no hook runs (a post-index-change hook would see the copy)."""
    gd = git.worktree_git_dir(path)
    tmp = tempfile.mkdtemp(prefix="git-lane-conflicts-")
    try:
        idx = Path(tmp) / "index"
        if gd is not None and os.path.lexists(gd / "index"):
            try:
                git.check_index_file(gd, path)  # a FIFO, a link: lane_index_unsafe
            except Refusal as r:
                raise _Skip(r) from None
            try:
                # its stat data spares hashing unchanged files, its mtime keeps racy entries
                # racy; holes stay holes (a lane's index may be a terabyte of one hole)
                git.copy_regular(gd / "index", idx, times=True)
            except OSError as exc:
                raise _Skip(
                    git.index_copy_refusal(path, str(gd / "index"), exc, "git lane conflicts")
                ) from None
        env = {**(objenv or {}), "GIT_INDEX_FILE": str(idx), "GIT_OPTIONAL_LOCKS": "0"}
        cfg = [
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.splitIndex=false",
            "-c",
            f"core.hooksPath={tmp}/no-hooks",
        ]
        if git.run([*cfg, "ls-files", "-u", "-z"], path, env=env).stdout:
            raise _Skip(
                Refusal(
                    "lane_unmerged",
                    f"lane {key} has unmerged paths in its index (a merge, cherry-pick, revert "
                    "or stash pop stopped on conflicts): its uncommitted work is no one state",
                    next=[git.owner_status(path)],
                    details={"lane": key},
                )
            )
        try:
            added = git.add_all(
                path, env, cfg, "git lane conflicts", key
            )  # never git inside a submodule
            if not added.ok:
                raise GitError(added.argv, added.returncode, added.stdout, added.stderr)
            tree = git.run([*cfg, "write-tree"], path, env=env).stdout.strip()
        except Refusal as r:  # a sparse or huge file, an add past its time: named
            raise _Skip(r) from None
        except GitError as exc:  # an unreadable file, a name git cannot take, ...
            raise _Skip(
                Refusal(
                    "conflict_check_failed",
                    f"git could not read the uncommitted work of lane {key} ("
                    + (exc.stderr.strip().splitlines() or ["no message"])[-1][:200]
                    + ")",
                    next=[git.owner_status(path)],
                    details={"lane": key, "stderr": exc.stderr[-2000:]},
                )
            ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if tree == tip_tree:
        return tip, False
    msg = f"git-lane: uncommitted work of lane {key}"
    commit = git.run(
        ["commit-tree", tree, "-p", tip, "-m", msg], path, env={**IDENT, **(objenv or {})}
    ).stdout.strip()
    return commit, True


# -- which lanes, as what -------------------------------------------------------------------
def _named(repo: Repo, keys: list[str] | None) -> list[str] | None:
    """The lanes asked about: KEYS (a bound worker may name only its own), else a bound
    worker's own lane, else None: all of them."""
    if keys:
        out = []
        for k in keys:
            key = lane.resolve_key(k, "conflicts") or k
            lane.get(repo, key)  # unknown_lane, state_corrupt
            out.append(key)
        return list(dict.fromkeys(out))
    own = lane.bound_lane()
    return [own] if own is not None else None


def _side(
    repo: Repo,
    rec: LaneRecord,
    wts: dict[str, git.Worktree],
    tips: dict[str, str],
    include_dirty: bool,
) -> tuple[str, str]:
    """(tip, worktree path) of one lane, or _Skip with why it cannot be predicted."""
    if rec.status == "released":
        raise _Skip(lane.not_active_refusal(repo, rec, "is released"))
    wt = wts.get(os.path.realpath(rec.path))
    if wt is None or not wt.exists:
        raise _Skip(lane.missing_worktree_refusal(rec.key, rec.path, "conflicts"))
    tip = tips.get(f"refs/heads/{rec.branch}")
    facts = recovery.branch_facts(repo, rec.path, rec.branch, tip)
    if facts.state != "ok" or tip is None:
        raise _Skip(recovery.branch_refusal(rec.key, facts, "conflicts"))
    if git.rebase_in_progress(rec.path):
        raise _Skip(lane.rebase_refusal(rec.key, "in the middle of a sync (rebase)"))
    if include_dirty and wt.branch != f"refs/heads/{rec.branch}":
        raise _Skip(lane.branch_mismatch_refusal(repo, rec.key, rec.path, rec.branch, wt.branch))
    return tip, rec.path


def _own_paths(cwd: git.Where, base: str, tip: str, env: dict[str, str] | None = None) -> set[str]:
    """The paths `tip` changed since its merge-base with `base` (by name: a rename is its
    two paths)."""
    res = git.run(
        ["diff", "--name-only", "-z", "--no-renames", f"{base}...{tip}", "--"],
        cwd,
        check=False,
        env=env,
    )
    if res.ok:
        return set(res.z())
    mb = git.run(["merge-base", base, tip], cwd, check=False, env=env)
    if not mb.stdout.strip():  # unrelated histories: every path is new
        return set(git.run(["ls-tree", "-r", "-z", "--name-only", tip], cwd, env=env).z())
    raise _failed(list(res.argv), res.returncode, res.stderr, f"diff {base}...{tip}")


def prediction(
    repo: Repo, keys: list[str] | None = None, include_dirty: bool = False, jobs: int | None = None
) -> Prediction:
    """Every pair's prediction. A sandboxed lane's commits may be in its own store only
    (guard/objects.py): the lanes' stores are read here, each after the shared store, and
    everything this writes goes to a scratch object directory, never the shared store."""
    paths = [r.path for r in repo.store.lanes() if r.status != "released"]
    with objects.reading(repo, *paths):
        return _prediction(repo, keys, include_dirty, jobs)


def _prediction(
    repo: Repo, keys: list[str] | None, include_dirty: bool, jobs: int | None
) -> Prediction:
    named = _named(repo, keys)
    main_sha = repo.main_sha()
    wts_list = repo.worktrees()
    wts = git.by_path(wts_list)
    hub = repo.hub(wts_list)
    # merge where a rebase would: in a worktree, whose .gitattributes (merge drivers) count
    cwd = hub.path if hub is not None and hub.exists else str(repo.common_dir)
    tips = git.plain_refs(repo.common_dir, "refs/heads/lane/")
    every = repo.store.lanes()
    readable = {r.key for r in every}
    records = [r for r in every if r.status != "released" or r.key in (named or [])]
    views: dict[str, ConflictLane] = {}
    sides: dict[str, tuple[str, str]] = {}  # key -> (tip, path)
    for rec in sorted(records, key=lambda r: r.key):
        v: ConflictLane = {
            "key": rec.key,
            "tip": tips.get(f"refs/heads/{rec.branch}"),
            "merged": None,
            "dirty": None,
            "skipped": None,
        }
        try:
            sides[rec.key] = _side(repo, rec, wts, tips, include_dirty)
        except _Skip as s:
            v["skipped"] = s.reason
        views[rec.key] = v
    if named is None:
        for k in sorted(set(repo.store.lane_keys()) - readable):
            views[k] = {
                "key": k,
                "tip": None,
                "merged": None,
                "dirty": None,
                "skipped": {
                    "code": "state_corrupt",
                    "message": f"the record of lane {k} is unreadable",
                    "next": ["git lane reconcile"],
                },
            }

    # every object made here (the commits and blobs of uncommitted work, which may hold
    # secrets; merge-tree's merged trees) goes to a temporary object directory that
    # borrows the repository's as an alternate: nothing is written to the repository
    scratch = tempfile.mkdtemp(prefix="git-lane-conflicts-")
    os.mkdir(os.path.join(scratch, "objects"))
    objenv = {
        "GIT_OBJECT_DIRECTORY": os.path.join(scratch, "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": ":".join(
            git.alternate_entry(d)
            for d in [os.path.join(str(repo.common_dir), "objects"), *git.named_lane_stores()]
        ),
    }
    try:
        merged: dict[str, str] = {k: tip for k, (tip, _p) in sides.items()}
        if include_dirty and sides:
            ordered = sorted(sides)
            trees = git.run(
                ["rev-parse", *(f"{sides[k][0]}^{{tree}}" for k in ordered)], repo.common_dir
            ).lines()

            def one(i: int) -> tuple[str, bool] | _Skip:
                k = ordered[i]
                try:
                    return worktree_commit(sides[k][1], k, sides[k][0], trees[i], objenv)
                except _Skip as s:
                    return s

            for k, got in zip(
                ordered, git.parallel(one, range(len(ordered)), jobs or jobs_default()), strict=True
            ):
                if isinstance(got, _Skip):
                    views[k]["skipped"] = got.reason
                    del merged[k]
                else:
                    merged[k], views[k]["dirty"] = got
        for k, sha in merged.items():
            views[k]["merged"] = sha

        # the pairs: main (None) with each lane, each two lanes (with keys: those touching them)
        ks = sorted(merged)
        want: list[tuple[str | None, str]] = [(None, k) for k in ks if named is None or k in named]
        for i, k1 in enumerate(ks):
            for k2 in ks[i + 1 :]:
                if named is None or k1 in named or k2 in named:
                    want.append((k1, k2))
        commits = [(main_sha if x is None else merged[x], merged[y]) for x, y in want]
        merges = merge_many(cwd, commits, jobs, objenv)

        # each side's own changes since it left main (main's: since each lane's merge-base)
        need = [(main_sha, merged[k]) for k in ks]
        need += [(merged[y], main_sha) for x, y in want if x is None]
        need = list(dict.fromkeys(need))
        found = git.parallel(
            lambda p: _own_paths(repo.common_dir, *p, objenv), need, jobs or jobs_default()
        )
        own = dict(zip(need, found, strict=True))

        pairs: list[ConflictPair] = []
        for (x, y), m in zip(want, merges, strict=True):
            if x is None:
                shared = own[(merged[y], main_sha)] & own[(main_sha, merged[y])]
            else:
                shared = own[(main_sha, merged[x])] & own[(main_sha, merged[y])]
            state = "conflict" if not m.clean else ("overlap" if shared else "clean")
            pairs.append(
                {
                    "lanes": ["main" if x is None else x, y],
                    "main": x is None,
                    "conflict": not m.clean,
                    "state": state,
                    "paths": sorted(m.conflicted) if not m.clean else sorted(shared),
                    "shared": sorted(shared),
                    "kinds": [k for k in m.kinds if k["type"] != "Auto-merging"],
                }
            )
        order = {"conflict": 0, "overlap": 1, "clean": 2}
        pairs.sort(key=lambda p: (order[p["state"]], not p["main"], p["lanes"]))
        return Prediction(main_sha, include_dirty, [views[k] for k in sorted(views)], pairs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def predict(
    repo: Repo, keys: list[str] | None = None, include_dirty: bool = False, jobs: int | None = None
) -> list[ConflictPair]:
    """The pairs alone (for queue, cross-rebase and demo): see `prediction`."""
    return prediction(repo, keys, include_dirty, jobs).pairs


def would_conflict(pred: Prediction) -> dict[str, list[str]]:
    """Each predicted lane's conflicting partners: "main" first, then lane keys."""
    with_main: set[str] = set()
    others: dict[str, set[str]] = {v["key"]: set() for v in pred.lanes if v["merged"] is not None}
    for p in pred.pairs:
        a, b = p["lanes"]
        if not p["conflict"]:
            continue
        if p["main"]:
            with_main.add(b)
        else:
            others[a].add(b)
            others[b].add(a)
    return {k: (["main"] if k in with_main else []) + sorted(v) for k, v in others.items()}
