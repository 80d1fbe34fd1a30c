"""`git lane restore-main`: put main back where the last land left it (the newest
vouched `refs/git-lane/landed/*`, else the baseline ref while epoch.json agrees), after
something moved it outside any ref transaction (a reflog rewind, a branch copy, main made
a symbolic ref). Never where only git-lane's state files (plain files) say a land left
it (red team 17 hooks F4): that is a warning, or, with no landed ref to go to,
`landed_tip_unvouched`.

Only ever a fast-forward back to the landed tip (main an ancestor of it), or turning a
symbolic main back into a plain ref at it (the commits of its target stay on the target).
A loose main file git cannot read as a ref (empty or garbled: a write cut short; a link to
a directory), or a symbolic link git reads through whatever it reads as (its text no
`refs/...`: whoever may write the file it leads to moves main unseen), is first moved into
kept/, never deleted; main is then what lies beneath it (a packed value, or nothing) and is
put back as above.
Main ahead of the landed tip, or off to the side, holds commits no land put there: that is
refused, naming them, for the owner to decide. Runs under the integration lock with the
lock record naming exactly this move, as land does, so the reference-transaction hook
lets it through; refused to workers."""

from __future__ import annotations

import os
from pathlib import Path

from guard import dirfd, git, landed, landing, lane, lock, oversize
from guard.errors import GitError, Refusal
from guard.repo import Foreign, Repo, packed_refs_words
from guard.results import RestoreMainResult

LOCK_LABEL = "(restore-main)"  # the lock record's lane field: no lane is being landed


def run(repo: Repo) -> RestoreMainResult:
    lane.forbid_worker("restore-main")
    # before any git reads a ref (each would wait on a FIFO there for ever)
    found = keep_blocking_packed_refs(repo)
    what, aside = found if found is not None else ("packed-refs", None)
    try:
        res = _run(repo)
    except Refusal as r:
        if aside is not None:  # said with the refusal too: it was moved all the same
            r.message += f" ({what}, no file git could read, was kept at {aside} first)"
            r.details["packed_refs_kept" if what == "packed-refs" else "ref_file_kept"] = aside
        raise
    if aside is not None:
        res["warnings"].insert(
            0,
            f"{what} was no file git could read (a FIFO, a directory, a link to one: "
            f"every git waited on it or failed): it is kept at {aside}",
        )
    return res


def _run(repo: Repo) -> RestoreMainResult:
    try:
        main_ref = repo.main_ref
    except Refusal as none:
        # a symbolic main pointing nowhere, or main deleted outright, reads as no main at
        # all; with a landed tip to go back to, it is exactly what restore-main puts right
        gone = _dangling_main(repo) or deleted_main(repo)
        if none.code != "no_main_branch" or gone is None or landed.last(repo) is None:
            raise
        main_ref = gone
    try:
        held = lock.acquire(repo, LOCK_LABEL, "", "")
    except Refusal as busy:
        if busy.code != "lock_busy":
            raise
        raise Refusal(
            "lock_busy",
            busy.message,
            next=["git lane restore-main"],
            details=busy.details,
            alternatives=["git lane status"],
        ) from None
    try:
        if repo.store.landing_path.exists():
            landing.recover_locked(repo, held)  # a dead land first: it may be the last land
        return _restore_locked(repo, held, main_ref)
    finally:
        lock.release(repo, held)


def _restore_locked(repo: Repo, held: lock.Held, main_ref: str) -> RestoreMainResult:
    refs = landed.all_landed(repo)
    last = landed.last(repo, refs)
    claims = landed.unproven(repo, last, refs)
    if (last is not None and last.ref is None) or (last is None and claims):
        # only state keeps it (a baseline the ref does not hold), or only state names a
        # land: plain files, never where main is moved
        raise unvouched_refusal(repo, main_ref, claims, refs)
    if last is None:
        raise Refusal(
            "no_landed_tip",
            "nothing has been landed in this repository, so there is no landed tip to put main back at",
            next=["git lane doctor"],
        )
    where = last.ref or str(repo.store.epoch_path)
    if not git.has_commit(repo.common_dir, last.sha):
        raise Refusal(
            "landed_commit_missing",
            f"the last landed tip {last.sha[:12]} ({last.what}, from {where}) is not in this repository "
            "any more (deleted past the ref that kept it: a prune with a shallow file, or by hand)",
            next=["git lane doctor"],
            details={"epoch": last.epoch, "landed": last.sha, "from": where},
        )
    link = repo.foreign_main_link()
    unlinked: list[str] = []
    while link is not None and link.hard:
        if link.path in unlinked:  # linked again at once: someone is racing this
            raise Refusal(
                "main_not_plain",
                f"{link.words()}, and it was linked again after restore-main gave it a file "
                "of its own: something outside git-lane is linking it; nothing more was changed",
                next=[f"ls -li -- {git.q(os.path.join(repo.common_dir, link.path))}"],
                details={"ref": link.path, "link": None, "names": link.names},
            )
        own_file(repo, link.path)
        unlinked.append(link.path)
        link = repo.foreign_main_link()
    if link is not None and link.path != "packed-refs" and link.ref != main_ref:
        link = None  # (master's link while main is main: no main's)
    if link is not None and not movable(link):
        raise Refusal(
            "main_not_plain",
            f"{link.words()}: whoever may write what it leads to moves main with no ref "
            "transaction, and restore-main cannot make main plain again on its own (moving "
            "it would take every ref read through it out of git's sight): the next copies "
            "what git reads there into a plain file or directory, keeps the link in kept/ "
            "(never deleted), and puts main back",
            next=hand_moves(repo, link),
            details={"ref": link.path, "link": link.text},
        )
    link_text = link.text if link is not None else None
    kept = _set_aside(repo, main_ref, link.path if link is not None else None)
    target = git.symref(repo.common_dir, main_ref, first=True)  # main's own, not its chain's end
    cur = repo.ref_sha(main_ref) or "0" * len(last.sha)  # a dangling symbolic main: none
    details = {
        "main": cur,
        "landed": last.sha,
        "epoch": last.epoch,
        "from": where,
        "symref": target,
        "kept": kept,
    }
    if target is None and cur.strip("0"):
        rel = landed.relation(repo, cur, last.sha)
        if rel == "at" and kept is None and not unlinked:
            res = _result(repo, "unchanged", main_ref, cur, last, None, ("not_hub", ""))
            return _said(repo, res, main_ref, last, claims)
        if rel not in ("at", "behind"):
            raise moved_refusal(repo, main_ref, cur, last, rel, details)
    # (what lies beneath a file set aside: there already; a file given its own inode: as
    # it was)
    if cur != last.sha or (kept is None and (target is not None or not unlinked)):
        _update(repo, held, main_ref, cur, last, target, details)
    hub = repo.hub()
    if cur.strip("0") and kept is None:
        carried = landing.carry_hub(hub.path if hub is not None else None, main_ref, cur, last.sha)
    else:
        # main was deleted, or a broken file stood for it (the packed value beneath it is
        # no tree the hub was at): the hub's index and files were left as they were (at
        # the landed tip, unless someone changed them since), and there is no old tree to
        # carry them from; `git status` there shows any difference, nothing is overwritten
        carried = ("not_hub", "")
    repo.store.event(
        "restore_main",
        code="restored",
        main_before=cur,
        main_after=last.sha,
        epoch=last.epoch,
        symref=target,
        kept=kept,
        unlinked=unlinked or None,
        hub=carried[0],
        hub_stderr=carried[1] or None,
        unvouched=[list(c) for c in claims] or None,
    )
    res = _result(
        repo,
        "restored",
        main_ref,
        cur,
        last,
        target,
        carried,
        hub.path if hub is not None else None,
    )
    _said(repo, res, main_ref, last, claims)
    for path in unlinked:
        res["warnings"].append(
            f"{path} was a file with more than one name (a hard link, which git never makes): "
            "it is a file of its own now, with the same content; the other names keep the "
            "old file as it was"
        )
    if kept is not None and link_text is not None:
        res["warnings"].append(
            f"{link.path if link is not None else main_ref} was a symbolic link to "
            f"{git.shown(link_text)}, which git read main through as a plain ref (no "
            f"symbolic ref): it is kept at {kept}"
        )
    elif kept is not None:
        res["warnings"].append(
            f"{main_ref} was a file git could not read as a ref (a write cut short, a link): "
            f"it is kept at {kept}"
        )
    return res


def _update(
    repo: Repo,
    held: lock.Held,
    main_ref: str,
    cur: str,
    last: landed.Landed,
    target: str | None,
    details: dict[str, object],
) -> None:
    # the lock record names exactly this move: the reference-transaction hook lets main
    # move only to the record's tip from its main_before, for this process
    lock.update(repo, held, main_before=cur, tip=last.sha)
    args = [
        "update-ref",
        "-m",
        f"git-lane: restore-main to {'land ' + str(last.epoch) if last.epoch else 'the baseline'}",
        main_ref,
        last.sha,
        cur,
    ]
    if target is not None:
        args.insert(1, "--no-deref")  # replace the symbolic ref itself, not its target
        if not cur.strip("0"):
            args.pop()  # it points nowhere: there is no old value to compare with
    try:
        git.run(args, repo.common_dir)
    except GitError as exc:
        now = repo.ref_sha(main_ref)
        if now != last.sha:
            raise Refusal(
                "main_update_failed",
                f"git refused to move {main_ref} from {cur[:12]} to {last.sha[:12]} (it is now {str(now)[:12]}): "
                f"{exc.stderr.strip()}",
                # a main that resolves to nothing (dangling, looping, deleted) has no
                # reflog git will show: `git reflog` would fail, and the && chain with it
                next=[f"git reflog -5 {main_ref}", "git lane doctor"]
                if now is not None
                else ["git lane doctor"],
                details={**details, "now": now, "stderr": exc.stderr},
            ) from None


def own_file(repo: Repo, rel: str) -> None:
    """Give the file `rel` (relative to the common dir: main's loose ref, packed-refs, a
    loose ref under refs/git-lane/) a file of its own, as git writes one: its content
    copied (a regular file, through directory fds, no link followed, the inode its lstat
    names, in chunks; a ref at most REF_MAX bytes) into `rel.lock`, made
    O_EXCL (git holds that name while it writes the file: never two writers), then
    renamed over it. The new inode has one name; the old one is left to its other names,
    content and all (never deleted, never written: what a lane's ref under
    refs/heads/lane/ holds stays). Refused, naming the file, when that cannot be done."""
    parent, _, name = rel.rpartition("/")
    common = os.fspath(repo.common_dir)
    lock_name = f"{name}.lock"
    try:
        dfd, _ = dirfd.walk(common, parent)
        try:
            # copied through an fd checked against the lstat, in chunks: a ref at most
            # REF_MAX bytes (a sparse 3 GB one is never read), packed-refs streamed
            limit = None if rel == "packed-refs" else oversize.REF_MAX
            dirfd.copy_over(dfd, name, lock_name, limit)  # O_EXCL: ours from there on
        finally:
            os.close(dfd)
    except OSError as exc:
        path = os.path.join(common, rel)
        raise Refusal(
            "main_update_failed",
            f"{path} has more than one name (a hard link), and restore-main could not give "
            f"it a file of its own ({exc.strerror or exc}; {lock_name} held: git is writing "
            "it): nothing was changed there",
            next=[f"ls -li -- {git.q(path)}", "git lane restore-main"],
            details={"file": path, "error": str(exc)},
        ) from None
    repo.store.event("restore_main_unlinked", code="unlinked", file=rel)


def movable(link: Foreign) -> bool:
    """Can restore-main move what Repo.foreign_main_link found into kept/ itself? main's
    own link, or a link at a directory of main's name below refs/heads/ (what else was
    read through it stays where it leads, under its own name). Not `refs`, `refs/heads`
    or `packed-refs`: every ref read through them would vanish from git's sight."""
    return link.text is not None and (link.path == link.ref or link.path.startswith("refs/heads/"))


def hand_moves(repo: Repo, link: Foreign) -> list[str]:
    """The `next` that makes main plain again by hand where restore-main does not
    (movable): a copy of what git reads through the link into a plain file or directory
    (through the link, the one time, by the owner), the link kept in kept/, the copy put
    in its place, then restore-main (which puts main back at the last landed tip, or
    names what moved it). A packed-refs that is no file at all is only kept: git reads no
    ref from it."""
    common = os.fspath(repo.common_dir)
    path = os.path.join(common, link.path)
    _, moves = repo.kept_moves(link.path.replace("/", "-"), common, [link.path])
    if link.text is None:
        return [*moves, "git lane restore-main"]
    copy = f"{path}.gitlane-copy"
    take = (
        f"cp -- {git.q(path)} {git.q(copy)}"
        if link.path == "packed-refs"
        else f"cp -R -- {git.q(path + '/.')} {git.q(copy)}"
    )
    return [take, *moves, f"mv -n -T -- {git.q(copy)} {git.q(path)}", "git lane restore-main"]


def plain_again(repo: Repo, link: Foreign) -> list[str]:
    """The whole way back to a plain main from what foreign_main_link found."""
    return ["git lane restore-main"] if movable(link) else hand_moves(repo, link)


def _set_aside(repo: Repo, main_ref: str, foreign: str | None = None) -> str | None:
    """Where a broken loose main file (Repo.broken_ref_file: empty, garbled, a link git
    reads as no ref) or a foreign link (`foreign`, its path: Repo.foreign_main_link, a
    link git reads main through, at main or at a directory on its way, whatever it reads
    as) was moved, or None when main is no such file.
    git refuses every update of a broken ref ("reference broken"), and writes main
    through a foreign link (the hooks refuse every update while one is there), so it is
    moved out of the way: one rename
    through directory fds (a link moved itself, never followed) into
    `<common>/git-lane/kept/`, never deleted (it may be someone's data), under the
    integration lock. Refused, naming the `mv`, when it cannot be moved there."""
    if not foreign:
        if repo.ref_sha(main_ref) is not None or git.symref(repo.common_dir, main_ref, first=True):
            return None
        if not repo.broken_ref_file(main_ref):
            return None
    common = os.fspath(repo.common_dir)
    try:
        kept = _into_kept(repo, foreign or main_ref)
    except OSError as exc:
        at = foreign or main_ref
        _, moves = repo.kept_moves(at.replace("/", "-"), common, [at])
        raise Refusal(
            "main_update_failed",
            f"{main_ref} is a file git cannot read as a ref (a write cut short, a link), "
            f"so git refuses every update of it, and it could not be moved into kept/ "
            f"({exc.strerror or exc}): the next moves it there (kept, not deleted), then "
            "puts main back",
            next=[*moves, "git lane restore-main"],
            details={"file": os.path.join(common, at), "error": str(exc)},
        ) from None
    repo.store.event("restore_main_kept", code="kept", file=foreign or main_ref, kept=str(kept))
    return str(kept)


def _into_kept(repo: Repo, rel: str) -> Path:
    """Move the entry `rel` of the common dir into a new name of git-lane's kept/ (where it
    is now): one rename through directory fds, a link moved itself (never followed), a
    FIFO never opened. OSError when it cannot be."""
    parent, _, name = rel.rpartition("/")
    kept = repo.kept_dir(rel.replace("/", "-"))
    common = os.fspath(repo.common_dir)
    sfd, _ = dirfd.walk(common, parent)
    try:
        kfd, _ = dirfd.walk(common, os.path.relpath(kept.parent, common), create=True)
        try:
            os.rename(name, kept.name, src_dir_fd=sfd, dst_dir_fd=kfd)
        finally:
            os.close(kfd)
    finally:
        os.close(sfd)
    return kept


def keep_blocking_packed_refs(repo: Repo) -> tuple[str, str] | None:
    """A `packed-refs` git cannot read as a file (Repo.packed_refs_blocks: a FIFO every
    git would wait on for ever, a directory, a link to one), or main's loose ref that is
    a FIFO, a socket, a device or a link to one (Repo.ref_file_blocks, red team 15C F2),
    moved into kept/ (never opened, never deleted) before any git reads a ref: (its path,
    where it is now), None when there is no such thing. It holds no ref git could read;
    what git reads then is the other refs, and main is put back as for a main deleted.
    Refused (main_not_plain), naming the `mv` that keeps it, when it cannot be moved."""
    found = repo.ref_file_blocks()
    if found is None:
        return None
    common = os.fspath(repo.common_dir)
    try:
        kept = _into_kept(repo, found.path)
    except OSError as exc:
        _, moves = repo.kept_moves(found.path.replace("/", "-"), common, [found.path])
        raise Refusal(
            "main_not_plain",
            f"{packed_refs_words(found)}, and it could not be moved into kept/ "
            f"({exc.strerror or exc}): the next moves it there (kept, not deleted), then "
            "puts main back",
            next=[*moves, "git lane restore-main"],
            details={"ref": found.path, "link": found.text, "error": str(exc)},
        ) from None
    repo.store.event("restore_main_kept", code="kept", file=found.path, kept=str(kept))
    return found.path, str(kept)


def deleted_main(repo: Repo) -> str | None:
    """refs/heads/main (or the configured name) when it does not exist at all (deleted
    behind git-lane's back: `update-ref -d` with the hooks off); None otherwise."""
    configured = repo.owner_config.get("main_branch")
    ref = f"refs/heads/{configured or 'main'}"
    if git.symref(repo.common_dir, ref) is None and repo.ref_sha(ref) is None:
        return ref
    return None


def _dangling_main(repo: Repo) -> str | None:
    """refs/heads/main (or master, or the configured name) when it is a symbolic ref to a
    ref that does not exist (git then sees no main); None otherwise."""
    configured = repo.owner_config.get("main_branch")
    for name in [configured] if configured else ["main", "master"]:
        ref = f"refs/heads/{name}"
        if git.symref(repo.common_dir, ref) is not None and repo.ref_sha(ref) is None:
            return ref
    return None


def _result(
    repo: Repo,
    code: str,
    main_ref: str,
    before: str,
    last: landed.Landed,
    target: str | None,
    carried: tuple[str, str],
    hub: str | None = None,
) -> RestoreMainResult:
    res: RestoreMainResult = {
        "ok": True,
        "code": code,
        "main": {
            "branch": repo.main_branch,
            "before": before,
            "after": last.sha,
            "was_symref_to": target,
        },
        "landed": {"epoch": last.epoch, "ref": last.ref, "sha": last.sha},
        "hub": {"path": hub, "state": carried[0]},
        "warnings": [],
        "unvouched": [],
    }
    if carried[0] == "failed" and hub is not None:
        res["warnings"].append(
            f"main is back at {last.sha[:12]}, but the hub {hub} could not be carried along "
            f"({carried[1].strip()[:200]}): git -C {git.q(hub)} status"
        )
    return res


def _claimed(claims: list[tuple[int, str]]) -> str:
    return ", ".join(
        f"land {e} at {t[:12]}" if e else f"a baseline at {t[:12]}" for e, t in claims[:5]
    ) + (" ..." if len(claims) > 5 else "")


def by_hand(main_ref: str, tip: str, cur: str | None) -> str:
    """The owner's own move of main to `tip`, a commit only git-lane's state files name
    (never run by git-lane: the owner runs it once `git log TIP` shows it is what was
    landed), then reconcile, which gives it its landed ref now that main holds it."""
    return (
        f"git -c core.hooksPath=/dev/null update-ref -m 'git-lane: main put at a land by hand' "
        f"{main_ref} {tip} {cur or git.q('')} && git lane reconcile"
    )


def _said(
    repo: Repo,
    res: RestoreMainResult,
    main_ref: str,
    last: landed.Landed,
    claims: list[tuple[int, str]],
) -> RestoreMainResult:
    """A result that names the lands only the state files record (landed.unproven): main
    was put at the landed ref, not at them."""
    res["unvouched"] = [{"epoch": e, "sha": t} for e, t in claims]
    if claims:
        t = claims[-1][1]
        res["warnings"].append(
            f"git-lane's state files (epoch.json, the audit log, landing.json: plain files any "
            f"process of your uid may write) name {_claimed(claims)}, which no landed ref "
            f"records: main was put at {last.what} ({last.sha[:12]}, {last.ref}), never there. "
            f"Owner only, once `git log {t}` shows it is what was landed: "
            + by_hand(main_ref, t, last.sha)
        )
    return res


def unvouched_refusal(
    repo: Repo, main_ref: str, claims: list[tuple[int, str]], refs: list[landed.Landed]
) -> Refusal:
    """Nothing to put main back at but what the state files say (landed.unproven): refused,
    main left where it is, the owner's hand move an alternative."""
    cur = repo.ref_sha(main_ref)
    newest = refs[-1] if refs else None
    alts = [by_hand(main_ref, t, cur) for _, t in claims[-1:]]
    return Refusal(
        "landed_tip_unvouched",
        f"git-lane's state files (epoch.json, the audit log, landing.json: plain files any "
        f"process of your uid may write) name {_claimed(claims) or 'a land'}, which no landed "
        "ref records, and there is no landed ref (nor a baseline the ref and state agree "
        "on) to put main back at: only a land's own ref transaction says where a land left "
        f"main, so {main_ref} was not moved (git lane doctor says what disagrees; the "
        "alternative, for the owner only and once `git log` of that tip shows it is what was "
        "landed, moves main there by hand)",
        next=["git lane doctor"],
        alternatives=alts,
        details={
            "main": cur,
            "claimed": [{"epoch": e, "sha": t} for e, t in claims],
            "landed": None
            if newest is None
            else {"epoch": newest.epoch, "ref": newest.ref, "sha": newest.sha},
            "baseline": landed.baseline_ref(repo),
        },
    )


def moved_refusal(
    repo: Repo, main_ref: str, cur: str, last: landed.Landed, rel: str, details: dict[str, object]
) -> Refusal:
    """main holds commits no land put there: name them; putting main back is the owner's call."""
    extra = git.commits(repo.common_dir, f"{last.sha}..{cur}")
    shown = ", ".join(f"{sha[:12]} {subject[:60]}" for sha, subject in extra[:5])
    rescue = f"rescue-main-{cur[:12]}"
    by_hand = (
        f"git branch {rescue} {cur} && "
        f"git -c core.hooksPath=/dev/null update-ref -m 'git-lane: main put back by hand' {main_ref} {last.sha} {cur}"
    )
    message = (
        f"the last landed tip {last.sha[:12]} ({last.what}): commits no land put there "
        f"({shown}); restore-main only fast-forwards main back, so nothing was changed "
        "(git lane doctor explains what moved it)"
    )
    claimed = [e for e, t in landed.unproven(repo, last) if t == cur and e]
    if claimed:
        message += (
            f"; git-lane's state files name {cur[:12]} as land {claimed[-1]}, which no "
            "landed ref records: git lane doctor says how to tell a lost ref from a forged file"
        )
    nxt = [f"git log --oneline {last.sha}..{cur}", "git lane doctor"]
    more = {**details, "relation": rel, "commits": [sha for sha, _ in extra]}
    if rel == "ahead":
        n = f"{len(extra)}{'+' if len(extra) >= 20 else ''}"
        return Refusal(
            "main_ahead",
            f"{main_ref} is {n} commit(s) ahead of {message}",
            next=nxt,
            alternatives=[by_hand],
            details=more,
        )
    return Refusal(
        "main_diverged",
        f"{main_ref} ({cur[:12]}) has left the history of {message}",
        next=nxt,
        alternatives=[by_hand],
        details=more,
    )
