# shellcheck shell=sh disable=SC2034,SC3013,SC2154 # -ef: dash, bash, busybox ash and ksh have it; gl_*: hooks/common.sh
# shims/common.sh: the sh every git-lane PATH shim (git, edit, write) shares, sourced as
# "${0%/*}/common.sh". The binding it reads is what `git lane exec` hands a lane-bound
# process (guard/binding.py names each variable). Fails closed: a bound process whose
# binding is missing or broken is refused [shim_facts_unknown], never passed through.
gs_self=$0
gs_dir=${0%/*}
[ "$gs_dir" = "$0" ] && gs_dir=.

# gs_is_shim FILE: is FILE one of ours (this very file, or a file in this shim's
# directory or in GITLANE_SHIMS_DIR), so that running it would only come back here?
gs_is_shim() {
	[ "$1" -ef "$gs_self" ] && return 0
	gs_d=${1%/*}
	[ "$gs_d" = "$1" ] && gs_d=.
	[ "$gs_d" -ef "$gs_dir" ] && return 0
	[ -n "${GITLANE_SHIMS_DIR:-}" ] && [ "$gs_d" -ef "$GITLANE_SHIMS_DIR" ]
}

# gs_cand FILE: consider FILE as the real TOOL. GITLANE_SHIM_VIA names the program a
# shim last handed the call to: when a wrapper behind us called TOOL through PATH again,
# we come back here with VIA set, and the first candidate after it wins (the last one
# seen when nothing follows it), so a wrapper never loops back into itself.
gs_cand() {
	[ -f "$1" ] && [ -x "$1" ] || return 0
	gs_is_shim "$1" && return 0
	gs_last=$1
	if [ -n "$gs_via" ] && [ "$1" -ef "$gs_via" ]; then
		gs_real=
		return 0
	fi
	[ -n "$gs_real" ] || gs_real=$1
}

# gs_find TOOL [RECORDED]: gs_real = the program to run for TOOL: RECORDED (what exec
# resolved) when it is executable and not a shim, else the first TOOL on PATH outside
# every shim directory. Returns 1 when there is none.
gs_find() {
	gs_real='' gs_last=''
	gs_via=${GITLANE_SHIM_VIA:-}
	[ -z "${2:-}" ] || gs_cand "$2"
	if [ -z "$gs_real" ] || [ -n "$gs_via" ]; then
		gs_ifs=$IFS
		IFS=:
		set -f
		for gs_p in $PATH; do
			[ -n "$gs_real" ] && [ -z "$gs_via" ] && break
			gs_cand "${gs_p:-.}/$1"
		done
		set +f
		IFS=$gs_ifs
	fi
	[ -n "$gs_real" ] || gs_real=$gs_last
	[ -n "$gs_real" ]
}

# gs_run ARGS...: hand the call to gs_real.
gs_run() {
	GITLANE_SHIM_VIA=$gs_real
	export GITLANE_SHIM_VIA
	exec "$gs_real" "$@"
}

gs_jstr() { printf '%s' "$1" | tr -d '\000-\037' | sed 's/[\\"]/\\&/g'; }

# gs_refuse SHIM CODE WHAT NEXT: the refusal line (guard.errors.Refusal.line), an audit
# event when the state directory is there, exit 1.
gs_refuse() {
	gs_m=$3
	while :; do
		case $gs_m in *.) gs_m=${gs_m%.} ;; *) break ;; esac
	done
	printf 'git-lane: refused [%s]: %s. Next: %s\n' "$2" "$gs_m" "${4:-nothing to run}" >&2
	gs_state=${GITLANE_COMMON:-/nonexistent}/git-lane
	if [ -d "$gs_state" ]; then
		printf '{"code": "%s", "kind": "refusal", "lane": "%s", "message": "%s", "pid": %s, "shim": "%s", "source": "shim", "ts": %s}\n' \
			"$2" "$(gs_jstr "${GITLANE_LANE:-}")" "$(gs_jstr "$gs_m")" "$$" "$1" "$(date +%s 2>/dev/null || echo null)" \
			2>/dev/null >>"$gs_state/events.jsonl" || :
	fi
	exit 1
}

# gs_enabled_false: does the owner's config say enabled = false (hooks and shims let
# everything through)? Read as the hooks read it (hooks/common.sh gl_config), with the
# user configuration exec started with.
gs_enabled_false() {
	[ -f "$gs_dir/../hooks/common.sh" ] || return 1
	# shellcheck source=/dev/null
	. "$gs_dir/../hooks/common.sh"
	state=${GITLANE_COMMON:-/nonexistent}/git-lane
	gs_x=${XDG_CONFIG_HOME-} gs_h=${HOME-}
	XDG_CONFIG_HOME=${GITLANE_XDG_CONFIG_HOME:-} HOME=${GITLANE_HOME:-}
	gl_config
	gs_rc=$?
	XDG_CONFIG_HOME=$gs_x HOME=$gs_h
	[ $gs_rc = 0 ] && [ "$gl_enabled" = false ]
}

# gs_bound TOOL: is the binding of this lane-bound process whole (lane worktree, common
# dir, the recorded real TOOL)? Sets gs_real and gs_gd (the lane's own git dir); returns 1
# with gs_why saying what is missing (the caller passes the call only when the owner
# switched git-lane off, gs_enabled_false, and refuses otherwise: gs_broken).
gs_bound() {
	gs_why='' gs_gd=''
	if [ -z "${GITLANE_LANE_PATH:-}" ] || [ ! -d "$GITLANE_LANE_PATH" ]; then
		gs_why="the lane's worktree (GITLANE_LANE_PATH=${GITLANE_LANE_PATH-} is not a directory)"
	elif [ -z "${GITLANE_COMMON:-}" ] || [ ! -d "$GITLANE_COMMON/refs" ]; then
		gs_why="the repository (GITLANE_COMMON=${GITLANE_COMMON-} is not a git common dir)"
	elif [ -z "${GITLANE_REAL_GIT:-}" ] || [ ! -f "$GITLANE_REAL_GIT" ] ||
		[ ! -x "$GITLANE_REAL_GIT" ] || gs_is_shim "$GITLANE_REAL_GIT" || ! gs_find "$1" "$GITLANE_REAL_GIT"; then
		gs_why="which $1 to run (GITLANE_REAL_GIT=${GITLANE_REAL_GIT-} is not an executable $1 outside the shims)"
	else
		gs_c=
		{ IFS= read -r gs_c <"$GITLANE_LANE_PATH/.git"; } 2>/dev/null
		case $gs_c in
		"gitdir: "?*) gs_gd=${gs_c#gitdir: } ;;
		*) gs_why="the lane's git dir ($GITLANE_LANE_PATH/.git has no gitdir line)" ;;
		esac
	fi
	[ -z "$gs_why" ]
}

# gs_broken TOOL: refuse a bound call whose binding gs_bound found broken.
gs_broken() {
	gs_refuse "$1" shim_facts_unknown \
		"lane ${GITLANE_LANE}'s $1 shim cannot tell $gs_why, so it refuses rather than guess; start the command again with git lane exec ${GITLANE_LANE} -- COMMAND" \
		"git-lane doctor"
}

# gs_python TOOL ARGS...: the Python slow path (guard.shim.main), isolated (-I; -S: it needs
# nothing from site-packages, and their .pth files cost startup time) with the
# guard package exec recorded first on sys.path; a Python that cannot load it refuses.
gs_pycode='import sys
sys.path.insert(0, sys.argv[1])
try:
    from guard.shim import main
except Exception as e:
    sys.stderr.write("git-lane: refused [shim_facts_unknown]: the shim cannot load git-lane from %s (%s), so it refuses rather than guess. Next: git-lane doctor\n" % (sys.argv[1], e))
    sys.exit(1)
sys.exit(main(sys.argv[2:]))'
gs_python() {
	if [ -z "${GITLANE_PYTHON:-}" ] || [ ! -x "$GITLANE_PYTHON" ]; then
		gs_refuse "$1" shim_facts_unknown \
			"lane ${GITLANE_LANE}'s $1 shim cannot run its check: GITLANE_PYTHON=${GITLANE_PYTHON-} is not an executable Python, so it refuses rather than guess" \
			"git-lane doctor"
	fi
	GITLANE_SHIM_SELF=$gs_self exec "$GITLANE_PYTHON" -I -S -c "$gs_pycode" "${GITLANE_PYPATH:-}" "$@"
}
