"""`git lane agent-setup --for claude|codex|aider|opencode` and the Claude Code adapter.

Setup: each tool's files written (merged, never clobbered, idempotent) in a real lane,
kept out of `git status` so land and release are not refused for them. The Claude Code
hook: fed the JSON its hook protocol sends (PreToolUse: session_id, transcript_path, cwd,
hook_event_name, tool_name, tool_input) through the very command the settings file holds,
as Claude Code would run it, without Claude Code installed. The end-to-end cases ask the
real `git lane check`, so they need it (engineers A and B): they fail without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import TAKEN, Repo, earlier_kept, git, needs_modes, owner_lane, take_name
from sandboxhelp import NEEDS_LANDLOCK

from guard import agents, sandbox
from guard.adapters import EXCLUDE_BEGIN as BEGIN
from guard.agents import CheckResult, git_calls

CLAUDE = ".claude/settings.local.json"


def setup(repo: Repo, key: str, tool: str) -> dict[str, Any]:
    r = repo.jlane("agent-setup", key, "--for", tool)
    assert r.rc == 0, r.stderr
    return r.json


def status(lane: Path) -> str:
    return git(lane, "status", "--porcelain=v1", "--untracked-files=all").stdout


def hook_command(lane: Path, matcher: str) -> str:
    settings = json.loads((lane / CLAUDE).read_text())
    for group in settings["hooks"]["PreToolUse"]:
        if group.get("matcher") == matcher:
            return str(group["hooks"][0]["command"])
    raise AssertionError(f"no PreToolUse group for {matcher}")


def event(lane: Path, tool: str, tool_input: dict[str, Any]) -> str:
    """A PreToolUse event as the Claude Code hooks reference documents it."""
    return json.dumps(
        {
            "session_id": "abc123",
            "transcript_path": "/tmp/transcript.jsonl",
            "cwd": str(lane),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": "toolu_01ABC123",
        }
    )


def run_hook(lane: Path, matcher: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """What Claude Code does: run the command with sh, the event on stdin, in the project."""
    return subprocess.run(
        ["sh", "-c", hook_command(lane, matcher)],
        input=stdin,
        cwd=lane,
        text=True,
        capture_output=True,
        timeout=120,
    )


def refused_code(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    line = res.stderr.splitlines()[0]
    assert line.startswith("git-lane: refused ["), res.stderr
    return line.split("[", 1)[1].split("]", 1)[0]


# -- agent-setup: the files ---------------------------------------------------------------
def test_claude_settings_are_merged_idempotently_and_kept_out_of_git_status(repo: Repo) -> None:
    lane = repo.create("alpha")
    (lane / ".claude").mkdir()
    mine = {
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": "true"}]}]
        },
    }
    (lane / CLAUDE).write_text(json.dumps(mine))
    first = setup(repo, "alpha", "claude")
    assert first["files"] == [{"path": str(lane / CLAUDE), "action": "updated"}]
    text = (lane / CLAUDE).read_text()
    second = setup(repo, "alpha", "claude")
    assert second["files"][0]["action"] == "unchanged"
    assert (lane / CLAUDE).read_text() == text
    settings = json.loads(text)
    assert settings["permissions"] == mine["permissions"]  # other keys kept
    groups = settings["hooks"]["PreToolUse"]
    assert groups[0] == mine["hooks"]["PreToolUse"][0]  # the user's own hook kept, first
    assert [g["matcher"] for g in groups[1:]] == ["Edit|MultiEdit|Write|NotebookEdit", "Bash"]
    assert text.count(agents.MARK) == 3  # two PreToolUse hooks and one SessionStart, once
    assert status(lane) == ""
    assert second["command"] == "git lane exec alpha -- claude"
    assert "/.claude/settings.local.json" in second["excluded"]


def test_the_session_start_hook_gives_the_lane_instructions(repo: Repo) -> None:
    lane = repo.create("alpha")
    setup(repo, "alpha", "claude")
    cmd = json.loads((lane / CLAUDE).read_text())["hooks"]["SessionStart"][0]["hooks"][0]
    res = subprocess.run(["sh", "-c", cmd["command"]], cwd=lane, text=True, capture_output=True)
    assert res.returncode == 0, res.stderr
    assert "lane/alpha" in res.stdout and "git lane land" in res.stdout
    assert "git lane sync" in res.stdout


def test_land_and_release_are_not_blocked_by_the_adapter_files(repo: Repo) -> None:
    repo.config("gate", "off")
    lane = repo.create("alpha")
    for tool in ("claude", "aider", "opencode", "codex"):
        setup(repo, "alpha", tool)
    repo.commit(lane, "a.txt", "a\n")
    assert status(lane) == ""
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stderr
    assert git(repo.path, "ls-tree", "-r", "--name-only", "main").stdout.split() == [
        "README.md",
        "a.txt",
    ]  # none of them landed
    r = repo.jlane("release", "alpha")  # what setup created is not work to confirm
    assert (r.rc, r.code) == (0, "released"), r.stderr
    assert not lane.exists()


def test_release_still_asks_for_a_changed_adapter_file(repo: Repo) -> None:
    lane = repo.create("alpha")
    setup(repo, "alpha", "aider")
    with open(lane / ".aider.conf.yml", "a") as f:
        f.write("model: mine\n")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stderr
    assert (lane / ".aider.conf.yml").exists()


def test_aider_config_keeps_hooks_on_and_a_foreign_file_is_refused(repo: Repo) -> None:
    lane = repo.create("alpha")
    res = setup(repo, "alpha", "aider")
    conf = (lane / ".aider.conf.yml").read_text()
    assert "git-commit-verify: true" in conf and "no-verify: true" not in conf
    assert json.dumps(res["instructions_file"]) in conf
    assert setup(repo, "alpha", "aider")["files"][0]["action"] == "unchanged"
    lane2 = repo.create("beta")
    (lane2 / ".aider.conf.yml").write_text("model: gpt\n")
    r = repo.jlane("agent-setup", "beta", "--for", "aider")
    assert (r.rc, r.code) == (1, "agent_file_conflict")
    assert (lane2 / ".aider.conf.yml").read_text() == "model: gpt\n"
    assert r.json["next"] == ["git lane agent-setup beta --for aider --move-aside"]


@pytest.mark.parametrize("kind", TAKEN)  # the backup name its next moves to: taken?
def test_a_foreign_agent_file_is_moved_aside_as_told_never_onto_an_earlier_backup(
    repo: Repo, gitlane_on_path: Path, kind: str | None
) -> None:
    lane = repo.create("beta")
    (lane / ".aider.conf.yml").write_text("model: gpt\n")
    backup = lane / ".aider.conf.yml.git-lane-bak"
    aside = take_name(backup, kind)
    r = repo.jlane("agent-setup", "beta", "--for", "aider")
    assert (r.rc, r.code) == (1, "agent_file_conflict"), r.stdout
    for cmd in r.json["next"]:
        res = subprocess.run(["sh", "-c", cmd], cwd=repo.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert aside.read_text() == "model: gpt\n"
    earlier_kept(backup, kind)
    assert "git-commit-verify: true" in (lane / ".aider.conf.yml").read_text()


def test_opencode_config_is_merged(repo: Repo) -> None:
    lane = repo.create("alpha")
    (lane / "opencode.json").write_text(
        json.dumps({"model": "x/y", "permission": {"bash": "ask"}, "instructions": ["A.md"]})
    )
    res = setup(repo, "alpha", "opencode")
    cfg = json.loads((lane / "opencode.json").read_text())
    assert cfg["model"] == "x/y"
    assert cfg["permission"]["external_directory"] == "deny"
    assert cfg["permission"]["bash"]["*"] == "ask"
    assert cfg["permission"]["bash"]["git push*"] == "deny"
    assert cfg["instructions"] == ["A.md", res["instructions_file"]]
    before = (lane / "opencode.json").read_text()
    assert setup(repo, "alpha", "opencode")["files"][0]["action"] == "unchanged"
    assert (lane / "opencode.json").read_text() == before
    assert status(lane) == ""


def test_a_tracked_target_file_is_refused(repo: Repo) -> None:
    (repo.path / "opencode.json").write_text("{}\n")
    repo.git("add", "opencode.json")
    repo.git("commit", "-q", "-m", "opencode config")
    lane = repo.create("alpha")
    r = repo.jlane("agent-setup", "alpha", "--for", "opencode")
    assert (r.rc, r.code) == (1, "agent_file_conflict"), r.stderr
    assert (lane / "opencode.json").read_text() == "{}\n"
    assert status(lane) == ""


def test_an_unknown_lane_is_refused(repo: Repo) -> None:
    r = repo.jlane("agent-setup", "nope", "--for", "codex")
    assert (r.rc, r.code) == (1, "unknown_lane")


def test_a_released_lane_is_refused(repo: Repo) -> None:
    repo.create("alpha")
    assert repo.jlane("release", "alpha").rc == 0
    r = repo.jlane("agent-setup", "alpha", "--for", "claude")
    assert (r.rc, r.code) == (1, "lane_not_active")


def _files(common: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for root, _dirs, names in os.walk(common):
        for n in names:
            p = os.path.join(root, n)
            st = os.lstat(p)
            out[p] = (st.st_mtime_ns, st.st_size)
    return out


CODEX_ENV = "shell_environment_policy.set."


def codex_roots(res: Mapping[str, Any]) -> list[str]:
    """The writable roots agent-setup's codex command line gives Codex's sandbox."""
    arg = next(a for a in res["argv"] if a.startswith("sandbox_workspace_write.writable_roots="))
    return [str(r) for r in json.loads(arg.partition("=")[2])]


def codex_env(res: Mapping[str, Any]) -> dict[str, str]:
    """The variables agent-setup's codex command line sets for Codex's shell commands."""
    out = {}
    for a in res["argv"]:
        if a.startswith(CODEX_ENV):
            name, _, value = a[len(CODEX_ENV) :].partition("=")
            out[name] = json.loads(value)
    return out


def _within(p: str, roots: Sequence[str]) -> bool:
    return any(p == r or p.startswith(r + os.sep) for r in roots)


def test_codex_writable_roots_are_what_a_lane_commit_writes_and_not_main(repo: Repo) -> None:
    assert repo.lane("install").rc == 0  # the hooks run in the sandbox too: what they write counts
    lane = repo.create("alpha")
    repo.git("pack-refs", "--all")  # the lane ref only packed: its directory must still be there
    res = setup(repo, "alpha", "codex")
    roots = [os.path.realpath(r) for r in codex_roots(res)]
    common = os.path.realpath(repo.common_dir)
    assert os.path.realpath(common + "/refs/heads") not in roots and common not in roots
    assert res["argv"][:7] == ["git", "lane", "exec", "--own-objects", "alpha", "--", "codex"]
    assert "--sandbox" in res["argv"] and "workspace-write" in res["argv"]
    assert res["files"] == [] and "writable_roots" in (res["config"] or "")
    env = codex_env(res)
    assert env["GIT_OBJECT_DIRECTORY"] == env["GITLANE_OBJECTS"]
    assert _within(env["GIT_OBJECT_DIRECTORY"], roots)
    assert "[shell_environment_policy.set]" in (res["config"] or "")
    # every file a commit (and an amend) in the lane writes outside the worktree, with the
    # environment Codex's commands get, is inside a root; the shared store is untouched
    before = _files(Path(common))
    (lane / "b.txt").write_text("b\n")
    git(lane, "add", "b.txt", env=env)
    git(lane, "commit", "-q", "-m", "b", env=env)
    git(lane, "commit", "-q", "--amend", "-m", "b2", env=env)
    changed = [p for p, v in _files(Path(common)).items() if before.get(p) != v]
    outside = [p for p in changed if not _within(p, roots)]
    assert changed and outside == []
    assert not any(p.startswith(os.path.join(common, "refs", "heads", "main")) for p in changed)
    assert not any(_within(p, [os.path.join(common, "objects")]) for p in changed)


def test_codex_writable_roots_are_what_exec_sandbox_grants_in_git_dirs(repo: Repo) -> None:
    """Each root agent-setup gives Codex is one `git lane exec --sandbox` grants the same
    lane (sandbox.grants); of git's directories only the lane's private store is not
    listed, as it lies in the admin dir, which is. Nothing encloses the shared store."""
    repo.create("alpha")
    repo.git("config", "rerere.enabled", "true")
    res = setup(repo, "alpha", "codex")
    roots = codex_roots(res)
    from guard import lane
    from guard.repo import Repo as GRepo

    grepo = GRepo.discover(repo.path)
    g = sandbox.grants(grepo, lane.get(grepo, "alpha"))
    gits = [p for p in g.writable if p in g.plain]
    # and a temp dir of the lane's own, never the shared /tmp or $TMPDIR (the owner's
    # clean gate worktrees are made there, and their gates run unconfined)
    # (made where no grant of exec --sandbox reaches it: red team 17 F4)
    tmp = sandbox.codex_tmp(
        os.path.dirname(os.path.dirname(os.path.dirname(g.private_cache))), grepo.slug, "alpha"
    )
    assert not tmp.startswith(g.private_cache + "/")
    assert roots == [*(p for p in gits if not p.endswith("/objects")), tmp]
    assert os.path.isdir(tmp) and not os.path.islink(tmp)
    assert {codex_env(res)[v] for v in ("TMPDIR", "TMP", "TEMP")} == {tmp}
    for key in ("exclude_slash_tmp", "exclude_tmpdir_env_var"):
        assert f"sandbox_workspace_write.{key}=true" in res["argv"], res["argv"]
        assert f"{key} = true" in res["config"]
    assert all(p in g.writable for p in roots if p != tmp)
    shared = os.path.realpath(repo.common_dir / "objects")
    assert not any(_within(shared, [r]) for r in roots)
    assert not any(r.endswith("/rr-cache") for r in roots)  # rerere on: never granted


def test_codex_roots_that_cannot_be_decided_are_refused_and_the_next_works(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """With extensions.worktreeConfig on, git reads the lane's config.worktree (in its
    admin dir, a root) in the owner's calls: refused as `exec --sandbox` refuses it, and
    the next, run as written, lets agent-setup go on."""
    repo.create("alpha")
    repo.git("config", "extensions.worktreeConfig", "true")
    r = repo.jlane("agent-setup", "alpha", "--for", "codex")
    assert (r.rc, r.code) == (1, "sandbox_failed"), r.stdout
    assert r.json["next"][-1] == "git lane agent-setup alpha --for codex"
    for step in r.json["next"]:
        done = subprocess.run(step, shell=True, cwd=repo.path, capture_output=True, text=True)
        assert done.returncode == 0, (step, done.stdout, done.stderr)
    assert "sandbox_workspace_write.writable_roots=" in done.stdout


def test_codex_roots_refuse_a_lane_ref_directory_that_is_a_link(repo: Repo) -> None:
    """Codex's sandbox follows a root that is a symlink: `refs/heads/lane` made a link to
    refs/heads would open main to it."""
    repo.create("alpha")
    repo.git("pack-refs", "--all")
    heads = repo.common_dir / "refs" / "heads"
    assert not (heads / "lane").exists()  # packed: git removed the directory
    (heads / "lane").symlink_to(heads)
    try:
        # the command's first step (guard/oversize.py) moves a link under the lane refs
        # into kept/ before anything reads it: the roots then hold no link
        r = repo.jlane("agent-setup", "alpha", "--for", "codex")
        assert r.rc == 0, r.stdout + r.stderr
        assert not (heads / "lane").is_symlink()
        roots = codex_roots(r.json)
        assert all(os.path.realpath(x) == x for x in roots), roots  # no root is a link
        assert str(heads) not in roots
    finally:
        if (heads / "lane").is_symlink():
            (heads / "lane").unlink()


@NEEDS_LANDLOCK
def test_agent_setup_for_codex_never_grants_the_shared_object_store(
    repo: Repo, tmp_path: Path
) -> None:
    """Red team 15A F3. git does not re-hash an object it reads: a process that may write
    the shared store renames other bytes over main's commit object (loose objects are
    0444 files in a writable directory), and main then names what it chose, or (git 2.39
    checks a loose object's hash when it inflates it) main's tip commit is destroyed.
    agent-setup gave Codex's sandbox `<common>/objects`; a Landlock ruleset granting
    exactly its roots (plus the lane and a temp dir) stands for Codex's sandbox."""
    lp = repo.create("alpha")
    roots = codex_roots(setup(repo, "alpha", "codex"))
    repo.commit(repo.path, "c.txt", "c\n")  # main's tip is then not its root commit
    tip = repo.sha("refs/heads/main")
    first = repo.git("rev-list", "--max-parents=0", "main").stdout.strip()
    assert tip is not None and tip != first
    objects = repo.common_dir / "objects"
    assert (objects / tip[:2] / tip[2:]).exists() and (objects / first[:2] / first[2:]).exists()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    prepared = sandbox.prepare(sandbox.Grants(writable=[str(lp), *roots, str(scratch)]))
    forge = (
        "import os, shutil, sys\n"
        "objects, tip, first = sys.argv[1:4]\n"
        "tmp = os.path.join(objects, tip[:2], 'forged.tmp')\n"
        "shutil.copyfile(os.path.join(objects, first[:2], first[2:]), tmp)\n"
        "os.rename(tmp, os.path.join(objects, tip[:2], tip[2:]))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", forge, str(objects), tip, first],
            preexec_fn=prepared,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        prepared.close()
    after = repo.git("cat-file", "-p", "main", check=False)
    assert done.returncode != 0 and after.returncode == 0, (
        "inside a sandbox with agent-setup's codex roots, main's tip commit object was "
        f"overwritten (forge rc {done.returncode}); `git cat-file -p main`: "
        f"{after.stdout!r} {after.stderr.strip()!r}"
    )


# Codex as exec runs it: CMD confines the commands it starts (here: one) to the roots
CODEX_LIKE = (
    "import json, os, sys\n"
    "sys.path.insert(0, os.environ['GITLANE_PYPATH'])\n"
    "from guard import sandbox\n"
    "roots, tmp = json.loads(sys.argv[1]), sys.argv[2]\n"
    "devices = [d for d in sandbox.DEVICES if os.path.exists(d)]\n"
    "g = sandbox.Grants(writable=[os.getcwd(), *roots, tmp, *devices])\n"
    "sandbox.prepare(g)()\n"
    "os.environ.update(json.loads(sys.argv[3]))\n"
    "os.environ['TMPDIR'] = tmp\n"
    "os.execvp(sys.argv[4], sys.argv[4:])\n"
)


@NEEDS_LANDLOCK
def test_a_codex_lane_commits_into_its_own_store_and_lands(
    repo: Repo, gitlane_on_path: Path, tmp_path: Path
) -> None:
    """agent-setup's codex command, with Codex standing in as a process that confines
    what it runs to the roots and sets the shell environment it was given: a commit (and
    an amend) works there without the shared store, exec copies it into the shared store
    when CMD ends, and `git lane land` moves main to it."""
    assert repo.lane("install").rc == 0
    repo.config("gate_command", "true")
    lp = repo.create("alpha")
    res = setup(repo, "alpha", "codex")
    roots = codex_roots(res)
    assert not any(_within(str(repo.common_dir / "objects"), [r]) for r in roots)
    argv = res["argv"]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    body = "echo b > b.txt && git add b.txt && git commit -qm b && git commit -q --amend -m b2"
    cmd = [*argv[2 : argv.index("codex")], sys.executable, "-c", CODEX_LIKE, json.dumps(roots)]
    cmd += [str(scratch), json.dumps(codex_env(res)), "sh", "-c", body]
    r = repo.lane(*cmd, cwd=lp)
    assert r.rc == 0, (r.stdout, r.stderr)
    tip = git(lp, "rev-parse", "HEAD").stdout.strip()
    assert git(lp, "log", "-1", "--format=%s").stdout.strip() == "b2"
    store = os.path.join(codex_env(res)["GIT_OBJECT_DIRECTORY"], tip[:2], tip[2:])
    assert os.path.exists(store), "the commit went elsewhere than the lane's own store"
    # absorbed when CMD ended: the hub's plain git reads it
    assert repo.git("cat-file", "-e", tip, check=False).returncode == 0
    landed = repo.jlane("land", "alpha")
    assert landed.rc == 0, landed.stdout
    assert repo.git("show", "main:b.txt").stdout == "b\n"


# -- the hook, end to end (needs `git lane check` from the shims work) ---------------------
@pytest.fixture
def claude_lane(repo: Repo) -> Path:
    lane = repo.create("alpha")
    setup(repo, "alpha", "claude")
    return lane


FILE_MATCHER = "Edit|MultiEdit|Write|NotebookEdit"


def test_hook_allows_a_write_inside_the_lane(claude_lane: Path) -> None:
    ev = event(
        claude_lane, "Write", {"file_path": str(claude_lane / "src" / "a.py"), "content": "x"}
    )
    res = run_hook(claude_lane, FILE_MATCHER, ev)
    assert res.returncode == 0, res.stderr


def test_hook_denies_a_write_outside_the_lane(claude_lane: Path, tmp_path: Path) -> None:
    ev = event(claude_lane, "Write", {"file_path": str(tmp_path / "elsewhere.txt"), "content": "x"})
    assert refused_code(run_hook(claude_lane, FILE_MATCHER, ev)) == "path_outside_lane"
    assert not (tmp_path / "elsewhere.txt").exists()


def test_hook_denies_an_edit_in_the_git_dir(claude_lane: Path, repo: Repo) -> None:
    target = repo.common_dir / "config"
    ev = event(
        claude_lane,
        "Edit",
        {
            "file_path": str(target),
            "old_string": "[core]",
            "new_string": "[core]\n\thooksPath = /x",
        },
    )
    assert refused_code(run_hook(claude_lane, FILE_MATCHER, ev)) in (
        "protected_path",
        "path_outside_lane",
    )
    ev = event(claude_lane, "MultiEdit", {"file_path": str(claude_lane / ".git"), "edits": []})
    assert refused_code(run_hook(claude_lane, FILE_MATCHER, ev)) == "protected_path"


def test_hook_denies_git_push_and_allows_git_status(claude_lane: Path) -> None:
    ev = event(claude_lane, "Bash", {"command": "git push origin HEAD:main", "description": "push"})
    assert refused_code(run_hook(claude_lane, "Bash", ev)) == "main_mutation_refused"
    ev = event(claude_lane, "Bash", {"command": "git status --short && git log -1"})
    res = run_hook(claude_lane, "Bash", ev)
    assert res.returncode == 0, res.stderr


# -- the hook, on its own (no `git lane check` needed) ------------------------------------
def test_hook_allows_a_command_without_git(claude_lane: Path) -> None:
    res = run_hook(claude_lane, "Bash", event(claude_lane, "Bash", {"command": "ls -la"}))
    assert (res.returncode, res.stderr) == (0, "")


@pytest.mark.parametrize(
    "stdin",
    ["not json at all", "[]", json.dumps({"tool_name": "Write"}), ""],
)
def test_hook_denies_malformed_input_without_a_traceback(claude_lane: Path, stdin: str) -> None:
    assert refused_code(run_hook(claude_lane, FILE_MATCHER, stdin)) == "adapter_facts_unknown"


def test_hook_denies_git_it_cannot_read(claude_lane: Path) -> None:
    ev = event(claude_lane, "Bash", {"command": 'sh -c "git push origin main"'})
    assert refused_code(run_hook(claude_lane, "Bash", ev)) == "adapter_facts_unknown"


def test_a_hook_that_cannot_start_still_denies(claude_lane: Path) -> None:
    """Claude Code runs the tool on any exit but 2: a missing interpreter must block."""
    cmd = hook_command(claude_lane, FILE_MATCHER).replace("/python", "/no-such-python", 1)
    ev = event(claude_lane, "Write", {"file_path": str(claude_lane / "a"), "content": ""})
    res = subprocess.run(["sh", "-c", cmd], input=ev, text=True, capture_output=True)
    assert res.returncode == 2 and "[adapter_facts_unknown]" in res.stderr, res.stderr


class Recorder:
    def __init__(self, answer: CheckResult) -> None:
        self.calls: list[tuple[str, list[str], str, dict[str, str]]] = []
        self.answer = answer

    def __call__(
        self, kind: str, args: Sequence[str], cwd: str, overlay: Mapping[str, str]
    ) -> CheckResult:
        self.calls.append((kind, list(args), cwd, dict(overlay)))
        return self.answer


ALLOWED = CheckResult(0, {"ok": True, "code": "allowed"})
REFUSED = CheckResult(
    1, {"ok": False, "code": "main_mutation_refused", "message": "no", "next": ["git lane land"]}
)


def test_decide_asks_the_check_for_each_path_and_git_call() -> None:
    ev = json.loads(
        event(Path("/l"), "NotebookEdit", {"notebook_path": "n.ipynb", "new_source": ""})
    )
    rec = Recorder(ALLOWED)
    assert agents.decide(ev, "alpha", "/l", rec).allow
    assert rec.calls == [("write", ["/l/n.ipynb"], "/l", {})]
    rec = Recorder(ALLOWED)
    ev = json.loads(
        event(Path("/l"), "Bash", {"command": "cd sub && GIT_DIR=/x git commit -m m; git status"})
    )
    assert agents.decide(ev, "alpha", "/l", rec).allow
    assert rec.calls == [
        ("git", ["-C", "/l/sub", "commit", "-m", "m"], "/l", {"GIT_DIR": "/x"}),
        ("git", ["-C", "/l/sub", "status"], "/l", {}),  # the cd holds after `;` too
    ]
    v = agents.decide(ev, "alpha", "/l", Recorder(REFUSED))
    assert not v.allow
    assert (v.code, v.next) == ("main_mutation_refused", ("git lane land",))
    # a check that gives no decision (missing, crashed) denies
    v = agents.decide(ev, "alpha", "/l", Recorder(CheckResult(2, None, "Error: No such command")))
    assert not v.allow and v.code == "adapter_facts_unknown"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls -la", []),
        ("git status", [["status"]]),
        ("git push origin main 2>&1 | tail -3", [["push", "origin", "main"]]),
        ("cat .gitignore >/dev/null; git add -A", [["add", "-A"]]),
        ("grep -rn git docs", []),
        ("/usr/bin/git commit -q -m 'x y'", [["commit", "-q", "-m", "x y"]]),
        (
            "git commit -m \"$(cat <<'EOF'\nfix: git push later\nEOF\n)\"",
            [["commit", "-m", agents.PLACEHOLDER]],
        ),
        (
            "git commit -F - <<EOF\ngit push\nEOF\ngit log -1",
            [["commit", "-F", "-"], ["log", "-1"]],
        ),
        ("git lane land", [["lane", "land"]]),
        ("env GIT_DIR=/x git log", [["log"]]),
    ],
)
def test_git_calls_reads_plain_commands(command: str, expected: list[list[str]]) -> None:
    calls = git_calls(command, "/lane")
    assert not isinstance(calls, str), calls
    assert [c.argv for c in calls] == expected


@pytest.mark.parametrize(
    "command",
    [
        'sh -c "git push"',
        "bash -lc 'cd /x && git commit -am y'",
        "echo $(git rev-parse HEAD)",
        "echo `git rev-parse HEAD`",
        "g=git; $g push",
        "xargs git add < list",
        "find . -name '*.py' -exec git add {} +",
        "eval git push",
        "git checkout $BRANCH",
        "cd - && git push",
        "git commit -m 'unclosed",
    ],
)
def test_git_calls_refuses_what_it_cannot_read(command: str) -> None:
    assert isinstance(git_calls(command, "/lane"), str)


def test_the_hook_loads_only_the_standard_library() -> None:
    """It runs before every edit and shell command of the agent: no click, plumbum, psutil."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import guard.agents; "
        "print(sorted(m for m in ('click', 'plumbum', 'psutil', 'tomli_w') if m in sys.modules))"
    )
    root = str(Path(agents.__file__).resolve().parent.parent)
    res = subprocess.run([sys.executable, "-I", "-c", code, root], text=True, capture_output=True)
    assert (res.returncode, res.stdout.strip()) == (0, "[]"), res.stderr


# -- git in disguise: normalised first, fail closed ------------------------------------------
DISGUISED = [
    "/usr/bin/g\\it -c core.hooksPath=/dev/null commit -q --allow-empty -m x",
    'gi""t push origin HEAD:main',
    "gi\\\nt push origin HEAD:main",
    "sh <<EOF\ngit push . HEAD:main\nEOF",
    "bash <<'EOF'\ngit push . HEAD:main\nEOF",
    "alias g=git\ng clean -fdq",
    "python3 -c \"import subprocess; subprocess.run(['git', 'push'])\"",
    "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/dev/null; git commit -q -m x",
    "CDPATH=/tmp cd hub && git clean -fdq",
    "unset GITLANE_ROLE GITLANE_LANE; git lane release vic --confirm yes-discard-lane",
    "PATH=/tmp/evil:$PATH; git status",
    "a=gi; b=t; $a$b push",
    # globs and braces the shell makes git of (rt3 F5)
    "/usr/bin/g?t -c core.hooksPath=/dev/null update-ref refs/heads/main HEAD",
    "/usr/bin/g[i]t -c core.hooksPath=/dev/null update-ref refs/heads/main HEAD",
    "gi* -c core.hooksPath=/dev/null update-ref refs/heads/main HEAD",
    "g{i,}t -c core.hooksPath=/dev/null update-ref refs/heads/main HEAD",
    "sh -c '/usr/bin/g?t push'",
    # variables handed to a script or set by a builtin (rt3 F6)
    "GITLANE_INTERNAL=1 sh y.sh",
    "env GITLANE_INTERNAL=1 sh y.sh",
    "PATH=/usr/bin sh y.sh",
    "GITLANE_INTERNAL=1 git update-ref refs/heads/main HEAD",
    "read GITLANE_LANE </dev/null; sh y.sh",
    "read -r PATH </dev/null; sh y.sh",
    "printf -v GIT_DIR %s /tmp; sh y.sh",
    "mapfile GIT_DIR < f; sh y.sh",
    "let GITLANE_X=1; sh y.sh",
    "for PATH in /usr/bin; do sh y.sh; done",
    "EDITOR=./e.sh sh y.sh",
]


@pytest.mark.parametrize(
    "command",
    ["ls *.py", "echo {a,b}", "GIT_EDITOR=true git rebase --continue", "find . -name '*.py'"],
)
def test_plain_patterns_and_git_variables_for_git_are_no_disguise(command: str) -> None:
    assert agents.disguised(command) is None


@pytest.mark.parametrize("command", DISGUISED)
def test_hook_denies_git_in_disguise(claude_lane: Path, command: str) -> None:
    ev = event(claude_lane, "Bash", {"command": command})
    assert refused_code(run_hook(claude_lane, "Bash", ev))  # exit 2, a refusal line


def test_hook_denies_cd_when_its_own_env_has_cdpath(claude_lane: Path) -> None:
    ev = event(claude_lane, "Bash", {"command": "cd hub && git clean -fdq"})
    cmd = hook_command(claude_lane, "Bash")
    res = subprocess.run(
        ["sh", "-c", cmd],
        input=ev,
        cwd=claude_lane,
        text=True,
        capture_output=True,
        env={**os.environ, "CDPATH": "/tmp"},
    )
    assert refused_code(res) == "adapter_facts_unknown"


def test_hook_still_allows_plain_commands_and_text_heredocs(claude_lane: Path) -> None:
    for command in ("ls -la", "cat > notes.sh <<EOF\nexport PATH=x\nEOF", "git status"):
        res = run_hook(claude_lane, "Bash", event(claude_lane, "Bash", {"command": command}))
        assert res.returncode == 0, (command, res.stderr)


# -- disableAllHooks: never reported as enforced -----------------------------------------------
def test_disable_all_hooks_in_the_local_settings_is_refused_with_a_runnable_way_out(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """The way out is agent-setup's own `--enable-hooks` (the write through directory
    fds), never a command that writes the lane's path (a link the lane put at `.claude`
    meanwhile would take that write to a file of the owner's)."""
    lane = repo.create("alpha")
    target = lane / CLAUDE
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"disableAllHooks": True, "permissions": {"allow": []}}))
    r = repo.jlane("agent-setup", "alpha", "--for", "claude")
    assert (r.rc, r.code) == (1, "agent_file_conflict"), r.stdout
    assert r.json["details"]["why"] == "disableAllHooks"
    assert agents.MARK not in target.read_text()
    for cmd in r.json["next"]:
        assert cmd.startswith("git lane "), cmd
        res = subprocess.run(["sh", "-c", cmd], cwd=repo.path, text=True, capture_output=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    settings = json.loads(target.read_text())
    assert settings.get("disableAllHooks") in (None, False)
    assert settings["permissions"] == {"allow": []}
    assert agents.MARK in target.read_text()


def test_disable_all_hooks_in_the_project_settings_is_overridden_and_said(repo: Repo) -> None:
    lane = repo.create("alpha")
    (lane / ".claude").mkdir()
    (lane / ".claude" / "settings.json").write_text(json.dumps({"disableAllHooks": True}))
    out = setup(repo, "alpha", "claude")
    assert json.loads((lane / CLAUDE).read_text())["disableAllHooks"] is False
    assert any("disableAllHooks" in w and "settings.json" in w for w in out["warnings"]), out


def test_hook_denies_editing_its_own_settings(claude_lane: Path) -> None:
    for rel in (CLAUDE, ".claude/settings.json", ".claude/../.claude/settings.local.json"):
        ev = event(claude_lane, "Write", {"file_path": str(claude_lane / rel), "content": "{}"})
        assert refused_code(run_hook(claude_lane, FILE_MATCHER, ev)) == "protected_path"
    assert agents.MARK in (claude_lane / CLAUDE).read_text()


# -- the shared info/exclude entry: never hides a hub's own file, goes with the last lane -------
def test_a_hub_file_at_the_adapter_path_is_refused(repo: Repo) -> None:
    repo.create("alpha")
    (repo.path / ".claude").mkdir()
    (repo.path / CLAUDE).write_text("{}\n")
    r = repo.jlane("agent-setup", "alpha", "--for", "claude")
    assert (r.rc, r.code) == (1, "agent_file_conflict"), r.stdout
    assert r.json["details"]["why"] == "untracked in another worktree"
    assert "/" + CLAUDE not in (repo.common_dir / "info" / "exclude").read_text()
    assert CLAUDE in status(repo.path)
    # ignored in the hub by its own rule: no harm done, set up
    (repo.path / ".gitignore").write_text(".claude/settings.local.json\n")
    setup(repo, "alpha", "claude")


def test_the_exclude_entry_goes_with_the_last_lane_that_has_it(repo: Repo) -> None:
    repo.create("alpha")
    repo.create("beta")
    setup(repo, "alpha", "claude")
    setup(repo, "beta", "claude")
    exclude = repo.common_dir / "info" / "exclude"
    assert repo.jlane("release", "alpha").code == "released"
    assert "/" + CLAUDE in exclude.read_text()  # beta still has it
    assert repo.jlane("release", "beta").code == "released"
    assert "/" + CLAUDE not in exclude.read_text()
    assert BEGIN not in exclude.read_text()
    (repo.path / ".claude").mkdir()
    (repo.path / CLAUDE).write_text("{}\n")
    assert CLAUDE in status(repo.path)  # the hub's own file is seen again


def test_agent_file_conflict_next_never_moves_a_file_outside_the_lane(
    hub: Repo, tmp_path: Path, gitlane_on_path: Path
) -> None:
    """agent-setup refuses agent_file_conflict because `.claude` in the lane is a link out
    of the lane. Its next was `mv -n -T -- LANE/.claude/settings.local.json ...git-lane-bak`:
    mv resolved `.claude` through that very link and renamed the owner's own file in the
    directory the lane chose (red team 14H-B F6). The next is agent-setup's `--move-aside`,
    which renames the link itself (reached from the lane's root, no link followed)."""
    from guard.errors import join_next

    lp = hub.create("alpha")
    owner = tmp_path / "owner-claude"  # the owner's, outside every lane (~/.claude, say)
    owner.mkdir()
    (owner / "settings.local.json").write_text('{"the owner": "own"}\n')
    (lp / ".claude").symlink_to(owner)  # what the lane writes in its own worktree
    r = hub.jlane("agent-setup", "alpha", "--for", "claude")
    assert (r.rc, r.code) == (1, "agent_file_conflict"), r.stdout
    subprocess.run(join_next(r.json["next"]), shell=True, cwd=hub.path, capture_output=True)
    assert (owner / "settings.local.json").exists(), (
        f"the next of agent_file_conflict, run as written ({r.json['next'][0]}), renamed "
        f"{owner / 'settings.local.json'}, outside the lane, through the lane's link"
    )
    assert sorted(os.listdir(owner)) == ["settings.local.json"]
    assert (lp / ".claude.git-lane-bak").is_symlink()
    assert not (lp / ".claude").is_symlink() and agents.MARK in (lp / CLAUDE).read_text()


def test_a_foreign_agent_file_next_never_moves_a_file_the_lane_re_pointed_to(
    hub: Repo, tmp_path: Path
) -> None:
    """The lane's `.claude/settings.local.json` is no JSON: refused. Between the print and
    the owner's run, the lane makes `.claude` a link to a directory of the owner's: the
    next (agent-setup's own `--move-aside`) renames the link, never the owner's file."""
    from guard.errors import join_next

    lp = hub.create("alpha")
    (lp / ".claude").mkdir()
    (lp / CLAUDE).write_text("not json\n")
    r = hub.jlane("agent-setup", "alpha", "--for", "claude")
    assert (r.rc, r.code) == (1, "agent_file_conflict"), r.stdout
    owner = tmp_path / "owner-claude"
    owner.mkdir()
    (owner / "settings.local.json").write_text('{"the owner": "own"}\n')
    (lp / CLAUDE).unlink()
    (lp / ".claude").rmdir()
    (lp / ".claude").symlink_to(owner)
    subprocess.run(join_next(r.json["next"]), shell=True, cwd=hub.path, capture_output=True)
    assert sorted(os.listdir(owner)) == ["settings.local.json"]
    assert (owner / "settings.local.json").read_text() == '{"the owner": "own"}\n'


# -- the lane's files are read through directory fds, bounded (red team 14I F3) -----------------
def _agent_setup_limited(repo: Repo, *args: str) -> subprocess.CompletedProcess[str]:
    """`git lane agent-setup ARGS --json` as _limited runs it."""
    return _limited(repo, "agent-setup", *args)


def _limited(repo: Repo, *args: str) -> subprocess.CompletedProcess[str]:
    """`git lane ARGS --json` with its address space held to 1.5 GiB (the owner's
    machine's memory is the real bound) and a timeout (a FIFO read blocks)."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    return subprocess.run(
        [sys.executable, "-m", "guard", *args, "--json"],
        cwd=repo.path,
        text=True,
        capture_output=True,
        timeout=60,
        preexec_fn=cap,
    )


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_agent_setup_never_reads_the_lanes_claude_settings_through_a_link(
    hub: Repo, kind: str
) -> None:
    """_hooks_on read the lane's `.claude/settings.json` with Path.read_bytes(): by path,
    through a link, no bound, no O_NONBLOCK. A lane (it may make a link in its worktree,
    or commit and land one) points it at /dev/zero: the owner's agent-setup read until
    memory ran out (MemoryError under 1.5 GiB); at a FIFO it blocked for ever. It is read
    from the lane's root through directory fds, a regular file only, bounded; one that
    cannot be read so gets the `disableAllHooks: false` override, and a warning."""
    lane = hub.create("alpha")
    (lane / ".claude").mkdir()
    settings = lane / ".claude" / "settings.json"
    if kind == "fifo":
        os.mkfifo(lane / ".claude" / "pipe")
        os.symlink("pipe", settings)
    else:
        os.symlink("/dev/zero", settings)
    r = _agent_setup_limited(hub, "alpha", "--for", "claude")
    assert r.returncode == 0, f"rc {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]}"
    out = json.loads(r.stdout)
    assert any("settings.json was not read" in w for w in out["warnings"]), out["warnings"]
    assert json.loads((lane / CLAUDE).read_text())["disableAllHooks"] is False


def test_agent_setup_never_reads_a_grown_agent_file_of_the_lane(hub: Repo) -> None:
    """The tool's own file in the lane (`.claude/settings.local.json`) grown past what a
    settings file is (a sparse 2 GiB file): refused agent_file_conflict with the
    `--move-aside` that renames it, never read whole; the next works as written."""
    from guard.errors import join_next

    lane = hub.create("alpha")
    (lane / ".claude").mkdir()
    with open(lane / CLAUDE, "wb") as f:
        f.truncate(2 << 30)
    r = _agent_setup_limited(hub, "alpha", "--for", "claude")
    assert r.returncode == 1, f"rc {r.returncode}: {r.stderr[-300:]}"
    out = json.loads(r.stdout)
    assert out["code"] == "agent_file_conflict", out
    assert out["next"] == ["git lane agent-setup alpha --for claude --move-aside"]
    res = subprocess.run(join_next(out["next"]), shell=True, cwd=hub.path, capture_output=True)
    assert res.returncode == 0, res.stderr
    assert (lane / (CLAUDE + ".git-lane-bak")).stat().st_size == 2 << 30
    assert agents.MARK in (lane / CLAUDE).read_text()


def test_release_never_reads_a_grown_agent_file_whole(hub: Repo) -> None:
    """Red team 15A F7. agent-setup wrote the lane's `.claude/settings.local.json` (it is
    recorded, so release does not count it as work); the lane (a sandboxed one too: its
    own worktree) runs `truncate -s 3G` on it, no disk used. release (and gc) asked
    adapters.unchanged whether it is still the file agent-setup wrote, which hashed it
    read whole with no limit: MemoryError, exit 3 under 1.5 GiB. Past FILE_MAX it is no
    file agent-setup wrote: work to confirm, never read whole."""
    lane = hub.create("gamma")
    assert hub.jlane("agent-setup", "gamma", "--for", "claude").rc == 0
    with open(lane / CLAUDE, "r+b") as f:
        f.truncate(3 << 30)
    r = _limited(hub, "release", "gamma")
    assert r.returncode == 1, f"rc {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]}"
    assert json.loads(r.stdout)["code"] == "unlanded_work"
    assert (lane / CLAUDE).stat().st_size == 3 << 30  # the lane's, kept
    gc = _limited(hub, "gc")  # inspects every lane as release does
    assert gc.returncode == 0, f"gc rc {gc.returncode}: {gc.stdout[-300:]} {gc.stderr[-300:]}"


@needs_modes
def test_agent_setup_never_crashes_nor_loops_on_a_directory_the_lane_made_unsearchable(
    hub: Repo,
) -> None:
    """Red team 15A F8. The lane (a sandboxed one too: chmod is no Landlock right) makes
    `.claude/settings.local.json` and `chmod 0400 .claude`. A non-root owner's
    `agent-setup --for claude` died (exit 3: Path.is_symlink() raised PermissionError),
    and `--move-aside`, which the file refusals name, refused with itself as the next,
    for ever. The directories on the way get the owner's bits back through directory
    fds first (as release and the oversize check give them)."""
    lp = hub.create("eps")
    (lp / ".claude").mkdir()
    (lp / CLAUDE).write_text("{}\n")
    (lp / ".claude").chmod(0o400)
    try:
        first = owner_lane("agent-setup", "eps", "--for", "claude", "--json", cwd=hub.path)
        assert first.rc == 0, f"agent-setup rc {first.rc}: {first.stdout[-300:]}"
        assert agents.MARK in (lp / CLAUDE).read_text()
        moved = owner_lane(
            "agent-setup", "eps", "--for", "claude", "--move-aside", "--json", cwd=hub.path
        )
        assert moved.rc == 0, moved.stdout[-300:]
    finally:
        (lp / ".claude").chmod(0o755)


def test_agent_setup_never_reads_or_writes_an_exclude_file_a_lanes_commondir_names(
    hub: Repo, tmp_path: Path
) -> None:
    """The lane's `commondir` (in its admin dir, granted to it) re-pointed at a directory
    the lane made, whose `info/exclude` links to a file of the owner's: plain `git
    rev-parse --git-path info/exclude` in that lane names the owner's file (resolved
    through the link), and agent-setup's `ls-files` (tracked?) and `check-ignore` (kept
    out of git status?) ask git there: answers from a repository the lane made. Refused
    lane_pointers_tampered first, as land, sync, release and exec are."""
    lane = hub.create("alpha")
    admin = Path(git(lane, "rev-parse", "--absolute-git-dir").stdout.strip())
    mine = tmp_path / "owner-file"
    mine.write_text("the owner's\n")
    fake = lane / "fake"
    for d in ("objects", "refs", "info"):
        (fake / d).mkdir(parents=True)
    os.symlink(mine, fake / "info" / "exclude")
    (admin / "commondir").write_text(f"{fake}\n")
    r = hub.jlane("agent-setup", "alpha", "--for", "claude")
    assert mine.read_text() == "the owner's\n", "agent-setup wrote a file the lane named"
    assert (r.rc, r.code) == (1, "lane_pointers_tampered"), r.stdout
