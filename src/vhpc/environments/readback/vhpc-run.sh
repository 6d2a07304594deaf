#!/bin/sh
# vhpc's remote trial wrapper (environments/ssh.py): vhpc-run.sh PIDFILE TIMEOUT CMD [ARG]...
# Runs CMD under coreutils `timeout -s KILL TIMEOUT`, which makes itself a process-group leader
# (timeout(1)); the group id and this wrapper's pid go to PIDFILE ("GROUP WRAPPER") so vhpc
# can kill the whole group, and the wrapper, remotely.  While
# CMD runs, its processes' allowed CPUs (/proc/PID/status) and resident pages per NUMA node
# (/proc/PID/numa_maps, numa(7)) are sampled; after CMD ends the sample with the most pages per
# process is printed to stderr after a marker line.  Exit status: CMD's (137 when killed).
pidfile=$1; limit=$2; shift 2
rb="$pidfile.rb"
timeout -s KILL "$limit" "$@" </dev/null &
p=$!
echo "$p $$" > "$pidfile"
sample() {
  for pid in $(ps -e -o pid=,pgid= | awk -v g="$p" '$2 == g && $1 != g {print $1}'); do
    cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)
    [ -n "$cpus" ] || continue
    comm=$(cat "/proc/$pid/comm" 2>/dev/null | tr -c 'A-Za-z0-9_.\n-' _)
    pages=$(awk '{for (i = 2; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {split($i, a, "="); s[a[1]] += a[2]}}
                 END {for (k in s) printf " %s=%d", k, s[k]}' "/proc/$pid/numa_maps" 2>/dev/null)
    echo "pid=$pid comm=$comm cpus=$cpus$pages"
  done >> "$rb"
}
# dense first samples so short runs are seen too, then one per second while this wrapper
# lives ($$ is the wrapper also in the subshell: a killed wrapper leaves no sampler behind)
( for d in 0.01 0.03 0.06 0.1 0.2 0.4; do sleep $d; sample; done
  while kill -0 $$ 2>/dev/null; do sleep 1; sample; done ) &
s=$!
wait "$p"
rc=$?
kill "$s" 2>/dev/null
rm -f "$pidfile"
echo "---vhpc-readback---" >&2
if [ -f "$rb" ]; then
  awk '{t = 0; for (i = 1; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {split($i, a, "="); t += a[2]}
        split($1, q, "="); if (!(q[2] in best) || t >= best[q[2]]) {best[q[2]] = t; line[q[2]] = $0}}
       END {for (k in line) print line[k]}' "$rb" >&2
  rm -f "$rb"
fi
exit $rc
