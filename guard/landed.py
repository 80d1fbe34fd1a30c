"""The landed refs: every tip a land put on main, kept reachable as
`refs/git-lane/landed/<epoch>` (the epoch zero-padded to 10 digits), so that nothing which
moves main outside a ref transaction (a reflog rewind, a branch copy, a symbolic ref),
followed by `git gc --prune=now`, can delete landed commits.

Land writes one per land in the same ref transaction that moves main (so neither exists
without the other), as a create (never through a symbolic ref: symbolic refs someone
planted under refs/git-lane/ are removed first) while it holds the integration lock with
the lock record's tip equal to the new value; landing.finish, which recovery reruns,
writes it again when missing (a land from before landed refs). Nothing here ever moves
or deletes one.

Before the first land, `refs/git-lane/baseline` (in the same protected namespace) holds
main's tip as it was when git-lane started guarding the repository (`git lane install`,
else the first `create`), so that a move of main past the hooks before any land is seen
as one after a land is. It is not a land: it never counts in the epoch, and it is
read only while no land has been made (`last`).

A landed ref is a ref: anything that runs git with the hooks off can write one, at a main
it moved by hand, to make that main look landed. So a ref counts as a land only when
something else vouches for it (`vouchers`): a land event in the audit log with its epoch
and tip, the landing record of a land under way, or epoch.json naming the same land. One
vouched by nothing and not older than the last vouched land is `unvouched`: never taken
as the last land (doctor names it; reconcile never raises the epoch to it). The other way
round, the vouchers are plain files any unconfined process of the owner's uid may write
(red team 17 hooks F4): a land they name that no landed ref records is `unproven`, never the
last land, and reconcile writes its ref only at main or in main's history, in land order
(`unprovable`). Likewise the
baseline is kept in state too (epoch.json at epoch 0: `main_after`, written with the ref),
so a baseline ref deleted or moved past the hooks is seen, and never recorded afresh.

Zero-padded so that git's own order (for-each-ref, `git log --all --source`) is land
order, and the newest is one `for-each-ref --sort=-refname --count=1` away; names are
still read as numbers, and a name that is not exactly 10 digits is not ours."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from guard import git, lock
from guard.errors import GitError, Refusal
from guard.repo import Repo
from guard.store import EPOCH_MAX, Epoch, now_iso

PREFIX = "refs/git-lane/landed/"
BASELINE = "refs/git-lane/baseline"
WIDTH = len(str(EPOCH_MAX))  # 10


def ref_name(epoch: int) -> str:
    return f"{PREFIX}{epoch:0{WIDTH}d}"


def parse(ref: str) -> int | None:
    """The epoch of a landed ref name, or None when the name is not one of ours."""
    if not ref.startswith(PREFIX):
        return None
    tail = ref[len(PREFIX) :]
    if len(tail) != WIDTH or not tail.isascii() or not tail.isdigit():
        return None
    return int(tail)


@dataclass(frozen=True)
class Landed:
    """One land: its epoch and the tip it left main at. `ref` is None when only
    epoch.json knows it (a land made before landed refs existed, or one whose ref
    could not be written)."""

    epoch: int
    sha: str
    ref: str | None

    @property
    def what(self) -> str:
        """How messages name it: "land N", or the baseline (epoch 0: no land yet)."""
        return f"land {self.epoch}" if self.epoch else "the baseline"

    @property
    def left(self) -> str:
        """ "where land N left it", or where main stood as git-lane started guarding it."""
        if self.epoch:
            return f"where land {self.epoch} left it"
        return "where it stood when git-lane started guarding it (no land yet)"


def from_refs(found: dict[str, str]) -> list[Landed]:
    """The landed refs among `found` (full ref name -> sha), oldest first."""
    out = [Landed(e, sha, ref) for ref, sha in found.items() if (e := parse(ref)) is not None]
    return sorted(out, key=lambda x: x.epoch)


def all_landed(repo: Repo) -> list[Landed]:
    return from_refs(git.plain_refs(repo.common_dir, PREFIX))


def newest_ref(repo: Repo) -> Landed | None:
    """The newest landed ref, in one git call that prints one line (a name git sorts
    above the newest but that is not ours costs a full listing)."""
    res = git.run(
        [
            "for-each-ref",
            "--sort=-refname",
            "--count=1",
            "--format=%(objectname) %(refname) %(symref)",
            PREFIX,
        ],
        repo.common_dir,
    )
    sha, _, rest = res.stdout.strip().partition(" ")
    ref, _, sym = rest.partition(" ")
    e = parse(ref)
    if e is not None and not sym:
        return Landed(e, sha, ref)
    if not ref:
        return None
    found = all_landed(repo)
    return found[-1] if found else None


def last(repo: Repo, refs: list[Landed] | None = None) -> Landed | None:
    """Where the last land left main, as the landed refs say: the newest landed ref that
    something else vouches for (`vouchers`); before any land, the baseline (epoch 0), when
    one was recorded. epoch.json, the audit log and the landing record are plain files any
    unconfined process of the owner's uid may write (red team 17 hooks F4): a land they name
    that no landed ref records is never the last land (`unproven` names it; restore-main
    never moves main there, land never measures main against it). The audit log is read
    only when the newest ref is not the land epoch.json names."""
    ep = repo.store.read_epoch()
    best = (refs[-1] if refs else None) if refs is not None else newest_ref(repo)
    if best is not None and (best.epoch, best.sha) != _of(ep):
        vouched = vouchers(repo, ep)
        found = refs if refs is not None else all_landed(repo)
        ok = [r for r in found if (r.epoch, r.sha) in vouched]
        best = ok[-1] if ok else None
    return best if best is not None else baseline(repo)


def unproven(
    repo: Repo, last_: Landed | None = None, refs: list[Landed] | None = None
) -> list[tuple[int, str]]:
    """(epoch, tip) of each land the state files name (`vouchers`: a land event,
    the landing record, epoch.json) past the last land (`last_`, as `last` gives it) that
    no landed ref records, oldest first; and, with no land yet, a baseline epoch.json
    keeps that the baseline ref does not hold (epoch 0). None of them is taken as where
    main belongs: a plain file said it, no land's ref transaction did. reconcile gives one
    its landed ref when main holds its tip (`unprovable`); the owner who knows a tip is
    good moves main there by hand."""
    found = refs if refs is not None else all_landed(repo)
    have = {r.epoch for r in found}
    floor = last_.epoch if last_ is not None else 0
    out = sorted({(e, t) for e, t in vouchers(repo) if e > floor and e not in have})
    if last_ is None or not last_.epoch:
        kept = baseline_kept(repo)
        if kept is not None and kept != baseline_ref(repo):
            out.insert(0, (0, kept))
    return out


def unprovable(
    repo: Repo, epoch: int, tip: str, have: dict[int, str], main: str | None
) -> str | None:
    """Why reconcile may not write the landed ref of `epoch` at `tip` on the word of a
    state file (`have`: the landed refs there are, epoch -> sha; `main`: main's tip now),
    or None when it may. A land moved main to its tip in the ref transaction that wrote
    its ref, and main moves on only by later lands (fast-forwards), so a landed tip is main
    itself or in main's history (`git merge-base --is-ancestor`, true of a commit and
    itself), descends from the landed ref before it, and is in the history of the one
    after it. A tip main never held was never landed; one older than a land before it is
    no later land (it would make main look ahead of its last land). Lands from before
    landed refs existed are in main's history: they still get their refs."""
    if main is None:
        return "main names no commit"
    try:
        if not git.is_ancestor(repo.common_dir, tip, main):
            return f"main ({main[:12]}) never held it: no land put it there"
        below = [e for e in have if e < epoch]
        if below:
            lo = have[max(below)]
            if not git.is_ancestor(repo.common_dir, lo, tip):
                return f"it does not descend from land {max(below)} ({lo[:12]}): no later land"
        above = [e for e in have if e > epoch]
        if above:
            hi = have[min(above)]
            if not git.is_ancestor(repo.common_dir, tip, hi):
                return f"it is not in the history of land {min(above)} ({hi[:12]})"
    except GitError as exc:
        return f"git could not tell ({exc.stderr.strip()[:200]})"
    return None


def _of(ep: Epoch) -> tuple[int, str] | None:
    return (ep.epoch, ep.main_after) if ep.epoch and ep.main_after else None


def vouchers(repo: Repo, ep: Epoch | None = None) -> set[tuple[int, str]]:
    """(epoch, tip) of every land something other than its landed ref records: a land
    event in the audit log (each lane of a batch has its own), the landing record of a
    land under way (its tip, each batch entry), epoch.json's last land."""
    out: set[tuple[int, str]] = set()
    for ev in repo.store.events():
        if ev.get("kind") == "land":
            _add(out, ev.get("epoch"), ev.get("main_after"))
    rec = repo.store.read_json(repo.store.landing_path)
    if rec is not None:
        stack = rec.get("stack")
        for x in [rec, *(stack if isinstance(stack, list) else [])]:
            if isinstance(x, dict):
                _add(out, x.get("epoch_after", x.get("epoch")), x.get("tip"))
    own = _of(ep if ep is not None else repo.store.read_epoch())
    if own is not None:
        out.add(own)
    return out


def named_by(repo: Repo, epoch: int, tip: str) -> list[str]:
    """Which of git-lane's state files name the land (epoch, tip): "events" (a land event
    in the audit log), "landing" (the landing record), "epoch.json". Each is a plain file;
    a land past every landed ref that only one names is what a forger writes (red team 17
    final F1: epoch.json rewritten beside a main moved past the hooks), so reconcile
    writes no landed ref on one alone (landing.keep_last, keep_vouched)."""
    out: list[str] = []
    if any(
        ev.get("kind") == "land" and ev.get("epoch") == epoch and ev.get("main_after") == tip
        for ev in repo.store.events()
    ):
        out.append("events")
    rec = repo.store.read_json(repo.store.landing_path)
    if rec is not None:
        stack = rec.get("stack")
        for x in [rec, *(stack if isinstance(stack, list) else [])]:
            if isinstance(x, dict) and (x.get("epoch_after", x.get("epoch")), x.get("tip")) == (
                epoch,
                tip,
            ):
                out.append("landing")
                break
    if _of(repo.store.read_epoch()) == (epoch, tip):
        out.append("epoch.json")
    return out


def lone_claim(repo: Repo, epoch: int, tip: str, have: dict[int, str]) -> str | None:
    """Why reconcile may not write the landed ref of a land past every landed ref there is
    (`have`) that fewer than two state files name (named_by), else None. A land below the
    newest landed ref is vouched by that ref's own land having come after it."""
    if epoch <= max(have, default=0):
        return None
    by = named_by(repo, epoch, tip)
    if len(by) >= 2:
        return None
    return (
        f"only {by[0] if by else 'nothing'} names it, past every landed ref: a plain file any "
        "process of your uid may write; git lane doctor says what to do"
    )


def missing(repo: Repo, refs: list[Landed] | None = None) -> list[tuple[int, str]]:
    """(epoch, tip) of each land something vouches for (vouchers) that has no landed ref,
    its commit still there, oldest first: one per epoch (two vouchers that disagree on a
    land's tip: neither, for the owner to decide, as doctor's `unvouched` does)."""
    have = {r.epoch for r in (refs if refs is not None else all_landed(repo))}
    tips: dict[int, set[str]] = {}
    for epoch, tip in vouchers(repo):
        if epoch not in have:
            tips.setdefault(epoch, set()).add(tip)
    return [
        (e, next(iter(t)))
        for e, t in sorted(tips.items())
        if len(t) == 1 and git.has_commit(repo.common_dir, next(iter(t)))
    ]


def _add(out: set[tuple[int, str]], epoch: object, tip: object) -> None:
    ok = isinstance(epoch, int) and not isinstance(epoch, bool) and 0 < epoch <= EPOCH_MAX
    if ok and isinstance(epoch, int) and isinstance(tip, str):
        out.add((epoch, tip))


def unvouched(repo: Repo, refs: list[Landed] | None = None) -> list[Landed]:
    """Landed refs vouched by nothing (`vouchers`) and not older than the last vouched
    land: written past the hooks (or a land whose every other record is gone), never
    taken as landed. Older ones are left alone: the audit log is rotated, so a land long
    past may have only its ref left, and it cannot pass for the last land."""
    found = refs if refs is not None else all_landed(repo)
    ep = repo.store.read_epoch()
    if not found or (found[-1].epoch, found[-1].sha) == _of(ep) or found[-1].epoch < ep.epoch:
        return []
    vouched = vouchers(repo, ep)
    floor = max((e for e, _ in vouched), default=0)
    return [r for r in found if r.epoch >= floor and (r.epoch, r.sha) not in vouched]


def newest_vouched(repo: Repo) -> Landed | None:
    """The newest landed ref something else vouches for (reconcile: how far the epoch
    may be put back up)."""
    found = all_landed(repo)
    vouched = vouchers(repo)
    ok = [r for r in found if (r.epoch, r.sha) in vouched]
    return ok[-1] if ok else None


def baseline_ref(repo: Repo) -> str | None:
    """The sha of refs/git-lane/baseline, or None (missing, or a symbolic ref: forged)."""
    res = git.run(["for-each-ref", "--format=%(objectname) %(symref)", BASELINE], repo.common_dir)
    sha, _, sym = res.stdout.strip().partition(" ")
    return sha if sha and not sym else None


def baseline_kept(repo: Repo) -> str | None:
    """The baseline as state keeps it: epoch.json's `main_after` while its epoch is 0."""
    ep = repo.store.read_epoch()
    return ep.main_after if not ep.epoch and ep.main_after else None


def baseline_logged(repo: Repo) -> str | None:
    """The newest baseline the audit log records (read only when state has none)."""
    sha = None
    for ev in repo.store.events():
        if ev.get("kind") == "baseline" and isinstance(ev.get("sha"), str):
            sha = ev["sha"]
    return sha


def baseline(repo: Repo) -> Landed | None:
    """The recorded baseline as epoch 0, or None: the one state keeps (whatever became
    of the ref; `ref` is None when the ref is not at it), else the ref (a repository
    whose baseline was recorded before state kept it)."""
    kept = baseline_kept(repo)
    ref = baseline_ref(repo)
    if kept is not None:
        return Landed(0, kept, BASELINE if ref == kept else None)
    return Landed(0, ref, BASELINE) if ref is not None else None


def record_baseline(repo: Repo) -> str | None:
    """install and create: record main's tip as the baseline when nothing records where
    main should be yet (no land, no baseline in state, the audit log or the ref), in the
    ref and in state; a baseline recorded before is never recorded afresh, only what is
    missing of it put back (`ensure_baseline`). Returns the sha newly recorded, or None."""
    done = ensure_baseline(repo)
    return next((c["sha"] for c in done if c["action"] == "baseline_recorded"), None)


def ensure_baseline(repo: Repo, new: bool = True) -> list[dict[str, Any]]:
    """Before any land: the baseline in both places. Nothing recorded anywhere: main's tip
    now is recorded. Recorded somewhere (state, else the audit log, else the ref): the
    ref is put back at it when missing, state given it when it has none; a ref that
    disagrees with state is left for doctor to name. Ref writes are made as land makes
    them: a create, under the integration lock whose record's tip is the value, so the
    reference-transaction hook lets it through. A land under way (the lock busy) leaves
    it to that land. Never refuses: what could not be done is logged
    (baseline_failed) and doctor names it. `new=False` (reconcile: the hooks may not be
    installed) only puts back what was recorded. Returns the changes made."""
    made = last(repo)
    if made is not None and made.epoch:
        return []  # a land was made: the baseline is no longer read
    kept, ref = baseline_kept(repo), baseline_ref(repo)
    if kept is not None and ref is not None:
        return []  # both there (a ref that disagrees: doctor's `baseline`)
    recorded = kept or baseline_logged(repo) or ref
    if recorded is None and not new:
        return []
    if recorded is None:
        try:
            sha = repo.main_sha()
        except Refusal:
            return []  # no main yet: the first create after its first commit records it
    else:
        sha = recorded
    try:
        held = lock.acquire(repo, "(baseline)", "", sha)
    except Refusal as no:
        # busy: a land under way writes its landed ref; an unreadable lock record is for
        # reconcile and doctor to name, not a reason to refuse the install or create
        if no.code != "lock_busy":
            repo.store.event("warning", code="baseline_failed", sha=sha, reason=no.code)
        return []
    out: list[dict[str, Any]] = []
    try:
        if repo.store.read_epoch().epoch or newest_vouched(repo) is not None:
            return []  # a land got there first
        if recorded is None and repo.main_sha() != sha:
            return []  # main moved meanwhile (a land, a restore): the next call looks again
        if baseline_ref(repo) is None:
            if recorded is not None:
                # recorded in a plain file (epoch.json, the audit log: red team 17 hooks F4):
                # main stood there when git-lane started guarding it, so it is main or in
                # main's history; a commit main never held is never made the baseline
                try:
                    held_by_main = git.is_ancestor(repo.common_dir, sha, repo.main_sha())
                except (GitError, Refusal):
                    held_by_main = False
                if not held_by_main:
                    return [{"action": "baseline_ref_unproven", "sha": sha}]
            clear_forgeries(repo, None)
            res = git.run(
                [
                    "update-ref",
                    "--no-deref",
                    "--create-reflog",
                    "-m",
                    "git-lane: baseline",
                    BASELINE,
                    sha,
                    "",
                ],
                repo.common_dir,
                check=False,
            )
            if not res.ok:
                repo.store.event(
                    "warning", code="baseline_failed", sha=sha, stderr=res.stderr.strip()[:500]
                )
                return []
            if recorded is not None:
                out.append({"action": "baseline_ref_restored", "ref": BASELINE, "sha": sha})
        if baseline_kept(repo) is None and repo.store.epoch_is_valid():  # else reconcile's
            repo.store.write_epoch(Epoch(main_after=sha, at=now_iso()))
            if recorded is not None:
                out.append({"action": "baseline_kept_in_state", "sha": sha})
    finally:
        lock.release(repo, held)
    if recorded is None:
        repo.store.event("baseline", sha=sha, ref=BASELINE)
        out.append({"action": "baseline_recorded", "ref": BASELINE, "sha": sha})
    return out


def next_epoch(repo: Repo) -> int:
    """The epoch the next land takes: past both epoch.json and every landed ref, so a
    rebuilt or lost epoch.json never makes a land reuse a landed ref's name."""
    newest = newest_ref(repo)
    return max(repo.store.read_epoch().epoch, newest.epoch if newest is not None else 0) + 1


def forgeries(repo: Repo) -> list[str]:
    """Symbolic refs under refs/git-lane/ (loose files that say `ref: `). git-lane never
    makes one, and `git symbolic-ref` writes them outside any ref transaction, so no hook
    stops them; one at a landed ref's name would make land write through it (or, dangling,
    be skipped by for-each-ref). Found by reading the loose ref files: a symbolic ref is
    never packed."""
    root = os.path.join(str(repo.common_dir), "refs", "git-lane")
    out: list[str] = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [n for n in dirs if not os.path.islink(os.path.join(d, n))]
        for n in files:
            p = os.path.join(d, n)
            try:
                with os.fdopen(git.open_regular(p, follow=False), "rb") as f:  # no FIFO's
                    head = f.read(5)
            except OSError:
                continue
            if head == b"ref: ":
                out.append("refs/" + os.path.relpath(p, os.path.join(str(repo.common_dir), "refs")))
    return sorted(out)


_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def packed_value(repo: Repo, ref: str) -> str | None:
    """What packed-refs holds for `ref` (after `git gc` or `pack-refs`, a landed ref lives
    there only), or None. A symbolic ref written over it hides it without removing it."""
    try:
        text = git.read_regular(os.path.join(str(repo.common_dir), "packed-refs"))
    except OSError:
        return None
    want = b" " + ref.encode()
    for ln in text.splitlines():
        if ln.endswith(want) and not ln.startswith((b"#", b"^")):
            sha = ln[: -len(want)].decode("ascii", "replace")
            if _SHA.fullmatch(sha):
                return sha
    return None


def unforge_command(repo: Repo, ref: str) -> str:
    """The command that removes the symbolic ref `ref` and loses nothing: with a packed
    value beneath it, the ref made plain again at that value (a delete would remove the
    packed entry too: git deletes a name from both places); else its delete."""
    packed = packed_value(repo, ref)
    if packed is not None:
        return f"git update-ref --no-deref {ref} {packed}"
    return f"git symbolic-ref --delete {ref}"


def clear_forgeries(repo: Repo, lane: str | None) -> list[str]:
    """Remove every symbolic ref under refs/git-lane/ (the hook lets a symbolic ref there
    go: it holds nothing landed). One written over a packed landed ref is replaced by
    that ref's packed value, never deleted (git would delete the packed entry with it).
    Each is logged. Returns what was removed."""
    gone = []
    for ref in forgeries(repo):
        packed = packed_value(repo, ref)
        if packed is not None:
            args = ["update-ref", "--no-deref", ref, packed]
        else:
            args = ["update-ref", "--no-deref", "-d", ref]
        res = git.run(args, repo.common_dir, check=False)
        if res.ok:
            gone.append(ref)
            repo.store.event(
                "warning", lane=lane, code="landed_ref_forgery_removed", ref=ref, restored=packed
            )
    return gone


def keep(repo: Repo, epoch: int, tip: str, lane: str | None) -> str:
    """Create `refs/git-lane/landed/<epoch>` at `tip` (compare-and-swap: it must not exist
    yet). Idempotent: a ref already at `tip` is fine. Never raises: main has moved by now,
    and a land must finish; a failure is logged and `git lane doctor` names it.
    Returns "created", "present" or "failed"."""
    ref = ref_name(epoch)
    res = git.run(
        [
            "update-ref",
            "--no-deref",  # never through a symbolic ref someone put at this name
            "--create-reflog",
            "-m",
            f"git-lane: landed {lane or ''}".rstrip(),
            ref,
            tip,
            "",
        ],
        repo.common_dir,
        check=False,
    )
    if res.ok:
        return "created"
    now = git.ref_sha(repo.common_dir, ref)
    if now == tip:
        return "present"
    repo.store.event(
        "warning",
        lane=lane,
        code="landed_ref_failed",
        ref=ref,
        tip=tip,
        found=now,
        stderr=res.stderr.strip()[:500],
    )
    return "failed"


def relation(repo: Repo, main_sha: str, tip: str) -> str:
    """Where main stands against the landed tip: "at"; "behind" (main is an ancestor of
    it: rewound, put back by a fast-forward); "ahead" (it is an ancestor of main: main has
    commits no land put there); "diverged" (neither)."""
    if main_sha == tip:
        return "at"
    if git.is_ancestor(repo.common_dir, main_sha, tip):
        return "behind"
    if git.is_ancestor(repo.common_dir, tip, main_sha):
        return "ahead"
    return "diverged"
