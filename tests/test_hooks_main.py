"""Nothing but `git lane land` moves main (G5, G10), with the real hooks installed: every
git way of moving, deleting or replacing main is refused with [main_mutation_refused] and
main's sha is unchanged; pack-refs, gc and land keep working."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Repo, git
from hookfix import assert_ok, assert_refused, commit_file, events, install, make_lane, run, sha

from guard import config


@dataclass
class Guarded:
    repo: Repo
    hub: Path
    lane: Path
    main: str
    lane_tip: str


@pytest.fixture
def g(repo: Repo) -> Guarded:
    assert_ok(commit_file(repo.path, "second.txt", "2\n", "second"))
    install(repo)
    lane = make_lane(repo, "x")
    assert_ok(commit_file(lane, "x.txt", "x\n"))
    main = sha(repo.path, "refs/heads/main")
    tip = sha(lane, "refs/heads/lane/x")
    assert main and tip
    return Guarded(repo, repo.path, lane, main, tip)


def detach_hub(g: Guarded) -> None:
    """Nothing has main checked out, so git's own 'checked out elsewhere' guards are
    out of the way and only our hook stands between these commands and main."""
    git(g.hub, "switch", "-q", "--detach")


def main_is(g: Guarded, expected: str) -> None:
    assert sha(g.hub, "refs/heads/main") == expected


# -- in the hub, on main ---------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ("commit", "-q", "--allow-empty", "-m", "on main"),
        ("commit", "-q", "--allow-empty", "--no-verify", "-m", "on main"),
        ("commit", "-q", "--amend", "--allow-empty", "-m", "amended"),
        ("commit", "-q", "--amend", "--allow-empty", "--no-verify", "-m", "amended"),
        ("merge", "-q", "--ff-only", "lane/x"),
        ("merge", "-q", "--no-ff", "--no-edit", "lane/x"),
        ("reset", "-q", "--hard", "HEAD~1"),
        ("reset", "-q", "--soft", "HEAD~1"),
        ("cherry-pick", "lane/x"),
        ("revert", "--no-edit", "HEAD"),
        ("rebase", "lane/x"),
        ("rebase", "--no-verify", "lane/x"),
        ("pull", "-q", "--ff-only", ".", "lane/x"),
        ("checkout", "-q", "-B", "main", "lane/x"),
    ],
    ids=lambda a: " ".join(a),
)
def test_hub_commands_on_main_are_refused(g: Guarded, args: tuple[str, ...]) -> None:
    res = run(g.hub, *args)
    assert_refused(res)
    main_is(g, g.main)


def test_commit_on_main_refused_by_pre_commit_before_anything_is_written(g: Guarded) -> None:
    (g.hub / "new.txt").write_text("new\n")
    git(g.hub, "add", "new.txt")
    res = run(g.hub, "commit", "-q", "-m", "new")
    assert_refused(res)
    assert res.returncode == 1
    assert "git stash" in res.stderr  # the way to carry the change into a lane
    main_is(g, g.main)
    # the change is still staged, nothing lost
    assert run(g.hub, "diff", "--cached", "--name-only").stdout.split() == ["new.txt"]


def test_refusals_are_logged(g: Guarded) -> None:
    run(g.hub, "commit", "-q", "--allow-empty", "-m", "x")
    run(g.hub, "commit", "-q", "--allow-empty", "--no-verify", "-m", "x")
    evs = [e for e in events(g.repo) if e.get("kind") == "refusal" and e.get("source") == "hook"]
    assert [e["hook"] for e in evs] == ["pre-commit", "reference-transaction"]
    assert all(e["code"] == "main_mutation_refused" for e in evs)
    assert evs[1]["ref"] == "refs/heads/main" and evs[1]["old"] == g.main


# -- from a lane, or with main not checked out anywhere --------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ("branch", "-f", "main", "lane/x"),
        ("update-ref", "refs/heads/main", "lane/x"),
        ("update-ref", "-d", "refs/heads/main"),
        ("update-ref", "--no-deref", "-d", "refs/heads/main"),
        ("branch", "-D", "main"),
        ("push", "-q", ".", "lane/x:main"),
        ("push", "-q", ".", "+lane/x~2:main"),
        ("push", "-q", ".", ":main"),
        ("fetch", "-q", ".", "lane/x:main"),
        ("replace", "lane/x", "main"),
    ],
    ids=lambda a: " ".join(a),
)
def test_lane_commands_on_main_are_refused(g: Guarded, args: tuple[str, ...]) -> None:
    detach_hub(g)
    res = run(g.lane, *args)
    assert_refused(res)
    main_is(g, g.main)
    assert run(g.hub, "for-each-ref", "refs/replace/").stdout == ""


def test_update_ref_delete_with_old_value_refused(g: Guarded) -> None:
    res = run(g.lane, "update-ref", "-d", "refs/heads/main", g.main)
    assert_refused(res)
    main_is(g, g.main)


def test_update_ref_stdin_transaction_refused_as_a_whole(g: Guarded) -> None:
    detach_hub(g)
    res = run(
        g.lane,
        "update-ref",
        "--stdin",
        input=f"create refs/heads/side {g.lane_tip}\nupdate refs/heads/main {g.lane_tip} {g.main}\n",
    )
    assert_refused(res)
    main_is(g, g.main)
    assert sha(g.hub, "refs/heads/side") is None


def test_branch_rename_onto_main_refused(g: Guarded) -> None:
    detach_hub(g)
    git(g.lane, "branch", "spare", "lane/x")
    res = run(g.lane, "branch", "-M", "spare", "main")
    assert_refused(res)
    main_is(g, g.main)


def only_on(path: Path, branch: str) -> str:
    """Make `branch` at a commit no other ref holds (lost if git deletes the branch)."""
    tree = git(path, "rev-parse", "HEAD^{tree}").stdout.strip()
    tip = git(path, "commit-tree", tree, "-p", "HEAD", "-m", f"only on {branch}").stdout.strip()
    git(path, "branch", "-f", branch, tip)
    return tip


def renamed_away(g: Guarded, res: subprocess.CompletedProcess[str], z: str) -> None:
    """A rename onto main refused at its first step (the delete of OLD): OLD, its commit
    and its reflog are all still there, and main did not move."""
    assert_refused(res)
    main_is(g, g.main)
    assert sha(g.hub, "refs/heads/z") == z, "the refused rename deleted branch z"
    assert not (g.repo.common_dir / "logs" / "refs" / ".tmp-renamed-log").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ("--mov", "--force", "z", "main"),
        ("--mo", "-f", "z", "main"),
        ("-fM", "z", "main"),
        ("-M", "z", "main", "--sort", "refname"),
        ("-M", "z", "main", "--format", "%(refname)"),
        ("-M", "--end-of-options", "z", "main"),
        ("-M", "z", "@{-1}"),
        ("-c", "alias.rn=branch -M", "rn", "z", "main"),
    ],
)
def test_a_refused_rename_onto_main_loses_no_branch(g: Guarded, argv: tuple[str, ...]) -> None:
    """`git branch --mov --force z main` (git takes any unique prefix of --move), or
    `git branch -M z main --sort refname` (an option's separate argument was the last plain
    word, so NEW read as `refname`): main plain, the hub detached. The hook knew only
    `-m/-M/-c/-C`, `--move`, `--copy` and NEW as the last plain word, so it let the delete
    of z (OLD) through; then the delete of main was refused and git died with no
    rollback: branch z gone, its only commit unreferenced, its reflog left at
    logs/refs/.tmp-renamed-log for the next rename to overwrite. `@{-1}` (main, switched
    away from) is a branch the hook cannot name without git: refused as well."""
    detach_hub(g)
    z = only_on(g.hub, "z")
    res = run(g.hub, *(argv if argv[0] == "-c" else ("branch", *argv)))
    renamed_away(g, res, z)


def test_a_dangling_symbolic_main_cannot_be_renamed_over(g: Guarded) -> None:
    """main made a dangling symbolic ref (`git symbolic-ref`, unseen on git 2.39: main
    then reads as no ref at all), then `git branch -m z main` from the lane, the hub on
    main. git needs no force (main "does not exist"); the hook took main for absent
    (gl_main_name: none), let the delete of z through, and the delete of the symbolic
    main as "deleting what is not there", and git wrote main at z's commit outside any
    transaction: main, plain again, was the lane's commit."""
    git(g.lane, "branch", "z", g.lane_tip)
    git(g.lane, "symbolic-ref", "refs/heads/main", "refs/heads/nothing")  # unseen, documented
    assert_refused(run(g.lane, "branch", "-m", "z", "main"))
    assert sha(g.hub, "refs/heads/z") == g.lane_tip
    main_file = g.repo.common_dir / "refs" / "heads" / "main"
    assert main_file.read_text().startswith("ref:"), "the symbolic main was replaced unseen"
    # nor deleted outright, then written by a rename onto a name that is free
    assert_refused(run(g.lane, "update-ref", "-d", "--no-deref", "refs/heads/main"))
    assert main_file.read_text().startswith("ref:")


def test_a_dangling_symbolic_main_beside_a_master_branch_is_still_main(g: Guarded) -> None:
    """No main_branch configured, a branch named master beside main, main made a dangling
    symbolic ref (unseen). The hook chose main as git-lane does (main if it resolves,
    else master), so it took master for main: the delete of the symbolic main passed as
    removing a stray main beside master, and `git branch -m z main` was no rename onto
    main; git wrote main at z's commit outside any transaction."""
    git(g.lane, "branch", "master", g.main)
    git(g.lane, "branch", "z", g.lane_tip)
    git(g.lane, "symbolic-ref", "refs/heads/main", "refs/heads/nothing")  # unseen, documented
    assert_refused(run(g.lane, "update-ref", "-d", "--no-deref", "refs/heads/main"))
    assert_refused(run(g.lane, "branch", "-m", "z", "main"))
    assert sha(g.hub, "refs/heads/z") == g.lane_tip
    assert git(g.hub, "symbolic-ref", "refs/heads/main").stdout.strip() == "refs/heads/nothing"


def test_a_rename_onto_a_ref_in_mains_chain_loses_no_branch(g: Guarded) -> None:
    """main a symbolic ref to refs/heads/b (unseen on git 2.39), then `git branch -M z b`
    (the hub detached, so git's checked-out guard is out of the way). git deletes z
    first, and the hook let that through (it refused at OLD only when NEW was main
    itself); then the delete of b, in main's chain, was refused and git died with no
    rollback: z gone, its reflog left at logs/refs/.tmp-renamed-log."""
    detach_hub(g)
    z = only_on(g.hub, "z")
    git(g.hub, "branch", "b", g.main)
    git(g.hub, "symbolic-ref", "refs/heads/main", "refs/heads/b")  # unseen, documented
    renamed_away(g, run(g.lane, "branch", "-M", "z", "b"), z)


def test_rename_of_main_refused(g: Guarded) -> None:
    detach_hub(g)
    res = run(g.lane, "branch", "-m", "main", "old-main")
    assert_refused(res)
    main_is(g, g.main)


def test_symbolic_ref_at_main_cannot_be_used_to_move_it(g: Guarded) -> None:
    """git 2.39 writes symbolic refs without a ref transaction, so the hook cannot stop
    `git symbolic-ref refs/heads/main refs/heads/lane/x` itself; it refuses every later
    move of the target (so main cannot move through it) and doctor reports it."""
    detach_hub(g)
    git(g.lane, "symbolic-ref", "refs/heads/main", "refs/heads/lane/x")
    res = commit_file(g.lane, "y.txt", "y\n")
    assert_refused(res)
    assert sha(g.hub, "refs/heads/lane/x") == g.lane_tip


@pytest.mark.parametrize(
    "target", ["refs/remotes/o/x", "refs/notes/x", "refs/tags/x", "refs/prefetch/o/x", "refs/x"]
)
def test_main_symref_outside_refs_heads_cannot_be_used_to_move_it(g: Guarded, target: str) -> None:
    """A symbolic main leads to a ref of any namespace: every update of that ref, in any
    spelling, is main's (the hook's fast path skips refs/remotes/*, refs/notes/*... only
    while main is no symbolic ref). Other refs of the namespace stay free."""
    detach_hub(g)
    git(g.lane, "update-ref", target, g.main)
    git(g.lane, "symbolic-ref", "refs/heads/main", target)  # unseen on git 2.39
    main_is(g, g.main)
    assert_refused(run(g.lane, "update-ref", target, g.lane_tip))
    assert_refused(run(g.lane, "update-ref", "--stdin", input=f"update {target} {g.lane_tip}\n"))
    assert_refused(run(g.lane, "update-ref", "--no-deref", target, g.lane_tip))
    assert_refused(run(g.lane, "update-ref", "-d", target))
    assert_refused(run(g.lane, "update-ref", "refs/heads/main", g.lane_tip))
    if target.startswith("refs/remotes/"):
        assert_refused(run(g.lane, "fetch", "-q", ".", f"+refs/heads/lane/x:{target}"))
        assert_ok(run(g.lane, "fetch", "-q", ".", "+refs/heads/lane/x:refs/remotes/o/y"))
    if target.startswith("refs/notes/"):
        assert_refused(run(g.lane, "notes", "--ref=x", "add", "-m", "n", "HEAD"))
        assert_ok(run(g.lane, "notes", "--ref=y", "add", "-m", "n", "HEAD"))
    if target.startswith("refs/tags/"):
        assert_refused(run(g.lane, "tag", "-f", "x", g.lane_tip))
    main_is(g, g.main)
    assert sha(g.lane, "refs/heads/main") == g.main
    assert_ok(run(g.lane, "update-ref", "refs/remotes/o/other", g.lane_tip))
    assert_ok(commit_file(g.lane, "y.txt", "y\n"))  # the lane's own work goes on


def test_main_symref_chain_cannot_be_used_to_move_it(g: Guarded) -> None:
    """main -> refs/heads/a -> refs/heads/b -> refs/remotes/o/b: git hands the hook only
    the ref it writes, so every ref of the chain is main's: a commit with b checked out,
    `git branch -f`, update-ref through or at any level, a fetch into the chain's end."""
    detach_hub(g)
    git(g.lane, "update-ref", "refs/remotes/o/b", g.main)
    git(g.lane, "symbolic-ref", "refs/heads/b", "refs/remotes/o/b")
    git(g.lane, "symbolic-ref", "refs/heads/a", "refs/heads/b")
    git(g.lane, "symbolic-ref", "refs/heads/main", "refs/heads/a")  # unseen on git 2.39
    main_is(g, g.main)
    for ref in ("refs/heads/a", "refs/heads/b", "refs/remotes/o/b"):
        assert_refused(run(g.lane, "update-ref", ref, g.lane_tip))
        assert_refused(run(g.lane, "update-ref", "--no-deref", ref, g.lane_tip))
        assert_refused(run(g.lane, "update-ref", "--stdin", input=f"update {ref} {g.lane_tip}\n"))
    assert_refused(run(g.lane, "branch", "-f", "b", g.lane_tip))
    assert_refused(run(g.lane, "fetch", "-q", ".", "+refs/heads/lane/x:refs/remotes/o/b"))
    other = g.hub.parent / "other"
    git(g.hub, "worktree", "add", "-q", "--detach", str(other), g.main)
    git(other, "switch", "-q", "b")  # HEAD -> b -> refs/remotes/o/b: main's too
    assert_refused(commit_file(other, "o.txt", "o\n"))
    assert_refused(run(other, "commit", "-q", "--no-verify", "--allow-empty", "-m", "o"))
    main_is(g, g.main)
    assert sha(g.lane, "refs/remotes/o/b") == g.main


@pytest.mark.parametrize("target", ["refs/bisect/x", "refs/worktree/x", "refs/rewritten/x"])
def test_main_symref_to_a_per_worktree_ref_cannot_be_used_to_move_it_in_any_worktree(
    g: Guarded, target: str
) -> None:
    """A per-worktree target (each worktree has its own refs/bisect/*, refs/worktree/*,
    refs/rewritten/*): main reads differently in each worktree, and the hook follows the
    chain in every one of them: the target is main's in every worktree, however it is
    named (main-worktree/..., worktrees/<id>/...), and so is what it leads to in any."""
    detach_hub(g)
    lane_id = Path(git(g.lane, "rev-parse", "--git-dir").stdout.strip()).name
    git(g.hub, "update-ref", target, g.main)
    git(g.lane, "update-ref", target, g.main)
    git(g.lane, "branch", "side", g.main)
    git(g.lane, "symbolic-ref", "refs/heads/main", target)  # unseen on git 2.39
    main_is(g, g.main)
    assert sha(g.lane, "refs/heads/main") == g.main
    for where in (g.hub, g.lane):
        assert_refused(run(where, "update-ref", target, g.lane_tip))
        assert_refused(run(where, "update-ref", "-d", target))
    assert_refused(run(g.lane, "update-ref", f"main-worktree/{target}", g.lane_tip))
    assert_refused(run(g.hub, "update-ref", f"worktrees/{lane_id}/{target}", g.lane_tip))
    main_is(g, g.main)
    assert sha(g.lane, "refs/heads/main") == g.main
    # in the lane, the target leads on to a branch: main's there, so in every worktree
    git(g.lane, "symbolic-ref", target, "refs/heads/side")  # unseen
    assert_refused(run(g.hub, "update-ref", "refs/heads/side", g.lane_tip))
    assert_refused(run(g.hub, "branch", "-f", "side", g.lane_tip))
    assert sha(g.lane, "refs/heads/main") == g.main
    if target == "refs/bisect/x":  # git bisect writes refs/bisect/*
        git(g.hub, "symbolic-ref", "refs/heads/main", "refs/bisect/bad")
        assert_refused(run(g.lane, "bisect", "start", "lane/x", g.main))
        assert sha(g.lane, "refs/bisect/bad") is None


def test_main_symref_to_head_cannot_be_used_to_move_it(g: Guarded) -> None:
    """main -> HEAD (a root ref, one per worktree): a detached HEAD moving, or a commit on
    the branch HEAD names, in any worktree, moves main as that worktree reads it."""
    detach_hub(g)
    git(g.lane, "symbolic-ref", "refs/heads/main", "HEAD")  # unseen on git 2.39
    main_is(g, g.main)
    assert_refused(run(g.hub, "checkout", "-q", "--detach", "lane/x"))
    assert_refused(run(g.hub, "update-ref", "--no-deref", "HEAD", g.lane_tip))
    assert_refused(commit_file(g.lane, "y.txt", "y\n"))
    main_is(g, g.main)
    assert sha(g.lane, "refs/heads/lane/x") == g.lane_tip


@pytest.mark.parametrize("target", ["refs/heads/lane/x", "refs/remotes/o/x"])
def test_main_symref_written_as_a_symbolic_link_cannot_be_used_to_move_it(
    g: Guarded, target: str
) -> None:
    """`core.preferSymlinkRefs` makes `git symbolic-ref` write a symbolic link (`main ->
    refs/heads/x`), which git reads as a symbolic ref: the hook reads the link's text as
    git does, not the file the link names relative to refs/heads/."""
    detach_hub(g)
    git(g.lane, "update-ref", "refs/remotes/o/x", g.lane_tip)
    link = g.repo.common_dir / "refs" / "heads" / "main"
    git(g.lane, "-c", "core.preferSymlinkRefs=true", "symbolic-ref", "refs/heads/main", target)
    assert link.is_symlink()
    assert sha(g.hub, "refs/heads/main") == g.lane_tip  # unseen on git 2.39
    if target == "refs/heads/lane/x":
        assert_refused(commit_file(g.lane, "y.txt", "y\n"))
    else:
        assert_refused(run(g.lane, "update-ref", target, g.main))
    assert sha(g.hub, "refs/heads/main") == g.lane_tip


def read_through_link(g: Guarded, how: str) -> str:
    """Make refs/heads/main a symbolic link git takes for no symbolic ref, reading main's
    value (what an earlier plain write, no sandbox, leaves): to the lane's admin HEAD
    (detached at main first: it passes, main is plain then), to an absolute path, or
    with a text that begins refs/ but is no ref name (git reads that one through too).
    Returns the link's text."""
    git(g.lane, "switch", "-q", "--detach", g.main)
    admin = Path(git(g.lane, "rev-parse", "--absolute-git-dir").stdout.strip())
    heads = g.repo.common_dir / "refs" / "heads"
    text = {
        "admin_head": os.path.relpath(admin / "HEAD", heads),
        "absolute": str(admin / "HEAD"),
        "refs_dotdot": "refs/../../../worktrees/" + admin.name + "/HEAD",
    }[how]
    (heads / "refs").mkdir(exist_ok=True)  # (refs_dotdot: the kernel walks through it)
    (heads / "main").unlink()
    os.symlink(text, heads / "main")
    assert sha(g.hub, "refs/heads/main") == g.main  # git reads it through: main as it was
    return text


@pytest.mark.parametrize("how", ["admin_head", "absolute", "refs_dotdot"])
def test_a_link_at_main_that_git_reads_through_refuses_every_ref_update(
    g: Guarded, how: str
) -> None:
    """Red team 14G F6: a link at refs/heads/main whose text is no ref name under refs/
    is read through by git, as a plain ref; the hook saw no symbolic chain, so the lane's
    write of its own HEAD (a ref update of HEAD only, or, under exec --sandbox, a plain
    write of its admin HEAD) moved main. Every ref update is refused while it is there
    (main_not_plain), whatever it reads as, naming restore-main."""
    detach_hub(g)
    text = read_through_link(g, how)
    for args in (
        ("update-ref", "--no-deref", "HEAD", g.lane_tip),  # moves main through the link
        ("update-ref", "refs/remotes/o/x", g.lane_tip),  # the fast path's kind of ref
        ("branch", "scratch"),
    ):
        res = run(g.lane, *args)
        assert_refused(res, "main_not_plain")
        assert "Next: git lane restore-main\n" in res.stderr, res.stderr
        main_is(g, g.main)
    assert os.readlink(g.repo.common_dir / "refs" / "heads" / "main") == text
    ev = [e for e in events(g.repo) if e.get("code") == "main_not_plain"][-1]
    assert (ev["ref"], ev["link"]) == ("refs/heads/main", text)


def main_through_a_directory_link(g: Guarded, at: str) -> Path:
    """Red team 14H-A F2: main is the configured `team/main`, and a symbolic link on its
    way (made by hand, outside every layer) leads into the lane namespace every sandboxed
    lane may write: `team` (`refs/heads/team -> lane/y`: git reads main from
    refs/heads/lane/y/main) or `heads` (refs/heads -> a copy of it: git reads every
    branch from there). Main's own name is a plain file seen through it. Returns the file
    git reads main from."""
    common = g.repo.common_dir
    git(g.hub, "branch", "team/main", g.main)
    config.write(g.repo.state_dir / "config.toml", "main_branch", "team/main")
    heads = common / "refs" / "heads"
    if at == "team":
        (heads / "lane" / "y").mkdir(parents=True)
        (heads / "team" / "main").rename(heads / "lane" / "y" / "main")
        (heads / "team").rmdir()
        (heads / "team").symlink_to("lane/y")
        read = heads / "lane" / "y" / "main"
    else:
        heads.rename(common / "refs" / "heads-real")
        heads.symlink_to("heads-real")
        read = common / "refs" / "heads-real" / "team" / "main"
    assert sha(g.hub, "refs/heads/team/main") == g.main
    return read


@pytest.mark.parametrize("at", ["team", "heads"])
def test_a_link_at_a_directory_on_mains_way_refuses_every_ref_update(g: Guarded, at: str) -> None:
    """Red team 14H-A F2: a link at main's *directory* went unseen (the hook looked only
    at `[ -L refs/heads/team/main ]`), and a plain `git update-ref` of the lane-namespace
    ref git reads main from moved main. Every ref update is refused while a link is on
    main's way (refs, refs/heads, each directory of main_branch), main_not_plain, naming
    restore-main."""
    detach_hub(g)
    main_through_a_directory_link(g, at)
    for args in (
        ("update-ref", "refs/heads/lane/y/main", g.lane_tip),  # main, read through the link
        ("update-ref", "refs/remotes/o/x", g.lane_tip),  # the fast path's kind of ref
        ("branch", "scratch"),
    ):
        res = run(g.lane, *args)
        assert_refused(res, "main_not_plain")
        assert "Next: git lane restore-main\n" in res.stderr, res.stderr
        assert sha(g.hub, "refs/heads/team/main") == g.main
    ev = [e for e in events(g.repo) if e.get("code") == "main_not_plain"][-1]
    assert ev["ref"] == ("refs/heads/team" if at == "team" else "refs/heads"), ev


def test_a_packed_refs_link_refuses_every_ref_update(g: Guarded) -> None:
    """Red team 14H-A F4: `packed-refs` a link into a lane's admin dir (made by hand, main
    packed, no loose file): git reads main from the file it leads to, which the lane may
    write with no ref transaction. Every ref update is refused while packed-refs is a
    link (main_not_plain); one that is no file at all (git reads none from a directory
    and dies) is refused as well, by Repo.foreign_main_link and gl_way."""
    detach_hub(g)
    common = g.repo.common_dir
    git(g.hub, "pack-refs", "--all")
    assert not (common / "refs" / "heads" / "main").exists()
    admin = common / "worktrees" / "x"
    (common / "packed-refs").rename(admin / "packed-refs")
    (common / "packed-refs").symlink_to("worktrees/x/packed-refs")
    for args in (("update-ref", "refs/remotes/o/x", g.lane_tip), ("branch", "scratch")):
        res = run(g.lane, *args)
        assert_refused(res, "main_not_plain")
        assert "packed-refs is a symbolic link to worktrees/x/packed-refs" in res.stderr
    assert sha(g.hub, "refs/heads/main") == g.main


@pytest.mark.parametrize("shape", ["loop", "deep", "unreadable"])
def test_main_symref_chain_that_cannot_be_followed_refuses_every_ref_in_it(
    g: Guarded, shape: str
) -> None:
    """A chain the hook cannot follow to its end (a loop, more levels than git follows,
    a ref file git cannot read as a ref): it cannot tell what main is, so every update
    of a ref it did reach is refused [hook_facts_unknown]."""
    detach_hub(g)
    heads = g.repo.common_dir / "refs" / "heads"
    if shape == "loop":
        git(g.lane, "symbolic-ref", "refs/heads/a", "refs/heads/b")
        git(g.lane, "symbolic-ref", "refs/heads/b", "refs/heads/a")
    elif shape == "deep":
        for i in range(9):
            git(
                g.lane,
                "symbolic-ref",
                f"refs/heads/a{i}" if i else "refs/heads/a",
                f"refs/heads/a{i + 1}",
            )
        git(g.lane, "update-ref", "refs/heads/a9", g.main)
    else:
        git(g.lane, "update-ref", "refs/heads/b", g.main)
        (heads / "a").write_text("ref: refs/heads/b\nref: refs/heads/c\n")
    git(g.lane, "symbolic-ref", "refs/heads/main", "refs/heads/a")  # unseen on git 2.39
    res = run(g.lane, "update-ref", "--no-deref", "refs/heads/a", g.lane_tip)
    assert_refused(res, "hook_facts_unknown")
    assert "refs/heads/a" in res.stderr
    assert (heads / "main").read_text().strip() == "ref: refs/heads/a"
    assert_ok(commit_file(g.lane, "y.txt", "y\n"))  # refs outside the chain stay free


def test_deleting_a_branch_that_is_not_main_is_fine(g: Guarded) -> None:
    git(g.lane, "branch", "scratch")
    assert_ok(run(g.lane, "branch", "-D", "scratch"))
    assert_ok(run(g.lane, "tag", "v1", "main"))
    assert_ok(run(g.lane, "update-ref", "-d", "refs/tags/v1"))


# -- what must keep working ------------------------------------------------------------
def test_pack_refs_and_gc_pass(g: Guarded) -> None:
    assert_ok(run(g.hub, "pack-refs", "--all"))
    assert not (g.repo.common_dir / "refs" / "heads" / "main").exists()
    main_is(g, g.main)
    assert_ok(commit_file(g.lane, "z.txt", "z\n"))  # a loose lane ref again
    assert_ok(run(g.hub, "gc", "-q"))
    assert_ok(run(g.hub, "pack-refs", "--all", "--prune"))
    main_is(g, g.main)
    assert f"{g.main} refs/heads/main" in (g.repo.common_dir / "packed-refs").read_text()
    # with main packed, moving or deleting it is still refused
    detach_hub(g)
    assert_refused(run(g.lane, "update-ref", "-d", "refs/heads/main"))
    assert_refused(run(g.lane, "update-ref", "refs/heads/main", "lane/x"))
    main_is(g, g.main)


def test_no_op_update_of_main_passes(g: Guarded) -> None:
    assert_ok(run(g.hub, "update-ref", "refs/heads/main", g.main))
    assert_ok(run(g.hub, "reset", "-q", "--hard"))
    main_is(g, g.main)


def test_land_moves_main_with_hooks_installed(g: Guarded) -> None:
    config.write(g.repo.state_dir / "config.toml", "gate", "off")
    r = g.repo.jlane("land", "x")
    assert r.rc == 0, r.stderr
    assert r.code == "landed"
    main_is(g, g.lane_tip)
    assert (g.hub / "x.txt").read_text() == "x\n"  # the hub was carried along


def test_land_after_gc_with_main_packed(g: Guarded) -> None:
    assert_ok(run(g.hub, "gc", "-q"))
    assert not (g.repo.common_dir / "refs" / "heads" / "main").exists()
    config.write(g.repo.state_dir / "config.toml", "gate", "off")
    r = g.repo.jlane("land", "x")
    assert r.rc == 0, r.stderr
    main_is(g, g.lane_tip)


def test_land_with_a_gate_and_hooks_installed(g: Guarded) -> None:
    config.write(g.repo.state_dir / "config.toml", "gate_command", "test -f x.txt")
    r = g.repo.jlane("land", "x")
    assert r.rc == 0, r.stderr
    main_is(g, g.lane_tip)


def test_a_forged_lock_record_is_not_enough(g: Guarded) -> None:
    """The owner record alone does not open the door: its pid must be our ancestor."""
    locks = g.repo.state_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "integration.owner").write_text(
        f"pid=1\nstart=\nhost=x\ntoken=t\nlane=x\nmain_before={g.main}\ntip={g.lane_tip}\nsince=now\n"
    )
    detach_hub(g)
    assert_refused(run(g.lane, "update-ref", "refs/heads/main", g.lane_tip, g.main))
    main_is(g, g.main)


def test_enabled_false_passes_everything(g: Guarded) -> None:
    config.write(g.repo.state_dir / "config.toml", "enabled", False)
    assert_ok(run(g.hub, "commit", "-q", "--allow-empty", "-m", "allowed"))
    assert sha(g.hub, "refs/heads/main") != g.main


def test_enabled_false_in_the_user_file_and_repo_file_wins(g: Guarded) -> None:
    from guard.config import user_config_path

    config.write(user_config_path(), "enabled", False)
    assert_ok(run(g.hub, "commit", "-q", "--allow-empty", "-m", "allowed"))
    config.write(g.repo.state_dir / "config.toml", "enabled", True)
    assert_refused(run(g.hub, "commit", "-q", "--allow-empty", "-m", "refused"))


def test_configured_main_branch(repo: Repo) -> None:
    git(repo.path, "branch", "trunk")
    config.write(repo.state_dir / "config.toml", "main_branch", "trunk")
    install(repo)
    # main is an ordinary branch now; trunk is protected
    assert_ok(
        run(repo.path, "commit", "-q", "--allow-empty", "-m", "on main, which is not protected")
    )
    git(repo.path, "switch", "-q", "trunk")
    before = sha(repo.path, "refs/heads/trunk")
    assert_refused(run(repo.path, "commit", "-q", "--allow-empty", "-m", "x"))
    assert_refused(run(repo.path, "commit", "-q", "--allow-empty", "--no-verify", "-m", "x"))
    assert_refused(run(repo.path, "rebase", "main"))
    assert sha(repo.path, "refs/heads/trunk") == before


def test_master_repository(tmp_path: Path) -> None:
    path = tmp_path / "old style"
    git(tmp_path, "init", "-q", "-b", "master", str(path))
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    r = Repo(path)
    install(r)
    before = sha(path, "refs/heads/master")
    assert_refused(run(path, "commit", "-q", "--allow-empty", "-m", "x"))
    assert_refused(run(path, "commit", "-q", "--allow-empty", "--no-verify", "-m", "x"))
    # creating `main` would silently move protection away from master
    assert_refused(run(path, "branch", "main"))
    assert sha(path, "refs/heads/main") is None
    assert sha(path, "refs/heads/master") == before


@pytest.mark.parametrize("spelling", ["-m", "--mov"])
def test_an_abbreviated_rename_cannot_move_a_configured_dangling_main(
    tmp_path: Path, spelling: str
) -> None:
    """A master repository (install writes main_branch = "master", so the hook knows main
    even when it does not resolve): master made a dangling symbolic ref (unseen), then
    `git branch --mov z master`. `--mov` was not seen as a rename, the delete of the
    dangling master passed as "deleting what is not there", and git wrote master at z's
    commit outside any transaction."""
    path = tmp_path / "m"
    git(tmp_path, "init", "-q", "-b", "master", str(path))
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    install(Repo(path))
    tree = git(path, "rev-parse", "HEAD^{tree}").stdout.strip()
    evil = git(path, "commit-tree", tree, "-p", "HEAD", "-m", "evil").stdout.strip()
    git(path, "branch", "z", evil)
    git(path, "symbolic-ref", "refs/heads/master", "refs/heads/nothing")  # unseen, documented
    assert_refused(run(path, "branch", spelling, "z", "master"))
    assert sha(path, "refs/heads/z") == evil
    assert git(path, "symbolic-ref", "refs/heads/master").stdout.strip() == "refs/heads/nothing"


def test_first_commit_of_a_new_repository_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    install(Repo(path))
    assert_ok(run(path, "commit", "-q", "--allow-empty", "-m", "init"))
    assert_refused(run(path, "commit", "-q", "--allow-empty", "-m", "second"))


@pytest.mark.parametrize("spelling", ["dot", "link"])
def test_a_per_worktree_chain_holds_whatever_the_git_dir_is_called(
    repo: Repo, tmp_path: Path, spelling: str
) -> None:
    """main made a symbolic ref to `worktrees/alpha/HEAD` (git 2.39: unseen), the lane
    detached: a commit there moves main, and the hook refuses it. The worktree the hook
    runs in was the last part of GIT_DIR as given: `<admin>/.` or a link to the admin dir
    named another worktree, and the same commit moved main (red team 13W). It is read
    from the physical path now."""
    assert repo.lane("install").rc == 0
    lane = repo.create("alpha")
    admin = git(lane, "rev-parse", "--absolute-git-dir").stdout.strip()
    git(lane, "checkout", "-q", "--detach")
    git(lane, "symbolic-ref", "refs/heads/main", "worktrees/alpha/HEAD")  # documented: unseen
    before = repo.sha("refs/heads/main")
    (lane / "evil.txt").write_text("x\n")
    git(lane, "add", "evil.txt")
    if spelling == "dot":
        gd = admin + "/."
    else:
        gd = str(tmp_path / "adminlink")
        os.symlink(admin, gd)
    r = git(lane, "commit", "--no-verify", "-qm", "evil", check=False, env={"GIT_DIR": gd})
    assert r.returncode != 0, r.stderr
    assert repo.sha("refs/heads/main") == before, "main moved past the reference-transaction hook"


def test_a_branch_under_main_slash_does_not_unprotect_master(tmp_path: Path) -> None:
    """A `master` repository where git-lane was installed before its first commit (no
    `main_branch` pinned). `git branch main/x` makes refs/heads/main a directory, and the
    hook took main for the protected branch because `[ -e refs/heads/main ]` holds for a
    directory (red team 14D, HIGH: a regression of the dangling-main fix): master was
    no longer protected and `git update-ref refs/heads/master C` moved it. Only a file or
    a link at the name is main."""
    from conftest import lane as run_lane

    path = tmp_path / "hub"
    path.mkdir()
    git(path, "init", "-q", "-b", "master")
    assert run_lane("install", cwd=path).rc == 0
    git(path, "commit", "-q", "--allow-empty", "-m", "init")  # the first commit: bootstrap
    before = sha(path, "refs/heads/master")
    tree = git(path, "rev-parse", "master^{tree}").stdout.strip()
    c = git(path, "commit-tree", "-p", "master", "-m", "sneaked", tree).stdout.strip()

    def move() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "update-ref", "refs/heads/master", c], cwd=path, text=True, capture_output=True
        )

    assert move().returncode != 0  # protected
    git(path, "branch", "main/x", "master")
    res = move()
    assert sha(path, "refs/heads/master") == before, (
        f"master moved to {c} once refs/heads/main/ existed (rc={res.returncode})"
    )
    assert res.returncode != 0
