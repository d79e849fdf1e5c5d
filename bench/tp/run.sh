#!/bin/sh
# The tcp transport's latency and bandwidth, two ranks: over loopback, and
# between two network namespaces joined by a veth pair (two hosts, as far as
# the network can tell).  Prints tfrun doctor's sweeps (ping-pong and
# all-reduce, 8 B to --max-bytes) for each; medians and p99 in the tables.
#   bench/tp/run.sh [BUILD] [MAX_BYTES]       (root, for the namespaces)
set -eu
BUILD=${1:-build}
MAX=${2:-16M}
TFRUN=$BUILD/bin/tfrun
[ -x "$TFRUN" ] || { echo "no $TFRUN: build first"; exit 1; }

echo "== machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(uname -r)"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "== loopback: $TFRUN doctor --tp-local 2 --max-bytes $MAX"
"$TFRUN" doctor --tp-local 2 --max-bytes "$MAX" | sed -n '/control channel/,$p'

ID=$$
A=tfba$ID B=tfbb$ID VA=tbva$ID VB=tbvb$ID NET=10.$((200 + ID % 50)).$(((ID / 50) % 256))
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add "$A"
ip netns add "$B"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$A"
ip link set "$VB" netns "$B"
ip -n "$A" addr add "$NET.1/24" dev "$VA"
ip -n "$B" addr add "$NET.2/24" dev "$VB"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up
PEERS="$NET.1:29500,$NET.2:29500"
SETS="--set tp.size=2 --set tp.peers=$PEERS --max-bytes $MAX"
echo "== veth: ip netns exec NS $TFRUN doctor $SETS --set tp.rank=R  (MTU $(ip -n "$A" -o link show "$VA" | sed -n 's/.* mtu \([0-9]*\).*/\1/p'))"
ip netns exec "$B" "$TFRUN" doctor $SETS --set tp.rank=1 >/dev/null &
ip netns exec "$A" "$TFRUN" doctor $SETS --set tp.rank=0 | sed -n '/control channel/,$p'
wait
