"""Cross-rebase (`auto_sync = true`): after a land, idle clean lanes that rebase cleanly
are synced; a lane that would conflict, a dirty one, one with ignored files in main's
way and one with a live owner are left exactly as they were (branch, index, worktree)
and reported; off by default; a failing pass never fails the land."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Repo, git
from enginehelp import head, is_ancestor, rebase_dir, spawn_lane, status_porcelain, wait_for


def state(path: Path) -> tuple[str, str, str, str]:
    """What 'left exactly as it was' compares: HEAD, the index, the worktree's status,
    and the tracked files' contents (as hashed from the worktree)."""
    files = git(path, "ls-files", "-z").stdout.split("\0")
    hashed = git(path, "hash-object", "--", *[f for f in files if f]).stdout
    return head(path), git(path, "ls-files", "-s").stdout, status_porcelain(path), hashed


def setup_main_change(repo: Repo) -> None:
    (repo.path / "shared.txt").write_text("one\ntwo\nthree\n")
    repo.git("add", "shared.txt")
    repo.git("commit", "-q", "-m", "shared")
    repo.config("gate", "off")


def land_alpha(repo: Repo, line: str = "TWO") -> dict[str, object]:
    """Land lane alpha, which changes shared.txt's second line."""
    alpha = repo.create("alpha")
    repo.commit(alpha, "shared.txt", f"one\n{line}\nthree\n", "alpha edits shared")
    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stderr
    return r.json


def test_off_by_default(repo: Repo) -> None:
    setup_main_change(repo)
    beta = repo.create("beta")
    tip = repo.commit(beta, "b.txt", "b\n")
    res = land_alpha(repo)
    assert "auto_sync" not in res
    assert repo.sha("refs/heads/lane/beta") == tip  # stale, untouched
    assert res["next"] == ["git lane sync beta"]


def test_idle_clean_lanes_are_synced_and_the_rest_left_exactly_as_they_were(repo: Repo) -> None:
    setup_main_change(repo)
    repo.config("auto_sync", "true")
    beta = repo.create("beta")  # clean, touches another file: synced
    repo.commit(beta, "b.txt", "b\n", "beta work")
    gamma = repo.create("gamma")  # the same line as alpha: conflicts
    g_tip = repo.commit(gamma, "shared.txt", "one\nzwei\nthree\n", "gamma edits shared")
    delta = repo.create("delta")  # dirty
    repo.commit(delta, "d.txt", "d\n")
    (delta / "d.txt").write_text("edited\n")
    before = {k: state(p) for k, p in (("gamma", gamma), ("delta", delta))}
    res = land_alpha(repo)
    auto = res["auto_sync"]
    assert isinstance(auto, dict)
    assert auto["synced"] == ["beta"]
    main = repo.sha()
    assert main is not None and auto["main"] == main
    assert is_ancestor(repo.path, main, head(beta))
    assert git(beta, "log", "-1", "--format=%s").stdout.strip() == "beta work"
    assert status_porcelain(beta) == "" and (beta / "shared.txt").read_text() == "one\nTWO\nthree\n"
    left = {x["lane"]: x for x in auto["left"]}
    assert (left["gamma"]["code"], left["gamma"]["paths"]) == (
        "sync_would_conflict",
        ["shared.txt"],
    )
    assert left["delta"]["code"] == "lane_dirty"
    for key, path in (("gamma", gamma), ("delta", delta)):
        assert state(path) == before[key], key
        assert not rebase_dir(path)
    assert repo.sha("refs/heads/lane/gamma") == g_tip
    assert res["next"] == ["git lane sync delta", "git lane sync gamma"]  # not beta: synced
    # the prediction is what a real rebase then hits
    r = repo.jlane("sync", "gamma")
    assert r.code == "sync_conflicts"
    assert [f["path"] for f in r.json["worklist"]["files"]] == ["shared.txt"]
    assert repo.jlane("abort", "gamma").rc == 0
    # text: one line per lane
    assert repo.jlane("sync", "beta").code == "already_fresh"


def test_text_output_names_each_lane(repo: Repo) -> None:
    setup_main_change(repo)
    repo.config("auto_sync", "true")
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "b\n")
    alpha = repo.create("alpha")
    repo.commit(alpha, "shared.txt", "one\nTWO\nthree\n")
    r = repo.lane("land", "alpha")
    assert r.rc == 0, r.stderr
    assert "auto_sync: lane beta synced onto main" in r.stdout
    assert "lane beta is stale now" not in r.stdout


def test_a_lane_with_a_live_owner_is_never_rebased(repo: Repo) -> None:
    setup_main_change(repo)
    repo.config("auto_sync", "true")
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "b\n")
    before = state(beta)
    proc = spawn_lane("exec", "beta", "--", "sleep", "30", cwd=repo.path)
    try:
        wait_for(
            lambda: (
                json.loads((repo.state_dir / "lanes" / "beta.json").read_text())["owner_pid"]
                == proc.pid
            ),
            what="exec to record itself as beta's owner",
        )
        res = land_alpha(repo)
        auto = res["auto_sync"]
        assert isinstance(auto, dict)
        assert auto["synced"] == []
        assert [(x["lane"], x["code"]) for x in auto["left"]] == [("beta", "lane_owner_conflict")]
        assert state(beta) == before
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    # its owner gone, the next land's pass syncs it
    gamma = repo.create("gamma")
    repo.commit(gamma, "g.txt", "g\n")
    r = repo.jlane("land", "gamma")
    assert r.json["auto_sync"]["synced"] == ["alpha", "beta"]  # alpha: landed, fast-forwarded


def test_ignored_files_where_main_now_tracks_files_are_not_overwritten(repo: Repo) -> None:
    repo.config("gate", "off")
    repo.config("auto_sync", "true")
    (repo.path / ".gitignore").write_text("cache/\n")
    repo.git("add", ".gitignore")
    repo.git("commit", "-q", "-m", "ignore cache")
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "b\n")
    (beta / "cache").mkdir()
    (beta / "cache" / "data").write_text("beta's own, ignored\n")
    before = state(beta)
    alpha = repo.create("alpha")
    (alpha / "cache").mkdir()
    (alpha / "cache" / "data").write_text("tracked now\n")
    repo.git("add", "-f", "cache/data", cwd=alpha)
    repo.git("commit", "-q", "-m", "track cache/data", cwd=alpha)
    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stderr
    left = r.json["auto_sync"]["left"]
    assert [(x["lane"], x["code"], x["paths"]) for x in left] == [
        ("beta", "sync_would_conflict", ["cache/data"])
    ]
    assert (beta / "cache" / "data").read_text() == "beta's own, ignored\n"
    assert state(beta) == before


def test_a_rebase_that_stops_where_the_merge_was_clean_is_aborted(repo: Repo) -> None:
    setup_main_change(repo)
    repo.config("auto_sync", "true")
    beta = repo.create("beta")
    # changed and changed back: the two tips merge cleanly, the first commit does not
    repo.commit(beta, "shared.txt", "one\nzwei\nthree\n", "try zwei")
    repo.commit(beta, "shared.txt", "one\ntwo\nthree\n", "back to two")
    tip = repo.commit(beta, "b.txt", "b\n", "beta work")
    before = state(beta)
    res = land_alpha(repo)
    auto = res["auto_sync"]
    assert isinstance(auto, dict)
    assert auto["synced"] == []
    assert [(x["lane"], x["code"], x["paths"]) for x in auto["left"]] == [
        ("beta", "sync_conflicts", ["shared.txt"])
    ]
    assert state(beta) == before and not rebase_dir(beta)
    assert repo.sha("refs/heads/lane/beta") == tip


def test_a_failing_pass_never_fails_the_land(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass stopping on an error it did not expect (here: the prediction itself
    raising) is reported in auto_sync.error; the land that happened stands."""
    from guard import crossrebase
    from guard.commands import land
    from guard.repo import Repo as GRepo

    setup_main_change(repo)
    repo.config("auto_sync", "true")
    beta = repo.create("beta")
    tip = repo.commit(beta, "b.txt", "b\n")
    alpha = repo.create("alpha")
    a_tip = repo.commit(alpha, "a.txt", "a\n")

    def boom(*_a: object) -> None:
        raise RuntimeError("prediction broke")

    monkeypatch.setattr(crossrebase, "predict", boom)
    monkeypatch.chdir(repo.path)
    res = land.run(GRepo.discover(str(repo.path)), "alpha")
    assert res["code"] == "landed" and repo.sha() == a_tip
    auto = res.get("auto_sync")
    assert auto is not None and "prediction broke" in str(auto.get("error"))
    assert repo.sha("refs/heads/lane/beta") == tip and not rebase_dir(beta)


def test_a_lane_a_git_command_is_writing_in_is_left(repo: Repo) -> None:
    setup_main_change(repo)
    repo.config("auto_sync", "true")
    beta = repo.create("beta")
    tip = repo.commit(beta, "b.txt", "b\n")
    gd = Path(git(beta, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())
    (gd / "index.lock").write_text("")  # what a `git add` in progress holds
    res = land_alpha(repo)
    auto = res["auto_sync"]
    assert isinstance(auto, dict)
    assert [(x["lane"], x["code"]) for x in auto["left"]] == [("beta", "lane_busy")]
    assert repo.sha("refs/heads/lane/beta") == tip and (gd / "index.lock").exists()


def test_auto_sync_never_aborts_a_rebase_whose_state_the_lane_rewrote(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebase the pass started stops where the merge was clean, and is aborted at once:
    the lane (a process of its own, its admin dir granted) rewrote `head-name` meanwhile
    to name tag v1, and git's abort would move the tag to the lane's commit. The pass
    leaves the lane rebase_state_untrusted instead; the land stands, the tag stays."""
    from guard.commands import land, sync
    from guard.repo import Repo as GRepo

    setup_main_change(repo)
    repo.config("auto_sync", "true")
    repo.git("tag", "v1")
    v1 = repo.sha("refs/tags/v1")
    beta = repo.create("beta")
    repo.commit(beta, "shared.txt", "one\nzwei\nthree\n", "try zwei")
    repo.commit(beta, "shared.txt", "one\ntwo\nthree\n", "back to two")
    repo.commit(beta, "b.txt", "b\n", "beta work")
    alpha = repo.create("alpha")
    a_tip = repo.commit(alpha, "shared.txt", "one\nTWO\nthree\n", "alpha edits shared")
    real = sync.rebase

    def rebase_then_the_lane_writes(*a: object, **kw: object) -> object:
        res = real(*a, **kw)  # type: ignore[arg-type]
        gd = Path(git(beta, "rev-parse", "--absolute-git-dir").stdout.strip())
        (gd / "rebase-merge" / "head-name").write_text("refs/tags/v1\n")
        return res

    monkeypatch.setattr(sync, "rebase", rebase_then_the_lane_writes)
    monkeypatch.chdir(repo.path)
    res = land.run(GRepo.discover(str(repo.path)), "alpha")
    assert res["code"] == "landed" and repo.sha() == a_tip
    auto = res.get("auto_sync")
    assert isinstance(auto, dict)
    assert [(x["lane"], x["code"]) for x in auto["left"]] == [("beta", "rebase_state_untrusted")]
    assert repo.sha("refs/tags/v1") == v1
