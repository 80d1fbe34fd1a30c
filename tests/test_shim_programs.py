"""Red team 3: programs git runs with its own directory first on PATH (a pager, an editor,
an external diff, an ssh command, difftool -x, template hooks, rebase -x) would reach the
real git past the shim; under a real `git lane exec`, each is refused and main stays put.
Also GITLANE_INTERNAL=1 is no pass for a bound process, and a message that looks like an
option is a message."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LaneRun, Repo, git

P = "git -c core.hooksPath=/dev/null update-ref refs/heads/main HEAD"


@pytest.fixture
def gitlane_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`git lane` resolves to this checkout (git finds `git-lane` on PATH)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "git-lane"
    exe.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m guard "$@"\n')
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    root = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    )
    return bindir


@pytest.fixture
def alpha(repo: Repo, gitlane_on_path: Path) -> Path:
    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    repo.commit(path, "w.txt", "work\n", "work")
    return path


def lx(repo: Repo, lane: Path, script: str) -> subprocess.CompletedProcess[str]:
    """`git lane exec alpha -- sh -c SCRIPT` in the lane."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITLANE_")}
    return subprocess.run(
        [sys.executable, "-m", "guard", "exec", "alpha", "--", "sh", "-c", script],
        cwd=lane,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "script",
    [
        f"git grep -O'{P} #' -e work",
        f"EDITOR='{P}; true' git commit --allow-empty -e -m x",
        f"echo z >> w.txt; GIT_EXTERNAL_DIFF='{P} #' git diff",
        f"GIT_SSH_COMMAND='{P}; false' git fetch -q ssh://h/r",
        f"echo z >> w.txt; git difftool -y -x '{P} #'",
        f"git rebase -x '{P}' HEAD~1",
        f"GITLANE_INTERNAL=1 {P}",
        "GITLANE_INTERNAL=1 git update-ref refs/heads/main HEAD",
    ],
    ids=["grep-O", "editor", "ext-diff", "ssh", "difftool-x", "rebase-x", "internal", "internal2"],
)
def test_a_program_git_runs_cannot_reach_the_real_git(repo: Repo, alpha: Path, script: str) -> None:
    main = repo.sha()
    res = lx(repo, alpha, script)
    assert "git-lane: refused [" in res.stderr, (res.returncode, res.stdout, res.stderr)
    assert repo.sha() == main
    assert "Traceback" not in res.stderr


def test_template_hooks_of_a_clone_cannot_reach_the_real_git(
    repo: Repo, alpha: Path, tmp_path: Path
) -> None:
    hooks = tmp_path / "tpl" / "hooks"
    hooks.mkdir(parents=True)
    hook = hooks / "post-checkout"
    hook.write_text(
        f"#!/bin/sh\nunset GIT_DIR GIT_INDEX_FILE; git -C {shlex.quote(str(repo.path))} "
        "-c core.hooksPath=/dev/null update-ref refs/heads/main refs/heads/lane/alpha\n"
    )
    hook.chmod(0o755)
    bare = tmp_path / "o.git"
    repo.git("clone", "-q", "--bare", str(repo.path), str(bare))
    main = repo.sha()
    res = lx(
        repo, alpha, f"git clone -q --template={shlex.quote(str(tmp_path / 'tpl'))} {bare} sub"
    )
    assert "git-lane: refused [unsafe_config]" in res.stderr, res.stderr
    assert repo.sha() == main
    assert not (alpha / "sub").exists()


def test_a_plain_editor_and_pager_still_work(repo: Repo, alpha: Path) -> None:
    res = lx(
        repo,
        alpha,
        "GIT_EDITOR=true EDITOR=true PAGER=cat git commit --allow-empty -e -m ok && git log -1",
    )
    assert res.returncode == 0, res.stderr
    assert "ok" in res.stdout


def test_a_message_that_looks_like_an_option_is_a_message(repo: Repo, alpha: Path) -> None:
    res = lx(repo, alpha, 'git commit -q --allow-empty -m "--fix: x" && git log -1 --format=%s')
    assert (res.returncode, res.stdout.strip()) == (0, "--fix: x"), res.stderr
    res = lx(repo, alpha, "git commit -q --allow-empty --message --x && git log -1 --format=%s")
    assert (res.returncode, res.stdout.strip()) == (0, "--x"), res.stderr


def refusal_next(res: subprocess.CompletedProcess[str]) -> str:
    assert "git-lane: refused [" in res.stderr, res.stderr
    return res.stderr.split("Next: ", 1)[1].strip()


def test_every_next_of_these_refusals_runs(repo: Repo, alpha: Path) -> None:
    # stash pop with no stash: nothing to apply, so no `git stash apply` to suggest
    nxt = refusal_next(lx(repo, alpha, "git stash pop"))
    assert "stash apply" not in nxt, nxt
    # one of git's scripts: not `git-submodule status` (not on PATH; run by its path it
    # finds no git-sh-setup), nor an owner's command (red team 14A: git's scripts act by
    # path in what the lane controls) but the lane's status, which runs in the lane
    res = lx(repo, alpha, "git submodule status")
    nxt = refusal_next(res).splitlines()[0]
    assert nxt == "git lane status alpha", res.stderr
    done = lx(repo, alpha, nxt)
    assert done.returncode == 0, done.stderr
    # the hook setting dropped, the command is still refused: that refusal
    res = lx(repo, alpha, P)
    assert "[main_mutation_refused]" in res.stderr, res.stderr


def test_the_owners_own_program_variables_pass_and_a_changed_one_does_not(
    repo: Repo, alpha: Path
) -> None:
    """An askpass or editor the owner started exec with (VS Code sets GIT_ASKPASS) is the
    owner's choice: it passes; one the process sets, or a nested exec, does not."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITLANE_")}
    env["GIT_ASKPASS"] = "/opt/owner/askpass.sh"

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "guard", "exec", "alpha", "--", "sh", "-c", script],
            cwd=alpha,
            env=env,
            text=True,
            capture_output=True,
            timeout=120,
        )

    res = run("git commit -q --allow-empty -m owner && git log -1 --format=%s")
    assert (res.returncode, res.stdout.strip()) == (0, "owner"), res.stderr
    res = run("GIT_ASKPASS=/tmp/evil git commit -q --allow-empty -m x")
    assert "[unsafe_config]" in res.stderr, res.stderr
    nested = "GIT_ASKPASS=/tmp/evil git lane exec alpha -- git commit -q --allow-empty -m x"
    res = run(nested)
    assert "[unsafe_config]" in res.stderr, res.stderr


# -- configuration keys that name a program, or make one of a commit message (red team 13D) --
# The lane's program (evil.sh, in its own worktree), started by git with git's directory
# first on PATH (its `git` is the real one), moves main with the hooks off and leaves a
# marker: main unmoved and no marker is the guarantee.
PAYLOAD = (
    "#!/bin/sh\n"
    "unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY\n"
    'git -C "$HUB" -c core.hooksPath=/dev/null update-ref refs/heads/main refs/heads/lane/alpha\n'
    'echo ran >> "$MARKER"\n'
    'case $1 in *COMMIT_EDITMSG) echo msg > "$1" ;; esac\n'
    "exit 0\n"
)
PRELUDE = (
    "set -e; echo work > work.txt; git add work.txt; git commit -q -m work; "
    'printf %s "$PAYLOAD" > "$PWD/evil.sh"; chmod +x evil.sh; set +e; '
)


def in_lane(hub: Repo, lane_path: Path, script: str, tmp_path: Path) -> LaneRun:
    """`git lane exec alpha -- sh -c SCRIPT` in lane alpha, with HUB, PAYLOAD, MARKER."""
    env = {"HUB": str(hub.path), "PAYLOAD": PAYLOAD, "MARKER": str(tmp_path / "marker")}
    return hub.lane("exec", "alpha", "--", "sh", "-c", script, cwd=lane_path, env=env)


def held(hub: Repo, main: str | None, tmp_path: Path, r: LaneRun, code: str) -> None:
    """Refused with CODE, main where it was and the lane's program never ran."""
    ran = (tmp_path / "marker").exists()
    assert hub.sha() == main and not ran, (hub.sha() != main, ran, r.rc, r.stdout, r.stderr)
    assert f"git-lane: refused [{code}]" in r.stderr, (r.rc, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "trigger",
    [
        "git -c gpg.format=ssh -c commit.gpgSign=true "
        '-c gpg.ssh.defaultKeyCommand="$PWD/evil.sh" commit -q --allow-empty -m x',
        "git config gpg.format ssh && git config commit.gpgSign true && "
        'git config gpg.ssh.defaultKeyCommand "$PWD/evil.sh" && git commit -q --allow-empty -m x',
    ],
    ids=["dash_c", "git_config"],
)
def test_the_ssh_signing_key_command_is_a_program_key(
    hub: Repo, tmp_path: Path, trigger: str
) -> None:
    """gpg.ssh.defaultKeyCommand names the program git runs to find an ssh signing key:
    refused as -c and as a `git config` write (saved, the owner's commits would run it)."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    r = in_lane(hub, lane_path, PRELUDE + trigger + " </dev/null", tmp_path)
    held(hub, main, tmp_path, r, "unsafe_config")


def test_an_archive_filter_command_is_a_program_key(hub: Repo, tmp_path: Path) -> None:
    """tar.<format>.command is the filter `git archive --format=<format>` pipes the tar
    through (with the shell): -c of it is refused, though archive without -o is read-only."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        PRELUDE + 'git -c tar.evil.command="sh $PWD/evil.sh" archive --format=evil HEAD '
        "</dev/null >/dev/null"
    )
    held(hub, main, tmp_path, in_lane(hub, lane_path, script, tmp_path), "unsafe_config")


def test_a_commit_message_line_never_becomes_a_rebase_todo_command(
    hub: Repo, tmp_path: Path
) -> None:
    """rebase.instructionFormat=%B writes each commit's whole message into the todo list of
    any rebase: a body line `exec ...` would be a todo command. Refused as -c."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        PRELUDE + 'git commit -q --allow-empty -m subject -m "exec sh $PWD/evil.sh"; '
        "GIT_SEQUENCE_EDITOR=: git -c rebase.instructionFormat=%B rebase -q -i HEAD~1 </dev/null"
    )
    held(hub, main, tmp_path, in_lane(hub, lane_path, script, tmp_path), "unsafe_config")


def test_a_saved_instruction_format_is_refused_and_a_rebase_runs_with_a_one_line_one(
    hub: Repo, tmp_path: Path
) -> None:
    """`git config rebase.instructionFormat %B` is refused (the owner's rebases would read
    it); one already in the configuration (the owner's) makes a rebase refuse, and its
    next, the rebase with -c rebase.instructionFormat=%s, runs and runs no message line."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    body = PRELUDE + 'git commit -q --allow-empty -m subject -m "exec sh $PWD/evil.sh"; '
    r = in_lane(hub, lane_path, body + "git config rebase.instructionFormat %B", tmp_path)
    held(hub, main, tmp_path, r, "unsafe_config")
    hub.git("config", "rebase.instructionFormat", "%s%n%b")
    r = hub.lane(
        "exec", "alpha", "--", "git", "rebase", "-q", "HEAD~1", "--force-rebase",
        cwd=lane_path,
    )  # fmt: skip
    assert r.rc == 1 and "refused [unsafe_config]" in r.stderr, (r.rc, r.stderr)
    nxt = r.stderr.split("Next: ", 1)[1].splitlines()[0]
    assert nxt.startswith("git -c rebase.instructionFormat=%s rebase"), nxt
    env = {"MARKER": str(tmp_path / "marker"), "HUB": str(hub.path)}
    r = hub.lane("exec", "alpha", "--", "sh", "-c", nxt, cwd=lane_path, env=env)
    assert r.rc == 0, (r.rc, r.stderr)
    assert hub.sha() == main and not (tmp_path / "marker").exists()


@pytest.mark.parametrize(
    ("trigger", "code"),
    [
        (
            'mkdir hk; cp evil.sh hk/post-checkout; git clone -q -c core.hooksPath="$PWD/hk" '
            '"$GITLANE_COMMON" d1',
            "hooks_disabled",
        ),
        (
            "echo '* filter=x' > attrs; git clone -q --config filter.x.smudge=\"sh $PWD/evil.sh\" "
            '-c core.attributesFile="$PWD/attrs" "$GITLANE_COMMON" d2',
            "unsafe_config",
        ),
        (
            "echo '* filter=x' > attrs; git clone -qcfilter.x.smudge=\"sh $PWD/evil.sh\" "
            '-c core.attributesFile="$PWD/attrs" "$GITLANE_COMMON" d3',
            "unsafe_config",
        ),
    ],
    ids=["hooks_path", "smudge_filter", "bundled_short"],
)
def test_clones_own_config_option_is_judged_like_git_c(
    hub: Repo, tmp_path: Path, trigger: str, code: str
) -> None:
    """`git clone -c KEY=VALUE` (also --config, -qcKEY=VALUE) sets KEY in the new repository
    before its checkout: a hook path or a program key there is refused as `git -c` is."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    r = in_lane(hub, lane_path, PRELUDE + trigger + " </dev/null", tmp_path)
    held(hub, main, tmp_path, r, code)


def test_a_clone_with_a_plain_config_option_still_works(hub: Repo, tmp_path: Path) -> None:
    lane_path = hub.create("alpha")
    r = in_lane(hub, lane_path, 'git clone -q -c user.name=x "$GITLANE_COMMON" d4', tmp_path)
    assert r.rc == 0, (r.rc, r.stderr)
    assert git_config(lane_path / "d4", "user.name") == "x"


def git_config(where: Path, key: str) -> str:
    res = subprocess.run(["git", "config", key], cwd=where, text=True, capture_output=True)
    return res.stdout.strip()


# a commit C off the lane's history (commit-tree: no ref moves), the index put back
_SIDE_COMMIT = (
    "echo side > side.txt; git add side.txt; T=$(git write-tree); "
    "C=$(git commit-tree $T -p HEAD -m side); git rm -q --cached side.txt; rm side.txt; "
)


@pytest.mark.parametrize(
    "how",
    [
        _SIDE_COMMIT + "git cherry-pick --strategy=a/x $C",
        "git rebase --force-rebase -s a/x HEAD~1",
        "git rebase --force-rebase --strategy a/x HEAD~1",
        "git rebase -fsb/q HEAD~1",
        "git pull --rebase -s a/x . lane/alpha",
        "git -c pull.twohead=a/x merge --no-ff HEAD~1",
    ],
    ids=["cherry_pick", "rebase_s", "rebase_strategy", "short_group", "pull", "twohead"],
)
def test_only_a_strategy_git_ships_runs(hub: Repo, tmp_path: Path, how: str) -> None:
    """Red team 13R: the sequencer (cherry-pick, rebase; pull --rebase hands -s to
    rebase) and merge run a strategy other than ort/recursive as `git merge-<NAME>`, the
    dashed external `git-merge-<NAME>`: a NAME with a `/` is a path from the worktree's
    top (run-command.c searches PATH only for a name without one), a file of the lane's,
    run with git's own directory first on PATH, past the shim (it moved main with the
    hooks off). Only the six names git ships pass; the next, without -s, runs."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = PRELUDE + "mkdir git-merge-a git-merge-b; cp evil.sh git-merge-a/x; "
    script += "cp evil.sh git-merge-b/q; " + how
    r = in_lane(hub, lane_path, script + " </dev/null", tmp_path)
    held(hub, main, tmp_path, r, "unsafe_config")
    if "rebase --force-rebase -s" in how:
        nxt = refusal_next_of(in_lane(hub, lane_path, how, tmp_path).stderr)
        assert nxt == "git rebase --force-rebase 'HEAD~1'", nxt
        assert in_lane(hub, lane_path, nxt, tmp_path).rc == 0


def refusal_next_of(stderr: str) -> str:
    return stderr.split(". Next: ", 1)[1].splitlines()[0]


@pytest.mark.parametrize("cmd", ["cherry-pick", "merge -q"], ids=["cherry_pick", "merge"])
def test_a_strategy_option_never_reaches_read_tree_as_an_option(
    hub: Repo, tmp_path: Path, cmd: str
) -> None:
    """Red team 13R: `-s resolve` (git's script git-merge-resolve; octopus the same) gets
    each `-X OPT` as `--OPT` among its merge bases and passes them unquoted to `git
    read-tree -u -m --aggressive`: `-X index-output=FILE` made read-tree rename its merged
    index onto FILE, outside the lane (the owner's .git/index too). Only the values
    ort/recursive know pass; the next (without -X) runs and writes nothing outside."""
    lane_path = hub.create("alpha")
    out = tmp_path / "outside" / "precious.txt"
    out.parent.mkdir()
    out.write_text("the owner's file\n")
    script = (
        PRELUDE + 'printf "1\\n2\\n3\\n4\\n5\\n" > a.txt; git add a.txt; git commit -qm base; '
        'printf "1x\\n2\\n3\\n4\\n5\\n" > a.txt; git commit -qam lane; '
        'printf "1\\n2\\n3\\n4\\n5y\\n" > a.txt; git add a.txt; T=$(git write-tree); '
        "C=$(git commit-tree $T -p HEAD~1 -m side); git checkout -q HEAD -- a.txt; "
        f'git {cmd} --strategy=resolve -X "index-output=$OUT" $C </dev/null; echo rc=$?'
    )
    r = in_lane(hub, lane_path, script.replace("$OUT", str(out)), tmp_path)
    assert out.read_bytes() == b"the owner's file\n", (r.stdout, r.stderr)
    assert "refused [unsafe_config]" in r.stderr, (r.rc, r.stdout, r.stderr)
    nxt = refusal_next_of(r.stderr)
    assert "index-output" not in nxt and "--strategy=resolve" in nxt, nxt


def test_git_hook_run_runs_only_a_plain_hook_name(hub: Repo, tmp_path: Path) -> None:
    """Red team 13R: `git hook run NAME` runs `<hooks dir>/NAME` when it is executable
    (hook.c find_hook: no check of NAME), so `../` in NAME reached any file: the lane's
    own evil.sh ran with git's own directory first on PATH, past the shim, and moved main
    with the hooks off. Refused; the next runs the file itself, through the shim (its git
    call refused), and `--ignore-missing` of a hook that is not there passes."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        PRELUDE + "R=$(python3 -c 'import os,sys;print(os.path.relpath(*sys.argv[1:]))' "
        '"$PWD/evil.sh" "$GITLANE_COMMON/hooks"); git hook run "$R" </dev/null'
    )
    r = in_lane(hub, lane_path, script, tmp_path)
    held(hub, main, tmp_path, r, "unsafe_config")
    nxt = refusal_next_of(r.stderr)
    assert nxt == str(lane_path.resolve() / "evil.sh"), nxt
    r = in_lane(hub, lane_path, nxt, tmp_path)
    assert hub.sha() == main and (tmp_path / "marker").exists(), (r.rc, r.stderr)
    r = in_lane(hub, lane_path, "git hook run --ignore-missing no-such-hook", tmp_path)
    assert r.rc == 0, (r.rc, r.stderr)


@pytest.mark.parametrize(
    "add",
    [
        'git remote add -- "$N" .',
        'git remote add -f -t main -- "$N" .',
        'git remote add keep .; git remote rename keep -- "$N"',
        'git config "remote.$N.url" .',
    ],
    ids=["remote_add", "remote_add_f", "remote_rename", "git_config"],
)
def test_no_remote_is_named_as_an_option_word(hub: Repo, tmp_path: Path, add: str) -> None:
    """Red team 13R: git takes any remote name that makes a valid refname, and
    `--upload-pack=PROG` is one; `remote add -f` fetches it at once (`git fetch NAME`, no
    `--`: the lane's program ran past the shim), and in the shared config every later
    `git fetch --all` / `remote update` (one child `git fetch ... NAME` per remote) and
    maintenance prefetch takes it as that option, the owner's own fetch in the hub too:
    it ran the lane's program and moved main. Refused however the lane names it; the
    owner's later fetch --all runs nothing."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    name = r'N="--upload-pack=eval\${IFS}\"\$(git\${IFS}cat-file\${IFS}blob\${IFS}$S)\""; '
    script = PRELUDE + "S=$(git hash-object -w evil.sh); git remote add origin .; " + name + add
    r = in_lane(hub, lane_path, script + " </dev/null", tmp_path)
    held(hub, main, tmp_path, r, "unsafe_config")
    env = {"HUB": str(hub.path), "MARKER": str(tmp_path / "marker")}
    owner = git(hub.path, "fetch", "--all", check=False, env=env)  # the owner, later
    held(hub, main, tmp_path, LaneRun(owner.returncode, r.stderr, r.stderr), "unsafe_config")
    assert "--upload-pack" not in git(hub.path, "config", "--list").stdout, r.stderr
    if add.startswith("git remote add --"):
        nxt = refusal_next_of(r.stderr)
        assert nxt.startswith("git remote add -- 'upload-pack="), nxt
        assert in_lane(hub, lane_path, nxt, tmp_path).rc == 0
