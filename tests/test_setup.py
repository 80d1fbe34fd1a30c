"""Lane setup: `.worktreeinclude` (ignored hub files copied into a new lane, from main's
committed patterns only), `setup_command` (run in the new lane; failure and timeout leave
the lane, refuse `setup_failed`, and `git lane setup KEY` runs it again), the per-lane
GITLANE_PORT, and the project's `.git-lane.toml` from main's tree below the owner's files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import signal

import pytest

from conftest import Repo
from sandboxhelp import NEEDS_LANDLOCK
from enginehelp import pid_alive, spawn_lane, wait_for

INCLUDE = ".env\nnode_modules/\n.venv/\n"


def track(repo: Repo, files: dict[str, str], msg: str = "project files") -> None:
    for name, text in files.items():
        (repo.path / name).write_text(text)
    repo.git("add", "--", *files)
    repo.git("commit", "-q", "-m", msg)


def ignored_hub(repo: Repo) -> None:
    """The hub's ignored files: .env, a node_modules tree, a build dir not to copy."""
    track(
        repo,
        {".gitignore": ".env\nnode_modules/\nbuild/\n", ".worktreeinclude": INCLUDE},
    )
    (repo.path / ".env").write_text("SECRET=1\n")
    os.chmod(repo.path / ".env", 0o600)
    mod = repo.path / "node_modules" / "left-pad"
    mod.mkdir(parents=True)
    (mod / "index.js").write_text("module.exports = 1\n")
    (mod / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(mod / "run.sh", 0o755)
    (repo.path / "build").mkdir()
    (repo.path / "build" / "out.o").write_text("obj\n")


def create(repo: Repo, key: str) -> dict[str, object]:
    r = repo.jlane("create", key)
    assert r.rc == 0, r.stdout + r.stderr
    return dict(r.json)


# -- .worktreeinclude ---------------------------------------------------------------------
def test_worktreeinclude_copies_ignored_files_only(repo: Repo) -> None:
    ignored_hub(repo)
    (repo.path / "untracked.env").write_text("not ignored\n")  # untracked, not ignored
    res = create(repo, "alpha")
    lane = Path(str(res["lane"]["path"]))  # type: ignore[index]
    assert (lane / ".env").read_text() == "SECRET=1\n"
    assert (lane / ".env").stat().st_mode & 0o777 == 0o600
    assert (lane / "node_modules/left-pad/index.js").read_text() == "module.exports = 1\n"
    assert (lane / "node_modules/left-pad/run.sh").stat().st_mode & 0o777 == 0o755
    assert not (lane / "build").exists()  # ignored, but not named
    assert not (lane / "untracked.env").exists()
    inc = res["included"]
    assert inc["files"] == 3 and inc["bytes"] > 0 and inc["skipped"] == []  # type: ignore[index]
    assert isinstance(inc["reflinked"], int)  # type: ignore[index]
    # the copies are ignored in the lane too: it is clean
    st = repo.jlane("status", "alpha").json["lanes"][0]
    assert st["dirty"] is False and st["setup"] is None and st["state"] == "active"


def test_release_asks_only_for_ignored_files_that_differ_from_the_hub(repo: Repo) -> None:
    """What .worktreeinclude copied and nobody changed is not work: release goes on. An
    ignored file the lane changed or made is work: release asks for the confirmation."""
    ignored_hub(repo)
    create(repo, "alpha")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (0, "released"), r.stdout
    lane = Path(str(create(repo, "beta")["lane"]["path"]))  # type: ignore[index]
    (lane / "node_modules/left-pad/index.js").write_text("module.exports = 2\n")
    (lane / "build").mkdir()
    (lane / "build/new.o").write_text("made in the lane\n")
    r = repo.jlane("release", "beta")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    # each file once, by its own name (what setup copied and nobody touched is left out)
    assert sorted(r.json["details"]["ignored_paths"]) == [
        "build/new.o",
        "node_modules/left-pad/index.js",
    ]
    assert (lane / "build/new.o").is_file()
    (lane / "node_modules/left-pad/index.js").write_text("module.exports = 1\n")
    os.symlink("/etc/passwd", lane / "node_modules/left-pad/link")  # a link the hub lacks
    r = repo.jlane("release", "beta")
    assert r.json["details"]["ignored_paths"] == ["build/new.o", "node_modules/left-pad/link"]


def test_tracked_files_are_never_copied_over(repo: Repo) -> None:
    track(repo, {".gitignore": "node_modules/\n", ".worktreeinclude": "*.txt\nnode_modules/\n"})
    track(repo, {"notes.txt": "committed\n"})
    (repo.path / "notes.txt").write_text("hub edit, uncommitted\n")  # tracked: not copied
    res = create(repo, "alpha")
    lane = Path(str(res["lane"]["path"]))  # type: ignore[index]
    assert (lane / "notes.txt").read_text() == "committed\n"
    assert res["included"]["files"] == 0  # type: ignore[index]


def test_patterns_come_from_main_not_from_a_lane_or_the_hub(repo: Repo) -> None:
    ignored_hub(repo)
    a = Path(str(create(repo, "alpha")["lane"]["path"]))  # type: ignore[index]
    # a lane's uncommitted (or committed, unlanded) .worktreeinclude names build/ too
    (a / ".worktreeinclude").write_text(INCLUDE + "build/\n")
    repo.git("-C", str(a), "commit", "-qam", "include build")
    # and so does the hub's working copy
    (repo.path / ".worktreeinclude").write_text(INCLUDE + "build/\n")
    b = Path(str(create(repo, "beta")["lane"]["path"]))  # type: ignore[index]
    assert (b / ".env").exists() and not (b / "build").exists()


def test_symlinks_are_copied_as_links_never_followed(repo: Repo, tmp_path: Path) -> None:
    ignored_hub(repo)
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "secret.txt").write_text("outside the hub\n")
    (repo.path / "node_modules" / "escape").symlink_to(outside)
    (repo.path / "node_modules" / "pw").symlink_to(outside / "deep" / "secret.txt")
    res = create(repo, "alpha")
    lane = Path(str(res["lane"]["path"]))  # type: ignore[index]
    for name, target in (("escape", outside), ("pw", outside / "deep" / "secret.txt")):
        p = lane / "node_modules" / name
        assert p.is_symlink() and os.readlink(p) == str(target)
    assert not any(p.name == "secret.txt" and not p.is_symlink() for p in lane.rglob("*"))


def test_a_lane_symlink_never_lets_a_copy_write_outside(repo: Repo, tmp_path: Path) -> None:
    """A tracked symlink `node_modules -> elsewhere` in main's tree: the copy must not
    write the hub's node_modules files through it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    track(repo, {".gitignore": "node_modules/\n", ".worktreeinclude": "node_modules/\n"})
    a = Path(str(create(repo, "alpha")["lane"]["path"]))  # type: ignore[index]
    (repo.path / "node_modules" / "x").mkdir(parents=True)
    (repo.path / "node_modules" / "x" / "i.js").write_text("1\n")
    # the lane has a symlink at node_modules (as a checkout of a tracked link would)
    (a / "node_modules").symlink_to(elsewhere)
    r = repo.jlane("setup", "alpha")
    assert r.rc == 0, r.stderr
    assert list(elsewhere.iterdir()) == []
    assert r.json["included"]["files"] == 0 and r.json["included"]["skipped"]


# CMD (sandboxed, still running while the owner sets the lane up again) waits for the
# copy to make `cfg/` in the lane, then puts a link to a directory of the owner's there
SWAP_DIR = r"""
touch "$1"
i=0
while [ $i -lt 2000000 ]; do
    if [ -d cfg ] && [ ! -L cfg ]; then
        mv cfg cfg.moved && ln -s "$2" cfg && echo swapped && exit 0
    fi
    i=$((i+1))
done
echo never-swapped
"""


@NEEDS_LANDLOCK
def test_setup_never_copies_or_chmods_through_a_link_a_running_cmd_swapped_in(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH (a write outside the lane: the hub's ignored files written into, and the mode
    of, a directory of the owner's the lane chose; red team 13J). include.copy checked the
    lane's directories once (lstat, os.mkdir by path), then wrote each file by its full
    path (O_NOFOLLOW covers only the last component) and at the end chmodded every
    directory it made by path (os.chmod follows links). A sandboxed CMD still
    running in the lane swaps the `cfg/` the copy just made for a symlink to the owner's
    private directory: the files after the swap are created there, and the directory
    gets the hub's mode | 0o700. Nothing stops `git lane setup` while an exec runs. Now
    every write goes through directory fds (include._LaneDirs): a swapped name fails the
    walk, a renamed directory takes the files with it, in the lane."""
    track_files = {".gitignore": "cfg/\n", ".worktreeinclude": "cfg/\n"}
    mover = hub.create("mover")
    for name, text in track_files.items():
        hub.commit(mover, name, text)
    assert hub.lane("land", "mover").rc == 0
    lp = hub.create("alpha")
    cfg = hub.path / "cfg"
    cfg.mkdir()
    os.chmod(cfg, 0o755)
    for n in range(3000):
        (cfg / f"f{n:04d}.env").write_text(f"SECRET_{n}=1\n")
    victim = tmp_path / "owner-private"
    victim.mkdir()
    os.chmod(victim, 0o700)
    script = tmp_path / "swap.sh"
    script.write_text(SWAP_DIR)
    ready = lp / ".cmd-ready"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "guard",
            "exec",
            "--sandbox",
            "alpha",
            "--",
            "sh",
            str(script),
            str(ready),
            str(victim),
        ],
        cwd=hub.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "CMD never started"
        st = hub.jlane("setup", "alpha")
    finally:
        out, err = proc.communicate(timeout=120)
    assert "swapped" in out, (out, err[-300:])  # the race was run, not missed
    written = sorted(p.name for p in victim.iterdir())
    mode = victim.stat().st_mode & 0o777
    assert not written and mode == 0o700, (
        f"setup wrote {len(written)} file(s) into {victim} and left it {oct(mode)} "
        f"(CMD: {out.strip()} {err.strip()[-300:]}; setup: {st.stdout[-500:]})"
    )


def test_a_lane_directory_renamed_or_linked_mid_copy_never_leads_outside(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race above made certain, in process: right after the first file of `cfg/` is
    copied, `cfg` is renamed and a link to a private directory put in its place. The rest
    of cfg/ goes where the directory went (its fd), in the lane; the private directory
    gets no file and keeps its mode; a directory met as a link is skipped."""
    from guard import include

    hub = repo.path
    (hub / "cfg" / "sub").mkdir(parents=True)
    os.chmod(hub / "cfg", 0o755)
    for n in range(5):
        (hub / "cfg" / f"f{n}.env").write_text(f"S{n}\n")
        (hub / "cfg" / "sub" / f"g{n}.env").write_text(f"T{n}\n")
    (hub / ".gitignore").write_text("cfg/\n")
    lane = tmp_path / "lane"
    lane.mkdir()
    victim = tmp_path / "owner-private"
    victim.mkdir()
    os.chmod(victim, 0o700)
    real = include._clone_or_copy
    swapped: list[bool] = []

    def swap_then_copy(sfd: int, dfd: int) -> bool:
        if not swapped:
            swapped.append(True)
            os.rename(lane / "cfg", lane / "cfg.moved")
            os.symlink(victim, lane / "cfg")
        return real(sfd, dfd)

    monkeypatch.setattr(include, "_clone_or_copy", swap_then_copy)
    got = include.copy(str(hub), str(lane), b"cfg/\n")
    assert list(victim.iterdir()) == [] and victim.stat().st_mode & 0o777 == 0o700
    moved = sorted(str(p.relative_to(lane / "cfg.moved")) for p in (lane / "cfg.moved").rglob("*"))
    assert moved == sorted(
        [*(f"f{n}.env" for n in range(5)), "sub", *(f"sub/g{n}.env" for n in range(5))]
    ), moved
    assert (lane / "cfg.moved").stat().st_mode & 0o777 == 0o755
    assert got["files"] == 10 and not got["skipped"], got
    # a second copy meets the link at cfg/: it skips, never follows it
    again = include.copy(str(hub), str(lane), b"cfg/\n")
    assert again["files"] == 0 and again["skipped"] and list(victim.iterdir()) == []


def test_existing_files_in_the_lane_are_never_overwritten(repo: Repo) -> None:
    ignored_hub(repo)
    a = Path(str(create(repo, "alpha")["lane"]["path"]))  # type: ignore[index]
    (a / ".env").write_text("LANE=mine\n")
    (a / "node_modules/left-pad/index.js").unlink()
    (repo.path / ".env").write_text("SECRET=2\n")
    r = repo.jlane("setup", "alpha")
    assert r.rc == 0, r.stderr
    assert (a / ".env").read_text() == "LANE=mine\n"
    assert (a / "node_modules/left-pad/index.js").exists()  # the missing one came back
    assert (r.json["included"]["files"], r.json["included"]["kept"]) == (1, 2)


# -- setup_command ------------------------------------------------------------------------
def test_setup_command_runs_in_the_lane_with_its_key_and_port(repo: Repo) -> None:
    ignored_hub(repo)
    repo.config(
        "setup_command",
        json.dumps(
            'test -f .env && echo "$GITLANE_LANE $GITLANE_PORT" > setup.out && echo streamed'
        ),
    )
    r = repo.lane("create", "alpha")
    assert r.rc == 0, r.stderr
    assert "streamed" in r.stderr  # its output goes to stderr
    res = repo.jlane("status", "alpha").json["lanes"][0]
    assert res["setup"] == "ok" and res["state"] == "active"
    assert (Path(res["path"]) / "setup.out").read_text().split() == ["alpha", str(res["port"])]


def test_setup_failure_leaves_the_lane_and_setup_reruns_it(repo: Repo, tmp_path: Path) -> None:
    flag = tmp_path / "ready"
    repo.config("setup_command", json.dumps(f"echo trying; test -f '{flag}'"))
    r = repo.jlane("create", "alpha")
    assert (r.rc, r.code) == (1, "setup_failed"), r.stdout
    assert r.json["next"] == ["git lane setup alpha"]
    assert r.json["details"]["view"]["setup"] == "failed"
    assert "trying" in r.json["details"]["setup"]["tail"]
    assert "refs/heads/lane/alpha" in repo.worktrees()
    st = repo.jlane("status").json["lanes"][0]
    assert (st["key"], st["state"], st["setup"]) == ("alpha", "active", "failed")
    assert "git lane setup alpha" in st["advice"]
    flag.write_text("")
    r = repo.jlane(*r.json["next"][0].split()[2:])
    assert (r.rc, r.code) == (0, "ok"), r.stdout
    assert r.json["lane"]["setup"] == "ok" and r.json["setup"]["status"] == "ok"
    assert repo.jlane("status", "alpha").json["lanes"][0]["setup"] == "ok"


def test_setup_timeout_kills_the_group(repo: Repo, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    repo.config("setup_command", json.dumps(f"sleep 300 & echo $! > '{pidfile}'; wait"))
    repo.config("setup_timeout", "1")
    t0 = time.monotonic()
    r = repo.jlane("create", "alpha")
    assert (r.rc, r.code) == (1, "setup_failed"), r.stdout
    assert time.monotonic() - t0 < 30
    assert r.json["details"]["setup"]["status"] == "timeout"
    assert r.json["next"] == ["git lane setup alpha"]
    assert not pid_alive(int(pidfile.read_text()))
    assert repo.jlane("status", "alpha").json["lanes"][0]["setup"] == "timeout"
    repo.config("setup_command", "true")
    assert repo.jlane("setup", "alpha").rc == 0


def test_interrupted_setup_kills_the_group_and_reads_as_failed(repo: Repo, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    repo.config("setup_command", json.dumps(f"sleep 300 & echo $! > '{pidfile}'; wait"))
    proc = spawn_lane("create", "alpha", "--json", cwd=repo.path)
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="setup started")
    st = repo.jlane("status", "alpha").json["lanes"][0]
    assert st["setup"] == "running"
    proc.send_signal(signal.SIGTERM)  # as Ctrl-C: the setup's group is killed on the way out
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert not pid_alive(int(pidfile.read_text()))
    st = repo.jlane("status", "alpha").json["lanes"][0]
    assert (st["state"], st["setup"]) == ("active", "failed")


def test_a_setup_whose_create_was_killed_reads_as_failed(repo: Repo, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    repo.config("setup_command", json.dumps(f"sleep 300 & echo $! > '{pidfile}'; wait"))
    proc = spawn_lane("create", "alpha", "--json", cwd=repo.path)
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="setup started")
    proc.kill()  # SIGKILL: nothing of create runs to record the outcome
    proc.communicate(timeout=30)
    try:
        st = repo.jlane("status", "alpha").json["lanes"][0]
        assert (st["state"], st["setup"]) == ("active", "failed")
        assert "git lane setup alpha" in st["advice"]
    finally:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the setup's own session lives on


def test_setup_resolves_the_lane_from_env_and_cwd(repo: Repo) -> None:
    a = Path(str(create(repo, "alpha")["lane"]["path"]))  # type: ignore[index]
    create(repo, "beta")
    repo.config("setup_command", json.dumps('echo "$GITLANE_LANE" > who'))
    assert repo.jlane("setup", cwd=a).json["lane"]["key"] == "alpha"
    assert (a / "who").read_text() == "alpha\n"
    r = repo.jlane("setup", env={"GITLANE_LANE": "beta"})
    assert r.json["lane"]["key"] == "beta"
    assert repo.jlane("setup", "alpha", env={"GITLANE_LANE": "beta"}).code == "role_forbidden"
    assert repo.jlane("setup").code == "unknown_lane"  # the hub is no lane


def test_port_is_stable_and_distinct(repo: Repo) -> None:
    a = create(repo, "alpha")["lane"]["port"]  # type: ignore[index]
    b = create(repo, "beta")["lane"]["port"]  # type: ignore[index]
    assert isinstance(a, int) and isinstance(b, int) and a != b
    assert a % 10 == 0 and 20000 <= a < 40000
    ports = {ln["key"]: ln["port"] for ln in repo.jlane("status").json["lanes"]}
    assert ports == {"alpha": a, "beta": b}
    from guard.policy import lane_port

    assert lane_port("alpha") == a  # the same everywhere: a function of the key only


# -- .git-lane.toml -----------------------------------------------------------------------
def test_project_gate_command_from_main_is_used_by_land(repo: Repo) -> None:
    track(repo, {".git-lane.toml": 'gate_command = "test -f ok.txt"\n'})
    r = repo.jlane("config", "get", "gate_command")
    assert (r.json["value"], r.json["source"]) == ("test -f ok.txt", "project")
    a = Path(str(create(repo, "alpha")["lane"]["path"]))  # type: ignore[index]
    # the lane edits .git-lane.toml to a gate that always passes: ignored until landed
    (a / ".git-lane.toml").write_text('gate_command = "true"\n')
    repo.git("-C", str(a), "commit", "-qam", "weaker gate")
    assert repo.jlane("config", "get", "gate_command", cwd=a).json["value"] == "test -f ok.txt"
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (1, "gate_failed"), r.stdout
    repo.commit(a, "ok.txt", "1\n")
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout
    assert r.json["gate"]["command"] == "test -f ok.txt"
    # landed: now main's tree says `true`
    assert repo.jlane("config", "get", "gate_command").json["value"] == "true"


def test_project_file_cannot_weaken_protection(repo: Repo) -> None:
    track(
        repo,
        {
            ".git-lane.toml": 'enabled = false\ngate = "off"\nworker_land = "allow"\n'
            'max_lanes = 1\nsetup_timeout = "soon"\ngate_timeout = 7\nauto_sync = true\n'
        },
    )
    r = repo.jlane("config", "list")
    assert r.rc == 0, r.stderr
    cfg = r.json["config"]
    for key, value in (
        ("enabled", True),
        ("gate", "on"),
        ("worker_land", "deny"),
        ("max_lanes", 5),
        ("auto_sync", False),
    ):
        assert (cfg[key]["value"], cfg[key]["source"]) == (value, "default"), key
    assert (cfg["setup_timeout"]["value"], cfg["setup_timeout"]["source"]) == (900, "default")
    assert (cfg["gate_timeout"]["value"], cfg["gate_timeout"]["source"]) == (7, "project")
    warned = " ".join(r.json["warnings"])
    for key in ("enabled", "gate", "worker_land", "max_lanes", "setup_timeout", "auto_sync"):
        assert key in warned, key
    st = repo.lane("status")
    assert st.rc == 0 and "enabled" in st.stderr and "git-lane: warning:" in st.stderr
    assert "disabled" not in {a["code"] for a in repo.jlane("status").json["alerts"]}
    assert create(repo, "alpha")["warnings"]  # type: ignore[index]
    assert repo.jlane("create", "beta").rc == 0  # max_lanes = 1 was ignored


def test_owner_files_win_over_the_project_file(repo: Repo) -> None:
    track(repo, {".git-lane.toml": 'gate_command = "make test"\nsetup_timeout = 60\n'})
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "git-lane" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("setup_timeout = 30\n")
    repo.config("gate_command", "pytest -q")
    cfg = repo.jlane("config", "list").json["config"]
    assert (cfg["gate_command"]["value"], cfg["gate_command"]["source"]) == ("pytest -q", "repo")
    assert (cfg["setup_timeout"]["value"], cfg["setup_timeout"]["source"]) == (30, "user")
    assert repo.jlane("config", "get", "setup_timeout").json["file"] == str(user)


def test_broken_project_file_is_a_warning(repo: Repo) -> None:
    track(repo, {".git-lane.toml": "gate_command = = 1\n"})
    for cmd in (("status",), ("config", "list"), ("create", "alpha")):
        r = repo.jlane(*cmd)
        assert r.rc == 0, (cmd, r.stdout)
        assert any(".git-lane.toml" in w for w in r.json["warnings"]), cmd


# a file 12 KB long: tomllib recurses once per level and raises RecursionError (not
# TOMLDecodeError) past ~500; dotted keys parse, but nest a dict 3,000 levels deep
DEEP_PROJECT_FILES = {
    "arrays": "x = " + "[" * 3000 + "]" * 3000 + "\n",
    "dotted key of a project key": "gate_command" + ".x" * 3000 + " = 1\n",
}


@pytest.mark.parametrize("text", DEEP_PROJECT_FILES.values(), ids=DEEP_PROJECT_FILES.keys())
def test_a_landed_project_file_nested_deep_never_takes_every_command_down(
    repo: Repo, text: str
) -> None:
    """with_project's promise (a project file any committer can change only ever adds
    warnings) holds for a file nested deeper than the parser goes: landed once, it was
    `internal error (RecursionError)`, exit 3, for every command that reads the config,
    the next land (the fix) among them (red team 13G)."""
    repo.config("gate", "off")
    a = Path(str(create(repo, "alpha")["lane"]["path"]))  # type: ignore[index]
    repo.commit(a, ".git-lane.toml", text)
    r = repo.jlane("land", "alpha")
    assert r.code == "landed", r.stdout + r.stderr
    for cmd in (("status",), ("doctor",), ("config", "list"), ("create", "gamma")):
        r = repo.jlane(*cmd)
        assert r.rc in (0, 1) and "internal error" not in r.stderr, (cmd, r.stderr[-300:])
        if cmd != ("doctor",):  # doctor lists checks (here: hooks not installed, a fail)
            warned = [w for w in r.json["warnings"] if ".git-lane.toml" in w]
            assert warned and "nested" in warned[0], (cmd, r.stdout[-500:])
    b = Path(str(create(repo, "beta")["lane"]["path"]))  # type: ignore[index]
    repo.commit(b, ".git-lane.toml", 'gate_command = "true"\n')  # the fix, landed
    r = repo.jlane("land", "beta")
    assert r.code == "landed", r.stdout + r.stderr
    assert repo.jlane("config", "get", "gate_command").json["value"] == "true"
