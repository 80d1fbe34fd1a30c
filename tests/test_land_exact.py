"""`git lane land` ships exactly the commit its gate tested (issue 8 section 3): nothing that
`git status` hides (index flags, sparse checkouts, ignored submodules) reaches the gate,
`gate_worktree = "clean"` gates a fresh worktree of the tip, conflict markers committed
past the hook stop at the door (G9), and a hub that git could not carry along is reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from hookfix import install

from conftest import Repo, git
from enginehelp import (
    add_submodule,
    epoch,
    head,
    owner_file,
    ready_lane,
    spawn_lane,
    status_porcelain,
    wait_for,
)


def gate(repo: Repo, command: str, timeout: int | None = None) -> None:
    repo.config("gate_command", json.dumps(command))
    if timeout is not None:
        repo.config("gate_timeout", str(timeout))


def refused(
    repo: Repo, code: str, key: str, env: dict[str, str] | None = None
) -> dict[str, object]:
    """A land that must be refused with `code`, leaving main and the lock as they were."""
    before = repo.sha()
    r = repo.jlane("land", key, env=env)
    assert r.rc == 1, (r.rc, r.stdout, r.stderr)
    assert r.code == code, r.stdout
    assert "Traceback" not in r.stderr
    assert repo.sha() == before
    assert not owner_file(repo).exists()
    return dict(r.json)


def landed(repo: Repo, key: str, env: dict[str, str] | None = None) -> dict[str, object]:
    r = repo.jlane("land", key, env=env)
    assert r.rc == 0 and r.code == "landed", (r.rc, r.stdout, r.stderr)
    return dict(r.json)


def sh(command: str, cwd: Path) -> None:
    """Run one `next` entry exactly as written."""
    res = subprocess.run(command, shell=True, cwd=cwd, text=True, capture_output=True)
    assert res.returncode == 0, (command, res.stdout, res.stderr)


def run_next(j: dict[str, object], cwd: Path) -> None:
    """Every `next` entry but the final `git lane land`, in order."""
    nxt = list(j["next"])  # type: ignore[call-overload]
    assert nxt[-1].startswith("git lane land ")
    for cmd in nxt[:-1]:
        sh(cmd, cwd)


# -- the gate sees the tip: index flags ---------------------------------------------------------
def test_assume_unchanged_file_that_differs_is_refused(repo: Repo, tmp_path: Path) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n", "b.txt": "b\n"})
    git(path, "update-index", "--assume-unchanged", "--", "a.txt")
    (path / "a.txt").write_text("only in the worktree\n")
    assert status_porcelain(path) == ""  # git status does not show it

    j = refused(repo, "lane_index_flags", "alpha")
    assert j["details"]["assume_unchanged"] == ["a.txt"]  # type: ignore[index]
    # the next clears the flag: the change is then ordinary uncommitted work (G2)
    run_next(j, tmp_path)
    assert refused(repo, "lane_dirty", "alpha")["details"]["dirty_paths"] == ["a.txt"]  # type: ignore[index]
    git(path, "checkout", "--", "a.txt")
    landed(repo, "alpha")


def test_assume_unchanged_file_equal_to_the_tip_lands(repo: Repo) -> None:
    """The flag alone is no difference (core.ignoreStat sets it on every added file)."""
    gate(repo, "true")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n"})
    git(path, "update-index", "--assume-unchanged", "--", "a.txt", "README.md")
    assert landed(repo, "alpha")["main_after"] == head(path)


def test_assume_unchanged_file_deleted_or_made_executable_is_refused(repo: Repo) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n", "run.sh": "echo hi\n"})
    git(path, "update-index", "--assume-unchanged", "--", "a.txt", "run.sh")
    (path / "a.txt").unlink()
    (path / "run.sh").chmod(0o755)
    j = refused(repo, "lane_index_flags", "alpha")
    assert j["details"]["assume_unchanged"] == ["a.txt", "run.sh"]  # type: ignore[index]


def test_skip_worktree_file_that_differs_is_refused(repo: Repo, tmp_path: Path) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n"})
    git(path, "update-index", "--skip-worktree", "--", "a.txt")
    (path / "a.txt").write_text("only in the worktree\n")
    assert status_porcelain(path) == ""

    j = refused(repo, "lane_index_flags", "alpha")
    assert j["details"]["skip_worktree"] == ["a.txt"]  # type: ignore[index]
    run_next(j, tmp_path)
    refused(repo, "lane_dirty", "alpha")


def test_skip_worktree_file_missing_is_refused_and_the_next_restores_it(
    repo: Repo, tmp_path: Path
) -> None:
    gate(repo, "test -f a.txt")
    path = ready_lane(repo, "alpha", {"a.txt": "tip\n"})
    git(path, "update-index", "--skip-worktree", "--", "a.txt")
    (path / "a.txt").unlink()
    j = refused(repo, "lane_index_flags", "alpha")
    assert j["details"]["missing"] == ["a.txt"]  # type: ignore[index]
    run_next(j, tmp_path)
    assert (path / "a.txt").read_text() == "tip\n"
    landed(repo, "alpha")


def test_many_flagged_paths_get_a_next_that_lists_them_through_git(
    repo: Repo, tmp_path: Path
) -> None:
    gate(repo, "true")
    files = {f"d/f{i:02d} 'q'.txt": f"{i}\n" for i in range(30)}
    path = repo.create("alpha")
    for name, text in files.items():
        (path / name).parent.mkdir(exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "many")
    git(path, "update-index", "--skip-worktree", "--", *files)
    for name in files:
        (path / name).unlink()
    j = refused(repo, "lane_index_flags", "alpha")
    assert len(j["details"]["missing"]) == 30  # type: ignore[arg-type]
    run_next(j, tmp_path)
    assert all((path / n).exists() for n in files)
    landed(repo, "alpha")


def make_sparse(where: Path, *dirs: str) -> None:
    """`where` sparse as `git sparse-checkout set DIRS` leaves it (skip-worktree entries,
    their files gone), with extensions.worktreeConfig, which it turns on, off again: while
    it is on no git-lane command runs git in a lane (red team 14A)."""
    git(where, "sparse-checkout", "set", *dirs)
    git(where, "config", "--unset", "extensions.worktreeConfig")


def test_sparse_checkout_in_the_lane_is_refused(repo: Repo, tmp_path: Path) -> None:
    gate(repo, "test -f b/two.txt")
    path = ready_lane(repo, "alpha", {"a/one.txt": "1\n", "b/two.txt": "2\n"})
    make_sparse(path, "a")
    assert not (path / "b" / "two.txt").exists()
    assert status_porcelain(path) == ""

    j = refused(repo, "lane_index_flags", "alpha")
    d = j["details"]
    assert "b/two.txt" in d["missing"]  # type: ignore[operator]
    assert not [n for n in j["next"] if "sparse-checkout" in n], j["next"]  # type: ignore[union-attr]
    assert "git lane config set gate_worktree clean" in j["alternatives"]  # type: ignore[operator]
    run_next(j, tmp_path)
    assert (path / "b" / "two.txt").exists()
    landed(repo, "alpha")


def test_sparse_lane_lands_with_a_clean_gate_worktree(repo: Repo) -> None:
    gate(repo, "test -f b/two.txt")  # the gate sees the whole tip, not the sparse lane
    repo.config("gate_worktree", "clean")
    path = ready_lane(repo, "alpha", {"a/one.txt": "1\n", "b/two.txt": "2\n"})
    make_sparse(path, "a")
    assert landed(repo, "alpha")["main_after"] == head(path)


def test_sparse_lane_lands_when_no_gate_looks_at_it(repo: Repo) -> None:
    repo.config("gate", "off")
    path = ready_lane(repo, "alpha", {"a/one.txt": "1\n", "b/two.txt": "2\n"})
    make_sparse(path, "a")
    landed(repo, "alpha")


def test_clean_gate_worktree_is_whole_when_the_hub_is_sparse(repo: Repo) -> None:
    repo.config("gate_worktree", "clean")
    gate(repo, "test -f b/two.txt")
    path = repo.create("alpha")
    (repo.path / "b").mkdir()
    repo.commit(repo.path, "b/two.txt", "2\n")  # main, before the hub goes sparse
    make_sparse(repo.path, "a")
    git(path, "rebase", "-q", "main")
    repo.commit(path, "a/one.txt", "1\n")
    landed(repo, "alpha")


# -- the gate sees the tip: submodules ----------------------------------------------------------
@pytest.fixture
def with_submodule(repo: Repo, tmp_path: Path) -> Path:
    """main records a submodule `sub` whose .gitmodules says `ignore = all`."""
    return add_submodule(repo, tmp_path, ignore="all")


def test_submodule_at_another_commit_hidden_by_ignore_all_is_refused(
    repo: Repo, with_submodule: Path, gitlane_on_path: Path
) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha")
    git(path, "submodule", "update", "--init", "-q")
    recorded = head(path / "sub")
    (path / "sub" / "s.txt").write_text("moved\n")
    git(path / "sub", "commit", "-q", "-am", "moved")
    assert status_porcelain(path) == ""

    j = refused(repo, "submodule_differs", "alpha")
    [s] = j["details"]["submodules"]  # type: ignore[index]
    assert (s["path"], s["recorded"], s["head"]) == ("sub", recorded, head(path / "sub"))
    run_next(j, repo.path)  # the submodule's files into kept/, never git inside it
    assert os.listdir(path / "sub") == []  # unpopulated: the tip as it records it
    kept = Path(str(j["details"]["kept"])) / "sub"
    assert (kept / "s.txt").read_text() == "moved\n"
    landed(repo, "alpha")


def test_submodule_with_changes_hidden_by_ignore_is_refused(
    repo: Repo, with_submodule: Path, gitlane_on_path: Path
) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha")
    git(path, "submodule", "update", "--init", "-q")
    (path / "sub" / "s.txt").write_text("edited, not committed\n")
    assert status_porcelain(path) == ""
    j = refused(repo, "submodule_differs", "alpha")
    assert j["details"]["submodules"][0]["dirty_paths"] == ["s.txt"]  # type: ignore[index]
    run_next(j, repo.path)
    kept = Path(str(j["details"]["kept"])) / "sub"
    assert (kept / "s.txt").read_text() == "edited, not committed\n"
    landed(repo, "alpha")


def test_unpopulated_submodule_lands(repo: Repo, with_submodule: Path) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha")  # a new worktree does not populate submodules
    assert landed(repo, "alpha")["main_after"] == head(path)


# -- gate_worktree = "clean" ----------------------------------------------------------------------
def worktree_paths(repo: Repo) -> list[str]:
    out = git(repo.path, "worktree", "list", "--porcelain", "-z").stdout
    return [f[len("worktree ") :] for f in out.split("\0") if f.startswith("worktree ")]


@pytest.fixture
def tmpdir_env(tmp_path: Path) -> dict[str, str]:
    d = tmp_path / "tmpdir"
    d.mkdir()
    return {"TMPDIR": str(d)}


def test_clean_gate_sees_exactly_the_tip_and_is_removed(
    repo: Repo, tmp_path: Path, tmpdir_env: dict[str, str]
) -> None:
    seen = tmp_path / "seen"
    repo.config("gate_worktree", "clean")
    gate(
        repo,
        f"pwd -P > '{seen}'; git rev-parse HEAD >> '{seen}'; ls -A >> '{seen}'; "
        "test ! -e secret.txt && test ! -e build/out.o",
    )
    path = ready_lane(repo, "alpha", {".gitignore": "secret.txt\nbuild/\n", "a.txt": "a\n"})
    (path / "secret.txt").write_text("ignored, in the lane only\n")
    (path / "build").mkdir()
    (path / "build" / "out.o").write_text("stale build output\n")
    wts = worktree_paths(repo)

    j = landed(repo, "alpha", env=tmpdir_env)
    where, sha, *listing = seen.read_text().splitlines()
    assert sha == j["main_after"] == head(path)
    assert os.path.realpath(where) != os.path.realpath(path)
    assert sorted(listing) == [".git", ".gitignore", "README.md", "a.txt"]
    assert not os.path.exists(where)  # removed afterwards
    assert os.listdir(tmpdir_env["TMPDIR"]) == []
    assert worktree_paths(repo) == wts


def test_lane_gate_sees_ignored_files_by_default(repo: Repo) -> None:
    """What the default does not guarantee (the README says so)."""
    gate(repo, "test -e secret.txt")
    path = ready_lane(repo, "alpha", {".gitignore": "secret.txt\n"})
    (path / "secret.txt").write_text("x\n")
    landed(repo, "alpha")


@pytest.mark.parametrize("how", ["failed", "timeout"])
def test_clean_gate_worktree_is_removed_when_the_gate_fails(
    repo: Repo, tmpdir_env: dict[str, str], how: str
) -> None:
    repo.config("gate_worktree", "clean")
    if how == "failed":
        gate(repo, "mkdir -p made && chmod 500 made; exit 3")
    else:
        gate(repo, "sleep 30", timeout=1)
    ready_lane(repo, "alpha")
    wts = worktree_paths(repo)
    j = refused(repo, f"gate_{how}", "alpha", env=tmpdir_env)
    assert j["details"]["gate"]["status"] == how  # type: ignore[index]
    assert os.listdir(tmpdir_env["TMPDIR"]) == []
    assert worktree_paths(repo) == wts
    assert epoch(repo) == 0


@pytest.mark.slow
def test_clean_gate_worktree_is_removed_when_land_is_interrupted(
    repo: Repo, tmp_path: Path, tmpdir_env: dict[str, str]
) -> None:
    repo.config("gate_worktree", "clean")
    started = tmp_path / "started"
    gate(repo, f"pwd > '{started}'; sleep 60")
    ready_lane(repo, "alpha")
    wts = worktree_paths(repo)
    proc = spawn_lane("land", "alpha", "--json", cwd=repo.path, env=tmpdir_env)
    wait_for(
        lambda: started.exists() and started.read_text().strip() != "", 20, "the gate to start"
    )
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert os.listdir(tmpdir_env["TMPDIR"]) == []
    assert worktree_paths(repo) == wts


def test_a_clean_gate_worktree_left_by_a_killed_land_is_swept(
    repo: Repo, tmpdir_env: dict[str, str]
) -> None:
    repo.config("gate_worktree", "clean")
    gate(repo, "true")
    ready_lane(repo, "alpha")
    wts = worktree_paths(repo)
    from guard import gate as gatemod

    leftover = Path(tmpdir_env["TMPDIR"]) / "git-lane-gate-leftover"
    gatemod.record(str(repo.common_dir), leftover.name, str(leftover))  # as a land does
    git(repo.path, "worktree", "add", "-q", "--detach", str(leftover), "HEAD")
    landed(repo, "alpha", env=tmpdir_env)
    assert not leftover.exists()
    assert worktree_paths(repo) == wts


def test_clean_gate_still_rechecks_the_tip(repo: Repo) -> None:
    repo.config("gate_worktree", "clean")
    path = ready_lane(repo, "alpha")
    gate(repo, f"git -C '{path}' commit -q --allow-empty -m during")
    refused(repo, "lane_changed_during_gate", "alpha")


def test_gate_worktree_is_a_validated_key(repo: Repo) -> None:
    assert repo.jlane("config", "get", "gate_worktree").json["value"] == "lane"
    repo.config("gate_worktree", "clean")
    r = repo.jlane("config", "set", "gate_worktree", "elsewhere")
    assert r.rc == 1 and r.code == "invalid_config"


# -- G9 at the door: markers committed past the hook ----------------------------------------------
CONFLICT = "<<<<<<< ours\nmine\n=======\ntheirs\n>>>>>>> theirs\n"


def commit_no_verify(path: Path, name: str, text: str) -> None:
    (path / name).parent.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(text)
    git(path, "add", "--", name)
    git(path, "commit", "-q", "--no-verify", "-m", f"add {name}")


def test_markers_committed_with_no_verify_are_refused(repo: Repo, tmp_path: Path) -> None:
    install(repo)
    gate(repo, "true")
    path = repo.create("alpha")
    # the hook refuses the commit ...
    (path / "m.txt").write_text("top\n" + CONFLICT)
    git(path, "add", "m.txt")
    assert git(path, "commit", "-q", "-m", "markers", check=False).returncode != 0
    # ... --no-verify gets past it, and land refuses instead
    git(path, "commit", "-q", "--no-verify", "-m", "markers")
    j = refused(repo, "conflict_markers_present", "alpha")
    assert j["details"]["markers"] == ["m.txt:2"]  # type: ignore[index]
    assert epoch(repo) == 0
    # resolve, and the next records it; the land goes through with the markers gone
    (path / "m.txt").write_text("top\nmine\n")
    run_next(j, tmp_path)
    assert (
        "<<<<<<<"
        not in git(repo.path, "show", f"{landed(repo, 'alpha')['main_after']}:m.txt").stdout
    )


def test_markers_of_the_wrong_size_for_the_attribute_land(repo: Repo) -> None:
    install(repo)
    gate(repo, "true")
    path = repo.create("alpha")
    commit_no_verify(path, ".gitattributes", "doc.txt conflict-marker-size=12\n")
    commit_no_verify(path, "doc.txt", CONFLICT)  # 7-character lines are text here
    landed(repo, "alpha")


def test_markers_of_the_attribute_size_are_refused(repo: Repo) -> None:
    gate(repo, "true")
    path = repo.create("alpha")
    commit_no_verify(path, ".gitattributes", "doc.txt conflict-marker-size=12\n")
    big = "<" * 12 + " a\nx\n" + "=" * 12 + "\ny\n" + ">" * 12 + " b\n"
    commit_no_verify(path, "doc.txt", big)
    j = refused(repo, "conflict_markers_present", "alpha")
    assert j["details"]["markers"] == ["doc.txt:1"]  # type: ignore[index]


def test_markers_main_already_had_and_binary_files_do_not_refuse(repo: Repo) -> None:
    commit = repo.commit(repo.path, "old.txt", CONFLICT + "tail\n")  # before any guard
    assert commit
    gate(repo, "true")
    path = repo.create("alpha")
    commit_no_verify(path, "old.txt", CONFLICT + "tail changed\n")  # a line outside the block
    (path / "blob.bin").write_bytes(b"\0\1" + CONFLICT.encode())
    git(path, "add", "blob.bin")
    git(path, "commit", "-q", "--no-verify", "-m", "binary")
    landed(repo, "alpha")


def test_a_marker_line_added_into_an_existing_block_is_refused(repo: Repo) -> None:
    repo.commit(repo.path, "old.txt", "<<<<<<< a\nx\n=======\ny\n")  # no closer: not a block
    gate(repo, "true")
    path = repo.create("alpha")
    commit_no_verify(path, "old.txt", "<<<<<<< a\nx\n=======\ny\n>>>>>>> b\n")
    j = refused(repo, "conflict_markers_present", "alpha")
    assert j["details"]["markers"] == ["old.txt:1"]  # type: ignore[index]


# -- a hub git could not carry along is reported ----------------------------------------------------
def test_hub_update_failure_is_reported_and_status_shows_it(repo: Repo, tmp_path: Path) -> None:
    gate(repo, "true")
    path = ready_lane(repo, "alpha", {"new.txt": "new\n"})
    lock = repo.common_dir / "index.lock"  # another git process holds the hub's index
    lock.write_text("")

    j = landed(repo, "alpha")
    assert repo.sha() == head(path)  # the land happened
    hub = j["hub"]
    assert hub["updated"] is False and "index.lock" in hub["stderr"]  # type: ignore[index]
    assert j["warnings"]
    assert not (repo.path / "new.txt").exists()
    st = repo.jlane("status").json
    assert st["hub"]["out_of_step"] is True and [w for w in st["warnings"] if "out of step" in w]

    lock.unlink()  # that process is done
    for cmd in hub["next"]:  # type: ignore[index]
        sh(cmd, tmp_path)
    assert (repo.path / "new.txt").read_text() == "new\n"
    assert status_porcelain(repo.path) == ""
    st = repo.jlane("status").json
    assert st["hub"]["out_of_step"] is False and not [
        w for w in st["warnings"] if "out of step" in w
    ]


def test_the_printed_hub_update_never_overwrites_an_ignored_file(
    repo: Repo, tmp_path: Path
) -> None:
    """The hub could not be carried along (another git held its index) and, before the
    owner runs the printed command, an ignored file appears where the tip tracks one:
    read-tree would overwrite it (no option of it says otherwise), so the command checks
    first and stops, naming it; moved aside, the same command brings the hub in step. The
    status warning prints the same command (red team 13G)."""
    repo.commit(repo.path, ".gitignore", "secret.env\n")
    gate(repo, "true")
    path = repo.create("alpha")
    (path / "secret.env").write_text("lane\n")
    git(path, "add", "-f", "secret.env")
    git(path, "commit", "-q", "-m", "track it")
    lock = repo.common_dir / "index.lock"
    lock.write_text("")
    j = landed(repo, "alpha")
    hub = j["hub"]
    assert hub["updated"] is False, hub  # type: ignore[index]
    lock.unlink()
    secret = repo.path / "secret.env"
    secret.write_text("OWNER\n")
    (cmd,) = hub["next"]  # type: ignore[index]
    st = repo.jlane("status").json
    assert [w for w in st["warnings"] if cmd in w], st["warnings"]
    res = subprocess.run(cmd, shell=True, cwd=tmp_path, text=True, capture_output=True)
    assert res.returncode != 0 and "secret.env" in res.stdout, (res.stdout, res.stderr)
    assert secret.read_text() == "OWNER\n"
    assert repo.jlane("status").json["hub"]["out_of_step"] is True
    secret.rename(tmp_path / "kept-secret.env")
    sh(cmd, tmp_path)
    assert secret.read_text() == "lane\n" and status_porcelain(repo.path) == ""
    assert repo.jlane("status").json["hub"]["out_of_step"] is False


def test_the_printed_hub_update_never_overwrites_an_ignored_file_where_the_tip_needs_a_directory(
    repo: Repo, tmp_path: Path
) -> None:
    """As above, with the ignored file at a parent of what the tip adds: the hub holds an
    ignored file `logs`, the tip adds `logs/x`; the printed command listed ignored files
    at the added paths only, so read-tree replaced the file `logs` by a directory without
    a word. It now checks each parent that is no directory in the hub too, and stops; a
    directory `logs` with ignored files of its own in it stops nothing (red team 13L #4)."""
    repo.commit(repo.path, ".gitignore", "logs\n*.o\n")
    repo.commit(repo.path, "src/main.c", "int main;\n")
    gate(repo, "true")
    path = repo.create("alpha")
    for name in ("logs/x", "src/new.c"):
        (path / name).parent.mkdir(exist_ok=True)
        (path / name).write_text("lane\n")
        git(path, "add", "-f", name)
    git(path, "commit", "-q", "-m", "adds logs/x and src/new.c")
    lock = repo.common_dir / "index.lock"
    lock.write_text("")
    j = landed(repo, "alpha")
    hub = j["hub"]
    assert hub["updated"] is False, hub  # type: ignore[index]
    lock.unlink()
    logs = repo.path / "logs"
    logs.write_text("SECRET owner log\n")
    (repo.path / "src" / "main.o").write_text("an ignored build output\n")
    (cmd,) = hub["next"]  # type: ignore[index]
    res = subprocess.run(cmd, shell=True, cwd=tmp_path, text=True, capture_output=True)
    assert res.returncode != 0 and "logs" in res.stdout, (res.stdout, res.stderr)
    assert "main.o" not in res.stdout, res.stdout
    assert logs.is_file() and logs.read_text() == "SECRET owner log\n"
    logs.rename(tmp_path / "kept-logs")
    sh(cmd, tmp_path)
    assert (logs / "x").read_text() == "lane\n" and (repo.path / "src" / "new.c").is_file()
    assert (repo.path / "src" / "main.o").is_file()
    assert repo.jlane("status").json["hub"]["out_of_step"] is False


def test_the_hub_is_never_carried_over_an_ignored_file_that_came_after_g6(repo: Repo) -> None:
    """landing.carry_hub (the land's hub update, recovery's, restore-main's) looks at the
    paths the tip adds itself: an ignored file there since G6 looked (recovery may run
    much later) stops the carry; the land reports it with the moves and the command."""
    from guard import landing

    repo.commit(repo.path, ".gitignore", "secret.env\nbuild\n")
    before = repo.sha()
    assert before is not None
    path = repo.create("alpha")
    for name in ("secret.env", "build", "x.txt"):
        (path / name).write_text(f"lane {name}\n")
        git(path, "add", "-f", name)
    git(path, "commit", "-q", "-m", "track them")
    tip = head(path)
    git(repo.path, "update-ref", "refs/heads/main", tip, before)  # main moved (no hooks here)
    (repo.path / "secret.env").write_text("OWNER\n")
    (repo.path / "build").mkdir()
    (repo.path / "build" / "out.o").write_text("owner's build\n")
    state, why = landing.carry_hub(str(repo.path), "refs/heads/main", before, tip)
    assert state == "failed" and "secret.env" in why and "build" in why, (state, why)
    assert (repo.path / "secret.env").read_text() == "OWNER\n"
    assert (repo.path / "build" / "out.o").read_text() == "owner's build\n"
    assert not (repo.path / "x.txt").exists()  # nothing carried: the hub is as it was
    (repo.path / "secret.env").unlink()
    (repo.path / "build" / "out.o").unlink()  # an empty directory: git removes it
    assert landing.carry_hub(str(repo.path), "refs/heads/main", before, tip)[0] == "updated"
    assert (repo.path / "build").read_text() == "lane build\n"


def test_hub_update_success_is_reported_too(repo: Repo) -> None:
    gate(repo, "true")
    ready_lane(repo, "alpha")
    j = landed(repo, "alpha")
    assert j["hub"] == {"path": str(repo.path), "updated": True} and j["warnings"] == []
    assert repo.jlane("status").json["hub"]["out_of_step"] is False


# -- the gate sees the tip: what the repository's own config can change -------------------
def test_a_filter_in_the_repository_config_is_refused(repo: Repo, tmp_path: Path) -> None:
    """clean and smudge that are not inverses: `git status` is clean, the gate runs one
    content and main would get another. Refused until the setting is gone."""
    lp = repo.create("alpha")
    gate(repo, "sh test.sh")
    attrs = tmp_path / "attrs"
    attrs.write_text("test.sh filter=x\n")
    git(lp, "config", "core.attributesFile", str(attrs))
    git(lp, "config", "filter.x.clean", "sed s/exit.0/exit\\ 1/")
    git(lp, "config", "filter.x.smudge", "sed s/exit.1/exit\\ 0/")
    (lp / "test.sh").write_text("exit 0\n")
    git(lp, "add", "test.sh")
    git(lp, "commit", "-q", "-m", "t")
    assert status_porcelain(lp) == ""
    j = refused(repo, "untrusted_git_config", "alpha")
    keys = {s["key"] for s in j["details"]["settings"]}  # type: ignore[index]
    assert keys == {"core.attributesfile", "filter.x.clean", "filter.x.smudge"}
    run_next(j, repo.path)
    # without the filter the file is what was committed, and the gate fails on it
    (lp / "test.sh").unlink()  # so checkout writes it (same stat: it would skip the file)
    git(lp, "checkout", "--", "test.sh")
    assert (lp / "test.sh").read_text() == "exit 1\n"
    assert refused(repo, "gate_failed", "alpha")


def test_a_lying_fsmonitor_does_not_hide_a_change(repo: Repo, tmp_path: Path) -> None:
    lp = repo.create("alpha")
    gate(repo, "sh test.sh")
    (lp / "test.sh").write_text("exit 1\n")
    git(lp, "add", "test.sh")
    git(lp, "commit", "-q", "-m", "t")
    fsm = tmp_path / "fsm"
    fsm.write_text('#!/bin/sh\nprintf "tok\\0"\n')
    fsm.chmod(0o755)
    git(lp, "config", "core.fsmonitor", str(fsm))
    git(lp, "config", "core.fsmonitorHookVersion", "2")
    git(lp, "update-index", "--fsmonitor")
    git(lp, "status")
    (lp / "test.sh").write_text("exit 0\n")
    assert git(lp, "status", "--short").stdout == ""  # the monitor hides it from git
    refused(repo, "lane_dirty", "alpha")


@pytest.mark.parametrize("attr", ["c.txt binary", "* conflict-marker-size=99", "c.txt -diff"])
def test_attributes_outside_the_tree_do_not_hide_markers(
    repo: Repo, tmp_path: Path, attr: str
) -> None:
    lp = repo.create("alpha")
    repo.config("gate", "off")
    (lp / "c.txt").write_text("<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> x\n")
    git(lp, "add", "c.txt")
    git(lp, "commit", "-q", "--no-verify", "-m", "m")
    info = repo.common_dir / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text(attr + "\n")
    refused(repo, "conflict_markers_present", "alpha")
