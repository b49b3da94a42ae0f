# Hostile backward-direction input (RFC 8167), for a guest suite (sourced
# after lib.sh, rdma.sh and nfs.sh; not run on its own).
# shellcheck shell=bash
#
#   hostile_bc_test [WAIT]   runs tests/tools/hostile_bc.py against the
#                            listener on port ${PORT:-20049} of this guest's
#                            address (svcrdma_rs built with its backchannel,
#                            loaded and serving nfsd with NFSv4.1): an
#                            NFSv4.1 session whose backchannel is the
#                            tool's RDMA connection, a delegation recall
#                            over it, then malformed, unmatched, duplicate
#                            and excess backward Replies; WAIT (default 20)
#                            is how long the forward NULL after each case
#                            may take before it counts as a hang.
#
# Asserts, besides the tool's own verdict (exit 0: no hang, no mismatch):
# while the tool holds its session (--hold-file), the server's sysfs
# directory of the tool's connection says `backchannel` 1; after the tool
# exits, no connection remains in /sys/kernel/svcrdma_rs/connections/ but
# those there before. The tool's summary line goes to the suite's stdout
# (t_run shows a test's own output only when it fails).

HOSTILE_BC_PY=$ROOT/tests/tools/hostile_bc.py
HOSTILE_BC_CONNS=/sys/kernel/svcrdma_rs/connections
exec {HOSTILE_BC_OUT}>&1

# hbc_conn_ids: the module's live connection ids, one per line.
hbc_conn_ids() {
	local d
	for d in "$HOSTILE_BC_CONNS"/*; do
		[ -d "$d" ] && echo "${d##*/}"
	done
	return 0
}

hostile_bc_test() {
	local wait=${1:-20} port=${PORT:-20049} ip before new id bound=0 rc=0 i left pid
	local hold=/tmp/hostile_bc.hold out=/tmp/hostile_bc.out
	ip=$(guest_ip)
	[ -n "$ip" ] || fail "no IPv4 address on the guest's NIC"
	before=$(hbc_conn_ids)
	rm -f "$hold"
	/usr/bin/python3 "$HOSTILE_BC_PY" "$ip" "$port" --timeout "$wait" --hold-file "$hold" --verbose \
		>"$out" 2>&1 &
	pid=$!
	# The tool writes "ready" once a backward Call came over its session's
	# backchannel, then waits for the file to go: within a WAIT or two of
	# the first delegation, which nfsd grants only after every grace period
	# (lockd's lasts 50 s from nfsd's start), so up to a minute later.
	local limit=$((wait * 3 + 90))
	REPLY=
	for ((i = 0; i < limit * 2; i++)); do
		rd "$hold"
		[ "$REPLY" = ready ] && break
		kill -0 "$pid" 2>/dev/null || break
		nap 0.5
	done
	if [ "$REPLY" != ready ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" || true
		cat "$out"
		grep -a '^hostile_bc: sent' "$out" >&"$HOSTILE_BC_OUT" || true
		fail "hostile_bc.py got no working backchannel (no 'ready' within $limit s)"
	fi
	# The session exists: the tool's connection has a backchannel bound.
	new=$(comm -13 <(echo "$before" | sort) <(hbc_conn_ids | sort))
	for id in $new; do
		[ -e "$HOSTILE_BC_CONNS/$id/backchannel" ] || {
			rm -f "$hold"
			wait "$pid" || true
			fail "no $HOSTILE_BC_CONNS/$id/backchannel file"
		}
		rd "$HOSTILE_BC_CONNS/$id/peer"
		local peer=$REPLY
		rd "$HOSTILE_BC_CONNS/$id/backchannel"
		echo "hostile_bc: connection $id (peer $peer) during the session: backchannel $REPLY"
		echo "hostile_bc: connection $id (peer $peer) during the session: backchannel $REPLY" >&"$HOSTILE_BC_OUT"
		[ "$REPLY" = 1 ] && bound=$((bound + 1))
	done
	rm -f "$hold"
	wait "$pid" || rc=$?
	cat "$out"
	grep -a '^hostile_bc: sent' "$out" >&"$HOSTILE_BC_OUT" || true
	[ -n "$new" ] || fail "no new svcrdma_rs connection while hostile_bc.py held its session"
	[ "$bound" = 1 ] ||
		fail "$bound new connections with backchannel 1 while hostile_bc.py held its session, want 1 (new: $(echo $new))"
	# Every connection of the tool goes.
	for ((i = 0; i < 60; i++)); do
		left=$(comm -13 <(echo "$before" | sort) <(hbc_conn_ids | sort) | tr '\n' ' ')
		[ -z "$left" ] && break
		nap 0.5
	done
	[ -z "$left" ] || fail "connections of hostile_bc.py still in sysfs 30 s after it exited: $left"
	# Its files (the delegations went with its client ID; bounded all the
	# same, as an unlink waits for a recall).
	timeout 60 rm -f "$NFS_EXPORT"/hostile_bc.* || fail "removing hostile_bc.py's files took over 60 s"
	# Last, so the checks above run whatever the tool found.
	[ "$rc" = 0 ] || fail "hostile_bc.py: mismatches, hangs or an abort (exit $rc), see MISMATCH/HANG lines"
}
