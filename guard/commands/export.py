"""`git lane export [KEY] [--format patch|json] [-o FILE]`: a lane's work as one mbox that
`git am -k --keep-cr` applies onto its base (the merge-base with main): the lane's
commits since that base as `git format-patch --binary --full-index` messages, then, when
the worktree holds more than the last commit, one more message, "Uncommitted changes of
lane KEY", carrying every uncommitted change, untracked files included, ignored files left
out. One `git am` reproduces the lane's worktree exactly (the `tree` of the result).

Read-only: the uncommitted part is staged in a temporary index (a copy of the lane's, in
a temporary directory) and its objects are written to a temporary object directory that
borrows the repository's as an alternate, so the lane's index, its worktree and the
repository's object store and refs are left exactly as they were. The patch is streamed
(stdout, or a temporary file renamed onto FILE), never held whole in memory."""

from __future__ import annotations

import base64
import codecs
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from guard import files, git, lane, recovery
from guard import objects as guard_objects
from guard.errors import Refusal
from guard.repo import Repo
from guard.results import ExportCommit, ExportFile, ExportResult

FORMATS = ("patch", "json")
APPLY = "git am -k --keep-cr --no-scissors"  # what applies the export (says --keep-subject)
UNCOMMITTED = "Uncommitted changes of lane {key}"
CHUNK = 1 << 20
ZERO = "0" * 40

# A patch any git applies, whatever the user's diff and format config say.
FORMAT_PATCH = (
    "-c",
    "core.quotePath=true",  # names as ASCII escapes: the patch stays ASCII but for content
    "format-patch",
    "--stdout",
    "--binary",
    "--full-index",
    "--keep-subject",  # `[wip] x` stays `[wip] x` through `git am -k`
    "--no-cover-letter",
    "--no-signature",
    "--no-numbered",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--find-renames",
)


@dataclass(frozen=True)
class Scratch:
    """The temporary index and object directory the uncommitted part is built in."""

    dir: str
    env: dict[str, str]


@git.in_own_context
def run(
    repo: Repo,
    key: str | None,
    fmt: str,
    output: str | None,
    sink: BinaryIO | None,
    cwd: str,
) -> ExportResult:
    """Export the lane to `output` (a file, written atomically) or to `sink` (stdout).
    With `--format json` the result itself is written, with `patch` added (streamed)."""
    key = lane.current(repo, key, "export")
    rec = lane.get(repo, key)
    if rec.status == "released":
        raise lane.not_active_refusal(repo, rec, "is released: it has no worktree to export")
    wt = git.by_path(repo.worktrees()).get(os.path.realpath(rec.path))
    if wt is None or not wt.exists:
        raise lane.missing_worktree_refusal(key, rec.path, "export")
    path = rec.path
    guard_objects.use(repo, path)  # its commits may be in its own store only
    target = _output_target(repo, key, path, output, cwd)
    if git.rebase_in_progress(path):
        raise lane.rebase_refusal(
            key, "in the middle of a sync (a rebase stopped on conflicts): HEAD is no lane tip"
        )
    if wt.branch != f"refs/heads/{rec.branch}":
        raise lane.branch_mismatch_refusal(repo, key, path, rec.branch, wt.branch)
    head = _rev(path, "HEAD")
    main_sha = repo.main_sha()
    base = git.merge_base(repo.common_dir, main_sha, head)
    if base is None:
        raise _unrepresentable(key, path, f"lane {key} shares no history with main", [])
    merges = git.run(["rev-list", "--merges", f"{base}..{head}"], path).lines()
    if merges:
        raise _unrepresentable(
            key,
            path,
            f"lane {key} has {len(merges)} merge commit(s) since its base; a patch series "
            "cannot carry a merge (format-patch leaves it out), so the export would not "
            "reproduce the lane",
            merges,
            base,
        )
    _hidden_check(repo, key, path, head)
    scratch = _scratch(path)
    try:
        tree, tip = _uncommitted(key, path, head, scratch)
        result: ExportResult = {
            "ok": True,
            "code": "exported",
            "lane": key,
            "path": path,
            "main": main_sha,
            "base": base,
            "head": head,
            "tree": tree,
            "format": fmt,
            "output": target,
            "apply": APPLY,
            "commits": _commits(path, base, head),
            "uncommitted": tip != head,
            "files": _files(path, base, tip, scratch.env),
            "patch_bytes": 0,
            "patch_encoding": "utf-8",
            "warnings": [],
        }
        result["files_bytes"] = sum(f["bytes"] for f in result["files"])
        if not result["files"] and not result["commits"]:
            result["code"] = "nothing_to_export"
        series, result["warnings"] = _am_safe(path, base, tip, scratch)
        _write(result, path, base, series, scratch, target, sink)
    finally:
        shutil.rmtree(scratch.dir, ignore_errors=True)
    repo.store.event(
        "export",
        lane=key,
        code=result["code"],
        base=base,
        head=head,
        uncommitted=result["uncommitted"],
        patch_bytes=result["patch_bytes"],
        output=target,
    )
    return result


# -- facts --------------------------------------------------------------------------------
def _rev(path: str, rev: str) -> str:
    return git.run(["rev-parse", "--verify", f"{rev}^{{commit}}"], path).stdout.strip()


def _unrepresentable(
    key: str, path: str, why: str, merges: list[str], base: str | None = None
) -> Refusal:
    nxt = (
        [f"{git.owner_git(path)} rebase {base}", f"git lane export {key}"]
        if base is not None
        else [f"{git.owner_git(path)} log --oneline -5"]
    )
    return Refusal(
        "export_unrepresentable",
        why
        + (": make the history linear (the rebase in `next`), then export again" if base else ""),
        next=nxt,
        details={"lane": key, "merges": merges[:50], "base": base},
    )


def _hidden_check(repo: Repo, key: str, path: str, head: str) -> None:
    """What `git add -A` would not see cannot be exported: files flagged assume-unchanged
    or skip-worktree that differ from HEAD, and a submodule's own uncommitted changes."""
    hidden = git.hidden_differences(path, head)
    if hidden.changed:
        flags = ["--no-assume-unchanged"] if hidden.assume_unchanged else []
        flags += ["--no-skip-worktree"] if hidden.skip_worktree else []
        listed = " ".join(git.q(p) for p in hidden.changed[:20])
        raise Refusal(
            "lane_index_flags",
            f"lane {key} has {len(hidden.changed)} file(s) flagged assume-unchanged or "
            "skip-worktree whose content differs from HEAD: `git status` hides them, so an "
            "export would leave them out",
            next=[
                f"{git.owner_git(path)} update-index {' '.join(flags)} -- {listed}",
                f"git lane export {key}",
            ],
            details={"lane": key, "paths": hidden.changed[:100]},
        )
    dirty_subs = [s for s in hidden.submodules if s.dirty]
    if dirty_subs:
        raise recovery.submodule_differs(
            repo,
            key,
            dirty_subs,
            f"git lane export {key}",
            "a patch of the lane cannot carry a submodule's own uncommitted changes",
        )


def _scratch(path: str) -> Scratch:
    objects = git.run(["rev-parse", "--path-format=absolute", "--git-path", "objects"], path)
    d = tempfile.mkdtemp(prefix="git-lane-export-")
    os.mkdir(os.path.join(d, "objects"))
    # the lane's own store too, after the shared one: a sandboxed lane's commits may be
    # there only (guard/objects.py)
    alts = [objects.stdout.removesuffix("\n"), *git.named_lane_stores()]
    env = {
        "GIT_INDEX_FILE": os.path.join(d, "index"),
        "GIT_OBJECT_DIRECTORY": os.path.join(d, "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": ":".join(map(git.alternate_entry, alts)),
        "GIT_OPTIONAL_LOCKS": "0",  # never refresh the lane's own index while looking
    }
    return Scratch(d, env)


def _uncommitted(key: str, path: str, head: str, s: Scratch) -> tuple[str, str]:
    """(tree of the worktree as `git add -A` sees it, the commit to export up to): HEAD
    itself when nothing is uncommitted, else a commit of that tree on HEAD, made in the
    scratch object directory only."""
    index = git.run(["rev-parse", "--path-format=absolute", "--git-path", "index"], path)
    own = index.stdout.removesuffix("\n")
    if os.path.lexists(own):
        try:  # stat cache and mtime: racy entries stay racy; holes stay holes
            git.copy_regular(own, s.env["GIT_INDEX_FILE"], times=True)
        except OSError as exc:
            raise git.index_copy_refusal(path, own, exc, f"git lane export {key}") from None
    else:
        git.run(["read-tree", head], path, env=s.env)
    added = git.add_all(
        path, s.env, retry=f"git lane export {key}", key=key
    )  # no git in a submodule
    if not added.ok:  # a file git cannot read or clean: its content cannot be exported
        raise Refusal(
            "export_unrepresentable",
            f"git could not stage the worktree of lane {key} to export it: "
            f"{_last_line(added.stderr)}; nothing was written",
            next=[git.owner_status(path)],
            details={"lane": key, "stderr": added.stderr[-4000:]},
        )
    tree = git.run(["write-tree"], path, env=s.env).stdout.strip()
    if tree == git.run(["rev-parse", f"{head}^{{tree}}"], path).stdout.strip():
        return tree, head
    ident: dict[str, str] = {}
    if not git.run(["var", "GIT_AUTHOR_IDENT"], path, check=False).ok:
        ident = {
            "GIT_AUTHOR_NAME": "git-lane",
            "GIT_AUTHOR_EMAIL": "git-lane@localhost",
            "GIT_COMMITTER_NAME": "git-lane",
            "GIT_COMMITTER_EMAIL": "git-lane@localhost",
        }
    msg = (
        UNCOMMITTED.format(key=key) + "\n\nWhat the worktree of lane "
        f"{key} held beyond its last commit ({head[:12]}), untracked files included and "
        "ignored files left out, as exported by `git lane export`.\n"
    )
    tip = git.run(
        ["commit-tree", tree, "-p", head, "-F", "-"], path, env={**s.env, **ident}, input=msg
    ).stdout.strip()
    return tree, tip


# -- messages git am would cut -----------------------------------------------------------------
def _am_breaks(line: str, first: bool) -> bool:
    """Whether `git am` would not keep this body line of a message as it is: it starts
    the patch (mailinfo's patchbreak: `diff -`, `Index: `, `---` alone or before a name),
    it starts a new message of the mbox (mailsplit's `From ` line ending in a time and
    year), or, as the body's first line, it is taken as an in-body header."""
    if line.startswith(("diff -", "Index: ")):
        return True
    if line.startswith("---") and len(line) >= 3:
        rest = line[3:]
        if not rest.strip(" \t\r\v\f") or (rest[0] == " " and not rest[1:2].isspace()):
            return True
    if _from_line(line):
        return True
    if first:
        low = line.lower()
        return low.startswith(("from:", "subject:", "date:", "[patch]", ">from"))
    return False


def _from_line(line: str) -> bool:
    """mailsplit's is_from_line: `From ` then, before the last colon, `d:dd`, after it
    `dd` and a number above 90 (a year): a line that starts a new message of the mbox."""
    text = line + "\n"
    if len(text) < 20 or not text.startswith("From "):
        return False
    c = len(text) - 2
    while True:
        if c < 5:
            return False
        c -= 1
        if text[c] == ":":
            break
    if not all(text[i] in "0123456789" for i in (c - 4, c - 2, c - 1, c + 1, c + 2)):
        return False
    m = re.match(r"\s*([+-]?\d+)", text[c + 3 :])
    return m is not None and int(m.group(1)) > 90


def _am_message(msg: str) -> tuple[str, list[str]]:
    """(the message with every line `git am` would cut indented by one space, those
    lines). format-patch puts the first paragraph in the Subject header, safe; the body
    after it goes line by line through mailsplit and mailinfo."""
    lines = msg.split("\n")
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    while i < len(lines) and lines[i].strip():  # the subject paragraph
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    hit: list[str] = []
    for n in range(i, len(lines)):
        if _am_breaks(lines[n], n == i):
            hit.append(lines[n])
            lines[n] = " " + lines[n]
    return "\n".join(lines), hit


def _am_safe(path: str, base: str, tip: str, s: Scratch) -> tuple[str, list[str]]:
    """(the commit to export the series up to, warnings). No form of a message makes
    `git am` keep a body line that starts a patch (`diff --git`, `---`) or a new mail:
    such a line ends the message there (`---`) or makes the series fail to apply
    (`diff --git`). So the series goes out of copies of the lane's commits (same trees,
    authors and dates, made in the scratch object directory only) whose such lines are
    indented by one space, and a warning names each commit and line. The lane is not
    touched; with no such line the lane's own commits are exported."""
    log = git.run(
        [
            "log",
            "--reverse",
            "-z",
            "--format=%H%n%an%n%ae%n%ad%n%B",
            "--date=raw",
            f"{base}..{tip}",
        ],
        path,
        env=s.env,
    )
    warnings: list[str] = []
    parent = base
    rewriting = False
    ident = {"GIT_COMMITTER_NAME": "git-lane", "GIT_COMMITTER_EMAIL": "git-lane@localhost"}
    for rec in log.z():
        sha, name, email, date, msg = rec.split("\n", 4)
        new, hit = _am_message(msg)
        if hit:
            rewriting = True
            shown = "; ".join(repr(h)[1:-1][:80] for h in hit[:3])
            warnings.append(
                f"commit {sha[:12]}: {len(hit)} message line(s) git am would cut the message "
                f"at (or fail on) are indented by one space in the export: {shown}"
            )
        if not rewriting:
            parent = sha
            continue
        env = {
            **s.env,
            **ident,
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": date,
        }
        parent = git.run(
            ["commit-tree", f"{sha}^{{tree}}", "-p", parent, "-F", "-"], path, env=env, input=new
        ).stdout.strip()
    return (parent if rewriting else tip), warnings


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def _commits(path: str, base: str, head: str) -> list[ExportCommit]:
    """The lane's commits since the base, oldest first; an empty one (no change) is in
    no message of the series (format-patch leaves it out) and says so."""
    out: list[ExportCommit] = []
    res = git.run(["log", "--reverse", "-z", "--format=%H %T%n%s", f"{base}..{head}", "--"], path)
    prev = git.run(["rev-parse", f"{base}^{{tree}}"], path).stdout.strip()
    for rec in res.z():
        first, _, subject = rec.partition("\n")
        sha, _, tree = first.partition(" ")
        out.append({"sha": sha, "subject": subject, "empty": tree == prev})
        prev = tree
    return out


def _quoted(name: str) -> tuple[str, bool]:
    """A path for JSON: as it is when its bytes are UTF-8, else as git quotes it
    (core.quotePath: octal escapes in double quotes), which is plain ASCII."""
    raw = name.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
        return name, False
    except UnicodeDecodeError:
        return git.c_quote(raw, high=True), True


def _files(path: str, base: str, tip: str, env: dict[str, str]) -> list[ExportFile]:
    """Every path the export changes, base to tip: status (A M D R T), whether git treats
    it as binary, its size in the exported tree (0 when deleted), its mode."""
    diff = ["diff", "-z", "--no-ext-diff", "--no-textconv", "--find-renames", base, tip, "--"]
    raw = git.run([*diff[:1], "--raw", "--no-abbrev", *diff[1:]], path, env=env).stdout
    num = git.run([*diff[:1], "--numstat", *diff[1:]], path, env=env).stdout
    fields = raw.split("\0")
    entries: list[tuple[str, str, str, str | None]] = []  # status, new mode, new sha, old path
    names: list[str] = []
    i = 0
    while i < len(fields) and fields[i].startswith(":"):
        meta = fields[i][1:].split(" ")
        status = meta[4]
        if status[0] in "RC":
            entries.append((status[0], meta[1], meta[3], fields[i + 1]))
            names.append(fields[i + 2])
            i += 3
        else:
            entries.append((status[0], meta[1], meta[3], None))
            names.append(fields[i + 1])
            i += 2
    binary: list[bool] = []
    nf = num.split("\0")
    j = 0
    while j < len(nf) and nf[j]:
        added, _, rest = nf[j].partition("\t")
        _deleted, _, p = rest.partition("\t")
        binary.append(added == "-")
        j += 1 if p else 3
    sizes: dict[str, int] = {}
    wanted = sorted({sha for _, mode, sha, _ in entries if sha != ZERO and mode != "160000"})
    if wanted:
        res = git.run(
            ["cat-file", "--batch-check=%(objectname) %(objectsize)"],
            path,
            env=env,
            input="\n".join(wanted) + "\n",
        )
        for ln in res.lines():
            sha, _, size = ln.partition(" ")
            sizes[sha] = int(size)
    out: list[ExportFile] = []
    for n, (status, mode, sha, old) in enumerate(entries):
        shown, quoted = _quoted(names[n])
        f: ExportFile = {
            "path": shown,
            "quoted": quoted,
            "status": status,
            "old_path": _quoted(old)[0] if old is not None else None,
            "mode": mode,
            "binary": binary[n] if n < len(binary) else False,
            "bytes": sizes.get(sha, 0),
        }
        out.append(f)
    return out


# -- writing --------------------------------------------------------------------------------
def _output_target(
    repo: Repo, key: str, lane_path: str, output: str | None, cwd: str
) -> str | None:
    """The real path `-o FILE` writes. A worker writes only inside its own lane, as the
    write shim lets it (path_outside_lane, protected_path, sync_required)."""
    if output is None:
        return None
    t = files.target_facts(output, cwd)
    if lane.is_worker():
        facts = files.lane_facts(
            key, os.path.realpath(lane_path), str(repo.common_dir), repo.owner_config.values, t
        )
        refusal = files.decide_write(t, facts, "export -o")
        if refusal is not None:
            raise refusal
    if t.kind not in ("file", "missing"):
        raise Refusal(
            "not_a_file",
            f"export -o {git.shown(output)}: that is "
            + ("a directory" if t.kind == "dir" else "a special file (not a regular file)"),
            next=[f"git lane export {key} -o {git.q(f'{key}.mbox')}"],
            details={"lane": key, "path": output, "kind": t.kind},
        )
    return t.real


class _Counter:
    """Counts what passes and checks, chunk by chunk, that it is UTF-8."""

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self.write = write
        self.bytes = 0
        self.utf8 = True
        self._dec = codecs.getincrementaldecoder("utf-8")()

    def __call__(self, data: bytes) -> None:
        self.bytes += len(data)
        if self.utf8:
            try:
                self._dec.decode(data)
            except UnicodeDecodeError:
                self.utf8 = False
        self.write(data)

    def finish(self) -> None:
        if self.utf8:
            try:
                self._dec.decode(b"", final=True)
            except UnicodeDecodeError:
                self.utf8 = False


def _write(
    result: ExportResult,
    path: str,
    base: str,
    tip: str,
    s: Scratch,
    target: str | None,
    sink: BinaryIO | None,
) -> None:
    args = [*FORMAT_PATCH, f"{base}..{tip}", "--"]

    def patch_into(write: Callable[[bytes], object]) -> _Counter:
        counter = _Counter(write)
        if result["code"] != "nothing_to_export":
            git.pipe(args, path, counter, env=s.env)
        counter.finish()
        result["patch_bytes"] = counter.bytes
        result["patch_encoding"] = "utf-8" if counter.utf8 else "base64"
        return counter

    def emit(out: BinaryIO) -> None:
        if result["format"] == "patch":
            patch_into(out.write)
            return
        # json: the patch goes to a scratch file first (counted, checked), then the
        # result is written with `patch` last, streamed out of that file
        spool = os.path.join(s.dir, "patch")
        with open(spool, "wb") as f:
            patch_into(f.write)
        head = json.dumps(git.json_safe(result), sort_keys=True)
        out.write(head[:-1].encode() + b', "patch": "')
        with open(spool, "rb") as f:
            if result["patch_encoding"] == "base64":
                while data := f.read(3 * CHUNK):
                    out.write(base64.b64encode(data))
            else:
                dec = codecs.getincrementaldecoder("utf-8")()
                while data := f.read(CHUNK):
                    out.write(json.dumps(dec.decode(data))[1:-1].encode("ascii"))
        out.write(b'"}\n')

    if target is None:
        assert sink is not None
        emit(sink)
        sink.flush()
        return
    d = os.path.dirname(target)
    try:
        os.makedirs(d, exist_ok=True)  # as `write` does: missing directories are made
        fd, tmp = tempfile.mkstemp(prefix=".git-lane-export-", dir=d)
    except OSError as exc:
        raise _write_failed(result, target, exc) from None
    try:
        with os.fdopen(fd, "wb") as f:
            emit(f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise _write_failed(result, target, exc) from None
        raise


def _write_failed(result: ExportResult, target: str, exc: OSError) -> Refusal:
    """The operating system refused `-o` (a file where a directory belongs, a name too
    long, no space, no permission): nothing is left there; `next` writes the export to a
    fresh file in the current directory, or else in the temporary directory."""
    key = result["lane"]
    name = f"{key}.{'json' if result['format'] == 'json' else 'mbox'}"
    other = os.path.realpath(name)
    if other == target or os.path.dirname(target) == os.path.dirname(other):
        other = os.path.join(tempfile.gettempdir(), name)
    fmt = " --format json" if result["format"] == "json" else ""
    return Refusal(
        "write_failed",
        f"export -o {git.shown(target)}: the operating system refused the write "
        f"({exc.strerror or exc}); nothing was written there",
        next=[f"git lane export {key}{fmt} -o {git.q(other)}"],
        alternatives=[f"git lane export {key}{fmt} > {git.q(other)}"],
        details={"lane": key, "path": target, "errno": exc.errno},
    )
