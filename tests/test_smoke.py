from conftest import Repo


def test_create_commit_land_roundtrip(repo: Repo) -> None:
    repo.config("gate", "off")
    a = repo.create("alpha")
    tip = repo.commit(a, "a.txt", "a\n")
    r = repo.jlane("land", "alpha")
    assert r.rc == 0, r.stderr
    assert r.code == "landed"
    assert repo.sha() == tip
    assert (repo.path / "a.txt").read_text() == "a\n"
