#!/usr/bin/env bash
# A lab of N kelp nodes on this one machine: the stand-in for a Vagrant
# homelab (see the Vagrantfile for the real thing).
#
#   scripts/lab.sh up N          node-1 runs `kelp server`, node-2..N join it
#                                with `kelp agent --server ... --token ...`
#   scripts/lab.sh status        the nodes, their processes and `kubectl get nodes`
#   scripts/lab.sh kill NODE     power failure: agent, containerd and pods
#                                killed, the node's link down
#   scripts/lab.sh revive NODE   power back on: the node boots with its disk
#                                (data dir) and nothing else, and rejoins
#   scripts/lab.sh kubeconfig    path of the admin kubeconfig, usable from here
#   scripts/lab.sh exec NODE CMD runs CMD in the node's network namespace
#                                (as `vagrant ssh NODE -c CMD` would)
#   scripts/lab.sh down          stop everything and remove every trace
#
# Each node is a network namespace (kelp-lab-node-I) whose eth0 is a veth
# on the lab's switch: a bridge in a namespace of its own (kelp-lab-switch),
# so lab traffic never passes the host's netfilter, as a real switch has
# none. The network is 192.168.77.0/24 (node-I at .1I), which overlaps
# neither the pod (10.42/16) nor the service (10.43/16) networks; the host
# joins it as .1 through the veth kelplab0, to reach the API and NodePorts. Each node has its own data dir, run dir, containerd (started by
# its agent), runc root and cgroup root. kelp runs under `nsenter --net`,
# which switches only the network namespace (`ip netns exec` remounts /sys
# and runc then finds no cgroup mount; see docs/machine facts). Traffic goes
# only to addresses inside the lab's namespaces; the nodes have no default
# route, only one covering the service network.
#
# Environment:
#   KELP_BIN               kelp binary (default: bin/kelp, built if missing)
#   KELP_LAB_DIR           state: data dirs, logs, kubeconfig (default /var/lib/kelp-lab)
#   KELP_LAB_IMAGES        directory of image archives for every node's
#                          air-gap dir (default: built by scripts/images.sh)
#   KELP_LAB_SERVER_ARGS   extra `kelp server` arguments (e.g. scaled-down timings)
#   KELP_LAB_AGENT_ARGS    extra `kelp agent` arguments
#   KELP_LAB_OWNER         pid of the process that owns the lab (test/lab sets
#                          it): once it has exited, the next `up` removes the
#                          lab it left behind instead of refusing to start
#   KELP_LAB_TIMEOUT       seconds `up` and `revive` wait for Ready nodes (default 120)
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
lab_dir="${KELP_LAB_DIR:-/var/lib/kelp-lab}"
run_root=/run/kelp-lab
cgroup_root=/kelp-lab
switch=kelp-lab-switch
uplink=kelplab0 # the host's link to the switch
net=192.168.77
service_cidr=10.43.0.0/16
timeout="${KELP_LAB_TIMEOUT:-120}"
kelp="${KELP_BIN:-$repo/bin/kelp}"

die() { echo "lab: $*" >&2; exit 1; }
log() { echo "lab: $*" >&2; }

node_index() { # node-3 -> 3
	[[ "$1" =~ ^node-([1-9][0-9]?)$ ]] || die "no such node name: $1 (nodes are node-1 .. node-N)"
	echo "${BASH_REMATCH[1]}"
}
node_ip() { echo "$net.$((10 + $(node_index "$1")))"; }
node_mac() { printf '02:6b:65:6c:70:%02x\n' "$(node_index "$1")"; }
netns_of() { echo "kelp-lab-$1"; }
veth_of() { echo "kl-$1"; }
data_of() { echo "$lab_dir/$1"; }
run_of() { echo "$run_root/$1"; }
pid_of() { cat "$lab_dir/$1.pid" 2>/dev/null || true; }
server_url() { echo "https://$(node_ip node-1):6443"; }
kubeconfig() { echo "$lab_dir/kubeconfig"; }
kubectl() { "$kelp" kubectl --kubeconfig "$(kubeconfig)" "$@"; }

nodes() { # the lab's nodes, in order
	[ -d "$lab_dir" ] || return 0
	local f
	for f in "$lab_dir"/node-*.ip; do
		[ -e "$f" ] || continue
		basename "$f" .ip
	done | sort -t- -k2 -n
}

alive() { local pid; pid="$(pid_of "$1")"; [ -n "$pid" ] && [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; }

# cgroup_dirs lists the node's cgroup directories in every v1 hierarchy
# (and the unified one), deepest first.
cgroup_dirs() {
	local d
	for d in /sys/fs/cgroup/*/"$cgroup_root/$1" /sys/fs/cgroup/"$cgroup_root/$1"; do
		[ -d "$d" ] && find "$d" -depth -type d
	done 2>/dev/null || true
}

# node_pids: every live process of the node: those in its network
# namespace (kelp, containerd, the shims) and those in its pod cgroups
# (the containers, which live in their pods' namespaces).
node_pids() {
	{
		ip netns pids "$(netns_of "$1")" 2>/dev/null || true
		local d
		for d in $(cgroup_dirs "$1"); do cat "$d/cgroup.procs" 2>/dev/null || true; done
	} | sort -un | while read -r pid; do
		[ -n "$pid" ] && [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null &&
			! is_ancestor "$pid" && echo "$pid"
	done
	return 0
}

# is_ancestor: whether pid is this script or one of its callers. A caller
# (a test, say) may have a thread in a node's namespace for a moment; it is
# never the node's to kill.
is_ancestor() {
	local p=$$
	while [ -n "$p" ] && [ "$p" -gt 1 ]; do
		[ "$p" = "$1" ] && return 0
		p="$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)"
	done
	return 1
}

# power_off kills the node's processes at once, kelp first so that nothing
# restarts the others, then takes its link down.
power_off() {
	local node="$1" pid i
	pid="$(pid_of "$node")"
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
	for i in $(seq 50); do
		pids="$(node_pids "$node")"
		[ -z "$pids" ] && break
		# shellcheck disable=SC2086
		[ "$i" -eq 1 ] && echo "$(date -u +%FT%T.%3NZ) power off: killing $(ps -o pid=,comm= -p "$(echo $pids | tr ' ' ,)" | tr -s ' \n' ' ')" >>"$lab_dir/$node.log" 2>/dev/null
		# shellcheck disable=SC2086
		kill -9 $pids 2>/dev/null || true
		sleep 0.1
	done
	[ -z "$(node_pids "$node")" ] || die "$node: processes survive SIGKILL: $(node_pids "$node" | tr '\n' ' ')"
	ip -n "$switch" link set "$(veth_of "$node")" down 2>/dev/null || true
	rm -f "$lab_dir/$node.pid"
}

# wipe_volatile forgets what a reboot forgets: the node's network
# namespace (its links, routes, rules and pod namespaces go with it), its
# run dir (netns pins, runc and containerd state), the tmpfs mounts in its
# data dir (secret and token volumes) and its cgroups. The data dir is its
# disk and stays.
wipe_volatile() {
	local node="$1" run data m d
	run="$(run_of "$node")" data="$(data_of "$node")"
	# Pod netns pins, volumes and other mounts, deepest first.
	awk -v p="$run/" -v q="$data/" 'index($5, p) == 1 || index($5, q) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$run"
	for d in $(cgroup_dirs "$node"); do rmdir "$d" 2>/dev/null || true; done
	ip netns del "$(netns_of "$node")" 2>/dev/null || true
	ip -n "$switch" link del "$(veth_of "$node")" 2>/dev/null || true
}

# plug makes the node's namespace and wires it to the lab switch.
plug() {
	local node="$1" ns veth ip
	ns="$(netns_of "$node")" veth="$(veth_of "$node")" ip="$(node_ip "$node")"
	ip netns add "$ns"
	# A fixed MAC, as a machine's NIC keeps across reboots: the host's and
	# the other nodes' neighbour caches stay right when the node revives.
	ip -n "$switch" link add "$veth" type veth peer name eth0 address "$(node_mac "$node")" netns "$ns"
	ip -n "$switch" link set "$veth" master br0 up
	ip -n "$ns" link set lo up
	ip -n "$ns" addr add "$ip/24" dev eth0
	ip -n "$ns" link set eth0 up
	# No default route: traffic stays in the lab. Service IPs need a route
	# before the proxy's DNAT can apply (machine facts).
	ip -n "$ns" route add "$service_cidr" dev eth0
	echo "$ip" >"$lab_dir/$node.ip"
}

ensure_images() {
	if [ -n "${KELP_LAB_IMAGES:-}" ]; then
		echo "$KELP_LAB_IMAGES"
		return
	fi
	local dir="$lab_dir/images"
	ls "$dir"/*.tar >/dev/null 2>&1 || bash "$repo/scripts/images.sh" "$dir" >/dev/null
	echo "$dir"
}

# boot starts kelp on a plugged node: the server on node-1, agents joining
# it elsewhere. Its images go into its air-gap dir first.
boot() {
	local node="$1" images data run args
	images="$(ensure_images)" data="$(data_of "$node")" run="$(run_of "$node")"
	mkdir -p "$data/agent/images" "$run"
	local tar
	for tar in "$images"/*.tar; do
		[ -e "$tar" ] || die "no image archives in $images"
		ln -f "$tar" "$data/agent/images/" 2>/dev/null || cp -f "$tar" "$data/agent/images/"
	done
	args=(--data-dir "$data" --run-dir "$run" --cgroup-root "$cgroup_root/$node"
		--pod-log-dir "$data/pod-logs" --node-name "$node" --node-ip "$(node_ip "$node")")
	if [ "$node" = node-1 ]; then
		# shellcheck disable=SC2206
		args=(server "${args[@]}" --advertise-address "$(node_ip node-1)"
			--write-kubeconfig "$data/admin.kubeconfig" ${KELP_LAB_SERVER_ARGS:-})
	else
		local token
		token="$(cat "$(data_of node-1)/server/node-token" 2>/dev/null)" || die "node-1 has no node-token yet"
		# shellcheck disable=SC2206
		args=(agent "${args[@]}" --server "$(server_url)" --token "$token" ${KELP_LAB_AGENT_ARGS:-})
	fi
	date -u +%FT%T.%6NZ >"$lab_dir/$node.boot"
	echo "$(date -u +%FT%T.%3NZ) boot" >>"$lab_dir/$node.log"
	# setsid: the node outlives this script, and `kill` takes it down by PID.
	setsid nsenter --net="/run/netns/$(netns_of "$node")" "$kelp" "${args[@]}" \
		>>"$lab_dir/$node.log" 2>&1 </dev/null &
	echo $! >"$lab_dir/$node.pid"
}

# wait_kubeconfig waits for node-1's admin kubeconfig and writes the lab's
# copy, which dials node-1's lab address instead of its loopback.
wait_kubeconfig() {
	local src i
	src="$(data_of node-1)/admin.kubeconfig"
	for i in $(seq $((timeout * 10))); do
		[ -s "$src" ] && [ -s "$(data_of node-1)/server/node-token" ] && break
		alive node-1 || die "the server on node-1 exited; see $lab_dir/node-1.log:
$(tail -20 "$lab_dir/node-1.log")"
		sleep 0.1
	done
	[ -s "$src" ] || die "node-1 wrote no kubeconfig in ${timeout}s; see $lab_dir/node-1.log"
	sed -E "s#server: https://[^ ]+#server: $(server_url)#" "$src" >"$(kubeconfig).tmp"
	chmod 600 "$(kubeconfig).tmp"
	mv "$(kubeconfig).tmp" "$(kubeconfig)"
}

# wait_ready waits until every named node is Ready, as reported by the kelp
# lab.sh last booted there: its Lease renewed since the boot (a node that
# just lost power still shows Ready until the grace period ends).
wait_ready() {
	local deadline=$((SECONDS + timeout)) node ready renewed
	for node in "$@"; do
		while :; do
			renewed="$(kubectl get lease -n kube-node-lease "$node" -o jsonpath='{.spec.renewTime}' 2>/dev/null || true)"
			if [[ "$renewed" > "$(cat "$lab_dir/$node.boot")" ]]; then
				ready="$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)"
				[ "$ready" = True ] && alive "$node" && break
			fi
			alive "$node" || die "$node: kelp exited; see $lab_dir/$node.log:
$(tail -20 "$lab_dir/$node.log")"
			[ $SECONDS -lt $deadline ] || die "$node not Ready in ${timeout}s; see $lab_dir/$node.log"
			sleep 0.2
		done
	done
}

cmd_up() {
	local n="${1:-3}" i node
	[[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up N: N is a number of nodes, 1..99"
	[ "$(id -u)" -eq 0 ] || die "the lab needs root (network namespaces, containerd)"
	[ -z "$(nodes)" ] || die "a lab is already up in $lab_dir (scripts/lab.sh down first)"
	if lab_present; then
		stale_lab || die "$switch exists: another lab is up in $(sed -n 1p "$run_root/owner" 2>/dev/null || echo '?') (scripts/lab.sh down)"
		reap_stale_lab
	fi
	if [ ! -x "$kelp" ]; then bash "$repo/scripts/build.sh" >&2; fi
	mkdir -p "$lab_dir" "$run_root"
	touch "$lab_dir/.kelp-lab" # down removes only a directory marked as the lab's
	ensure_images >/dev/null
	ip netns add "$switch"
	owner >"$run_root/owner"
	# A switch does not filter: no netfilter for what it bridges.
	nsenter --net="/run/netns/$switch" sysctl -qw net.bridge.bridge-nf-call-iptables=0 net.bridge.bridge-nf-call-arptables=0
	ip -n "$switch" link add br0 type bridge
	ip -n "$switch" link set br0 up
	ip link add "$uplink" type veth peer name host netns "$switch"
	ip -n "$switch" link set host master br0 up
	ip addr add "$net.1/24" dev "$uplink"
	ip link set "$uplink" up
	for i in $(seq "$n"); do plug "node-$i"; done
	boot node-1
	wait_kubeconfig
	for i in $(seq 2 "$n"); do boot "node-$i"; done
	# shellcheck disable=SC2046
	wait_ready $(nodes)
	log "$n nodes Ready; kubeconfig: $(kubeconfig)"
	kubectl get nodes -o wide
}

cmd_status() {
	local node state
	[ -n "$(nodes)" ] || { echo "no lab in $lab_dir"; return 0; }
	printf '%-8s %-15s %-8s %s\n' NODE ADDRESS KELP PROCESSES
	for node in $(nodes); do
		state=down
		alive "$node" && state="pid $(pid_of "$node")"
		printf '%-8s %-15s %-8s %s\n' "$node" "$(cat "$lab_dir/$node.ip")" "$state" "$(node_pids "$node" | wc -l)"
	done
	if alive node-1; then kubectl get nodes -o wide; fi
}

cmd_kill() {
	local node="${1:?kill NODE}"
	[ -e "$lab_dir/$node.ip" ] || die "no node $node in the lab"
	power_off "$node"
	echo "$(date -u +%FT%T.%3NZ) killed" >>"$lab_dir/$node.log"
	log "$node is off"
}

cmd_revive() {
	local node="${1:?revive NODE}"
	[ -e "$lab_dir/$node.ip" ] || die "no node $node in the lab"
	alive "$node" && die "$node is running (kill it first)"
	power_off "$node"
	wipe_volatile "$node"
	plug "$node"
	boot "$node"
	[ "$node" = node-1 ] && wait_kubeconfig
	wait_ready "$node"
	log "$node is back and Ready"
}

cmd_down() {
	local node
	for node in $(nodes); do
		power_off "$node"
		wipe_volatile "$node"
	done
	# Another lab's switch is that lab's to remove (a test whose `up`
	# failed against it runs `down` with its own directory).
	if ours; then
		unplug_switch
		rm -rf "$run_root"
	fi
	[ -e "$lab_dir/.kelp-lab" ] && rm -rf "$lab_dir"
	log "lab down"
}

# owner: what `up` records in $run_root/owner, so that a later `up` can
# tell a live lab from one whose owner is gone: the lab's directory, then
# the pid and start time of the process that owns it (KELP_LAB_OWNER, set
# by test/lab for the test binary; none for a lab brought up by hand).
owner() {
	echo "$lab_dir"
	if [ -n "${KELP_LAB_OWNER:-}" ]; then
		echo "$KELP_LAB_OWNER $(start_time "$KELP_LAB_OWNER")"
	fi
}

start_time() { awk '{ print $22 }' "/proc/$1/stat" 2>/dev/null || true; }

# stale_lab: whether the lab already up is one nobody will take down: its
# directory is gone, or its owner process has exited (a test binary
# killed by its timeout leaves its lab behind; its nodes may still run).
stale_lab() {
	local dir pid start
	# No record (a lab cut off before it wrote one): stale when none of
	# its nodes runs anything.
	[ -e "$run_root/owner" ] || { [ -z "$(lab_pids)" ]; return; }
	{ read -r dir; read -r pid start; } <"$run_root/owner" || true
	[ -d "$dir" ] || return 0
	[ -n "${pid:-}" ] || return 1
	[ "$(start_time "$pid")" != "$start" ]
}

# lab_present: whether this machine has a lab's switch or nodes.
lab_present() { [ -e "/run/netns/$switch" ] || compgen -G "/run/netns/kelp-lab-node-*" >/dev/null; }

lab_pids() {
	local ns
	for ns in /run/netns/kelp-lab-node-*; do
		[ -e "$ns" ] && node_pids "${ns#/run/netns/kelp-lab-}"
	done
	return 0
}

# ours: whether the lab up on this machine is the one in $lab_dir.
ours() { [ ! -e "$run_root/owner" ] || [ "$(sed -n 1p "$run_root/owner")" = "$lab_dir" ]; }

# reap_stale_lab powers off and unplugs the nodes of a stale lab, found by
# their namespaces since their directory may be gone.
reap_stale_lab() {
	local old ns node
	old="$(sed -n 1p "$run_root/owner" 2>/dev/null || true)"
	log "removing a stale lab (owner gone; it was in $old)"
	for ns in /run/netns/kelp-lab-node-*; do
		[ -e "$ns" ] || continue
		node="${ns#/run/netns/kelp-lab-}"
		(lab_dir="$old" && power_off "$node" && wipe_volatile "$node") || die "cannot remove the stale lab's $node"
	done
	unplug_switch
	[ -n "$old" ] && [ -e "$old/.kelp-lab" ] && rm -rf "$old"
	rm -rf "$run_root"
}

# unplug_switch removes the switch, the host's uplink and the lab's cgroups.
unplug_switch() {
	local d
	ip link del "$uplink" 2>/dev/null || true
	ip netns del "$switch" 2>/dev/null || true
	for d in /sys/fs/cgroup/*/"$cgroup_root" /sys/fs/cgroup/"$cgroup_root"; do
		[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	return 0
}

case "${1:-}" in
up) shift; cmd_up "$@" ;;
status) cmd_status ;;
kill) shift; cmd_kill "$@" ;;
revive) shift; cmd_revive "$@" ;;
kubeconfig) [ -n "$(nodes)" ] || die "no lab in $lab_dir"; kubeconfig ;;
exec)
	shift
	node="${1:?exec NODE CMD...}"
	shift
	[ -e "$lab_dir/$node.ip" ] || die "no node $node in the lab"
	exec nsenter --net="/run/netns/$(netns_of "$node")" "$@"
	;;
down) cmd_down ;;
*) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
