# Sourced by the bench scripts that start servers one at a time.
# Usage: wait_until_healthy URL PID NAME LOG: waits (up to 10 minutes) until URL/health answers;
# fails, naming the log, when the process PID exits first or time runs out.
wait_until_healthy() {
  local url=$1 pid=$2 name=$3 log=$4
  for _ in $(seq 1 600); do
    curl -sf "$url/health" >/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  echo "$name did not start (see $log)"
  return 1
}
