"""`git lane doctor`: is every layer in place? Main where the last land left it (the
newest landed ref), a plain ref that nothing shadows; every land kept by a landed ref; no
shallow file or grafts hiding history gc would delete; hooks present, executable and as
install would write them; nothing that switches them off in any worktree (core.hooksPath
from any config source, worktree config, hook.*); no replacement refs; the integration
lock and the lanes in a sane state; Landlock available for the sandbox. Each check is ok,
warn or fail with the exact command that fixes it; the result is not ok when any check
fails."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from collections.abc import Callable

from guard import git, gitlocks, landed, oversize, sandbox
from guard.commands import install as hookinstall
from guard.commands import restore_main
from guard.errors import GitError, Refusal, join_next
from guard.git import q
from guard.repo import Foreign, Repo, packed_refs_words
from guard.results import Check, DoctorResult
from guard.store import read_regular
from guard.store import LaneRecord

OK, WARN, FAIL = "ok", "warn", "fail"


def finding(name: str, status: str, message: str, fix: str | None = None) -> Check:
    return {"name": name, "status": status, "message": message, "fix": fix}


# -- main and config --------------------------------------------------------------------
# Some git commands write refs outside any ref transaction, where no hook sees them: a
# reflog rewind (`git reflog delete --updateref --rewrite <main>@{0}`, `reflog expire
# --updateref`), `git symbolic-ref`, `git branch -c/-m` on git 2.39. Each check below
# names one command that puts back what the last land left.
def check_main(repo: Repo) -> list[Check]:
    link = repo.foreign_main_link()
    if link is not None:
        return [_foreign_main_link(repo, link)]
    sha = repo.main_sha()
    refs = landed.all_landed(repo)
    last = landed.last(repo, refs)
    target = git.symref(repo.common_dir, repo.main_ref)
    if target is not None:
        if last is not None:
            fix = "git lane restore-main"
        else:  # nothing landed yet: make it a plain ref where it points now
            fix = f"git update-ref --no-deref {repo.main_ref} {sha}"
        return [
            finding(
                "main",
                FAIL,
                f"{repo.main_ref} is a symbolic ref to {target}: main moves whenever {target} does",
                fix,
            )
        ]
    out = [finding("main", OK, f"main is {repo.main_branch} at {sha[:12]}")]
    if last is None or sha == last.sha or repo.store.landing_path.exists():
        return out
    where = (
        last.ref
        if last.ref
        else f"epoch.json (land {last.epoch})"
        if last.epoch
        else "the baseline epoch.json keeps"
    )
    reflog = git.run(
        ["reflog", "-1", "--format=%gs", repo.main_ref], repo.common_dir, check=False
    ).stdout.strip()
    said = f" (its reflog says: {reflog})" if reflog else ""
    if not git.has_commit(repo.common_dir, last.sha):
        out.append(
            finding(
                "main_moved",
                FAIL,
                f"{repo.main_ref} is at {sha[:12]}, not at {last.sha[:12]} {last.left}{said}, "
                "and that commit is gone (it landed before landed refs kept it)",
                f"git reflog -5 {repo.main_ref}  (owner: find the landed commit; no command restores it)",
            )
        )
        return out
    rel = landed.relation(repo, sha, last.sha)
    msg = f"{repo.main_ref} is at {sha[:12]}, not at {last.sha[:12]} {last.left} ({where}){said}"
    if rel == "behind":
        out.append(
            finding(
                "main_moved",
                FAIL,
                msg
                + ": it was moved back outside any ref transaction (a reflog rewind, a branch copy)"
                + (
                    ""
                    if last.ref
                    else "; only epoch.json keeps that baseline (the ref disagrees), and "
                    "restore-main moves main only to what a ref holds: see `baseline`"
                ),
                "git lane restore-main" if last.ref else None,
            )
        )
        return out
    what = "ahead of it by commits" if rel == "ahead" else "off its history, on commits"
    claimed = [e for e, t in landed.unproven(repo, last, refs) if t == sha and e]
    if claimed:
        # a land the state files name at main's own tip, its landed ref gone: either the
        # ref was lost (a FIFO at it goes to kept/) or the file was written beside a main
        # moved past the hooks (red team 17 final F1): the owner tells which
        n = claimed[-1]
        by = ", ".join(landed.named_by(repo, n, sha)) or "nothing"
        out.append(
            finding(
                "main_moved",
                FAIL,
                msg + f": git-lane's state files ({by}) name it as land {n}, but no landed ref "
                "records that land (plain files any process of your uid may write). If "
                f"`git log --oneline {last.sha[:12]}..{sha[:12]}` is land {n} as you made it, "
                "`git lane reconcile` writes its ref when two state files name it; if not, "
                "main was moved past the hooks: put it back by hand (restore-main's `main_ahead` "
                "alternative) and land those commits from a lane",
                f"git log --oneline {last.sha}..{sha}",
            )
        )
        return out
    out.append(
        finding(
            "main_moved",
            FAIL,
            msg
            + f": it is {what} no land put there; restore-main refuses that, keeping them is the owner's call",
            f"git branch rescue-main-{sha[:12]} {sha} && git -c core.hooksPath=/dev/null update-ref "
            f"{repo.main_ref} {last.sha} {sha}  (owner only: keeps those commits on rescue-main-{sha[:12]}, "
            "then land them from a lane)",
        )
    )
    return out


def _foreign_main_link(repo: Repo, link: Foreign) -> Check:
    """git reads main through a file git-lane never makes (Repo.foreign_main_link: a link
    at main or on its way, a packed-refs that is no regular file): failed whatever it reads
    as. restore-main moves a link at main (or at a directory of its name) into kept/ and
    makes main a plain ref at the last landed tip; the others take a copy by hand first
    (restore_main.hand_moves). With nothing to go back to (no land, no baseline), the
    next keeps it and makes main plain where it reads now."""
    if link.hard:
        return _hard_linked(repo, link)
    # (packed-refs not read through: what it leads to may be a FIFO git would block on)
    sha = repo.ref_sha(link.ref) if link.path != "packed-refs" else None
    reads = f"it reads as {sha[:12]}" if sha else "it reads as no commit"
    if link.path == "packed-refs":
        reads = f"main is {link.ref}, not read through it here"
    if landed.last(repo) is not None:
        fix = join_next(restore_main.plain_again(repo, link))
    elif not restore_main.movable(link):
        fix = join_next(restore_main.hand_moves(repo, link)[:-1])
    else:
        common = os.fspath(repo.common_dir)
        _, moves = repo.kept_moves(link.path.replace("/", "-"), common, [link.path])
        fix = join_next([*moves, *([f"git update-ref {link.ref} {sha} ''"] if sha else [])])
    return finding(
        "main",
        FAIL,
        f"{link.words()} ({reads}): git-lane never makes one (a symbolic ref is `ref:` "
        "or a link to refs/..., at main itself). Whoever may write what it leads to (a lane may write "
        "its own admin dir) moves main with no ref transaction, so the hooks refuse "
        "every ref update and exec --sandbox refuses to start while it is there",
        fix,
    )


def _hard_linked(repo: Repo, link: Foreign) -> Check:
    """A protected ref file with more than one name (Foreign.hard, red team 15B F3): a
    write through another name (a lane's ref, a file of its admin dir) changes it with no
    ref transaction, and the hooks cannot see that. restore-main gives it (and every other
    such file) a file of its own; with nothing to go back to (no land, no baseline), the
    fix does the same by hand: a copy made in a new kept/ directory, renamed over it (the
    other names keep the old file)."""
    if landed.last(repo) is not None:
        fix = "git lane restore-main"
    else:
        path = os.path.join(repo.common_dir, link.path)
        copy = repo.kept_dir(link.path.replace("/", "-")) / os.path.basename(link.path)
        fix = join_next(
            [
                f"mkdir -p -- {q(copy.parent)}",
                f"cp -- {q(path)} {q(copy)}",
                f"mv -f -T -- {q(copy)} {q(path)}",
            ]
        )
    return finding(
        "main",
        FAIL,
        f"{link.words()}: whoever may write one of its other names (a lane may write its "
        "ref files under refs/heads/lane/ and its own admin dir) changes it with no ref "
        "transaction, which no hook sees, so exec --sandbox refuses to start and land does "
        "not start while it is there",
        fix,
    )


def check_landed(repo: Repo) -> list[Check]:
    """The last land has its landed ref (lands from before they existed get one from
    reconcile), so gc cannot delete what was landed whatever happens to main; and no
    landed ref stands for a land nothing else records (landed.unvouched)."""
    refs = landed.all_landed(repo)
    ep = repo.store.read_epoch()
    last = landed.last(repo, refs)
    newest = last.epoch if last is not None else 0  # vouched: a ref alone proves nothing
    forged = landed.unvouched(repo, refs)
    out: list[Check] = [_unvouched(repo, r) for r in forged]
    if ep.epoch < newest:
        return [
            *out,
            finding(
                "epoch",
                FAIL,
                f"epoch.json says {ep.epoch}, but land {newest} happened "
                f"({landed.ref_name(newest)}, and the audit log records it): the epoch was "
                "set back by hand, so a lane made stale since then could pass for fresh",
                "git lane reconcile",
            ),
        ]
    have = {r.epoch: r.sha for r in refs}
    try:
        main: str | None = repo.ref_sha(repo.main_ref)
    except Refusal:
        main = None
    lost, claims = [], []
    for e, t in landed.missing(repo, refs):
        why = landed.unprovable(repo, e, t, have, main)
        if why is None:
            lost.append(e)
        else:
            claims.append(_unproven_land(repo, e, t, why, main))
    out += claims
    gone = [e for e in lost if e != ep.epoch]
    if gone:
        out.append(
            finding(
                "landed refs",
                WARN,
                f"land(s) {', '.join(map(str, gone[:5]))}{' ...' if len(gone) > 5 else ''} "
                "have no landed ref, though the audit log records them (one that was no "
                "file, a FIFO, was moved into kept/): a rewrite of main followed by gc "
                "could delete them",
                "git lane reconcile",
            )
        )
    if ep.epoch and ep.main_after and not any(r.epoch == ep.epoch for r in refs) and not claims:
        return [
            *out,
            finding(
                "landed refs",
                WARN,
                f"land {ep.epoch} ({ep.main_after[:12]}) has no {landed.ref_name(ep.epoch)}: "
                "a rewrite of main followed by gc could delete it",
                "git lane reconcile",
            ),
        ]
    # every landed commit must still be there: a prune run with a shallow file of the
    # caller's choosing (`git --shallow-file F prune`) deletes history no ref rule guards
    if refs:
        walk = git.run(
            # `--`: run in the common dir, a loose ref's name is also a file there
            ["rev-list", "--quiet", *(r.ref for r in refs if r.ref), "--"],
            repo.common_dir,
            check=False,
        )
        if not walk.ok:
            out.append(
                finding(
                    "landed history",
                    FAIL,
                    "commits behind the landed refs are missing from the object store "
                    f"({walk.stderr.strip().splitlines()[0] if walk.stderr.strip() else 'git rev-list failed'}): "
                    "landed work was deleted (a prune with a shallow file, or by hand); only a "
                    "clone or backup has it now",
                    "git fsck --connectivity-only",
                )
            )
    return out or [
        finding("landed refs", OK, f"{len(refs)} landed tip(s) kept under {landed.PREFIX}")
    ]


def _unproven_land(repo: Repo, epoch: int, tip: str, why: str, main: str | None) -> Check:
    """A land the state files name (epoch.json, a land event, landing.json: plain files
    any unconfined process of the owner's uid may write) that no landed ref records, and
    whose tip reconcile cannot prove landed (landed.unprovable): never taken as landed,
    so nothing moves main there or writes its ref (red team 17 hooks F4). Named by epoch.json
    alone, it fails, and the fix keeps that file aside for reconcile to rebuild from the
    audit log and the landed refs; named by the audit log (append-only: it stays), it
    warns. Only the owner, who knows whether that land happened, moves main there by
    hand (said in the message, never the fix)."""
    hand = restore_main.by_hand(repo.main_ref, tip, main)
    msg = (
        f"git-lane's state files name land {epoch} at {tip[:12]}, which no landed ref "
        f"records, and {why}: a plain file said it, no land's ref transaction did, so it is "
        "not taken as landed (restore-main and land go by the landed refs). Owner only, "
        f"once `git log {tip}` shows it is what land {epoch} landed: {hand}"
    )
    ep = repo.store.read_epoch()
    logged = any(
        ev.get("kind") == "land" and (ev.get("epoch"), ev.get("main_after")) == (epoch, tip)
        for ev in repo.store.events()
    )
    if (ep.epoch, ep.main_after) != (epoch, tip) or logged:
        return finding("unvouched land", WARN, msg)
    path = repo.store.epoch_path
    return finding(
        "unvouched land",
        FAIL,
        msg + "; the fix keeps epoch.json aside and has reconcile rebuild it",
        f"{git.mv_aside(path, f'{path}.disputed')} && git lane reconcile",
    )


def _unvouched(repo: Repo, r: landed.Landed) -> Check:
    """A landed ref no land event, landing record or epoch.json vouches for: written past
    the hooks (`git -c core.hooksPath=/dev/null update-ref`), it would make a main moved
    the same way look landed. While a land is under way reconcile finishes it (its record
    is the voucher); otherwise the owner removes it, its commit kept on a rescue branch,
    or puts it back at the land that other records name."""
    ref, sha = str(r.ref), r.sha
    real = next((t for e, t in landed.vouchers(repo) if e == r.epoch), None)
    msg = (
        f"{ref} is at {sha[:12]}, but no land event, landing record or epoch.json records "
        f"land {r.epoch} there: it was written past the hooks, and is not taken as landed"
    )
    if repo.store.landing_path.exists():
        return finding(
            "unvouched landed ref", FAIL, msg + " (a land is under way)", "git lane reconcile"
        )
    keep = f"git update-ref {q(f'refs/heads/git-lane-rescue/landed-{r.epoch}-{sha[:12]}')} {sha} ''"
    off = "git -c core.hooksPath=/dev/null update-ref"
    if real is not None:
        msg += f" (land {r.epoch} left main at {real[:12]})"
        fix = f"{keep} && {off} -m 'git-lane: landed ref put back' {ref} {real} {sha}"
    else:
        fix = f"{keep} && {off} -d {ref} {sha}"
    return finding(
        "unvouched landed ref", FAIL, msg + "; the owner's fix keeps its commit on a branch", fix
    )


def check_baseline(repo: Repo) -> list[Check]:
    """Before the first land main is compared with the baseline, which install kept both
    as refs/git-lane/baseline and in epoch.json: the ref deleted or moved past the hooks
    (to hide a main moved the same way, and have the next create record it afresh) is
    named; so is a baseline only the ref or only the audit log still has."""
    last = landed.last(repo)
    if (last is not None and last.epoch) or repo.store.read_epoch().epoch:
        # a land was made: the baseline is no longer read (one epoch.json names with no
        # landed ref is check_landed's `unvouched land`)
        return []
    kept, ref = landed.baseline_kept(repo), landed.baseline_ref(repo)
    if kept is not None and ref == kept:
        return [
            finding("baseline", OK, f"main's baseline {kept[:12]} is kept in the ref and in state")
        ]
    if kept is not None and ref is None:
        return [
            finding(
                "baseline",
                FAIL,
                f"{landed.BASELINE} is gone (deleted past the hooks); epoch.json keeps the "
                f"baseline {kept[:12]}, and main is compared with that",
                "git lane reconcile",
            )
        ]
    if kept is not None and ref is not None:
        if not _held_by_main(repo, kept) and _held_by_main(repo, ref):
            # epoch.json (a plain file: red team 17 hooks F4) names a baseline main never held,
            # the ref one it did: state is put right from the audit log and the ref, the
            # file kept aside; never the ref moved to what the file says
            aside = git.mv_aside(repo.store.epoch_path, f"{repo.store.epoch_path}.disputed")
            return [
                finding(
                    "baseline",
                    FAIL,
                    f"{landed.BASELINE} is at {ref[:12]}, but epoch.json keeps the baseline "
                    f"{kept[:12]}, a commit main never held: epoch.json was edited (a plain "
                    "file), so neither is taken as where main belongs; the fix keeps the file "
                    "aside and has reconcile keep the baseline again from the audit log and the ref",
                    f"{aside} && git lane reconcile",
                )
            ]
        keep = f"git update-ref refs/heads/git-lane-rescue/baseline-{ref[:12]} {ref} ''"
        return [
            finding(
                "baseline",
                FAIL,
                f"{landed.BASELINE} is at {ref[:12]}, but epoch.json keeps the baseline "
                f"{kept[:12]}: the ref was moved past the hooks, main is compared with "
                "epoch.json's; the owner's fix keeps the ref's commit on a branch",
                f"{keep} && git -c core.hooksPath=/dev/null update-ref {landed.BASELINE} {kept} {ref}",
            )
        ]
    logged = landed.baseline_logged(repo)
    if ref is not None:
        if logged is not None and logged != ref:
            return [
                finding(
                    "baseline",
                    FAIL,
                    f"{landed.BASELINE} is at {ref[:12]}, but the audit log recorded the "
                    f"baseline {logged[:12]}: the ref was moved past the hooks",
                    "git lane reconcile",
                )
            ]
        return [
            finding(
                "baseline",
                WARN,
                f"the baseline {ref[:12]} is kept only in {landed.BASELINE} (recorded "
                "before epoch.json kept it too): a delete past the hooks would lose it",
                "git lane reconcile",
            )
        ]
    if logged is not None:
        return [
            finding(
                "baseline",
                FAIL,
                f"{landed.BASELINE} is gone and epoch.json no longer keeps it; the audit log "
                f"recorded the baseline {logged[:12]}",
                "git lane reconcile",
            )
        ]
    return []  # nothing recorded yet (no hooks, or no commit at install)


def _held_by_main(repo: Repo, sha: str) -> bool:
    """Is `sha` main's tip or in its history? False when git cannot tell."""
    try:
        return git.is_ancestor(repo.common_dir, sha, repo.main_sha())
    except (GitError, Refusal):
        return False


def check_shadows(repo: Repo) -> list[Check]:
    """git reads `<main>` as refs/<main>, then refs/tags/<main>, before refs/heads/<main>
    (and a root-level `<main>` first of all): any of them makes `git reset --hard main`,
    `git merge main` and `git lane` users' own commands mean something else. The hooks
    refuse creating them through a ref transaction; `git symbolic-ref` is not one."""
    name = repo.main_branch
    out: list[Check] = []
    shadows = (f"refs/{name}", f"refs/tags/{name}")
    res = git.run(
        ["for-each-ref", "--format=%(refname)%00%(symref)%00%(objectname)", *shadows],
        repo.common_dir,
    )
    for ln in res.lines():
        ref, sym, obj = [*ln.split("\0"), "", ""][:3]
        if ref not in shadows:
            continue  # refs/<main>/x: a prefix match, not a shadow
        if sym:
            fix = f"git symbolic-ref --delete {ref}"
            what = f"a symbolic ref to {sym}"
        else:
            fix = f"git update-ref -d {ref} {obj}"
            what = f"a ref at {obj[:12]}"
        out.append(
            finding(
                "main shadowed",
                FAIL,
                f"{ref} is {what}: git reads it for `{name}` before {repo.main_ref}",
                fix,
            )
        )
    root = Path(os.path.realpath(repo.common_dir)) / name
    if os.path.lexists(root) and not root.is_dir():
        try:
            with os.fdopen(git.open_regular(root, follow=False), "rb") as f:  # never a FIFO's
                content = f.read(200).decode("utf-8", "replace").strip()[:80]
        except OSError:
            content = "?"
        out.append(
            finding(
                "main shadowed",
                FAIL,
                f"{root} ({content}) is a root-level ref: git reads it for `{name}` before {repo.main_ref}",
                f"rm {q(root)}",
            )
        )
    return out or [
        finding("main shadowed", OK, f"nothing is read for `{name}` before {repo.main_ref}")
    ]


def check_shallow(repo: Repo) -> list[Check]:
    """A `shallow` file (written by `git fetch --depth/--shallow-*`) cuts history: gc then
    deletes every commit behind it, landed ones included. What matters is whether it
    hides history this repository has: a clone made shallow keeps its cut commits'
    parents absent, which is harmless; a full repository made shallow has them all."""
    path = Path(os.path.realpath(repo.common_dir)) / "shallow"
    if not path.exists():
        return [finding("shallow", OK, "not a shallow repository")]
    try:
        text = git.read_regular(path).decode("utf-8", "surrogateescape")  # never a FIFO's
        shas = [ln.strip() for ln in text.splitlines() if ln.strip()]
    except OSError as exc:
        return [finding("shallow", FAIL, f"{path} is unreadable: {exc}", f"ls -l {q(path)}")]
    cut = git.shallow_cut(repo.common_dir, shas)
    if not cut:
        # nothing behind the cut is here; still a fail: a lane's `fetch --depth` makes a
        # repository shallow this way, and git-lane's guarantees assume whole history
        fix = (
            f"rm {q(path)}  (every commit it lists has all its parents here)"
            if git.complete_without_shallow(repo.common_dir)
            else "git fetch --unshallow  (owner's decision: needs a remote with the full history)"
        )
        return [
            finding(
                "shallow",
                FAIL,
                f"a shallow repository ({len(shas)} cut commit(s) in {path}): git and git-lane "
                "then read a cut history (a shallow clone, or a fetch --depth in a lane)",
                fix,
            )
        ]
    msg = (
        f"{path} cuts history this repository has at {len(cut)} commit(s) ({', '.join(c[:12] for c in cut[:3])}): "
        "git gc would delete every commit behind them, landed ones included"
    )
    if git.complete_without_shallow(repo.common_dir):
        return [
            finding("shallow", FAIL, msg, f"rm {q(path)}  (every commit it hides is still here)")
        ]
    return [
        finding(
            "shallow",
            FAIL,
            msg + "; some history behind it is missing too, so removing the file would break git",
            "git fetch --unshallow  (owner's decision: needs a remote with the full history)",
        )
    ]


def check_renamed_log(repo: Repo) -> list[Check]:
    """`logs/refs/.tmp-renamed-log`: the reflog git sets aside while it renames a branch
    (it moves OLD's reflog there, then deletes OLD), left when the rename died part way
    (killed, or refused by a hook: git dies with no rollback, and the hook puts it back
    only when it can tell it is that rename's, gl_put_back). git does not refuse a later
    rename over it: the next rename of a branch with a reflog renames that branch's reflog
    onto this name (rename(2) replaces the file), and this history is gone for good. The
    reference-transaction hook refuses a branch delete by anything but `git branch`
    while it is there (it could be the first step of a rename onto main it cannot see).
    The fix moves it into a fresh directory of git-lane's kept/ (`mkdir` of a new name
    fails rather than reuse one, so nothing kept is ever replaced), never deletes it."""
    path = os.path.join(os.path.realpath(repo.common_dir), "logs", "refs", ".tmp-renamed-log")
    if not os.path.lexists(path):
        return [finding("renamed log", OK, "no branch rename left its reflog set aside")]
    dest = repo.kept_dir("tmp-renamed-log")
    return [
        finding(
            "renamed log",
            WARN,
            f"{path} is a reflog git set aside for a branch rename that did not finish "
            "(killed, or refused): the next rename of a branch that has a reflog replaces "
            "it, losing this history for good, and git-lane's hook refuses branch deletes "
            "by anything but git branch while it is there; move it aside (it is some "
            "branch's history: read it with cat)",
            f"mkdir -p -- {q(dest.parent)} && mkdir -- {q(dest)} && "
            f"mv -- {q(path)} {q(dest / 'tmp-renamed-log')}",
        )
    ]


def check_enabled(repo: Repo) -> list[Check]:
    cfg = repo.config
    if cfg.get("enabled") is False:
        return [
            finding(
                "enabled",
                WARN,
                f"enabled = false ({cfg.files.get('enabled')}): hooks and shims pass everything through",
                "git lane config set enabled true",
            )
        ]
    return [finding("enabled", OK, "git-lane is enabled")]


# -- hooks ------------------------------------------------------------------------------
def check_hooks(repo: Repo) -> list[Check]:
    out: list[Check] = []
    hp = hookinstall.hooks_path_setting(repo)
    common = hookinstall.common_hooks_dir(repo)
    if hp is None:
        d = common
        out.append(finding("core.hooksPath", OK, f"unset: git runs the hooks in {common}"))
    else:
        d = Path(hp.value)
        unset = hookinstall._unset_cmd(hp)
        ours_there = (
            d.is_absolute() and d.is_dir() and any(_find_ours(d, n) for n in hookinstall.HOOKS)
        )
        if ours_there:
            out.append(
                finding(
                    "core.hooksPath",
                    OK,
                    f"{hp.value} ({hp.scope} config), where git-lane's hooks are installed",
                )
            )
        else:
            out.append(
                finding(
                    "core.hooksPath",
                    FAIL,
                    f"set to {hp.value} ({hp.scope} config): git runs hooks from there, not from {common}",
                    f"{unset} && git lane install  # or: git lane install --hooks-path",
                )
            )
            return out
    for name in hookinstall.HOOKS:
        out.append(_check_hook(d, name))
    return out


def check_hooks_paths(repo: Repo) -> list[Check]:
    """core.hooksPath as git evaluates it in each worktree, lanes included: every config
    source counts (include.path, includeIf gitdir/onbranch, a worktree's config.worktree,
    -c and GIT_CONFIG_*), and each is named with the command that unsets it there."""
    out: list[Check] = []
    common = hookinstall.common_hooks_dir(repo)
    hp = hookinstall.hooks_path_setting(repo)
    seen = {(hp.scope, hp.value)} if hp is not None else set()  # check_hooks reports that one
    for wt in repo.worktrees():
        if wt.bare or not wt.exists:
            continue
        res = git.run(
            [
                "config",
                "-z",
                "--show-origin",
                "--show-scope",
                "--type=path",
                "--get",
                "core.hooksPath",
            ],
            wt.path,
            check=False,
        )
        if not res.ok or not res.stdout:
            continue  # unset: git runs <common-dir>/hooks, which check_hooks looks at
        scope, origin, value = [*res.stdout.split("\0"), "", "", ""][:3]
        if (scope, value) in seen:
            continue
        d = Path(value) if os.path.isabs(value) else Path(wt.path) / value
        if d.is_dir() and (
            os.path.realpath(d) == os.path.realpath(common)
            or all(_find_ours(d, n) for n in hookinstall.HOOKS)
        ):
            continue
        out.append(
            finding(
                "hooks path",
                FAIL,
                f"in {wt.path}, core.hooksPath = {value} ({scope} config, {origin}): git runs no git-lane hook there",
                _unset_hooks_path(wt.path, scope, origin),
            )
        )
    return out or [finding("hooks path", OK, "every worktree runs the hooks git-lane installed")]


def _unset_hooks_path(where: str, scope: str, origin: str) -> str:
    if origin.startswith("file:"):
        f = origin[len("file:") :]
        f = f if os.path.isabs(f) else os.path.join(where, f)
        return f"git config --file {q(f)} --unset-all core.hooksPath"
    if scope == "command":
        return "unset GIT_CONFIG_COUNT GIT_CONFIG_PARAMETERS  (core.hooksPath comes from the environment or -c)"
    return f"{git.owner_git(where)} config --{scope} --unset-all core.hooksPath"


def _find_ours(d: Path, name: str) -> Path | None:
    h = d / name
    leg = d / f"{name}.legacy"
    if hookinstall.kind(h) == "ours":
        return h
    if hookinstall.kind(h) == "framework" and hookinstall.kind(leg) == "ours":
        return leg
    return None


def _check_hook(d: Path, name: str) -> Check:
    label = f"hook {name}"
    path = _find_ours(d, name)
    if path is None:
        k = hookinstall.kind(d / name)
        what = "missing" if k == "absent" else f"not git-lane's ({d / name} is another {k} hook)"
        return finding(label, FAIL, f"{what}", "git lane install")
    if not os.access(path, os.X_OK):
        return finding(
            label, FAIL, f"{path} is not executable, so git skips it", f"chmod +x {q(path)}"
        )
    text = path.read_text(encoding="utf-8", errors="replace")
    if not hookinstall.same_but_python(text, name):
        return finding(
            label,
            FAIL,
            f"{path} differs from what git lane install writes (modified or outdated)",
            "git lane install",
        )
    legacy = path.with_name(path.name + ".legacy")
    if hookinstall.kind(legacy) == "framework":
        return finding(
            label,
            FAIL,
            f"the pre-commit framework's script sits behind ours at {legacy} and would run itself",
            "git lane install",
        )
    py = hookinstall.embedded_python(text)
    if name == "pre-commit" and (py is None or not os.access(py, os.X_OK)):
        return finding(label, FAIL, f"{path} names Python {py}, which is gone", "git lane install")
    if name == "pre-commit" and not _imports_guard(py, _embedded_pypath(text)):
        return finding(
            label,
            FAIL,
            f"{path} names Python {py}, which cannot import git-lane",
            "git lane install",
        )
    if text.encode("utf-8") != hookinstall.script_bytes(name):
        return finding(
            label, WARN, f"{path} was installed by another Python ({py})", "git lane install"
        )
    if os.path.lexists(legacy) and not os.access(legacy, os.X_OK):
        return finding(
            label,
            WARN,
            f"the chained {legacy} is not executable, so it is skipped",
            f"chmod +x {q(legacy)}",
        )
    chained = f"; runs {legacy.name} too" if os.path.lexists(legacy) else ""
    return finding(label, OK, f"{path}{chained}")


def _embedded_pypath(text: str) -> str:
    import shlex

    for ln in text.splitlines():
        if ln.startswith("GITLANE_PYPATH="):
            words = shlex.split(ln[len("GITLANE_PYPATH=") :]) if "${" not in ln else []
            return words[0] if words else ""
    return ""


def _imports_guard(python: str | None, pypath: str) -> bool:
    """Can the hook's Python import guard as the hook does: isolated (-I: neither the
    current directory, perhaps a lane with a guard/ of its own, nor PYTHONPATH counts),
    from the directory install recorded?"""
    import subprocess

    if python is None:
        return False
    try:
        res = subprocess.run(
            [
                python,
                "-I",
                "-c",
                "import sys; p = sys.argv[1]; sys.path[:0] = [p] if p else []; import guard.hookcheck",
                pypath,
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def check_worktree_config(repo: Repo) -> list[Check]:
    out: list[Check] = []
    on = (
        git.run(
            ["config", "--type=bool", "--get", "extensions.worktreeConfig"],
            repo.common_dir,
            check=False,
        ).stdout.strip()
        == "true"
    )
    common = Path(os.path.realpath(repo.common_dir))
    files = [common / "config.worktree"]
    wdir = common / "worktrees"
    if wdir.is_dir():
        files.extend(sorted(p / "config.worktree" for p in wdir.iterdir() if p.is_dir()))
    bad = 0
    for f in files:
        if not f.is_file():
            continue
        res = git.run(
            ["config", "--file", str(f), "--get-regexp", r"^(core\.hookspath|hook\.)"], check=False
        )
        for line in res.lines():
            key = line.split(" ", 1)[0]
            bad += 1
            out.append(
                finding(
                    "worktree config",
                    FAIL if on else WARN,
                    f"{f} sets {key}"
                    + ("" if on else " (inert while extensions.worktreeConfig is off)"),
                    f"git config --file {q(f)} --unset-all {key}",
                )
            )
    hooks_cfg = git.run(["config", "--get-regexp", r"^hook\."], repo.common_dir, check=False)
    for line in hooks_cfg.lines():
        key = line.split(" ", 1)[0]
        bad += 1
        out.append(
            finding(
                "hook config",
                WARN,
                f"{key} is set: config-defined hooks run besides ours",
                f"git config --unset-all {key}",
            )
        )
    if on:
        # git reads every lane's config.worktree then, which a process of the lane can
        # swap under any git call: the engine runs no git in a lane (untrusted_git_config)
        # and exec --sandbox refuses, whatever the files hold now
        out.append(
            finding(
                "worktree config",
                FAIL,
                "extensions.worktreeConfig is on: git reads each lane's own config.worktree "
                "(in its admin dir, which the lane can write), so every git-lane command that "
                "runs git in a lane refuses (untrusted_git_config) and exec --sandbox refuses "
                "(sandbox_failed)",
                f"git -C {q(common)} config --unset extensions.worktreeConfig",
            )
        )
    elif not bad:
        out.append(finding("worktree config", OK, "no worktree config can switch hooks off"))
    return out


def check_replace(repo: Repo) -> list[Check]:
    out = []
    forged = landed.forgeries(repo)  # dangling ones too, which for-each-ref skips
    for r in forged:
        out.append(
            finding(
                "landed refs",
                FAIL,
                f"{r} is a symbolic ref: git-lane never writes one (git symbolic-ref bypasses the hooks); "
                "it is ignored as a landed tip",
                landed.unforge_command(repo, r),
            )
        )
    refs = list(git.refs(repo.common_dir, "refs/replace/"))
    if refs:
        names = " ".join(r.removeprefix("refs/replace/") for r in refs[:20])
        out.append(
            finding(
                "replace refs",
                FAIL,
                f"{len(refs)} refs/replace/* ref(s) change what main's history means: {', '.join(refs[:5])}",
                f"git replace -d {names}",
            )
        )
    else:
        out.append(finding("replace refs", OK, "none"))
    grafts = Path(os.path.realpath(repo.common_dir)) / "info" / "grafts"
    if grafts.exists():
        out.append(
            finding("grafts", FAIL, f"{grafts} rewrites parents of commits", f"rm {q(grafts)}")
        )
    return out


def check_objects(repo: Repo) -> list[Check]:
    """No lane's own object store is an alternate of the shared store (an older git-lane
    listed them): git skips writing what it finds there, so a lane could stand in for
    objects the owner writes later (guard/objects.py)."""
    from guard import objects

    listed = objects.listed_lane_stores(repo.common_dir)
    if listed:
        return [
            finding(
                "object store",
                FAIL,
                f"{len(listed)} lane object store(s) are alternates of the shared store "
                f"({git.shown(listed[0])}): a sandboxed lane could stand in for objects "
                "written later",
                "git lane reconcile",
            )
        ]
    return [finding("object store", OK, "no lane's store is an alternate of the shared store")]


def check_lane_stores(repo: Repo) -> list[Check]:
    """Nothing in a sandboxed lane's own store but objects: a FIFO there (planted by CMD)
    blocks every engine git call that reads it (status, land, gc); a link or device reads
    elsewhere. `git lane reconcile` removes them from every lane with no live owner (exec
    removes them itself when its CMD ends)."""
    from guard import objects

    out: list[Check] = []
    for rec in repo.store.lanes():
        if rec.status == "released":
            continue
        store = objects.lane_store(repo.common_dir, rec.path)
        bad = objects.hostile_entries(repo.common_dir, store) if store else []
        if bad:
            out.append(
                finding(
                    "lane object store",
                    FAIL,
                    f"lane {rec.key}'s own object store holds {len(bad)} entr(y/ies) that are "
                    f"no object ({git.shown(bad[0])}): a FIFO there blocks every engine git "
                    "call that reads the lane (status, land, gc), a link reads elsewhere",
                    "git lane reconcile",
                )
            )
    return out or [finding("lane object store", OK, "every lane's own store holds only objects")]


def check_git_dir_links(repo: Repo) -> list[Check]:
    """No file in the git dirs a sandboxed lane may write (sandbox.git_dirs: its admin dir
    with its store and submodule git dirs, the lane refs) has a name outside them: a hard
    link made beforehand, outside the sandbox (or by a local clone, for objects), through
    which a sandboxed process writes the file outside (guard/linked.py); and none in CMD's
    own cache dir (exec --sandbox walks it too). A name in the lane's worktree is the
    lane's own, as exec counts it. Doctor only looks; exec --sandbox and --own-objects
    split them before CMD starts, and the fix is such an exec that runs `true` (or, where
    exec would refuse, the next of its refusal)."""
    from guard import linked, objects

    from guard.config import cache_home

    common = os.path.realpath(repo.common_dir)
    cache = os.path.realpath(cache_home())
    out: list[Check] = []
    for rec in repo.store.lanes():
        if rec.status != "active":
            continue
        if not objects.admin_dirs(common, rec.path):
            continue  # no worktree: exec refuses the lane (check `lanes` says so)
        fix = f"git lane exec --own-objects {rec.key} -- true"
        # CMD's own cache dir, which exec --sandbox walks too (a name in the lane's
        # worktree counts as the lane's own there as in the git dirs: red team 17 F2)
        kept = sandbox.private_cache(cache, repo.slug, rec.key)
        try:
            # the admin dir exec splits and the sandbox grants (objects.own_admin)
            admin = objects.own_admin(repo, rec)
            dirs = [*sandbox.lane_git_dirs(common, admin), kept]
            found = linked.find(common, dirs, [os.path.realpath(rec.path)])
        except Refusal as r:  # another gitdir names the lane: which one exec walks is unsure
            what = r.message
            fix = r.next[0] if r.next else "git lane doctor"
        except linked.LinkError as exc:
            what = (
                f"{git.shown(os.path.join(common, exc.rel))} {exc.why}: a hard link there to "
                "a file outside cannot be ruled out"
            )
            # what exec would refuse with, and its next (which changes what refused)
            if exc.rel == kept or exc.rel.startswith(kept + "/"):
                retry = f"git lane exec --sandbox {rec.key} -- true"  # walks the cache dir
            else:
                retry = fix
            fix = " && ".join(linked.refusal(exc, common, retry, "", dirs).next)
        else:
            if not found:
                continue
            if any(x.rel == kept or x.rel.startswith(kept + "/") for x in found):
                fix = f"git lane exec --sandbox {rec.key} -- true"  # splits in the cache dir
            names = ", ".join(
                f"{git.shown(os.path.join(common, x.rel))} ({x.nlink} names, {x.found} there)"
                for x in found[:5]
            )
            more = f" and {len(found) - 5} more" if len(found) > 5 else ""
            what = (
                f"{names}{more} has a name outside the git dirs a sandboxed lane may write (a "
                "hard link made beforehand, outside the sandbox, or by a local clone): "
                "through it a sandboxed process writes that file (the repository's config, a "
                "hook, another worktree's index); exec --sandbox and --own-objects give each "
                "such name a file of its own before CMD starts"
            )
        out.append(finding("git dir links", FAIL, f"lane {rec.key}: {what}", fix))
    return out or [
        finding(
            "git dir links",
            OK,
            "no file in the git dirs a sandboxed lane may write has a name outside them",
        )
    ]


# -- state ------------------------------------------------------------------------------
def check_lock(repo: Repo) -> list[Check]:
    from guard import lock

    out = []
    rec = lock.read_owner(repo)
    if rec is None:
        out.append(finding("lock", OK, "free"))
    elif not lock.could_be_landing(rec) and rec.start is None and not rec.start_ticks:
        # no land writes a record without its start time: cut short, or not a land's
        out.append(
            finding(
                "lock",
                WARN,
                f"its owner record names pid {rec.pid} without a start time (cut short): "
                "the next land or reconcile takes it over",
                "git lane reconcile",
            )
        )
    elif lock.owner_alive(rec):
        out.append(
            finding(
                "lock",
                OK,
                f"held by pid {rec.pid} on {rec.host} landing {rec.lane} since {rec.since}",
            )
        )
    else:
        out.append(
            finding(
                "lock",
                WARN,
                f"stale: its owner pid {rec.pid} (landing {rec.lane}) is gone",
                "git lane reconcile",
            )
        )
    gate = lock.gate_path(repo)
    try:
        odd = not stat.S_ISREG(os.lstat(gate).st_mode)
    except OSError:  # none: no land was killed mid-gate
        odd = False
    if odd:
        out.append(
            finding(
                "gate record",
                WARN,
                f"{gate} is not a regular file (never read: it is no record of a gate)",
                "git lane reconcile",
            )
        )
    from guard import gate as gatemod

    left = gatemod.leftovers(repo.common_dir)
    if left and (rec is None or not lock.owner_alive(rec)):
        # no land runs: a killed land's (or one a gate's process kept writing in): git
        # lists each at the path its `gitdir` says, which a confined gate wrote
        out.append(
            finding(
                "gate worktree",
                WARN,
                f"{len(left)} clean gate admin dir(s) left in {repo.common_dir}/worktrees/ "
                f"({', '.join(left[:5])}{' ...' if len(left) > 5 else ''}): no land runs; "
                "reconcile removes them (or moves them into git-lane's kept/)",
                "git lane reconcile",
            )
        )
    none_runs = rec is None or not lock.owner_alive(rec)
    for name, where in gatemod.unrecorded(repo.common_dir) if none_runs else []:
        # no record of this git-lane's: an older git-lane's killed land's, or the owner's
        # own detached worktree of a gate-like name; never swept, so named with the one
        # command that removes it (it and its admin dir; a missing worktree only the latter)
        out.append(
            finding(
                "gate worktree",
                WARN,
                f"{repo.common_dir}/worktrees/{name} looks like a clean gate worktree's admin "
                f"dir (git lists it at {where}) but git-lane has no record of it: a gate "
                "worktree an older git-lane's killed land left, or a worktree of yours; "
                "git-lane never removes it. If it is not yours, remove it (its files too)",
                f"git worktree remove --force {git.q(where)}",
            )
        )
    if repo.store.landing_path.exists() and (rec is None or not lock.owner_alive(rec)):
        out.append(
            finding(
                "landing", WARN, "a land died part way (landing.json is left)", "git lane reconcile"
            )
        )
    return out


def check_lanes(repo: Repo) -> list[Check]:
    from guard.lane import KEY_FILE

    from guard import recovery

    out = []
    idx = git.by_path(repo.worktrees())
    active = 0
    records = repo.store.lanes()
    readable = {r.key for r in records}
    for k in repo.store.lane_keys():
        if k not in readable:  # never dropped silently: nothing may act on the lane
            out.append(
                finding(
                    f"lane {k}",
                    FAIL,
                    f"its record {repo.store.lane_path(k)} is unreadable or not a lane record",
                    "git lane reconcile",
                )
            )
    for rec in records:
        if rec.status == "released":
            continue
        wt = idx.get(os.path.realpath(rec.path))
        present = wt is not None and wt.exists
        facts = recovery.branch_facts(
            repo, rec.path, rec.branch, repo.ref_sha(f"refs/heads/{rec.branch}")
        )
        if facts.state != "ok":
            if facts.state == "moved":
                what = (
                    f"its branch {rec.branch} was moved outside the lane to {str(facts.tip)[:12]}; "
                    f"its worktree has {str(facts.recorded)[:12]} checked out"
                )
            else:
                what = f"its branch {rec.branch} is gone" + (
                    f"; its worktree last had {facts.recorded[:12]} on it"
                    if facts.recorded
                    else "; nothing in git records its last commit"
                )
            fix = (
                f"git lane repair {rec.key}"
                if facts.recorded
                else f"git lane release {rec.key} --confirm yes-discard-lane"
            )
            out.append(finding(f"lane {rec.key}", FAIL, what, fix))
            continue
        if rec.status == "orphaned" or not present:
            out.append(
                finding(
                    f"lane {rec.key}",
                    WARN,
                    f"orphaned: its worktree {rec.path} is missing (branch {rec.branch} keeps the commits)",
                    f"git lane repair {rec.key}  (or: git lane release {rec.key} --confirm yes-discard-lane)",
                )
            )
            continue
        active += 1
        faults = recovery.pointer_faults(repo, rec)
        if faults:
            out.append(
                finding(
                    f"lane {rec.key}",
                    FAIL,
                    "its git pointers were changed outside git (git run there would use "
                    f"another repository): {'; '.join(faults)}",
                    f"git -C {q(repo.repo_root())} lane repair {rec.key}",
                )
            )
            continue
        dead = gitlocks.stale(repo, rec.key, rec.path, repo.store.admin_dir(rec))
        if dead:
            out.append(
                finding(
                    f"lane {rec.key}",
                    FAIL,
                    f"git lock file(s) left by a process that is gone: {', '.join(map(str, dead))}; "
                    "every git write in the lane fails on them",
                    "git lane reconcile",
                )
            )
        out.extend(_branch_lock(repo, rec))
        gd = git.worktree_git_dir(rec.path)
        marker = gd / KEY_FILE if gd is not None else None
        try:
            key = read_regular(marker).decode().strip() if marker is not None else None
        except (OSError, UnicodeDecodeError):
            key = None
        if key != rec.key:
            out.append(
                finding(
                    f"lane {rec.key}",
                    WARN,
                    f"its worktree lacks the {KEY_FILE} file, so the pre-commit hook does not know it is a lane",
                    "git lane reconcile",
                )
            )
        if wt is not None and wt.branch not in (None, f"refs/heads/{rec.branch}"):
            # what sync and land refuse (lane_branch_mismatch): named here too, with their
            # next; a detached HEAD is left to them (a rebase in progress has one)
            from guard.lane import branch_mismatch_refusal

            ref = branch_mismatch_refusal(repo, rec.key, rec.path, rec.branch, wt.branch)
            out.append(
                finding(
                    f"lane {rec.key}",
                    WARN,
                    f"its worktree has {wt.branch} checked out, not {rec.branch}; sync and land "
                    "refuse it (lane_branch_mismatch)",
                    " && ".join(ref.next),
                )
            )
    if not out:
        out.append(
            finding(
                "lanes",
                OK,
                f"{active} active lane(s), none orphaned; each one's .git, commondir and "
                "gitdir name its own admin dir and this repository",
            )
        )
    return out


# -- Landlock ---------------------------------------------------------------------------
def _branch_lock(repo: Repo, rec: LaneRecord) -> list[Check]:
    """The lane's branch lock (`refs/heads/lane/KEY.lock` in the common dir): every update
    of the branch fails on it. Stale: reconcile lifts it; old but a git works in the
    repository (any git there may be writing the branch): named, with the command to
    remove it by hand once none is."""
    lk, state = gitlocks.ref_lock_state(repo, rec.branch, rec.path)
    if lk is None or state == "young":
        return []
    if state == "stale":
        return [
            finding(
                f"lane {rec.key}",
                FAIL,
                f"git lock file left by a process that is gone: {lk}; every update of "
                f"branch {rec.branch} fails on it",
                "git lane reconcile",
            )
        ]
    return [
        finding(
            f"lane {rec.key}",
            WARN,
            f"branch {rec.branch} is locked ({lk}) while a git process works in the "
            "repository: reconcile leaves it; if no git command is writing the branch, "
            "remove it by hand",
            f"rm -f -- {q(str(lk))}",
        )
    ]


def landlock_abi() -> tuple[int | None, str]:
    """(ABI version, why not): None when the sandbox cannot be applied on this kernel."""
    abi, why = sandbox.probe()
    why = sandbox.usable(abi) if abi else why
    return (None, why) if why else (abi, "")


def check_landlock(repo: Repo) -> list[Check]:
    abi, why = landlock_abi()
    if abi is not None:
        head = f"Landlock ABI {abi}: `git lane exec KEY --sandbox` confines CMD"
        if os.geteuid() == 0:  # the note exec --sandbox warns with (docs/trust-boundary.md)
            head += " (run as root, CMD can still change the mode bits of files root owns)"
        recs = [r for r in repo.store.lanes() if r.status == "active" and os.path.isdir(r.path)]
        if not recs:
            return [finding("landlock", OK, head + " (no active lane to show its grants for)")]
        rec = min(recs, key=lambda r: r.key)
        try:  # what prepare() would grant, as `git lane exec KEY --sandbox --explain` lists it
            g = sandbox.grants(repo, rec)
            writable = sandbox.granted(g)
        except sandbox.SandboxError as exc:
            return [
                finding(
                    "landlock",
                    FAIL if repo.config.get("sandbox") == "required" else WARN,
                    f"{head}, but not lane {rec.key}: {exc}",
                    (
                        f"{exc.next[0]} git lane exec --sandbox {rec.key} --explain"
                        if exc.next[:1] and exc.next[0].startswith("env ")
                        else join_next(exc.next)
                        if exc.next
                        else None
                    ),
                )
            ]
        tmp = f"; a private TMPDIR under {g.private_tmp_under}" if g.private_tmp_under else ""
        return [
            finding(
                "landlock",
                OK,
                f"{head}; for lane {rec.key} it grants writes to {', '.join(writable)}{tmp} "
                f"(`git lane exec {rec.key} --sandbox --explain` for the notes)",
            )
        ]
    mode = repo.config.get("sandbox")
    if mode == "best-effort" and sandbox.undetermined(why):  # exec refuses, no fallback
        return [
            finding(
                "landlock",
                FAIL,
                f'unavailable: {why}; with sandbox = "best-effort" every exec is refused',
                "git lane config set sandbox off",
            )
        ]
    required = mode == "required"
    return [
        finding(
            "landlock",
            FAIL if required else WARN,
            f"unavailable: {why}"
            + ('; sandbox = "required" makes every exec fail' if required else ""),
            "git lane config set sandbox best-effort" if required else None,
        )
    ]


# Repository config keys (local and worktree scope) that make git run a program: the next
# plain `git status` of the owner runs it, unbound. FAIL: what a person rarely sets in a
# repository's own config; WARN: editors, pagers, filter and diff drivers (git-lfs, a
# textconv), which people do set, named so the owner can look.
_PROGRAM_FAIL = (
    "core.fsmonitor",
    "core.sshcommand",
    "diff.external",
    "core.alternaterefscommand",
    "uploadpack.packobjectshook",
    "core.gitproxy",
    "core.askpass",
    "gpg.program",
    "core.worktree",
)


def _program_severity(key: str, value: str) -> str | None:
    from guard.shimpolicy import program_key

    k = key.lower()
    if k == "core.fsmonitor" and value.strip().lower() in ("true", "false", "yes", "no", "0", "1"):
        return None  # the built-in daemon, or off
    if k.startswith("alias."):
        return FAIL if value.lstrip().startswith("!") else None
    if k in _PROGRAM_FAIL or k.startswith(("protocol.", "credential.")):
        return FAIL
    if k.startswith("extensions.") or k in ("core.bare", "core.repositoryformatversion"):
        return None  # git's own repository layout
    if k.startswith("remote.") and key[len("remote.") :].startswith("-"):
        return FAIL  # a remote named as an option word: fetch --all hands it to a child fetch
    if k.startswith("remotes."):  # a group of remotes: a program only through an option word
        return WARN if any(w.startswith("-") for w in value.split()) else None
    return WARN if program_key(k) else None


def check_program_config(repo: Repo) -> list[Check]:
    """core.fsmonitor, core.sshCommand, diff.external, `!` aliases... in the repository's
    own config (or a worktree's): a lane could have written them (the shim refuses that
    now: unsafe_config), and git runs them for anyone, unbound."""
    out: list[Check] = []
    res = git.run(["config", "--local", "--null", "--list"], repo.common_dir, check=False)
    sources = [("--local", res.stdout if res.returncode == 0 else "")]
    common = Path(os.path.realpath(repo.common_dir))
    wt_files = [common / "config.worktree", *sorted(common.glob("worktrees/*/config.worktree"))]
    for cfg in (f for f in wt_files if f.is_file()):
        r = git.run(
            ["config", "--file", str(cfg), "--null", "--list"], repo.common_dir, check=False
        )
        sources.append((f"--file {q(cfg)}", r.stdout if r.returncode == 0 else ""))
    for scope, text in sources:
        for item in text.split("\0"):
            if not item:
                continue
            key, _nl, value = item.partition("\n")
            sev = _program_severity(key, value)
            if sev is not None:
                out.append(
                    finding(
                        "program config",
                        sev,
                        f"{key} = {git.shown(value)} ({scope}): git runs this program for "
                        "anyone who runs git here, past git-lane's shims",
                        f"git config {scope} --unset-all {q(key)}",
                    )
                )
    return out or [finding("program config", OK, "no repository config key runs a program")]


def check_oversized(repo: Repo) -> list[Check]:
    """A ref, HEAD or reflog a sandboxed lane may write, grown past any size git writes
    (a sparse 20 GB ref file: every git reads it whole). Moved into kept/ first, before any
    other check runs git (guard/oversize.py; the CLI did so already when doctor began):
    it fails while a lane needs something put back (its branch, its HEAD) or a file could
    not be moved; a moved reflog or pseudo-ref, which git runs without, warns."""
    m = oversize.set_aside(repo)
    if m.failed:
        r = oversize.refusal(repo, m)
        return [finding("oversized", FAIL, f"[{r.code}] {r.message}", join_next(r.next))]
    moved = repo.oversized_kept
    if not moved:
        return [
            finding(
                "oversized",
                OK,
                "no ref, HEAD or reflog a lane may write is larger than git writes them, "
                "nor other than a file",
            )
        ]
    fix = oversize.restores(repo, moved)
    kept = ", ".join(f"{oversize.shown(d)} to {d['kept']}" for d in moved[:5])
    bulk = (
        f", or made more of them than {oversize.STRAY_MAX} entries and "
        f"{oversize.STRAY_LOG_MAX} bytes in all beside the lanes' own branches and HEAD "
        "reflogs (git gc reads every reflog)"
        if any(d.get("bulk") for d in moved)
        else ""
    )
    return [
        finding(
            "oversized",
            FAIL if fix else WARN,
            f"moved {kept}{' ...' if len(moved) > 5 else ''}: a lane grew them past any size "
            f"git writes (a ref {oversize.REF_MAX} bytes, a reflog {oversize.LOG_MAX}){bulk}, "
            "and every git would have read them whole"
            + (
                " (or, no file, opened one and blocked, or read through a link)"
                if any(d.get("odd") for d in moved)
                else ""
            )
            + ("; a lane lost its branch or HEAD with it" if fix else "; nothing to put back"),
            join_next(fix) or None,
        )
    ]


CHECKS: tuple[Callable[[Repo], list[Check]], ...] = (
    check_oversized,  # first: every other check runs git, which would read them whole
    check_main,
    check_landed,
    check_baseline,
    check_shadows,
    check_shallow,
    check_renamed_log,
    check_enabled,
    check_hooks,
    check_hooks_paths,
    check_worktree_config,
    check_program_config,
    check_replace,
    check_objects,
    check_lane_stores,
    check_git_dir_links,
    check_lock,
    check_lanes,
    check_landlock,
)


def _blocking_packed_refs(repo: Repo) -> Check | None:
    """`packed-refs` no file git can read (Repo.packed_refs_blocks: a FIFO, a directory, a
    link to one), looked at before anything else: every check below runs a git that
    reads a ref, which would wait on a FIFO for ever. Named alone, with restore-main
    (which keeps it in kept/, never opened, and puts main back) as its fix."""
    try:
        found = repo.ref_file_blocks()
    except Refusal as r:
        return finding("main", FAIL, f"[{r.code}] {r.message}", join_next(r.next) or None)
    if found is None:
        return None
    return finding(
        "main",
        FAIL,
        f"{packed_refs_words(found)}, so no other check was made (each runs such a git)",
        "git lane restore-main",
    )


def blocked(r: Refusal) -> DoctorResult:
    """doctor where no git could run (git_file_not_plain: the common HEAD or config, or a
    worktree's HEAD or commondir, is a FIFO every git waits on for ever): that one check,
    failed, with the refusal's next as its fix; no other check was made (each runs git)."""
    check = finding(
        "git files",
        FAIL,
        f"[{r.code}] {r.message}; no other check was made (each runs git)",
        join_next(r.next) or None,
    )
    return {"ok": False, "code": "doctor_failed", "checks": [check]}


def run(repo: Repo) -> DoctorResult:
    blocked = _blocking_packed_refs(repo)
    if blocked is not None:
        return {"ok": False, "code": "doctor_failed", "checks": [blocked]}
    checks: list[Check] = []
    for fn in CHECKS:
        name = fn.__name__.removeprefix("check_")
        try:
            checks.extend(fn(repo))
        except Refusal as r:
            checks.append(finding(name, FAIL, f"[{r.code}] {r.message}", join_next(r.next) or None))
        except GitError as exc:
            checks.append(finding(name, FAIL, f"git failed: {exc.stderr.strip()[:300]}", None))
    ok = not any(c["status"] == FAIL for c in checks)
    return {"ok": ok, "code": "ok" if ok else "doctor_failed", "checks": checks}
