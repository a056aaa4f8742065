"""Starting, querying and stopping a `kiln serve` process for the end-to-end tests."""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[2]


def kiln_bin() -> str:
    path = os.environ.get("KILN_BIN") or str(REPO / "build" / "release" / "kiln")
    if not pathlib.Path(path).is_file():
        raise RuntimeError(f"kiln binary not found at {path}; set KILN_BIN")
    return path


def assert_one_error_line(proc, *needles, prefix="kiln: error: "):
    """A failed command's stderr is one line, `prefix` first, naming every needle."""
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(prefix), lines[0]
    for n in needles:
        assert n in lines[0], lines[0]


def tiny_models_dir() -> pathlib.Path:
    """The folder with tests/fixtures/make_models.py's tiny-*.gguf, generating it if needed."""
    for candidate in [os.environ.get("KILN_TESTDATA"), REPO / "build" / "release" / "testdata"]:
        if candidate and (pathlib.Path(candidate) / "models" / "tiny-gemma3.gguf").is_file():
            return pathlib.Path(candidate) / "models"
    out = pathlib.Path(tempfile.gettempdir()) / f"kiln-e2e-testdata-{os.getuid()}"
    sys.path.insert(0, str(REPO / "tests" / "fixtures"))
    import make_models  # noqa: E402  (the reference helper's generator; rewrites only on change)

    make_models.generate(out)
    return out / "models"


class KilnServer:
    """One `kiln serve` on a free loopback port (the server picks it: --port 0)."""

    def __init__(self, model: pathlib.Path, *extra_args: str, log_dir: pathlib.Path,
                 name: str = "server", startup_timeout: float = 300.0, port: int = 0):
        self.log_path = log_dir / f"{name}.log"
        self.args = [kiln_bin(), "serve", "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
                     "--log-level", "info", *extra_args]
        env = dict(os.environ)
        env.setdefault("KILN_CACHE_DIR", str(log_dir.parent / "kiln-compile-cache"))
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        self.url = self._wait_ready(startup_timeout)

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        url = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kiln serve exited with {self.proc.returncode}:\n{self.log()}")
            if url is None:
                m = re.search(r"at (http://127\.0\.0\.1:\d+)", self.log())
                url = m.group(1) if m else None
            if url is not None:
                try:
                    if requests.get(url + "/health", timeout=2).status_code == 200:
                        return url
                except requests.ConnectionError:
                    pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"kiln serve not ready after {timeout} s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    # ---- HTTP helpers ----
    def get(self, path: str, **kw):
        return requests.get(self.url + path, timeout=kw.pop("timeout", 120), **kw)

    def post(self, path: str, body=None, **kw):
        return requests.post(self.url + path, json=body, timeout=kw.pop("timeout", 300), **kw)

    def generate(self, body: dict) -> dict:
        r = self.post("/generate", body)
        assert r.status_code == 200, r.text
        return r.json()

    def stream(self, path: str, body: dict, max_events=None):
        """The JSON payloads of an SSE response and whether it ended with [DONE]."""
        events, done = [], False
        with requests.post(self.url + path, json=body, stream=True, timeout=300) as r:
            assert r.status_code == 200, r.text
            for line in r.iter_lines():
                if not line:
                    continue
                assert line.startswith(b"data: "), line
                data = line[len(b"data: "):]
                if data == b"[DONE]":
                    done = True
                    continue
                events.append(json.loads(data))
                if max_events is not None and len(events) >= max_events:
                    break
        return events, done

    def metrics(self) -> dict:
        """Unlabelled samples and labelled ones (name{labels}) as floats."""
        out = {}
        for line in self.get("/metrics").text.splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                out[key] = float(value)
        return out

    def wait_idle(self, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            m = self.metrics()
            if m["kiln_num_running_reqs"] == 0 and m["kiln_num_queue_reqs"] == 0:
                return m
            assert time.monotonic() < deadline, f"server not idle: {m}"
            time.sleep(0.05)

    def assert_all_pages_free(self):
        """Once idle, no KV page is held by a request; after a flush none is held at all."""
        m = self.wait_idle()
        assert m["kiln_kv_pages_used"] - m["kiln_kv_pages_cached"] == 0, m
        r = self.post("/flush_cache")
        assert r.status_code == 200, r.text
        m = self.metrics()
        assert m["kiln_kv_pages_free"] == m["kiln_kv_pages_total"], m

    # ---- lifecycle ----
    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
