# shellcheck shell=bash
# kmemleak_since SINCE FILE: the reports in FILE (kmemleak's debugfs file)
# of objects allocated at or after jiffies SINCE (all of them if SINCE is
# empty), on stdout; KMEMLEAK_BEFORE: how many reports were older. Each
# report is a line "unreferenced object[ (percpu|phys)] 0x..." then
# "  comm "...", pid N, jiffies N", its hex dump and its backtrace.
# Builtins only (a fork costs ~1 s in a debug guest under TCG), and the
# file is read in one pass: after each line `read` seeks back, and every
# seek makes kmemleak build its report again from the start. Sourced by
# scripts/vm-init and tests/vm/lib.sh.
kmemleak_since() {
	local since=$1 line head= keep=1 lines=()
	KMEMLEAK_BEFORE=0
	mapfile -t lines <"$2" || return 1
	for line in "${lines[@]}"; do
		case $line in
		"unreferenced object"*) keep=1 head=$line; continue ;;
		*"comm \""*", jiffies "*)
			# Kept unless the count is a number below SINCE.
			if [ -n "$since" ] && [ "${line##*jiffies }" -lt "$since" ] 2>/dev/null; then
				keep=0 KMEMLEAK_BEFORE=$((KMEMLEAK_BEFORE + 1))
			else
				keep=1
				printf '%s\n' "$head"
			fi
			;;
		esac
		[ $keep = 1 ] && printf '%s\n' "$line"
	done
	return 0
}
