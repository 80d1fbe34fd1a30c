"""Regressions for what a red-team pass broke, each with the real hooks installed and
real git processes: the gate moving main, `git branch` renames losing a branch or a
reflog, a `master` repository losing its protection to a copied `main`, conflict markers
of another size, `continue` silently taking one side of a binary or delete conflict,
config files the hooks read differently from TOML, refs that shadow main's short name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import Repo, earlier_kept, git, take_name
from hookfix import assert_ok, assert_refused, commit_file, install, make_lane, run, sha, write

from guard import config
from guard.errors import Refusal
from guard.policy import conflict_blocks, marker_sizes


def gate(repo: Repo, command: str) -> None:
    repo.config("gate", "on")
    repo.config("gate_command", json.dumps(command))


@pytest.fixture
def hub_on_side(repo: Repo) -> Repo:
    """Hooks installed, a branch `x` with one commit main lacks, and the hub on another
    branch (so git's own 'checked out elsewhere' guards are out of the way)."""
    install(repo)
    git(repo.path, "branch", "x")
    git(repo.path, "switch", "-q", "x")
    git(repo.path, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", "on x")
    git(repo.path, "switch", "-q", "-c", "side")
    return repo


# -- the gate may not move main --------------------------------------------------------
GATE = """#!/bin/sh
rec=$(git rev-parse --path-format=absolute --git-common-dir)/git-lane/locks/integration.owner
tip=$(sed -n 's/^tip=//p' "$rec"); before=$(sed -n 's/^main_before=//p' "$rec")
# the record names the move only after the gate: take the values from git as well
[ -n "$tip" ] || tip=$(git rev-parse HEAD)
[ -n "$before" ] || before=$(git rev-parse refs/heads/main)
git update-ref refs/heads/main "$tip" "$before" && echo GATE-MOVED-MAIN
git update-ref refs/heads/main "$tip" && echo GATE-MOVED-MAIN
( setsid git update-ref refs/heads/main "$tip" "$before" ) && echo GATE-MOVED-MAIN
exit "${GATE_EXIT:-1}"
"""


def test_a_failing_gate_cannot_move_main_to_the_tip(repo: Repo) -> None:
    install(repo)
    lane = make_lane(repo, "a")
    write(lane / "gate.sh", GATE)
    assert_ok(run(lane, "add", "gate.sh"))
    assert_ok(run(lane, "commit", "-q", "-m", "a gate that moves main"))
    before = repo.sha()
    gate(repo, "sh ./gate.sh")
    r = repo.jlane("land", "a")
    assert (r.rc, r.code) == (1, "gate_failed"), r.stderr
    assert "GATE-MOVED-MAIN" not in r.stderr
    assert "refused [main_mutation_refused]" in r.stderr
    assert repo.sha() == before  # the gate failed: main did not move


def test_a_passing_gate_still_lands_through_land_itself(repo: Repo) -> None:
    install(repo)
    lane = make_lane(repo, "a")
    write(lane / "gate.sh", GATE.replace('"${GATE_EXIT:-1}"', "0"))
    assert_ok(run(lane, "add", "gate.sh"))
    assert_ok(run(lane, "commit", "-q", "-m", "gate"))
    tip = sha(lane, "HEAD")
    gate(repo, "sh ./gate.sh")
    r = repo.jlane("land", "a")
    assert (r.rc, r.code) == (0, "landed"), r.stderr
    assert "GATE-MOVED-MAIN" not in r.stderr
    assert repo.sha() == tip == r.json["main_after"]


# -- git branch renames onto main ------------------------------------------------------
def test_rename_onto_main_keeps_the_branch_and_its_reflog(hub_on_side: Repo) -> None:
    repo = hub_on_side
    main, x = repo.sha(), repo.sha("refs/heads/x")
    common = repo.common_dir
    for args in (("branch", "-M", "x", "main"), ("branch", "--move", "--force", "x", "main")):
        assert_refused(run(repo.path, *args))
        assert repo.sha("refs/heads/x") == x  # git deletes OLD first: refused there
        assert repo.sha() == main
        assert (common / "logs/refs/heads/x").is_file()
        assert not (common / "logs/refs/.tmp-renamed-log").exists()
    assert_ok(run(repo.path, "branch", "-m", "x", "y"))  # renames still work
    assert_ok(run(repo.path, "branch", "-m", "y", "x"))


def _git_as(argv0: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git run with argv[0] `argv0` (a link `g -> git`, `exec -a`)."""
    exe = shutil.which("git")
    assert exe
    return subprocess.run([argv0, *args], executable=exe, cwd=cwd, text=True, capture_output=True)


@pytest.mark.parametrize(
    "argv",
    [
        # git run under another name: git takes any argv[0] not beginning `git-` for git
        ("g", "branch", "-M", "x", "main"),
        # the dashed builtin, as git's exec-path holds it
        ("git-branch", "-M", "x", "main"),
        # an argument holding a newline: one word, not two
        ("git", "-c", "a.b=y\nfoo", "branch", "-M", "x", "main"),
        # an empty argument (`-C ''` leaves the directory as it is): a word too
        ("git", "-C", "", "branch", "-M", "x", "main"),
    ],
    ids=["argv0", "dashed", "newline", "empty"],
)
def test_rename_onto_main_however_git_is_named_keeps_the_branch(
    hub_on_side: Repo, argv: tuple[str, ...]
) -> None:
    """Red team 14E F3. gl_cmd read the parent's subcommand from /proc/$PPID/cmdline split
    on newlines, and only when argv[0] was `git`/`git-*`: git run as `g`, or with a word
    holding a newline (or an empty one) hid `branch`, so the delete of x passed, the delete
    of main was refused, and git died with x deleted and its reflog stranded in
    logs/refs/.tmp-renamed-log (every later rename then fails)."""
    repo = hub_on_side
    main, x = repo.sha(), repo.sha("refs/heads/x")
    common = repo.common_dir
    r = _git_as(argv[0], repo.path, *argv[1:])
    assert_refused(r)
    assert repo.sha() == main
    assert repo.sha("refs/heads/x") == x, "branch x was deleted: " + r.stderr
    assert (common / "logs/refs/heads/x").is_file()
    assert not (common / "logs/refs/.tmp-renamed-log").exists()
    assert_ok(_git_as("g", repo.path, "branch", "-m", "x", "y"))  # renames still work
    assert_ok(_git_as("git-branch", repo.path, "-m", "y", "x"))


def test_a_branch_delete_whose_command_cannot_be_read_is_refused(hub_on_side: Repo) -> None:
    """Red team 14E F3: with the parent's command line unreadable (hidepid, the parent
    gone) the hook took the delete of OLD for no rename and let it through. It cannot tell
    a rename onto main from a delete then: refused (hook_facts_unknown), the reflog git set
    aside left for doctor to name. Here the hook's parent, a shell, exits once the hook runs (exec'd,
    its $PPID read), and the line of a rename's first step reaches its stdin after: the
    parent, a zombie or gone, has no command line to read."""
    repo = hub_on_side
    common = repo.common_dir
    x = repo.sha("refs/heads/x")
    log = (common / "logs/refs/heads/x").read_text()
    (common / "logs/refs/heads/x").rename(common / "logs/refs/.tmp-renamed-log")
    hook = common / "hooks" / "reference-transaction"
    env = dict(os.environ, L=f"{x} {'0' * 40} refs/heads/x", HOOK=str(hook))
    script = (
        '(sleep 1; printf "%s\\n" "$L") | exec "$HOOK" prepared &\n'
        'i=0; until grep -qaF -e "$HOOK" "/proc/$!/cmdline" || [ $i = 100 ]; do\n'
        "  sleep 0.05; i=$((i + 1))\n"
        "done\n"
        "sleep 0.2\n"
    )
    r = subprocess.run(["sh", "-c", script], cwd=repo.path, env=env, text=True, capture_output=True)
    assert "git-lane: refused [hook_facts_unknown]" in r.stderr, r.stderr
    assert "/cmdline" in r.stderr
    # the set-aside reflog is left where it is (this run cannot tell whose it is: red team
    # 14F F4), and doctor's fix keeps it
    assert repo.sha("refs/heads/x") == x
    assert (common / "logs/refs/.tmp-renamed-log").read_text() == log


def test_a_branch_delete_during_a_rename_by_no_git_branch_is_refused(hub_on_side: Repo) -> None:
    """Red team 14E F3, read independently of the command line: git sets OLD's reflog
    aside (logs/refs/.tmp-renamed-log) before it deletes OLD, so a branch delete while it
    is there is a rename under way; one whose parent reads as no `git branch` is refused.
    `git branch -d` (its words read: no move) and deletes with no reflog set aside pass."""
    repo = hub_on_side
    common = repo.common_dir
    tmp = common / "logs/refs/.tmp-renamed-log"
    tmp.write_text("a reflog set aside\n")
    git(repo.path, "branch", "y", "x")
    r = run(repo.path, "update-ref", "-d", "refs/heads/y")
    assert_refused(r, "hook_facts_unknown")
    assert "git update-ref" in r.stderr and ".tmp-renamed-log" in r.stderr
    assert repo.sha("refs/heads/y") and tmp.read_text() == "a reflog set aside\n"
    assert_ok(run(repo.path, "branch", "-D", "y"))
    # the refusal's next, doctor, names the set-aside reflog and a fix that moves it
    # into git-lane's kept/ (it is some branch's history: never deleted)
    d = json.loads(repo.lane("doctor", "--json").stdout)
    (fix,) = [c["fix"] for c in d["checks"] if c["name"] == "renamed log"]
    assert subprocess.run(fix, shell=True, cwd=repo.path).returncode == 0, fix
    assert not tmp.exists()
    (kept,) = (repo.state_dir / "kept").glob("tmp-renamed-log.*")
    assert kept.read_text() == "a reflog set aside\n"
    git(repo.path, "branch", "y", "x")
    assert_ok(run(repo.path, "update-ref", "-d", "refs/heads/y"))
    d = json.loads(repo.lane("doctor", "--json").stdout)
    assert [c["status"] for c in d["checks"] if c["name"] == "renamed log"] == ["ok"]


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_doctors_renamed_log_fix_never_replaces_one_it_kept_before(hub: Repo, kind: str) -> None:
    """The fix of `renamed log` moves the set-aside reflog to kept/tmp-renamed-log.<UTC
    second>: one kept there in the same second (an earlier fix) is never replaced nor
    moved into; the reflog goes to a free name beside it."""
    import time

    tmp = hub.common_dir / "logs/refs/.tmp-renamed-log"
    tmp.write_text("a reflog set aside\n")
    kept = hub.state_dir / "kept"
    kept.mkdir(parents=True, exist_ok=True)
    now = int(time.time())
    earlier = [  # every second doctor may take its name in
        kept / time.strftime("tmp-renamed-log.%Y%m%dT%H%M%SZ", time.gmtime(t))
        for t in range(now - 1, now + 30)
    ]
    for e in earlier:
        take_name(e, kind)
    d = json.loads(hub.lane("doctor", "--json").stdout)
    (fix,) = [c["fix"] for c in d["checks"] if c["name"] == "renamed log"]
    assert subprocess.run(fix, shell=True, cwd=hub.path).returncode == 0, fix
    assert not tmp.exists()
    (moved,) = kept.glob("tmp-renamed-log.*.1")
    assert moved.read_text() == "a reflog set aside\n"
    for e in earlier:
        earlier_kept(e, kind)


def test_autocorrected_rename_onto_main_keeps_a_branch_without_reflog(hub: Repo) -> None:
    """Red team 14F F3 (fixed: a parent word that is none of git's branch-writing commands
    has its words read as branch's): `git branch -M y main` spelled so git autocorrects it
    (`-c help.autocorrect=immediate brnch -M y main`: git runs branch in-process, its
    argv still `brnch`). gl_branch_move does not see a branch move (gl_sub is `brnch`);
    gl_rename_unseen looks only for logs/refs/.tmp-renamed-log, which git makes only
    when y has a reflog (none: core.logAllRefUpdates=false, or a bare hub). So y's delete
    passes, then main's delete is refused and git dies with no rollback: branch y, and
    the commit only it held, are lost (main is kept). Main checked out nowhere (the hub
    on another branch), as in the bypass matrix's rename rows."""
    p = hub.path
    main = hub.sha()
    git(p, "switch", "-q", "-c", "side")
    git(p, "-c", "core.logAllRefUpdates=false", "branch", "y", "side")
    git(p, "-c", "core.logAllRefUpdates=false", "switch", "-q", "y")
    hub.commit(p, "y.txt", "only on y\n")
    y = hub.sha("refs/heads/y")
    git(p, "switch", "-q", "side")
    (p / ".git" / "logs" / "refs" / "heads" / "y").unlink(missing_ok=True)  # no reflog
    r = git(p, "-c", "help.autocorrect=immediate", "brnch", "-M", "y", "main", check=False)
    assert r.returncode != 0, r.stderr
    assert hub.sha() == main
    assert hub.sha("refs/heads/y") == y, f"branch y (commit {y}) was lost: {r.stderr}"


def test_a_refused_delete_does_not_hand_a_left_rename_log_to_another_branch(hub: Repo) -> None:
    """Red team 14F F4 (fixed: the set-aside reflog stays for doctor to name): a rename that died part way left logs/refs/.tmp-renamed-log (some
    branch's history; doctor's `renamed log` names it, its fix keeps it in kept/). A
    `git update-ref -d refs/heads/z` (z with no reflog) reaches gl_rename_unseen, whose
    gl_restore_log moves that file to logs/refs/heads/z before refusing: another
    branch's history now reads as z's, doctor no longer names it, and the `git branch
    -D z` the owner runs next deletes it for good."""
    p = hub.path
    common = p / ".git"
    tl = common / "logs" / "refs" / ".tmp-renamed-log"
    old = git(p, "rev-parse", "HEAD").stdout.strip()
    history = (
        f"{'0' * 40} {old} A U Thor <a@example.com> 1700000000 +0000\tbranch: Created from main\n"
    )
    tl.write_text(history)  # what a rename killed after git set the reflog aside leaves
    git(p, "-c", "core.logAllRefUpdates=false", "branch", "z", "main")
    (common / "logs" / "refs" / "heads" / "z").unlink(missing_ok=True)
    r = git(p, "update-ref", "-d", "refs/heads/z", check=False)
    assert r.returncode != 0 and "hook_facts_unknown" in r.stderr, r.stderr
    zlog = common / "logs" / "refs" / "heads" / "z"
    assert tl.exists() and not zlog.exists(), (
        f"the set-aside reflog was handed to refs/heads/z: {zlog.exists()}"
    )


def test_remote_rename_cannot_move_main_through_its_symbolic_chain(hub: Repo) -> None:
    """Red team 14F F5 (fixed: while main is symbolic every delete out of its chain but
    pack-refs' is refused, next restore-main): main made a symbolic ref to refs/remotes/new/x (git 2.39: unseen,
    matrix row `symref_main`); the hook then refuses `git update-ref refs/remotes/new/x`
    (row `symref_main_moved`). But `git remote rename old new` renames
    refs/remotes/old/x to refs/remotes/new/x with rename_ref: the transactional delete of
    old/x (in no chain) passes, and new/x is written outside any transaction: main now
    names a commit of a lane, no land, no refusal."""
    p = hub.path
    lp = hub.create("alpha")
    evil = hub.commit(lp, "evil.txt", "evil\n")
    main = hub.sha()
    git(p, "remote", "add", "old", "/nonexistent")
    git(p, "update-ref", "refs/remotes/old/x", evil)
    git(p, "symbolic-ref", "refs/heads/main", "refs/remotes/new/x")  # git 2.39: unseen
    r = git(p, "update-ref", "refs/remotes/new/x", evil, check=False)
    assert r.returncode != 0 and "main_mutation_refused" in r.stderr, r.stderr
    r = git(p, "remote", "rename", "old", "new", check=False)
    now = git(p, "rev-parse", "--verify", "-q", "refs/heads/main", check=False).stdout.strip()
    assert now != evil, f"main moved {main[:12]} -> {evil[:12]} by git remote rename: {r.stderr}"
    assert "git-lane: refused [main_mutation_refused]" in r.stderr, r.stderr
    assert "Next: git lane restore-main\n" in r.stderr, r.stderr
    assert hub.jlane("restore-main").rc == 0  # the next, as printed: main plain again
    assert hub.sha() == main
    assert hub.sha("refs/remotes/old/x") == evil  # refused at its delete: nothing lost


def test_renaming_main_away_leaves_its_reflog_in_place(repo: Repo) -> None:
    install(repo)
    common = repo.common_dir
    log = (common / "logs/refs/heads/main").read_text()
    assert_refused(run(repo.path, "branch", "-m", "main", "old-main"))  # the hub's own branch
    assert_refused(run(repo.path, "branch", "-m", "renamed"))
    assert (common / "logs/refs/heads/main").read_text() == log
    assert not (common / "logs/refs/.tmp-renamed-log").exists()
    git(repo.path, "branch", "other")
    assert_ok(run(repo.path, "branch", "-m", "other", "other2"))


# -- a master repository -----------------------------------------------------------------
def test_install_pins_master_so_a_copied_main_cannot_unprotect_it(tmp_path: Path) -> None:
    path = tmp_path / "old style"
    git(tmp_path, "init", "-q", "-b", "master", str(path))
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    r = Repo(path)
    res = install(r)
    assert res["pinned"]["value"] == "master"
    assert 'main_branch = "master"' in (r.state_dir / "config.toml").read_text()
    lane = make_lane(r, "a")
    assert_ok(commit_file(lane, "evil.txt", "evil\n"))
    before = sha(path, "refs/heads/master")
    # git writes a copied branch outside any ref transaction: no hook sees this one
    assert run(lane, "branch", "-c", "lane/a", "main").returncode == 0
    assert r.jlane("status").json["main"]["branch"] == "master"
    assert_refused(run(lane, "update-ref", "refs/heads/master", "lane/a"))
    assert_refused(run(path, "merge", "-q", "--ff-only", "lane/a"))
    assert sha(path, "refs/heads/master") == before
    assert_ok(run(path, "branch", "-D", "main"))  # the stray main may go


def test_install_does_not_pin_a_main_repository(repo: Repo) -> None:
    res = install(repo)
    assert "pinned" not in res
    assert not (repo.state_dir / "config.toml").exists()


# -- doctor sees main moved where no hook could ------------------------------------------
def test_doctor_fails_when_main_is_not_where_the_last_land_left_it(hub_on_side: Repo) -> None:
    repo = hub_on_side
    repo.config("gate", "off")
    lane = make_lane(repo, "a")
    assert_ok(commit_file(lane, "a.txt", "a\n"))
    assert repo.jlane("land", "a").rc == 0
    d = repo.jlane("doctor").json
    assert not [c for c in d["checks"] if c["name"] == "main_moved"]
    assert run(repo.path, "branch", "-C", "x", "main").returncode == 0  # unseen by hooks
    d = repo.jlane("doctor").json
    moved = [c for c in d["checks"] if c["name"] == "main_moved"]
    assert moved and moved[0]["status"] == "fail"
    assert "copied refs/heads/x" in moved[0]["message"]


# -- conflict markers of another size --------------------------------------------------
@pytest.mark.parametrize("n", [7, 8, 10, 32])
def test_markers_of_the_attribute_size_are_found(n: int) -> None:
    text = f"a\n{'<' * n} HEAD\nmain\n{'|' * n} base\nx\n{'=' * n}\nlane\n{'>' * n} c1\n"
    assert conflict_blocks(text.encode(), n) == [2]
    if n != 7:
        assert conflict_blocks(text.encode()) == []  # without the attribute: not markers


def test_marker_sizes_from_check_attr() -> None:
    out = "m.txt\0conflict-marker-size\x0010\0n.txt\0conflict-marker-size\0unspecified\0"
    assert marker_sizes(out) == {"m.txt": 10, "n.txt": 7}


def two_lanes_that_conflict(
    repo: Repo,
    files: dict[str, bytes | None],
    main_side: dict[str, bytes | None],
    lane_side: dict[str, bytes | None],
) -> Path:
    """A base commit with `files`, lane b lands `main_side`, lane a commits `lane_side`
    (None deletes a file) and is left stale; returns lane a's path."""
    for name, data in files.items():
        p = repo.path / name
        p.write_bytes(data or b"")
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-q", "-m", "base")
    install(repo)
    repo.config("gate", "off")
    a, b = make_lane(repo, "a"), make_lane(repo, "b")
    for where, change in ((b, main_side), (a, lane_side)):
        for name, data in change.items():
            if data is None:
                git(where, "rm", "-q", "--", name)
            else:
                (where / name).write_bytes(data)
        git(where, "add", "-A")
        git(where, "commit", "-q", "-m", f"change in {where.name}")
    assert repo.jlane("land", "b").rc == 0
    return a


def test_continue_refuses_markers_of_a_larger_conflict_marker_size(repo: Repo) -> None:
    a = two_lanes_that_conflict(
        repo,
        {".gitattributes": b"*.txt conflict-marker-size=10\n", "m.txt": b"x\n"},
        {"m.txt": b"main\n"},
        {"m.txt": b"lane\n"},
    )
    r = repo.jlane("sync", "a")
    assert r.rc == 1 and r.json["state"] == "conflicts", r.stderr
    assert b"<<<<<<<<<< " in (a / "m.txt").read_bytes()
    r = repo.jlane("continue", "a")
    assert (r.rc, r.code) == (1, "conflict_markers_present"), r.stderr
    (a / "m.txt").write_text("both\n")
    r = repo.jlane("continue", "a")
    assert r.rc == 0 and r.json["state"] == "fresh", r.stderr
    assert git(a, "show", "HEAD:m.txt").stdout == "both\n"


def test_pre_commit_refuses_markers_of_a_larger_size(repo: Repo) -> None:
    install(repo)
    lane = make_lane(repo, "a")
    write(lane / ".gitattributes", "*.txt conflict-marker-size=10\n")
    write(lane / "m.txt", "<<<<<<<<<< HEAD\nmain\n==========\nlane\n>>>>>>>>>> c1\n")
    git(lane, "add", "-A")
    assert_refused(run(lane, "commit", "-q", "-m", "markers"), "conflict_markers_present")


@pytest.mark.parametrize("first", ["a.txt", "z.txt"])
def test_pre_commit_finds_markers_behind_another_staged_file(repo: Repo, first: str) -> None:
    # `git diff-index --quiet -G` stops at the first changed file: a clean a.txt staged
    # beside the markers hid them from the check
    install(repo)
    lane = make_lane(repo, "a")
    write(lane / first, "plain\n")
    write(lane / "m.txt", "<<<<<<< HEAD\nmain\n=======\nlane\n>>>>>>> c1\n")
    git(lane, "add", "-A")
    assert_refused(run(lane, "commit", "-q", "-m", "markers"), "conflict_markers_present")


# -- continue never takes a side by itself -----------------------------------------------
def test_continue_refuses_binary_and_delete_conflicts_nobody_decided(repo: Repo) -> None:
    a = two_lanes_that_conflict(
        repo,
        {"b.bin": b"bin\0base", "gone-on-main": b"keep\n", "gone-in-lane": b"keep\n"},
        {"b.bin": b"bin\0main", "gone-on-main": None, "gone-in-lane": b"changed on main\n"},
        {"b.bin": b"bin\0lane", "gone-on-main": b"changed in lane\n", "gone-in-lane": None},
    )
    r = repo.jlane("sync", "a")
    assert r.rc == 1 and r.json["state"] == "conflicts", r.stderr
    r = repo.jlane("continue", "a")
    assert (r.rc, r.code) == (1, "conflicts_unresolved"), r.stderr
    assert sorted(r.json["details"]["paths"]) == ["b.bin", "gone-in-lane", "gone-on-main"]
    assert "Traceback" not in r.stderr
    # decided: the lane's binary, the lane's deletion, main's deletion
    git(a, "checkout", "--theirs", "--", "b.bin")
    git(a, "rm", "-q", "--", "gone-in-lane", "gone-on-main")
    r = repo.jlane("continue", "a")
    assert r.rc == 0 and r.json["state"] == "fresh", r.stderr
    assert git(a, "show", "HEAD:b.bin").stdout == "bin\0lane"
    assert git(a, "ls-tree", "--name-only", "HEAD").stdout.split() == ["README.md", "b.bin"]


def test_continue_takes_a_binary_file_the_user_replaced(repo: Repo) -> None:
    a = two_lanes_that_conflict(
        repo, {"b.bin": b"bin\0base"}, {"b.bin": b"bin\0main"}, {"b.bin": b"bin\0lane"}
    )
    assert repo.jlane("sync", "a").json["state"] == "conflicts"
    (a / "b.bin").write_bytes(b"bin\0merged")  # changed, not staged: a decision
    r = repo.jlane("continue", "a")
    assert r.rc == 0 and r.json["state"] == "fresh", r.stderr
    assert git(a, "show", "HEAD:b.bin").stdout == "bin\0merged"


# -- the hooks and TOML read config.toml alike ---------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        'gate_command = """\nmain_branch = "trunk"\n',  # a string that never ends
        'main_branch = """trunk"""\n',
        "main_branch = '''trunk'''\n",
        'main_branch = "tr\\u0075nk"\n',
        '"main_branch" = "trunk"\n',
        'enabled = "false"\n',
    ],
)
def test_config_the_hooks_would_misread_is_refused(repo: Repo, text: str) -> None:
    git(repo.path, "branch", "trunk")
    install(repo)
    (repo.state_dir / "config.toml").write_text(text)
    r = repo.jlane("status")
    assert (r.rc, r.code) == (1, "invalid_config"), r.stdout + r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "text",
    [
        'main_branch = "trunk"\n',
        "main_branch='trunk' # the trunk\n",
        ' \tmain_branch\t=\t"trunk"\r\n',
        'gate_command = """\nmain_branch = "main"\n"""\nmain_branch = "trunk"\n',
        # the hooks skip a multi-line string's lines as TOML does (they once read this
        # `enabled = false` and switched themselves off)
        "gate_command = '''\nenabled = false\n'''\nmain_branch = \"trunk\"\n",
        'gate_command = """\nenabled = false\n   """ \nmain_branch = "trunk"\n',
        # an escaped quote does not end a multi-line basic string (red team 13G)
        'gate_command = """\necho \\"""\nenabled = false\nx = 1"""\nmain_branch = "trunk"\n',
        'gate_command = """echo \\"""\nenabled = false\n"""\nmain_branch = "trunk"\n',
        'gate_command = """\necho \\\\"""\nmain_branch = "trunk"\n',
        'enabled = true\nmain_branch = "trunk"\n[tool]\nmain_branch = "other"\n',
    ],
)
def test_config_both_read_alike_is_fine(repo: Repo, text: str) -> None:
    git(repo.path, "branch", "trunk")
    git(repo.path, "commit", "-q", "--allow-empty", "-m", "second")
    install(repo)
    (repo.state_dir / "config.toml").write_text(text)
    r = repo.jlane("status")
    assert r.rc == 0, r.stderr
    assert r.json["main"]["branch"] == "trunk"
    assert_refused(run(repo.path, "update-ref", "refs/heads/trunk", "main"))


def test_hooks_never_read_enabled_false_out_of_an_escaped_quote_in_a_multiline_string(
    repo: Repo,
) -> None:
    """gl_cfg_file ended a multi-line basic string at the first line holding three
    quotes, escaped or not: a gate_command printing an escaped quote and two more, then
    holding the text `enabled = false` (TOML: one string, enabled stays true) switched
    every hook off, and a plain commit on main went through (red team 13G)."""
    import tomllib

    install(repo)
    cfg = repo.state_dir / "config.toml"
    cfg.write_text(
        (cfg.read_text() if cfg.exists() else "")
        + 'gate_command = """\necho \\"""\nenabled = false\nx = 1"""\n'
    )
    assert "enabled" not in tomllib.loads(cfg.read_text())  # TOML: one string
    assert repo.jlane("status").rc == 0  # hooks and engine read it alike
    before = repo.sha()
    assert_refused(run(repo.path, "commit", "-q", "--allow-empty", "-m", "on main"))
    assert repo.sha() == before


def test_a_disagreement_on_enabled_is_fixed_in_the_file_never_by_switching_off(
    tmp_path: Path,
) -> None:
    """When the hooks and TOML read `enabled` differently, the `next` (doctor's fix) is to
    edit the file; `git lane config set enabled false` (what it said when TOML meant
    enabled and the hooks read false) would have switched git-lane off to agree."""
    from guard import config

    path = tmp_path / "config.toml"
    path.write_text("enabled = false\n")  # what the hooks read
    for toml in ({}, {"enabled": True}):  # what TOML made of it, say
        with pytest.raises(Refusal) as exc:
            config.check_hook_view(path, toml)
        r = exc.value
        assert r.code == "invalid_config" and r.next == [f"${{EDITOR:-vi}} {path}"], r.next
        assert not [a for a in r.alternatives if "enabled false" in a], r.alternatives


@pytest.mark.parametrize("name", ["x\ny", "a\tb", 'a"b', "a'b", "a\x7fb"])
def test_main_branch_with_control_or_quote_characters_is_refused(name: str) -> None:
    assert config.KEYS["main_branch"].check(name)


def test_config_set_main_branch_with_a_newline_is_refused(repo: Repo) -> None:
    r = repo.jlane("config", "set", "main_branch", "x\ny")
    assert (r.rc, r.code) == (1, "invalid_config")


# -- refs that shadow main's short name ----------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ("tag", "main", "HEAD"),
        ("tag", "-a", "-m", "t", "main", "HEAD"),
        ("update-ref", "main", "HEAD"),
        ("update-ref", "refs/main", "HEAD"),
        ("update-ref", "refs/tags/main", "HEAD"),
        ("fetch", "-q", ".", "lane/a:refs/tags/main"),
    ],
)
def test_refs_that_shadow_main_are_refused(repo: Repo, args: tuple[str, ...]) -> None:
    install(repo)
    lane = make_lane(repo, "a")
    assert_ok(commit_file(lane, "a.txt", "a\n"))
    assert_refused(run(lane, *args))
    assert (
        git(repo.path, "rev-parse", "--symbolic-full-name", "main").stdout.strip()
        == "refs/heads/main"
    )
    assert not (repo.common_dir / "main").exists()


def test_other_tags_and_deleting_a_shadow_still_work(repo: Repo) -> None:
    install(repo)
    assert_ok(run(repo.path, "tag", "v1"))
    assert_ok(run(repo.path, "tag", "mainline"))
    git(repo.path, "-c", "core.hooksPath=/dev/null", "tag", "main")
    assert_ok(run(repo.path, "tag", "-d", "main"))
    write(repo.path / "s.txt", "s\n")
    git(repo.path, "add", "s.txt")
    assert_ok(run(repo.path, "stash"))
    assert_ok(run(repo.path, "stash", "pop"))


# -- a lock record left by a dead land ----------------------------------------------------
def _ticks(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return raw[raw.rfind(b")") + 2 :].split()[19].decode()


@pytest.mark.parametrize("ticks_ok", [False, True])
def test_a_record_opens_main_only_for_the_process_that_wrote_it(repo: Repo, ticks_ok: bool) -> None:
    """A land killed with -9 leaves its record; a later process that gets the same pid
    (here: this test process, an ancestor of the git it runs) is not that land."""
    import os
    import socket

    install(repo)
    lane = make_lane(repo, "a")
    assert_ok(commit_file(lane, "a.txt", "a\n"))
    main, tip = repo.sha(), sha(lane, "HEAD")
    ticks = _ticks(os.getpid()) if ticks_ok else str(int(_ticks(os.getpid())) + 1)
    locks = repo.state_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "integration.owner").write_text(
        f"pid={os.getpid()}\nstart=\nhost={socket.gethostname()}\ntoken=t\nlane=a\n"
        f"main_before={main}\ntip={tip}\nsince=now\nstart_ticks={ticks}\n"
    )
    res = run(repo.path, "update-ref", "refs/heads/main", str(tip), str(main))
    if ticks_ok:
        assert_ok(res)  # the record's own process (the trust boundary's forged-record case)
    else:
        assert_refused(res)
        assert repo.sha() == main


def test_land_writes_its_start_ticks(repo: Repo) -> None:
    from guard import lock
    from hookfix import grepo

    install(repo)
    held = lock.acquire(grepo(repo), "a", "", "")
    try:
        import os

        rec = lock.read_owner(grepo(repo))
        assert rec is not None and rec.start_ticks == _ticks(os.getpid())
    finally:
        lock.release(grepo(repo), held)


# -- release after git-lane's own worktree lock ---------------------------------------------
def test_a_lane_locked_by_a_refused_release_can_be_released_once_landed(repo: Repo) -> None:
    install(repo)
    repo.config("gate", "off")
    lane = make_lane(repo, "a")
    write(lane / "w.txt", "wip\n")
    r = repo.jlane("release", "a")
    assert (r.rc, r.code) == (1, "unlanded_work")
    assert "locked" in repo.worktrees()
    git(lane, "add", "w.txt")
    git(lane, "commit", "-q", "-m", "w")
    assert repo.jlane("land", "a").rc == 0
    r = repo.jlane("release", "a")
    assert (r.rc, r.code) == (0, "released"), r.stdout + r.stderr
    assert not lane.exists()


def test_release_respects_someone_elses_worktree_lock(repo: Repo) -> None:
    install(repo)
    lane = make_lane(repo, "a")
    git(repo.path, "worktree", "lock", "--reason", "mine", str(lane))
    r = repo.jlane("release", "a")
    assert (r.rc, r.code) == (1, "worktree_locked"), r.stdout + r.stderr
    assert lane.is_dir()
    git(repo.path, "worktree", "unlock", str(lane))
    assert repo.jlane("release", "a").rc == 0


def test_shadows_of_a_configured_main_with_a_slash_are_refused(repo: Repo) -> None:
    git(repo.path, "branch", "rel/x")
    install(repo)
    repo.config("main_branch", "rel/x")
    before = repo.sha("refs/heads/rel/x")
    assert_refused(run(repo.path, "tag", "rel/x"))
    assert_refused(run(repo.path, "update-ref", "refs/rel/x", "HEAD"))
    assert_ok(run(repo.path, "update-ref", "refs/remotes/origin/rel/x", "HEAD"))
    assert_ok(run(repo.path, "tag", "main"))  # main is an ordinary name here
    assert repo.sha("refs/heads/rel/x") == before


# -- bad input is a refusal, not a crash -------------------------------------------------------
@pytest.mark.parametrize("existing", ["lane/a/x", "lane"])
def test_create_beside_a_branch_that_leaves_no_room_is_refused(repo: Repo, existing: str) -> None:
    git(repo.path, "branch", existing)
    r = repo.jlane("create", "a")
    assert (r.rc, r.code) == (1, "branch_exists"), r.stdout + r.stderr
    assert r.json["details"]["conflicts_with"] == f"refs/heads/{existing}"


def test_create_under_a_worktrees_root_that_is_a_file_is_refused(
    repo: Repo, tmp_path: Path
) -> None:
    f = tmp_path / "a-file"
    f.write_text("x\n")
    repo.config("worktrees_root", str(f))
    r = repo.jlane("create", "a")
    assert (r.rc, r.code) == (1, "invalid_config"), r.stdout + r.stderr
