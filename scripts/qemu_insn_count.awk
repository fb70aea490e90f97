# Counts the guest instructions a program ran under qemu user-mode emulation, from the log of
# `qemu-aarch64 -d in_asm,exec,nochain`: each translated block's instruction count (the in_asm
# listing after "IN:"), times how often the block ran (one "Trace" line per run: nochain makes
# every block return to the main loop, where exec logs it). Prints
#   instructions N blocks_run B unsized_runs U
# where U counts runs of blocks whose translation the log did not show (0 in a complete log).
# Used by scripts/aarch64.sh insns; an emulator's count, not a performance figure.
function norm(h) { sub(/^0x/, "", h); sub(/^0+/, "", h); return h }
/^IN:/ { inblk = 1; n = 0; start = ""; next }
inblk && /^0x[0-9a-f]+:/ {
  if (start == "") { s = $1; sub(/:$/, "", s); start = norm(s) }
  n++
  next
}
inblk && /^$/ { if (start != "") size[start] = n; inblk = 0; next }
/^Trace / {
  # Trace CPU: HOSTPTR [CS_BASE/PC/FLAGS/CFLAGS] SYMBOL
  split($4, f, "/")
  runs[norm(f[2])]++
  tbs++
  next
}
END {
  total = 0; missing = 0
  for (pc in runs) {
    if (pc in size) total += runs[pc] * size[pc]; else missing += runs[pc]
  }
  printf "instructions %d blocks_run %d unsized_runs %d\n", total, tbs, missing
}
