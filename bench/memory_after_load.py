"""Resident memory of a `kiln serve` process once it is ready, and how long it took to get there.

Usage: memory_after_load.py MODEL [--kiln BIN] [--kv-tokens N] [--cache cold|warm] [-- extra serve options]

Starts the server on a free port, waits for /health, asks /generate for one token (load to first
token), reads /proc/PID/status (VmRSS, RssFile, RssAnon, VmHWM) and stops it. The server's
cache folder (KILN_CACHE_DIR: compiled plans, packed weights) is a fresh temporary folder:
`--cache cold` (default) measures a first start, `--cache warm` first starts the server once
unmeasured to fill the folder, then measures a second start from it. Works with any kiln binary
(so an older build gives the figure from before a change). Memory figures do not depend on how
busy the machine is; the load time does.
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]


def status_mib(pid: int) -> dict:
    out = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssFile", "RssAnon", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def start(a, tmp: pathlib.Path, cache: pathlib.Path) -> dict:
    """One server start: ready and first-token times, memory, kiln's memory line."""
    log_path = tmp / "serve.log"
    args = [a.kiln, "serve", "-m", a.model, "--host", "127.0.0.1", "--port", "0", "--threads", a.threads,
            "--kv-tokens", a.kv_tokens, "--log-level", "info", *a.extra]
    env = {**os.environ, "KILN_CACHE_DIR": str(cache)}
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        url = None
        while True:
            if proc.poll() is not None:
                sys.exit(f"kiln serve exited with {proc.returncode}:\n{log_path.read_text()}")
            text = log_path.read_text(errors="replace")
            m = re.search(r"at (http://127\.0\.0\.1:\d+)", text)
            if m:
                url = m.group(1)
                try:
                    if requests.get(url + "/health", timeout=2).status_code == 200:
                        break
                except requests.ConnectionError:
                    pass
            time.sleep(0.05)
        ready = time.monotonic() - t0
        r = requests.post(url + "/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": 1}},
                          timeout=600)
        r.raise_for_status()
        first_token = time.monotonic() - t0
        mem = status_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    text = log_path.read_text(errors="replace")
    return {"ready": ready, "first_token": first_token, "mem": mem,
            "line": re.search(r"memory after load: .*", text),
            "packing": re.search(r"(mapped|repacked) \d+ (packed )?weights.*", text)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--kiln", default=str(REPO / "build" / "release" / "kiln"))
    ap.add_argument("--kv-tokens", default="32768")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--cache", choices=["cold", "warm"], default="cold",
                    help="cold: an empty cache folder; warm: one filled by an unmeasured start first")
    # Serve options after "--" are passed through as they are (argparse would read them as its own).
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.extra = extra
    with tempfile.TemporaryDirectory() as tmp:
        cache = pathlib.Path(tmp) / "cache"
        if a.cache == "warm":
            start(a, pathlib.Path(tmp), cache)
        s = start(a, pathlib.Path(tmp), cache)
    mem = s["mem"]
    size = pathlib.Path(a.model).stat().st_size / 2**20
    print(f"{a.model} ({size:.0f} MiB file) with {a.kiln}, {a.cache} cache:")
    print(f"  ready after {s['ready']:.2f} s, first token after {s['first_token']:.2f} s; resident "
          f"{mem['VmRSS']:.0f} MiB (file {mem['RssFile']:.0f}, anonymous {mem['RssAnon']:.0f}), "
          f"peak {mem['VmHWM']:.0f} MiB")
    if s["packing"]:
        print(f"  {s['packing'].group(0)}")
    if s["line"]:
        print(f"  kiln's own line: {s['line'].group(0)}")


if __name__ == "__main__":
    main()
