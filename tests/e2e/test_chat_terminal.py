"""`kiln chat` in a pseudo-terminal, as a person uses it: two turns (the second sent with the
first exchange, which the prefix cache serves), /reset (a fresh conversation gives the first
reply again, greedy), Ctrl-C during a reply (the reply stops, the program stays), Ctrl-C at the
prompt (the line is dropped), Ctrl-D (leaves, exit status 0), Ctrl-C while the model loads
(a line saying so, exit status 130) and the end of piped input (a newline, exit status 0)."""
import os
import pty
import re
import select
import signal
import subprocess
import time

import pytest

from kiln_server import kiln_bin

STATS = re.compile(rb"\[prompt: (\d+) tokens \((\d+) cached\) \| reply: (\d+) tokens in [\d.]+ s\]")


class Terminal:
    """A kiln process on the slave side of a pty (its controlling terminal, so Ctrl-C typed on
    the master reaches it as SIGINT through the line discipline)."""

    def __init__(self, *args, sigint_pending=False):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            if sigint_pending:
                # A Ctrl-C that is already there when kiln starts, held blocked (a pending
                # signal survives exec): kiln unblocks it once its handler is in place, which
                # puts the interrupt inside the model load without racing the load's end.
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
                os.kill(os.getpid(), signal.SIGINT)
            os.execv(kiln_bin(), [kiln_bin(), *args])
        self.buf = b""

    def expect(self, pattern, timeout=120):
        """Reads until `pattern` (bytes regex) matches the unread output; returns the text up
        to and including the match, and drops it from the buffer."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                out, self.buf = self.buf[:m.end()], self.buf[m.end():]
                return out
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} in {self.buf[-2000:]!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                assert chunk, f"kiln chat ended while waiting for {pattern!r}: {self.buf!r}"
                self.buf += chunk

    def send(self, data: bytes):
        os.write(self.fd, data)

    def wait(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # drain, so the child never blocks on a full terminal
                if select.select([self.fd], [], [], 0.1)[0]:
                    os.read(self.fd, 65536)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("kiln chat did not exit")

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


@pytest.fixture
def chat(models):
    terms = []

    def start(*extra, **kw):
        t = Terminal("chat", "-m", str(models / "tiny-qwen2.gguf"), "-t", "2", "--temp", "0",
                     "--max-graph-bs", "1", "--stats", *extra, **kw)
        terms.append(t)
        return t

    yield start
    for t in terms:
        t.close()


def reply_and_stats(term):
    """The reply text since the last prompt and its stats line's numbers."""
    text = term.expect(rb"\[prompt: .*?\]\r?\n")
    m = STATS.search(text)
    return text[:m.start()], [int(m.group(i)) for i in (1, 2, 3)]


def test_two_turns_reset_and_end_of_input(chat):
    term = chat("-n", "12")
    banner = term.expect(rb"> ")
    assert b"kiln chat:" in banner and b"chatml template" in banner
    term.send(b"Hello there\n")
    first, (p1, c1, n1) = reply_and_stats(term)
    assert 0 < n1 <= 12 and c1 == 0
    term.expect(rb"> ")
    term.send(b"Tell me more\n")
    _, (p2, c2, n2) = reply_and_stats(term)
    # The second prompt holds the whole first exchange, and its start came from the cache.
    assert p2 > p1 + n1 and c2 >= p1, (p1, n1, p2, c2)
    term.expect(rb"> ")
    term.send(b"/reset\n")
    term.expect(rb"\(new conversation\)\r?\n> ")
    term.send(b"Hello there\n")
    again, (p3, _, n3) = reply_and_stats(term)
    assert (p3, n3) == (p1, n1)
    # Greedy: the same message in a fresh conversation gets the same reply (after the echo).
    assert again.split(b"Hello there", 1)[-1] == first.split(b"Hello there", 1)[-1]
    term.expect(rb"> ")
    term.send(b"\x04")  # Ctrl-D on an empty line: end of input
    assert term.wait() == 0


def test_ctrl_c_stops_a_reply_and_the_prompt_line(chat):
    term = chat("--ignore-eos", "-c", "16384")
    term.expect(rb"> ")
    term.send(b"Write forever\n")
    term.expect(rb"Write forever\r?\n")
    term.buf = b""
    # Let the reply stream a while, then interrupt it.
    deadline = time.monotonic() + 60
    while len(term.buf) < 200 and time.monotonic() < deadline:
        if select.select([term.fd], [], [], 1)[0]:
            term.buf += os.read(term.fd, 65536)
    term.send(b"\x03")
    out, (_, _, n) = reply_and_stats(term)
    assert b"(stopped)" in out
    assert 0 < n < 16000  # stopped well before the context filled
    term.expect(rb"> ")
    # Ctrl-C at the prompt drops the half-typed line and prompts again.
    term.send(b"half a thou")
    term.send(b"\x03")
    term.expect(rb"\(Ctrl-D or /exit leaves\)\r?\n> ")
    term.send(b"/exit\n")
    assert term.wait() == 0


def test_a_message_larger_than_the_context_is_not_sent(chat):
    term = chat("-c", "256", "-n", "8")
    term.expect(rb"> ")
    term.send(b"word " * 600 + b"\n")
    term.expect(rb"does not fit the context of 256 tokens; not sent\)\r?\n> ")
    term.send(b"hi\n")
    _, (_, _, n) = reply_and_stats(term)
    assert 0 < n <= 8
    term.expect(rb"> ")
    term.send(b"/exit\n")
    assert term.wait() == 0


def test_ctrl_c_while_the_model_loads_exits_130(chat):
    term = chat(sigint_pending=True)
    out = term.expect(rb"interrupted while loading the model\r?\n", timeout=10)
    assert b"kiln chat: interrupted while loading the model" in out
    assert b"> " not in out  # it never got to the prompt
    assert term.wait() == 130


def test_end_of_piped_input_leaves_cleanly(models):
    base = [kiln_bin(), "chat", "-m", str(models / "tiny-qwen2.gguf"), "-t", "2", "--temp", "0",
            "--max-graph-bs", "1", "-n", "4"]
    # No input at all: the banner, an empty prompt line, status 0.
    p = subprocess.run(base, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(b"kiln chat:") and p.stdout.endswith(b"> \n"), p.stdout
    # A message, then the end of the pipe (no newline after the message): it is answered, and
    # the program leaves at the next prompt.
    p = subprocess.run(base, input=b"Hello there", capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # (The reply itself, four tokens of a random model, may hold anything, "> " included.)
    first_prompt = p.stdout.index(b"> ")
    assert p.stdout.endswith(b"\n> \n") and len(p.stdout) - first_prompt > 5, p.stdout
