"""`kiln chat` in a pseudo-terminal, as a person uses it: two turns (the second sent with the
first exchange, which the prefix cache serves), /reset (a fresh conversation gives the first
reply again, greedy), Ctrl-C during a reply (the reply stops, the program stays), Ctrl-C at the
prompt (the line is dropped), and Ctrl-D (leaves, exit status 0)."""
import os
import pty
import re
import select
import signal
import time

import pytest

from kiln_server import kiln_bin

STATS = re.compile(rb"\[prompt: (\d+) tokens \((\d+) cached\) \| reply: (\d+) tokens in [\d.]+ s\]")


class Terminal:
    """A kiln process on the slave side of a pty (its controlling terminal, so Ctrl-C typed on
    the master reaches it as SIGINT through the line discipline)."""

    def __init__(self, *args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
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

    def start(*extra):
        t = Terminal("chat", "-m", str(models / "tiny-qwen2.gguf"), "-t", "2", "--temp", "0",
                     "--max-graph-bs", "1", "--stats", *extra)
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
