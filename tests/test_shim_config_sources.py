"""The git shim against configuration and programs git finds past it (red team 13A).

Every test runs the real CLI in a real repository with `git lane install` done; the lane
process is `git lane exec alpha -- sh -c SCRIPT` (the shims first on PATH, no sandbox)
and uses only what is on PATH: git, write, and files written inside its own lane. The
payload, started by git with git's own directory first on PATH (so its `git` is the real
one), moves main with the hooks switched off: main unmoved is the guarantee."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import LaneRun, Repo, git
from test_shim_policy import ENV, facts

from guard.shimpolicy import decide_git

PAYLOAD = (
    "#!/bin/sh\n"
    "unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE\n"
    'git -C "$HUB" -c core.hooksPath=/dev/null update-ref refs/heads/main refs/heads/lane/alpha\n'
    "echo\n"
)
# the lane commits, writes the payload into its own worktree, and names it in CFG
PRELUDE = (
    "set -e; echo work > work.txt; git add work.txt; git commit -q -m work; "
    'printf %s "$PAYLOAD" > "$PWD/evil.sh"; '
    'printf \'[core]\\n\\tfsmonitor = sh "%s"\\n\' "$PWD/evil.sh" > "$CFG"; set +e; '
)


def run_in_lane(hub: Repo, lane_path: Path, script: str, **env: str) -> LaneRun:
    full = {"HUB": str(hub.path), "PAYLOAD": PAYLOAD, **env}
    return hub.lane("exec", "alpha", "--", "sh", "-c", script, cwd=lane_path, env=full)


def refused(r: LaneRun, code: str) -> None:
    assert r.rc == 1 and f"git-lane: refused [{code}]" in r.stderr, (r.rc, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("cfg", "trigger"),
    [
        # a read-only git command with the user configuration pointed into the lane
        (".gitconfig", 'HOME="$PWD" git status --short'),
        ("g.cfg", 'GIT_CONFIG_GLOBAL="$PWD/g.cfg" git status --short'),
        ("xdg/git/config", 'XDG_CONFIG_HOME="$PWD/xdg" git status --short'),
        # a repository of the lane's own making, nested in the lane
        ("sub/.git/config", "cd sub && git status --short"),
        ("sub/.git/config", "git -C sub log -1"),
        # a bare repository in the lane whose config the `write` shim wrote
        ("b.git/config", 'git --git-dir=b.git --work-tree="$PWD" status --short'),
        ("b.git/config", "GIT_DIR=b.git git log -1"),
    ],
    ids=[
        "home",
        "git_config_global",
        "xdg_config_home",
        "nested_repo",
        "dash_C",
        "git_dir",
        "GIT_DIR",
    ],
)
def test_read_only_git_reads_only_exec_config_and_the_lanes_repository(
    hub: Repo, cfg: str, trigger: str
) -> None:
    """A read-only command passes (in sh or Python) only when git will read the user
    configuration exec started with and, inside the lane, the lane's own repository: a
    configuration the lane wrote is refused unsafe_config before git reads it."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    pre = ""
    if cfg.startswith("sub/"):
        pre = "git init -q sub; "
    if cfg.startswith("b.git/"):
        pre = "git init -q --bare b.git; "
    if cfg.startswith("xdg/"):
        pre = "mkdir -p xdg/git; "
    script = pre + PRELUDE + trigger
    if cfg == "b.git/config":  # written through the write shim, not a redirection
        script = script.replace('> "$CFG"', '| write "$CFG"')
    r = run_in_lane(hub, lane_path, script, CFG=cfg)
    assert hub.sha() == main, (r.rc, r.stdout, r.stderr)
    refused(r, "unsafe_config")


def test_read_only_git_elsewhere_and_its_next(hub: Repo, tmp_path: Path) -> None:
    """A repository outside the lane is read as any git reads it; the `next` of a refused
    HOME override (the command with exec's HOME) runs."""
    lane_path = hub.create("alpha")
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    r = run_in_lane(
        hub,
        lane_path,
        'git -C "$O" status --short && git --git-dir="$O/.git" log -1; echo rc=$?',
        O=str(other),
    )
    assert "rc=128" in r.stdout or "rc=0" in r.stdout, (r.stdout, r.stderr)  # no commit yet
    assert "git-lane: refused" not in r.stderr, r.stderr
    r = run_in_lane(hub, lane_path, 'HOME="$PWD" git status --short')
    refused(r, "unsafe_config")
    nxt = r.stderr.split(". Next: ", 1)[1].splitlines()[0].strip()
    assert nxt == f"HOME={os.environ['HOME']} git status --short", r.stderr
    again = run_in_lane(hub, lane_path, nxt)
    assert again.rc == 0, (again.stdout, again.stderr)


@pytest.mark.parametrize("key", ["trailer.x.command", "trailer.x.cmd", "rebase.updateRefs"])
def test_git_config_refuses_keys_that_run_programs_or_write_other_refs(hub: Repo, key: str) -> None:
    """`git config KEY` of a key that makes git run a program later (for everyone who
    runs git here, unbound) or write other branches is refused like core.fsmonitor."""
    lane_path = hub.create("alpha")
    value = "true" if key == "rebase.updateRefs" else "echo RAN-PAST-THE-SHIM >&2; echo v"
    r = run_in_lane(hub, lane_path, 'git config "$K" "$V"', K=key, V=value)
    got = git(hub.path, "config", "--get", key, check=False).stdout.strip()
    assert got == "", got
    refused(r, "unsafe_config")


def test_trailer_command_given_with_dash_c_is_refused(hub: Repo) -> None:
    """-c trailer.x.command names a program interpret-trailers runs with the real git
    first on PATH: refused, main unmoved."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        "set -e; echo work > work.txt; git add work.txt; git commit -q -m work; set +e; "
        "git -c trailer.x.command=\"sh -c '$PAYLOAD'\" interpret-trailers --trailer x=1 </dev/null"
    )
    r = run_in_lane(hub, lane_path, script)
    assert hub.sha() == main, (r.rc, r.stdout, r.stderr)
    refused(r, "unsafe_config")


@pytest.mark.parametrize(
    "editor", ["GIT_EDITOR=vi", "env -u GIT_EDITOR"], ids=["safe_name", "git_default_vi"]
)
def test_an_editor_found_on_another_path_is_refused(hub: Repo, editor: str) -> None:
    """`vi` (named, or git's default editor) found on a PATH the lane put its own
    directory first on: refused, the lane's `vi` never runs."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        "set -e; echo work > work.txt; git add work.txt; git commit -q -m work; "
        'mkdir -p .bin; { printf %s "$PAYLOAD"; echo \'echo msg > "$1"\'; echo "touch $PWD/vi-ran"; } > .bin/vi; '
        "chmod +x .bin/vi; echo more > more.txt; git add more.txt; set +e; "
        f'PATH="$PWD/.bin:$PATH" {editor} git commit -q'
    )
    r = run_in_lane(hub, lane_path, script)
    assert hub.sha() == main, (r.rc, r.stdout, r.stderr)
    assert not (lane_path / "vi-ran").exists()
    refused(r, "unsafe_config")


def test_a_path_that_reorders_execs_entries_passes_and_plain_commands_stay_in_sh(
    hub: Repo, tmp_path: Path
) -> None:
    """A PATH that only reorders exec's own entries (one moved first) finds the same vi
    and less: git runs. With exec's PATH, log, add and commit decide in sh (no Python)."""
    lane_path = hub.create("alpha")
    mark = tmp_path / "python-ran"
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\necho ran >> '{mark}'\nexit 97\n")
    fake.chmod(0o755)
    script = (
        'set -e; PATH="${PATH##*:}:$PATH" git commit -q --allow-empty -m venv; '
        'GITLANE_PYTHON="$FAKE" git log -1 --oneline; echo x > x.txt; '
        'GITLANE_PYTHON="$FAKE" git add x.txt; GITLANE_PYTHON="$FAKE" git commit -q -m x; '
        'GITLANE_PYTHON="$FAKE" git status --short'
    )
    r = run_in_lane(hub, lane_path, script, FAKE=str(fake))
    assert r.rc == 0, (r.stdout, r.stderr)
    assert not mark.exists(), "a plain command in the lane started Python"
    log = git(lane_path, "log", "--format=%s", "-2").stdout.split()
    assert log == ["x", "venv"], log


def test_an_editor_variable_exec_recorded_stays_in_sh_and_a_changed_one_is_judged(
    hub: Repo, tmp_path: Path
) -> None:
    """LESS=-R (a common shell setting) set when exec started is exec's own value: plain
    commands still decide in sh (no Python on every git call). The same variable changed
    in the lane (`+!CMD` runs CMD in less) goes to Python, which refuses it."""
    lane_path = hub.create("alpha")
    mark = tmp_path / "python-ran"
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\necho ran >> '{mark}'\nexit 97\n")
    fake.chmod(0o755)
    script = 'set -e; GITLANE_PYTHON="$FAKE" git status --short; GITLANE_PYTHON="$FAKE" git log -1'
    r = run_in_lane(hub, lane_path, script, FAKE=str(fake), LESS="-R")
    assert r.rc == 0, (r.stdout, r.stderr)
    assert not mark.exists(), "exec's own LESS sent a plain git status to Python"
    r = run_in_lane(hub, lane_path, "git commit -q --allow-empty -m x", LESS="-R")
    assert r.rc == 0, (r.stdout, r.stderr)  # and Python passes it too
    r = run_in_lane(hub, lane_path, 'LESS="+!touch ran" git log -1', LESS="-R")
    refused(r, "unsafe_config")
    assert not (lane_path / "ran").exists()
    r = run_in_lane(hub, lane_path, 'LESS=\'-R", "X": "y\' git log -1', LESS="-R")
    refused(r, "unsafe_config")


def test_rebase_update_refs_is_refused(hub: Repo) -> None:
    """`git rebase --update-refs` rewrites every branch in the range checked out nowhere:
    refused, the other branch unmoved."""
    lane_path = hub.create("alpha")
    hub.git("branch", "feature", "main")
    before = hub.sha("refs/heads/feature")
    script = (
        "echo b > b.txt && git add b.txt && git commit -q -m b && "
        "GIT_COMMITTER_DATE=2026-02-02T00:00:00+00:00 GIT_SEQUENCE_EDITOR=true "
        "git rebase -q -i --root --update-refs --force-rebase"
    )
    r = run_in_lane(hub, lane_path, script)
    assert hub.sha("refs/heads/feature") == before, (r.rc, r.stderr)
    refused(r, "main_mutation_refused")


def test_rebase_with_update_refs_configured_is_refused_and_its_next_runs(hub: Repo) -> None:
    """rebase.updateRefs set by the owner does what --update-refs does: refused; the
    `next` (with --no-update-refs) rebases the lane alone."""
    lane_path = hub.create("alpha")
    hub.git("branch", "feature", "main")
    hub.git("config", "rebase.updateRefs", "true")
    before = hub.sha("refs/heads/feature")
    env = {
        "GIT_COMMITTER_DATE": "2026-02-02T00:00:00+00:00",
        "GIT_SEQUENCE_EDITOR": "true",
    }
    pre = "echo b > b.txt && git add b.txt && git commit -q -m b && "
    r = run_in_lane(hub, lane_path, pre + "git rebase -q -i --root --force-rebase", **env)
    assert hub.sha("refs/heads/feature") == before, (r.rc, r.stderr)
    refused(r, "main_mutation_refused")
    nxt = r.stderr.split(". Next: ", 1)[1].splitlines()[0].strip()
    assert "--no-update-refs" in nxt, nxt
    tip = hub.sha("refs/heads/lane/alpha")
    again = run_in_lane(hub, lane_path, nxt, **env)
    assert again.rc == 0, (again.stdout, again.stderr)
    assert hub.sha("refs/heads/feature") == before
    assert hub.sha("refs/heads/lane/alpha") != tip  # the lane's own branch was rewritten


def test_checkout_guessing_a_remote_branch_is_refused(hub: Repo) -> None:
    """`git checkout foo`, foo no commit but origin/foo a remote-tracking branch: git would
    create refs/heads/foo and leave lane/alpha; refused. `--` keeps it a file restore."""
    lane_path = hub.create("alpha")
    script = (
        "git fetch -q . lane/alpha:refs/remotes/origin/foo && "
        "git remote add origin /nonexistent && git checkout -q foo"
    )
    r = run_in_lane(hub, lane_path, script)
    head = git(lane_path, "symbolic-ref", "-q", "HEAD", check=False).stdout.strip()
    assert hub.sha("refs/heads/foo") is None, (r.rc, r.stderr)
    assert head == "refs/heads/lane/alpha", head
    refused(r, "main_mutation_refused")
    r = run_in_lane(
        hub,
        lane_path,
        "echo foo > foo && git add foo && git commit -q -m foo && echo changed > foo && git checkout -q -- foo && cat foo",
    )
    assert r.rc == 0 and r.stdout.strip() == "foo", (r.stdout, r.stderr)


@pytest.mark.parametrize(
    ("how", "code"),
    [
        ('GIT_CONFIG="$OUT" git config a.b c', "hooks_disabled"),
        ("git config --global a.b c", "path_outside_lane"),
        ('git config --file "$OUT" a.b c', "path_outside_lane"),
        ('git config -f "$OUT" a.b c', "path_outside_lane"),
        # -f in a group of short flags (-z: NUL-terminated output) is -f all the same
        ('git config -zf "$OUT" a.b c', "path_outside_lane"),
        ("git maintenance register", "path_outside_lane"),
    ],
    ids=["GIT_CONFIG", "global", "file", "f", "zf", "maintenance_register"],
)
def test_git_config_writes_outside_the_lane_are_refused(
    hub: Repo, tmp_path: Path, how: str, code: str
) -> None:
    """git config writing the file GIT_CONFIG / --file names, the user's ~/.gitconfig
    (--global, and git maintenance register): refused, the file unchanged."""
    lane_path = hub.create("alpha")
    if "--global" in how or "maintenance" in how:  # the HOME exec started with
        out = Path(os.environ["HOME"]) / ".gitconfig"
    else:
        out = tmp_path / "outside" / "file"
        out.parent.mkdir()
        out.write_text("")
    before = out.read_text() if out.exists() else ""
    r = run_in_lane(hub, lane_path, how, OUT=str(out))
    assert (out.read_text() if out.exists() else "") == before, r.stderr
    refused(r, code)
    # a file inside the lane is the lane's own
    ok = run_in_lane(hub, lane_path, "git config --file mine.cfg a.b c && cat mine.cfg")
    assert ok.rc == 0 and "b = c" in ok.stdout, (ok.stdout, ok.stderr)


# -- red team 13D: the process's environment and PATH (GIT_TRACE, GIT_ALLOW_PROTOCOL,
# alternates, GIT_INDEX_FILE, the safe editors' environment, PATH entries, the .git file).
# The payload marks that it ran; it moves main with the hooks off; main unmoved and no mark
# is the guarantee.
ENV_PAYLOAD = (
    "#!/bin/sh\n"
    "unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY\n"
    'git -C "$HUB" -c core.hooksPath=/dev/null update-ref refs/heads/main refs/heads/lane/alpha\n'
    'echo ran >> "$MARKER"\n'
    'case $1 in *COMMIT_EDITMSG) echo msg > "$1" ;; esac\n'
    "exit 0\n"
)
# the lane commits on its branch and writes the payload into its own worktree
ENV_PRELUDE = (
    "set -e; echo work > work.txt; git add work.txt; git commit -q -m work; "
    'printf %s "$PAYLOAD" > "$PWD/evil.sh"; chmod +x evil.sh; set +e; '
)


def run_bound(hub: Repo, lane_path: Path, script: str, tmp_path: Path) -> LaneRun:
    env = {"HUB": str(hub.path), "PAYLOAD": ENV_PAYLOAD, "MARKER": str(tmp_path / "marker")}
    return hub.lane("exec", "alpha", "--", "sh", "-c", script, cwd=lane_path, env=env)


def assert_held(hub: Repo, main: str | None, tmp_path: Path, r: LaneRun) -> None:
    ran = (tmp_path / "marker").exists()
    assert hub.sha() == main and not ran, (
        f"main moved: {hub.sha() != main}, a lane-written program ran: {ran}",
        r.rc,
        r.stdout,
        r.stderr,
    )
    assert "Traceback" not in r.stderr, r.stderr


def test_git_trace_naming_a_file_is_refused_so_no_line_reaches_the_state_config(
    hub: Repo, tmp_path: Path
) -> None:
    """GIT_TRACE=FILE makes git append its trace, argv included (a newline in an argument
    kept as is), to FILE: a read-only `git status` (the sh fast pass) wrote a line
    `enabled = "false"` into <common>/git-lane/config.toml, which the hooks' flat reader
    and the shim both obey; the next `git update-ref refs/heads/main` passed both."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + 'GIT_TRACE="$GITLANE_COMMON/git-lane/config.toml" '
        'git status "$(printf \'\\nenabled = "false"\\n\')" >/dev/null 2>&1; '
        "git update-ref refs/heads/main refs/heads/lane/alpha"
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


def test_git_trace_naming_a_file_outside_the_lane_is_refused_and_nothing_is_written(
    hub: Repo, tmp_path: Path
) -> None:
    """The shims promise no write outside the lane through git: GIT_TRACE=<hub file>
    appends git's trace to a file of the hub's worktree (any path git can open)."""
    lane_path = hub.create("alpha")
    before = (hub.path / "a.txt").read_bytes()
    r = run_bound(hub, lane_path, 'GIT_TRACE="$HUB/a.txt" git status >/dev/null', tmp_path)
    assert (hub.path / "a.txt").read_bytes() == before, (r.rc, r.stderr)


def _default_editor() -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_EDITOR", "EDITOR", "VISUAL")}
    env["TERM"] = "xterm"
    out = subprocess.run(["git", "var", "GIT_EDITOR"], env=env, capture_output=True, text=True)
    return out.stdout.strip()


def test_a_path_with_the_lanes_bin_cannot_supply_gits_default_editor(
    hub: Repo, tmp_path: Path
) -> None:
    """Debian's and Ubuntu's git start `editor` (and `pager`) by that name, not vi/less:
    _search_path judges a fixed list without them, so a PATH with the lane's `bin` first
    ran the lane's `editor` for a plain `git commit`."""
    name = _default_editor()
    assert name and "/" not in name and " " not in name, name
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + f"mkdir -p bin; cp evil.sh bin/{name}; unset GIT_EDITOR EDITOR VISUAL; "
        "export TERM=xterm; echo more >> work.txt; git add work.txt; "
        'PATH="$PWD/bin:$PATH" git commit -q </dev/null'
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


@pytest.mark.parametrize(
    "path_prefix, where",
    [("bin:", "bin/vi"), (":", "vi")],
    ids=["relative_entry", "empty_entry"],
)
def test_relative_and_empty_path_entries_are_refused(
    hub: Repo, tmp_path: Path, path_prefix: str, where: str
) -> None:
    """A relative (or empty: the cwd) PATH entry is resolved by the shim from the caller's
    directory, but git runs the editor from the worktree's top: from lane/sub, PATH=bin:...
    passed (sub/bin has no vi) and git ran lane/bin/vi."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + f"mkdir -p bin sub; cp evil.sh {where}; cd sub; export GIT_EDITOR=vi "
        f'TERM=xterm; PATH="{path_prefix}$PATH" git commit -q --allow-empty </dev/null'
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


@pytest.mark.parametrize(
    "names, trigger",
    [
        # git help: a man viewer git starts by a name not on the list (kfmclient)
        (
            ("kfmclient",),
            'DISPLAY=:0 GIT_MAN_VIEWER=konqueror PATH="$PWD/bin:$PATH" git help status',
        ),
        # git difftool: the tool it guesses, found first on PATH
        (
            ("opendiff", "kdiff3", "tkdiff", "xxdiff", "meld"),
            'echo change >> work.txt; DISPLAY=:0 PATH="$PWD/bin:$PATH" git difftool -y',
        ),
        # a transport helper git-remote-NAME for NAME::URL (ls-remote: read-only)
        (("git-remote-evil",), 'PATH="$PWD/bin:$PATH" git ls-remote evil::x'),
        # `git lane ...` passes to the engine, which git finds as git-lane on PATH
        (("git-lane",), 'PATH="$PWD/bin:$PATH" git lane status'),
    ],
    ids=["help_man_viewer", "difftool_guess", "remote_helper", "git_lane"],
)
def test_a_path_adding_a_lane_directory_is_refused_whatever_name_git_starts(
    hub: Repo, tmp_path: Path, names: tuple[str, ...], trigger: str
) -> None:
    """GITLANE_PATH promises that every program git starts by name resolves to the file
    exec's PATH finds; only a fixed list of names (vi, less, ssh, man...) is compared."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    copies = "; ".join(f"cp evil.sh bin/{n}" for n in names)
    script = ENV_PRELUDE + f"mkdir -p bin; {copies}; {trigger} </dev/null"
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


@pytest.mark.parametrize(
    "trigger",
    [
        # GIT_ALLOW_PROTOCOL=ext lets `ext::CMD` run CMD; ls-remote is read-only and
        # passed the sh fast pass (the variable was judged nowhere)
        "GIT_ALLOW_PROTOCOL=ext git ls-remote 'ext::sh evil.sh'",
        # with core.fsmonitor unset git 2.39 runs GIT_TEST_FSMONITOR's program as its
        # monitor (fsmonitor-settings.c): a read-only status (the sh fast pass) ran it
        'GIT_TEST_FSMONITOR="$PWD/evil.sh" git status',
        # the same through guard/shim.py (a global option the sh pass leaves to Python)
        'GIT_TEST_FSMONITOR="$PWD/evil.sh" git -c color.ui=never status',
        # git-difftool--helper evals GIT_DIFFTOOL_EXTCMD as `difftool -x` would
        'echo w2 > work.txt; GIT_DIFFTOOL_EXTCMD="$PWD/evil.sh" git difftool -y',
        # ... and sources "$MERGE_TOOLS_DIR/$tool": GIT_DIFF_TOOL (or --tool) climbing
        # out of git's mergetools directory sources the lane's file
        'echo w2 > work.txt; GIT_DIFF_TOOL="../../../../../..$PWD/evil.sh" git difftool -y',
        'echo w2 > work.txt; git difftool -y --tool="../../../../../..$PWD/evil.sh"',
        # ... and sources "$MERGE_TOOLS_DIR/$tool" for the tool it guesses (vimdiff)
        pytest.param(
            'mkdir -p mt; for t in vimdiff nvimdiff emerge kompare; do printf "%s\\n" '
            '"$PWD/evil.sh" > "mt/$t"; done; echo w2 > work.txt; '
            'MERGE_TOOLS_DIR="$PWD/mt" git difftool -y',
            marks=pytest.mark.skipif(
                not any(shutil.which(t) for t in ("vimdiff", "nvimdiff", "emerge", "kompare")),
                reason="no difftool git would guess",
            ),
        ),
        # Perl obeys PERL5OPT in git 2.39's Perl add--interactive (the sh pass, and Python)
        *[
            pytest.param(
                'printf "system(\\"%s\\"); 1;\\n" "$PWD/evil.sh" > evilmod.pm; '
                f'echo w2 > work.txt; echo q | PERL5OPT="-I$PWD -Mevilmod" {how}',
                marks=pytest.mark.skipif(shutil.which("perl") is None, reason="no perl"),
            )
            for how in (
                "GIT_TEST_ADD_I_USE_BUILTIN=0 git add --patch",
                "git -c add.interactive.useBuiltin=false add -p",
            )
        ],
        # gpg reads GNUPGHOME's gpg.conf: `agent-program PROG` runs for `git commit -S`
        pytest.param(
            'T=$(mktemp -d /tmp/gk.XXXXXX); G="$PWD/gnupg"; mkdir -m 700 "$G"; '
            'gpg --homedir "$T" --batch --passphrase "" --quick-gen-key "a <a@b.c>" ed25519 '
            'sign never >/dev/null 2>&1; gpgconf --homedir "$T" --kill gpg-agent; '
            'cp "$T/pubring.kbx" "$G/"; rm -rf "$T"; '
            'echo "agent-program $PWD/evil.sh" > "$G/gpg.conf"; '
            'GNUPGHOME="$G" git commit -Sa@b.c --allow-empty -m signed',
            marks=pytest.mark.skipif(
                shutil.which("gpg") is None or shutil.which("gpgconf") is None, reason="no gpg"
            ),
        ),
    ],
    ids=[
        "allow_protocol_ext",
        "test_fsmonitor_sh",
        "test_fsmonitor_python",
        "difftool_extcmd",
        "diff_tool_path",
        "difftool_tool_path",
        "merge_tools_dir",
        "perl5opt_sh",
        "perl5opt_python",
        "gnupghome",
    ],
)
def test_a_variable_that_makes_git_run_the_lanes_program_is_refused(
    hub: Repo, tmp_path: Path, trigger: str
) -> None:
    """What git reads from the environment to start a program, judged for every command,
    read-only ones included: the lane's evil.sh never runs, main never moves."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = ENV_PRELUDE + trigger + " </dev/null >/dev/null 2>&1"
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


@pytest.mark.skipif(shutil.which("man") is None, reason="no man(1) to start")
def test_groff_bin_path_is_judged_like_the_other_man_variables(hub: Repo, tmp_path: Path) -> None:
    """binding.EDITOR_ENV judges what man reads to run a program (MANPAGER, MANOPT,
    MANROFFOPT) and what the groff man starts reads: GROFF_BIN_PATH names the directory
    groff runs `troff` (and grotty, preconv...) from first. `git help status` (read-only:
    the sh fast pass, and Python alike) would exec man, man groff, groff the lane's
    `troff` with git's own directory first on PATH. MANWIDTH (any width but the cached
    one) keeps man from reusing a formatted cat page."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + "mkdir -p gb; "
        '{ printf %s "$PAYLOAD"; } | write gb/troff; chmod +x gb/troff; '
        'GROFF_BIN_PATH="$PWD/gb" MANWIDTH=97 git help status >/dev/null 2>&1; '
        "echo rc=$?"
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


def test_clone_upload_pack_in_a_group_of_short_flags_is_refused(hub: Repo, tmp_path: Path) -> None:
    """clone's -u PROG (--upload-pack) runs PROG past the shim; in a group of short flags
    (`-qu PROG`: -q is quiet) git takes -u and the next word all the same."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = ENV_PRELUDE + 'git clone -qu "sh $PWD/evil.sh" "file://$HUB" dst; echo rc=$?'
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)
    assert "refused [unsafe_config]" in r.stderr, (r.stdout, r.stderr)


def test_rebase_instruction_format_written_with_a_short_flag_group_never_reaches_a_sync(
    hub: Repo, tmp_path: Path
) -> None:
    """`git config rebase.instructionFormat %B` is refused (a message line `exec PROG`
    becomes a todo command), and so is `git config -zf <common>/config
    rebase.instructionFormat %B`: -f in a group of short flags is -f to git (the file is
    its value, not the key). The repository's config keeps no format; the owner's `git
    lane sync` (which names git's one-line default itself) never runs the lane's line."""
    from enginehelp import ready_lane

    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + 'git config -zf "$GITLANE_COMMON/config" rebase.instructionFormat %B; '
        'git add evil.sh; git commit -q -m "$(printf \'x\\n\\nexec sh %s/evil.sh\' "$PWD")"; '
        "echo rc=$?"
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert hub.sha() == main, (r.rc, r.stdout, r.stderr)
    assert "refused [unsafe_config]" in r.stderr, (r.stdout, r.stderr)
    ready_lane(hub, "beta")
    assert hub.lane("land", "beta").rc == 0
    landed = hub.sha()
    s = hub.lane("sync", "alpha", env={"HUB": str(hub.path), "MARKER": str(tmp_path / "marker")})
    assert_held(hub, landed, tmp_path, s)
    got = git(hub.path, "config", "--get", "rebase.instructionFormat", check=False).stdout
    assert got == "", (got, r.stdout, r.stderr)


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim not installed")
def test_a_safe_editor_with_a_vim_init_command_is_refused(hub: Repo, tmp_path: Path) -> None:
    """GIT_EDITOR=vi is a "safe" editor, but vim runs VIMINIT's ex commands (`:call system(...)`);
    the lane's own commit passed the sh fast pass and vim ran the lane's program."""
    if "VIM" not in subprocess.run(["vi", "--version"], capture_output=True, text=True).stdout:
        pytest.skip("vi is not vim")
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + "export GIT_EDITOR=vi TERM=xterm "
        "VIMINIT=\":call system('sh $PWD/evil.sh')|qa!\"; git commit -q --allow-empty "
        "</dev/null >/dev/null"
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


def test_a_gitfile_with_a_second_line_is_refused(hub: Repo, tmp_path: Path) -> None:
    """git takes the whole lane .git file after `gitdir: ` (only the trailing newline
    stripped); the Python shim reads its first line. `gitdir: lnk<NL>evil` with lnk a
    symlink to the lane's git dir satisfied the shim, while git used the lane-made
    directory `lnk<NL>evil`, whose core.fsmonitor runs on `git status`."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + 'ln -s "$(sed -n "s/^gitdir: //p" .git)" lnk; N="$(printf "lnk\\nevil")"; '
        'mkdir -p "$N/objects" "$N/refs"; printf "ref: refs/heads/x\\n" > "$N/HEAD"; '
        'printf "[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n'
        '\\tfsmonitor = sh %s\\n" "$PWD/evil.sh" > "$N/config"; '
        'printf "gitdir: lnk\\nevil\\n" > .git; git status >/dev/null 2>&1'
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


def test_alternates_other_than_execs_are_refused_so_repack_keeps_the_store(
    hub: Repo, tmp_path: Path
) -> None:
    """GIT_ALTERNATE_OBJECT_DIRECTORIES naming a copy of the packs in the lane: `git repack
    -a -d -l` packs nothing local (everything is "borrowed") and deletes the repository's
    packs; with the copy removed, main and every landed commit are gone for good."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        "git repack -a -d -q; mkdir -p objcopy; "
        'cp -r "$GITLANE_COMMON/objects/pack" objcopy/; '
        'GIT_ALTERNATE_OBJECT_DIRECTORIES="$PWD/objcopy" git repack -a -d -l -q; rm -rf objcopy'
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    ok = git(hub.path, "cat-file", "-e", f"{main}^{{tree}}", check=False)
    assert ok.returncode == 0, ("main's objects were deleted", r.rc, r.stderr, ok.stderr)


@pytest.mark.skipif(
    shutil.which("less") is None or shutil.which("script") is None, reason="no less or script"
)
def test_a_safe_pager_with_lessopen_is_refused(hub: Repo, tmp_path: Path) -> None:
    """GIT_PAGER=less is a "safe" pager, but less runs LESSOPEN's input preprocessor (`|-`:
    for a pipe too): a `git log` in a terminal (here `script`'s) passed the sh fast pass
    and less ran the lane's program with git's directory first on PATH."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + 'export GIT_PAGER=less TERM=xterm LESSOPEN="|-sh $PWD/evil.sh %s"; '
        'script -qec "git log" /dev/null </dev/null >/dev/null 2>&1'
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


def test_an_index_outside_the_lane_is_refused_for_read_only_commands_too(
    hub: Repo, tmp_path: Path
) -> None:
    """GIT_INDEX_FILE outside the lane is refused for writers (path_outside_lane), but a
    read-only command is decided before _paths: `git status` refreshes the index it reads
    and wrote the hub's index (the lane's files' stat data over the hub's entries)."""
    lane_path = hub.create("alpha")
    index = hub.common_dir / "index"
    before = index.read_bytes()
    script = 'GIT_INDEX_FILE="$GITLANE_COMMON/index" git status --short >/dev/null'
    r = run_bound(hub, lane_path, script, tmp_path)
    assert index.read_bytes() == before, (r.rc, r.stderr)


def test_a_virtualenv_in_the_lane_first_on_path_is_refused_and_its_next_runs(
    hub: Repo, tmp_path: Path
) -> None:
    """A virtualenv's bin in the lane is the lane's to fill (an `editor`, a
    git-remote-NAME): a PATH adding it is refused, and the next (exec's PATH) commits."""
    lane_path = hub.create("alpha")
    script = (
        "mkdir -p .venv/bin; printf '#!/bin/sh\\n' > .venv/bin/tool; chmod +x .venv/bin/tool; "
        'PATH="$PWD/.venv/bin:$PATH" git commit -q --allow-empty -m venv'
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert r.rc == 1 and "refused [unsafe_config]" in r.stderr, (r.rc, r.stderr)
    assert "PATH entry" in r.stderr and "Next: env PATH=" in r.stderr, r.stderr
    nxt = r.stderr.split("Next: ", 1)[1].strip()
    r2 = hub.lane("exec", "alpha", "--", "sh", "-c", nxt, cwd=lane_path)
    assert r2.rc == 0, (nxt, r2.stderr)
    assert git(lane_path, "log", "-1", "--format=%s").stdout.strip() == "venv"


@pytest.mark.parametrize(
    "how",
    [
        "--upload-pack=PROG .",
        "--exec=PROG .",
        "--upl=PROG .",
        "--up=PROG .",
        "--u=PROG .",
        "--e=PROG .",
        "--sort -- --upload-pack=PROG .",
    ],
)
@pytest.mark.parametrize("where", ["sh", "python"])
def test_a_program_ls_remote_is_told_to_run_is_refused_whatever_the_prefix(
    hub: Repo, tmp_path: Path, how: str, where: str
) -> None:
    """`git ls-remote --upload-pack=PROG .` (its hidden spelling --exec=PROG, any prefix git
    completes: --u=, --e=; or after a `--` parse-options takes as --sort's value) makes git
    run PROG through the shell for a local URL. The sh fast pass (GIT_EXEC_PATH unset, as
    a process may) passed it on `--o*` and NAME::URL alone; Python took prefixes from 5
    characters on (red team 13H). Refused in both: evil.sh never runs, main never moves."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    env = (
        "unset GIT_EXEC_PATH; " if where == "sh" else 'export GIT_EXEC_PATH="$(git --exec-path)"; '
    )
    cmd = "git ls-remote " + how.replace("PROG", '"$PWD/evil.sh; git-upload-pack"')
    r = run_bound(hub, lane_path, ENV_PRELUDE + env + cmd + " >/dev/null 2>&1", tmp_path)
    assert_held(hub, main, tmp_path, r)
    r = run_bound(hub, lane_path, env + cmd, tmp_path)
    assert r.rc == 1 and "refused [unsafe_config]" in r.stderr, (r.rc, r.stderr)


@pytest.mark.parametrize(
    "how",
    [
        'git pull -- --upload-pack="sh $PWD/evil.sh" .',
        'git pull -- --exec="sh $PWD/evil.sh" .',
        'git pull -- --u="sh $PWD/evil.sh" .',
        'git remote update -- --upload-pack="sh $PWD/evil.sh"',
    ],
    ids=["pull_upload_pack", "pull_exec", "pull_prefix", "remote_update"],
)
def test_a_program_handed_past_a_dropped_dashdash_to_fetch_is_refused(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """`git pull -- --upload-pack=PROG .`: pull's parse_options drops its `--` (no
    KEEP_DASHDASH) and runs `git fetch --upload-pack=PROG .`, which runs PROG with git's
    directory first on PATH; `git remote update -- ...` hands the same to `fetch
    --multiple`. The policy read that `--` (no option word before it) as the end of the
    options and passed the call (red team 13M #1). A `--` these commands hand on ends no
    option: refused unsafe_config, evil.sh never runs, main never moves."""
    git(hub.path, "remote", "add", "self", str(hub.path))
    lane_path = hub.create("alpha")
    main = hub.sha()
    r = run_bound(hub, lane_path, ENV_PRELUDE + how + "; echo rc=$?", tmp_path)
    assert_held(hub, main, tmp_path, r)
    assert "refused [unsafe_config]" in r.stderr, (r.stdout, r.stderr)


def test_grep_open_files_in_pager_after_a_double_dash_value_is_refused(
    hub: Repo, tmp_path: Path
) -> None:
    """`git grep -e -- -O PROG`: parse-options takes `--` as -e's pattern and goes on, so
    -O runs PROG on the files that match; the sh fast pass and Python stopped looking at
    the first `--`."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    for env in ("unset GIT_EXEC_PATH; ", 'export GIT_EXEC_PATH="$(git --exec-path)"; '):
        script = ENV_PRELUDE + "echo -- >> work.txt; " + env + 'git grep -e -- -O"$PWD/evil.sh"'
        r = run_bound(hub, lane_path, script + " >/dev/null 2>&1", tmp_path)
        assert_held(hub, main, tmp_path, r)


@pytest.mark.parametrize(
    "how",
    [
        # parse-options takes `--` as -S's value and reads on: --output opens OUT
        'git range-diff -S -- --output="$OUT" HEAD~1...HEAD',
        # -L takes `--`; blame hands --output to the revision/diff parser, which opens
        # (truncates) OUT before blame dies on the range
        'git blame -L -- --output="$OUT" work.txt',
        'git annotate -L -- --output="$OUT" work.txt',
    ],
    ids=["range_diff", "blame", "annotate"],
)
def test_a_dash_dash_taken_as_a_value_never_hides_output_of_a_reading_command(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """A `--` right after an option word may be its value (`range-diff -S --`, `blame -L
    --`), and parse-options reads on: `--output=F` past it writes F. The policy kept that
    reading for a list of commands only; range-diff, blame and annotate were not on it, so
    the sh pass sent the call to Python (gs_words reads every word) and Python let git
    truncate a file of the hub's worktree (red team 13K #6). Refused path_outside_lane."""
    lane_path = hub.create("alpha")
    out = hub.path / "a.txt"
    before = out.read_bytes()
    script = (
        "set -e; echo one > work.txt; git add work.txt; git commit -q -m one; "
        "echo two > work.txt; git commit -q -am two; set +e; " + how
    )
    r = hub.lane("exec", "alpha", "--", "sh", "-c", script, cwd=lane_path, env={"OUT": str(out)})
    assert r.rc == 1 and "refused [path_outside_lane]" in r.stderr, (r.rc, r.stdout, r.stderr)
    assert out.read_bytes() == before, (out.read_bytes()[:200], r.rc, r.stdout, r.stderr)


def test_bare_as_a_global_option_names_the_cwd_before_dash_c_moves_it(
    hub: Repo, tmp_path: Path
) -> None:
    """`git --bare` sets GIT_DIR to the cwd git is in when it parses it, before a later -C
    moves the cwd: `cd b.git && git --bare -C .. --work-tree=. status` reads b.git, a bare
    repository the lane made, as its repository (its core.fsmonitor). The policy took
    --bare for a plain flag and looked for a nested repository from the cwd after -C only,
    so the read-only status passed and git ran the lane's monitor (red team 13K #5). It is
    judged as --git-dir=<that cwd>: unsafe_config, and the next (the command in the lane's
    own repository, without --bare, -C and --work-tree) runs."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + "git init -q --bare b.git; "
        'printf \'[core]\\n\\tfsmonitor = sh "%s/evil.sh"\\n\' "$PWD" | write b.git/config; '
        'cat "$(git rev-parse --path-format=absolute --git-path index)" | write b.git/index; '
        "cd b.git && git --bare -C .. --work-tree=. status >/dev/null; echo rc=$?"
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)
    assert "refused [unsafe_config]" in r.stderr, (r.rc, r.stdout, r.stderr)
    nxt = r.stderr.split("Next: ", 1)[1].splitlines()[0].strip()
    assert nxt == f"cd {lane_path} && git status", nxt
    r2 = run_bound(hub, lane_path, "cd b.git && " + nxt, tmp_path)
    assert r2.rc == 0, (nxt, r2.stdout, r2.stderr)
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("sub", ["list", "show"])
def test_stash_output_outside_the_lane_is_refused_and_its_next_runs(
    hub: Repo, tmp_path: Path, sub: str
) -> None:
    """stash list/show hand their words to log/diff, so `--output=F` writes F anywhere, every
    byte --format's: the sh fast pass let `git stash list ANY` through, and the lane wrote
    `enabled = false` over <common>/git-lane/config.toml, then moved main with a plain
    update-ref (red team 13H). Refused (path_outside_lane, in sh and Python alike); the
    next, the command without --output, runs."""
    lane_path = hub.create("alpha")
    (hub.path / "a.txt").write_text("owner's unfinished work\n")
    git(hub.path, "stash", "-q")
    main = hub.sha()
    state = hub.common_dir / "git-lane" / "config.toml"
    before = state.read_bytes()
    fmt = "--format='tformat:enabled = false' " if sub == "list" else ""
    script = (
        ENV_PRELUDE + f"git stash {sub} {fmt}"
        '--output="$GITLANE_COMMON/git-lane/config.toml" 2>/dev/null; '
        "git update-ref refs/heads/main refs/heads/lane/alpha 2>/dev/null"
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)
    assert state.read_bytes() == before
    r = run_bound(hub, lane_path, f'git stash {sub} --output="$GITLANE_COMMON/x"', tmp_path)
    assert r.rc == 1 and "refused [path_outside_lane]" in r.stderr, (r.rc, r.stderr)
    nxt = r.stderr.split("Next: ", 1)[1].strip()
    assert nxt == f"git stash {sub}", nxt
    r2 = run_bound(hub, lane_path, nxt, tmp_path)
    assert r2.rc == 0, (nxt, r2.stderr)


@pytest.mark.parametrize(
    "how",
    [
        'git stash list -- --output="$OUT"',
        'git fast-export -- --output="$OUT" HEAD',
        'git bundle create -- b.bundle --output="$OUT" HEAD',
        'GIT_EDITOR=true git revert -- --output="$OUT" HEAD',
    ],
    ids=["stash_list", "fast_export", "bundle_create", "revert"],
)
def test_output_handed_past_a_dropped_dashdash_is_refused(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """`git stash list -- --output=F`: stash drops its `--` and hands `--output=F` to `git
    log`, which writes F (red team 13M #2); cherry-pick, revert, fast-export and `bundle
    create FILE` drop theirs and hand the rest to setup_revisions alike. The policy took
    that `--` for the end of the options: F was written outside the lane. Refused
    path_outside_lane; the next (the command without --output) runs."""
    (hub.path / "a.txt").write_text("owner's change\n")
    git(hub.path, "stash", "-q")  # refs/stash is shared: the owner's stash is the lane's list
    lane_path = hub.create("alpha")
    out = tmp_path / "outside.txt"
    script = ENV_PRELUDE + how + "; echo rc=$?"
    r = hub.lane(
        "exec", "alpha", "--", "sh", "-c", script, cwd=lane_path,
        env={"HUB": str(hub.path), "PAYLOAD": ENV_PAYLOAD, "OUT": str(out)},
    )  # fmt: skip
    assert not out.exists(), (out.read_bytes()[:200], r.stdout, r.stderr)
    assert "refused [path_outside_lane]" in r.stderr, (r.stdout, r.stderr)
    nxt = r.stderr.split("Next: ", 1)[1].splitlines()[0].strip()
    again = hub.lane("exec", "alpha", "--", "sh", "-c", nxt + " >/dev/null", cwd=lane_path)
    assert again.rc == 0 and not out.exists(), (nxt, again.stdout, again.stderr)


def test_a_git_dir_naming_the_hubs_is_refused_for_read_only_commands_and_its_next_runs(
    hub: Repo, tmp_path: Path
) -> None:
    """--git-dir / GIT_DIR naming the common dir (or a gitfile below the cwd naming it) make
    `git status` refresh and rewrite the hub's index, as GIT_INDEX_FILE would (red team
    13H): refused path_outside_lane, and the next (the lane's own repository) runs."""
    lane_path = hub.create("alpha")
    index = hub.common_dir / "index"
    before = index.read_bytes()
    gitfile = 'mkdir -p sub && echo "gitdir: $GITLANE_COMMON" > sub/.git && cp a.txt sub/ && cd sub && git status'
    for how in (
        'git --git-dir="$GITLANE_COMMON" status',
        'GIT_DIR="$GITLANE_COMMON" git status',
        gitfile,
    ):
        r = run_bound(hub, lane_path, f"sleep 1; touch a.txt; {how}", tmp_path)
        assert index.read_bytes() == before, (how, r.rc, r.stderr)
        assert r.rc == 1 and "refused [path_outside_lane]" in r.stderr, (how, r.rc, r.stderr)
        nxt = r.stderr.split("Next: ", 1)[1].strip()
        r2 = run_bound(hub, lane_path, nxt, tmp_path)
        assert r2.rc == 0 and "refused" not in r2.stderr, (nxt, r2.stderr)
        run_bound(hub, lane_path, "rm -rf sub", tmp_path)


def test_sparse_checkout_in_a_lane_is_refused_and_never_turns_on_worktree_config(
    hub: Repo, tmp_path: Path
) -> None:
    """`git config extensions.worktreeConfig true` is refused (hooks_disabled), and `git
    sparse-checkout init` (or set) wrote that very key into the shared config (red team
    13H): refused unsafe_config. Its next then had the owner turn the key on; but with it
    on git reads the lane's config.worktree, which a lane process can swap under any git
    call (red team 14A), so the engine refuses every lane then: a lane's sparse-checkout
    is refused whether the key is on or not, and the next, the lane's status, runs."""
    lane_path = hub.create("alpha")
    cfg = hub.common_dir / "config"
    for sub in ("init", "set sub", "disable"):
        r = run_bound(hub, lane_path, f"git sparse-checkout {sub}", tmp_path)
        assert r.rc == 1 and "refused [unsafe_config]" in r.stderr, (sub, r.rc, r.stderr)
        assert "worktreeconfig" not in cfg.read_text().lower(), (sub, cfg.read_text())
        nxt = r.stderr.split("Next: ", 1)[1].strip()
        assert nxt == "git lane status alpha", r.stderr
    r2 = run_bound(hub, lane_path, nxt, tmp_path)
    assert r2.rc == 0, (nxt, r2.stderr)
    on = facts(config_value=lambda _k: "true")  # the key on (the owner's own doing)
    r3 = decide_git(["sparse-checkout", "init"], ENV, on)
    assert r3 is not None and r3.code == "unsafe_config", r3


def test_fsck_lost_found_is_refused_and_fsck_without_it_runs(hub: Repo, tmp_path: Path) -> None:
    """fsck is read-only, but `--lost-found` (git takes `--l`) writes every dangling object
    into <common>/lost-found, a blob the lane made too (red team 13H): refused
    path_outside_lane, and the next, fsck without it, runs."""
    lane_path = hub.create("alpha")
    lost = hub.common_dir / "lost-found"
    for how in ("--lost-found", "--l"):
        script = f"printf 'lane bytes\\n' | git hash-object -w --stdin >/dev/null; git fsck {how}"
        r = run_bound(hub, lane_path, script, tmp_path)
        assert not lost.exists(), (how, r.rc, r.stderr)
        assert r.rc == 1 and "refused [path_outside_lane]" in r.stderr, (how, r.rc, r.stderr)
    nxt = r.stderr.split("Next: ", 1)[1].strip()
    assert nxt == "git fsck", nxt
    r2 = run_bound(hub, lane_path, nxt, tmp_path)
    assert r2.rc == 0 and not lost.exists(), (r2.rc, r2.stderr)


# -- red team 13H: repositories the lane makes inside its own worktree (a bare one as the
# cwd's, one a URL names, a submodule's). The payload marks that it ran and moves main.
# the lane commits twice and writes nest/, a bare repository (objects borrowed from the
# common dir) whose config names evil.sh as diff.external and as a tar format's command
BARE_NEST = (
    ENV_PRELUDE + "echo two > two.txt; git add two.txt; git commit -q -m two; "
    "mkdir -p nest/objects/info nest/refs/heads; "
    'echo "ref: refs/heads/m" > nest/HEAD; git rev-parse HEAD > nest/refs/heads/m; '
    'echo "$GITLANE_COMMON/objects" > nest/objects/info/alternates; '
    'printf "[core]\\n\\tbare = true\\n[diff]\\n\\texternal = %s\\n'
    '[tar \\"evil\\"]\\n\\tcommand = %s\\n\\tremote = true\\n" "$PWD/evil.sh" "$PWD/evil.sh" '
    "> nest/config; "
)


def _next(r: LaneRun) -> str:
    return r.stderr.split(". Next: ", 1)[1].splitlines()[0].strip()


@pytest.mark.parametrize(
    "how",
    [
        "cd nest && git diff HEAD~ HEAD",  # the sh fast pass
        'cd nest && GIT_EXEC_PATH="$(git --exec-path)" git diff HEAD~ HEAD',  # Python
        "cd nest/refs/heads && git diff HEAD~ HEAD",  # the repository is found upwards
        "git -C nest/refs diff HEAD~ HEAD",
    ],
    ids=["sh", "python", "below", "dash_C"],
)
def test_a_bare_repository_the_lane_wrote_is_refused_as_the_cwds_repository(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """git's discovery takes a directory that *is* a git dir (HEAD, refs/, objects/: a bare
    repository; safe.bareRepository is `all` by default) as the repository, as it takes a
    .git: in or below LANE/nest, a bare repository the lane wrote, a read-only command
    would obey nest/config (diff.external). gs_own (sh) and _nested_git (Python) refuse it
    unsafe_config before git reads it; the next, in the lane's root, runs."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    r = run_bound(hub, lane_path, BARE_NEST + how + " >/dev/null", tmp_path)
    assert_held(hub, main, tmp_path, r)
    refused(r, "unsafe_config")
    assert "/nest makes git diff read a repository inside lane alpha" in r.stderr, r.stderr
    nxt = _next(r)
    assert nxt.startswith(f"cd {lane_path} && git diff"), nxt
    again = run_bound(hub, lane_path, nxt, tmp_path)
    assert again.rc == 0 and "+two" in again.stdout, (nxt, again.stderr)
    assert_held(hub, main, tmp_path, again)


@pytest.mark.parametrize(
    "how",
    [
        "--remote=./nest",
        "--remote nest/",  # the value as the next word
        '--remote="file://$PWD/nest"',
        "--rem=nest",  # a prefix: git 2.39 stops at it, a later one may not
        "--remote=sub/../nest",
    ],
)
def test_archive_remote_naming_a_repository_in_the_lane_is_refused(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """`git archive --remote=REPO` (read-only) starts git-upload-archive in REPO, which
    obeys REPO's config: a `tar.NAME.command` with `tar.NAME.remote` runs for
    `--format=NAME`. REPO a local repository inside the lane (other than the lane itself)
    is the lane's making: refused unsafe_config; the next (the lane's own repository)
    runs. (fetch, ls-remote, clone of such a path run git-upload-pack there, which in git
    2.39 runs no program its repository's config names: not refused.)"""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = BARE_NEST + f"mkdir -p sub; git archive {how} --format=evil HEAD >/dev/null"
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)
    refused(r, "unsafe_config")
    assert "starts git-upload-archive in" in r.stderr and "/nest, a repository" in r.stderr
    assert _next(r) == "git archive --format=evil HEAD", r.stderr
    nxt = run_bound(hub, lane_path, _next(r), tmp_path)  # the lane's repository: no such format
    assert "git-lane: refused" not in nxt.stderr and "Unknown archive format" in nxt.stderr
    again = run_bound(hub, lane_path, "git archive --format=tar HEAD | tar tf -", tmp_path)
    assert again.rc == 0 and "two.txt" in again.stdout, again.stderr
    # the lane itself, and a repository outside it, are not the lane's making
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", "--bare", str(other))
    for ok in ("--remote=.", f"--remote={lane_path}", f"--remote={other}"):
        r = run_bound(hub, lane_path, f"git archive {ok} HEAD >/dev/null", tmp_path)
        assert "git-lane: refused" not in r.stderr, (ok, r.stderr)
    assert_held(hub, main, tmp_path, r)


def _plant_submodule(script: str) -> str:
    """The lane writes `sub/.git` (a repository of its own making, whose config names
    evil.sh as core.fsmonitor; its objects borrowed from the common dir) into its own
    worktree, stages `sub` as a gitlink (update-index, which the shim passes), then runs
    SCRIPT."""
    return (
        ENV_PRELUDE + "mkdir -p sub/.git/objects/info sub/.git/refs/heads; "
        'echo "ref: refs/heads/m" > sub/.git/HEAD; C=$(git rev-parse HEAD); '
        'echo "$C" > sub/.git/refs/heads/m; '
        'echo "$GITLANE_COMMON/objects" > sub/.git/objects/info/alternates; '
        'printf "[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = %s\\n" '
        '"$PWD/evil.sh" > sub/.git/config; '
        'git update-index --add --cacheinfo "160000,$C,sub"; ' + script
    )


@pytest.mark.xfail(
    strict=True,
    reason="a limit of the shims (docs/trust-boundary.md Layer 2, 'A submodule the lane "
    "makes'): fetch runs `git fetch` inside a populated submodule (on demand by default)",
)
@pytest.mark.parametrize(
    "how",
    [
        "git fetch --recurse-submodules=yes .",
        # on demand (the default): a fetched commit moves sub to a commit sub lacks
        'T=$(git ls-tree HEAD | grep -v "\tsub$" | { cat; printf "160000 commit %s\\tsub\\n" '
        "1234567890123456789012345678901234567890; } | git mktree --missing); "
        'git fetch . "$(git commit-tree -p HEAD -m dangling "$T")"',
    ],
    ids=["recurse", "on_demand"],
)
def test_a_submodule_the_lane_wrote_is_never_fetched_into(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """The lane commits a gitlink `sub` (and .gitmodules) and writes `sub/.git` itself, its
    config naming evil.sh as remote.origin.uploadpack: `git fetch` (decided in Python,
    which lets it pass) runs `git fetch` inside sub, which runs the upload-pack program
    sub's config names, past the shim."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    script = (
        ENV_PRELUDE + "mkdir -p sub/.git/objects/info sub/.git/refs/heads; "
        'echo "ref: refs/heads/m" > sub/.git/HEAD; C=$(git rev-parse HEAD); '
        'echo "$C" > sub/.git/refs/heads/m; '
        'echo "$GITLANE_COMMON/objects" > sub/.git/objects/info/alternates; '
        'printf "[core]\\n\\trepositoryformatversion = 0\\n[remote \\"origin\\"]\\n'
        '\\turl = %s\\n\\tuploadpack = %s\\n" "$GITLANE_COMMON" "$PWD/evil.sh" '
        "> sub/.git/config; "
        'git update-index --add --cacheinfo "160000,$C,sub"; '
        'printf "[submodule \\"sub\\"]\\n\\tpath = sub\\n\\turl = ./sub\\n" > .gitmodules; '
        "git add .gitmodules; git commit -q -m sub; " + how + " >/dev/null 2>&1"
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    assert_held(hub, main, tmp_path, r)


@pytest.mark.xfail(
    strict=True,
    reason="a limit of the shims (docs/trust-boundary.md Layer 2, 'A submodule the lane "
    "makes'): git status/diff/diff-files/diff-index start a child git inside every "
    "populated submodule, past the shim; telling one needs the index's gitlinks, which the "
    "sh fast pass cannot read without a subprocess. exec --sandbox confines the program",
)
@pytest.mark.parametrize("how", ["git status", "git diff", "git diff --submodule=diff HEAD"])
def test_a_submodule_the_lane_wrote_is_never_entered_by_a_read_only_command(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """The lane stages a gitlink `sub` and writes `sub/.git` itself (a directory whose
    config names a core.fsmonitor). git status (the sh fast pass) runs `git status` inside
    every populated submodule, a child git that git starts from its own directory with
    sub/.git/config, which the lane wrote: the monitor runs past the shim."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    r = run_bound(hub, lane_path, _plant_submodule(how + " >/dev/null 2>&1"), tmp_path)
    assert_held(hub, main, tmp_path, r)


def _exec_sh(hub: Repo, lane_path: Path, script: str) -> LaneRun:
    pre = "set -e; echo work > work.txt; git add work.txt; git commit -q -m work; set +e; "
    return hub.lane("exec", "alpha", "--", "sh", "-c", pre + script, cwd=lane_path)


@pytest.mark.parametrize(
    "line",
    [
        "remote -v update -- --upload-pack=/tmp/p",
        "remote --verbose update -- --upload-pack=/tmp/p",
        "-c branch.lane/alpha.remote=. remote -v update -- --upload-pack=/tmp/p",
    ],
)
def test_remote_update_after_a_remote_option_still_hands_its_dashdash_on(line: str) -> None:
    """_hands_on_dashdash asked (red team 13O) `args[0] in ("update",)`: `git remote -v update`
    has `-v` there, so its `--` ends the options and `--upload-pack=P` past it is never
    judged; git 2.39's remote update hands it to `fetch --multiple` as an option (checked
    with real git: P runs). `remote -v update --upload-pack=P` (no --) is refused."""
    r = decide_git(shlex.split(line), ENV, facts())
    assert r is not None and r.code == "unsafe_config", (line, r)


def test_remote_v_update_dashdash_upload_pack_runs_the_lanes_program(
    hub: Repo, tmp_path: Path
) -> None:
    """End to end through the shims: the lane names its remote `.` for one call
    (`-c branch.lane/alpha.remote=.`, passed) and `git remote -v update --
    --upload-pack=PROG` runs PROG (a program of the lane's choosing) as the owner's
    fetch would."""
    lane_path = hub.create("alpha")
    mark = tmp_path / "ran"
    prog = tmp_path / "prog.sh"
    prog.write_text(f'#!/bin/sh\necho ran >> "{mark}"\nexec git-upload-pack "$@"\n')
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    r = _exec_sh(
        hub,
        lane_path,
        f"git -c branch.lane/alpha.remote=. remote -v update -- --upload-pack={prog}",
    )
    assert not mark.exists(), ("PROG ran", r.rc, r.stdout, r.stderr)
    assert r.rc == 1 and "refused [unsafe_config]" in r.stderr, (r.rc, r.stdout, r.stderr)


def test_a_remotes_group_member_is_handed_to_fetch_as_an_option(hub: Repo, tmp_path: Path) -> None:
    """The same hand-on as fixV's `remote update --`, without any `--`: `fetch GROUP`
    (and `remote update GROUP`, `fetch --multiple`) runs one `git fetch --append ...
    NAME` per member of `remotes.GROUP`, each NAME an argv word of the child, so a member
    `--upload-pack=PROG` is an option there (git 2.39 fetch_multiple; checked with real
    git). `-c remotes.*` is not judged (only remote.*/url.*), so PROG runs."""
    lane_path = hub.create("alpha")
    mark = tmp_path / "ran"
    prog = tmp_path / "prog.sh"
    prog.write_text(f'#!/bin/sh\necho ran >> "{mark}"\nexec git-upload-pack "$@"\n')
    prog.chmod(0o755)
    r = _exec_sh(
        hub,
        lane_path,
        f"git -c 'remotes.g=--upload-pack={prog} .' -c branch.lane/alpha.remote=. fetch g",
    )
    assert not mark.exists(), ("PROG ran", r.rc, r.stdout, r.stderr)


@pytest.mark.parametrize("how", ["-p --no-stdout", "--stdout --no-stdout"])
def test_merge_file_no_stdout_after_p_still_writes_the_file_outside(
    hub: Repo, tmp_path: Path, how: str
) -> None:
    """merge-file's first file is judged merge-file's first file unless -p/--stdout is given, but git's
    OPT_BOOL takes the last of -p/--stdout and --no-stdout: `merge-file -p --no-stdout
    CUR B O` writes the merge into CUR, a file outside the lane (checked with real git)."""
    lane_path = hub.create("alpha")
    out = tmp_path / "outside.txt"
    out.write_text("base\n")
    pre = "printf 'base\\n' > b.txt; printf 'lane wrote this\\n' > o.txt; "
    r = _exec_sh(hub, lane_path, pre + f"git merge-file {how} '{out}' b.txt o.txt")
    assert out.read_text() == "base\n", (out.read_text(), r.rc, r.stdout, r.stderr)
    r2 = decide_git(shlex.split(f"merge-file {how} /tmp/cur b o"), ENV, facts())
    assert r2 is not None and r2.code == "path_outside_lane", r2


def test_a_merge_file_no_stdout_refusals_next_is_passed() -> None:
    """The refusal of `merge-file [-p] --no-stdout CUR B O` (CUR outside the lane) printed
    `merge-file -p -p --no-stdout ...`: the later --no-stdout takes the -p back, and the
    next as printed was refused again (red team 13P). It drops the --no-stdout."""
    for line in ("merge-file -p --no-stdout /tmp/cur b o", "merge-file --no-std /tmp/cur b o"):
        r = decide_git(shlex.split(line), ENV, facts())
        assert r is not None and r.code == "path_outside_lane", (line, r)
        for nxt in r.next:
            words = shlex.split(nxt)
            assert words[0] == "git", nxt
            again = decide_git(words[1:], ENV, facts())
            assert again is None, (line, nxt, again and again.code)


def test_a_lane_never_switches_rerere_on_for_the_repository(hub: Repo, tmp_path: Path) -> None:
    """Red team 13R: `git -c rerere.enabled=true merge` / `rerere` made git create
    `<common>/rr-cache/` and record the lane's resolution there, outside the lane; with
    rerere.enabled unset git takes an existing rr-cache as rerere on for the whole
    repository, so the owner's own later merge with the same conflict got the lane's text
    ("Resolved 'a.txt' using previous resolution"). While no rr-cache exists, a setting
    switching rerere on (-c, git config) is refused, and `git rerere` while rerere.enabled says
    true; the next runs."""
    lane_path = hub.create("alpha")
    script = (
        ENV_PRELUDE + 'printf "1\\n" > a.txt; git add a.txt; git commit -qm base; '
        'printf "lane\\n" > a.txt; git commit -qam lane; '
        'printf "side\\n" > a.txt; git add a.txt; T=$(git write-tree); '
        "C=$(git commit-tree $T -p HEAD~1 -m side); git checkout -q HEAD -- a.txt; "
        "git -c rerere.enabled=true merge $C; git config rerere.enabled true; "
        'printf "THE LANE CHOSE\\n" > a.txt; git -c rerere.enabled=true rerere; git rerere; '
        "git merge $C; git merge --abort"
    )
    r = run_bound(hub, lane_path, script, tmp_path)
    # `git rerere` with rerere.enabled unset (its config write refused) and no cache does
    # nothing, so it runs; every switch of rerere on is refused
    assert r.stderr.count("refused [path_outside_lane]") == 3, r.stderr
    assert "refused [path_outside_lane]: git rerere" not in r.stderr, r.stderr
    assert "Next: git merge " in r.stderr, r.stderr
    # the owner, later, in the hub: two branches with the same conflict
    hub.git("checkout", "-q", "-b", "o1")
    (hub.path / "a.txt").write_text("1\n")
    hub.git("add", "a.txt")
    hub.git("commit", "-qm", "base")
    hub.git("checkout", "-q", "-b", "o2")
    (hub.path / "a.txt").write_text("side\n")
    hub.git("commit", "-qam", "side")
    hub.git("checkout", "-q", "o1")
    (hub.path / "a.txt").write_text("lane\n")
    hub.git("commit", "-qam", "lane")
    owner = hub.git("merge", "o2", check=False)
    assert "THE LANE CHOSE" not in (hub.path / "a.txt").read_text(), owner.stderr
    assert not (hub.common_dir / "rr-cache").exists(), (r.stdout, r.stderr)
