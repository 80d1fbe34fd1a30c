"""Red team round 2 of issue 11, findings 1 and 4: a sandboxed CMD writes its admin dir
(config.worktree, rebase-merge/), and the owner's git then must not run what it names.

Each `test_hole_*` FAILS TODAY on a real hole (severity in its docstring): the attack runs
inside `git lane exec KEY --sandbox` in a real repository, and the test asserts what
README/docs/trust-boundary.md promise."""

from __future__ import annotations

from pathlib import Path

from sandboxhelp import NEEDS_LANDLOCK
from conftest import LaneRun, Repo


pytestmark = NEEDS_LANDLOCK


def _exec(hub: Repo, tmp_path: Path, body: str, *args: str, key: str = "alpha") -> LaneRun:
    script = tmp_path / f"body-{key}.sh"
    script.write_text(body)
    return hub.lane("exec", "--sandbox", key, "--", "sh", str(script), *args)


# Inside the sandbox: commit a .gitattributes naming filter x, then define filter x's clean
# program in the lane's own config.worktree (its admin dir is granted) and dirty a file.
WORKTREE_CONFIG = r"""
set -e
EVIDENCE=$1 HUB_CONFIG=$2
AD=$(git rev-parse --path-format=absolute --git-dir)
echo '* filter=x' > .gitattributes
echo work > w.txt
git add -A && git commit -qm work
P="$PWD/.payload"
cat > "$P" <<P
#!/bin/sh
echo "ran sandbox=\${GITLANE_SANDBOX-none}" >> '$EVIDENCE'
echo '# written by the lane' >> '$HUB_CONFIG'
cat
P
chmod +x "$P"
printf '[filter "x"]\n\tclean = %s\n' "'$P'" > "$AD/config.worktree"
echo more >> w.txt
"""


def test_sandbox_refused_while_worktree_config_is_on(hub: Repo, tmp_path: Path) -> None:
    """Finding 1 (a): with extensions.worktreeConfig on (git sparse-checkout turns it on),
    the lane's <admin>/config.worktree is read by git and CMD could write it: exec
    --sandbox refuses and runs nothing; the next unsets the extension, and it then runs."""
    hub.git("config", "extensions.worktreeConfig", "true")
    hub.create("alpha")
    r = _exec(hub, tmp_path, "echo CMD-RAN\n")
    assert r.rc == 1, r.stdout + r.stderr
    assert "sandbox_failed" in r.stdout + r.stderr
    assert "config --unset extensions.worktreeConfig" in r.stdout + r.stderr
    assert "CMD-RAN" not in r.stdout + r.stderr
    hub.git("config", "--unset", "extensions.worktreeConfig")
    r = _exec(hub, tmp_path, "echo CMD-RAN\n")
    assert r.rc == 0, r.stdout + r.stderr
    assert "CMD-RAN" in r.stdout


def test_worktree_config_program_never_runs_in_the_owners_git(hub: Repo, tmp_path: Path) -> None:
    """Finding 1 (b): a lane's config.worktree written while the extension was off (CMD ran
    sandboxed), read once the owner turns it on: the owner's `git lane status` refuses
    untrusted_git_config (naming the file and the unset) instead of running the filter."""
    hub.create("alpha")
    evidence = tmp_path / "evidence"
    cfg = hub.common_dir / "config"
    r = _exec(hub, tmp_path, WORKTREE_CONFIG, str(evidence), str(cfg))
    assert r.rc == 0, r.stdout + r.stderr
    hub.git("config", "extensions.worktreeConfig", "true")
    before = cfg.read_text()
    st = hub.lane("status")
    assert st.rc == 1, st.stdout + st.stderr
    assert "untrusted_git_config" in st.stdout + st.stderr
    assert "config.worktree' --unset-all filter.x.clean" in st.stdout + st.stderr
    assert not evidence.exists(), evidence.read_text()
    assert cfg.read_text() == before
    admin = hub.common_dir / "worktrees"
    (wt,) = [p / "config.worktree" for p in admin.iterdir() if (p / "config.worktree").exists()]
    hub.git("config", "--file", str(wt), "--unset-all", "filter.x.clean")
    hub.git("config", "--file", str(wt), "core.sparseCheckout", "false")  # allowed there
    assert hub.lane("status").rc == 0
    assert not evidence.exists()


REBASE_TODO = r"""
set -e
EVIDENCE=$1 HUB_CONFIG=$2
echo w > w.txt && git add w.txt && git commit -qm work
AD=$(git rev-parse --path-format=absolute --git-dir)
P="$AD/pl"
printf '#!/bin/sh\necho "ran sandbox=${GITLANE_SANDBOX-none}" >> "%s"\necho "# pwned" >> "%s"\n' \
  "$EVIDENCE" "$HUB_CONFIG" > "$P"
chmod +x "$P"
GIT_SEQUENCE_EDITOR="sed -i '1i break'" /usr/bin/git rebase -q -i --exec "'$P'" HEAD~1 || true
test -d "$AD/rebase-merge"
"""


def test_rebase_todo_exec_never_runs_on_owner_continue(hub: Repo, tmp_path: Path) -> None:
    """Finding 4. The lane's admin dir is granted, and
    with it `rebase-merge/git-rebase-todo`: CMD leaves a stopped rebase whose todo holds an
    `exec` line; status says `git lane continue alpha`, and the owner's continue runs
    `git rebase --continue` outside any sandbox: refused rebase_todo_untrusted instead."""
    hub.create("alpha")
    evidence = tmp_path / "evidence"
    cfg = hub.common_dir / "config"
    before = cfg.read_text()
    r = _exec(hub, tmp_path, REBASE_TODO, str(evidence), str(cfg))
    assert r.rc == 0, r.stdout + r.stderr
    c = hub.lane("continue", "alpha")
    assert c.rc == 1, c.stdout + c.stderr
    assert "rebase_todo_untrusted" in c.stdout + c.stderr
    assert "git lane abort alpha" in c.stdout + c.stderr
    assert not evidence.exists(), evidence.read_text()
    assert cfg.read_text() == before
    a = hub.lane("abort", "alpha")  # the next: runs no todo line
    assert a.rc == 0, a.stdout + a.stderr
    assert not evidence.exists(), evidence.read_text()
    assert cfg.read_text() == before
    assert hub.lane("sync", "alpha").rc == 0


def test_doctor_says_sandbox_refuses_while_worktree_config_is_on(hub: Repo) -> None:
    hub.git("config", "extensions.worktreeConfig", "true")
    d = hub.lane("doctor")
    assert "exec --sandbox refuses (sandbox_failed)" in d.stdout + d.stderr
    assert "git config --unset extensions.worktreeConfig" in d.stdout + d.stderr
