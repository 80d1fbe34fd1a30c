"""`git lane doctor`: each check passes on a healthy repository and fails (or warns) on the
broken state it is about, naming a fix that works."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, git, lane
from enginehelp import events, fifo_packed_refs, hard_link_planted, link_on_mains_way
from hookfix import assert_ok, grepo, install, make_lane, run, sha

from guard import config, landed, render
from guard.commands import doctor
from guard.commands import install as hookinstall
from guard.errors import Refusal


def checks(repo: Repo) -> dict[str, dict[str, Any]]:
    res = doctor.run(grepo(repo))
    assert res["code"] == ("ok" if res["ok"] else "doctor_failed")
    for c in res["checks"]:
        assert set(c) == {"name", "status", "message", "fix"}
        assert c["status"] in ("ok", "warn", "fail")
        if c["status"] == "fail":
            assert c["fix"], c
    return {c["name"]: c for c in res["checks"]}


def statuses(repo: Repo) -> dict[str, str]:
    return {k: v["status"] for k, v in checks(repo).items()}


def run_fix(repo: Repo, fix: str) -> None:
    cmd = fix.split("  (")[0]  # drop the trailing explanation
    res = subprocess.run(cmd, shell=True, cwd=repo.path, capture_output=True, text=True)
    assert res.returncode == 0, f"{cmd}\n{res.stdout}\n{res.stderr}"


def test_healthy_repository(repo: Repo) -> None:
    install(repo)
    make_lane(repo, "a")
    st = statuses(repo)
    for name in (
        "main",
        "enabled",
        "core.hooksPath",
        "worktree config",
        "replace refs",
        "lock",
        "lanes",
    ):
        assert st[name] == "ok", (name, checks(repo)[name])
    for name in hookinstall.HOOKS:
        assert st[f"hook {name}"] == "ok"
    assert st["landlock"] in ("ok", "warn")
    r = repo.jlane("doctor")
    assert r.rc == 0 and r.json["ok"] is True and r.code == "ok"
    text = repo.lane("doctor")
    assert text.rc == 0 and "doctor: ok" in text.stdout


def test_a_fix_printed_in_a_lane_names_the_repository_and_runs_as_printed(hub: Repo) -> None:
    """doctor run by the owner in a lane: every git a fix starts is `git -C ROOT` (git
    reads the cwd's repository config, pager.<cmd>, before anything), and it works so."""
    import shlex

    lane = hub.create("alpha")
    hooks = hub.common_dir / "hooks" / "reference-transaction"
    hooks.unlink()
    r = hub.jlane("doctor", cwd=lane)
    c = {x["name"]: x for x in r.json["checks"]}
    root = shlex.quote(os.path.realpath(hub.path))
    assert c["hook reference-transaction"]["fix"] == f"git -C {root} lane install", r.stdout
    res = subprocess.run(["sh", "-c", c["hook reference-transaction"]["fix"]], cwd=lane)
    assert res.returncode == 0 and hooks.exists()


def test_missing_hooks_fail_and_install_fixes(repo: Repo) -> None:
    c = checks(repo)
    assert c["hook pre-commit"]["status"] == "fail"
    assert c["hook reference-transaction"]["fix"] == "git lane install"
    r = repo.jlane("doctor")
    assert r.rc == 1 and r.json["ok"] is False and r.code == "doctor_failed"
    assert "Traceback" not in r.stderr
    assert repo.lane("install").rc == 0
    assert repo.jlane("doctor").rc == 0


def test_modified_hook_fails(repo: Repo) -> None:
    install(repo)
    p = repo.common_dir / "hooks" / "reference-transaction"
    p.write_text(
        p.read_text().replace("case ${1-} in\nprepared|preparing) ;;", "case ${1-} in\nnever) ;;")
    )
    c = checks(repo)["hook reference-transaction"]
    assert c["status"] == "fail" and c["fix"] == "git lane install"
    install(repo)
    assert checks(repo)["hook reference-transaction"]["status"] == "ok"


def test_unexecutable_hook_fails_with_chmod(repo: Repo) -> None:
    install(repo)
    p = repo.common_dir / "hooks" / "pre-rebase"
    p.chmod(0o644)
    c = checks(repo)["hook pre-rebase"]
    assert c["status"] == "fail"
    run_fix(repo, c["fix"])
    assert checks(repo)["hook pre-rebase"]["status"] == "ok"


def test_hook_installed_by_another_python(repo: Repo, tmp_path: Path) -> None:
    install(repo)
    p = repo.common_dir / "hooks" / "pre-commit"
    gone = tmp_path / "venv" / "bin" / "python"
    p.write_text(p.read_text().replace(hookinstall.embedded_python(p.read_text()) or "", str(gone)))
    assert checks(repo)["hook pre-commit"]["status"] == "fail"  # that Python is gone
    broken = tmp_path / "python-without-git-lane"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    p.write_text(p.read_text().replace(str(gone), str(broken)))
    assert checks(repo)["hook pre-commit"]["status"] == "fail"  # cannot import guard
    other = tmp_path / "other-python"
    other.write_text("#!/bin/sh\nexit 0\n")
    other.chmod(0o755)
    p.write_text(p.read_text().replace(str(broken), str(other)))
    assert checks(repo)["hook pre-commit"]["status"] == "warn"


def test_core_hooks_path_fails(repo: Repo) -> None:
    install(repo)
    git(repo.path, "config", "core.hooksPath", "/dev/null")
    c = checks(repo)
    assert c["core.hooksPath"]["status"] == "fail"
    assert c["core.hooksPath"]["fix"].startswith("git config --unset core.hooksPath")
    git(repo.path, "config", "--unset", "core.hooksPath")
    assert checks(repo)["core.hooksPath"]["status"] == "ok"


def test_worktree_config_that_switches_hooks_off(repo: Repo) -> None:
    """extensions.worktreeConfig on is a failure by itself (red team 14A: no git-lane
    command runs git in a lane then), its fix the unset; a config.worktree that sets
    core.hooksPath is one more, named, with its own fix."""
    install(repo)
    lane = make_lane(repo, "a")
    git(repo.path, "config", "extensions.worktreeConfig", "true")
    c = checks(repo)["worktree config"]
    assert c["status"] == "fail" and "config --unset extensions.worktreeConfig" in c["fix"]
    git(lane, "config", "--worktree", "core.hooksPath", "/dev/null")
    res = doctor.run(grepo(repo))
    wt = [c for c in res["checks"] if c["name"] == "worktree config"]
    (hp,) = [c for c in wt if "core.hookspath" in c["message"].lower()]
    assert hp["status"] == "fail"
    # the lane really has no hooks now: doctor's point
    assert run(lane, "update-ref", "refs/heads/lane/a", "HEAD").returncode == 0
    run_fix(repo, hp["fix"])
    assert checks(repo)["worktree config"]["status"] == "fail"
    run_fix(repo, checks(repo)["worktree config"]["fix"])
    assert checks(repo)["worktree config"]["status"] == "ok"


def test_replace_refs_fail_and_the_fix_passes_the_hook(repo: Repo) -> None:
    git(repo.path, "commit", "-q", "--allow-empty", "-m", "second")
    git(repo.path, "replace", "HEAD", "HEAD~1")  # before the hooks, which would refuse it
    install(repo)
    c = checks(repo)["replace refs"]
    assert c["status"] == "fail"
    run_fix(repo, c["fix"])
    assert checks(repo)["replace refs"]["status"] == "ok"


def test_main_as_a_symbolic_ref_fails(repo: Repo) -> None:
    install(repo)
    config.write(repo.state_dir / "config.toml", "gate", "off")
    lane = make_lane(repo, "a")
    assert_ok(run(lane, "commit", "-q", "--allow-empty", "-m", "x"))
    assert repo.jlane("land", "a").rc == 0
    landed = sha(repo.path, "refs/heads/main")
    git(repo.path, "switch", "-q", "--detach")
    git(repo.path, "branch", "side", "HEAD~1")
    git(repo.path, "symbolic-ref", "refs/heads/main", "refs/heads/side")  # main silently moved back
    c = checks(repo)["main"]
    assert c["status"] == "fail" and "symbolic ref" in c["message"]
    assert c["fix"] == "git lane restore-main"
    run_fix(repo, c["fix"])
    assert checks(repo)["main"]["status"] == "ok"
    assert sha(repo.path, "refs/heads/main") == landed


def test_a_link_at_main_that_git_reads_through_fails_and_restore_main_keeps_it(
    hub: Repo,
) -> None:
    """Red team 14G F6: refs/heads/main a symbolic link to the lane's admin HEAD (an
    earlier plain write; its text is no refs/... name, so git reads main through it and
    `git symbolic-ref` says it is none): doctor said ok at main's value. It fails now,
    whatever the link reads as; its fix, restore-main, moves the link into kept/ (kept as
    it was, not deleted) and makes main a plain ref at the last landed tip."""
    lane = hub.create("a")
    main = hub.sha()
    git(lane, "switch", "-q", "--detach", "main")
    admin = Path(git(lane, "rev-parse", "--absolute-git-dir").stdout.strip())
    link = hub.common_dir / "refs" / "heads" / "main"
    text = os.path.relpath(admin / "HEAD", link.parent)
    link.unlink()
    os.symlink(text, link)
    assert hub.sha() == main
    c = checks(hub)["main"]
    assert c["status"] == "fail" and "symbolic link" in c["message"], c
    assert c["fix"] == "git lane restore-main"
    run_fix(hub, c["fix"])
    assert not link.is_symlink() and hub.sha() == main
    (kept,) = (hub.state_dir / "kept").glob("refs-heads-main.*")
    assert kept.is_symlink() and os.readlink(kept) == text
    assert checks(hub)["main"]["status"] == "ok"


def _a_link_on_mains_way(hub: Repo, shape: str) -> str:
    """Lane alpha, then main read through a link on its way (enginehelp.link_on_mains_way);
    main's ref."""
    hub.create("alpha")
    tip = hub.sha()
    assert tip is not None
    return link_on_mains_way(hub, shape, tip)[0]


@pytest.mark.parametrize("shape", ["parent_directory", "heads", "packed_refs"])
def test_a_link_on_mains_way_fails_and_its_fix_makes_main_plain(hub: Repo, shape: str) -> None:
    """Red team 14H-A F2, F4: doctor said ok while git read main through a link at its
    parent directory or a linked packed-refs (a sandboxed lane may write what either
    leads to). It fails (whatever main reads as), and its fix, run as written, keeps the
    link in kept/ and leaves main plain at the same commit."""
    main = _a_link_on_mains_way(hub, shape)
    tip = hub.sha(main)
    c = checks(hub)["main"]
    assert c["status"] == "fail" and "symbolic link" in c["message"], c
    run_fix(hub, c["fix"])
    assert checks(hub)["main"]["status"] == "ok"
    assert hub.sha(main) == tip
    linked = {"parent_directory": "refs/heads/team", "heads": "refs/heads"}.get(
        shape, "packed-refs"
    )
    assert not (hub.common_dir / linked).is_symlink()
    (kept,) = (hub.state_dir / "kept").glob(f"{linked.replace('/', '-')}.*")
    assert os.path.islink(kept) or any(p.is_symlink() for p in kept.rglob("*")), kept


@pytest.mark.parametrize("shape", ["loose_main", "packed_refs", "admin_head", "landed"])
def test_a_protected_ref_file_with_a_second_name_fails_and_its_fix_gives_it_its_own(
    hub: Repo, shape: str
) -> None:
    """Red team 15B F3: main's loose file (or packed-refs, or a landed ref's loose file)
    hard-linked beforehand at a name a sandboxed lane may write: doctor said ok. It fails
    `main` now; its fix, restore-main, gives the file an inode of its own at the same
    content and leaves the second name's file as it was."""
    ref, planted, _ = hard_link_planted(hub, shape)
    before = hub.sha(ref)
    held = planted.read_bytes()
    c = checks(hub)["main"]
    assert c["status"] == "fail" and "hard link" in c["message"], c
    assert c["fix"] == "git lane restore-main"
    run_fix(hub, c["fix"])
    assert checks(hub)["main"]["status"] == "ok"
    assert hub.sha(ref) == before and planted.read_bytes() == held
    assert planted.stat().st_nlink == 1


def test_a_hard_linked_main_with_no_landed_tip_has_a_fix_by_hand(
    hub: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing to go back to (no land, no baseline: restore-main refuses
    no_landed_tip) doctor's fix for a hard-linked main copies it into a new kept/
    directory and renames the copy over it, as written: main at the same commit, the
    second name's file as it was."""
    _, other, _ = hard_link_planted(hub, "loose_main")
    main = hub.common_dir / "refs" / "heads" / "main"
    before = hub.sha()
    monkeypatch.setattr(landed, "last", lambda *a, **k: None)
    c = checks(hub)["main"]
    assert c["status"] == "fail" and "hard link" in c["message"], c
    assert "restore-main" not in c["fix"], c
    run_fix(hub, c["fix"])
    assert checks(hub)["main"]["status"] == "ok"
    assert hub.sha() == before and other.read_text() == main.read_text()
    assert main.stat().st_nlink == 1 and other.stat().st_nlink == 1


@pytest.mark.parametrize("link", [False, True], ids=["fifo", "link-to-fifo"])
def test_a_fifo_at_packed_refs_is_named_and_its_fix_keeps_it(hub: Repo, link: bool) -> None:
    """`packed-refs` a FIFO (or a link to one; only a process outside the sandbox can make
    one): every git that reads a ref waits on it for ever, and doctor hung in its first
    check. It fails `main` at once, naming it, before any git runs; its fix, run as
    written, keeps it in kept/ (never opened) and main is ok again."""
    hub.create("alpha")
    with fifo_packed_refs(hub, link) as packed:
        r = lane("--json", "doctor", cwd=hub.path, timeout=30)  # a hang fails here
        assert (r.rc, r.code) == (1, "doctor_failed"), r.stdout + r.stderr
        (c,) = r.json["checks"]
        assert c["name"] == "main" and c["status"] == "fail", c
        assert "packed-refs is" in c["message"] and "for ever" in c["message"], c
        assert c["fix"] == "git lane restore-main"
        fixed = subprocess.run(c["fix"], shell=True, cwd=hub.path, capture_output=True, timeout=30)
        assert fixed.returncode == 0, fixed
        assert not os.path.lexists(packed)
        assert checks(hub)["main"]["status"] == "ok"


def test_a_look_at_mains_way_that_fails_refuses(hub: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A name on main's way that cannot be looked at (EACCES, EIO: anything but a missing
    name) is never taken for "no link": foreign_main_link refuses main_not_plain."""
    _a_link_on_mains_way(hub, "parent_directory")
    real = os.stat

    def denied(path: Any, *args: Any, **kw: Any) -> os.stat_result:
        if path == "team" and kw.get("dir_fd") is not None:
            raise PermissionError(13, "Permission denied")
        return real(path, *args, **kw)

    monkeypatch.setattr(os, "stat", denied)
    with pytest.raises(Refusal) as r:
        grepo(hub).foreign_main_link()
    assert r.value.code == "main_not_plain" and "cannot be established" in r.value.message


def test_stale_lock_warns(repo: Repo) -> None:
    install(repo)
    locks = repo.state_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    from guard.procs import hostname

    (locks / "integration.owner").write_text(
        f"pid={dead.pid}\nstart=1.0\nhost={hostname()}\ntoken=t\nlane=a\nmain_before=x\ntip=y\nsince=then\n"
    )
    c = checks(repo)["lock"]
    assert c["status"] == "warn" and c["fix"] == "git lane reconcile"
    run_fix(repo, "git lane reconcile")
    assert checks(repo)["lock"]["status"] == "ok"


def test_orphaned_lane_warns(repo: Repo) -> None:
    install(repo)
    lane = make_lane(repo, "a")
    os.rename(lane, lane.with_name("a-moved"))
    c = checks(repo)["lane a"]
    assert c["status"] == "warn" and "orphaned" in c["message"]
    assert repo.jlane("doctor").rc == 0  # a warning is not a failure


def test_missing_lane_marker_warns_and_reconcile_repairs(repo: Repo) -> None:
    install(repo)
    lane = make_lane(repo, "a")
    gd = Path(run(lane, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())
    (gd / "gitlane-lane").unlink()
    c = checks(repo)["lane a"]
    assert c["status"] == "warn" and c["fix"] == "git lane reconcile"
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stderr
    assert {"action": "marker_written", "lane": "a"} in r.json["changes"]
    assert (gd / "gitlane-lane").read_text().strip() == "a"
    assert checks(repo)["lanes"]["status"] == "ok"


def test_a_lane_with_another_branch_checked_out_warns_and_its_fix_switches_back(
    repo: Repo,
) -> None:
    install(repo)
    lane = make_lane(repo, "a")
    gd = Path(run(lane, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())
    (gd / "HEAD").write_text("ref: refs/heads/main\n")  # sync and land refuse this
    c = checks(repo)["lane a"]
    assert c["status"] == "warn" and "lane_branch_mismatch" in c["message"], c
    run_fix(repo, c["fix"])
    assert (gd / "HEAD").read_text() == "ref: refs/heads/lane/a\n"
    assert checks(repo)["lanes"]["status"] == "ok"


def test_enabled_false_warns(repo: Repo) -> None:
    install(repo)
    config.write(repo.state_dir / "config.toml", "enabled", False)
    c = checks(repo)["enabled"]
    assert c["status"] == "warn" and c["fix"] == "git lane config set enabled true"


def test_no_main_branch_fails_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    r = Repo(path).jlane("doctor")
    assert r.rc == 1
    c = {x["name"]: x for x in r.json["checks"]}["main"]
    assert c["status"] == "fail" and "no_main_branch" in c["message"]
    assert "Traceback" not in r.stderr


def test_landlock_probe() -> None:
    abi, why = doctor.landlock_abi()
    assert (abi is None) == bool(why)
    if abi is not None:
        assert abi >= 1


def test_landlock_required_but_missing_fails(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "landlock_abi", lambda: (None, "no Landlock here"))
    config.write(repo.state_dir / "config.toml", "sandbox", "required")
    c = checks(repo)["landlock"]
    assert c["status"] == "fail" and "best-effort" in c["fix"]


@pytest.mark.skipif(doctor.landlock_abi()[0] is None, reason="no usable Landlock here")
def test_landlock_lists_the_real_grants_of_a_lane(repo: Repo) -> None:
    """doctor lists the paths the sandbox grants a lane (what --explain lists): the lane,
    not the cache dir that holds it; a temp dir it cannot grant is a finding with a fix."""
    install(repo)
    lane_path = repo.create("alpha").resolve()
    r = repo.lane("--json", "doctor")
    c = {x["name"]: x for x in r.json["checks"]}["landlock"]
    assert c["status"] == "ok" and f"for lane alpha it grants writes to {lane_path}" in c["message"]
    cache = str(Path(os.environ["XDG_CACHE_HOME"]).resolve())
    assert f"{cache}," not in c["message"] and f"{cache}/git-lane," not in c["message"]
    explain = repo.lane("--json", "exec", "--sandbox", "--explain", "alpha").json
    assert ", ".join(explain["writable"]) in c["message"]
    r = repo.lane("--json", "doctor", env={"TMPDIR": "/"})
    c = {x["name"]: x for x in r.json["checks"]}["landlock"]
    assert c["status"] == "warn" and "is /" in c["message"]
    assert c["fix"] == "env TMPDIR=/tmp git lane exec --sandbox alpha --explain"


def test_landlock_probe_failure_under_best_effort_fails(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from guard import sandbox

    monkeypatch.setattr(sandbox, "probe", lambda: (0, "the Landlock probe failed: simulated"))
    config.write(repo.state_dir / "config.toml", "sandbox", "best-effort")
    c = checks(repo)["landlock"]
    assert c["status"] == "fail" and c["fix"] == "git lane config set sandbox off"


def test_render_names_every_failure_and_its_fix(repo: Repo) -> None:
    text = render.doctor(doctor.run(grepo(repo)))
    assert "FAIL" in text and "fix: git lane install" in text
    assert text.splitlines()[-1].startswith("doctor: ")


def test_program_config_in_the_repository_fails_or_warns(repo: Repo) -> None:
    """core.fsmonitor in the repository's own config runs a program on the owner's next
    plain `git status`, unbound (a lane could have set it before the shim refused that)."""
    install(repo)
    assert checks(repo)["program config"]["status"] == "ok"
    git(repo.path, "config", "core.fsmonitor", "/tmp/gitlane-evil")
    c = checks(repo)["program config"]
    assert c["status"] == "fail" and "core.fsmonitor" in c["message"]
    run_fix(repo, c["fix"])
    assert checks(repo)["program config"]["status"] == "ok"
    git(repo.path, "config", "core.fsmonitor", "true")  # the built-in daemon
    assert checks(repo)["program config"]["status"] == "ok"
    git(repo.path, "config", "core.pager", "less -R")
    assert checks(repo)["program config"]["status"] == "warn"
    git(repo.path, "config", "alias.x", "!touch /tmp/gitlane-x")
    assert checks(repo)["program config"]["status"] == "fail"


def test_a_shallow_file_fails(repo: Repo) -> None:
    install(repo)
    # a root commit: nothing behind the cut, which doctor used to pass with a warning
    root = git(repo.path, "rev-list", "--max-parents=0", "HEAD").stdout.split()[0]
    (Path(repo.common_dir) / "shallow").write_text(root + "\n")
    c = checks(repo)["shallow"]
    assert c["status"] == "fail"
    run_fix(repo, c["fix"])
    assert checks(repo)["shallow"]["status"] == "ok"


def test_an_owners_remote_group_is_no_program_to_doctor(hub: Repo, tmp_path: Path) -> None:
    """`remotes.grp = up` (what `git remote update grp` reads) is an ordinary group: doctor
    warns only of a member that is an option word (a child fetch takes it as one), and
    never offers to delete the owner's group (red team 13P)."""
    up = tmp_path / "up.git"
    git(tmp_path, "clone", "-q", "--bare", str(hub.path), str(up))
    for k, v in (
        ("remote.up.url", str(up)),
        ("remote.up.fetch", "+refs/heads/*:refs/remotes/up/*"),
        ("remotes.grp", "up"),
    ):
        git(hub.path, "config", k, v)
    d = hub.jlane("doctor")
    assert not [c for c in d.json.get("checks", []) if "remotes.grp" in str(c)], d.stdout
    git(hub.path, "config", "remotes.bad", "--upload-pack=/tmp/p .")
    d = hub.jlane("doctor")
    assert [c for c in d.json.get("checks", []) if "remotes.bad" in str(c)], d.stdout


def test_a_remote_named_as_an_option_word_fails_doctor(hub: Repo) -> None:
    """A remote `--upload-pack=PROG` (a lane's `git remote add -- NAME URL` before the shim
    refused it, or a shell write): every `git fetch --all` / `remote update` / maintenance
    prefetch hands the name to a child `git fetch` as that option (red team 13R). doctor
    fails on each key of such a section, and its fix, run as printed, removes it."""
    name = '--upload-pack=eval${IFS}"$(x)"'
    git(hub.path, "config", f"remote.{name}.url", ".")
    git(hub.path, "config", f"remote.{name}.fetch", "+refs/heads/*:refs/remotes/x/*")
    d = hub.jlane("doctor")
    bad = [c for c in d.json.get("checks", []) if "upload-pack" in str(c)]
    assert len(bad) == 2 and all(c["status"] == "fail" for c in bad), d.stdout
    for c in bad:
        run_fix(hub, c["fix"])
    assert "upload-pack" not in git(hub.path, "config", "--list").stdout


def _grow(path: Path, size: int = 256 << 20) -> None:
    """What a lane under exec --sandbox can do to a file git reads whole: make it a sparse
    `size` bytes (its text first: git still reads it as what it said)."""
    with open(path, "r+b") as f:
        f.truncate(size)


def test_a_grown_lane_ref_fails_and_its_fix_puts_the_branch_back(hub: Repo) -> None:
    """red team 14G F7: doctor moves the sparse ref into kept/ before any check runs git,
    fails the lane's lost branch, and the fix it prints brings it back at its tip."""
    lane = make_lane(hub, "a")
    tip = sha(lane)
    ref = hub.common_dir / "refs" / "heads" / "lane" / "a"
    _grow(ref)
    c = checks(hub)["oversized"]
    assert c["status"] == "fail" and c["fix"] == "git lane repair a", c
    assert not ref.exists()
    (kept,) = (hub.state_dir / "kept").glob("oversized.*/refs/heads/lane/a")
    assert kept.stat().st_size == 256 << 20
    run_fix(hub, c["fix"])
    st = statuses(hub)
    assert st["oversized"] == "ok" and st["lanes"] == "ok", checks(hub)
    assert hub.sha("refs/heads/lane/a") == tip


def test_a_grown_ref_that_cannot_be_moved_fails_with_the_check_again_and_the_repair(
    hub: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the rename is refused (a directory its owner may not write), nothing is moved
    and doctor fails with the check again and the repair, engine commands only (no `mv`
    by a path a lane can re-point, red team 15A F1b): run as printed once the directory is
    writable again, they work."""
    from guard import dirfd
    from guard.cli import Ctx
    from guard.errors import Refusal

    lane = make_lane(hub, "a")
    tip = sha(lane)
    ref = hub.common_dir / "refs" / "heads" / "lane" / "a"
    _grow(ref)
    with monkeypatch.context() as m:
        m.setattr(dirfd, "owner_may", lambda dfd, change: False)
        c = checks(hub)["oversized"]
        assert c["status"] == "fail" and "[git_file_oversized]" in c["message"], c
        assert ref.stat().st_size == 256 << 20  # left where it was
        with pytest.raises(Refusal) as refused:  # every command: the CLI's own check
            assert Ctx(str(hub.path), True).repo is None
        assert refused.value.code == "git_file_oversized"
        assert refused.value.next == ["git lane status", "git lane repair a"]
    run_fix(hub, c["fix"])
    (kept,) = (hub.state_dir / "kept").glob("oversized.*/refs/heads/lane/a")
    assert kept.stat().st_size == 256 << 20 and ref.stat().st_size < 100
    assert statuses(hub)["oversized"] == "ok"
    assert hub.sha("refs/heads/lane/a") == tip


def _admin_of(lane: Path) -> Path:
    return Path(run(lane, "rev-parse", "--absolute-git-dir").stdout.strip())


def test_reflogs_a_lane_makes_in_bulk_are_held_to_a_total_never_the_lanes_own(
    hub: Repo,
) -> None:
    """Each reflog a sandboxed lane may write is held to LOG_MAX, but a lane can make as
    many as it likes, each just under it (sparse: no disk used), under logs/refs/heads/lane/
    and in its admin dir's logs/ (git reads every worktree's refs/bisect/ reflogs too), and
    `git gc` (reflog expire --all) then reads them all. Past STRAY_LOG_MAX in all, the
    largest go into kept/ whole (moved, never copied); the lanes' own branch reflogs and
    each admin dir's HEAD reflog stay, however big, and so does main's."""
    from guard import oversize

    a, b = make_lane(hub, "a"), make_lane(hub, "b")
    logs = hub.common_dir / "logs" / "refs" / "heads" / "lane"
    near = oversize.LOG_MAX - 4096
    own = [logs / "a", logs / "b", _admin_of(a) / "logs" / "HEAD"]
    for p in own:
        _grow(p, near)
    main_log = (hub.common_dir / "logs" / "refs" / "heads" / "main").read_bytes()
    strays = [logs / f"junk{i}" for i in range(4)]  # reflogs of no ref
    bisect = _admin_of(b) / "logs" / "refs" / "bisect"
    bisect.mkdir(parents=True)
    strays += [bisect / "bad", bisect / "good"]
    for i, p in enumerate(strays):
        p.write_text("x\n")
        _grow(p, (20 << 20) + i + (20 << 20) * (i // 4))
    c = checks(hub)["oversized"]
    assert c["status"] == "warn" and f"{oversize.STRAY_MAX} entries" in c["message"], c
    assert [p.stat().st_size for p in own] == [near] * 3, "a lane's own reflog was moved"
    assert (hub.common_dir / "logs" / "refs" / "heads" / "main").read_bytes() == main_log
    left = [p for p in strays if p.exists()]
    # each pool on its own (the lane refs' reflogs; lane b's admin dir: red team 15C F3),
    # the largest of each first: junk3, and the bisect logs moved whole with their logs/refs
    assert left == strays[:3], left
    assert sum(p.stat().st_size for p in left) <= oversize.STRAY_LOG_MAX
    for i, p in list(enumerate(strays))[3:]:
        rel = p.relative_to(hub.common_dir)
        top = rel.parents[1] if "bisect" in rel.parts else rel
        (kept,) = (hub.state_dir / "kept").glob(f"oversized.*/{top}")
        moved = kept / p.relative_to(hub.common_dir / top)
        assert moved.stat().st_size == (20 << 20) + i + (20 << 20) * (i // 4)
        assert moved.stat().st_blocks * 512 < 1 << 20  # the same sparse file, never a copy
    assert statuses(hub)["oversized"] == "ok"  # nothing more to move


@pytest.mark.parametrize(
    "root, name",
    [("refs/heads/lane", "many"), ("logs/refs/heads/lane", "a")],
    ids=["refs_of_its_own", "in_a_lanes_name"],
)
def test_refs_a_lane_makes_in_bulk_are_held_to_a_count(hub: Repo, root: str, name: str) -> None:
    """A lane may make any number of loose refs under refs/heads/lane/ (in a directory of
    its own or beside the branches), and every `git branch`, `for-each-ref` and `git lane
    status` reads them all: past STRAY_MAX entries beside the lanes' own, the largest (a
    directory with all in it, whole) go into kept/, at their path there. A directory in a
    lane's name (its reflog, a file, taken away) is no lane's own: it goes too."""
    from guard import oversize

    make_lane(hub, "a")
    heads = hub.common_dir / "refs" / "heads" / "lane"
    tip = (heads / "a").read_text()
    many = hub.common_dir / root / name
    if many.exists():
        many.unlink()
    many.mkdir()
    for i in range(oversize.STRAY_MAX + 10):
        (many / f"r{i}").write_text(tip)
    (heads / "few").write_text(tip)
    c = checks(hub)["oversized"]
    assert c["status"] == "warn" and f"{root}/{name} (" in c["message"], c
    assert not many.exists() and (heads / "few").read_text() == tip
    assert (heads / "a").read_text() == tip
    (kept,) = (hub.state_dir / "kept").glob(f"oversized.*/{root}/{name}")
    assert len(list(kept.iterdir())) == oversize.STRAY_MAX + 10
    refs = run(hub.path, "for-each-ref", "--format=%(refname)", "refs/heads/lane/").stdout
    assert refs.split() == ["refs/heads/lane/a", "refs/heads/lane/few"]


def test_a_released_lanes_name_keeps_no_reflog_out_of_the_total(hub: Repo) -> None:
    """The lanes' own branch reflogs are never moved by the bulk bound, but a released
    lane has no branch: a reflog a lane writes in its name counts with the rest (its
    record is read, not only listed), and the largest goes."""
    from guard import oversize

    make_lane(hub, "a")
    make_lane(hub, "b")
    assert hub.jlane("release", "b").rc == 0
    logs = hub.common_dir / "logs" / "refs" / "heads" / "lane"
    _grow(logs / "a", oversize.LOG_MAX - 1)
    for name, size in (("b", 40 << 20), ("junk", 30 << 20)):
        (logs / name).write_text("x\n")
        _grow(logs / name, size)
    c = checks(hub)["oversized"]
    assert c["status"] == "warn" and "logs/refs/heads/lane/b (" in c["message"], c
    assert not (logs / "b").exists() and (logs / "junk").stat().st_size == 30 << 20
    assert (logs / "a").stat().st_size == oversize.LOG_MAX - 1


def test_refs_in_bulk_that_cannot_be_moved_fail_with_the_check_again(
    hub: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the bulk bound's rename is refused, nothing is moved and doctor fails
    git_file_oversized with the check again (no `mv` by a path a lane can re-point, red
    team 15A F1b): run as printed once the directory is writable, it moves the whole
    directory into kept/, and nothing is left past the bound."""
    from guard import dirfd, oversize

    make_lane(hub, "a")
    heads = hub.common_dir / "refs" / "heads" / "lane"
    many = heads / "many"
    many.mkdir()
    for i in range(oversize.STRAY_MAX + 1):
        (many / f"r{i}").write_text((heads / "a").read_text())
    with monkeypatch.context() as m:
        m.setattr(dirfd, "owner_may", lambda dfd, change: False)
        c = checks(hub)["oversized"]
    assert c["status"] == "fail" and "[git_file_oversized]" in c["message"], c
    assert f"{oversize.STRAY_MAX} entries" in c["message"] and many.is_dir()
    assert c["fix"] == "git lane status", c
    run_fix(hub, c["fix"])
    (kept,) = (hub.state_dir / "kept").glob("oversized.*/refs/heads/lane/many")
    assert len(list(kept.iterdir())) == oversize.STRAY_MAX + 1 and not many.exists()
    assert statuses(hub)["oversized"] == "ok"


def test_refs_in_bulk_each_beside_the_branches_are_kept_and_the_event_stays_one_line(
    hub: Repo,
) -> None:
    """Flat, each loose ref is its own entry to move: all but STRAY_MAX go, and the event
    oversized_kept names EVENT_MAX of them and how many more (the rest lie at their
    paths in kept/ all the same)."""
    from guard import oversize

    make_lane(hub, "a")
    heads = hub.common_dir / "refs" / "heads" / "lane"
    tip = (heads / "a").read_text()
    n = oversize.STRAY_MAX + oversize.EVENT_MAX + 10
    for i in range(n):
        (heads / f"x{i}").write_text(tip)
    assert checks(hub)["oversized"]["status"] == "warn"
    assert len(list(heads.iterdir())) == oversize.STRAY_MAX + 1  # (and a's)
    (kept,) = (hub.state_dir / "kept").glob("oversized.*/refs/heads/lane")
    assert len(list(kept.iterdir())) == oversize.EVENT_MAX + 10
    (ev,) = events(hub, "oversized_kept")
    assert len(ev["moved"]) == oversize.EVENT_MAX and ev["more"] == 10, ev["more"]


def test_git_file_oversizeds_next_never_moves_a_directory_a_lane_links_on_its_way(
    hub: Repo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """red team 15A F1b: a grown ref at refs/heads/lane/P/victim that cannot be moved; the
    refusal printed, a process of the lane swaps P (the lane refs are every lane's to
    write) for a link to a directory of the owner's. The next, run as printed, never
    follows it (it was `mv -n -T -- <common>/refs/heads/lane/P/victim KEPT/...`, which
    moved the owner's own `victim` into kept/): the engine's check moves the link itself."""
    from guard import dirfd
    from guard.cli import Ctx

    make_lane(hub, "a")
    outside = tmp_path / "owners"
    (outside / "victim").mkdir(parents=True)
    (outside / "victim" / "precious.txt").write_text("mine\n")
    heads = hub.common_dir / "refs" / "heads" / "lane"
    (heads / "P").mkdir()
    (heads / "P" / "victim").write_text("x\n")
    _grow(heads / "P" / "victim")
    with monkeypatch.context() as m:
        m.setattr(dirfd, "owner_may", lambda dfd, change: False)
        with pytest.raises(Refusal) as refused:
            assert Ctx(str(hub.path), True).repo is None
    assert refused.value.code == "git_file_oversized"
    (heads / "P").rename(heads / "P.was")
    (heads / "P").symlink_to(outside)
    for step in refused.value.next:
        subprocess.run(step, shell=True, cwd=hub.path, capture_output=True, text=True)
    assert (outside / "victim" / "precious.txt").read_text() == "mine\n", (
        refused.value.next,
        sorted(str(p) for p in (hub.state_dir / "kept").rglob("precious.txt")),
    )
    assert not (heads / "P").is_symlink() and not (heads / "P.was" / "victim").exists()


def _plant(kind: str, path: Path) -> None:
    """What a process of a lane under plain exec (or --sandbox) can put among the lane
    refs: a FIFO, or a link to /dev/zero or to a directory (/usr)."""
    if path.exists():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to({"zero": "/dev/zero", "dir": "/usr"}[kind])


@pytest.mark.parametrize(
    "kind, rel",
    [
        ("fifo", "refs/heads/lane/zz"),
        ("fifo", "logs/refs/heads/lane/zz"),
        ("zero", "refs/heads/lane/zz"),
        ("dir", "refs/heads/lane/P"),
        ("zero", "refs/heads/lane/a"),
    ],
    ids=["fifo", "fifo_reflog", "dev_zero", "dir_link", "own_branch_linked"],
)
def test_a_fifo_or_link_among_the_lane_refs_is_kept_aside_before_any_git_reads_it(
    hub: Repo, kind: str, rel: str
) -> None:
    """red team 15A F6, F6b: a FIFO at refs/heads/lane/zz blocked every git that lists the
    refs (status hung for ever, doctor said ok), a link to /dev/zero made every git read
    until memory ran out, one to /usr made for-each-ref walk it. The check moves each into
    kept/ (renamed: the FIFO, the link itself, never followed) before any git runs, doctor
    names it, and a lane whose branch it was gets `git lane repair KEY` back. (In an admin
    dir, each is admin_unreadable's: tests/test_hostile_state.py.)"""
    from guard import oversize

    lane = make_lane(hub, "a")
    tip = sha(lane)
    path = hub.common_dir / rel
    _plant(kind, path)
    (c,) = doctor.check_oversized(grepo(hub))  # in process: no git has read it yet
    assert not os.path.lexists(path), f"{rel} ({kind}) left where git reads it: {c}"
    (kept,) = (hub.state_dir / "kept").glob(f"oversized.*/{rel}")
    assert kept.is_symlink() if kind != "fifo" else kept.is_fifo()
    assert rel in c["message"], c  # doctor names it
    (ev,) = events(hub, "oversized_kept")
    assert [(d["file"], d["odd"]) for d in ev["moved"]] == [
        (rel, "fifo" if kind == "fifo" else "symlink")
    ], ev
    own = rel.endswith("/a")
    assert (c["status"], c["fix"]) == (("fail", "git lane repair a") if own else ("warn", None))
    st = hub.jlane("status")
    assert st.rc == 0, st.stdout[-300:]
    if own:
        run_fix(hub, "git lane repair a")
    assert hub.sha("refs/heads/lane/a") == tip
    assert oversize.ref_oversized(hub.common_dir, "lane/a") is False
    ref = hub.common_dir / "refs" / "heads" / "lane" / "a"
    text = ref.read_bytes()
    _plant(kind, ref)
    try:
        assert oversize.ref_oversized(hub.common_dir, "lane/a")  # exec's absorb skips it
    finally:
        ref.unlink()
        ref.write_bytes(text)


@pytest.mark.parametrize("kind", ["fifo", "dir"])
def test_the_lane_refs_directory_itself_made_a_fifo_or_link_is_kept_aside(
    hub: Repo, kind: str
) -> None:
    """A process of a lane under plain exec (its shims do not see mv or mkfifo) moves all
    of refs/heads/lane/ away and puts a FIFO (git lists refs/heads/ and opens it as a ref:
    every git that lists the refs blocks) or a link to /usr in its place. The check moves
    it into kept/ (the scan could not go into it), and doctor's fix puts back every lane's
    branch."""
    lane = make_lane(hub, "a")
    tip = sha(lane)
    heads = hub.common_dir / "refs" / "heads" / "lane"
    heads.rename(heads.with_name("lane.was"))
    _plant(kind, heads)
    (c,) = doctor.check_oversized(grepo(hub))  # in process: no git has read it yet
    assert not os.path.lexists(heads), c
    assert (c["status"], c["fix"]) == ("fail", "git lane repair a"), c
    assert hub.jlane("status").rc == 0
    run_fix(hub, c["fix"])
    assert hub.sha("refs/heads/lane/a") == tip
