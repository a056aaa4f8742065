"""Bounded loopback probe of a running `kiln serve` under slow and idle clients.

  python3 bench/http_slow_clients.py --url http://127.0.0.1:PORT --pid PID

1. Opens --idle connections that send nothing and reports the server's thread count
   (/proc/PID/status) before and with them open.
2. Opens --slow connections that each trickle one header byte per second (slowloris) and,
   while they do, times --probes normal requests (GET /health, a 4-token POST /generate), each
   with a --probe-timeout; reports the median and worst latency and how many timed out.
Everything stays on loopback and ends after --duration seconds of trickling.
"""
import argparse
import json
import socket
import statistics
import threading
import time
import urllib.request


def threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise RuntimeError("no Threads line")


def connect(host, port):
    s = socket.create_connection((host, port), timeout=5)
    s.setblocking(False)
    return s


def timed(url, timeout, body=None):
    t0 = time.monotonic()
    try:
        data = json.dumps(body).encode() if body else None
        req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
        return time.monotonic() - t0
    except Exception:  # a timeout or a refused connection: the probe failed
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--slow", type=int, default=200)
    ap.add_argument("--duration", type=float, default=15)
    ap.add_argument("--probes", type=int, default=10)
    ap.add_argument("--probe-timeout", type=float, default=5)
    a = ap.parse_args()
    host, port = a.url.removeprefix("http://").split(":")
    port = int(port)

    before = threads_of(a.pid)
    idle = [connect(host, port) for _ in range(a.idle)]
    time.sleep(1)
    print(f"threads: {before} before, {threads_of(a.pid)} with {a.idle} idle connections")
    for s in idle:
        s.close()
    time.sleep(1)

    slow = [connect(host, port) for _ in range(a.slow)]
    for s in slow:
        s.send(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    stop = threading.Event()

    def trickle():
        while not stop.wait(1.0):
            for s in slow:
                try:
                    s.send(b"X")
                except OSError:
                    pass

    t = threading.Thread(target=trickle)
    t.start()
    time.sleep(2)  # let the slow sockets take whatever they take
    gen = {"text": "probe", "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
    results = {"health": [], "generate": []}
    deadline = time.monotonic() + a.duration
    for _ in range(a.probes):
        if time.monotonic() > deadline:
            break
        results["health"].append(timed(a.url + "/health", a.probe_timeout))
        results["generate"].append(timed(a.url + "/generate", a.probe_timeout, gen))
    stop.set()
    t.join()
    print(f"threads with {a.slow} slow connections: {threads_of(a.pid)}")
    for s in slow:
        s.close()
    for name, xs in results.items():
        ok = [x for x in xs if x is not None]
        timeouts = len(xs) - len(ok)
        if ok:
            print(f"{name}: {len(ok)} answered, median {statistics.median(ok) * 1000:.1f} ms, "
                  f"worst {max(ok) * 1000:.1f} ms, {timeouts} failed/timed out "
                  f"(> {a.probe_timeout} s)")
        else:
            print(f"{name}: none answered within {a.probe_timeout} s ({timeouts} probes)")


if __name__ == "__main__":
    main()
