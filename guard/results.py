"""What each command returns: typed records that are also its `--json` output, key for key
(DESIGN.md names the keys tests and users rely on; more may be added, none renamed)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class LaneView(TypedDict):
    key: str
    branch: str
    path: str
    state: str  # active | orphaned | released | corrupt (its record is unreadable)
    goal: str | None
    fresh: bool
    sync_required: bool
    dirty: bool
    dirty_paths: list[str]
    # git had more dirty paths than were read (LANE_READ_ENTRIES), or too many to list at
    # all within its memory bound (a tree bomb: then dirty, dirty_paths empty)
    dirty_truncated: NotRequired[bool]
    ahead: int
    behind: int
    rebase_in_progress: bool
    owner_pid: int | None
    owner_alive: bool
    # has a `git lane exec` ever run in it (its land gates in a clean worktree)? None: the
    # record cannot say (older than the field, rebuilt, unreadable), read as True
    exec_seen: bool | None
    tip: str | None
    head: str | None
    advice: str
    port: int  # GITLANE_PORT: the lane's 10 ports start here
    setup: str | None  # setup_command's outcome: ok | failed | timeout | running; None: none ran
    branch_state: NotRequired[str]  # ok | missing | moved (recovery.branch_facts)
    # status --conflicts: "main" and/or lane keys it would conflict with; None: not asked,
    # or the lane cannot be predicted
    would_conflict: NotRequired[list[str] | None]
    ready: NotRequired[dict[str, Any] | None]  # status: the ready mark (guard/ready.py view)


class MainView(TypedDict):
    branch: str
    sha: str


class HubView(TypedDict):
    path: str | None
    dirty_paths: list[str]
    out_of_step: bool  # the last land's paths still hold main_before in the hub's index


class LockView(TypedDict):
    pid: int
    lane: str
    since: str
    host: str
    alive: bool


class Alert(TypedDict):
    """A status warning with a stable code (the `warnings` list has its line)."""

    code: str
    message: str
    next: str


class StatusResult(TypedDict):
    ok: bool
    code: str
    epoch: int
    main: MainView
    hub: HubView
    lock: LockView | None
    landing: bool
    lanes: list[LaneView]
    released_hidden: int  # released lanes left out (`status --all` lists them)
    warnings: list[str]
    alerts: list[Alert]


class Included(TypedDict):
    """What `.worktreeinclude` copied from the hub into a lane."""

    files: int
    bytes: int
    reflinked: int  # of `files`, shared copy-on-write with the hub's
    kept: int  # matched, but the lane has the path already: left as it is
    skipped: list[dict[str, str]]  # {path, reason}: not copied (a path that escapes, ...)
    # why nothing was copied although main has a `.worktreeinclude`: it is too big to read
    ignored: NotRequired[str]


class SetupRun(TypedDict):
    command: str
    status: str  # ok | failed | timeout
    exit: int
    seconds: float
    tail: list[str]


class CreateResult(TypedDict):
    ok: bool
    code: str
    lane: LaneView
    included: NotRequired[Included]
    setup: NotRequired[SetupRun | None]
    warnings: NotRequired[list[str]]


class SetupResult(TypedDict):
    ok: bool
    code: str
    lane: LaneView
    included: Included
    setup: SetupRun | None
    warnings: list[str]


class ReleaseResult(TypedDict):
    ok: bool
    code: str
    lane: str
    tip: NotRequired[str | None]
    discarded_commits: NotRequired[list[str]]
    discarded_paths: NotRequired[list[str]]
    discarded_detached: NotRequired[list[str]]
    recover: NotRequired[str | None]
    recover_detached: NotRequired[str | None]
    discarded_ignored: NotRequired[list[str]]
    discarded_worktree_refs: NotRequired[list[dict[str, object]]]
    recover_worktree_refs: NotRequired[list[str]]
    # discarded commits whose objects could not be kept in the shared store (a sandboxed
    # lane's own store, gone with it, held them unverifiable): no recover names them
    lost_commits: NotRequired[list[str]]
    hub: NotRequired[str | None]  # where to go when the command ran inside the lane
    next: NotRequired[list[str]]
    # release keeps the lane's submodule git dirs and every git dir in its worktree
    # (their commits) here
    kept_modules: NotRequired[str | None]
    # what that copy left out: links, FIFOs, sockets, devices (none holds a commit) and
    # directories the owner may not open, relative to the admin dir or the worktree
    kept_modules_skipped: NotRequired[list[str]]


class RepairResult(TypedDict):
    ok: bool
    code: str
    lane: str
    changes: list[dict[str, Any]]
    warnings: NotRequired[list[str]]


class ReconcileResult(TypedDict):
    ok: bool
    code: str
    changes: list[dict[str, Any]]
    next: NotRequired[list[str]]  # `git lane repair KEY` for lanes reconcile leaves alone
    warnings: NotRequired[list[str]]


class WorklistFile(TypedDict):
    path: str
    kind: str


class Worklist(TypedDict):
    step: int
    total: int
    commit: str | None
    subject: str
    files: list[WorklistFile]


class SyncResult(TypedDict):
    """sync and continue: `state` is "fresh", or "conflicts" with a worklist."""

    ok: bool
    code: str
    lane: str
    state: str
    tip: NotRequired[str]
    main: NotRequired[str]
    path: NotRequired[str]
    worklist: NotRequired[Worklist]
    message: NotRequired[str]
    next: NotRequired[list[str]]
    alternatives: NotRequired[list[str]]
    stderr: NotRequired[str]


class AbortResult(TypedDict):
    ok: bool
    code: str
    lane: str
    state: str
    tip: str


class GateSummary(TypedDict):
    command: str | None
    status: str  # passed | failed | timeout | off
    seconds: float
    worktree: NotRequired[str]  # where a gate that ran ran: "lane" or "clean"
    why: NotRequired[str]  # why a clean worktree (the config, or a live lane process)
    # what `.worktreeinclude` copied from the hub into a clean gate's worktree (None: the
    # gate ran in the lane, which has its own)
    included: NotRequired[Included | None]


class HubUpdate(TypedDict, total=False):
    """Whether land carried the hub along (`next` brings it in step when it did not)."""

    path: str
    updated: bool
    retried: bool  # the first try failed, a second one went through
    stderr: str
    next: list[str]


class LandResult(TypedDict):
    ok: bool
    code: str
    lane: str
    main_before: str
    main_after: str
    epoch: int
    paths: list[str]
    gate: GateSummary
    hub: HubUpdate | None  # None: no hub, or it is not on main
    warnings: list[str]
    made_stale: NotRequired[list[str]]  # the other lanes this land made stale
    next: NotRequired[list[str]]  # `git lane sync KEY` for each of them
    auto_sync: NotRequired[AutoSyncResult]  # only with auto_sync = true (guard/crossrebase.py)


class RestoredMain(TypedDict):
    branch: str
    before: str
    after: str
    was_symref_to: str | None


class LandedTip(TypedDict):
    epoch: int
    ref: str | None  # refs/git-lane/landed/<epoch>; None when only epoch.json knew it
    sha: str


class RestoredHub(TypedDict):
    path: str | None
    state: str  # updated | not_hub | failed


class RestoreMainResult(TypedDict):
    """restore-main: `code` is "restored" or "unchanged" (main was already there)."""

    ok: bool
    code: str
    main: RestoredMain
    landed: LandedTip
    hub: RestoredHub
    warnings: list[str]
    unvouched: list[dict[str, Any]]  # lands only state files name: never where main went


class InstallResult(TypedDict, total=False):
    ok: bool
    code: str
    hooks_dir: str
    hooks_dirs: list[str]
    python: str
    hooks: list[dict[str, Any]]
    displaced: list[dict[str, str]]
    pinned: dict[str, str]
    baseline: str  # main's tip recorded as refs/git-lane/baseline (before any land)


class Check(TypedDict):
    name: str
    status: str  # ok | warn | fail
    message: str
    fix: str | None


class DoctorResult(TypedDict):
    ok: bool
    code: str
    checks: list[Check]


class ConfigValue(TypedDict):
    ok: bool
    code: str
    key: str
    value: Any
    source: NotRequired[str]  # repo | user | project | default
    file: NotRequired[str]
    warnings: NotRequired[list[str]]


class ConfigList(TypedDict):
    ok: bool
    code: str
    config: dict[str, dict[str, Any]]
    warnings: list[str]


class LogResult(TypedDict):
    ok: bool
    code: str
    events: list[dict[str, Any]]


class DemoResult(TypedDict):
    ok: bool
    code: str
    summary: str
    path: str | None
    steps: list[dict[str, Any]]


class PathResult(TypedDict):
    """`git lane path [KEY]`: the lane's worktree."""

    ok: bool
    code: str
    key: str
    path: str


class CheckGitResult(TypedDict):
    ok: bool
    code: str  # allowed
    lane: str
    argv: list[str]
    enabled: bool  # false: enabled = false in config, so the shim lets everything through


class ExecResult(TypedDict):
    """How `git lane exec`'s CMD ended (the audit event; CMD owns stdout, so no --json)."""

    ok: bool  # False: CMD could not be started
    code: str  # exited | signaled | command_not_found | not_runnable
    lane: str
    argv: list[str]
    cwd: str
    pid: int | None  # CMD's pid; None when it never started
    exit_status: int  # git lane exec's own: CMD's, 128+N for signal N, 127 / 126
    signal: int | None
    ended: list[int]  # --sandbox: processes CMD left running, ended by exec after it


class ShellenvResult(TypedDict):
    ok: bool
    code: str
    lane: str
    path: str
    cwd: str  # where `cd` goes: the lane, or the caller's subdirectory of it
    shell: str  # sh | fish
    env: dict[str, str]  # every binding name and PATH (shims first)
    unset: list[str]  # names the script unsets (git's repository pointers, ...)
    script: str  # what `eval` runs
    warnings: list[str]


class SandboxExplainResult(TypedDict):
    """`git lane exec KEY --sandbox --explain`: what the sandbox would grant (nothing run)."""

    ok: bool
    code: str  # "explain"
    lane: str
    abi: int  # the kernel's Landlock ABI (0: none)
    usable: bool  # the sandbox can be applied on this kernel
    why: str  # why not ('' when usable)
    writable: list[str]  # every right (files and directories beneath)
    readable: list[str]  # read and execute
    private_tmp_under: str | None  # CMD gets a private TMPDIR made under this
    notes: list[str]  # what still gets through, and other decisions


class CheckWriteResult(TypedDict):
    """`git lane check write PATH`: allowed (a refusal is the standard refusal object)."""

    ok: bool
    code: str  # "allowed"
    path: str  # where the write would really go (realpath)
    given: str  # PATH as given
    lane: str
    lane_path: str


class AgentFile(TypedDict):
    path: str
    action: str  # created | updated | unchanged


class AgentSetupResult(TypedDict):
    ok: bool
    code: str
    lane: str
    path: str
    tool: str  # claude | codex | aider | opencode
    files: list[AgentFile]  # what it wrote in the lane
    excluded: list[str]  # the paths of the info/exclude block (root-anchored)
    exclude_file: str | None
    instructions_file: str
    instructions: str  # the lines for AGENTS.md / CLAUDE.md / CONVENTIONS.md
    command: str  # the one command that starts the tool in the lane
    argv: list[str]
    config: str | None  # codex: the same settings as ~/.codex/config.toml lines
    enforced: list[str]
    not_enforced: list[str]
    warnings: list[str]


class ExportCommit(TypedDict):
    sha: str
    subject: str
    empty: bool  # no change: format-patch leaves it out of the series


class ExportFile(TypedDict):
    path: str  # as it is; git's quoted form ("\303...") when the name is not UTF-8
    quoted: bool
    status: str  # A M D R T (base to the exported tree)
    old_path: str | None  # a rename's source
    mode: str  # in the exported tree (000000 when deleted)
    binary: bool
    bytes: int  # size in the exported tree (0 when deleted)


class ExportResult(TypedDict):
    """`git lane export`: with --format json, this object with `patch` added is the output."""

    ok: bool
    code: str  # exported | nothing_to_export
    lane: str
    path: str
    main: str
    base: str  # the merge-base with main: where `git am` applies the series
    head: str  # the lane's last commit
    tree: str  # the tree `git am` of the export gives: the lane's worktree as `add -A` sees it
    format: str  # patch | json
    output: str | None  # the file written (-o), else None (stdout)
    apply: str  # the command that applies it: git am -k --keep-cr --no-scissors
    commits: list[ExportCommit]
    uncommitted: bool  # the series ends with an "Uncommitted changes of lane KEY" message
    files: list[ExportFile]
    files_bytes: NotRequired[int]
    patch_bytes: int
    patch_encoding: str  # how `patch` is in JSON: utf-8 (as is) or base64 (not UTF-8)
    warnings: list[str]  # a message line git am would cut, indented in the export


class CheckpointResult(TypedDict):
    ok: bool
    code: str  # checkpointed | nothing_to_checkpoint
    lane: str
    path: str
    commit: str | None  # the checkpoint commit
    parent: str
    message: str
    paths: list[str]  # what it committed (at most 500)
    paths_count: int
    warnings: list[str]  # the hooks' notices (a stale lane's sync_required notice)


# -- gc and cross-rebase (issue 12, items 3 and 6) -----------------------------------------
class GcReleased(TypedDict):
    lane: str
    path: str
    tip: str | None
    bytes: int  # disk the worktree took (allocated blocks, as du counts)


class GcKept(TypedDict):
    lane: str
    path: str
    code: str  # why: unlanded_work, lane_dirty, rebase_in_progress, lane_owner_conflict, never_landed, ...
    message: str
    next: list[str]
    alternatives: list[str]
    locked: str | None  # the worktree's lock reason now (None: not locked)
    lock_reason: str | None  # the reason gc locks it with (None: nothing in it to keep)
    locked_by_other: bool  # someone else's lock, left as it is
    bytes: int


class GcResult(TypedDict):
    ok: bool
    code: str
    dry_run: bool
    released: list[GcReleased]  # with --dry-run: what would be released
    kept: list[GcKept]
    reclaimed_bytes: int
    kept_bytes: int
    pruned: list[str]  # git-lane's own dead files removed (archive name lists of gone lanes)
    archives: list[dict[str, Any]]  # all of kept/ but *.list (user data: listed, never removed)
    next: NotRequired[list[str]]  # `cd HUB` when gc ran inside a lane it released


class AutoSyncLeft(TypedDict):
    lane: str
    code: str  # sync_would_conflict, lane_dirty, lane_owner_conflict, rebase_in_progress, ...
    message: str
    paths: NotRequired[list[str]]  # the conflicting paths
    next: NotRequired[list[str]]


class AutoSyncResult(TypedDict):
    synced: list[str]
    left: list[AutoSyncLeft]
    main: str  # the main the lanes were synced onto
    error: NotRequired[str]  # auto_sync itself failed part way (the land still stands)


# -- conflicts (issue 12 C) -----------------------------------------------------------------
class ConflictKind(TypedDict):
    type: (
        str  # merge-tree's stable conflict type: "CONFLICT (contents)", "CONFLICT (modify/delete)"
    )
    paths: list[str]


class ConflictPair(TypedDict):
    lanes: list[str]  # ["main", key] or [key, key] (sorted)
    main: bool  # lanes[0] is main (a lane may be called main too)
    conflict: bool
    state: str  # conflict | overlap (clean, paths both changed) | clean
    paths: list[str]  # the conflicting paths; of a clean pair, the paths both sides changed
    shared: list[str]  # the paths both sides changed since they left main (by name)
    kinds: list[ConflictKind]  # each conflict merge-tree reports, with its paths


class LaneSkip(TypedDict):
    code: str
    message: str
    next: list[str]


class ConflictLane(TypedDict):
    key: str
    tip: str | None
    merged: str | None  # the commit merged: the tip, or a (temporary, not kept) worktree commit
    dirty: bool | None  # None: not looked at (no --include-dirty)
    skipped: LaneSkip | None  # why the lane is not predicted (no pair names it)


class ConflictCounts(TypedDict):
    pairs: int
    conflict: int
    overlap: int
    clean: int
    skipped: int  # lanes


class ConflictsResult(TypedDict):
    ok: bool
    code: str
    main: MainView
    include_dirty: bool
    lanes: list[ConflictLane]
    pairs: list[ConflictPair]  # conflicts, then overlaps, then clean pairs
    counts: ConflictCounts
    warnings: list[str]


# -- ready / queue (issue 12) --------------------------------------------------------------
class ReadyResult(TypedDict):
    ok: bool
    code: str  # ready | ready_unset | ok (--unset of an unmarked lane)
    lane: str
    mark: dict[str, Any] | None  # {tip, at, by, current} (guard/ready.py view)
    next: NotRequired[list[str]]


class QueueResult(TypedDict):
    ok: bool
    code: str
    landed: list[str]  # in landing order
    skipped: list[
        dict[str, Any]
    ]  # {lane, code, message, next, gate?: {command, status, exit, seconds, tail}}
    lanes: list[dict[str, Any]]  # per landed lane: main_before, main_after, epoch, gate, batch?
    main_before: str
    main_after: str
    batch: int
    gate_runs: int
    gate_runs_saved: (
        int  # gate runs landing the same lanes one by one would have taken, less gate_runs
    )
    made_stale: list[str]
    next: list[str]
    warnings: list[str]
    auto_sync: NotRequired[list[dict[str, Any]]]  # crossrebase.after_land after each land
