"""Nothing that bypasses ref transactions can lose landed work: every land keeps its tip
under refs/git-lane/landed/<epoch>; a reflog rewind, a branch copy or a symbolic ref that
moves main unseen, followed by `git gc --prune=now`, deletes no landed commit; doctor
names the one command that puts each state right (`git lane restore-main` for main), and
status says so on every run. Real repositories, real hooks, real git processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, git, lane
from enginehelp import fifo_packed_refs, hard_link_planted
from guard.errors import Refusal
from hookfix import assert_ok, commit_file, grepo, install, run, sha

LANDED = "refs/git-lane/landed/"


def landed_refs(repo: Repo) -> dict[str, str]:
    out = git(repo.path, "for-each-ref", "--format=%(refname) %(objectname)", LANDED).stdout
    return dict(ln.split(" ", 1) for ln in out.splitlines())


def ref(epoch: int) -> str:
    return f"{LANDED}{epoch:010d}"


def land_one(repo: Repo, key: str, files: dict[str, str]) -> str:
    """Create lane `key`, commit each file separately, sync, land; the landed tip."""
    path = repo.create(key)
    for name, text in files.items():
        assert_ok(commit_file(path, name, text))
    assert repo.jlane("sync", key).rc == 0
    r = repo.jlane("land", key)
    assert r.rc == 0 and r.code == "landed", r.stdout + r.stderr
    return str(r.json["main_after"])


@pytest.fixture
def landed2(repo: Repo) -> tuple[Repo, list[str], list[str]]:
    """Hooks installed, two lands (the second of two commits), both lanes released: the
    landed tips, and every commit the lands put on main."""
    install(repo)
    repo.config("gate", "off")
    base = repo.sha()
    a = land_one(repo, "a", {"a.txt": "a\n"})
    b = land_one(repo, "b", {"b1.txt": "b1\n", "b2.txt": "b2\n"})
    commits = git(repo.path, "rev-list", f"{base}..{b}").stdout.split()
    assert len(commits) == 3
    for key in ("a", "b"):
        assert repo.jlane("release", key).rc == 0
    return repo, [a, b], commits


def doctor(repo: Repo, cwd: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    r = repo.jlane("doctor", cwd=cwd)
    assert r.rc in (0, 1) and "Traceback" not in r.stderr, r.stderr
    out: dict[str, list[dict[str, Any]]] = {}
    for c in r.json["checks"]:
        out.setdefault(c["name"], []).append(c)
    return out


def failing(repo: Repo, name: str, cwd: Path | None = None) -> dict[str, Any]:
    (c,) = [c for c in doctor(repo, cwd).get(name, []) if c["status"] == "fail"]
    assert c["fix"], c
    return c


def run_fix(fix: str, cwd: Path) -> None:
    cmd = fix.split("  (")[0]  # a fix may end in an explanation in two spaces and parentheses
    res = subprocess.run(cmd, shell=True, cwd=cwd, capture_output=True, text=True)
    assert res.returncode == 0, f"{cmd}\n{res.stdout}\n{res.stderr}"


def gc_everything(repo: Repo) -> None:
    """What a user (or `git maintenance`) can run: no reflog and no loose object survives."""
    git(repo.path, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
    git(repo.path, "gc", "-q", "--prune=now")


def alerts(repo: Repo, env: dict[str, str] | None = None) -> set[str]:
    r = repo.jlane("status", env=env)
    assert r.rc == 0, r.stderr
    assert len(r.json["warnings"]) >= len(r.json["alerts"])
    return {a["code"] for a in r.json["alerts"]}


# -- land keeps every landed tip ----------------------------------------------------------
def test_every_land_keeps_its_tip_under_a_landed_ref(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    repo, tips, _ = landed2
    assert landed_refs(repo) == {ref(1): tips[0], ref(2): tips[1]}
    assert sha(repo.path, "refs/heads/main") == tips[1]


def test_a_lost_epoch_file_never_reuses_a_landed_ref(repo: Repo) -> None:
    repo.config("gate", "off")
    a = land_one(repo, "a", {"a.txt": "a\n"})
    (repo.state_dir / "epoch.json").write_text("{ not json")
    b = land_one(repo, "b", {"b.txt": "b\n"})
    assert landed_refs(repo) == {ref(1): a, ref(2): b}
    assert json.loads((repo.state_dir / "epoch.json").read_text())["epoch"] == 2


# -- a reflog rewind, then gc ---------------------------------------------------------------
def test_reflog_rewind_and_gc_lose_nothing_and_restore_main_puts_it_back(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    repo, (a, b), commits = landed2
    res = run(repo.path, "reflog", "delete", "--updateref", "--rewrite", "main@{0}")
    assert res.returncode == 0, res.stderr  # no ref transaction: no hook saw it
    assert sha(repo.path, "refs/heads/main") == a
    gc_everything(repo)
    for c in commits:
        assert git(repo.path, "cat-file", "-e", c, check=False).returncode == 0, c

    assert "main_moved" in alerts(repo)
    c = failing(repo, "main_moved")
    assert c["fix"] == "git lane restore-main"
    run_fix(c["fix"], repo.path)  # exactly as doctor prints it, through the hooks
    assert sha(repo.path, "refs/heads/main") == b
    assert git(repo.path, "status", "--porcelain").stdout == ""  # the hub is at b again
    assert repo.jlane("doctor").rc == 0
    assert "main_moved" not in alerts(repo)
    r = repo.jlane("restore-main")
    assert (r.rc, r.code) == (0, "unchanged")


def test_a_branch_copy_onto_main_is_restored(landed2: tuple[Repo, list[str], list[str]]) -> None:
    repo, (a, b), _ = landed2
    git(repo.path, "branch", "old", a)
    git(repo.path, "switch", "-q", "--detach")  # main checked out nowhere: git allows -C
    assert run(repo.path, "branch", "-C", "old", "main").returncode == 0  # unseen by hooks
    assert sha(repo.path, "refs/heads/main") == a
    gc_everything(repo)
    assert git(repo.path, "cat-file", "-e", b, check=False).returncode == 0
    run_fix(failing(repo, "main_moved")["fix"], repo.path)
    assert sha(repo.path, "refs/heads/main") == b


def test_main_made_a_symbolic_ref_is_made_plain_at_the_landed_tip(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    repo, (a, b), _ = landed2
    git(repo.path, "switch", "-q", "--detach")
    git(repo.path, "branch", "side", a)
    git(repo.path, "symbolic-ref", "refs/heads/main", "refs/heads/side")
    c = failing(repo, "main")
    assert c["fix"] == "git lane restore-main"
    r = repo.jlane("restore-main")
    assert (r.rc, r.code) == (0, "restored"), r.stdout + r.stderr
    assert r.json["main"]["was_symref_to"] == "refs/heads/side"
    assert git(repo.path, "symbolic-ref", "-q", "refs/heads/main", check=False).returncode != 0
    assert sha(repo.path, "refs/heads/main") == b and sha(repo.path, "refs/heads/side") == a


def test_main_made_a_symbolic_ref_chain_is_made_plain_naming_its_own_target(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """main -> refs/heads/x -> refs/heads/y: restore-main names x, the ref main itself
    pointed to (git's symbolic-ref names the chain's end), and leaves x and y alone."""
    repo, (a, b), _ = landed2
    git(repo.path, "switch", "-q", "--detach")
    git(repo.path, "branch", "y", a)
    git(repo.path, "symbolic-ref", "refs/heads/x", "refs/heads/y")
    git(repo.path, "symbolic-ref", "refs/heads/main", "refs/heads/x")
    r = repo.jlane("restore-main")
    assert (r.rc, r.code) == (0, "restored"), r.stdout + r.stderr
    assert r.json["main"]["was_symref_to"] == "refs/heads/x"
    assert sha(repo.path, "refs/heads/main") == b
    assert git(repo.path, "symbolic-ref", "refs/heads/x").stdout.strip() == "refs/heads/y"
    assert sha(repo.path, "refs/heads/y") == a


# -- restore-main refuses what it must not do ----------------------------------------------
@pytest.mark.parametrize("env", [{"GITLANE_ROLE": "worker"}, {"GITLANE_LANE": "a"}])
def test_restore_main_is_refused_to_workers(
    landed2: tuple[Repo, list[str], list[str]], env: dict[str, str]
) -> None:
    repo, (a, _), _ = landed2
    assert (
        run(repo.path, "reflog", "delete", "--updateref", "--rewrite", "main@{0}").returncode == 0
    )
    r = repo.jlane("restore-main", env=env)
    assert (r.rc, r.code) == (1, "role_forbidden")
    assert sha(repo.path, "refs/heads/main") == a


def _by_hand(repo: Repo, parent: str) -> str:
    """A commit on `parent` put on main with the hooks switched off."""
    c = git(
        repo.path, "commit-tree", "-p", parent, "-m", "by hand", f"{parent}^{{tree}}"
    ).stdout.strip()
    git(repo.path, "-c", "core.hooksPath=/dev/null", "update-ref", "refs/heads/main", c)
    return c


@pytest.mark.parametrize("where", ["ahead", "diverged"])
def test_restore_main_refuses_commits_no_land_put_there(
    landed2: tuple[Repo, list[str], list[str]], where: str
) -> None:
    repo, (a, b), _ = landed2
    moved = _by_hand(repo, b if where == "ahead" else a)
    r = repo.jlane("restore-main")
    assert r.rc == 1 and r.code == f"main_{where}", r.stdout + r.stderr
    assert r.json["details"]["commits"] == [moved] and r.json["details"]["landed"] == b
    assert sha(repo.path, "refs/heads/main") == moved
    assert failing(repo, "main_moved")["fix"] != "git lane restore-main"
    run_fix(r.json["next"][0], repo.path)
    # the owner's other way out runs as written: main back, the commit kept on a branch
    (by_hand,) = r.json["alternatives"]
    run_fix(by_hand, repo.path)
    assert sha(repo.path, "refs/heads/main") == b
    assert sha(repo.path, f"refs/heads/rescue-main-{moved[:12]}") == moved


def test_restore_main_with_nothing_landed(repo: Repo) -> None:
    r = repo.jlane("restore-main")
    assert (r.rc, r.code) == (1, "no_landed_tip")
    assert "Traceback" not in r.stderr


# -- what else hides main or its history ------------------------------------------------------
@pytest.mark.parametrize("name", ["refs/tags/main", "refs/main", "main"])
def test_a_symbolic_ref_shadowing_main_is_found_and_removed(
    landed2: tuple[Repo, list[str], list[str]], name: str
) -> None:
    repo, (a, b), _ = landed2
    git(repo.path, "branch", "side", a)
    assert run(repo.path, "symbolic-ref", name, "refs/heads/side").returncode == 0  # unseen
    c = failing(repo, "main shadowed")
    run_fix(c["fix"], repo.path)
    assert "main shadowed" not in {k for k, v in doctor(repo).items() if v[0]["status"] != "ok"}
    assert (
        git(repo.path, "rev-parse", "--symbolic-full-name", "main").stdout.strip()
        == "refs/heads/main"
    )
    assert sha(repo.path, "refs/heads/main") == b and sha(repo.path, "refs/heads/side") == a


def test_a_plain_tag_named_main_is_found_and_removed(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    repo, (a, b), _ = landed2
    git(repo.path, "-c", "core.hooksPath=/dev/null", "tag", "main", a)
    run_fix(failing(repo, "main shadowed")["fix"], repo.path)
    assert git(repo.path, "rev-parse", "main").stdout.strip() == b


def test_a_repository_made_shallow_is_found_and_fixed(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    repo, (_, b), commits = landed2
    assert run(repo.path, "fetch", "-q", "--depth=1", f"file://{repo.path}", "main").returncode == 0
    shallow = repo.common_dir / "shallow"
    assert shallow.read_text().split() == [b]  # git now reads main's history as b alone
    c = failing(repo, "shallow")
    assert c["fix"].startswith("rm ")
    run_fix(c["fix"], repo.path)
    assert not shallow.exists()
    assert doctor(repo)["shallow"][0]["status"] == "ok"
    gc_everything(repo)
    for commit in commits:
        assert git(repo.path, "cat-file", "-e", commit, check=False).returncode == 0


def test_a_shallow_clone_fails_with_the_unshallow_fix(
    landed2: tuple[Repo, list[str], list[str]], tmp_path: Path
) -> None:
    repo, _, _ = landed2
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth=1", f"file://{repo.path}", str(clone))
    r = subprocess.run(
        [sys.executable, "-m", "guard", "doctor", "--json"],
        cwd=clone,
        capture_output=True,
        text=True,
    )
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    # git-lane's guarantees assume whole history, and a lane's `fetch --depth` makes this
    # same state: doctor fails on any shallow file; the fix is the owner's unshallow
    assert checks["shallow"]["status"] == "fail"
    assert "git fetch --unshallow" in checks["shallow"]["fix"]


def test_grafts_are_found_and_fixed(landed2: tuple[Repo, list[str], list[str]]) -> None:
    repo, (_, b), _ = landed2
    grafts = repo.common_dir / "info" / "grafts"
    grafts.parent.mkdir(exist_ok=True)
    grafts.write_text(f"{b}\n")  # b without parents: gc would take everything below it
    run_fix(failing(repo, "grafts")["fix"], repo.path)
    assert not grafts.exists()


# -- hooks switched off by a config source only some worktrees see ------------------------------
def test_hooks_path_from_an_included_file_is_found_and_unset(repo: Repo, tmp_path: Path) -> None:
    install(repo)
    inc = tmp_path / "inc dir" / "hooks.cfg"
    inc.parent.mkdir()
    inc.write_text("[core]\n\thooksPath = /dev/null\n")
    git(repo.path, "config", "include.path", str(inc))
    assert "hooks_off" in alerts(repo)
    c = [c for cs in doctor(repo).values() for c in cs if c["status"] == "fail"]
    assert c, "doctor saw nothing"
    for check in c:
        run_fix(check["fix"], repo.path)
    assert repo.jlane("doctor").rc == 0
    assert "hooks_off" not in alerts(repo)


def test_hooks_path_only_lanes_see_is_found(repo: Repo, tmp_path: Path) -> None:
    install(repo)
    lane = repo.create("a")
    inc = tmp_path / "lanes.cfg"
    inc.write_text("[core]\n\thooksPath = /dev/null\n")
    git(repo.path, "config", "includeIf.onbranch:lane/**.path", str(inc))
    assert git(lane, "config", "core.hooksPath").stdout.strip() == "/dev/null"
    c = failing(repo, "hooks path")
    assert str(lane) in c["message"]
    run_fix(c["fix"], repo.path)
    assert git(lane, "config", "core.hooksPath", check=False).returncode == 1
    assert repo.jlane("doctor").rc == 0


# -- status, on every run -------------------------------------------------------------------
def test_status_warns_while_hooks_are_missing_outdated_or_off(repo: Repo) -> None:
    assert "hooks_missing" in alerts(repo)
    text = repo.lane("status")
    assert text.rc == 0 and "git-lane: warning:" in text.stderr
    install(repo)
    assert alerts(repo) == set()
    hook = repo.common_dir / "hooks" / "pre-rebase"
    hook.write_text(hook.read_text() + "\n# edited\n")
    assert alerts(repo) == {"hooks_outdated"}
    install(repo)
    assert alerts(repo) == set()
    assert alerts(repo, env={"GIT_CONFIG_PARAMETERS": "'core.hooksPath'='/dev/null'"}) == {
        "hooks_off"
    }
    repo.config("enabled", "false")
    assert alerts(repo) == {"disabled"}


def test_status_warns_while_main_is_not_where_the_last_land_left_it(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    repo, (a, b), _ = landed2
    assert alerts(repo) == set()
    assert (
        run(repo.path, "reflog", "delete", "--updateref", "--rewrite", "main@{0}").returncode == 0
    )
    assert sha(repo.path, "refs/heads/main") == a
    assert alerts(repo) == {"main_moved"}
    assert repo.jlane("restore-main").code == "restored"
    assert sha(repo.path, "refs/heads/main") == b
    assert alerts(repo) == set()


# -- recovery writes the landed ref too -----------------------------------------------------
@pytest.mark.parametrize("hooks", [False, True])
def test_a_land_killed_after_main_moved_has_its_landed_ref(repo: Repo, hooks: bool) -> None:
    """main and the landed ref move in one ref transaction: no moment has one without
    the other, so a land killed right after sees its tip kept already."""
    if hooks:
        install(repo)
    repo.config("gate", "off")
    path = repo.create("a")
    assert_ok(commit_file(path, "a.txt", "a\n"))
    tip = sha(path, "HEAD")
    r = subprocess.run(
        [sys.executable, "-m", "guard", "land", "a", "--json"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env={**os.environ, "GITLANE_TEST_CRASH_AT": "main_moved"},
        timeout=60,
    )
    assert r.returncode == -signal.SIGKILL
    assert sha(repo.path, "refs/heads/main") == tip and landed_refs(repo) == {ref(1): tip}
    r2 = repo.jlane("reconcile")
    assert r2.rc == 0, r2.stdout + r2.stderr
    assert landed_refs(repo) == {ref(1): tip}
    assert not (repo.state_dir / "locks" / "integration.owner").exists()


def test_reconcile_gives_the_last_land_a_landed_ref_it_lacks(repo: Repo) -> None:
    """A land from before landed refs existed (or whose ref write failed)."""
    repo.config("gate", "off")
    tip = land_one(repo, "a", {"a.txt": "a\n"})
    git(repo.path, "update-ref", "-d", ref(1))
    assert doctor(repo)["landed refs"][0]["status"] == "warn"
    r = repo.jlane("reconcile")
    assert r.rc == 0 and any(c["action"] == "landed_ref_written" for c in r.json["changes"])
    assert landed_refs(repo) == {ref(1): tip}
    assert repo.jlane("reconcile").json["changes"] == []


# -- the contract the reference-transaction hook relies on ------------------------------------
WATCH = """#!/bin/sh
# records, for each landed ref git-lane writes, the lock record at that moment
[ "$1" = prepared ] && [ -n "${WATCH_LOG-}" ] || exit 0
rec="$(git rev-parse --path-format=absolute --git-common-dir)/git-lane/locks/integration.owner"
while read -r old new ref; do
	case $ref in refs/git-lane/*) ;; *) continue ;; esac
	[ "$new" = 0000000000000000000000000000000000000000 ] && continue
	gp=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$PPID/status")
	printf '%s %s %s %s %s %s\\n' "$ref" "$old" "$new" \\
		"$(sed -n 's/^tip=//p' "$rec" 2>/dev/null)" "$(sed -n 's/^pid=//p' "$rec" 2>/dev/null)" "$gp" >>"$WATCH_LOG"
done
exit 0
"""


def test_landed_refs_are_written_under_a_lock_record_naming_them(
    repo: Repo, tmp_path: Path
) -> None:
    hook = repo.common_dir / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(WATCH)
    hook.chmod(0o755)
    log = tmp_path / "watch.log"
    env = {"WATCH_LOG": str(log)}
    repo.config("gate", "off")
    a = repo.create("a")
    assert_ok(commit_file(a, "a.txt", "a\n"))
    assert repo.jlane("land", "a", env=env).code == "landed"  # land writes ref 1
    git(repo.path, "update-ref", "-d", ref(1))
    assert repo.jlane("reconcile", env=env).rc == 0  # reconcile writes ref 1 again
    b = repo.create("b")
    assert_ok(commit_file(b, "b.txt", "b\n"))
    r = subprocess.run(
        [sys.executable, "-m", "guard", "land", "b"],
        cwd=repo.path,
        capture_output=True,
        env={**os.environ, **env, "GITLANE_TEST_CRASH_AT": "main_moved"},
        timeout=60,
    )
    assert r.returncode == -signal.SIGKILL
    assert repo.jlane("reconcile", env=env).rc == 0  # recovery writes ref 2
    lines = [ln.split() for ln in log.read_text().splitlines()]
    assert [ln[0] for ln in lines] == [ref(1), ref(1), ref(2)]
    for _name, old, new, tip, pid, writer in lines:
        assert old == "0" * 40  # created, never moved
        assert new == tip  # the lock record names the value written
        assert pid == writer  # and the process that runs the git writing it


# -- the hooks protect the namespace like main ------------------------------------------
def test_hooks_refuse_moving_deleting_or_forging_a_landed_ref(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    from hookfix import assert_refused

    repo, (a, b), _ = landed2
    before = landed_refs(repo)
    assert_refused(run(repo.path, "update-ref", ref(1), b))  # move
    assert_refused(run(repo.path, "update-ref", "-d", ref(2)))  # delete
    assert_refused(run(repo.path, "update-ref", ref(99), a))  # forge a new one
    assert_refused(run(repo.path, "update-ref", "refs/git-lane/other", a))  # anything else there
    assert landed_refs(repo) == before
    # packing and gc move nothing and pass
    assert_ok(run(repo.path, "pack-refs", "--all"))
    assert_ok(run(repo.path, "gc", "-q", "--prune=now"))
    assert landed_refs(repo) == before
    # and the next land still writes its own
    land_one(repo, "c", {"c.txt": "c\n"})
    assert ref(3) in landed_refs(repo)


def test_a_symbolic_ref_under_the_landed_namespace_is_never_a_landed_tip(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """`git symbolic-ref` writes outside any transaction (no hook sees it): a symbolic ref
    named like a newer land must not make doctor or restore-main follow it to untested code."""
    repo, (_a, b), _ = landed2
    evil = repo.create("evil")
    assert_ok(commit_file(evil, "evil.txt", "EVIL\n"))
    assert_ok(run(repo.path, "symbolic-ref", ref(3), "refs/heads/lane/evil"))
    assert_ok(run(repo.path, "symbolic-ref", ref(9999999999), "refs/heads/lane/evil"))
    checks = doctor(repo)
    forged = [c for c in checks["landed refs"] if "symbolic-ref --delete" in (c["fix"] or "")]
    assert len(forged) == 2 and all(c["status"] == "fail" for c in forged), checks
    r = repo.jlane("restore-main")
    assert repo.sha() == b, r.stdout + r.stderr  # main stays at the real last landed tip
    # the fix doctor names removes the forgery, and the next land takes epoch 3
    for c in forged:
        assert_ok(run(repo.path, *c["fix"].split()[1:]))
    assert git(repo.path, "for-each-ref", "--format=%(symref)", LANDED).stdout.strip() == ""
    land_one(repo, "c", {"c.txt": "c\n"})
    assert ref(3) in landed_refs(repo)


def test_a_symbolic_ref_over_a_packed_landed_ref_is_removed_keeping_the_landed_ref(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """After `git gc` (or `pack-refs`) the landed refs live in packed-refs only, and a
    `git symbolic-ref` over one hides it. git deletes a name from packed-refs too when the
    symbolic ref is deleted: the hooks refuse that delete, and doctor's fix, run as
    printed, makes the ref plain again at its packed (landed) value (red team 13G)."""
    from hookfix import assert_refused

    repo, (_a, _b), _ = landed2
    before = landed_refs(repo)
    assert_ok(run(repo.path, "pack-refs", "--all"))  # what `git gc` does
    assert_ok(run(repo.path, "symbolic-ref", ref(1), "refs/heads/main"))
    assert_refused(run(repo.path, "symbolic-ref", "--delete", ref(1)))
    assert_refused(run(repo.path, "update-ref", "--no-deref", "-d", ref(1)))
    checks = doctor(repo)
    forged = [c for c in checks["landed refs"] if c["status"] == "fail"]
    assert len(forged) == 1 and forged[0]["fix"] == (
        f"git update-ref --no-deref {ref(1)} {before[ref(1)]}"
    ), checks
    assert_ok(run(repo.path, *forged[0]["fix"].split()[1:]))  # as printed
    assert landed_refs(repo) == before, landed_refs(repo)
    assert all(c["status"] == "ok" for c in doctor(repo)["landed refs"])
    # making it plain at any other value is still refused
    assert_ok(run(repo.path, "symbolic-ref", ref(1), "refs/heads/main"))
    assert_refused(run(repo.path, "update-ref", "--no-deref", ref(1), before[ref(2)]))


def test_land_clearing_a_symbolic_ref_over_a_packed_landed_ref_keeps_the_landed_ref(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """land removes every symbolic ref under refs/git-lane/ before it writes its own: one
    over a packed landed ref is made plain at the packed value, never deleted."""
    from enginehelp import ready_lane

    repo, (a, _b), _ = landed2
    assert_ok(run(repo.path, "pack-refs", "--all"))
    assert_ok(run(repo.path, "symbolic-ref", ref(1), "refs/heads/main"))
    ready_lane(repo, "c")
    r = repo.jlane("land", "c")
    assert r.code == "landed", r.stdout + r.stderr
    assert any("symbolic ref" in w for w in r.json["warnings"]), r.json["warnings"]
    assert landed_refs(repo).get(ref(1)) == a, landed_refs(repo)
    assert git(repo.path, "for-each-ref", "--format=%(symref)", LANDED).stdout.strip() == ""


def test_land_never_writes_its_landed_ref_through_a_planted_symbolic_ref(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """A worker plants symbolic refs at the next landed ref's name (dangling) and below it
    (a directory in the way): land removes them, writes the landed ref in the same
    transaction as main, says so, and the landed commit survives a rewind + gc."""
    repo, _, _ = landed2
    path = repo.create("c")
    assert_ok(commit_file(path, "c.txt", "c\n"))
    tip = sha(path, "HEAD")
    worker = {"GITLANE_LANE": "c"}
    assert_ok(run(repo.path, "symbolic-ref", ref(3), "refs/heads/nope", env=worker))
    assert_ok(run(repo.path, "symbolic-ref", ref(4) + "/x", "refs/heads/lane/c", env=worker))
    names = {c["message"].split()[0] for c in doctor(repo)["landed refs"] if c["status"] == "fail"}
    assert names == {ref(3), ref(4) + "/x"}  # the dangling one too
    r = repo.jlane("land", "c")
    assert r.code == "landed", r.stdout + r.stderr
    assert any("symbolic ref" in w for w in r.json["warnings"]), r.json["warnings"]
    assert landed_refs(repo)[ref(3)] == tip
    assert (
        git(repo.path, "rev-parse", "-q", "--verify", "refs/heads/nope", check=False).stdout == ""
    )
    git(repo.path, "reflog", "delete", "--updateref", "--rewrite", "main@{0}")
    gc_everything(repo)
    assert git(repo.path, "cat-file", "-t", tip).stdout.strip() == "commit"


def test_reconcile_removes_a_planted_symbolic_ref(repo: Repo) -> None:
    install(repo)
    assert_ok(run(repo.path, "symbolic-ref", ref(1), "refs/heads/nowhere"))
    r = repo.jlane("reconcile")
    assert (
        r.rc == 0 and {"action": "forged_symbolic_ref_removed", "ref": ref(1)} in r.json["changes"]
    ), r.stdout
    assert not (repo.common_dir / ref(1)).exists()


def test_doctor_finds_landed_history_a_shallow_file_pruned(
    landed2: tuple[Repo, list[str], list[str]], tmp_path: Path
) -> None:
    """`git --shallow-file F prune` deletes history no ref rule can guard (this layer only
    detects it): doctor fails on the missing landed commits."""
    repo, (_a, b), commits = landed2
    cut = tmp_path / "cut"
    cut.write_text(b + "\n")
    git(repo.path, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
    run(repo.path, "--shallow-file", str(cut), "prune", "--expire=now")  # git exits 128 after
    gone = [c for c in commits if git(repo.path, "cat-file", "-e", c, check=False).returncode]
    assert gone, "the prune deleted nothing: the test does not test anything"
    c = failing(repo, "landed history")
    assert c["fix"] == "git fsck --connectivity-only"


def test_an_epoch_set_back_by_hand_is_found_and_reconcile_puts_it_back(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """epoch.json rewritten to an epoch behind a land its landed ref proves (a lane made
    stale since could pass for fresh): doctor fails `epoch`, and its fix, reconcile,
    rebuilds the epoch from the newest landed ref; doctor is clean again."""
    repo, (_a, b), _ = landed2
    (repo.state_dir / "epoch.json").write_text('{"epoch": 0}\n')
    c = failing(repo, "epoch")
    assert c["fix"] == "git lane reconcile"
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.json
    assert {"action": "epoch_repaired"} in r.json["changes"]
    ep = json.loads((repo.state_dir / "epoch.json").read_text())
    assert ep["epoch"] == 2 and ep["main_after"] == b
    assert not [x for x in doctor(repo).get("epoch", []) if x["status"] == "fail"]


def test_land_refuses_to_build_on_a_main_no_land_left(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """A land starts where the last land left main: a rewound main is put back first
    (restore-main, the refusal's next), a main with commits no land made is the owner's
    call; either way nothing is built on it and it does not become landed history."""
    repo, (_a, b), _ = landed2
    path = repo.create("j")
    assert_ok(commit_file(path, "j.txt", "j\n"))
    git(repo.path, "reflog", "delete", "--updateref", "--rewrite", "main@{0}")
    assert repo.sha() != b
    r = repo.jlane("land", "j")
    assert (r.rc, r.code) == (1, "main_moved"), r.stdout
    run_fix(r.json["next"][0].split("  #")[0], repo.path)
    assert repo.sha() == b
    # commits put on main with the hooks switched off (outside what hooks guard)
    git(repo.path, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", "x")
    r = repo.jlane("sync", "j")
    r = repo.jlane("land", "j")
    assert (r.rc, r.code) == (1, "main_ahead"), r.stdout
    assert landed_refs(repo) == {ref(1): _a, ref(2): b}


def test_a_dangling_symbolic_main_is_made_plain_at_the_landed_tip(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """A symbolic main pointing nowhere reads as no main (no_main_branch everywhere, and
    its `git commit` next is refused by the hooks): restore-main puts it right."""
    repo, (_a, b), _ = landed2
    git(repo.path, "switch", "-q", "--detach")
    git(repo.path, "symbolic-ref", "refs/heads/main", "refs/heads/nothere")
    r = repo.jlane("restore-main")
    assert (r.rc, r.code) == (0, "restored"), r.stdout + r.stderr
    assert repo.sha() == b
    assert git(repo.path, "symbolic-ref", "-q", "refs/heads/main", check=False).stdout == ""


def follow_nexts(repo: Repo, nexts: list[str], limit: int = 6) -> list[str]:
    """Run each `next` as written, in order, in the hub: a `git lane` one that refuses
    hands on its own next (the way forward from there), `git lane doctor` the fixes of
    its failing checks; any other must succeed. The commands run, in order."""
    ran: list[str] = []
    todo = list(nexts)
    while todo:
        assert len(ran) < limit, f"the nexts go round and round: {ran}"
        cmd = todo.pop(0)
        ran.append(cmd)
        if cmd == "git lane doctor":
            fixes = [c["fix"] for cs in doctor(repo).values() for c in cs if c["status"] == "fail"]
            todo = [f.split("  (")[0] for f in fixes if f] + todo
        elif cmd.startswith("git lane "):
            r = repo.jlane(*cmd.split()[2:])
            assert "Traceback" not in r.stderr, r.stderr
            if r.rc != 0:
                assert r.json["next"], r.stdout
                todo = list(r.json["next"])
        else:
            run_fix(cmd, repo.path)
    return ran


@pytest.mark.parametrize(
    ("broken", "packed"),
    [
        ("empty", "tip"),  # red team 14F F2, as found: land, pack-refs, a write cut short
        ("empty", None),
        ("garbled", "behind"),
        ("garbled", None),
        ("link to a directory", "tip"),
        ("link to a directory", None),
    ],
)
def test_a_broken_main_ref_file_is_kept_aside_and_main_made_at_the_landed_tip(
    landed2: tuple[Repo, list[str], list[str]], tmp_path: Path, broken: str, packed: str | None
) -> None:
    """A loose refs/heads/main git cannot read as a ref (empty or garbled: a write cut
    short; a link to a directory) made every command refuse no_main_branch naming
    restore-main (the link: "vanished", naming doctor, whose fix was doctor again), and
    restore-main failed main_update_failed (git: "reference broken"), naming doctor, whose
    fix was restore-main: a loop (red team 14F, finding 2). Now restore-main moves the
    file (or the link itself) into kept/, never deleting it, and puts main at the landed
    tip, with the packed value beneath it or none; the nexts printed, run as written, get
    there."""
    repo, (a, b), _ = landed2
    if packed == "behind":
        git(repo.path, *OFF, "update-ref", "refs/heads/main", a)
    if packed is not None:
        git(repo.path, "pack-refs", "--all")
    m = repo.common_dir / "refs" / "heads" / "main"
    m.unlink(missing_ok=True)
    elsewhere = tmp_path / "elsewhere"
    if broken == "empty":
        m.write_bytes(b"")
    elif broken == "garbled":
        m.write_bytes(b"8a5f not an object name\n")
    else:
        elsewhere.mkdir()
        (elsewhere / "data.txt").write_text("someone's\n")
        os.symlink(elsewhere, m)
    before = os.readlink(m) if m.is_symlink() else m.read_bytes()
    st = repo.jlane("status")
    assert (st.rc, st.code) == (1, "no_main_branch"), st.stdout
    assert follow_nexts(repo, st.json["next"]) == ["git lane restore-main"]
    assert repo.sha() == b and not m.is_symlink()
    assert git(repo.path, "symbolic-ref", "-q", "refs/heads/main", check=False).stdout == ""
    (kept,) = (repo.state_dir / "kept").glob("refs-heads-main.*")
    assert (os.readlink(kept) if kept.is_symlink() else kept.read_bytes()) == before
    if broken.startswith("link"):
        assert (elsewhere / "data.txt").read_text() == "someone's\n"
    assert "main" not in {n for n, cs in doctor(repo).items() for c in cs if c["status"] == "fail"}
    assert repo.jlane("status").rc == 0


def test_a_broken_main_ref_file_that_cannot_be_kept_aside_is_refused_naming_the_mv(
    landed2: tuple[Repo, list[str], list[str]], tmp_path: Path
) -> None:
    """kept/ a link (restore-main never renames through one): restore-main refuses
    main_update_failed, its next the `mkdir -p` and `mv` that keep the broken file, then
    restore-main again; run as written, they put main back at the landed tip."""
    repo, (_a, b), _ = landed2
    elsewhere = tmp_path / "kept-elsewhere"
    elsewhere.mkdir()
    kept = repo.state_dir / "kept"
    if kept.exists():
        kept.rmdir()
    os.symlink(elsewhere, kept)
    m = repo.common_dir / "refs" / "heads" / "main"
    m.unlink(missing_ok=True)
    m.write_bytes(b"garbled\n")
    r = repo.jlane("restore-main")
    assert (r.rc, r.code) == (1, "main_update_failed"), r.stdout
    assert [n.split()[0] for n in r.json["next"]] == ["mkdir", "mv", "git"], r.stdout
    assert follow_nexts(repo, r.json["next"])[-1] == "git lane restore-main"
    assert repo.sha() == b
    assert [p.read_bytes() for p in elsewhere.rglob("main")] == [b"garbled\n"]


def test_a_dangling_symbolic_main_beside_master_never_hands_main_over_to_master(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """A branch master beside main (no main_branch pinned), main made a symbolic ref to
    nothing (unseen on git 2.39). The engine chose master as main (main "did not exist"),
    so doctor said `main is master`, ok, and the next land would have moved master; the
    hooks' reference-transaction still took the dangling main for main, so `git update-ref
    refs/heads/master` passed unrefused: master, git-lane's main by then, moved without a
    land. Now every layer takes a dangling main for main, broken: doctor fails it and its
    fix, restore-main, makes main plain at the last landed tip."""
    repo, (_a, b), _ = landed2
    git(repo.path, "branch", "master", b)
    git(repo.path, "switch", "-q", "--detach")
    git(repo.path, "symbolic-ref", "refs/heads/main", "refs/heads/nothere")  # unseen
    st = repo.jlane("status")
    assert st.code == "no_main_branch", st.stdout
    run_fix(failing(repo, "main")["fix"], repo.path)
    assert repo.sha() == b and git(repo.path, "rev-parse", "master").stdout.strip() == b
    assert git(repo.path, "symbolic-ref", "-q", "refs/heads/main", check=False).stdout == ""


@pytest.mark.parametrize("through", ["HEAD", "refs/worktree/x"])
def test_a_symbolic_main_looping_through_a_per_worktree_ref_is_made_plain(
    landed2: tuple[Repo, list[str], list[str]], through: str
) -> None:
    """`git symbolic-ref refs/heads/main HEAD` (unseen on git 2.39), the hub on main as
    always: main -> HEAD -> main, a loop. doctor failed `main` naming `git lane
    restore-main`, and restore-main failed main_update_failed: its `update-ref --no-deref
    refs/heads/main` carries a log-only HEAD line (HEAD names main), HEAD is in main's
    broken chain, and the hook refused it [hook_facts_unknown]; its next, doctor, named
    restore-main again. The same loop through refs/worktree/x."""
    repo, (_a, b), _ = landed2
    assert (repo.common_dir / "HEAD").read_text().strip() == "ref: refs/heads/main"
    if through != "HEAD":
        git(repo.path, "symbolic-ref", through, "refs/heads/main")
    git(repo.path, "symbolic-ref", "refs/heads/main", through)  # unseen, documented
    run_fix(failing(repo, "main")["fix"], repo.path)
    assert not (repo.common_dir / "refs" / "heads" / "main").read_text().startswith("ref:")
    assert repo.sha() == b
    assert "main" not in {n for n, cs in doctor(repo).items() for c in cs if c["status"] == "fail"}


# -- before the first land: the baseline ------------------------------------------------------
BASELINE = "refs/git-lane/baseline"


def epoch_of(repo: Repo) -> int:
    st = repo.jlane("status")
    assert st.rc == 0, st.stderr
    return int(st.json["epoch"])


@pytest.mark.parametrize("where", ["ahead", "diverged"])
def test_main_moved_past_the_hooks_before_the_first_land_is_found(hub: Repo, where: str) -> None:
    """install records where main stands as refs/git-lane/baseline (not a land: epoch 0,
    no landed ref), so a commit put on main with the hooks off before any land is seen by
    doctor, status and land as one after a land is, and restore-main's next runs."""
    base = hub.sha()
    assert hub.sha(BASELINE) == base and landed_refs(hub) == {} and epoch_of(hub) == 0
    path = hub.create("alpha")
    assert_ok(commit_file(path, "w.txt", "w\n"))
    if where == "ahead":
        hub.git("-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", "sneaked")
    else:
        assert base is not None
        _by_hand(hub, f"{base}~1")
    moved = hub.sha()
    c = failing(hub, "main_moved")
    assert "started guarding" in c["message"]
    assert "main_moved" in alerts(hub)
    r = hub.jlane("restore-main")
    assert (r.rc, r.code) == (1, f"main_{where}"), r.stdout
    assert r.json["details"]["commits"] == [moved] and r.json["details"]["landed"] == base
    run_fix(r.json["next"][0], hub.path)  # git log of the commits
    assert r.json["next"][1] == "git lane doctor"  # which fails, naming the owner's fix
    assert failing(hub, "main_moved")["fix"].startswith(f"git branch rescue-main-{moved[:12]} ")
    (by_hand,) = r.json["alternatives"]
    run_fix(by_hand, hub.path)  # the owner's way: main back, the commit kept on a branch
    assert hub.sha() == base and hub.sha(f"refs/heads/rescue-main-{moved[:12]}") == moved
    assert hub.jlane("doctor").rc == 0 and "main_moved" not in alerts(hub)
    # a baseline is not a land: the first land is still epoch 1
    r = hub.jlane("land", "alpha")
    assert (r.rc, r.code, r.json["epoch"]) == (0, "landed", 1), r.stdout
    assert list(landed_refs(hub)) == [ref(1)] and hub.sha(BASELINE) == base


def test_no_land_through_a_link_at_main_that_git_reads_through(hub: Repo) -> None:
    """Red team 14G F6: refs/heads/main a link to lane beta's admin HEAD (an earlier plain
    write): main reads as the landed tip, so G5 saw nothing wrong, and the land's gate (or
    lane beta) could move main through the link. Land refuses main_not_plain, its next
    restore-main; then it lands."""
    base = hub.sha()
    alpha = hub.create("alpha")
    beta = hub.create("beta")
    assert_ok(commit_file(alpha, "w.txt", "w\n"))
    git(beta, "switch", "-q", "--detach", "main")
    admin = Path(git(beta, "rev-parse", "--absolute-git-dir").stdout.strip())
    link = hub.common_dir / "refs" / "heads" / "main"
    link.unlink()
    os.symlink(os.path.relpath(admin / "HEAD", link.parent), link)
    assert hub.sha() == base
    r = hub.jlane("land", "alpha")
    assert (r.rc, r.code) == (1, "main_not_plain"), r.stdout
    assert r.json["next"][0].startswith("git lane restore-main")
    assert hub.sha() == base and hub.jlane("restore-main").rc == 0
    r = hub.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout
    assert not link.is_symlink()


@pytest.mark.parametrize("shape", ["loose_main", "packed_refs", "landed"])
def test_no_land_while_a_protected_ref_file_has_a_second_name_in_the_lane_namespace(
    hub: Repo, shape: str
) -> None:
    """Red team 15B F3: main's loose file, packed-refs (main packed) or land 1's loose
    landed ref hard-linked at a name under refs/heads/lane/ (made by hand): whoever may
    write that name (any lane) rewrites it in place. A packed-refs link outlived
    restore-main (a loose main only shadows its line) and let the lane rewrite packed
    landed refs and tags. Land refuses main_not_plain, its next restore-main, which gives
    every such file an inode of its own (the lane's name keeps the old file); then it
    lands, and a write through the lane's name changes nothing of git-lane's."""
    ref, planted, lane_path = hard_link_planted(hub, shape)
    before = hub.sha(ref)
    held = planted.read_bytes()
    hub.commit(lane_path, "y.txt", "y\n")
    r = hub.jlane("land", "alpha")
    assert (r.rc, r.code) == (1, "main_not_plain"), r.stdout
    assert r.json["next"][0].startswith("git lane restore-main")
    assert hub.sha(ref) == before
    fixed = hub.jlane("restore-main")
    assert fixed.rc == 0, fixed.stdout
    assert any("hard link" in w for w in fixed.json["warnings"]), fixed.stdout
    assert planted.read_bytes() == held and planted.stat().st_nlink == 1
    for name in (ref, "packed-refs"):
        p = hub.common_dir / name
        assert not p.exists() or p.stat().st_nlink == 1, name
    r = hub.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout
    main, landed = hub.sha(), landed_refs(hub)
    planted.write_text("0" * 39 + "1\n")
    assert (hub.sha(), landed_refs(hub)) == (main, landed)


def test_restore_main_never_forces_git_s_lock_nor_loops_on_a_link_made_again(
    hub: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """restore-main gives a hard-linked main its own inode through git's own
    `refs/heads/main.lock` (O_EXCL): while git holds it, restore-main changes nothing
    there and refuses main_update_failed, its next run as written once the lock is gone;
    a link that is back at once after the new file (something racing it) is refused
    main_not_plain, never looped on."""
    from guard.commands import restore_main

    _, other, _ = hard_link_planted(hub, "loose_main")
    main = hub.common_dir / "refs" / "heads" / "main"
    lock = main.with_name("main.lock")
    lock.write_text("git's\n")
    r = hub.jlane("restore-main")
    assert (r.rc, r.code) == (1, "main_update_failed"), r.stdout
    assert lock.read_text() == "git's\n" and main.stat().st_nlink == 2
    lock.unlink()
    way = subprocess.run(" && ".join(r.json["next"]), shell=True, cwd=hub.path,
                         capture_output=True, text=True)  # fmt: skip
    assert way.returncode == 0, (r.json["next"], way.stdout, way.stderr)
    assert main.stat().st_nlink == 1 and other.read_text() == main.read_text()
    os.unlink(other)
    os.link(main, other)
    monkeypatch.setattr(restore_main, "own_file", lambda repo, rel: None)  # linked again
    with pytest.raises(Refusal) as refused:
        restore_main.run(grepo(hub))
    assert refused.value.code == "main_not_plain" and "linked again" in refused.value.message


# every command but doctor (names it) and restore-main (keeps it in kept/), as an owner
# types it: each would run a git that reads a ref, which waits on a FIFO for ever
COMMANDS = [
    ("status",), ("status", "alpha"), ("conflicts",), ("create", "beta"), ("setup", "alpha"),
    ("release", "alpha"), ("reconcile",), ("repair", "alpha"), ("sync", "alpha"),
    ("continue", "alpha"), ("abort", "alpha"), ("land", "alpha"), ("gc",), ("ready", "alpha"),
    ("queue",), ("path", "alpha"), ("export", "alpha"), ("checkpoint", "alpha"),
    ("exec", "alpha", "--", "true"), ("shellenv", "alpha"), ("agent-setup", "alpha", "--for", "claude"),
    ("config", "list"), ("config", "get", "gate_command"), ("log",), ("install",),
    ("uninstall",), ("check", "git", "status"), ("check", "write", "w.txt"),
]  # fmt: skip


@pytest.mark.parametrize("link", [False, True], ids=["fifo", "link-to-fifo"])
def test_a_fifo_at_packed_refs_refuses_every_command_before_any_git_waits_on_it(
    hub: Repo, link: bool
) -> None:
    """`packed-refs` a FIFO (or a link to one), made by a process outside the sandbox:
    every git that reads a ref waits on its open for ever, so every command hung. Each
    refuses main_not_plain at once, before any git runs; its next, restore-main, keeps
    the FIFO in kept/ (never opened) and leaves main where it was; the command then
    runs."""
    alpha = hub.create("alpha")
    assert_ok(commit_file(alpha, "w.txt", "w\n"))
    base = hub.sha()
    with fifo_packed_refs(hub, link) as packed:
        for args in COMMANDS:
            r = lane("--json", *args, cwd=hub.path, timeout=30)  # a hang fails here
            assert (r.rc, r.code) == (1, "main_not_plain"), (args, r.stdout, r.stderr)
            assert r.json["next"] == ["git lane restore-main"], (args, r.stdout)
            assert r.json["details"]["ref"] == "packed-refs", (args, r.stdout)
        r = lane("check", "write", "--json", "w.txt", cwd=alpha, timeout=30)  # no click
        assert (r.rc, r.code) == (1, "main_not_plain"), r.stdout + r.stderr
        fixed = lane("restore-main", "--json", cwd=hub.path, timeout=30)
        assert fixed.rc == 0, fixed.stdout + fixed.stderr
        assert "packed-refs was no file git could read" in fixed.json["warnings"][0]
        assert not os.path.lexists(packed)
        (kept,) = hub.state_dir.glob("kept/packed-refs.*")
        assert kept.is_symlink() if link else kept.is_fifo()
        assert hub.sha() == base
        r = lane("status", "alpha", "--json", cwd=hub.path, timeout=30)
        assert r.rc == 0, r.stdout + r.stderr


def test_restore_main_puts_a_packed_main_back_once_a_fifo_took_packed_refs_place(
    hub: Repo,
) -> None:
    """main and every other ref packed (a gc), then `packed-refs` replaced by a FIFO: git
    sees no main once the FIFO is kept aside, nor the baseline ref. restore-main keeps the
    FIFO in kept/; with only epoch.json (a plain file the same process may have written:
    red team 17 hooks F4) left to say where main was, it makes no main there
    (landed_tip_unvouched); the owner's alternative does, and reconcile then puts the
    baseline ref back."""
    base = hub.sha()
    hub.git("pack-refs", "--all")
    assert not (hub.common_dir / "refs" / "heads" / "main").exists()
    with fifo_packed_refs(hub):
        r = lane("restore-main", "--json", cwd=hub.path, timeout=30)
        assert (r.rc, r.code) == (1, "landed_tip_unvouched"), r.stdout + r.stderr
        assert r.json["details"]["claimed"] == [{"epoch": 0, "sha": base}], r.stdout
        assert [p.is_fifo() for p in hub.state_dir.glob("kept/packed-refs.*")] == [True]
        assert hub.sha() is None
        (hand,) = r.json["alternatives"]
        assert_ok(subprocess.run(hand, shell=True, cwd=hub.path, capture_output=True, text=True))
        assert hub.sha() == base and hub.sha(BASELINE) == base


def test_no_land_while_mains_parent_directory_is_a_link_into_the_lane_namespace(
    hub: Repo,
) -> None:
    """Red team 14H-A F2: main `team/main` read through `refs/heads/team -> lane/x` (made
    by hand): G5 saw main at the landed tip, and whoever may write refs/heads/lane/x/main
    (a lane) moves main. Land refuses main_not_plain, its next restore-main (which keeps
    the link in kept/); then it lands, on a plain main."""
    base = hub.sha()
    assert base is not None
    hub.git("branch", "team/main", base)
    hub.config("main_branch", "team/main")
    alpha = hub.create("alpha")
    assert_ok(commit_file(alpha, "w.txt", "w\n"))
    heads = hub.common_dir / "refs" / "heads"
    (heads / "lane" / "x").mkdir(parents=True)
    (heads / "team" / "main").rename(heads / "lane" / "x" / "main")
    (heads / "team").rmdir()
    (heads / "team").symlink_to("lane/x")
    r = hub.jlane("land", "alpha")
    assert (r.rc, r.code) == (1, "main_not_plain"), r.stdout
    assert r.json["next"][0].startswith("git lane restore-main")
    assert hub.sha("refs/heads/team/main") == base
    fixed = hub.jlane("restore-main")
    assert fixed.rc == 0, fixed.stdout
    r = hub.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout
    assert not (heads / "team").is_symlink() and hub.sha("refs/heads/lane/x/main") == base


def test_main_rewound_before_the_first_land_is_put_back_by_doctors_fix(hub: Repo) -> None:
    base = hub.sha()
    assert base is not None
    git(hub.path, "-c", "core.hooksPath=/dev/null", "reset", "-q", "--hard", f"{base}~1")
    c = failing(hub, "main_moved")
    assert c["fix"] == "git lane restore-main"
    run_fix(c["fix"], hub.path)
    assert hub.sha() == base and hub.jlane("doctor").rc == 0
    assert git(hub.path, "status", "--porcelain").stdout == ""  # the hub came along
    r = hub.jlane("restore-main")
    assert (r.rc, r.code) == (0, "unchanged")
    assert epoch_of(hub) == 0 and landed_refs(hub) == {}


def test_the_first_create_records_the_baseline_install_could_not(
    tmp_path: Path, gitlane_on_path: Path
) -> None:
    """install in a repository without a commit records nothing; the first create does,
    and a baseline is never moved: a later create or install leaves it."""
    path = tmp_path / "empty"
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    repo = Repo(path)
    assert repo.lane("install").rc == 0
    assert repo.sha(BASELINE) is None
    repo.commit(path, "a.txt", "a\n")  # the first commit: the hooks let main be born
    first = repo.sha()
    repo.create("alpha")
    assert repo.sha(BASELINE) == first
    r = repo.jlane("install")
    assert r.rc == 0 and "baseline" not in r.json
    repo.create("beta")
    assert repo.sha(BASELINE) == first and epoch_of(repo) == 0


def test_no_baseline_while_nothing_guards_main(repo: Repo) -> None:
    """Without the hooks installed main moves by plain commits, so create records no
    baseline: such a commit is no news to doctor or land."""
    repo.config("gate", "off")
    path = repo.create("alpha")
    assert repo.sha(BASELINE) is None
    repo.commit(repo.path, "m.txt", "m\n")
    assert "main_moved" not in doctor(repo)
    assert_ok(commit_file(path, "a.txt", "a\n"))
    assert repo.jlane("sync", "alpha").rc == 0
    assert repo.jlane("land", "alpha").code == "landed"


def test_hooks_refuse_moving_deleting_or_forging_the_baseline(hub: Repo) -> None:
    from hookfix import assert_refused

    base = hub.sha()
    assert base is not None
    other = git(hub.path, "commit-tree", "-m", "x", f"{base}^{{tree}}").stdout.strip()
    assert_refused(run(hub.path, "update-ref", BASELINE, other))  # move
    assert_refused(run(hub.path, "update-ref", "-d", BASELINE))  # delete
    assert hub.sha(BASELINE) == base


def test_no_baseline_is_forged_where_none_was_recorded(repo: Repo) -> None:
    """A repository installed before baselines (none recorded): writing one by hand is
    refused like forging a landed ref."""
    from hookfix import assert_refused

    install(repo)
    git(repo.path, "-c", "core.hooksPath=/dev/null", "update-ref", "-d", BASELINE)
    assert_refused(run(repo.path, "update-ref", BASELINE, str(repo.sha())))
    assert repo.sha(BASELINE) is None


# -- a landed ref or the baseline written past the hooks --------------------------------------
OFF = ("-c", "core.hooksPath=/dev/null")


def failing_names(repo: Repo) -> set[str]:
    return {n for n, cs in doctor(repo).items() if any(c["status"] == "fail" for c in cs)}


def test_a_forged_landed_ref_never_makes_a_main_moved_by_hand_look_landed(hub: Repo) -> None:
    """Past the hooks (core.hooksPath off), a landed ref written at a main moved the same
    way: nothing else records that land (no land event, no landing, not epoch.json), so
    doctor fails `main_moved` and names the ref, reconcile raises no epoch to it, status
    alerts, restore-main does not call main unchanged; the owner's fixes doctor names put
    main back and remove the ref (its commit kept on a branch), and doctor is clean
    (issue 13 red team, finding 4; the bypass matrix row `landed_ref_forged`)."""
    base = hub.sha()
    path = hub.create("alpha")
    evil = hub.commit(path, "evil.txt", "never landed\n")
    git(path, *OFF, "update-ref", ref(1), "HEAD")
    git(path, *OFF, "update-ref", "refs/heads/main", "HEAD")
    assert {"main_moved", "unvouched landed ref"} <= failing_names(hub)
    r = hub.jlane("reconcile")
    assert r.rc == 0 and {"action": "epoch_repaired"} not in r.json["changes"], r.stdout
    assert any(ref(1) in w for w in r.json["warnings"]), r.json
    assert epoch_of(hub) == 0 and "main_moved" in failing_names(hub)
    assert "main_moved" in alerts(hub)
    rm = hub.jlane("restore-main")
    assert (rm.rc, rm.code) == (1, "main_ahead"), rm.stdout
    assert rm.json["details"]["landed"] == base and rm.json["details"]["commits"] == [evil]
    for name in ("main_moved", "unvouched landed ref"):
        run_fix(failing(hub, name)["fix"], hub.path)
    assert hub.sha() == base and ref(1) not in landed_refs(hub)
    assert hub.sha(f"refs/heads/git-lane-rescue/landed-1-{evil[:12]}") == evil
    assert hub.jlane("doctor").rc == 0 and "main_moved" not in alerts(hub)
    hub.git("reset", "-q", "--hard", base, cwd=path)  # alpha's work was the forgery
    hub.commit(path, "good.txt", "good\n")
    r = hub.jlane("land", "alpha")
    assert (r.rc, r.code, r.json["epoch"]) == (0, "landed", 1), r.stdout + r.stderr
    assert landed_refs(hub) == {ref(1): r.json["main_after"]}


def test_a_landed_ref_moved_past_the_hooks_is_not_the_last_land(
    landed2: tuple[Repo, list[str], list[str]],
) -> None:
    """After two lands, the newest landed ref and main both moved past the hooks to a
    commit no land made: the moved ref is vouched by nothing, so land 1's is the last
    landed ref (the state files alone never say where main goes: red team 17 hooks F4); doctor
    fails `main_moved` and names the moved ref, its fixes put main back at land 1 and the
    ref back at land 2's tip (the moved values kept on branches), and restore-main then
    puts main at land 2."""
    repo, (a, b), _ = landed2
    evil = git(repo.path, "commit-tree", "-p", b, "-m", "evil", f"{b}^{{tree}}").stdout.strip()
    git(repo.path, *OFF, "update-ref", ref(2), evil)
    git(repo.path, *OFF, "update-ref", "refs/heads/main", evil)
    assert {"main_moved", "unvouched landed ref"} <= failing_names(repo)
    assert "main_moved" in alerts(repo)
    r = repo.jlane("restore-main")
    # the landed refs say where land 1 left main; land 2's is moved (vouched by nothing)
    assert (r.rc, r.code) == (1, "main_ahead") and r.json["details"]["landed"] == a, r.stdout
    assert repo.jlane("reconcile").rc == 0 and epoch_of(repo) == 2
    for name in ("main_moved", "unvouched landed ref"):
        run_fix(failing(repo, name)["fix"], repo.path)
    assert landed_refs(repo)[ref(2)] == b
    assert repo.jlane("restore-main").code == "restored" and repo.sha() == b
    assert repo.sha(f"refs/heads/git-lane-rescue/landed-2-{evil[:12]}") == evil
    assert repo.jlane("doctor").rc == 0


def test_baseline_deleted_past_the_hooks_hides_no_main_moved_by_hand(hub: Repo) -> None:
    """Before any land, the baseline ref deleted past the hooks and main moved the same
    way: state (epoch.json) keeps the baseline, so doctor fails `main_moved` and
    `baseline`, status alerts, and neither create nor reconcile records a baseline at the
    moved main: reconcile, the `baseline` fix, puts the ref back where it was (issue 13
    red team, finding 5; the bypass matrix row `baseline_deleted`)."""
    base = hub.sha(BASELINE)
    assert base is not None
    path = hub.create("alpha")
    hub.commit(path, "evil.txt", "never landed\n")
    git(path, *OFF, "update-ref", "-d", BASELINE)
    git(path, *OFF, "update-ref", "refs/heads/main", "HEAD")
    assert {"main_moved", "baseline"} <= failing_names(hub)
    assert "main_moved" in alerts(hub)
    assert failing(hub, "baseline")["fix"] == "git lane reconcile"
    hub.create("beta")
    assert hub.sha(BASELINE) == base, "create re-recorded the baseline"
    git(path, *OFF, "update-ref", "-d", BASELINE)
    r = hub.jlane("reconcile")
    assert (
        r.rc == 0
        and {"action": "baseline_ref_restored", "ref": BASELINE, "sha": base} in (r.json["changes"])
    ), r.stdout
    assert hub.sha(BASELINE) == base
    assert failing_names(hub) >= {"main_moved"} and "baseline" not in failing_names(hub)


def test_baseline_moved_past_the_hooks_is_named_and_put_back(hub: Repo) -> None:
    """The baseline ref moved past the hooks to a main moved the same way: main is
    compared with the baseline state keeps (`main_moved`), doctor names the moved ref, and
    the owner's fixes put main and the ref back (the moved values kept on branches)."""
    base = hub.sha(BASELINE)
    assert base is not None
    hub.git(*OFF, "commit", "-q", "--allow-empty", "-m", "sneaked")
    moved = hub.sha()
    assert moved is not None
    git(hub.path, *OFF, "update-ref", BASELINE, moved)
    assert {"main_moved", "baseline"} <= failing_names(hub)
    assert "main_moved" in alerts(hub)
    for name in ("main_moved", "baseline"):
        run_fix(failing(hub, name)["fix"], hub.path)
    assert hub.sha() == base and hub.sha(BASELINE) == base
    assert hub.sha(f"refs/heads/git-lane-rescue/baseline-{moved[:12]}") == moved
    assert hub.jlane("doctor").rc == 0


def test_a_baseline_recorded_before_state_kept_it_is_kept_there_by_reconcile(hub: Repo) -> None:
    """A repository whose baseline only the ref has (recorded by an older git-lane, or
    epoch.json lost): doctor warns, reconcile keeps it in state, doctor is clean."""
    base = hub.sha(BASELINE)
    (hub.state_dir / "epoch.json").unlink()
    (c,) = doctor(hub)["baseline"]
    assert (c["status"], c["fix"]) == ("warn", "git lane reconcile")
    r = hub.jlane("reconcile")
    assert {"action": "baseline_kept_in_state", "sha": base} in r.json["changes"], r.stdout
    assert json.loads((hub.state_dir / "epoch.json").read_text())["main_after"] == base
    assert doctor(hub)["baseline"][0]["status"] == "ok"
