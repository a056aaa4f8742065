"""Tensor parallelism across real processes: `mpirun -np 2 kiln ... --tp 2` on loopback.

Greedy tokens equal one process's on every dense tiny architecture (eager and graph mode),
`kiln serve --tp 2` answers requests and shuts down cleanly, a killed follower ends the job
with an error instead of a hang, and ranks given different model files stop at start.
Skipped when mpirun is not installed or kiln was built without MPI.
"""
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from kiln_server import kiln_bin, tiny_models_dir  # noqa: E402

DENSE = ["tiny-gemma3-tp", "tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-mistral-tp"]
PROMPT = "The quick brown fox jumps over the lazy dog because"


def mpirun_prefix(n=2):
    args = ["mpirun", "-np", str(n), "--oversubscribe"]
    if os.geteuid() == 0:
        args.append("--allow-run-as-root")
    # Loopback TCP between the ranks, as two machines would talk (shared memory is not used).
    return args + ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tiny_models_dir()
    if not (folder / "tiny-gemma3-tp.gguf").exists():
        import make_models  # the -tp variants came after this folder was generated

        make_models.generate(folder.parent)
    return folder


@pytest.fixture(scope="module", autouse=True)
def needs_mpi():
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (scripts/setup.sh installs openmpi-bin)")
    probe = subprocess.run([kiln_bin(), "run", "-m", "x.gguf", "-p", "x", "--tp", "2"],
                           capture_output=True, text=True, timeout=60)
    if "built without MPI" in probe.stderr:
        pytest.skip("kiln was built without MPI")


@pytest.fixture()
def env(tmp_path):
    e = dict(os.environ)
    e["KILN_CACHE_DIR"] = str(tmp_path / "cache")
    return e


def run_args(model, *extra):
    return ["run", "-m", str(model), "-p", PROMPT, "-n", "24", "--ignore-eos", "-t", "1",
            "-c", "256", "--max-graph-bs", "2", *extra]


def kiln_run(model, *extra, env, tp=1, timeout=300):
    cmd = [kiln_bin(), *run_args(model, *extra)]
    if tp > 1:
        cmd = mpirun_prefix(tp) + cmd + ["--tp", str(tp)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("name", DENSE)
def test_two_ranks_generate_the_single_process_text(models, env, name):
    model = models / f"{name}.gguf"
    single = kiln_run(model, "--graph-mode", "off", env=env)
    assert single.returncode == 0, single.stderr
    # The "optimize" run is a warm start: it maps the packed-weights file the "off" run wrote.
    # Each rank's shard has the same weight names and shapes as the other's, so this also checks
    # that ranks keep separate cache folders (without them both would map one rank's shard).
    for mode in ["off", "optimize"]:
        tp = kiln_run(model, "--graph-mode", mode, env=env, tp=2)
        assert tp.returncode == 0, tp.stderr
        assert tp.stdout == single.stdout, (mode, tp.stderr)
        # Only rank 0 writes the text; its summary names the collectives.
        assert re.search(r"tensor parallel: 2 ranks; rank 0: \d+ steps", tp.stderr), tp.stderr


def test_graph_mode_checked_against_eager_under_tp(models, env):
    tp = kiln_run(models / "tiny-qwen3.gguf", "--check-graph", env=env, tp=2)
    assert tp.returncode == 0, tp.stderr
    assert re.search(r"check-graph: [1-9]\d* graph steps checked against eager mode, 0 diverged",
                     tp.stderr), tp.stderr


def test_mismatched_model_files_stop_at_start(models, env):
    prefix = mpirun_prefix(1)[:1] + mpirun_prefix(1)[3:]  # mpirun and its options, no -np
    cmd = prefix + ["-np", "1", kiln_bin(), *run_args(models / "tiny-llama.gguf"), "--tp", "2",
                    ":", "-np", "1", kiln_bin(), *run_args(models / "tiny-qwen2.gguf"), "--tp", "2"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode != 0
    assert "loaded a different model than rank 0" in p.stderr, p.stderr


def test_tp_needs_mpirun_and_mpirun_needs_tp(models, env):
    alone = subprocess.run([kiln_bin(), *run_args(models / "tiny-llama.gguf"), "--tp", "2"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert alone.returncode != 0
    assert "--tp 2 needs 2 processes started by mpirun" in alone.stderr, alone.stderr
    no_tp = subprocess.run(mpirun_prefix(2) + [kiln_bin(), *run_args(models / "tiny-llama.gguf")],
                           capture_output=True, text=True, timeout=60, env=env)
    assert no_tp.returncode != 0
    assert "without --tp 2" in no_tp.stderr, no_tp.stderr


def test_bench_refuses_tp_with_a_pointer(models, env):
    p = subprocess.run([kiln_bin(), "bench", "-m", str(models / "tiny-llama.gguf"), "--tp", "2"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode != 0
    assert "kiln bench does not run tensor parallel" in p.stderr, p.stderr


def test_moe_is_refused_clearly(models, env):
    p = kiln_run(models / "tiny-qwen3moe.gguf", env=env, tp=2)
    assert p.returncode != 0
    assert "mixture-of-experts" in p.stderr, p.stderr


class TpServer:
    """`mpirun -np 2 kiln serve --tp 2` on a free loopback port."""

    def __init__(self, model, log_path, env, *extra):
        self.log_path = log_path
        self._log = open(log_path, "wb")
        cmd = mpirun_prefix(2) + [kiln_bin(), "serve", "-m", str(model), "--host", "127.0.0.1",
                                  "--port", "0", "--threads", "1", "--context-length", "512",
                                  "--kv-tokens", "8192", "--max-graph-bs", "4",
                                  "--log-level", "info", "--tp", "2", *extra]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + 300
        self.url = None
        while time.monotonic() < deadline and self.url is None:
            assert self.proc.poll() is None, self.log()
            m = re.search(r"at (http://127\.0\.0\.1:\d+)", self.log())
            if m:
                self.url = m.group(1)
            time.sleep(0.1)
        assert self.url, self.log()

    def log(self):
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def generate(self, text, n=16):
        r = requests.post(self.url + "/generate", json={
            "text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0,
                                              "ignore_eos": True}}, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["text"]

    def rank_pids(self):
        """pid of each kiln rank, by the rank mpirun gave it."""
        out = {}
        for pid in subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                  text=True).stdout.split():
            try:
                environ = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            for item in environ:
                if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                    out[int(item.split(b"=")[1])] = int(pid)
        return out

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._log.close()


def test_serve_answers_like_one_process_and_shuts_down_cleanly(models, env, tmp_path):
    model = models / "tiny-llama.gguf"
    single = kiln_run(model, "--graph-mode", "optimize", env=env)
    assert single.returncode == 0, single.stderr
    server = TpServer(model, tmp_path / "serve.log", env)
    try:
        texts = [server.generate(PROMPT, n=24) for _ in range(2)]  # the second hits the prefix cache
        assert texts[0] == texts[1]
        assert single.stdout == texts[0] + "\n"  # `kiln run` ends the text with a newline
        info = requests.get(server.url + "/get_server_info", timeout=30).json()
        assert info.get("tp_size") == 2, info
        # SIGTERM to rank 0: it drains, tells rank 1 to stop, and both exit 0, so mpirun does.
        # (mpirun itself, signalled, forwards the signal but then exits 1 whatever the ranks do.)
        os.kill(server.rank_pids()[0], signal.SIGTERM)
        assert server.proc.wait(120) == 0, server.log()
        log = server.log()
        assert "tensor parallel rank 0:" in log and "tensor parallel rank 1:" in log, log
    finally:
        server.kill()


def test_killed_follower_ends_the_job_with_an_error(models, env, tmp_path):
    server = TpServer(models / "tiny-llama.gguf", tmp_path / "serve.log", env, "--tp-timeout", "10")
    try:
        server.generate(PROMPT, n=4)
        pids = server.rank_pids()
        assert 1 in pids, pids
        os.kill(pids[1], signal.SIGKILL)
        # A request that needs the dead rank: the job must end, not hang.
        try:
            requests.post(server.url + "/generate", json={
                "text": PROMPT, "sampling_params": {"max_new_tokens": 64, "temperature": 0}},
                timeout=60)
        except requests.RequestException:
            pass
        start = time.monotonic()
        code = server.proc.wait(90)
        assert code != 0, server.log()
        assert time.monotonic() - start < 90
        assert re.search(r"rank 1|exited on signal 9|did not complete within", server.log()), server.log()
    finally:
        server.kill()


def test_stalled_follower_trips_the_collective_watchdog(models, env, tmp_path):
    # A rank that stops answering without dying (here: SIGSTOP) is not noticed by mpirun; rank
    # 0's next collective must give up after --tp-timeout and end the job.
    server = TpServer(models / "tiny-llama.gguf", tmp_path / "serve.log", env, "--tp-timeout", "5")
    try:
        server.generate(PROMPT, n=4)
        os.kill(server.rank_pids()[1], signal.SIGSTOP)
        start = time.monotonic()
        try:
            requests.post(server.url + "/generate", json={
                "text": PROMPT, "sampling_params": {"max_new_tokens": 8, "temperature": 0}},
                timeout=60)
        except requests.RequestException:
            pass
        code = server.proc.wait(60)
        assert code != 0, server.log()
        assert time.monotonic() - start < 60
        assert re.search(r"rank 0: \w+ did not complete within 5 s; another rank has died or "
                         r"stopped responding", server.log()), server.log()
    finally:
        server.kill()
