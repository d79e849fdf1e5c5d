# Sourced (sh): two network namespaces joined by a veth pair, for the
# tensor-parallel tests and benchmarks: two hosts as far as the network
# can tell.  After `netns_pair PREFIX`:
#   NS_A, NS_B    the namespaces (ip netns exec "$NS_A" ...)
#   IP_A, IP_B    their addresses, 10.(200..249).x.1 and .2, from the pid
# and an EXIT trap deletes both.  Returns 77 when namespaces cannot be
# made here (not root, no ip(8)), 1 when a later step fails.
netns_pair() {
	_id=$$
	NS_A=${1}a$_id NS_B=${1}b$_id
	_va=${1}va$_id _vb=${1}vb$_id
	_net=10.$((200 + _id % 50)).$(((_id / 50) % 256))
	IP_A=$_net.1 IP_B=$_net.2
	command -v ip >/dev/null 2>&1 || { echo "no ip(8)"; return 77; }
	trap 'ip netns del "$NS_A" 2>/dev/null; ip netns del "$NS_B" 2>/dev/null' EXIT INT TERM
	ip netns add "$NS_A" 2>/dev/null || { echo "ip netns add failed (not root?)"; return 77; }
	ip netns add "$NS_B" &&
	ip link add "$_va" type veth peer name "$_vb" &&
	ip link set "$_va" netns "$NS_A" &&
	ip link set "$_vb" netns "$NS_B" &&
	ip -n "$NS_A" addr add "$IP_A/24" dev "$_va" &&
	ip -n "$NS_B" addr add "$IP_B/24" dev "$_vb" &&
	ip -n "$NS_A" link set lo up &&
	ip -n "$NS_B" link set lo up &&
	ip -n "$NS_A" link set "$_va" up &&
	ip -n "$NS_B" link set "$_vb" up || return 1
}
