"""Decisions made twice, once in sh (hooks/common.sh, sourced here as it is) and once in
Python, fed the same cases and held equal: which branch is main (gl_main_name /
gl_is_main vs policy.choose_main and Repo.main_branch), what a config file says
(gl_cfg_file vs config.hook_view vs tomllib), the lock owner record (gl_owner vs
lock.read_owner), the epoch (gl_epoch_read vs store.Epoch) and the refusal line
(gl_refuse vs errors.Refusal.line)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT, Repo, git
from hookfix import grepo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard import config, lock
from guard.errors import Refusal, join_next
from guard.policy import choose_main
from guard.repo import Repo as GRepo
from guard.repo import symlink_ref
from guard.store import Epoch, Store

COMMON = ROOT / "hooks" / "common.sh"
FIXTURE = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def sh(script: str, *args: str, cwd: Path | str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `script` under /bin/sh (dash here) with common.sh sourced, as a hook would.
    Output decoded without newline translation (a \\r must stay a \\r)."""
    res = subprocess.run(
        ["/bin/sh", "-c", f'. "$0"\n{script}', str(COMMON), *args], cwd=cwd, capture_output=True
    )
    return subprocess.CompletedProcess(
        res.args,
        res.returncode,
        res.stdout.decode("utf-8", "surrogateescape"),
        res.stderr.decode("utf-8", "surrogateescape"),
    )


# -- which branch is main ----------------------------------------------------------------
MAIN_CASES = [
    # configured, main ("commit", "symref", "dangling", None), master, bootstrap (no
    # commit at all)
    (cfg, main, master, False)
    for cfg in (None, "trunk", "master", "main")
    for main in ("commit", "symref", "dangling", None)
    for master in (True, False)
] + [(None, None, False, True), ("trunk", None, False, True)]


def _case_repo(
    base: Path, cfg: str | None, main: str | None, master: bool, bootstrap: bool
) -> Path:
    path = base / "case"
    git(base, "init", "-q", "-b", "side", str(path))
    if not bootstrap:
        git(path, "commit", "-q", "--allow-empty", "-m", "init")
        if main == "commit":
            git(path, "branch", "main")
        elif main == "symref":
            git(path, "symbolic-ref", "refs/heads/main", "refs/heads/side")
        elif main == "dangling":  # a symbolic ref the hooks never see (git < 2.45)
            git(path, "symbolic-ref", "refs/heads/main", "refs/heads/nowhere")
        if master:
            git(path, "branch", "master")
    if cfg:
        state = path / ".git" / "git-lane"
        state.mkdir()
        (state / "config.toml").write_text(f'main_branch = "{cfg}"\n')
    return path


def _exists(path: Path, branch: str) -> bool:
    res = git(path, "rev-parse", "-q", "--verify", f"refs/heads/{branch}^{{commit}}", check=False)
    return res.returncode == 0


def _there(path: Path, branch: str) -> bool:
    """Is `branch` there for choosing main: it resolves, or its loose ref file (or link)
    is there, resolving or not (a dangling symbolic main is still main, broken)."""
    loose = path / ".git" / "refs" / "heads" / branch
    return _exists(path, branch) or loose.is_symlink() or loose.is_file()


@pytest.mark.parametrize("cfg, main, master, bootstrap", MAIN_CASES)
def test_main_branch_decision_sh_equals_python(
    tmp_path: Path, cfg: str | None, main: str | None, master: bool, bootstrap: bool
) -> None:
    path = _case_repo(tmp_path, cfg, main, master, bootstrap)
    branches = ("main", "master", "trunk", "side", "")
    res = sh(
        'gl_context; gl_config; gl_main_name; printf "%s\\n" "chosen=$gl_main"\n'
        'for b in "$@"; do if gl_is_main "$b"; then echo "is $b=yes"; else echo "is $b=no"; fi; done',
        *branches,
        cwd=path,
    )
    assert res.returncode == 0, res.stderr
    got = dict(ln.split("=", 1) for ln in res.stdout.splitlines())

    want = choose_main(cfg, _there(path, "main"), _there(path, "master"))
    assert got["chosen"] == (want or "")
    for b in branches:
        assert got[f"is {b}"] == ("yes" if b and b == want else "no"), b
    # and the engine's Repo.main_branch makes the same choice (or refuses: none yet)
    if want is not None and _exists(path, want):
        assert GRepo.discover(path).main_branch == want
    else:
        with pytest.raises(Refusal) as exc:
            _ = GRepo.discover(path).main_branch
        assert exc.value.code == "no_main_branch"


def test_choose_main_table() -> None:
    assert choose_main(None, True, True) == "main"
    assert choose_main(None, False, True) == "master"
    assert choose_main(None, False, False) is None
    assert choose_main("trunk", False, False) == "trunk"
    assert choose_main("", True, False) == "main"  # empty is unset, as in sh


# -- what a config file says -------------------------------------------------------------
_KEYS = [
    "enabled",
    "main_branch",
    "sync_policy",
    "gate",
    '"enabled"',
    "enabled.x",
    "main_branch2",
    "mainbranch",
]
_SEPS = ["=", " = ", "\t=\t", " =", "= ", "  =  "]
_VALUES = [
    "true",
    "false",
    '"false"',
    "'false'",
    '"main"',
    "'trunk'",
    '"trunk" # c',
    "trunk",
    '"a#b"',
    "a # b",
    '"a\\"b"',
    '"""x"""',
    "'''y'''",
    '"land_time_only"',
    "overlap_mandatory",
    "1",
    '["a"]',
    "{ a = 1 }",
    '""',
    "",
    '"x',
    "'x",
    "false#c",
    "false   ",
    '"""\nenabled = false\n"""',
    # an escaped quote does not close a multi-line basic string; an escaped backslash
    # before three quotes does (red team 13G: the hooks once read this enabled = false)
    '"""\necho \\"""\nenabled = false\nx = 1"""',
    '"""a \\\\"""',
    '"""a \\"""',
    "'''a \\'''",
]
_FREE = [
    "[table]",
    "[[arr]]",
    "# comment",
    "",
    "   ",
    'x = """',
    '"""',
    "enabled",
    "= false",
    "\t",
    '\\"""',
    '\\\\"""',
    'a\\ \\"" """',
]


@st.composite
def _config_texts(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            indent = draw(st.sampled_from(["", " ", "\t", "  "]))
            lines.append(
                indent
                + draw(st.sampled_from(_KEYS))
                + draw(st.sampled_from(_SEPS))
                + draw(st.sampled_from(_VALUES))
            )
        elif draw(st.booleans()):
            lines.append(draw(st.sampled_from(_FREE)))
        else:
            lines.append(draw(st.text(st.characters(exclude_categories=["Cs"]), max_size=20)))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return end.join(lines) + draw(st.sampled_from(["", end]))


def _sh_reads(text: str) -> dict[str, str] | None:
    """What gl_cfg_file reads; None when it gives up on the file (returns 1)."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "config.toml"
        p.write_bytes(text.encode("utf-8"))
        res = sh(
            'gl_enabled=@ gl_main_cfg=@ gl_policy=@\ngl_cfg_file "$1" || exit 9\n'
            'printf "%s\\0%s\\0%s" "$gl_enabled" "$gl_main_cfg" "$gl_policy"',
            str(p),
        )
    if res.returncode == 9:
        return None
    assert res.returncode == 0, res.stderr
    e, m, p_ = res.stdout.split("\0")
    return {k: v for k, v in (("enabled", e), ("main_branch", m), ("sync_policy", p_)) if v != "@"}


@settings(max_examples=300, deadline=None)
@given(_config_texts())
def test_config_reader_sh_equals_hook_view_and_tomllib(text: str) -> None:
    seen = _sh_reads(text)
    assert seen == config.hook_view(text)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "config.toml"
        p.write_bytes(text.encode("utf-8"))
        try:
            cfg = config.load(p)
        except Refusal:
            return  # the engine refuses the file: every command says so
    # a file the hooks give up on (they refuse every commit) the engine refuses too
    assert seen is not None, text
    # an accepted file means to the hooks what it means to TOML
    assert (seen.get("enabled") != "false") == cfg["enabled"]
    assert (seen.get("main_branch") or None) == (cfg.get("main_branch") or None)
    assert seen.get("sync_policy", "on_land_mandatory") == cfg["sync_policy"]


# -- the lock owner record ---------------------------------------------------------------
# what _write_owner is given: no value holds a line break of any kind (str.splitlines')
_plain = st.text(
    st.characters(
        exclude_characters="\0\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", exclude_categories=["Cs"]
    ),
    max_size=30,
)
_hex = st.text("0123456789abcdef", min_size=40, max_size=64)


@FIXTURE
@given(
    pid=st.integers(1, 2**22),
    start=st.one_of(st.none(), st.floats(0, 2e9)),
    host=_plain,
    token=_plain,
    lane=_plain,
    before=st.one_of(st.none(), _hex),
    tip=st.one_of(st.none(), _hex),
    ticks=st.one_of(st.just(""), st.integers(0, 2**40).map(str)),
)
def test_owner_record_sh_equals_read_owner(
    repo: Repo,
    pid: int,
    start: float | None,
    host: str,
    token: str,
    lane: str,
    before: str | None,
    tip: str | None,
    ticks: str,
) -> None:
    g = grepo(repo)
    rec = lock.OwnerRecord(
        pid=pid,
        start=start,
        host=host,
        token=token,
        lane=lane,
        main_before=before or "",
        tip=tip or "",
        since="2026-01-01T00:00:00Z",
        start_ticks=ticks,
    )
    lock._write_owner(g, rec)
    py = lock.read_owner(g)
    assert py is not None
    res = sh(
        'gl_owner "$1" || exit 9\nprintf "%s\\0%s\\0%s\\0%s" "$r_pid" "$r_ticks" "$r_tip" "$r_before"',
        str(lock.owner_path(g)),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\0") == [
        str(py.pid),
        py.start_ticks,
        py.tip,
        py.main_before,
    ]


def test_owner_record_missing_is_no_record(tmp_path: Path) -> None:
    assert sh('gl_owner "$1"', str(tmp_path / "none")).returncode == 1


# -- the epoch ---------------------------------------------------------------------------
@FIXTURE
@given(
    epoch=st.integers(0, 2**63),
    lane=st.one_of(st.none(), st.text(max_size=20)),
    paths=st.lists(st.text(max_size=20), max_size=5),
    at=st.one_of(st.none(), st.text(max_size=30)),
)
def test_epoch_sh_equals_store(
    tmp_path: Path, epoch: int, lane: str | None, paths: list[str], at: str | None
) -> None:
    store = Store(tmp_path / "state")
    store.write_epoch(Epoch(epoch=epoch, lane=lane, paths=paths, at=at, main_before="a" * 40))
    res = sh('gl_epoch_read "$1"\nprintf %s "$gl_epoch"', str(store.epoch_path))
    assert res.returncode == 0, res.stderr
    assert res.stdout == str(store.read_epoch().epoch)


def test_epoch_missing_or_corrupt_reads_zero(tmp_path: Path) -> None:
    p = tmp_path / "epoch.json"
    assert sh('gl_epoch_read "$1"; printf %s "$gl_epoch"', str(p)).stdout == "0"
    p.write_text('{"epoch": "x"}')
    assert sh('gl_epoch_read "$1"; printf %s "$gl_epoch"', str(p)).stdout == "0"
    assert Store(tmp_path).read_epoch().epoch == 0


# -- the refusal line --------------------------------------------------------------------
_argtext = st.text(st.characters(exclude_characters="\0", exclude_categories=["Cs"]), max_size=40)


@FIXTURE
@given(
    code=st.from_regex(r"[a-z][a-z_]{0,30}", fullmatch=True),
    message=_argtext,
    nxt=st.lists(_argtext.filter(lambda s: s != ""), max_size=3),
)
def test_refusal_line_sh_equals_python(
    tmp_path: Path, code: str, message: str, nxt: list[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    events = state / "events.jsonl"
    events.unlink(missing_ok=True)
    res = sh(
        'state=$1 gd=/nonexistent\ngl_refuse test-hook "$2" "$3" "$4" ", \\"extra\\": 1"',
        str(state),
        code,
        message,
        join_next(nxt),
    )
    assert res.returncode == 1
    assert res.stderr == Refusal(code, message, next=nxt).line() + "\n"
    ev = json.loads(events.read_text())
    assert (ev["code"], ev["hook"], ev["kind"], ev["source"], ev["extra"]) == (
        code,
        "test-hook",
        "refusal",
        "hook",
        1,
    )


# -- which symbolic link git takes for a symbolic ref ------------------------------------
LINK_TEXTS = [
    "refs/heads/x",
    "refs/remotes/o/x",
    "refs/x",
    "refs/heads/ü",
    "refs/heads/a.b",
    "refs/",
    "refs",
    "refsx/y",
    "../../worktrees/a/HEAD",
    "/abs/path/HEAD",
    "refs/../../../worktrees/a/HEAD",
    "refs/heads/.x",
    "refs/heads/x.lock",
    "refs/heads/x.lock/y",
    "refs/heads/x/",
    "refs/heads/x.",
    "refs/heads//x",
    "refs/heads/a..b",
    "refs/heads/a b",
    "refs/heads/a\tb",
    "refs/heads/a\nb",
    "refs/heads/a\x7fb",
    "refs/heads/a~1",
    "refs/heads/a^",
    "refs/heads/a:b",
    "refs/heads/a?",
    "refs/heads/a*",
    "refs/heads/a[b",
    "refs/heads/a\\b",
    "refs/heads/a@{1}",
    "refs/heads/@",
    "refs/heads/a@b",
]


def _link_decisions(text: str) -> tuple[bool, bool, bool]:
    """(git's check-ref-format, gl_linkref, guard.repo.symlink_ref) for `text`."""
    ours = sh('gl_linkref "$1"', text).returncode == 0
    gits = subprocess.run(["git", "check-ref-format", text], capture_output=True).returncode == 0
    gits = gits and text.startswith("refs/")
    return gits, ours, symlink_ref(text)


@pytest.mark.parametrize("text", LINK_TEXTS)
def test_symbolic_link_text_sh_equals_python_equals_git(text: str) -> None:
    """Red team 14G F6: git reads a link at a loose ref as a symbolic ref only when its
    text begins refs/ and check_refname_format takes it; any other it reads through. The
    hook (gl_linkref) took any `refs/?*` for a symbolic ref, so a link `refs/../..` was
    followed as a chain git never follows; and doctor's `broken_ref_file` did the same."""
    gits, ours, py = _link_decisions(text)
    assert ours == py == gits, (text, gits, ours, py)


@FIXTURE
@given(rest=st.text(alphabet="ab./@{}~^:?*[\\ -\x7f\tlkoc", max_size=12))
def test_symbolic_link_text_sh_equals_python_equals_git_generated(rest: str) -> None:
    text = "refs/" + rest
    gits, ours, py = _link_decisions(text)
    assert ours == py == gits, (text, gits, ours, py)
