#!/bin/sh
# The tcp transport between two network namespaces joined by a veth pair
# this script creates: two hosts, as far as the network can tell.  Each
# namespace runs one tp_rank; both must pass and hold the same digest.
#   netns_check.sh TP_RANK_BINARY
# Exits 77 (skipped) only when ip netns cannot be used here.
set -u
BIN=$1
if ! command -v ip >/dev/null 2>&1; then
	echo "SKIP: no ip(8): cannot make network namespaces"; exit 77
fi
ID=$$
A=tfa$ID B=tfb$ID VA=tva$ID VB=tvb$ID
# 10.(200..249).(0..255).1 and .2, picked from the pid so parallel runs differ
NET=10.$((200 + ID % 50)).$(((ID / 50) % 256))
cleanup() {
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
}
trap cleanup EXIT INT TERM
if ! ip netns add "$A" 2>/dev/null; then
	echo "SKIP: ip netns add failed (no permission or no namespace support)"; exit 77
fi
set -e
ip netns add "$B"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$A"
ip link set "$VB" netns "$B"
ip -n "$A" addr add "$NET.1/24" dev "$VA"
ip -n "$B" addr add "$NET.2/24" dev "$VB"
ip -n "$A" link set lo up
ip -n "$B" link set lo up
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up
set +e
PEERS="$NET.1:29500,$NET.2:29500"
OUT0=$(mktemp) OUT1=$(mktemp)
ip netns exec "$A" "$BIN" 0 2 "$PEERS" >"$OUT0" 2>&1 &
P0=$!
ip netns exec "$B" "$BIN" 1 2 "$PEERS" >"$OUT1" 2>&1
RC1=$?
wait $P0
RC0=$?
echo "rank 0 ($NET.1): $(cat "$OUT0")"
echo "rank 1 ($NET.2): $(cat "$OUT1")"
D0=$(cat "$OUT0") D1=$(cat "$OUT1")
rm -f "$OUT0" "$OUT1"
[ "$RC0" = 0 ] && [ "$RC1" = 0 ] || { echo "FAIL: a rank failed"; exit 1; }
case "$D0" in "ok "*) ;; *) echo "FAIL: rank 0 printed no digest"; exit 1 ;; esac
[ "$D0" = "$D1" ] || { echo "FAIL: the ranks hold different bits"; exit 1; }
echo "PASS: both ranks agree across the veth pair"
