"""The real git shim (shims/git) in front of a real lane: PATH holds the shims first and
the binding is set by hand, as `git lane exec` sets it (guard/binding.py). Real git
commands; asserts on exit status, `[code]` and git's state (main, refs, HEAD)."""

from __future__ import annotations

import json
import os
import shutil
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, LaneRun, Repo, git
from hookfix import install, make_lane

from guard import binding, shim, shimpolicy

SHIMS = ROOT / "shims"
SHIM = SHIMS / "git"
REAL = os.path.realpath(shutil.which("git") or "/usr/bin/git")


class Lane:
    def __init__(self, repo: Repo, key: str, path: Path) -> None:
        self.repo = repo
        self.key = key
        self.path = path
        self.env = {
            "PATH": f"{SHIMS}{os.pathsep}{os.environ['PATH']}",
            binding.LANE: key,
            binding.ROLE: "worker",
            binding.REAL_GIT: REAL,
            binding.SHIMS_DIR: str(SHIMS),
            binding.LANE_PATH: os.path.realpath(path),
            binding.COMMON: os.path.realpath(repo.common_dir),
            binding.PYTHON: sys.executable,
            binding.PYPATH: str(ROOT),
            binding.HOME_AT_EXEC: os.environ["HOME"],
            binding.XDG_AT_EXEC: os.environ["XDG_CONFIG_HOME"],
            binding.PORT: "20000",
        }
        self.env[binding.PATH_AT_EXEC] = self.env["PATH"]

    def git(
        self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        full = {**os.environ, **self.env, **(env or {})}
        full = {k: v for k, v in full.items() if v is not None}
        return subprocess.run(
            [str(SHIM), *args],
            cwd=cwd or self.path,
            env=full,
            text=True,
            capture_output=True,
            timeout=60,
        )


@pytest.fixture
def alpha(repo: Repo) -> Lane:
    install(repo)
    return Lane(repo, "alpha", make_lane(repo, "alpha"))


def refused(res: subprocess.CompletedProcess[str], code: str) -> None:
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    assert f"git-lane: refused [{code}]" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr, res.stderr


def ok(res: subprocess.CompletedProcess[str]) -> None:
    assert res.returncode == 0, (res.returncode, res.stdout, res.stderr)
    assert "refused" not in res.stderr, res.stderr


def head_ref(where: Path) -> str:
    return git(where, "symbolic-ref", "-q", "HEAD", check=False).stdout.strip()


def recorder(tmp_path: Path) -> tuple[Path, Path]:
    """A GITLANE_PYTHON that only records that it ran (exit 97)."""
    mark = tmp_path / "python-ran"
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\necho ran >> '{mark}'\nexit 97\n")
    fake.chmod(0o755)
    return fake, mark


# -- unbound and the real git ---------------------------------------------------------------
def test_unbound_passes_straight_to_git(repo: Repo, tmp_path: Path) -> None:
    fake, mark = recorder(tmp_path)
    env = {
        **os.environ,
        "PATH": f"{SHIMS}{os.pathsep}{os.environ['PATH']}",
        "GITLANE_PYTHON": str(fake),
    }
    res = subprocess.run(
        [str(SHIM), "checkout", "-q", "-b", "feature"],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    ok(res)
    assert head_ref(repo.path) == "refs/heads/feature"
    assert not mark.exists()


@pytest.mark.parametrize("layout", ["twice", "wrapper", "relative"])
def test_no_loop_whatever_path_holds(repo: Repo, tmp_path: Path, layout: str) -> None:
    wrap = tmp_path / "wrap"
    wrap.mkdir()
    (wrap / "git").write_text(f"#!/bin/sh\necho wrapped >> '{tmp_path}/wrapped'\nexec git \"$@\"\n")
    (wrap / "git").chmod(0o755)
    real_dir = os.path.dirname(REAL)
    path = {
        "twice": [str(SHIMS), str(SHIMS), real_dir],
        "wrapper": [str(SHIMS), str(wrap), str(SHIMS), real_dir],
        "relative": [".", str(SHIMS), real_dir],
    }[layout]
    cwd = SHIMS if layout == "relative" else repo.path
    env = {k: v for k, v in os.environ.items() if k != "GITLANE_REAL_GIT"}
    env["PATH"] = os.pathsep.join(path)
    res = subprocess.run(
        ["git", "-C", str(repo.path), "rev-parse", "HEAD"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    ok(res)
    assert res.stdout.strip() == repo.sha("HEAD")
    if layout == "wrapper":
        assert (tmp_path / "wrapped").read_text().count("wrapped") == 1


def test_bound_read_only_commands_start_no_python(alpha: Lane, tmp_path: Path) -> None:
    fake, mark = recorder(tmp_path)
    env = {binding.PYTHON: str(fake)}
    for args in (
        ["status", "--porcelain"],
        ["log", "--oneline"],
        ["-P", "diff", "HEAD"],
        ["branch", "-a"],
        ["rev-parse", "HEAD"],
        ["tag", "-l"],
        ["stash", "list"],
        ["worktree", "list"],
    ):
        ok(alpha.git(*args, env=env))
    # the lane's own add and commit, on its branch, decide in sh too
    (alpha.path / "new.txt").write_text("new\n")
    ok(alpha.git("add", "new.txt", env=env))
    ok(alpha.git("commit", "-q", "-m", "new", env=env))
    assert not mark.exists(), "a read-only or plain lane command started Python"
    # anything else goes to Python (here: the recorder, which exits 97)
    assert alpha.git("checkout", "main", env=env).returncode == 97
    assert mark.exists()


def test_the_sh_fast_pass_reads_head_and_gitdir_whole_as_git_does(
    alpha: Lane, tmp_path: Path
) -> None:
    """git reads all of `<admin>/HEAD` (a second line is part of the ref's name) and the
    sh fast pass read its first line: `ref: refs/heads/lane/alpha` and more lines passed
    `git commit` as the lane's own. Only a one-line HEAD (and a one-line `gitdir`, which
    says the admin dir serves this lane) decides in sh; anything else goes to Python."""
    fake, mark = recorder(tmp_path)
    env = {binding.PYTHON: str(fake)}
    gd = Path(git(alpha.path, "rev-parse", "--absolute-git-dir").stdout.strip())
    (alpha.path / "new.txt").write_text("new\n")
    ok(alpha.git("add", "new.txt", env=env))
    head = (gd / "HEAD").read_bytes()
    (gd / "HEAD").write_bytes(head + b"refs/heads/main\n")
    assert alpha.git("commit", "-q", "-m", "new", env=env).returncode == 97
    assert mark.exists()
    mark.unlink()
    (gd / "HEAD").write_bytes(head)
    back = (gd / "gitdir").read_bytes()
    (gd / "gitdir").write_bytes(back + b"x\n")
    assert alpha.git("status", "--porcelain", env=env).returncode == 97
    assert mark.exists()
    (gd / "gitdir").write_bytes(back)
    ok(alpha.git("commit", "-q", "-m", "new", env=env))


# -- refusals with git's state unchanged ----------------------------------------------------
def test_main_mutations_are_refused_and_nothing_moves(alpha: Lane) -> None:
    main = alpha.repo.sha()
    tip = alpha.repo.sha("refs/heads/lane/alpha")
    refused(alpha.git("checkout", "main"), "main_mutation_refused")
    refused(alpha.git("switch", "-c", "other"), "main_mutation_refused")
    refused(alpha.git("branch", "-f", "main", "HEAD"), "main_mutation_refused")
    refused(alpha.git("update-ref", "refs/heads/main", "HEAD"), "main_mutation_refused")
    refused(alpha.git("push", ".", "HEAD:main"), "main_mutation_refused")
    refused(alpha.git("branch", "-D", "main"), "main_mutation_refused")
    refused(alpha.git("tag", "v1"), "main_mutation_refused")
    refused(alpha.git("worktree", "add", "../x"), "main_mutation_refused")
    refused(alpha.git("fetch", ".", "HEAD:refs/heads/main"), "main_mutation_refused")
    assert alpha.repo.sha() == main
    assert alpha.repo.sha("refs/heads/lane/alpha") == tip
    assert head_ref(alpha.path) == "refs/heads/lane/alpha"
    assert alpha.repo.sha("refs/heads/other") is None and alpha.repo.sha("refs/tags/v1") is None
    # the lane's own refs are its to write
    ok(alpha.git("update-ref", "refs/worktree/keep", "HEAD"))
    # off its branch (detached by hand with the real git), commit-like commands are refused
    git(alpha.path, "checkout", "-q", "--detach")
    refused(alpha.git("commit", "--allow-empty", "-m", "x"), "main_mutation_refused")
    res = alpha.git("commit", "--allow-empty", "-m", "x")
    assert "git switch lane/alpha" in res.stderr
    ok(alpha.git("switch", "-q", "lane/alpha"))
    assert head_ref(alpha.path) == "refs/heads/lane/alpha"


def test_hooks_disabled_paths_and_stash(alpha: Lane) -> None:
    tip = alpha.repo.sha("refs/heads/lane/alpha")
    hub_head = alpha.repo.sha("HEAD")
    res = alpha.git("-c", "core.hooksPath=/dev/null", "commit", "--allow-empty", "-m", "x")
    refused(res, "hooks_disabled")
    assert "Next: git commit --allow-empty -m x" in res.stderr
    refused(
        alpha.git(
            "commit",
            "--allow-empty",
            "-m",
            "x",
            env={
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "core.hooksPath",
                "GIT_CONFIG_VALUE_0": "/dev/null",
            },
        ),
        "hooks_disabled",
    )
    refused(alpha.git("config", "core.hooksPath", "/dev/null"), "hooks_disabled")
    refused(alpha.git("config", "--global", "hook.x.command", "true"), "hooks_disabled")
    refused(alpha.git("commit", "--allow-empty", "-m", "x", env={"HOME": "/tmp"}), "hooks_disabled")
    refused(alpha.git("--exec-path=/tmp", "commit", "-m", "x"), "hooks_disabled")
    assert git(alpha.path, "config", "--get", "core.hooksPath", check=False).stdout == ""
    refused(
        alpha.git("-C", str(alpha.repo.path), "commit", "--allow-empty", "-m", "x"),
        "path_outside_lane",
    )
    refused(
        alpha.git("commit", "--allow-empty", "-m", "x", cwd=alpha.repo.path), "path_outside_lane"
    )
    refused(
        alpha.git("--git-dir", str(alpha.repo.common_dir), "commit", "--allow-empty", "-m", "x"),
        "path_outside_lane",
    )
    refused(
        alpha.git("add", "x", env={"GIT_INDEX_FILE": "/tmp/gitlane-index"}), "path_outside_lane"
    )
    assert alpha.repo.sha("HEAD") == hub_head
    # stash: refs/stash is shared; the change stays where it is
    (alpha.path / "README.md").write_text("changed\n")
    res = alpha.git("stash")
    refused(res, "stash_shared")
    assert alpha.repo.sha("refs/stash") is None
    assert (alpha.path / "README.md").read_text() == "changed\n"
    assert alpha.repo.sha("refs/heads/lane/alpha") == tip
    # its next runs as written and keeps the work in a commit
    for cmd in ("git add -A", "git commit -m WIP"):
        ok(alpha.git(*cmd.split()[1:]))
    assert alpha.repo.sha("refs/heads/lane/alpha") != tip


def test_shell_alias_is_refused_and_its_next_runs_through_the_shim(alpha: Lane) -> None:
    git(alpha.repo.path, "config", "alias.bye", "!git checkout main")
    git(alpha.repo.path, "config", "alias.co", "checkout")
    res = alpha.git("bye")
    refused(res, "shell_alias")
    refused(alpha.git("co", "main"), "main_mutation_refused")
    nxt = res.stderr.split("Next: ", 1)[1].strip()
    assert nxt == "sh -c 'git checkout main'"
    full = {**os.environ, **alpha.env}
    again = subprocess.run(
        nxt, shell=True, cwd=alpha.path, env=full, capture_output=True, text=True
    )
    assert "refused [main_mutation_refused]" in again.stderr
    assert head_ref(alpha.path) == "refs/heads/lane/alpha"


def test_broken_binding_refuses_shim_facts_unknown(alpha: Lane, tmp_path: Path) -> None:
    for env in (
        {binding.REAL_GIT: "/nonexistent/git"},
        {binding.REAL_GIT: str(SHIM)},
        {binding.REAL_GIT: ""},
        {binding.LANE_PATH: str(tmp_path / "gone")},
        {binding.COMMON: str(tmp_path)},
    ):
        refused(alpha.git("status", env=env), "shim_facts_unknown")
    refused(
        alpha.git("checkout", "main", env={binding.PYTHON: "/nonexistent/python"}),
        "shim_facts_unknown",
    )
    refused(
        alpha.git("checkout", "main", env={binding.PYPATH: str(tmp_path)}), "shim_facts_unknown"
    )
    del alpha.env[binding.HOME_AT_EXEC]  # exec always sets it ('' when HOME was unset)
    refused(alpha.git("checkout", "main"), "shim_facts_unknown")


def test_disabled_lets_everything_through(alpha: Lane) -> None:
    alpha.repo.config("enabled", "false")
    ok(alpha.git("branch", "feature"))
    assert alpha.repo.sha("refs/heads/feature") is not None
    ok(alpha.git("status", env={binding.REAL_GIT: "/nonexistent/git"}))


def land_beta(repo: Repo) -> None:
    beta = make_lane(repo, "beta")
    (beta / "beta.txt").write_text("beta\n")
    git(beta, "add", "beta.txt")
    git(beta, "commit", "-q", "-m", "beta")
    repo.config("gate", "off")
    r = repo.lane("land", "beta")
    assert r.rc == 0, r.stderr


def test_stale_lane_and_the_epoch_notice(alpha: Lane) -> None:
    ok(alpha.git("status"))  # the lane looks once: nothing to report yet
    land_beta(alpha.repo)
    first = alpha.git("status")
    ok(first)
    assert "lane beta landed" in first.stderr and "Next: git lane sync alpha" in first.stderr
    assert "landed" not in alpha.git("status").stderr  # once
    (alpha.path / "README.md").write_text("mine\n")
    refused(alpha.git("checkout", "--", "README.md"), "sync_required")
    assert (alpha.path / "README.md").read_text() == "mine\n"
    refused(alpha.git("merge", "lane/beta"), "sync_required")
    ok(alpha.git("add", "README.md"))
    ok(alpha.git("commit", "-q", "-m", "mine"))
    ok(alpha.git("lane", "sync", "alpha"))
    ok(alpha.git("checkout", "HEAD~0", "--", "README.md"))


def test_check_git_is_the_same_decision(alpha: Lane) -> None:
    full = {**os.environ, **alpha.env}
    run = [sys.executable, "-m", "guard", "check", "git", "--json", "--"]
    res = subprocess.run(
        [*run, "checkout", "main"], cwd=alpha.path, env=full, capture_output=True, text=True
    )
    assert res.returncode == 1 and json.loads(res.stdout)["code"] == "main_mutation_refused"
    res = subprocess.run([*run, "status"], cwd=alpha.path, env=full, capture_output=True, text=True)
    assert res.returncode == 0 and json.loads(res.stdout)["code"] == "allowed"
    # unbound, from the lane's worktree (an agent adapter's hook)
    plain = {k: v for k, v in os.environ.items() if not k.startswith("GITLANE_")}
    res = subprocess.run([*run, "stash"], cwd=alpha.path, env=plain, capture_output=True, text=True)
    assert res.returncode == 1 and json.loads(res.stdout)["code"] == "stash_shared"


# -- one decision: every fast pass in sh is a pass of decide_git -----------------------------
FAST_CASES: list[tuple[list[str], dict[str, str]]] = [
    (["status"], {}),
    (["-P", "log", "-1"], {}),
    (["--no-pager", "--no-optional-locks", "diff"], {}),
    (["branch"], {}),
    (["branch", "-vv"], {}),
    (["branch", "new"], {}),
    (["branch", "-d", "x"], {}),
    (["branch", "--list", "l*"], {}),
    (["branch", "-f", "x"], {}),
    (["branch", "--contains", "HEAD"], {}),
    (["tag"], {}),
    (["tag", "x"], {}),
    (["stash"], {}),
    (["stash", "list"], {}),
    (["worktree", "list"], {}),
    (["worktree", "prune"], {}),
    (["add", "-A"], {}),
    (["commit", "--allow-empty", "-m", "x"], {}),
    (["commit", "-m", "x"], {"HOME": "/tmp"}),
    (["add", "x"], {"GIT_INDEX_FILE": "/tmp/i"}),
    (["status"], {"GIT_CONFIG_PARAMETERS": "'core.hookspath'='x'"}),
    (["status"], {"GIT_EXEC_PATH": "/tmp"}),
    (["-c", "a.b=c", "status"], {}),
    (["checkout", "main"], {}),
    (["lane", "status"], {}),
    (["diff", "--output=/tmp/gitlane-x.patch"], {}),
    (["log", "--output", "x.patch"], {}),
    (["-P", "diff", "--output=/tmp/gitlane-y.patch"], {}),
    (["--no-pager"], {}),
    (["-P", "stash"], {}),
    (["log", "--outp=/tmp/gitlane-z.patch"], {}),
    (["log", "--oneline", "-1"], {}),
    (["branch", "--list", "--del", "x"], {}),
    (["branch", "--sort=-committerdate"], {}),
    (["commit", "--amen", "--no-edit"], {}),
    (["commit", "--amend", "--no-edit", "-m", "y"], {}),
    (["add", "--al"], {}),
    (["-P", "branch", "-D", "main"], {}),
    (["tag", "-l", "v*"], {}),
    (["stash", "show"], {}),
    (["stash", "list", "--output=/tmp/gitlane-s.txt"], {}),
    (["stash", "show", "--output", "/tmp/gitlane-s2.txt"], {}),
    (["ls-remote", "--u=/tmp/gitlane-p", "."], {}),
    (["ls-remote", "--exec=/tmp/gitlane-p", "."], {}),
    (["ls-remote", "--sort", "--", "--upload-pack=/tmp/gitlane-p", "."], {}),
    (["ls-remote", "--heads", "."], {}),
    (["grep", "-e", "--", "-O/tmp/gitlane-p"], {}),
    (["commit", "-m", "--", "--amen"], {}),
    (["worktree", "add", "../w"], {}),
    (["rm", "-r", "sub"], {"GIT_DIR": "/tmp"}),
    (["rm", "--cached", "x"], {}),
    (["log"], {"GIT_DIR": "/tmp"}),
    # a `--` after an option word (red team 13K), and --bare (GIT_DIR: the cwd then)
    (["log", "-S", "--", "--exec=/tmp/gitlane-p"], {}),
    (["blame", "-L", "--", "--output=/tmp/gitlane-b", "x"], {}),
    (["range-diff", "-S", "--", "--output=/tmp/gitlane-r", "HEAD...HEAD"], {}),
    (["rm", "--cached", "--", "--exec=x"], {}),
    (["commit", "-m", "x", "--", "--amend"], {}),
    (["--bare", "status"], {}),
    (["--bare", "-C", "..", "status"], {}),
    (["--bare", "add", "x"], {}),
    (["-P", "--bare", "commit", "-m", "x"], {}),
    # read-only, but git would read another configuration, or find another `vi` or `less`
    (["status"], {"HOME": "/tmp"}),
    (["log"], {"XDG_CONFIG_HOME": "/tmp"}),
    (["log"], {"GIT_CONFIG": "/tmp/x"}),
    (["branch"], {"HOME": "/tmp"}),
    (["status"], {"PATH": f"/tmp{os.pathsep}{SHIMS}{os.pathsep}{os.environ['PATH']}"}),
]


def test_sh_fast_passes_are_passes_of_the_policy(alpha: Lane, tmp_path: Path) -> None:
    fake, mark = recorder(tmp_path)
    b = binding.from_env(alpha.env)
    assert b is not None
    fasts: set[tuple[str, ...]] = set()
    for argv, extra in FAST_CASES:
        if mark.exists():
            mark.unlink()
        res = alpha.git(*argv, env={binding.PYTHON: str(fake), **extra})
        fast = res.returncode != 97 and not mark.exists()
        env = {**os.environ, **alpha.env, **extra}
        facts = shim.gather_git(b, argv, env, str(alpha.path))
        decided = shimpolicy.decide_git(argv, env, facts)
        if fast:
            assert decided is None, (argv, extra, decided.line() if decided else None)
            fasts.add(tuple(argv))
    # not vacuous: the plain forms did decide in sh
    assert {("status",), ("add", "-A"), ("branch", "-vv"), ("-P", "log", "-1")} <= fasts
    assert ("checkout", "main") not in fasts and ("-P", "stash") not in fasts
    # a global option the sh pass does not know goes to Python (--bare names a git dir)
    assert not any("--bare" in argv for argv in fasts), fasts


# -- a scripted agent: a shell script that only runs git, as an agent CLI would ------------
AGENT = r"""#!/bin/sh
# one line per attempt: the command, its exit status and the [code] it was refused with
try() {
	git "$@" >/dev/null 2>"$ERR"
	rc=$?
	code=$(sed -n 's/^git-lane: refused \[\([a-z_]*\)\].*/\1/p' "$ERR" | head -n 1)
	printf '%s|%s|%s\n' "$*" "$rc" "${code:-}"
}
echo agent >agent.txt
try add agent.txt
try commit -q -m agent
try status --porcelain
try log --oneline -1
try diff HEAD~1
try branch -a
try checkout main
try switch -c side
try branch -f main HEAD
try branch -D main
try update-ref refs/heads/main HEAD
try push . HEAD:main
try tag v1
try stash
try -c core.hooksPath=/dev/null commit --allow-empty -m off
try config core.hooksPath /dev/null
try -C "$HUB" commit --allow-empty -m hub
try worktree add ../elsewhere
try reflog expire --updateref --expire=now lane/alpha
try gc --prune=now
try update-ref refs/worktree/keep HEAD
try commit --allow-empty -q -m second
"""

WANT = {
    "add agent.txt": (0, ""),
    "commit -q -m agent": (0, ""),
    "status --porcelain": (0, ""),
    "log --oneline -1": (0, ""),
    "diff HEAD~1": (0, ""),
    "branch -a": (0, ""),
    "checkout main": (1, "main_mutation_refused"),
    "switch -c side": (1, "main_mutation_refused"),
    "branch -f main HEAD": (1, "main_mutation_refused"),
    "branch -D main": (1, "main_mutation_refused"),
    "update-ref refs/heads/main HEAD": (1, "main_mutation_refused"),
    "push . HEAD:main": (1, "main_mutation_refused"),
    "tag v1": (1, "main_mutation_refused"),
    "stash": (1, "stash_shared"),
    "-c core.hooksPath=/dev/null commit --allow-empty -m off": (1, "hooks_disabled"),
    "config core.hooksPath /dev/null": (1, "hooks_disabled"),
    "worktree add ../elsewhere": (1, "main_mutation_refused"),
    "reflog expire --updateref --expire=now lane/alpha": (1, "main_mutation_refused"),
    "gc --prune=now": (1, "main_mutation_refused"),
    "update-ref refs/worktree/keep HEAD": (0, ""),
    "commit --allow-empty -q -m second": (0, ""),
}


@pytest.mark.parametrize("launch", ["binding by hand", "git lane exec"])
def test_a_scripted_agent_meets_every_rule(alpha: Lane, tmp_path: Path, launch: str) -> None:
    script = tmp_path / "agent.sh"
    script.write_text(AGENT)
    main_before = alpha.repo.sha()
    extra = {"ERR": str(tmp_path / "err"), "HUB": str(alpha.repo.path)}
    if launch == "git lane exec":  # the real thing: exec binds the script to lane alpha
        argv = [sys.executable, "-m", "guard", "exec", "alpha", "--", "sh", str(script)]
        full = {**os.environ, **extra}
    else:
        argv = ["sh", str(script)]
        full = {**os.environ, **alpha.env, **extra}
    res = subprocess.run(
        argv, cwd=alpha.path, env=full, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    got = {}
    for line in res.stdout.splitlines():
        cmd, rc, code = line.rsplit("|", 2)
        got[cmd.replace(str(alpha.repo.path), "$HUB")] = (int(rc), code)
    want = {**WANT, "-C $HUB commit --allow-empty -m hub": (1, "path_outside_lane")}
    assert got == want
    # git's state: main, the hub and every shared ref as they were; the lane moved
    assert alpha.repo.sha() == main_before
    assert git(alpha.repo.path, "log", "-1", "--format=%s").stdout.strip() == "init"
    for ref in ("refs/heads/side", "refs/tags/v1", "refs/stash"):
        assert alpha.repo.sha(ref) is None, ref
    assert head_ref(alpha.path) == "refs/heads/lane/alpha"
    assert git(alpha.path, "log", "-2", "--format=%s").stdout.split("\n")[:2] == ["second", "agent"]
    assert alpha.repo.sha("refs/worktree/keep") is None  # per-worktree: seen only in the lane
    assert git(alpha.path, "rev-parse", "-q", "--verify", "refs/worktree/keep", check=False).stdout
    assert git(alpha.path, "config", "--get", "core.hooksPath", check=False).stdout == ""
    assert "elsewhere" not in alpha.repo.worktrees()


# -- the red team's reproductions, through the real shim -----------------------------------
def test_red_team_writes_outside_the_rules_are_refused(alpha: Lane, tmp_path: Path) -> None:
    hub = alpha.repo.path
    main_before = alpha.repo.sha("refs/heads/main")
    # 1: an alias from --config-env (git reads its text from the environment)
    res = alpha.git("--config-env=alias.x=GL_X", "x", env={"GL_X": "checkout main"})
    refused(res, "unsafe_config")
    git(hub, "config", "alias.hk", "-c core.hooksPath=/dev/null commit")
    refused(alpha.git("hk", "--allow-empty", "-m", "x"), "hooks_disabled")
    # 2: a prefix of a long option is that option to git
    refused(
        alpha.git("reflog", "expire", "--expire=now", "--expire-unreachable=now", "--al"),
        "main_mutation_refused",
    )
    refused(alpha.git("gc", "-q", "--prun=now"), "main_mutation_refused")
    refused(
        alpha.git("fetch", "--dept=1", f"file://{alpha.repo.common_dir}", "main"),
        "main_mutation_refused",
    )
    assert not (Path(alpha.repo.common_dir) / "shallow").exists()
    refused(alpha.git("branch", "--del", "--forc", "lane/alpha", "victim"), "main_mutation_refused")
    refused(alpha.git("checkout", "--det"), "main_mutation_refused")
    res = alpha.git("commit", "--allow-empty", "--no-verif", "-m", "y")
    refused(res, "unknown_option")
    assert "Next: git commit --allow-empty --no-verify -m y" in res.stderr
    ok(alpha.git("commit", "--allow-empty", "--no-verify", "-m", "y"))
    # 3: init / clone outside the lane, or over it
    refused(alpha.git("init", f"--separate-git-dir={tmp_path}/sep"), "path_outside_lane")
    refused(alpha.git("init"), "path_outside_lane")
    assert (hub / ".git").is_dir() and not (tmp_path / "sep").exists()
    # 4: options that name a file git writes
    (hub / "README.md").write_text("owner's uncommitted work\n")
    refused(alpha.git("checkout-index", "-a", "-f", f"--prefix={hub}/"), "path_outside_lane")
    assert (hub / "README.md").read_text() == "owner's uncommitted work\n"
    refused(alpha.git("format-patch", "-o", str(tmp_path / "p"), "HEAD~1"), "path_outside_lane")
    refused(alpha.git("bundle", "create", str(tmp_path / "b.bundle"), "HEAD"), "path_outside_lane")
    refused(alpha.git("config", "--file", str(tmp_path / "c"), "a.b", "c"), "path_outside_lane")
    assert not any((tmp_path / n).exists() for n in ("p", "b.bundle", "c"))
    # 5: config that makes git run a program, in any scope, or for this one call
    refused(alpha.git("config", "core.fsmonitor", str(tmp_path / "evil")), "unsafe_config")
    refused(alpha.git("config", "--global", "core.sshCommand", "evil"), "unsafe_config")
    refused(alpha.git("-c", f"core.fsmonitor={tmp_path}/evil", "status"), "unsafe_config")
    assert git(hub, "config", "--get", "core.fsmonitor", check=False).stdout == ""
    # 10: a fetch refspec from -c, or from the configuration, writing a branch
    res = alpha.git(
        "-c",
        "remote.s.url=.",
        "-c",
        "remote.s.fetch=+refs/heads/lane/alpha:refs/heads/v2",
        "fetch",
        "s",
    )
    refused(res, "unsafe_config")
    git(hub, "config", "remote.s.url", ".")
    git(hub, "config", "remote.s.fetch", "+refs/heads/lane/alpha:refs/heads/v2")
    refused(alpha.git("fetch", "s"), "main_mutation_refused")
    assert alpha.repo.sha("refs/heads/v2") is None
    assert alpha.repo.sha("refs/heads/main") == main_before


def test_red_team_nested_git_and_external_commands(alpha: Lane, tmp_path: Path) -> None:
    # 6: a .git inside the lane naming another worktree's git dir
    beta = make_lane(alpha.repo, "beta")
    beta_tip = alpha.repo.sha("refs/heads/lane/beta")
    gd = git(beta, "rev-parse", "--absolute-git-dir").stdout.strip()
    sub = alpha.path / "s"
    sub.mkdir()
    (sub / ".git").write_text(f"gitdir: {gd}\n")
    (sub / "f").write_text("x\n")
    refused(alpha.git("add", "f", cwd=sub), "path_outside_lane")
    refused(alpha.git("commit", "--allow-empty", "-m", "x", cwd=sub), "path_outside_lane")
    assert alpha.repo.sha("refs/heads/lane/beta") == beta_tip
    shutil.rmtree(sub)
    # the lane's own .git replaced by one naming another lane's git dir
    own = (alpha.path / ".git").read_text()
    (alpha.path / ".git").write_text(f"gitdir: {gd}\n")
    (alpha.path / "g").write_text("x\n")
    refused(alpha.git("add", "g"), "shim_facts_unknown")
    assert "g" not in git(beta, "ls-files").stdout.split()
    (alpha.path / ".git").write_text(own)
    (alpha.path / "g").unlink()
    # 8: an external git-foo on PATH; git lane (an external too) still passes
    bindir = tmp_path / "bin"
    bindir.mkdir()
    foo = bindir / "git-foo"
    foo.write_text(f"#!/bin/sh\necho ran >'{tmp_path}/foo-ran'\n")
    foo.chmod(0o755)
    path = f"{SHIMS}{os.pathsep}{bindir}{os.pathsep}{os.environ['PATH']}"
    # (exec's PATH has bindir too: a PATH adding it is refused first, unsafe_config)
    res = alpha.git("foo", "a", env={"PATH": path, binding.PATH_AT_EXEC: path})
    refused(res, "external_command")
    assert "Next: git-foo a" in res.stderr
    assert not (tmp_path / "foo-ran").exists()


# what each of git's scripts prints as the lane's other ways out (filter-branch: none)
INSTEAD = {
    "bisect": ["git log --oneline"],
    "submodule": ["git ls-files --stage"],
    "filter-branch": [],
    "mergetool": ["git diff --name-only --diff-filter=U"],
}


@pytest.mark.parametrize(
    "how",
    [
        ("bisect", "run", "./evil.sh"),
        ("submodule", "foreach", "./evil.sh"),
        ("filter-branch", "--tree-filter", "./evil.sh", "HEAD"),
        ("mergetool", "--tool=./evil.sh"),
    ],
    ids=["bisect_run", "submodule_foreach", "filter_branch", "mergetool"],
)
def test_an_external_commands_next_never_hands_the_lanes_program_to_the_owner(
    alpha: Lane, tmp_path: Path, how: tuple[str, ...]
) -> None:
    """Red team 13R: external_command for git's own scripts printed, as its next, the same
    command for the owner to run outside the lane (`git -C LANE bisect run ./evil.sh  #
    as the repository owner`): followed as printed, it ran the lane's program as the
    owner, unconfined, the very thing the refusal stopped. No owner's command is printed
    for git's scripts at all now (red team 14A: they act by path in what the lane
    controls): the next is the lane's status, and it runs."""
    res = alpha.git(*how)
    refused(res, "external_command")
    nxt = res.stderr.split(". Next: ", 1)[1].splitlines()[0]
    assert nxt == "git lane status alpha", res.stderr
    done = subprocess.run(nxt, shell=True, cwd=alpha.path, capture_output=True, text=True)
    assert done.returncode == 0 and "evil.sh" not in done.stdout + done.stderr, (nxt, done)
    alts = [ln.removeprefix("  Or: ") for ln in res.stderr.splitlines() if "  Or: " in ln]
    assert alts == INSTEAD[how[0]], res.stderr  # the ways out besides the next, each run below
    for alt in alts:
        ran = alpha.git(*shlex.split(alt.removeprefix("git ")))
        assert ran.returncode == 0, (alt, ran.stderr)  # every way out it names, the lane runs


def test_bisect_is_not_advised_to_check_out_commits_in_the_lane(alpha: Lane) -> None:
    """bisect's refusal advised "bisect by checking out commits and testing them in the
    lane": the shim refuses the lane any checkout off its branch, so the advice led to a
    second refusal. It now says to bisect in a clone of one's own."""
    res = alpha.git("bisect", "start")
    refused(res, "external_command")
    assert "clone of your own" in res.stderr, res.stderr
    moved = alpha.git("checkout", "-q", "HEAD~0^{commit}")
    refused(moved, "main_mutation_refused")  # what the old advice would have the lane do


# -- what a lane may write, however git is asked (red team 13D) ------------------------------
def exec_sh(hub: Repo, lane_path: Path, script: str) -> LaneRun:
    """`git lane exec alpha -- sh -c SCRIPT` in lane alpha, after a commit on its branch."""
    pre = "set -e; echo work > work.txt; git add work.txt; git commit -q -m work; set +e; "
    return hub.lane("exec", "alpha", "--", "sh", "-c", pre + script, cwd=lane_path)


def refused_run(r: LaneRun, code: str) -> None:
    assert r.rc == 1 and f"git-lane: refused [{code}]" in r.stderr, (r.rc, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "cmd",
    ["git branch -f -t feature lane/alpha", "git branch -f --track=inherit feature lane/alpha"],
    ids=["t", "track_inherit"],
)
def test_branch_track_takes_no_value_so_the_shared_branch_is_judged(hub: Repo, cmd: str) -> None:
    """`git branch -t` takes no value (git 2.39: --track[=direct|inherit]): `branch -f -t
    feature lane/alpha` moves feature, a shared branch the hooks do not guard."""
    hub.git("branch", "feature")
    before = hub.sha("refs/heads/feature")
    lane_path = hub.create("alpha")
    r = exec_sh(hub, lane_path, cmd)
    refused_run(r, "main_mutation_refused")
    assert hub.sha("refs/heads/feature") == before


def test_branch_names_after_double_dash_are_judged(hub: Repo) -> None:
    hub.git("branch", "feature")
    before = hub.sha("refs/heads/feature")
    lane_path = hub.create("alpha")
    r = exec_sh(hub, lane_path, "git branch -f -- feature lane/alpha")
    refused_run(r, "main_mutation_refused")
    assert hub.sha("refs/heads/feature") == before


def test_symbolic_ref_names_after_dash_dash_are_judged(hub: Repo) -> None:
    """`git symbolic-ref refs/heads/main refs/heads/lane/alpha` is refused (the hooks never
    see it: git 2.39 writes symrefs outside any ref transaction); with `--` before the
    names parse-options writes the same symbolic ref, and the policy read no names past
    `--` (red team 13K #2): main resolved to the lane's tip, moved without a land."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    r = exec_sh(hub, lane_path, "git symbolic-ref -- refs/heads/main refs/heads/lane/alpha")
    refused_run(r, "main_mutation_refused")
    sym = git(hub.path, "symbolic-ref", "-q", "refs/heads/main", check=False).stdout.strip()
    assert hub.sha() == main and sym == "", sym


@pytest.mark.parametrize(
    ("how", "ref"),
    [
        # fetch_tag of the bypass matrix (hooks: passes, shims: refused), past a `--`
        ("git fetch -q -- . lane/alpha:refs/tags/v9", "refs/tags/v9"),
        # a shared branch checked out nowhere, rebased onto the lane (and the lane left on it)
        ("git rebase -q -- lane/alpha release", "refs/heads/release"),
    ],
    ids=["fetch_tag", "rebase_other_branch"],
)
def test_refs_named_after_dash_dash_are_judged(hub: Repo, how: str, ref: str) -> None:
    """fetch's refspecs and rebase's branch after a `--` are the same names to git: `git
    fetch -- . SRC:refs/tags/v9` wrote a shared tag and `git rebase -- UPSTREAM release`
    rewrote a shared branch, each refused without the `--` (red team 13K #10)."""
    git(hub.path, "branch", "release")
    lane_path = hub.create("alpha")
    before = hub.sha(ref)
    r = exec_sh(hub, lane_path, how)
    refused_run(r, "main_mutation_refused")
    assert hub.sha(ref) == before, (r.stdout, r.stderr)


@pytest.mark.parametrize("how", ["-S", "-qS", "--gpg-sign"])
def test_rebase_gpg_sign_takes_no_next_word_so_the_branch_named_is_judged(
    hub: Repo, how: str
) -> None:
    """`git rebase -S UPSTREAM BRANCH`: -S is --gpg-sign[=KEY], whose value is never the
    next word; the policy let -S (and -qS) eat UPSTREAM, read BRANCH as the upstream, and
    a shared branch checked out nowhere was checked out in the lane and rewritten (red
    team 13M #4). Refused as `rebase UPSTREAM BRANCH` is."""
    hub.git("branch", "feature")
    before = hub.sha("refs/heads/feature")
    lane_path = hub.create("alpha")
    r = exec_sh(hub, lane_path, f"git rebase {how} lane/alpha feature")
    refused_run(r, "main_mutation_refused")
    assert hub.sha("refs/heads/feature") == before, (r.stdout, r.stderr)


def test_a_file_named_like_an_option_after_dash_dash_has_a_next_that_names_it(
    hub: Repo,
) -> None:
    """A `--` after an option word is read as a possible value (parse-options takes it so,
    then reads on), so a file named like an option after it is judged as an option: `git
    clean -f -- --weird` is refused unknown_option; the next names the same file as
    ./--weird and runs."""
    lane_path = hub.create("alpha")
    (lane_path / "--weird").write_text("x\n")
    r = hub.lane("exec", "alpha", "--", "git", "clean", "-f", "--", "--weird", cwd=lane_path)
    refused_run(r, "unknown_option")
    nxt = r.stderr.split("Next: ", 1)[1].splitlines()[0].strip()
    assert nxt == "git clean -f -- ./--weird", r.stderr
    r = hub.lane("exec", "alpha", "--", "sh", "-c", nxt, cwd=lane_path)
    assert r.rc == 0 and not (lane_path / "--weird").exists(), (r.rc, r.stdout, r.stderr)


def test_reset_with_no_path_after_dash_dash_moves_head_and_is_judged(hub: Repo) -> None:
    """`git reset --hard REV --` names no path: git moves HEAD, where the policy took any
    `--` for an index-only reset. With the lane's HEAD on a shared branch (the owner's
    switch here) that branch moved; refused like reset without the `--`."""
    git(hub.path, "branch", "release")
    lane_path = hub.create("alpha")
    hub.commit(lane_path, "work.txt", "work\n")
    git(lane_path, "symbolic-ref", "HEAD", "refs/heads/release")
    before = hub.sha("refs/heads/release")
    script = "git reset -q --hard lane/alpha --"
    r = hub.lane("exec", "alpha", "--", "sh", "-c", script, cwd=lane_path)
    refused_run(r, "main_mutation_refused")
    assert hub.sha("refs/heads/release") == before, (r.stdout, r.stderr)


@pytest.mark.parametrize(
    "how",
    [
        'git bundle create -- "$OUT" HEAD',
        'git rev-parse HEAD | git pack-objects -q -- "$OUT"',
    ],
    ids=["bundle_create", "pack_objects"],
)
def test_a_file_named_after_dash_dash_is_still_the_file_git_writes(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """parse-options takes `--` as the end of the options and the next word as the file all
    the same: `git bundle create -- FILE` wrote FILE anywhere (here over a file of the
    hub's worktree), `pack-objects -- BASE` wrote BASE-<hash>.pack/.idx outside the lane
    (red team 13K #8)."""
    lane_path = hub.create("alpha")
    target = hub.path / "a.txt"
    before = target.read_bytes()
    outside = tmp_path / "outside"
    outside.mkdir()
    out = target if "bundle" in how else outside / "base"
    pre = "set -e; git commit -q --allow-empty -m x; set +e; "
    r = hub.lane("exec", "alpha", "--", "sh", "-c", pre + how, cwd=lane_path, env={"OUT": str(out)})
    refused_run(r, "path_outside_lane")
    assert target.read_bytes() == before, (r.rc, r.stdout, r.stderr)
    assert list(outside.iterdir()) == [], (r.rc, r.stdout, r.stderr)


@pytest.mark.parametrize(
    "how",
    [
        'git checkout-index -a --prefix -- --pref="$OUT/"',
        'git bugreport --suffix -- --output-d="$OUT"',
        'git diagnose --suffix -- --output-d="$OUT"',
    ],
    ids=["checkout_index", "bugreport", "diagnose"],
)
def test_an_abbreviated_path_option_past_a_dash_dash_value_is_judged(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """`--prefix -- --pref=DIR/`: --prefix takes `--` as its value (in the lane), then git
    completes `--pref` to --prefix=DIR/; the policy ended the options at that `--` for a
    command it did not list, so the abbreviation was never judged and the lane's files
    were checked out outside the lane (red team 13K #7; bugreport/diagnose -o alike).
    Refused; the next spells the option out, and is refused for the same reason."""
    lane_path = hub.create("alpha")
    out = tmp_path / "outside"
    r = hub.lane("exec", "alpha", "--", "sh", "-c", how, cwd=lane_path, env={"OUT": str(out)})
    refused_run(r, "path_outside_lane")
    assert not out.exists(), (sorted(p.name for p in out.iterdir()), r.stdout, r.stderr)


@pytest.mark.parametrize(
    ("spec", "ref"),
    [
        ("+lane/alpha:refs/tags/v1", "refs/tags/v1"),
        ("+lane/alpha:refs/notes/commits", "refs/notes/commits"),
        ("+refs/heads/lane/*:refs/git-lane/x/*", "refs/git-lane/x/alpha"),
    ],
    ids=["tag", "notes", "git_lane_namespace"],
)
def test_fetch_writes_only_remote_tracking_and_the_lanes_own_refs(
    hub: Repo, spec: str, ref: str
) -> None:
    """A lane writes only its branch and refs/worktree/* (git tag is refused); a fetch
    refspec may add refs/remotes/*: `git fetch . +lane/alpha:refs/tags/v1` moved the
    owner's tag. Its next fetches the same into FETCH_HEAD only, and runs."""
    hub.git("tag", "v1")
    before = hub.sha(ref)
    lane_path = hub.create("alpha")
    r = exec_sh(hub, lane_path, f"git fetch -q . {spec}")
    refused_run(r, "main_mutation_refused")
    assert hub.sha(ref) == before
    nxt = r.stderr.split("Next: ", 1)[1].splitlines()[0]
    r = hub.lane("exec", "alpha", "--", "sh", "-c", nxt, cwd=lane_path)
    assert r.rc == 0, (nxt, r.rc, r.stderr)
    r = hub.lane(
        "exec", "alpha", "--", "git", "fetch", "-q", ".", "lane/alpha:refs/remotes/here/alpha",
        cwd=lane_path,
    )  # fmt: skip
    assert r.rc == 0 and hub.sha("refs/remotes/here/alpha"), (r.rc, r.stderr)


@pytest.mark.parametrize(
    "cmd",
    [
        "git -c gc.pruneExpire=now gc -q",
        "git -c gc.reflogExpire=now -c gc.reflogExpireUnreachable=now gc -q",
        "git -c gc.worktreePruneExpire=now gc -q",
        "git config gc.pruneExpire now",
        "git config core.logAllRefUpdates false",
        "git fetch -q --prune-tags . lane/alpha",
    ],
    ids=["prune", "reflog", "worktree", "config", "reflog_off", "prune_tags"],
)
def test_settings_that_make_gc_delete_are_refused_like_gc_prune_now(hub: Repo, cmd: str) -> None:
    """`git gc --prune=now` is refused (it could delete objects other lanes are writing);
    `git -c gc.pruneExpire=now gc`, the same in the saved configuration, the reflog and
    worktree expiries and fetch --prune-tags are refused the same way."""
    lane_path = hub.create("alpha")
    r = exec_sh(hub, lane_path, cmd)
    refused_run(r, "main_mutation_refused")
    got = hub.git("config", "--get", "gc.pruneExpire", check=False).stdout
    assert got == "", got


@pytest.mark.parametrize(
    "how",
    [
        'git format-patch -qko "$OUT" HEAD~1',  # -q quiet, -k keep subject, -o DIR
        'git archive --format=zip -9o "$OUT" HEAD',  # -9 best compression, -o FILE
        # not a group: read-tree's --index-output takes the next word as well as =FILE
        'git read-tree --index-output "$OUT" HEAD',
    ],
    ids=["format_patch", "archive", "read_tree_index_output"],
)
def test_format_patch_output_directory_in_a_group_of_short_flags_is_judged(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """format-patch's -o DIR and archive's -o FILE are judged (path_outside_lane) in a
    group of short flags too: git's parse-options takes -o and the rest of the word, or
    the next word, wherever -o stands in the group."""
    lane_path = hub.create("alpha")
    out = tmp_path / "outside"
    script = "set -e; git commit -q --allow-empty -m x; set +e; " + how
    r = hub.lane("exec", "alpha", "--", "sh", "-c", script, cwd=lane_path, env={"OUT": str(out)})
    assert not out.exists(), (r.rc, r.stdout, r.stderr)
    assert "refused [path_outside_lane]" in r.stderr, (r.stdout, r.stderr)
    # the next runs as printed: the command without the file (archive: to stdout), or
    # with the same last component in the lane (a `cd LANE &&` alone would run the same
    # absolute path again)
    nxt = r.stderr.split("Next: ", 1)[1].splitlines()[0]
    again = hub.lane("exec", "alpha", "--", "sh", "-c", nxt + " >/dev/null", cwd=lane_path)
    assert again.rc == 0, (nxt, again.stdout, again.stderr)
    assert not out.exists(), nxt
    if nxt.startswith("cd "):
        assert (lane_path / "outside").exists(), nxt


def test_merge_file_writes_its_result_only_into_a_file_in_the_lane(
    hub: Repo, tmp_path: Path
) -> None:
    """`git merge-file CURRENT BASE OTHER` writes the merge into CURRENT (without -p): no
    path of merge-file was judged, so a file outside the lane was rewritten with the lane's
    content (red team 13M #5). CURRENT is judged by its realpath (-L NAME taken as a
    label); the next, the same merge to stdout (-p), runs and writes nothing."""
    lane_path = hub.create("alpha")
    out = tmp_path / "outside.txt"
    out.write_text("base\n")
    pre = "printf 'base\\n' > b.txt; printf 'lane wrote this\\n' > o.txt; "
    r = exec_sh(hub, lane_path, pre + f"git merge-file -L a -L b -L c '{out}' b.txt o.txt")
    refused_run(r, "path_outside_lane")
    assert out.read_text() == "base\n", (out.read_text(), r.stdout, r.stderr)
    nxt = r.stderr.split("Next: ", 1)[1].splitlines()[0]
    assert nxt.startswith("git merge-file -p "), nxt
    again = hub.lane("exec", "alpha", "--", "sh", "-c", nxt, cwd=lane_path)
    assert again.rc == 0 and again.stdout == "lane wrote this\n", (nxt, again.stdout, again.stderr)
    assert out.read_text() == "base\n"
    # in the lane (its own file), and to stdout, merge-file runs
    ok_run = pre + "cp b.txt c.txt && git merge-file c.txt b.txt o.txt"
    r = hub.lane("exec", "alpha", "--", "sh", "-c", ok_run, cwd=lane_path)
    assert r.rc == 0 and (lane_path / "c.txt").read_text() == "lane wrote this\n", r.stderr


def _run_next(hub: Repo, lane_path: Path, script: str) -> tuple[LaneRun, str, LaneRun]:
    """Run SCRIPT in the lane (refused), then its printed next as printed."""
    r = exec_sh(hub, lane_path, script)
    refused_run(r, "path_outside_lane")
    nxt = r.stderr.split("Next: ", 1)[1].splitlines()[0]
    return r, nxt, hub.lane("exec", "alpha", "--", "sh", "-c", nxt, cwd=lane_path)


def test_path_outside_lane_next_never_names_the_lanes_own_git_link(
    hub: Repo, tmp_path: Path
) -> None:
    """`git read-tree --index-output=/elsewhere/.git HEAD` was refused with the next `cd
    LANE && git read-tree --index-output=LANE/.git HEAD` (the same last component), which
    passed and renamed an index over the lane's `.git` file: the lane was no git worktree
    any more (red team 13M #3). The next names a fresh file that is no git name (`out`),
    and runs; the lane's `.git` as a written file is refused from inside the lane too."""
    lane_path = hub.create("alpha")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _r, nxt, again = _run_next(
        hub, lane_path, f"git read-tree --index-output='{elsewhere}/.git' HEAD"
    )
    assert nxt == f"cd {lane_path} && git read-tree --index-output={lane_path}/out HEAD", nxt
    assert again.rc == 0 and (lane_path / "out").is_file(), (nxt, again.stdout, again.stderr)
    for how in ("--index-output=.git", "--index-output ./.git"):
        script = f"git read-tree {how} HEAD"
        refused_run(
            hub.lane("exec", "alpha", "--", "sh", "-c", script, cwd=lane_path), "path_outside_lane"
        )
    assert (lane_path / ".git").read_bytes()[:8] == b"gitdir: "
    assert git(lane_path, "status", "--porcelain", check=False).returncode == 0


def test_path_outside_lane_next_never_names_a_link_out_of_the_lane(
    hub: Repo, tmp_path: Path
) -> None:
    """`git format-patch -o /elsewhere/pp HEAD~1` was refused with the next `cd LANE && git
    format-patch -o LANE/pp HEAD~1`; with a link `pp` in the lane to that same directory,
    the next was refused again, with itself as its next (red team 13M #6). A name that is
    there already is never the next's: `out`, which runs and writes in the lane."""
    lane_path = hub.create("alpha")
    outside = tmp_path / "elsewhere" / "pp"
    outside.mkdir(parents=True)
    (lane_path / "pp").symlink_to(outside)
    _r, nxt, again = _run_next(hub, lane_path, f"git format-patch -o '{outside}' HEAD~1")
    assert nxt == f"cd {lane_path} && git format-patch -o {lane_path}/out 'HEAD~1'", nxt
    assert again.rc == 0 and "refused" not in again.stderr, (nxt, again.stdout, again.stderr)
    assert list(outside.iterdir()) == [] and len(list((lane_path / "out").iterdir())) == 1


def test_notes_rewrite_ref_in_the_environment_never_lets_commit_amend_move_main(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """GIT_NOTES_REWRITE_REF names the notes refs `commit --amend` (and rebase) copy the
    amended commit's note into; from the environment git takes any ref, not only
    refs/notes/*. The lane landed a file named after one of its commits (a note, to git
    reading main's tree as a notes tree); `GIT_NOTES_REWRITE_REF=refs/heads/main git
    commit --amend` on that commit would commit "Notes added by 'git commit --amend'"
    onto main. With the shims alone (a stand-in hook: the bypass matrix's shims layer)
    main stays: the variable sends the sh fast pass to Python, which refuses any ref
    outside refs/notes/."""
    hook = repo.common_dir / "hooks" / "reference-transaction"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    repo.config("gate_command", "true")
    lane_path = repo.create("alpha")
    x = repo.commit(lane_path, "work.txt", "work\n")
    repo.commit(lane_path, x, "a note\n", "a file named after a commit")
    r = repo.lane("land", "alpha")
    assert r.rc == 0, (r.stdout, r.stderr)
    main = repo.sha()
    script = (
        "set -e; git reset -q --hard HEAD~1; set +e; "
        "GIT_NOTES_REWRITE_REF=refs/heads/main git commit -q --amend -m amended; echo rc=$?"
    )
    r = repo.lane("exec", "alpha", "--", "sh", "-c", script, cwd=lane_path)
    assert repo.sha() == main, (
        git(repo.path, "log", "--oneline", "-3", "main").stdout,
        r.rc,
        r.stdout,
        r.stderr,
    )
    assert "refused [unsafe_config]" in r.stderr, (r.stdout, r.stderr)
    # its next runs as printed: the amend without the variable
    nxt = r.stderr.split("Next: ", 1)[1].splitlines()[0]
    assert nxt.startswith("env -u GIT_NOTES_REWRITE_REF git commit"), r.stderr
    r = repo.lane("exec", "alpha", "--", "sh", "-c", nxt, cwd=lane_path)
    assert r.rc == 0 and repo.sha() == main, (r.stdout, r.stderr)


def test_the_sh_fast_pass_sends_every_judged_environment_name_to_python() -> None:
    """A variable decide_git judges for every command (the safe editors' and pagers'
    environment, the protocol switches, the trace files git reads) sends shims/git's
    fast pass to Python whenever it is set: the sh pass never lets one through."""
    from guard import shimpolicy

    text = SHIM.read_text()
    names = [*binding.PROGRAM_VARS, *shimpolicy.PROTOCOL_ENV, *shimpolicy.NOTES_ENV]
    names = [n for n in names if n not in shimpolicy._EDITOR_ENV]  # their own loop: names
    names += ["GIT_TRACE", "GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF"]
    names += ["GIT_TRACE_PACKET", "GIT_TRACE_PERFORMANCE", "GIT_TRACE_SETUP", "GIT_TRACE_CURL"]
    editors = text[text.index("for gs_a in VIMINIT") :]
    editors = editors[: editors.index("; do")].replace("\\\n", " ").split()[3:]
    missing = [
        n for n in names if n != "LESSSECURE" and "${" + n + ":+x}" not in text and n not in editors
    ]
    assert not missing, missing
    assert '*\'"LESSSECURE"\'*) [ -n "${LESSSECURE-}" ] || gs_noenv=x' in text
    # the loop runs only when one of them is set: the presence check names the same ones
    import re

    present = re.findall(r"\$\{(\w+):\+x\}", "".join(re.findall(r"^gs_any=.*$", text, re.M)))
    assert sorted(present) == sorted(editors), set(present) ^ set(editors)
    assert set(editors) == set(binding.EDITOR_ENV) - {"LESSSECURE"}


@pytest.mark.parametrize(
    "cmd",
    ["git config -- core.hooksPath -h", "git config core.hooksPath '-x y'"],
    ids=["dashdash", "value_like_an_option"],
)
def test_git_config_options_end_at_the_key(hub: Repo, cmd: str) -> None:
    """git config stops reading options at its first non-option word (or `--`), so a
    value may start with `-`: the shim read `git config -- core.hooksPath -h` as a read
    of core.hooksPath (`-h` an option) and let git set it, the hooks then looked for in
    `./-h/` of whatever worktree git runs in: off for the owner and every lane."""
    lane_path = hub.create("alpha")
    r = exec_sh(hub, lane_path, cmd)
    refused_run(r, "hooks_disabled")
    got = git(hub.path, "config", "--get-all", "core.hooksPath", check=False).stdout
    assert "-" not in got.strip()[:1], got
