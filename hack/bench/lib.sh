# Helpers shared by the bench scripts (sourced; each script defines log and
# sets CLUSTER_PID to the hack/local-up.sh it started).
now() { date +%s.%N; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

CLUSTER_PID=""
# stop_cluster: one TERM to local-up.sh, whose trap stops its components in
# order; BENCH_BEFORE_STOP names a function to run first, if any.
stop_cluster() {
  [[ -n "${BENCH_BEFORE_STOP:-}" ]] && "${BENCH_BEFORE_STOP}"
  local pid=${CLUSTER_PID}
  [[ -n "${pid}" ]] || return 0
  CLUSTER_PID=""
  kill -TERM "${pid}" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "${pid}" 2>/dev/null || true
  wait "${pid}" 2>/dev/null || true
}
trap stop_cluster EXIT
trap 'stop_cluster; exit 130' INT TERM

cpu_secs() { # PID -> utime+stime in seconds
  local f; read -ra f < <(sed 's/.*) //' "/proc/$1/stat")
  echo "$(( f[11] + f[12] )) $(getconf CLK_TCK)" | awk '{printf "%.2f\n", $1/$2}'
}
hwm_mib() { awk '/^VmHWM:/ {printf "%.1f\n", $2/1024}' "/proc/$1/status"; }

# VmHWM counts the binary's file pages too (mapped from the page cache,
# shared and reclaimable: 66 MiB of ours, 86 MiB of upstream's at start),
# so the memory a process really holds shows better in RssAnon, whose peak
# the kernel does not keep: anon_sampler PID FILE samples it every 200 ms
# until PID exits or the sampler is killed, keeping the peak (MiB) in FILE.
anon_sampler() {
  local pid=$1 file=$2 peak=0 kb
  echo 0 > "${file}"
  while kb=$(awk '/^RssAnon:/ {print $2}' "/proc/${pid}/status" 2>/dev/null) && [[ -n "${kb}" ]]; do
    if (( kb > peak )); then peak=${kb}; awk -v k="${kb}" 'BEGIN {printf "%.1f\n", k/1024}' > "${file}"; fi
    sleep 0.2
  done
}

# poll WHAT SECONDS COMMAND...: run COMMAND every second until it succeeds;
# returns 1 on timeout or when the cluster died.
poll() {
  local what=$1 secs=$2 deadline; shift 2
  deadline=$(( SECONDS + secs ))
  while (( SECONDS < deadline )); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if [[ -n "${CLUSTER_PID}" ]] && ! kill -0 "${CLUSTER_PID}" 2>/dev/null; then log "the cluster died while waiting for ${what}"; return 1; fi
    sleep 1
  done
  log "timed out after ${secs}s waiting for ${what}"; return 1
}
