"""`git lane exec` and `git lane shellenv` through the real CLI, with real processes: the
binding environment CMD sees (every guard/binding.py name, PATH with our shims first
exactly once, the real git probed), where CMD runs, its exit status passed through, the
lane's owner recorded while it runs and given back after, signals passed on (and a tty's
Ctrl-C not doubled), the refusals, `-c`, and shellenv eval'd in sh binding the same."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, Repo, lane
from enginehelp import lane_status, pid_alive, spawn_lane, wait_for

from guard import binding, policy

SHIMS = os.path.realpath(ROOT / "shims")
DUMP = "import json, os; print(json.dumps(dict(os.environ)))"
ENV_FILE = "import json, os, sys; open(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))"


def real_git() -> str:
    found = shutil.which("git")
    assert found is not None
    return os.path.realpath(found)


def exec_env(repo: Repo, key: str, env: dict[str, str] | None = None) -> dict[str, str]:
    r = repo.lane("exec", key, "--", sys.executable, "-c", DUMP, env=env)
    assert r.rc == 0, r.stderr
    return dict(json.loads(r.stdout))


def test_cmd_sees_every_binding_name(repo: Repo) -> None:
    path = repo.create("alpha")
    env = exec_env(repo, "alpha", {"GIT_DIR": str(repo.path / ".git"), "GITLANE_INTERNAL": "1"})
    assert set(binding.NAMES) <= set(env)
    assert env[binding.LANE] == "alpha"
    assert env[binding.ROLE] == "worker"
    assert env[binding.REAL_GIT] == real_git()
    assert env[binding.SHIMS_DIR] == SHIMS
    assert env[binding.LANE_PATH] == os.path.realpath(path)
    assert env[binding.COMMON] == os.path.realpath(repo.common_dir)
    assert env[binding.PYTHON] == sys.executable
    assert env[binding.PYPATH] == str(ROOT)
    assert (Path(env[binding.PYPATH]) / "guard" / "binding.py").is_file()
    assert env[binding.HOME_AT_EXEC] == os.environ["HOME"]
    assert env[binding.XDG_AT_EXEC] == os.environ["XDG_CONFIG_HOME"]
    assert env[binding.PORT] == str(policy.lane_port("alpha"))
    parts = env["PATH"].split(os.pathsep)
    assert parts[0] == SHIMS and parts.count(SHIMS) == 1
    assert parts[1:] == os.environ["PATH"].split(os.pathsep)
    # git's pointers at another repository and our internal marker are not inherited
    assert "GIT_DIR" not in env and "GITLANE_INTERNAL" not in env


def test_unset_home_is_recorded_empty(repo: Repo) -> None:
    repo.create("alpha")
    full = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_HOME"}
    res = subprocess.run(
        [sys.executable, "-m", "guard", "exec", "alpha", "--", sys.executable, "-c", DUMP],
        cwd=repo.path,
        env=full,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)[binding.XDG_AT_EXEC] == ""


def test_path_holds_the_shims_once_however_often_they_were_on_it(
    repo: Repo, tmp_path: Path
) -> None:
    repo.create("alpha")
    link = tmp_path / "shims-link"
    link.symlink_to(SHIMS)
    outer = tmp_path / "outer-shims"  # an outer binding's shims dir (another install)
    outer.mkdir()
    path = os.pathsep.join([SHIMS, str(link), os.environ["PATH"], SHIMS, str(outer)])
    env = exec_env(repo, "alpha", {"PATH": path, binding.SHIMS_DIR: str(outer)})
    parts = env["PATH"].split(os.pathsep)
    assert parts[0] == SHIMS
    assert [os.path.realpath(p) for p in parts].count(SHIMS) == 1
    assert str(outer) not in parts
    assert parts[1:] == os.environ["PATH"].split(os.pathsep)
    assert env[binding.REAL_GIT] == real_git()


def test_path_loses_git_exec_path_and_dashed_git_commands(repo: Repo, tmp_path: Path) -> None:
    """git puts its exec path first on PATH when it runs `git lane`: git-stash and
    git-update-ref from there would run without the shim, so exec drops it (and any
    directory of dashed git commands)."""
    repo.create("alpha")
    core = subprocess.run(
        [real_git(), "--exec-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    copy = tmp_path / "core-copy"
    copy.mkdir()
    (copy / "git-update-ref").write_text("#!/bin/sh\nexit 0\n")
    path = os.pathsep.join([core, str(copy), os.environ["PATH"]])
    env = exec_env(repo, "alpha", {"PATH": path})
    parts = [os.path.realpath(p) for p in env["PATH"].split(os.pathsep)]
    assert os.path.realpath(core) not in parts and str(copy) not in parts
    assert parts[0] == SHIMS
    # through git itself, as `git lane exec` runs: no git-stash on the bound PATH
    bindir = tmp_path / "bin"  # a git-lane on PATH running this worktree's code
    bindir.mkdir()
    (bindir / "git-lane").write_text(
        f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m guard "$@"\n'
    )
    (bindir / "git-lane").chmod(0o755)
    # and no GIT_EXEC_PATH, which git sets to its own for `git lane` and which would send
    # every bound git call to the shim's Python (~80 ms each) instead of its sh pass
    probe = 'command -v git-stash git-update-ref || echo none; echo "${GIT_EXEC_PATH-unset}"'
    res = subprocess.run(
        [real_git(), "lane", "exec", "alpha", "--", "sh", "-c", probe],
        cwd=repo.path,
        env={**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert res.stdout.split() == ["none", "unset"], (res.stdout, res.stderr)
    # a GIT_EXEC_PATH of the user's own is kept (and judged by the shim)
    r = repo.lane("exec", "alpha", "--", "sh", "-c", probe, env={"GIT_EXEC_PATH": str(tmp_path)})
    assert r.stdout.split() == ["none", str(tmp_path)], (r.stdout, r.stderr)


def test_shellenv_cd_hint_cannot_end_early(tmp_path: Path) -> None:
    """A newline in the lane's path must not end the `# cd` comment: eval would run the
    rest as a command."""
    from guard.commands.exec import script

    env = {"PATH": "/bin", "GITLANE_HOME": "/h\n; touch pwned-home"}
    for cwd in ("/tmp/x\ntouch pwned", "/tmp/x\ntouch pwned\n", "/tmp/x\rtouch pwned"):
        for shell in ("sh", "fish"):
            text = script(env, ["GIT_DIR"], cwd, shell)
            comments = [ln for ln in text.splitlines() if ln.startswith("#")]
            assert all("touch" not in ln or ln.startswith("# cd ") for ln in comments)
            assert not any(ln.startswith("touch") for ln in text.splitlines()), text
        out = subprocess.run(
            [
                "sh",
                "-c",
                'cd "$1" && eval "$2" && ls',
                "sh",
                str(tmp_path),
                script(env, [], cwd, "sh"),
            ],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        assert "pwned" not in out.stdout


def _wrapper(d: Path, body: str) -> Path:
    d.mkdir()
    w = d / "git"
    w.write_text("#!/bin/sh\n" + body)
    w.chmod(0o755)
    return w


def test_real_git_skips_shims_and_wrappers_that_go_back_through_path(
    repo: Repo, tmp_path: Path
) -> None:
    repo.create("alpha")
    # a wrapper before the real git that runs `git` through PATH (after dropping its own
    # directory): under the shims, that `git` would be our shim, which would call it again
    loop = _wrapper(tmp_path / "loop", f'PATH="${{PATH#{tmp_path / "loop"}:}}" exec git "$@"\n')
    # an outer binding's shims dir, reached through a symlink from elsewhere on PATH
    outer = _wrapper(tmp_path / "outer", f'exec {real_git()} "$@"\n')
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "git").symlink_to(outer)
    # a copy of a shim of another installation (it names the binding)
    copy = _wrapper(tmp_path / "copy", f'exec "${{{binding.REAL_GIT}:-{real_git()}}}" "$@"\n')
    path = os.pathsep.join(
        [str(loop.parent), str(tmp_path / "linked"), str(copy.parent), os.environ["PATH"]]
    )
    env = exec_env(repo, "alpha", {"PATH": path, binding.SHIMS_DIR: str(outer.parent)})
    assert env[binding.REAL_GIT] == real_git()
    # a wrapper that runs the real git by its absolute path is a git of its own: kept
    direct = _wrapper(tmp_path / "direct", f'exec {real_git()} "$@"\n')
    env = exec_env(repo, "alpha", {"PATH": f"{direct.parent}{os.pathsep}{os.environ['PATH']}"})
    assert env[binding.REAL_GIT] == str(direct)


def test_no_real_git_on_path_is_refused(repo: Repo, tmp_path: Path) -> None:
    repo.create("alpha")
    loop = _wrapper(tmp_path / "loop", f'PATH="${{PATH#{tmp_path / "loop"}:}}" exec git "$@"\n')
    # the engine's own git (recorded by an outer binding) looks like a shim: not recorded
    shimlike = _wrapper(tmp_path / "shimlike", f'# {binding.REAL_GIT}\nexec {real_git()} "$@"\n')
    env = {
        "PATH": f"{loop.parent}{os.pathsep}{tmp_path / 'nothing'}",
        binding.REAL_GIT: str(shimlike),
    }
    marker = repo.path / "ran"
    r = repo.lane("--json", "exec", "alpha", "--", "/bin/sh", "-c", f"touch '{marker}'", env=env)
    assert (r.rc, r.code) == (1, "real_git_unknown"), r.stderr
    assert not marker.exists()
    assert lane_status(repo, "alpha")["owner_pid"] is None


def test_cmd_runs_in_the_lane_keeping_the_callers_subdirectory(repo: Repo) -> None:
    path = repo.create("alpha")
    pwd = [sys.executable, "-c", "import os; print(os.getcwd()); print(os.environ['PWD'])"]
    r = repo.lane("exec", "alpha", "--", *pwd)
    assert r.stdout.split() == [os.path.realpath(path)] * 2, r.stderr
    (path / "sub dir").mkdir()
    r = lane("exec", "alpha", "--", *pwd, cwd=path / "sub dir")
    assert r.stdout.split("\n")[:2] == [os.path.realpath(path / "sub dir")] * 2, r.stderr
    (repo.path / "hubdir").mkdir()
    r = lane("exec", "alpha", "--", *pwd, cwd=repo.path / "hubdir")
    assert r.stdout.split() == [os.path.realpath(path)] * 2


def test_argv_is_not_run_through_a_shell(repo: Repo) -> None:
    repo.create("alpha")
    r = repo.lane("exec", "alpha", "--", "printf", "%s|", "$HOME", "a b", "*", "--json")
    assert (r.rc, r.stdout) == (0, "$HOME|a b|*|--json|")


@pytest.mark.parametrize(
    ("script", "status"),
    [("exit 0", 0), ("exit 3", 3), ("kill -KILL $$", 128 + 9), ("kill -TERM $$", 128 + 15)],
)
def test_exit_status_is_cmds(repo: Repo, script: str, status: int) -> None:
    repo.create("alpha")
    r = repo.lane("exec", "alpha", "--", "sh", "-c", script)
    assert r.rc == status, r.stderr
    assert "Traceback" not in r.stderr


def test_command_not_found_is_127_with_a_shells_message(repo: Repo) -> None:
    repo.create("alpha")
    r = repo.lane("exec", "alpha", "--", "no-such-command-xyz", "arg")
    assert r.rc == 127
    assert "no-such-command-xyz: command not found" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    notexec = repo.path / "notexec"
    notexec.write_text("echo hi\n")
    r = repo.lane("exec", "alpha", "--", str(notexec))
    assert r.rc == 126 and "Traceback" not in r.stderr
    assert lane_status(repo, "alpha")["owner_pid"] is None


def _waiting_cmd(go: Path, ready: Path, on_term: int | None = None) -> list[str]:
    """A CMD that says it started (ready), then waits for `go`; with on_term, SIGTERM
    makes it write `term` and exit with that status."""
    code = (
        "import os, signal, sys, time\n"
        f"go, ready = {str(go)!r}, {str(ready)!r}\n"
        + (
            f"signal.signal(signal.SIGTERM, lambda *a: (open(go + '.term', 'w').close(), "
            f"os._exit({on_term})))\n"
            if on_term is not None
            else ""
        )
        + "open(ready + '.tmp', 'w').write(str(os.getpid()))\n"
        "os.replace(ready + '.tmp', ready)\n"
        "deadline = time.time() + 60\n"
        "while not os.path.exists(go) and time.time() < deadline:\n"
        "    time.sleep(0.02)\n"
    )
    return [sys.executable, "-c", code]


def test_owner_is_recorded_while_cmd_runs_and_cleared_after(repo: Repo, tmp_path: Path) -> None:
    repo.create("alpha")
    go, ready = tmp_path / "go", tmp_path / "ready"
    proc = spawn_lane("exec", "alpha", "--", *_waiting_cmd(go, ready), cwd=repo.path)
    try:
        wait_for(ready.exists, what="CMD to start")
        st = lane_status(repo, "alpha")
        assert (st["owner_pid"], st["owner_alive"]) == (proc.pid, True)
        # CMD is the exec's child, not the exec itself
        assert int(ready.read_text()) != proc.pid
        # a second supervisor is refused, and so is a shell bound beside it
        r = repo.lane("--json", "exec", "alpha", "--", "true")
        assert (r.rc, r.code) == (1, "lane_owner_conflict")
        assert r.json["details"]["owner_pid"] == proc.pid
        assert r.json["next"][0] == "git lane status alpha"
        r = repo.jlane("shellenv", "alpha")
        assert (r.rc, r.code) == (1, "lane_owner_conflict")
    finally:
        go.touch()
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    st = lane_status(repo, "alpha")
    assert (st["owner_pid"], st["owner_alive"]) == (None, False)
    kinds = [
        json.loads(ln)["kind"]
        for ln in (repo.state_dir / "events.jsonl").read_text().splitlines()
        if json.loads(ln).get("lane") == "alpha"
    ]
    assert "exec" in kinds and kinds[-1] == "exec_end"


def test_cmd_may_act_as_the_lanes_owner(repo: Repo) -> None:
    """What exec starts is the owner's process: land/release checks pass for it."""
    path = repo.create("alpha")
    repo.commit(path, "a.txt", "a\n")
    repo.config("gate", "off")
    repo.config("worker_land", "allow")
    r = repo.lane("exec", "alpha", "--", sys.executable, "-m", "guard", "land", "alpha")
    assert r.rc == 0, r.stderr
    assert repo.sha() == repo.sha("refs/heads/lane/alpha")


def test_a_dead_owner_is_taken_over_and_a_live_ancestor_given_back(repo: Repo) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        r = repo.jlane("create", "alpha", "--owner-pid", str(sleeper.pid))
        assert r.rc == 0, r.stderr
        r = repo.lane("--json", "exec", "alpha", "--", "true")
        assert (r.rc, r.code) == (1, "lane_owner_conflict")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert repo.lane("exec", "alpha", "--", "true").rc == 0
    assert lane_status(repo, "alpha")["owner_pid"] is None
    # an owner that started the exec (here: this test process) stays the owner after
    r = repo.jlane("create", "beta", "--owner-pid", str(os.getpid()))
    assert r.rc == 0, r.stderr
    seen = repo.lane(
        "exec", "beta", "--", sys.executable, "-m", "guard", "--json", "status", "beta"
    )
    assert seen.rc == 0, seen.stderr
    during = json.loads(seen.stdout)["lanes"][0]
    assert during["owner_pid"] not in (None, os.getpid()) and during["owner_alive"]
    st = lane_status(repo, "beta")
    assert (st["owner_pid"], st["owner_alive"]) == (os.getpid(), True)


def test_sigterm_to_exec_is_forwarded_and_cmds_status_returned(repo: Repo, tmp_path: Path) -> None:
    repo.create("alpha")
    go, ready = tmp_path / "go", tmp_path / "ready"
    proc = spawn_lane("exec", "alpha", "--", *_waiting_cmd(go, ready, on_term=42), cwd=repo.path)
    wait_for(ready.exists, what="CMD to start")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 42
    assert Path(str(go) + ".term").exists()
    assert lane_status(repo, "alpha")["owner_pid"] is None
    # CMD that does not catch it dies of it: 128 + 15, as a shell reports; exec survives
    go2, ready2 = tmp_path / "go2", tmp_path / "ready2"
    proc = spawn_lane("exec", "alpha", "--", *_waiting_cmd(go2, ready2), cwd=repo.path)
    wait_for(ready2.exists, what="CMD to start")
    child = int(ready2.read_text())
    proc.send_signal(signal.SIGUSR1)  # forwarded too: kills a CMD with no handler
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGUSR1, err
    assert not pid_alive(child)
    assert lane_status(repo, "alpha")["owner_pid"] is None


def test_without_sigwaitinfo_signals_are_still_passed_on(repo: Repo, tmp_path: Path) -> None:
    """Where the OS has no sigwaitinfo (macOS), handlers pass signals on instead."""
    repo.create("alpha")
    go, ready = tmp_path / "go", tmp_path / "ready"
    boot = "import signal, sys; del signal.sigwaitinfo; from guard.cli import main; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", boot, "exec", "alpha", "--", *_waiting_cmd(go, ready, on_term=42)],
        cwd=repo.path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(ready.exists, what="CMD to start")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 42, err
    assert lane_status(repo, "alpha")["owner_pid"] is None


def test_a_killed_exec_takes_its_cmd_with_it(repo: Repo, tmp_path: Path) -> None:
    """SIGKILL cannot be passed on: CMD gets SIGTERM from the kernel instead, so no CMD
    writes on in a lane whose recorded owner is dead (the next exec takes it over)."""
    repo.create("alpha")
    go, ready = tmp_path / "go", tmp_path / "ready"
    proc = spawn_lane("exec", "alpha", "--", *_waiting_cmd(go, ready), cwd=repo.path)
    wait_for(ready.exists, what="CMD to start")
    child = int(ready.read_text())
    proc.kill()
    proc.communicate(timeout=30)
    wait_for(lambda: not pid_alive(child), what="CMD to end with its supervisor")
    assert repo.lane("exec", "alpha", "--", "true").rc == 0


def test_unknown_released_orphaned_and_invalid_lanes_are_refused(repo: Repo) -> None:
    r = repo.lane("--json", "exec", "nope", "--", "true")
    assert (r.rc, r.code) == (1, "unknown_lane")
    assert "git lane exec -c nope -- true" in r.json["alternatives"]
    r = repo.lane("--json", "exec", "Bad_Key", "--", "true")
    assert (r.rc, r.code) == (1, "invalid_lane_key")
    repo.create("gone")
    assert repo.lane("release", "gone").rc == 0
    r = repo.lane("--json", "exec", "gone", "--", "true")
    assert (r.rc, r.code) == (1, "lane_not_active")
    path = repo.create("lost")
    shutil.rmtree(path)
    r = repo.lane("--json", "exec", "lost", "--", "true")
    assert (r.rc, r.code) == (1, "lane_not_active")
    assert r.json["next"][0] == "git lane repair lost"
    for k in ("gone", "lost"):
        assert repo.jlane("shellenv", k).code == "lane_not_active"
    assert repo.jlane("shellenv", "nope").code == "unknown_lane"


def test_refusal_json_is_one_object_and_cmds_json_flag_is_not_ours(repo: Repo) -> None:
    r = repo.lane("exec", "--json", "nope", "--", "true")
    assert r.rc == 1 and r.json["code"] == "unknown_lane"
    assert len(r.stdout.strip().splitlines()) == 1
    r = repo.lane("exec", "nope", "--", "echo", "--json")
    assert (r.rc, r.stdout) == (1, "")
    assert "[unknown_lane]" in r.stderr


def test_a_worker_execs_only_into_its_own_lane(repo: Repo) -> None:
    repo.create("alpha")
    repo.create("beta")
    worker = {"GITLANE_LANE": "beta"}
    r = repo.lane("--json", "exec", "alpha", "--", "true", env=worker)
    assert (r.rc, r.code) == (1, "role_forbidden")
    assert r.json["next"] == ["git lane exec beta -- true"]
    assert repo.lane("exec", "beta", "--", "true", env=worker).rc == 0
    r = repo.lane("--json", "exec", "-c", "gamma", "--", "true", env=worker)
    assert (r.rc, r.code) == (1, "role_forbidden")
    assert "gamma" not in [ln["key"] for ln in repo.jlane("status").json["lanes"]]


def test_nested_exec_of_the_own_lane_gives_the_outer_owner_back(repo: Repo) -> None:
    repo.create("alpha")
    script = 'set -e; "$0" "$@"; exec "$0" -m guard --json status alpha'
    inner = [sys.executable, "-m", "guard", "exec", "alpha", "--", "true"]
    r = repo.lane("exec", "alpha", "--", "sh", "-c", script, *inner)
    assert r.rc == 0, r.stderr
    st = json.loads(r.stdout)["lanes"][0]
    assert st["owner_alive"] and st["owner_pid"] is not None  # the outer exec, given back
    assert lane_status(repo, "alpha")["owner_pid"] is None


def test_sandbox_refused_without_landlock(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kernel without Landlock (simulated in-process: this one has it): --sandbox and
    `required` are refused before anything runs; best-effort runs with the shims, warned."""
    from guard import sandbox
    from guard.commands import exec as exec_cmd
    from guard.errors import Refusal
    from guard.repo import Repo as GRepo

    repo.create("alpha")
    monkeypatch.chdir(repo.path)
    monkeypatch.setattr(sandbox, "probe", lambda: (0, "no Landlock here"))
    marker = repo.path.parent / "ran"

    def attempt(key: str = "alpha", **kw: Any) -> Refusal:
        with pytest.raises(Refusal) as exc:
            exec_cmd.run(GRepo.discover(repo.path), key, ["touch", str(marker)], **kw)
        return exc.value

    r = attempt(sandbox=True)
    assert r.code == "sandbox_unavailable" and "no Landlock here" in r.message
    assert r.next == [f"git lane exec alpha -- touch {marker}"]
    r = attempt("delta", sandbox=True, create_first=True)
    assert r.code == "sandbox_unavailable"
    assert "delta" not in [ln["key"] for ln in repo.jlane("status").json["lanes"]]
    repo.config("sandbox", "required")
    r = attempt()
    assert r.code == "sandbox_unavailable"
    assert r.next[0].startswith("git lane config set sandbox best-effort")
    assert r.next[1] == f"git lane exec alpha -- touch {marker}"
    assert not marker.exists()
    with pytest.raises(Refusal) as exc:
        exec_cmd.shellenv(GRepo.discover(repo.path), "alpha")
    assert exc.value.code == "sandbox_unavailable"
    repo.config("sandbox", "best-effort")
    warned: list[str] = []
    res = exec_cmd.run(
        GRepo.discover(repo.path), "alpha", ["touch", str(marker)], warn=warned.append
    )
    assert res["exit_status"] == 0 and marker.exists()
    assert len(warned) == 1 and "no Landlock here" in warned[0] and "shims only" in warned[0]


def test_best_effort_does_not_fall_back_when_the_probe_fails(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """best-effort runs with the shims only where Landlock is known to be missing; a probe
    that fails (here: syscall(2) cannot be called) says nothing either way: refused."""
    from guard import sandbox
    from guard.commands import exec as exec_cmd
    from guard.errors import Refusal
    from guard.repo import Repo as GRepo

    repo.create("alpha")
    monkeypatch.chdir(repo.path)

    def broken() -> Any:
        raise OSError("simulated: no libc")

    monkeypatch.setattr(sandbox, "_libc", broken)
    ver, why = sandbox.probe()
    assert ver == 0 and sandbox.undetermined(why)
    repo.config("sandbox", "best-effort")
    marker = repo.path.parent / "ran"
    with pytest.raises(Refusal) as exc:
        exec_cmd.run(GRepo.discover(repo.path), "alpha", ["touch", str(marker)])
    assert exc.value.code == "sandbox_unavailable" and "cannot be told" in exc.value.message
    assert exc.value.next == ["git lane doctor"]
    assert not marker.exists()


def test_create_first(repo: Repo) -> None:
    repo.config("setup_command", "touch made-by-setup")
    r = repo.lane("exec", "-c", "--goal", "fix login", "gamma", "--", sys.executable, "-c", DUMP)
    assert r.rc == 0, r.stderr
    env = json.loads(r.stdout)
    st = lane_status(repo, "gamma")
    assert st["goal"] == "fix login" and st["owner_pid"] is None
    assert env[binding.LANE_PATH] == os.path.realpath(st["path"])
    assert (Path(st["path"]) / "made-by-setup").exists()
    r = repo.lane("--json", "exec", "-c", "gamma", "--", "true")
    assert (r.rc, r.code) == (1, "lane_exists")
    assert r.json["next"] == ["git lane exec gamma -- true"]
    r = repo.lane("exec", "--goal", "x", "gamma", "--", "true")
    assert r.rc == 2


def _sh_env(repo: Repo, *shellenv_args: str) -> dict[str, str]:
    gl = f"{sys.executable} -m guard"
    script = f'eval "$({gl} shellenv {" ".join(shellenv_args)})" && {sys.executable} -c "$0"'
    res = subprocess.run(["sh", "-c", script, DUMP], cwd=repo.path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


def test_shellenv_evald_in_sh_binds_as_exec_does(repo: Repo, tmp_path: Path) -> None:
    path = repo.create("alpha")
    via_exec = exec_env(repo, "alpha")
    via_eval = _sh_env(repo, "alpha")
    for name in (*binding.NAMES, "PATH"):
        assert via_eval[name] == via_exec[name], name
    r = repo.jlane("shellenv", "alpha")
    assert r.json["env"][binding.LANE] == "alpha"
    assert {k: r.json["env"][k] for k in binding.NAMES} == {k: via_exec[k] for k in binding.NAMES}
    text = repo.lane("shellenv", "alpha").stdout
    assert text.rstrip().splitlines()[-1] == f"# cd {path}"
    # evaluated twice (or in a bound shell), PATH still holds the shims once
    twice = subprocess.run(
        ["sh", "-c", f'eval "$({sys.executable} -m guard shellenv alpha)"; '
         f'eval "$({sys.executable} -m guard shellenv alpha)"; echo "$PATH"'],
        cwd=repo.path, capture_output=True, text=True,
    )  # fmt: skip
    parts = twice.stdout.strip().split(os.pathsep)
    assert parts[0] == SHIMS and parts.count(SHIMS) == 1, twice.stderr
    # shellenv records no owner: it cannot supervise the shell
    assert lane_status(repo, "alpha")["owner_pid"] is None


def test_shellenv_quotes_and_resolves_the_cwd_lane(repo: Repo, tmp_path: Path) -> None:
    path = repo.create("alpha")
    odd = tmp_path / 'it\'s "home" $x'
    odd.mkdir()
    env = _sh_env_in(path, {"HOME": str(odd)})
    assert env[binding.HOME_AT_EXEC] == str(odd)
    assert env[binding.LANE] == "alpha"


def _sh_env_in(cwd: Path, extra: dict[str, str]) -> dict[str, Any]:
    full = {**os.environ, **extra}
    script = f'eval "$({sys.executable} -m guard shellenv)" && {sys.executable} -c "$0"'
    res = subprocess.run(
        ["sh", "-c", script, DUMP], cwd=cwd, capture_output=True, text=True, env=full
    )
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_shellenv_for_fish(repo: Repo) -> None:
    repo.create("alpha")
    via_exec = exec_env(repo, "alpha")
    script = f"eval ({sys.executable} -m guard shellenv --shell fish alpha | string collect); {sys.executable} -c $argv[1]"
    res = subprocess.run(
        ["fish", "-c", script, DUMP], cwd=repo.path, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    for name in (*binding.NAMES, "PATH"):
        assert got[name] == via_exec[name], name


@pytest.mark.parametrize("through_git", [False, True])
def test_an_interactive_cmd_reads_the_tty_and_gets_one_ctrl_c(
    repo: Repo, tmp_path: Path, through_git: bool
) -> None:
    """On a tty, CMD is in the foreground process group (it can read the terminal), and
    the terminal's Ctrl-C, which reaches exec and CMD alike, is not passed on a second
    time (Claude Code quits on a second Ctrl-C). Through `git lane`, git is exec's parent
    and passes its own Ctrl-C on to it as well: that copy is not passed on either."""
    import fcntl
    import pty
    import termios

    repo.create("alpha")
    code = (
        "import os, signal, sys, time\n"
        "n = [0]\n"
        "signal.signal(signal.SIGINT, lambda *a: n.__setitem__(0, n[0] + 1))\n"
        "print('fg', os.tcgetpgrp(0) == os.getpgrp(), flush=True)\n"
        "line = sys.stdin.readline()\n"
        "print('read', line.strip(), flush=True)\n"
        "t = time.time() + 20\n"
        "while n[0] == 0 and time.time() < t:\n"
        "    time.sleep(0.02)\n"
        "time.sleep(0.5)\n"
        "print('sigints', n[0], flush=True)\n"
    )
    master, slave = pty.openpty()

    def own_tty() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    argv = [sys.executable, "-m", "guard", "exec", "alpha", "--", sys.executable, "-c", code]
    env = dict(os.environ)
    if through_git:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        entry = bin_dir / "git-lane"
        entry.write_text(f'#!/bin/sh\nexec {sys.executable} -m guard "$@"\n')
        entry.chmod(0o755)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
        env["PYTHONPATH"] = str(ROOT)
        argv = ["git", "lane", *argv[3:]]
    proc = subprocess.Popen(
        argv,
        cwd=repo.path,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        preexec_fn=own_tty,
    )
    os.close(slave)
    seen = b""

    def until(word: bytes) -> None:
        nonlocal seen
        deadline = time.monotonic() + 30
        while word not in seen:
            assert time.monotonic() < deadline, seen
            try:
                seen += os.read(master, 1024)
            except OSError:
                raise AssertionError(seen) from None

    try:
        until(b"fg True")
        os.write(master, b"hello\n")
        until(b"read hello")
        os.write(master, b"\x03")
        until(b"sigints")
        proc.wait(timeout=30)
        while True:
            try:
                chunk = os.read(master, 1024)
            except OSError:  # EIO: every writer is gone
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert b"sigints 1" in seen, seen
    # git re-raises a SIGINT it got once its dashed command (git-lane) is done
    assert proc.returncode == (-signal.SIGINT if through_git else 0), seen


def test_a_hook_made_non_executable_is_put_back_while_cmd_runs(repo: Repo) -> None:
    """Landlock and the shims cannot see a chmod(2): exec's supervisor watches the hooks
    and restores a changed mode at once, while CMD still runs, with a warning and an
    event."""
    repo.lane("install")
    repo.create("alpha")
    hook = repo.common_dir / "hooks" / "reference-transaction"
    assert os.access(hook, os.X_OK)
    h, d = shlex.quote(str(hook)), shlex.quote(str(hook.parent))
    script = (
        f"chmod 644 {h} && chmod 600 {d} && "
        f'i=0; while [ $i -lt 100 ]; do [ -x {h} ] && [ "$(stat -c %a {d})" != 600 ] && '
        "echo back && exit 0; sleep 0.05; i=$((i+1)); done; echo never; exit 1"
    )
    r = repo.lane("exec", "alpha", "--", "sh", "-c", script)
    assert (r.rc, r.stdout.strip()) == (0, "back"), r.stderr
    assert "changed the mode of" in r.stderr and "put back" in r.stderr
    assert os.access(hook, os.X_OK)
    assert "hook_mode_restored" in (repo.state_dir / "events.jsonl").read_text()
