#!/bin/sh
# tfrun doctor: the local two-rank sweep prints every row from 8 B up and
# names the peers; a peer that is not there fails, naming it, with advice.
#   doctor_check.sh TFRUN
set -u
TFRUN=$1
fail() { echo "FAIL: $*"; exit 1; }

out=$("$TFRUN" doctor --tp-local 2 --max-bytes 64K 2>&1) || fail "doctor --tp-local 2 exited $?: $out"
echo "$out"
echo "$out" | grep -q "^transport tcp: usable" || fail "no tcp verdict"
echo "$out" | grep -q "rank 1  127.0.0.1:[0-9]* *answers" || fail "rank 1 not checked"
for s in 8 8192 65536; do
	echo "$out" | grep -Eq "^ $s +1000 " || fail "no ping-pong row for $s bytes"
	echo "$out" | grep -Eq "^ +$s +$((s / 4)) +float " || fail "no all_reduce row for $s bytes"
done

# Rank 1 alone: rank 0's control port answers nothing.
start=$(date +%s)
out=$("$TFRUN" doctor --set tp.size=2 --set tp.rank=1 --set tp.timeout=1 \
	--set tp.peers=127.0.0.1:9,127.0.0.1:10 2>&1) && fail "doctor succeeded without rank 0"
echo "$out"
echo "$out" | grep -q "connect to rank 0 (127.0.0.1:9)" || fail "the absent peer is not named"
echo "$out" | grep -q "firewall" || fail "no advice"
[ $(($(date +%s) - start)) -le 4 ] || fail "gave up late"

"$TFRUN" doctor --tp-local 1 >/dev/null 2>&1
[ $? = 2 ] || fail "--tp-local 1 is not a usage error"
echo "PASS"
