"""Recovery through the real CLI: a lane worktree or branch removed or moved by hand, a
corrupt lane record, and a land interrupted while its gate runs. Nothing committed is
lost on the way out, and every refusal names a command that works."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TAKEN, Repo, earlier_kept, take_name
from enginehelp import events, owner_file, pid_alive, ready_lane, spawn_lane, wait_for


# -- 4. a land interrupted while its gate runs ------------------------------------------------
def test_a_sigterm_before_the_gate_is_known_still_stops_it(tmp_path: Path) -> None:
    """A SIGTERM to a land whose gate has started but before gate.run turned SIGTERM into
    an interrupt (the gate can run, and be seen, before Popen returns; the CI saw it under
    load: the land died of the signal, exit -15, its gate and clean worktree left). Now a
    SIGTERM from the fork until the gate is known is held and acted on at once after:
    Terminated, the gate's group killed. Sent here from `started`, inside that window."""
    pidfile = tmp_path / "gate.pid"
    script = f"""
import os, signal, sys
from guard import gate
try:
    gate.run("sleep 30 & echo $! > {pidfile}; wait", "{tmp_path}", 60, "alpha",
             started=lambda pid, token: os.kill(os.getpid(), signal.SIGTERM))
except gate.Terminated:
    print("terminated")
    sys.exit(7)
print("ran to the end")
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout.strip()) == (7, "terminated"), res
    if pidfile.exists() and pidfile.read_text().strip():  # the gate got that far: it is gone
        sleeper = int(pidfile.read_text())
        wait_for(lambda: not pid_alive(sleeper), 10, "the gate's child to die")


@pytest.mark.parametrize(
    ("sig", "as_json"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["sigint", "sigterm", "sigterm-json"],
)
def test_interrupted_gate_leaves_main_and_frees_the_lock(
    repo: Repo, tmp_path: Path, sig: signal.Signals, as_json: bool
) -> None:
    pidfile = tmp_path / "gate.pid"
    repo.config("gate_command", f"sleep 30 & echo $! > {shlex.quote(str(pidfile))}; wait")
    ready_lane(repo, "alpha")
    main = repo.sha()
    assert main is not None
    proc = spawn_lane("land", "alpha", *(["--json"] if as_json else []), cwd=repo.path)
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 20, "the gate")
    assert "pid=" in owner_file(repo).read_text()  # the land holds the lock while its gate runs
    sleeper = int(pidfile.read_text())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, (proc.returncode, out, err)
    assert err.splitlines() == [
        f"git-lane: interrupted: main unchanged at {main[:12]}; the integration lock is released"
    ], err
    if as_json:
        res = json.loads(out)
        assert (res["ok"], res["code"]) == (False, "land_interrupted")
        assert res["details"]["signal"] == sig.name and res["next"] == ["git lane land alpha"]
    else:
        assert out == ""
    # the gate's whole group is gone, the lock is really free, main did not move
    wait_for(lambda: not pid_alive(sleeper), 10, "the gate's child to die")
    assert not owner_file(repo).exists()
    fd = os.open(repo.state_dir / "locks" / "integration.flock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while anyone holds it
    finally:
        os.close(fd)
    assert repo.sha() == main and not (repo.state_dir / "landing.json").exists()
    ev = events(repo, "land_interrupted")
    assert [(e["lane"], e["signal"], e["main"]) for e in ev] == [("alpha", sig.name, main)]
    # and the next land goes through
    repo.config("gate_command", "true")
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout + r.stderr


def test_a_second_signal_does_not_cut_the_cleanup_short(repo: Repo, tmp_path: Path) -> None:
    """A gate that ignores SIGTERM needs the SIGKILL two seconds later: a second Ctrl-C and
    a SIGTERM meanwhile must not leave it running, nor the lock held."""
    import time

    pidfile = tmp_path / "gate.pid"
    repo.config(
        "gate_command", f"trap '' TERM; sleep 30 & echo $! > {shlex.quote(str(pidfile))}; wait"
    )
    ready_lane(repo, "alpha")
    main = repo.sha()
    assert main is not None
    proc = spawn_lane("land", "alpha", cwd=repo.path)
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 20, "the gate")
    sleeper = int(pidfile.read_text())
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert err.splitlines() == [
        f"git-lane: interrupted: main unchanged at {main[:12]}; the integration lock is released"
    ], err
    wait_for(lambda: not pid_alive(sleeper), 10, "the gate's child to die")
    assert not owner_file(repo).exists() and repo.sha() == main


# -- helpers ------------------------------------------------------------------------------------
CONFIRM = ("--confirm", "yes-discard-lane")


def setup(repo: Repo) -> None:
    """Hooks installed (the restore of a lane branch must pass the reference-transaction
    hook), no gate: these tests are about the lane, not the gate."""
    r = repo.jlane("install")
    assert r.rc == 0, r.stderr
    repo.config("gate", "off")


def lane_view(repo: Repo, key: str) -> dict[str, object]:
    r = repo.jlane("status")
    assert r.rc == 0, r.stderr
    found = [ln for ln in r.json["lanes"] if ln["key"] == key]
    assert len(found) == 1, r.json["lanes"]
    return dict(found[0])


def doctor_check(repo: Repo, name: str) -> dict[str, object]:
    r = repo.jlane("doctor")
    found = [c for c in r.json["checks"] if c["name"] == name]
    assert len(found) == 1, r.json["checks"]
    return dict(found[0])


def worktree_branch(repo: Repo, path: Path) -> str | None:
    """The branch git's worktree list has checked out at `path` (None: not listed)."""
    block = None
    for chunk in repo.worktrees().split("\n\n"):
        lines = chunk.splitlines()
        if lines and lines[0] == f"worktree {path}":
            block = lines
    if block is None:
        return None
    return next((ln.split(" ", 1)[1] for ln in block if ln.startswith("branch ")), "")


# -- 1. a lane worktree deleted by hand ----------------------------------------------------------
@pytest.mark.parametrize("pruned", [False, True], ids=["admin-kept", "pruned"])
def test_deleted_worktree_is_checked_out_again(repo: Repo, pruned: bool) -> None:
    import shutil

    setup(repo)
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    (lp / "staged.txt").write_text("staged\n")
    repo.git("add", "staged.txt", cwd=lp)
    shutil.rmtree(lp)
    if pruned:
        repo.git("worktree", "prune")
    ln = lane_view(repo, "alpha")
    assert ln["state"] == "orphaned" and "git lane repair alpha" in str(ln["advice"])
    c = doctor_check(repo, "lane alpha")
    assert c["status"] == "warn" and str(c["fix"]).startswith("git lane repair alpha")
    for cmd in (("land", "alpha"), ("sync", "alpha")):
        r = repo.jlane(*cmd)
        assert (r.rc, r.code) == (1, "lane_not_active"), (cmd, r.stdout)
        assert r.json["next"][0] == "git lane repair alpha"
    # reconcile does not guess (the directory may only have been moved): it names repair
    r = repo.jlane("reconcile")
    assert r.rc == 0 and r.json["next"] == ["git lane repair alpha"], r.stdout
    assert not lp.exists()

    r = repo.jlane("repair", "alpha")
    assert (r.rc, r.code) == (0, "repaired"), r.stdout + r.stderr
    how = [c["how"] for c in r.json["changes"] if c["action"] == "worktree_restored"]
    assert how == ["added" if pruned else "relinked"]
    assert worktree_branch(repo, lp) == "refs/heads/lane/alpha"
    assert repo.sha("refs/heads/lane/alpha") == tip and (lp / "a.txt").read_text() == "a\n"
    status = repo.git("status", "--porcelain", cwd=lp).stdout
    # while git's admin dir was kept, what was staged there comes back too
    assert status == ("" if pruned else "A  staged.txt\n")
    ln = lane_view(repo, "alpha")
    assert ln["state"] == "active" and ln["branch_state"] == "ok"
    assert doctor_check(repo, "lanes")["status"] == "ok"
    assert repo.jlane("repair", "alpha").code == "ok"  # nothing left to do
    if not pruned:
        repo.git("commit", "-q", "-m", "staged", cwd=lp)
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout + r.stderr


@pytest.mark.parametrize("kind", TAKEN)  # the backup name its next moves to: taken?
def test_repair_leaves_a_foreign_directory_alone(repo: Repo, kind: str | None) -> None:
    import shutil

    setup(repo)
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    shutil.rmtree(lp)
    lp.mkdir()
    (lp / "mine.txt").write_text("someone else's\n")
    backup = Path(str(lp) + ".moved-aside")
    aside = take_name(backup, kind)
    r = repo.jlane("repair", "alpha")
    assert (r.rc, r.code) == (1, "worktree_path_exists"), r.stdout
    assert (lp / "mine.txt").read_text() == "someone else's\n"
    assert r.json["next"][-1] == "git lane repair alpha"
    for cmd in r.json["next"][:-1]:  # the commands before it run as written
        assert subprocess.run(cmd, shell=True, cwd=repo.path).returncode == 0, cmd
    assert (aside / "mine.txt").read_text() == "someone else's\n"
    earlier_kept(backup, kind)
    assert repo.jlane("repair", "alpha").code == "repaired"


# -- 2. a lane branch deleted or moved by hand ---------------------------------------------------
def test_deleted_branch_is_restored_from_the_worktree(repo: Repo) -> None:
    setup(repo)
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    tip = repo.commit(lp, "b.txt", "b\n")
    # git refuses `branch -D` of a checked-out branch; update-ref does not
    repo.git("update-ref", "-d", "refs/heads/lane/alpha")
    assert repo.sha("refs/heads/lane/alpha") is None
    ln = lane_view(repo, "alpha")
    assert ln["branch_state"] == "missing" and "git lane repair alpha" in str(ln["advice"])
    c = doctor_check(repo, "lane alpha")
    assert (c["status"], c["fix"]) == ("fail", "git lane repair alpha")
    assert repo.jlane("doctor").rc == 1
    for cmd in (("land", "alpha"), ("sync", "alpha"), ("release", "alpha")):
        r = repo.jlane(*cmd)
        assert (r.rc, r.code) == (1, "lane_branch_missing"), (cmd, r.stdout)
        assert r.json["next"][0] == "git lane repair alpha"
        assert r.json["details"]["recorded"] == tip
    assert lp.is_dir() and (lp / "b.txt").exists()  # nothing was removed

    r = repo.jlane("repair", "alpha")
    assert (r.rc, r.code) == (0, "repaired"), r.stdout + r.stderr
    assert repo.sha("refs/heads/lane/alpha") == tip
    assert lane_view(repo, "alpha")["advice"] == "Ready: `git lane land alpha`."
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout + r.stderr
    assert repo.sha() == tip


def test_moved_branch_is_put_back_and_other_work_kept(repo: Repo) -> None:
    setup(repo)
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    main = repo.sha()
    assert main is not None
    # reset to main by hand: nothing but the lane's own commit is at stake
    repo.git("update-ref", "refs/heads/lane/alpha", main)
    ln = lane_view(repo, "alpha")
    assert ln["branch_state"] == "moved" and "git lane repair alpha" in str(ln["advice"])
    c = doctor_check(repo, "lane alpha")
    assert (c["status"], c["fix"]) == ("fail", "git lane repair alpha")
    for cmd in (("land", "alpha"), ("sync", "alpha")):
        r = repo.jlane(*cmd)
        assert (r.rc, r.code) == (1, "lane_branch_moved"), (cmd, r.stdout)
        assert r.json["next"][0] == "git lane repair alpha"
    r = repo.jlane("repair", "alpha")
    assert (r.rc, r.code) == (0, "repaired"), r.stdout
    assert repo.sha("refs/heads/lane/alpha") == tip
    assert [c["action"] for c in r.json["changes"]] == ["branch_restored"]
    assert repo.git("for-each-ref", "refs/heads/git-lane-rescue/").stdout == ""

    # moved onto commits of its own: those are kept on a rescue branch, and it says so
    other = repo.git(
        "commit-tree", "-p", main, "-m", "someone else's", f"{main}^{{tree}}"
    ).stdout.strip()
    repo.git("update-ref", "refs/heads/lane/alpha", other)
    r = repo.jlane("repair", "alpha")
    assert (r.rc, r.code) == (0, "repaired"), r.stdout
    rescue = f"refs/heads/git-lane-rescue/alpha-{other[:12]}"
    assert repo.sha(rescue) == other and repo.sha("refs/heads/lane/alpha") == tip
    assert any(rescue.removeprefix("refs/heads/") in w for w in r.json["warnings"])
    assert repo.jlane("land", "alpha").code == "landed"


def test_repair_never_calls_an_intact_branch_gone_nor_offers_its_discard(repo: Repo) -> None:
    """The lane's HEAD reflog (`<admin>/logs/HEAD`, the lane's to write) is what
    branch_facts takes as the branch's last commit. One line naming a commit no store
    holds called the branch moved (land refused lane_branch_moved), and repair then said
    the branch was gone and offered `release --confirm yes-discard-lane`: the lane's
    unlanded commit would go with it (red team 13S). A commit no store holds is no
    evidence: the intact branch is the lane's, and no command offers its discard."""
    setup(repo)
    lp = repo.create("alpha")
    tip = repo.commit(lp, "f.txt", "work\n")
    admin = Path(
        repo.git("rev-parse", "--path-format=absolute", "--git-dir", cwd=lp).stdout.strip()
    )
    with (admin / "logs" / "HEAD").open("a") as f:
        f.write(f"{tip} {'2' * 40} T <t@e> 1 +0000\tcommit: y\n")
    assert lane_view(repo, "alpha")["branch_state"] == "ok"
    r = repo.jlane("repair", "alpha")
    assert repo.sha("refs/heads/lane/alpha") == tip  # the branch is intact
    assert "yes-discard-lane" not in r.stdout, r.stdout
    assert (r.rc, r.code, r.json["changes"]) == (0, "ok", []), r.stdout
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout
    assert repo.sha() == tip


def _symbolic_to_main(repo: Repo, key: str) -> Path:
    """What a lane can do with a plain write in the common dir's lane refs (a regular
    file: the sandbox grants MAKE_REG there): its branch's loose ref names main."""
    ref = repo.path / ".git" / "refs" / "heads" / "lane" / key
    ref.write_text("ref: refs/heads/main\n")
    return ref


def _printed(repo: Repo, nxt: str) -> None:
    """One `git lane ...` next, run as printed."""
    words = shlex.split(nxt)
    assert words[:2] == ["git", "lane"], nxt
    r = repo.lane(*words[2:])
    assert r.rc == 0, (nxt, r.stdout, r.stderr)


def test_a_lane_branch_made_a_symbolic_ref_to_main_is_repaired_never_followed(
    repo: Repo,
) -> None:
    """A lane's branch ref rewritten as `ref: refs/heads/main` resolves to main's value:
    release said the branch "moved from X to X" while it ran, for ever, and repair found
    nothing to repair (red team 13T). It is a moved branch: release and land refuse it,
    their next (repair) makes the ref plain at the lane's recorded commit, and the lane
    lands its own work; main never moves through it."""
    setup(repo)
    lp = repo.create("alpha")
    tip = repo.commit(lp, "f.txt", "work\n")
    main = repo.sha()
    ref = _symbolic_to_main(repo, "alpha")
    assert lane_view(repo, "alpha")["branch_state"] == "moved"
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (1, "lane_branch_moved"), r.stdout
    assert "symbolic ref to refs/heads/main" in r.json["message"]
    assert repo.sha() == main
    for nxt in r.json["next"][:1]:  # repair; the second is the land again
        _printed(repo, nxt)
    assert ref.read_text().strip() == tip  # a plain ref again, at the lane's commit
    assert repo.sha() == main
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout
    assert repo.sha() == tip


def test_release_of_a_lane_whose_branch_names_main_ends_and_keeps_main(repo: Repo) -> None:
    """The 13T dead end, and the discard: a symbolic lane ref is deleted itself
    (`update-ref --no-deref -d`), never main through it."""
    setup(repo)
    repo.create("alpha")
    main = repo.sha()
    _symbolic_to_main(repo, "alpha")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "lane_branch_moved"), r.stdout
    for nxt in r.json["next"]:  # repair, then the release again
        _printed(repo, nxt)
    assert repo.sha() == main and repo.sha("refs/heads/lane/alpha") is None
    repo.create("beta")
    _symbolic_to_main(repo, "beta")
    r = repo.jlane("release", "beta", "--confirm", "yes-discard-lane")
    assert r.rc == 0, (r.stdout, r.stderr)
    assert repo.sha() == main and repo.sha("refs/heads/lane/beta") is None


def test_a_symbolic_lane_ref_with_no_record_is_made_plain_at_its_value(repo: Repo) -> None:
    """Nothing records the lane's last commit (its HEAD reflog is gone): repair still cuts
    the link, keeping the value the ref resolved to as a plain ref."""
    setup(repo)
    lp = repo.create("alpha")
    main = repo.sha()
    admin = Path(
        repo.git("rev-parse", "--path-format=absolute", "--git-dir", cwd=lp).stdout.strip()
    )
    (admin / "logs" / "HEAD").unlink()
    ref = _symbolic_to_main(repo, "alpha")
    r = repo.jlane("repair", "alpha")
    assert r.rc == 0, r.stdout
    assert [c["action"] for c in r.json["changes"]][:1] == ["branch_restored"], r.stdout
    assert ref.read_text().strip() == main and repo.sha() == main
    assert lane_view(repo, "alpha")["branch_state"] == "ok"


def test_worktree_and_branch_both_deleted(repo: Repo) -> None:
    """git's admin dir of the worktree (not pruned) still records the lane's commit."""
    import shutil

    setup(repo)
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    shutil.rmtree(lp)
    repo.git("update-ref", "-d", "refs/heads/lane/alpha")
    ln = lane_view(repo, "alpha")
    assert (ln["state"], ln["branch_state"]) == ("orphaned", "missing")
    assert "git lane repair alpha" in str(ln["advice"])
    r = repo.jlane("reconcile")
    assert r.json["next"] == ["git lane repair alpha"], r.stdout
    r = repo.jlane("repair", "alpha")
    assert (r.rc, r.code) == (0, "repaired"), r.stdout + r.stderr
    assert [c["action"] for c in r.json["changes"]][:2] == ["branch_restored", "worktree_restored"]
    assert repo.sha("refs/heads/lane/alpha") == tip and (lp / "a.txt").exists()
    assert repo.git("status", "--porcelain", cwd=lp).stdout == ""
    assert repo.jlane("land", "alpha").code == "landed"


def test_worktree_and_branch_gone_after_prune(repo: Repo) -> None:
    import shutil

    setup(repo)
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    shutil.rmtree(lp)
    repo.git("update-ref", "-d", "refs/heads/lane/alpha")
    repo.git("worktree", "prune")
    r = repo.jlane("repair", "alpha")
    assert (r.rc, r.code) == (1, "lane_branch_missing"), r.stdout
    assert r.json["next"] == ["git lane release alpha --confirm yes-discard-lane"]
    assert r.json["alternatives"] and "git fsck" in r.json["alternatives"][0]
    c = doctor_check(repo, "lane alpha")
    assert (c["status"], c["fix"]) == ("fail", r.json["next"][0])
    assert repo.jlane(*r.json["next"][0].split()[2:]).code == "released"


def test_repair_is_for_the_owner(repo: Repo) -> None:
    setup(repo)
    repo.create("alpha")
    r = repo.jlane("repair", "alpha", env={"GITLANE_ROLE": "worker"})
    assert (r.rc, r.code) == (1, "role_forbidden")
    assert r.json["next"][0].startswith("git lane repair alpha")
    assert (repo.jlane("repair", "nope").code, repo.jlane("repair", "../x").code) == (
        "unknown_lane",
        "invalid_lane_key",
    )


# -- 3. a corrupt lane record ---------------------------------------------------------------------
CORRUPTIONS = {
    "not-json": lambda p: p.write_text('{"key": "alpha", "path": '),
    "wrong-types": lambda p: p.write_text(
        json.dumps({**json.loads(p.read_text()), "owner_pid": "x", "created_at": 5})
    ),
    "empty-path": lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "path": ""})),
    "directory": lambda p: (p.unlink(), (p / "inside").mkdir(parents=True)),
}


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_corrupt_record_is_shown_refused_and_rebuilt(repo: Repo, how: str) -> None:
    setup(repo)
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    recp = repo.state_dir / "lanes" / "alpha.json"
    CORRUPTIONS[how](recp)
    before = recp.read_bytes() if recp.is_file() else None

    ln = lane_view(repo, "alpha")  # shown, never dropped
    assert ln["state"] == "corrupt" and "git lane reconcile" in str(ln["advice"])
    c = doctor_check(repo, "lane alpha")
    assert (c["status"], c["fix"]) == ("fail", "git lane reconcile")
    assert repo.jlane("doctor").rc == 1
    for cmd in (
        ("land", "alpha"),
        ("create", "alpha"),
        ("sync", "alpha"),
        ("release", "alpha"),
        ("release", "alpha", *CONFIRM),
    ):
        r = repo.jlane(*cmd)
        assert (r.rc, r.code) == (1, "state_corrupt"), (cmd, r.stdout)
        assert r.json["next"][0] == "git lane reconcile"
    assert repo.sha("refs/heads/lane/alpha") == tip and lp.is_dir()

    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stderr
    acts = {c["action"]: c for c in r.json["changes"] if c.get("lane") == "alpha"}
    assert acts["record_rebuilt"]["path"] == str(lp)
    aside = Path(acts["corrupt_record_moved"]["to"])
    assert aside.parent == recp.parent and aside.name.startswith("alpha.json.corrupt-")
    if before is not None:
        assert aside.read_bytes() == before  # kept as it was, never deleted
    else:
        assert (aside / "inside").is_dir()
    ln = lane_view(repo, "alpha")
    assert (ln["state"], ln["path"]) == ("active", str(lp))
    assert repo.jlane("land", "alpha").code == "landed"


def test_corrupt_record_with_nothing_in_git_is_set_aside_and_said(repo: Repo) -> None:
    setup(repo)
    repo.create("alpha")
    assert repo.jlane("release", "alpha").code == "released"
    recp = repo.state_dir / "lanes" / "alpha.json"
    recp.write_text("not json")
    assert lane_view(repo, "alpha")["state"] == "corrupt"
    r = repo.jlane("reconcile")
    assert r.rc == 0
    acts = [c["action"] for c in r.json["changes"] if c.get("lane") == "alpha"]
    assert acts == ["corrupt_record_moved", "record_not_rebuilt"]
    kept = list(recp.parent.glob("alpha.json.corrupt-*"))
    assert [p.read_text() for p in kept] == ["not json"]
    # a second corruption is kept beside the first, never over it
    recp.write_text("again")
    assert repo.jlane("reconcile").rc == 0
    kept = sorted(p.read_text() for p in recp.parent.glob("alpha.json.corrupt-*"))
    assert kept == ["again", "not json"]
    assert repo.jlane("create", "alpha").code == "created"
