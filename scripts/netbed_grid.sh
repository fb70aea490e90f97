#!/usr/bin/env bash
# Remote hops against the link model over a grid of link rates and delays on the test bed
# (scripts/netbed.sh; docs/offload.md "Measured"). Needs root, a built build/tools/tessera and
# CURVE keys in KEYDIR (server.key, server.pub, client.key, clients.txt: `tessera keygen`).
#
#   scripts/netbed_grid.sh MODEL.tsr INPUT.npy KEYDIR "RATES_MBIT" "DELAYS_MS" [CUTS] [BITS]
#
# Per (rate, delay): the same rate each way, the delay each way; the server on cpu:1, the client
# pinned to core 0; `tessera bench hop` (link microbenchmark, then raw and packed hops at CUTS,
# median of 3 rounds). Below 10 Mbit/s the largest Ping is 256 KiB (a 4 MiB one takes half a
# minute at 1 Mbit/s).
set -u
[ $# -ge 5 ] || { sed -n '2,11p' "$0"; exit 2; }
model=$1 input=$2 keys=$3 rates=$4 delays=$5 cuts=${6:-40} bits=${7:-4}
cd "$(dirname "$0")/.."
for d in $delays; do
  for r in $rates; do
    scripts/netbed.sh up "$r" "$r" "$d" > /dev/null
    scripts/netbed.sh srv build/tools/tessera serve "$model" --device cpu:1 --bind 10.77.0.2 \
      --port 5700 --key "$keys/server.key" --authorised-keys "$keys/clients.txt" \
      > /tmp/netbed_grid_serve.log 2>&1 &
    srv=$!
    sleep 1
    scripts/netbed.sh shim 5700 > /dev/null
    pmax=4096
    if [ "$r" -lt 10 ]; then pmax=256; fi
    echo "== link ${r} Mbit/s each way, ${d} ms each way"
    TESSERA_REMOTE_SERVER_KEY="$keys/server.pub" TESSERA_REMOTE_CLIENT_KEY="$keys/client.key" \
      timeout 600 scripts/netbed.sh cli taskset -c 0 build/tools/tessera bench hop "$model" \
      --device remote:127.0.0.1:5700 --local cpu:0 --cuts "$cuts" --bits "$bits" --repeat 3 \
      --ping-max "$pmax" --input "$input" 2>&1 | sed -n '/^link/,$p'
    kill "$srv" 2> /dev/null
    wait "$srv" 2> /dev/null
  done
done
scripts/netbed.sh down
