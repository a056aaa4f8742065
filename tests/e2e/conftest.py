"""Fixtures: the tiny random-weight models and `kiln serve` processes on free loopback ports.

Run with: KILN_BIN=build/release/kiln .venv/bin/python3 -m pytest tests/e2e
"""
import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kiln_server import KilnServer, tiny_models_dir  # noqa: E402

# Small limits keep the suite fast on 2 cores while still exercising every path: the context
# and KV pool are a few thousand tokens, graphs are captured for batch sizes up to 8.
COMMON_OPTIONS = {"--threads": "2", "--context-length": "1024", "--kv-tokens": "16384",
                  "--max-graph-bs": "8", "--random-seed": "1"}


def server_args(*args: str) -> list:
    """COMMON_OPTIONS with `args` (flag, value pairs) overriding or adding to them."""
    options = dict(COMMON_OPTIONS)
    assert len(args) % 2 == 0, args
    options.update(zip(args[::2], args[1::2]))
    return [x for kv in options.items() for x in kv]


@pytest.fixture(scope="session", autouse=True)
def private_cache_dir(tmp_path_factory):
    """Every kiln the tests start caches plans and packed weights (one file as large as the
    model's packed weights) in a session folder, never in the user's ~/.cache/kiln."""
    if "KILN_CACHE_DIR" not in os.environ:
        os.environ["KILN_CACHE_DIR"] = str(tmp_path_factory.mktemp("kiln-cache"))
    yield


@pytest.fixture(scope="session")
def models() -> pathlib.Path:
    return tiny_models_dir()


@pytest.fixture(scope="session")
def gemma(models) -> pathlib.Path:
    return models / "tiny-gemma3.gguf"


@pytest.fixture(scope="session")
def server_factory(tmp_path_factory):
    """Starts servers on demand; every one still running is stopped at the end."""
    started = []
    log_dir = tmp_path_factory.mktemp("kiln-logs")

    def start(model, *args, name="server", port=0):
        s = KilnServer(model, *server_args(*args), log_dir=log_dir, name=name, port=port)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def server(server_factory, gemma):
    """The shared server: tiny Gemma 3, graph mode optimize."""
    return server_factory(gemma, "--graph-mode", "optimize", name="shared")
