# shellcheck shell=sh disable=SC2034,SC2154 # gs_* from common.sh, gl_* from hooks/common.sh
# shims/slow.sh: what a shim needs only off its hot path (a refusal, the Python slow
# path, the owner's enabled switch); loaded by gs_slow (shims/common.sh) when needed.
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

# gs_notice: the epoch notice. gs_seenf (<state>/seen/KEY) holds the land epoch lane KEY
# last saw (0: none yet; the first look only records it). When another lane has landed
# since, one line on stderr names it and the sync command. Called only when epoch.json is
# not older than gs_seenf: a land rewrites epoch.json, so it is then at least as new,
# whatever the clock's resolution. epoch.json is read as the hooks read it (gl_epoch_read):
# its first 1 MiB, in a subshell with one second of CPU (a file of one huge line).
gs_notice() {
	if [ -f "$gs_st/epoch.json" ]; then
		{ gs_o=$(
			# shellcheck disable=SC3045 # dash, bash, busybox sh have both; a sh without them reads on
			ulimit -c 0
			# shellcheck disable=SC3045
			ulimit -t 1
			gs_n=0 gs_epoch='' gs_landed=''
			while IFS= read -r gs_l; do
				gs_n=$((gs_n + ${#gs_l} + 1))
				[ "$gs_n" -le 1048576 ] || break
				case $gs_l in
				*'"epoch":'*) gs_epoch=${gs_l#*:} gs_epoch=${gs_epoch%,} gs_epoch=${gs_epoch# } ;;
				*'"lane":'*)
					gs_landed=${gs_l#*: } gs_landed=${gs_landed%,} gs_landed=${gs_landed#\"} gs_landed=${gs_landed%\"}
					break
					;;
				esac
			done <"$gs_st/epoch.json"
			printf '%s\n%s\n.' "${gs_epoch-}" "${gs_landed-}"
		); } 2>/dev/null || gs_o=
		gs_nl='
'
		gs_epoch=${gs_o%%"$gs_nl"*} gs_landed=
		case $gs_o in *"$gs_nl"*"$gs_nl".) gs_landed=${gs_o#*"$gs_nl"} gs_landed=${gs_landed%"$gs_nl".} ;; *) gs_epoch= ;; esac
		case $gs_epoch in '' | *[!0-9]*) gs_epoch=0 ;; esac
		gs_seen=
		{ IFS= read -r gs_seen <"$gs_seenf"; } 2>/dev/null
		# ended (one huge line): no notice, the seen epoch written again so the next call
		# finds it newer than epoch.json and does not read that file again
		[ -n "$gs_o" ] || gs_epoch=${gs_seen:-0}
		[ -d "$gs_st/seen" ] || mkdir -p "$gs_st/seen" 2>/dev/null
		{ printf '%s\n' "$gs_epoch" >"$gs_seenf"; } 2>/dev/null
		if [ -n "$gs_seen" ] && [ "$gs_seen" != "$gs_epoch" ] && [ "$gs_landed" != "$GITLANE_LANE" ]; then
			printf 'git-lane: notice: lane %s landed on main (epoch %s); lane %s is behind main. Next: git lane sync %s\n' \
				"${gs_landed:-?}" "$gs_epoch" "$GITLANE_LANE" "$GITLANE_LANE" >&2
		fi
	elif [ -d "$gs_st" ] && ! [ -f "$gs_seenf" ]; then
		[ -d "$gs_st/seen" ] || mkdir -p "$gs_st/seen" 2>/dev/null
		{ echo 0 >"$gs_seenf"; } 2>/dev/null
	fi
}
