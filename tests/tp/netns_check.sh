#!/bin/sh
# The tcp transport between two network namespaces joined by a veth pair
# this script creates (scripts/netns-pair.sh).  Each namespace runs one
# tp_rank; both must pass and hold the same digest.
#   netns_check.sh TP_RANK_BINARY
# Exits 77 (skipped) only when namespaces cannot be made here.
set -u
BIN=$1
. "$(dirname "$0")/../../scripts/netns-pair.sh"
netns_pair tft
case $? in
0) ;;
77) echo "SKIP: cannot make network namespaces here"; exit 77 ;;
*) echo "FAIL: the veth pair"; exit 1 ;;
esac
PEERS="$IP_A:29500,$IP_B:29500"
OUT0=$(mktemp) OUT1=$(mktemp)
ip netns exec "$NS_A" "$BIN" 0 2 "$PEERS" >"$OUT0" 2>&1 &
P0=$!
ip netns exec "$NS_B" "$BIN" 1 2 "$PEERS" >"$OUT1" 2>&1
RC1=$?
wait $P0
RC0=$?
D0=$(cat "$OUT0") D1=$(cat "$OUT1")
rm -f "$OUT0" "$OUT1"
echo "rank 0 ($IP_A): $D0"
echo "rank 1 ($IP_B): $D1"
[ "$RC0" = 0 ] && [ "$RC1" = 0 ] || { echo "FAIL: a rank failed"; exit 1; }
case "$D0" in "ok "*) ;; *) echo "FAIL: rank 0 printed no digest"; exit 1 ;; esac
[ "$D0" = "$D1" ] || { echo "FAIL: the ranks hold different bits"; exit 1; }
echo "PASS: both ranks agree across the veth pair"
