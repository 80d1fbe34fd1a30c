"""Issue 11, submodule git dirs: a lane's populated submodule keeps its git dir in the
lane's admin dir (`<admin>/modules/<name>/`), which `git lane exec --sandbox` grants CMD.
Its `config` and `info/attributes` can name programs (a clean filter, a textconv, an
fsmonitor, a pager, hooks); the owner's engine git (status, land, sync, release, gc,
conflicts, export, checkpoint) must never run git inside that submodule with that config,
and must still tell a submodule's changes (never read as clean)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import Repo, git
from enginehelp import lane_with_submodule

from guard import git as glgit
from guard import sandbox
from guard.errors import Refusal, join_next

INTO = r"git lane repair alpha --into alpha\.\d{8}T\d{6}Z\.[0-9a-f]{8}"

ATTACK = """
[filter "evil"]
\tclean = {p}
\tsmudge = {p}
[diff "evil"]
\ttextconv = {p}
[core]
\tfsmonitor = {p}
\tpager = {p}
\thooksPath = {hooks}
\talternateRefsCommand = {p}
\tsshCommand = {p}
[uploadpack]
\tpackObjectsHook = {p}
[status]
\tsubmoduleSummary = true
"""


@pytest.fixture
def sub_lane(repo: Repo, tmp_path: Path) -> tuple[Repo, Path, Path]:
    """main records submodule `sub`; lane alpha has it populated and one commit to land.
    Returns (repo, lane path, the submodule's git dir in the lane's admin dir)."""
    path, moddir = lane_with_submodule(repo, tmp_path)
    return repo, path, moddir


def payload(tmp_path: Path) -> tuple[Path, Path, Path]:
    marker = tmp_path / "MARKER"
    prog = tmp_path / "evil.sh"
    prog.write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{marker}'\ncat\n")
    prog.chmod(0o755)
    hooks = tmp_path / "evil-hooks"
    hooks.mkdir()
    for h in ("post-checkout", "pre-commit", "reference-transaction", "post-index-change"):
        (hooks / h).write_text(f"#!/bin/sh\necho hook {h} >> '{marker}'\n")
        (hooks / h).chmod(0o755)
    return marker, prog, hooks


def arm(moddir: Path, lane_path: Path, prog: Path, hooks: Path) -> None:
    """What a sandboxed CMD can do: name programs in the submodule's config and
    attributes, and touch its file so git has to re-read (clean-filter) it."""
    with open(moddir / "config", "a") as f:
        f.write(ATTACK.format(p=prog, hooks=hooks))
    (moddir / "info").mkdir(exist_ok=True)
    (moddir / "info" / "attributes").write_text("* filter=evil diff=evil\n")
    f = lane_path / "sub" / "s.txt"
    os.utime(f, (1_900_000_000, 1_900_000_000))


OWNER_COMMANDS = [
    ("status", "alpha"),
    ("conflicts", "--include-dirty"),
    ("export", "alpha"),
    ("checkpoint", "alpha"),
    ("gc", "--dry-run"),
    ("sync", "alpha"),
    ("land", "alpha"),
    ("release", "alpha"),
]


def in_worktree(path: Path, moddir: Path) -> Path:
    """Make the submodule's git dir `sub/.git` itself, a directory in the lane's worktree,
    as a lane makes one by hand (the shims cannot tell it from git status's fast pass:
    docs/trust-boundary.md Layer 2); returns it."""
    dotgit = path / "sub" / ".git"
    dotgit.unlink()
    moddir.rename(dotgit)
    git(path, "config", "--file", str(dotgit / "config"), "--unset", "core.worktree")
    return dotgit


@pytest.mark.parametrize("where", ["admin", "worktree"])
def test_submodule_config_programs_never_run_in_owner_commands(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path, where: str
) -> None:
    """Owner commands on a lane with an armed submodule, its git dir in the lane's admin
    dir (git's own) or `sub/.git` in the worktree (the lane's making): none runs a
    program the submodule's config or attributes name."""
    repo, path, moddir = sub_lane
    if where == "worktree":
        moddir = in_worktree(path, moddir)
    marker, prog, hooks = payload(tmp_path)
    arm(moddir, path, prog, hooks)
    # sanity: git run the ordinary way in the lane does run the submodule's programs
    git(path, "status", "--porcelain", check=False)
    assert marker.exists(), "the attack is not armed: plain git status ran nothing"
    marker.unlink()
    os.utime(path / "sub" / "s.txt", (1_900_000_100, 1_900_000_100))

    (path / "wip.txt").write_text("uncommitted\n")  # so conflicts/export/checkpoint add -A
    results = {}
    ran = []
    for args in OWNER_COMMANDS:
        r = repo.jlane(*args)
        results[args[0]] = (r.rc, r.stdout[-300:], r.stderr[-300:])
        if marker.exists():  # each command on its own: which of them ran a program
            ran.append((" ".join(args), marker.read_text()))
            marker.unlink()
    assert ran == [], f"owner commands ran programs of the submodule's config: {ran}"
    # the lane landed (its submodule is at the recorded commit, content unchanged)
    assert results["land"][0] == 0, results["land"]
    assert repo.sha() == git(path, "rev-parse", "HEAD").stdout.strip()


def test_submodule_changes_still_seen_without_running_its_config(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path
) -> None:
    """A submodule with uncommitted changes makes the lane dirty (status, land refuses),
    and one at another commit too: found from its files, never read as clean."""
    repo, path, moddir = sub_lane
    marker, prog, hooks = payload(tmp_path)
    arm(moddir, path, prog, hooks)
    # same size as the committed "s\n": git must hash it (its clean filter) to see the change
    (path / "sub" / "s.txt").write_text("t\n")
    st = repo.jlane("status")
    [ln] = [x for x in st.json["lanes"] if x["key"] == "alpha"]
    assert ln["dirty"], st.stdout
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code in ("lane_dirty", "submodule_differs"), r.stdout + r.stderr
    assert not marker.exists(), marker.read_text()

    git(
        path / "sub",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "filter.evil.clean=cat",
        "-c",
        "filter.evil.smudge=cat",
        "commit",
        "-qam",
        "moved",
    )
    marker.unlink(missing_ok=True)
    st = repo.jlane("status")
    [ln] = [x for x in st.json["lanes"] if x["key"] == "alpha"]
    assert ln["dirty"], st.stdout
    r = repo.jlane("land", "alpha")
    assert r.rc == 1 and r.code in ("lane_dirty", "submodule_differs"), r.stdout + r.stderr
    assert not marker.exists(), marker.read_text()


_ABI = sandbox.abi()


@pytest.mark.skipif(
    bool(sandbox.usable(_ABI)), reason=f"no usable Landlock: {sandbox.usable(_ABI)}"
)
def test_sandboxed_cmd_can_write_submodule_config_and_owner_runs_nothing(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path, gitlane_on_path: Path
) -> None:
    """The write itself happens inside `git lane exec --sandbox` (the admin dir is
    granted); the owner's commands afterwards run none of it."""
    repo, _path, moddir = sub_lane
    marker, prog, _hooks = payload(tmp_path)
    body = tmp_path / "body.sh"
    body.write_text(
        "set -e\n"
        "AD=$(git rev-parse --path-format=absolute --git-dir)\n"
        f"printf '[filter \"evil\"]\\n\\tclean = %s\\n[core]\\n\\tfsmonitor = %s\\n' '{prog}' '{prog}'"
        ' >> "$AD/modules/sub/config"\n'
        'mkdir -p "$AD/modules/sub/info"\n'
        "echo '* filter=evil' > \"$AD/modules/sub/info/attributes\"\n"
        "touch -d '2030-01-01' sub/s.txt\n"
        "echo WROTE\n"
    )
    r = repo.lane("exec", "--sandbox", "alpha", "--", "sh", str(body))
    assert r.rc == 0 and "WROTE" in r.stdout, r.stdout + r.stderr
    assert "evil" in (moddir / "config").read_text()
    for args in (("status", "alpha"), ("land", "alpha")):
        r = repo.jlane(*args)
        assert not marker.exists(), (args, marker.read_text(), r.stdout, r.stderr)
    assert r.rc == 0, r.stdout + r.stderr


def test_checkpoint_records_submodule_head_without_running_its_config(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path
) -> None:
    """add -A would run `git status` inside the submodule: the checkpoint leaves the
    gitlink out of the add and records the commit the submodule has checked out."""
    repo, path, moddir = sub_lane
    marker, prog, hooks = payload(tmp_path)
    (path / "sub" / "s.txt").write_text("moved\n")
    git(path / "sub", "commit", "-qam", "moved")
    moved = git(path / "sub", "rev-parse", "HEAD").stdout.strip()
    arm(moddir, path, prog, hooks)
    (path / "wip.txt").write_text("wip\n")
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert not marker.exists(), marker.read_text()
    tree = git(path, "ls-tree", "HEAD", "sub", "wip.txt").stdout
    assert f"160000 commit {moved}\tsub" in tree and "wip.txt" in tree, tree


def test_submodule_untracked_and_ignore_settings(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path
) -> None:
    """An untracked file in a submodule makes the lane dirty, as plain `git status` says;
    the owner's `submodule.<name>.ignore` is honoured as git honours it."""
    repo, path, moddir = sub_lane
    marker, prog, hooks = payload(tmp_path)
    arm(moddir, path, prog, hooks)

    def dirty() -> list[str]:
        st = repo.jlane("status")
        assert st.rc == 0, st.stdout + st.stderr
        [ln] = [x for x in st.json["lanes"] if x["key"] == "alpha"]
        return list(ln["dirty_paths"])

    assert dirty() == []
    (path / "sub" / "new.txt").write_text("untracked in the submodule\n")
    assert dirty() == ["sub"]
    repo.git("config", "submodule.sub.ignore", "untracked")
    assert dirty() == []
    (path / "sub" / "s.txt").write_text("changed\n")
    assert dirty() == ["sub"]
    repo.git("config", "submodule.sub.ignore", "dirty")
    assert dirty() == []
    repo.git("config", "submodule.sub.ignore", "none")
    assert dirty() == ["sub"]
    assert not marker.exists(), marker.read_text()


def test_unreadable_submodule_git_dir_is_refused_not_clean(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path, gitlane_on_path: Path
) -> None:
    """A submodule whose `.git` names no git dir (or whose HEAD names no readable commit)
    cannot be looked at without git inside it: refused, and the `next` (repair moves its
    files into a new kept/ directory, nothing deleted, and leaves it unpopulated), run from
    where it was printed, recovers: the lane is clean again."""
    repo, path, _moddir = sub_lane
    (path / "sub" / "s.txt").write_text("work in the submodule\n")
    (path / "sub" / ".git").write_text(f"gitdir: {tmp_path / 'nowhere'}\n")
    for args in (("status",), ("land", "alpha"), ("release", "alpha")):
        r = repo.jlane(*args)
        assert r.rc == 1 and r.code == "submodule_unreadable", (args, r.stdout, r.stderr)
    j = r.json
    assert re.fullmatch(INTO + " --set-aside-submodule sub", join_next(j["next"])), j
    for cmd in j["next"]:
        done = subprocess.run(cmd, shell=True, cwd=repo.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    [kept] = [k for k in (repo.state_dir / "kept").iterdir() if k.name.startswith("alpha.")]
    assert (kept / "sub" / "s.txt").read_text() == "work in the submodule\n"
    assert (path / "sub").is_dir() and os.listdir(path / "sub") == []  # unpopulated
    st = repo.jlane("status")
    assert st.rc == 0, st.stdout + st.stderr
    [ln] = [x for x in st.json["lanes"] if x["key"] == "alpha"]
    assert not ln["dirty"], ln


def test_set_aside_submodule_never_follows_a_link_the_lane_put_on_its_way(
    repo: Repo, tmp_path: Path, gitlane_on_path: Path
) -> None:
    """submodule_unreadable for `a/sub`: its next was `mv -n -T -- LANE/a/sub
    LANE/a/sub.moved-aside && mkdir LANE/a/sub`, and a process of the lane could swap `a`
    for a link to a directory of the owner's between the refusal and the owner's run: the
    owner renamed a directory of its own and made one there. The next is now `git lane
    repair alpha --set-aside-submodule a/sub`, which reaches `a` from the lane's root
    without following a link: refused keep_failed, the owner's directory as it was. A link
    at `a/sub` itself, and a path that is no submodule of the lane, are refused too."""
    path, _moddir = lane_with_submodule(repo, tmp_path, "a/sub")
    (path / "a" / "sub" / ".git").write_text(f"gitdir: {tmp_path / 'nowhere'}\n")
    r = repo.jlane("status")
    assert (r.rc, r.code) == (1, "submodule_unreadable"), r.stdout + r.stderr
    assert re.fullmatch(INTO + " --set-aside-submodule a/sub", join_next(r.json["next"])), r.json
    owner = tmp_path / "owner-dir"  # the owner's, outside every lane
    (owner / "sub").mkdir(parents=True)
    (owner / "sub" / "own.txt").write_text("the owner's own\n")
    os.rename(path / "a", tmp_path / "lane-a")  # the lane, before the owner runs the next
    (path / "a").symlink_to(owner)
    done = subprocess.run(
        join_next(r.json["next"]), shell=True, cwd=repo.path, capture_output=True, text=True
    )
    assert sorted(os.listdir(owner)) == ["sub"], (
        "the next of submodule_unreadable, run as written, renamed or made a directory in "
        f"{owner} (outside the lane) through a link the lane put at a: {os.listdir(owner)}"
    )
    assert sorted(os.listdir(owner / "sub")) == ["own.txt"], os.listdir(owner / "sub")
    assert done.returncode == 1 and "[keep_failed]" in done.stderr, done.stdout + done.stderr
    # a link at the submodule's own name: refused, neither it nor what it names moved
    (path / "a").unlink()
    os.rename(tmp_path / "lane-a", path / "a")
    os.rename(path / "a" / "sub", tmp_path / "lane-sub")
    (path / "a" / "sub").symlink_to(owner / "sub")
    j = repo.jlane("repair", "alpha", "--set-aside-submodule", "a/sub")
    assert (j.rc, j.code) == (1, "keep_failed"), j.stdout + j.stderr
    assert sorted(os.listdir(path / "a")) == ["sub"] and (path / "a" / "sub").is_symlink()
    assert sorted(os.listdir(owner / "sub")) == ["own.txt"]
    # a directory that is no submodule of the lane (no gitlink at or above it)
    (path / "a" / "sub").unlink()
    os.rename(tmp_path / "lane-sub", path / "a" / "sub")
    for rel in ("a", "a/subx", "../alpha/a/sub", "a/sub/.git"):
        j = repo.jlane("repair", "alpha", "--set-aside-submodule", rel)
        assert (j.rc, j.code) == (1, "keep_failed"), (rel, j.stdout, j.stderr)
    assert sorted(os.listdir(path / "a")) == ["sub"]
    assert (path / "a" / "sub" / ".git").is_file()


def test_submodule_unreadable_names_the_lane_from_its_record_never_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next names the lane whose record this run read (pinned) and the submodule's path
    from that lane's root, never resolved through a link the lane put in it (`a` naming
    another lane); a path in no pinned lane gets `git lane status`, never a command that
    acts on it by its path."""
    monkeypatch.setattr(glgit, "_LANES", {})
    monkeypatch.setattr(glgit, "_LANE_KEYS", {})
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    (alpha / "s").mkdir(parents=True)
    (alpha / "s" / ".git").write_text("no gitdir line\n")
    (beta / "sub").mkdir(parents=True)
    (alpha / "a").symlink_to(beta)
    glgit.pin_lane(alpha, str(tmp_path / "admin-a"), str(tmp_path), "alpha")
    glgit.pin_lane(beta, str(tmp_path / "admin-b"), str(tmp_path), "beta")
    assert glgit.lane_of(alpha / "a" / "sub") == ("alpha", "a/sub")
    assert glgit.lane_of(beta / "sub") == ("beta", "sub")
    assert glgit.lane_of(tmp_path / "elsewhere" / "sub") is None
    with pytest.raises(Refusal) as known:
        glgit.submodule_git_dir(str(alpha / "s"))
    assert re.fullmatch(INTO + " --set-aside-submodule s", join_next(known.value.next))
    monkeypatch.setattr(glgit, "_LANE_KEYS", {})
    with pytest.raises(Refusal) as unknown:
        glgit.submodule_git_dir(str(alpha / "s"))
    assert (unknown.value.code, unknown.value.next) == ("submodule_unreadable", ["git lane status"])


def test_sync_conflict_and_continue_never_run_submodule_config(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path
) -> None:
    """The owner's sync stops on a conflict; `continue` lists the step's files (`diff
    HEAD`), stages them and lets git commit the step (which computes a status): none of
    it runs git inside the armed submodule."""
    repo, path, moddir = sub_lane
    repo.commit(path, "f.txt", "lane\n")
    beta = repo.create("beta")
    repo.commit(beta, "f.txt", "main\n")
    assert repo.jlane("land", "beta").rc == 0
    marker, prog, hooks = payload(tmp_path)
    arm(moddir, path, prog, hooks)
    r = repo.jlane("sync", "alpha")
    assert r.rc == 1 and r.code == "sync_conflicts", r.stdout + r.stderr
    assert not marker.exists(), marker.read_text()
    (path / "f.txt").write_text("resolved\n")
    os.utime(path / "sub" / "s.txt", (1_900_000_200, 1_900_000_200))
    r = repo.jlane("continue", "alpha")
    assert r.rc == 0 and r.json["state"] == "fresh", r.stdout + r.stderr
    assert not marker.exists(), marker.read_text()
    assert (path / "f.txt").read_text() == "resolved\n"


@pytest.mark.parametrize("where", ["admin", "worktree"])
def test_a_clean_release_still_never_removes_a_populated_submodule(
    sub_lane: tuple[Repo, Path, Path], where: str
) -> None:
    """The release of a lane with nothing to lose removes it through directory fds now
    (red team 14A: `git worktree remove LANE` removed by path while a process of the
    lane may still run), so git's own refusal of a worktree holding a populated submodule
    is made by release: the submodule's git dir (its commits) in the admin dir, or `.git`
    a directory in the lane, is never removed without `--confirm` (which keeps the
    first in `kept/`)."""
    repo, path, moddir = sub_lane
    assert repo.jlane("land", "alpha").code == "landed"
    gd = moddir
    if where == "worktree":
        gd = in_worktree(path, moddir)
        moddir.parent.rmdir()  # `<admin>/modules`, empty now: only the gitlink tells
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "worktree_remove_failed"), r.stdout
    assert (gd / "config").is_file() and (path / "alpha.txt").is_file()


def run_as_written(steps: list[str], cwd: Path) -> None:
    """Each `next` step as the owner runs it by hand (a shell), stdin closed."""
    for step in steps:
        done = subprocess.run(
            step, shell=True, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
        assert done.returncode == 0, (step, done.stdout, done.stderr)


@pytest.mark.parametrize(
    ("command", "how", "ignore"),
    [("land", "dirty", "dirty"), ("land", "moved", "all"), ("export", "dirty", "dirty")],
)
def test_submodule_differs_next_never_runs_git_inside_the_submodule(
    repo: Repo, tmp_path: Path, gitlane_on_path: Path, command: str, how: str, ignore: str
) -> None:
    """Red team 15B F1: submodule_differs (changes of the submodule's own, or another
    commit checked out, that its `ignore` setting hides) named `git -C LANE/sub stash push
    --include-untracked` or `git -C LANE submodule update --init --checkout -- sub`
    (export: `git -C LANE/sub status --short`): git inside the submodule's repository,
    whose git dir (<admin>/modules/sub: config, hooks, info/attributes) a sandboxed lane
    writes, so the owner ran the lane's fsmonitor, hooks and filters. The next is now the
    engine's `repair --into NAME --set-aside-submodule sub`: the submodule's files go into
    kept/, an empty directory is left (unpopulated), and the command then goes through;
    what differed is read by the engine and named in the refusal."""
    path, moddir = lane_with_submodule(repo, tmp_path, ignore=ignore)
    sub = path / "sub"
    recorded = git(sub, "rev-parse", "HEAD").stdout.strip()
    if how == "dirty":
        (sub / "s.txt").write_text("changed in the lane\n")
        (sub / "new.txt").write_text("untracked in the submodule\n")
    else:
        (sub / "s.txt").write_text("moved\n")
        git(sub, "commit", "-q", "-am", "moved")
    moved = git(sub, "rev-parse", "HEAD").stdout.strip()
    marker, prog, hooks = payload(tmp_path)
    arm(moddir, path, prog, hooks)
    r = repo.jlane(command, "alpha")
    assert (r.rc, r.code) == (1, "submodule_differs"), r.stdout + r.stderr
    [s] = r.json["details"]["submodules"]
    assert (s["path"], s["recorded"], s["head"]) == ("sub", recorded, moved), s
    assert sorted(s["dirty_paths"]) == (["new.txt", "s.txt"] if how == "dirty" else []), s
    assert r.json["next"][-1] == f"git lane {command} alpha", r.json["next"]
    assert not marker.exists(), marker.read_text()
    run_as_written(r.json["next"][:-1], repo.path)
    assert not marker.exists(), (
        "running submodule_differs' next as written ran the lane's program as the owner",
        r.json["next"],
        marker.read_text(),
    )
    kept = Path(r.json["details"]["kept"]) / "sub"
    assert (kept / "s.txt").read_text() == (
        "moved\n" if how == "moved" else "changed in the lane\n"
    )
    assert os.listdir(sub) == []  # unpopulated: git sees the tip's commit
    git(tmp_path, "cat-file", "-e", moved, env={"GIT_DIR": str(moddir)})  # its commits stay
    again = repo.jlane(command, "alpha")
    assert again.rc == 0, again.stdout + again.stderr
    assert not marker.exists(), marker.read_text()


def test_set_aside_submodule_into_kept_never_follows_a_link_nor_takes_a_bad_name(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path
) -> None:
    """`--into` with --set-aside-submodule: only a name git-lane gives a kept/ directory,
    and a link the lane put at the submodule's name is refused, neither moved nor
    followed."""
    repo, path, _moddir = sub_lane
    for bad in ("../x", ".hidden", "a/b"):
        j = repo.jlane("repair", "alpha", "--into", bad, "--set-aside-submodule", "sub")
        assert (j.rc, j.code) == (1, "keep_failed"), (bad, j.stdout, j.stderr)
    assert (path / "sub" / "s.txt").is_file()
    owner = tmp_path / "owner-dir"
    owner.mkdir()
    (owner / "own.txt").write_text("the owner's own\n")
    os.rename(path / "sub", tmp_path / "lane-sub")
    (path / "sub").symlink_to(owner)
    j = repo.jlane("repair", "alpha", "--into", "alpha.x", "--set-aside-submodule", "sub")
    assert (j.rc, j.code) == (1, "keep_failed"), j.stdout + j.stderr
    assert (path / "sub").is_symlink() and os.listdir(owner) == ["own.txt"]


def test_a_pinned_status_next_never_runs_the_lanes_submodule_filter_as_the_owner(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path, gitlane_on_path: Path
) -> None:
    """Red team 15B F2: `git.owner_git(LANE) status` (the next of lane_unmerged,
    worktree_remove_failed, conflict_check_failed, lane_changed_during_gate, sync_failed,
    ...) pins the lane's repository and core.fsmonitor=false, but `git status` still ran
    `git status` inside every populated submodule it does not ignore (the lane's
    .gitmodules decides): there git read the submodule's config and info/attributes in
    <admin>/modules/sub, which a sandboxed lane writes, and ran a clean filter named there
    as the owner. The status next is now git.owner_status: `--ignore-submodules=all` on
    the command line, which overrides every `ignore` setting."""
    repo, path, moddir = sub_lane
    marker, prog, hooks = payload(tmp_path)
    arm(moddir, path, prog, hooks)
    # the lane leaves a conflict in its index (as a stopped merge does)
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=path, input="u\n", text=True,
        capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip
    subprocess.run(
        ["git", "update-index", "--index-info"], cwd=path, check=True, text=True,
        input=f"100644 {blob} 1\tu.txt\n100644 {blob} 2\tu.txt\n",
    )  # fmt: skip
    r = repo.jlane("conflicts", "--include-dirty")
    assert r.rc == 0, r.stdout + r.stderr
    [ln] = [x for x in r.json["lanes"] if x["key"] == "alpha"]
    assert ln["skipped"]["code"] == "lane_unmerged", ln
    assert not marker.exists(), marker.read_text()
    run_as_written(ln["skipped"]["next"], repo.path)
    assert not marker.exists(), (
        "running lane_unmerged's next as written ran the lane's clean filter as the owner",
        ln["skipped"]["next"],
        marker.read_text(),
    )
    # the same status with nothing ignoring the submodule does run it: the attack is armed
    os.utime(path / "sub" / "s.txt", (1_900_000_300, 1_900_000_300))
    run_as_written([ln["skipped"]["next"][0].replace(" --ignore-submodules=all", "")], repo.path)
    assert marker.exists(), "the attack is not armed: plain git status ran nothing"


def test_a_switch_next_never_reports_local_changes_through_the_lanes_submodule(
    sub_lane: tuple[Repo, Path, Path], tmp_path: Path, gitlane_on_path: Path
) -> None:
    """lane_branch_mismatch names `git switch BRANCH` in the lane: a switch that changes
    files reports the local changes after it, a status that runs git inside each populated
    submodule (its filter, as the owner). The next switches --quiet: no report."""
    repo, path, moddir = sub_lane
    git(path, "switch", "-q", "-c", "other", "HEAD~1")  # another tree than the lane's tip
    marker, prog, hooks = payload(tmp_path)
    arm(moddir, path, prog, hooks)
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (1, "lane_branch_mismatch"), r.stdout + r.stderr
    assert not marker.exists(), marker.read_text()
    run_as_written(r.json["next"], repo.path)
    assert not marker.exists(), (r.json["next"], marker.read_text())
    assert git(path, "branch", "--show-current").stdout.strip() == "lane/alpha"
