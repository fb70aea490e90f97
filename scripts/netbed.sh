#!/usr/bin/env bash
# A network test bed for remote devices: client and server in two network namespaces joined by a
# veth pair, each direction rate-limited with tc (htb), and a one-way delay added in user space
# (scripts/delay_shim.py; this kernel has no netem). Needs root, iproute2 and python3.
#
#   scripts/netbed.sh up PROFILE | up UP_MBIT DOWN_MBIT DELAY_MS
#   scripts/netbed.sh cli CMD...      run CMD in the client namespace (tsr_cli, 10.77.0.1)
#   scripts/netbed.sh srv CMD...      run CMD in the server namespace (tsr_srv, 10.77.0.2)
#   scripts/netbed.sh shim PORT       in tsr_cli: 127.0.0.1:PORT -> 10.77.0.2:PORT, with the delay
#   scripts/netbed.sh down
#
# Profiles (stand-ins, documented in docs/remote.md; uplink is client -> server):
#   3g    1 Mbit/s up,   2 Mbit/s down, 100 ms each way
#   4g    4 Mbit/s up,  10 Mbit/s down,  50 ms each way
#   wifi 50 Mbit/s up,  50 Mbit/s down,   5 ms each way
#   lan 200 Mbit/s up, 200 Mbit/s down,   1 ms each way
#
# The server binds 10.77.0.2, which is not loopback: `tessera serve` needs CURVE keys there
# (docs/remote.md). The client reaches it through the shim on its own loopback (still with keys).
set -euo pipefail

CLI=tsr_cli
SRV=tsr_srv
STATE=/run/tessera-netbed
mkdir -p "$STATE"

profile() {
  case "$1" in
    3g) echo "1 2 100" ;;
    4g) echo "4 10 50" ;;
    wifi) echo "50 50 5" ;;
    lan) echo "200 200 1" ;;
    *) echo "netbed: unknown profile '$1' (3g, 4g, wifi, lan)" >&2; exit 2 ;;
  esac
}

shape() {  # NS DEV MBIT: htb root, one class at MBIT (rate = ceil), a deep enough queue
  local ns=$1 dev=$2 mbit=$3
  # The bucket holds about 1 ms of the rate (at least two packets): a bigger burst lets a
  # message of tens of KB pass at line rate, and the link stops being L + bytes / B.
  local burst=$(( mbit * 125 > 3000 ? mbit * 125 : 3000 ))
  ip netns exec "$ns" tc qdisc replace dev "$dev" root handle 1: htb default 10
  ip netns exec "$ns" tc class replace dev "$dev" parent 1: classid 1:10 htb \
    rate "${mbit}mbit" ceil "${mbit}mbit" burst "$burst" cburst "$burst"
  ip netns exec "$ns" tc qdisc replace dev "$dev" parent 1:10 handle 10: pfifo limit 1000
}

down() {
  if [ -f "$STATE/shim.pid" ]; then kill "$(cat "$STATE/shim.pid")" 2>/dev/null || true; fi
  rm -f "$STATE"/*.pid "$STATE/delay_ms"
  ip netns del "$CLI" 2>/dev/null || true
  ip netns del "$SRV" 2>/dev/null || true
}

case "${1:-}" in
  up)
    shift
    if [ $# -eq 1 ]; then set -- $(profile "$1"); fi
    [ $# -eq 3 ] || { echo "usage: netbed.sh up PROFILE | up UP_MBIT DOWN_MBIT DELAY_MS" >&2; exit 2; }
    up=$1 downlink=$2 delay=$3
    down
    ip netns add "$CLI"
    ip netns add "$SRV"
    ip link add veth-cli netns "$CLI" type veth peer name veth-srv netns "$SRV"
    ip netns exec "$CLI" ip addr add 10.77.0.1/24 dev veth-cli
    ip netns exec "$SRV" ip addr add 10.77.0.2/24 dev veth-srv
    for ns in "$CLI" "$SRV"; do
      ip netns exec "$ns" ip link set lo up
    done
    ip netns exec "$CLI" ip link set veth-cli up
    ip netns exec "$SRV" ip link set veth-srv up
    # Segmentation offload would hand htb 64 KiB super-packets, each let through on credit
    # (a 16 KiB message then passes at line rate): keep TCP's packets at the MTU.
    ip netns exec "$CLI" ip link set dev veth-cli gso_max_segs 1 gso_max_size 1500
    ip netns exec "$SRV" ip link set dev veth-srv gso_max_segs 1 gso_max_size 1500
    shape "$CLI" veth-cli "$up"          # client -> server
    shape "$SRV" veth-srv "$downlink"    # server -> client
    echo "$delay" > "$STATE/delay_ms"
    echo "netbed: $CLI 10.77.0.1 -> $SRV 10.77.0.2: up ${up} Mbit/s, down ${downlink} Mbit/s," \
         "delay ${delay} ms each way (via 'netbed.sh shim PORT')"
    ;;
  cli) shift; exec ip netns exec "$CLI" "$@" ;;
  srv) shift; exec ip netns exec "$SRV" "$@" ;;
  shim)
    port=${2:?usage: netbed.sh shim PORT}
    delay=$(cat "$STATE/delay_ms")
    ip netns exec "$CLI" python3 "$(dirname "$0")/delay_shim.py" --listen "127.0.0.1:$port" \
      --connect "10.77.0.2:$port" --delay-ms "$delay" &
    echo $! > "$STATE/shim.pid"
    sleep 0.5
    echo "netbed: shim 127.0.0.1:$port -> 10.77.0.2:$port (+${delay} ms each way), pid $(cat "$STATE/shim.pid")"
    ;;
  down) down ;;
  *) sed -n '2,22p' "$0"; exit 2 ;;
esac
