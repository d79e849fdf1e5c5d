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

. "$(dirname "$0")/../../scripts/netns-pair.sh"
netns_pair tfb
A=$NS_A B=$NS_B
PEERS="$IP_A:29500,$IP_B:29500"
SETS="--set tp.size=2 --set tp.peers=$PEERS --max-bytes $MAX"
echo "== veth: ip netns exec NS $TFRUN doctor $SETS --set tp.rank=R  (veth MTU 1500)"
ip netns exec "$B" "$TFRUN" doctor $SETS --set tp.rank=1 >/dev/null &
ip netns exec "$A" "$TFRUN" doctor $SETS --set tp.rank=0 | sed -n '/control channel/,$p'
wait
