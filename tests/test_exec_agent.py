"""A scripted agent under `git lane exec`: a shell script that knows only PATH tries every
act the shims refuse and every act a lane may do, and the test checks each answer's code
and what git holds afterwards. Phase one runs in a fresh lane; then another lane lands
(the owner, outside any lane) and phase two runs in the now stale lane."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import Repo, git

SCRIPT = r"""#!/bin/sh
# try NAME CMD...: run CMD, print "CASE NAME RC CODE" (CODE from a refusal line, or -)
try() {
	name=$1
	shift
	out=$("$@" 2>&1 </dev/null)
	rc=$?
	code=$(printf '%s\n' "$out" | sed -n 's/.*refused \[\([a-z_]*\)\].*/\1/p' | head -n 1)
	printf 'CASE %s %s %s\n' "$name" "$rc" "${code:--}"
	printf '%s\n' "$out" | sed 's/^/    | /'
}
tryin() { # tryin NAME INPUT CMD...: the same with INPUT on stdin
	name=$1 input=$2
	shift 2
	out=$(printf '%s' "$input" | "$@" 2>&1)
	rc=$?
	code=$(printf '%s\n' "$out" | sed -n 's/.*refused \[\([a-z_]*\)\].*/\1/p' | head -n 1)
	printf 'CASE %s %s %s\n' "$name" "$rc" "${code:--}"
	printf '%s\n' "$out" | sed 's/^/    | /'
}
HUB=$1
PHASE=$2
printf 'WHICH git=%s write=%s edit=%s\n' "$(command -v git)" "$(command -v write)" "$(command -v edit)"
if [ "$PHASE" = fresh ]; then
	# what a lane may do
	try status git status --short
	try log git log --oneline -1
	tryin write_new 'hello
' write notes/new.txt
	tryin write_mod 'one two two
' write a.txt
	try edit_one edit a.txt --old one --new ONE
	try add git add -A
	try commit git commit -q -m "agent work"
	try diff git diff HEAD~1 --stat
	# what it may not
	try checkout_main git checkout main
	try switch_new git switch -c elsewhere
	try branch_force_main git branch -f main HEAD
	try branch_delete_main git branch -D main
	try update_ref_main git update-ref refs/heads/main HEAD
	try symref_main git symbolic-ref refs/heads/main refs/heads/lane/alpha
	try push_main git push . HEAD:main
	try worktree_add git worktree add ../other
	try replace git replace HEAD HEAD~1
	try hookspath_c git -c core.hooksPath=/dev/null commit --allow-empty -m x
	try hookspath_config git config core.hooksPath /dev/null
	try hookspath_global git config --global core.hooksPath /dev/null
	try config_env env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=/dev/null git commit --allow-empty -m x
	try dash_c_hub git -C "$HUB" commit --allow-empty -m x
	try git_dir_hub git --git-dir="$HUB/.git" --work-tree="$HUB" commit --allow-empty -m x
	try env_git_dir env GIT_DIR="$HUB/.git" git commit --allow-empty -m x
	try stash git stash
	tryin write_outside 'x
' write ../outside.txt
	tryin write_hub 'x
' write "$HUB/planted.txt"
	tryin write_dotgit 'x
' write .git
	tryin write_common 'x
' write "$HUB/.git/refs/heads/main"
	try edit_no_match edit a.txt --old nothing-like-this --new x
	try edit_ambiguous edit a.txt --old two --new 2
else
	# stale: main moved under a mandatory policy
	tryin write_stale 'x
' write a.txt
	try edit_stale edit a.txt --old ONE --new one
	try checkout_file_stale git checkout -- a.txt
	try status_stale git status --short
	try sync git lane sync
	tryin write_synced 'after sync
' write b.txt
fi
"""

# (case, exit status 0 or not, code) for each phase
FRESH = {
    "status": "-",
    "log": "-",
    "write_new": "-",
    "write_mod": "-",
    "edit_one": "-",
    "add": "-",
    "commit": "-",
    "diff": "-",
    "checkout_main": "main_mutation_refused",
    "switch_new": "main_mutation_refused",
    "branch_force_main": "main_mutation_refused",
    "branch_delete_main": "main_mutation_refused",
    "update_ref_main": "main_mutation_refused",
    "symref_main": "main_mutation_refused",
    "push_main": "main_mutation_refused",
    "worktree_add": "main_mutation_refused",
    "replace": "main_mutation_refused",
    "hookspath_c": "hooks_disabled",
    "hookspath_config": "hooks_disabled",
    "hookspath_global": "hooks_disabled",
    "config_env": "hooks_disabled",
    "dash_c_hub": "path_outside_lane",
    "git_dir_hub": "path_outside_lane",
    "env_git_dir": "path_outside_lane",
    "stash": "stash_shared",
    "write_outside": "path_outside_lane",
    "write_hub": "path_outside_lane",
    "write_dotgit": "protected_path",
    "write_common": "protected_path",
    "edit_no_match": "edit_no_match",
    "edit_ambiguous": "edit_ambiguous",
}
STALE = {
    "write_stale": "sync_required",
    "edit_stale": "sync_required",
    "checkout_file_stale": "sync_required",
    "status_stale": "-",
    "sync": "-",
    "write_synced": "-",
}


@pytest.fixture
def hub(repo: Repo, gitlane_on_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    for k in ("GITLANE_LANE", "GITLANE_ROLE"):
        monkeypatch.delenv(k, raising=False)
    repo.commit(repo.path, "a.txt", "base\n")  # before the hooks: nothing commits on main after
    assert repo.lane("install").rc == 0
    repo.config("gate_command", "true")
    return repo


def _cases(out: str) -> dict[str, tuple[int, str]]:
    got = {}
    for ln in out.splitlines():
        if ln.startswith("CASE "):
            _, name, rc, code = ln.split(" ", 3)
            got[name] = (int(rc), code)
    return got


def _agent(hub: Repo, tmp_path: Path, phase: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "agent.sh"
    script.write_text(SCRIPT)
    return subprocess.run(
        ["git", "lane", "exec", "alpha", "--", "sh", str(script), str(hub.path), phase],
        cwd=hub.path,
        text=True,
        capture_output=True,
        timeout=300,
    )


def _check(got: dict[str, tuple[int, str]], want: dict[str, str], out: str) -> None:
    wrong = {
        name: got.get(name)
        for name, code in want.items()
        if got.get(name) is None or got[name][1] != code or (got[name][0] == 0) != (code == "-")
    }
    assert not wrong, f"{wrong}\n{out}"


def test_scripted_agent_under_exec(hub: Repo, tmp_path: Path) -> None:
    lane_path = hub.create("alpha")
    main_before = hub.sha()

    r = _agent(hub, tmp_path, "fresh")
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    which = next(ln for ln in r.stdout.splitlines() if ln.startswith("WHICH "))
    assert "/shims/git" in which and "/shims/write" in which and "/shims/edit" in which, which
    _check(_cases(r.stdout), FRESH, r.stdout)

    # git holds what the answers say: main untouched, the lane's commit on its branch,
    # nothing planted outside, no shared stash, hooks still on
    assert hub.sha() == main_before
    assert git(hub.path, "rev-parse", "--verify", "-q", "refs/stash", check=False).returncode != 0
    assert (
        git(hub.path, "rev-parse", "--verify", "-q", "refs/heads/elsewhere", check=False).returncode
        != 0
    )
    assert git(hub.path, "config", "--get", "core.hooksPath", check=False).returncode != 0
    assert not (tmp_path / "outside.txt").exists()
    assert not (lane_path.parent / "outside.txt").exists()
    assert not (hub.path / "planted.txt").exists()
    assert (lane_path / ".git").is_file()
    log = git(lane_path, "log", "--format=%s", "-1", "refs/heads/lane/alpha").stdout.strip()
    assert log == "agent work"
    assert (lane_path / "notes" / "new.txt").read_text() == "hello\n"
    assert (lane_path / "a.txt").read_text() == "ONE two two\n"

    # another lane lands: alpha is stale under the default (mandatory) policy
    beta = hub.create("beta")
    hub.commit(beta, "c.txt", "beta\n")
    assert hub.lane("land", "beta").rc == 0

    r = _agent(hub, tmp_path, "stale")
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    _check(_cases(r.stdout), STALE, r.stdout)
    assert (lane_path / "a.txt").read_text() == "ONE two two\n"  # nothing written while stale
    assert (lane_path / "b.txt").read_text() == "after sync\n"
    assert (
        git(
            lane_path, "merge-base", "--is-ancestor", "refs/heads/main", "HEAD", check=False
        ).returncode
        == 0
    )
