#include "chat_line_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace kiln::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
// Self-pipe: the handler also writes a byte here, which wakes the poll() of a reader however
// close to its start the signal came (a flag checked before a blocking read() leaves a window
// in which Ctrl-C is lost and the read blocks).
int g_wake[2] = {-1, -1};

void on_sigint(int) {
  g_interrupted = 1;
  if (g_wake[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_wake[1], &byte, 1);
  }
}

void on_sigint_while_loading(int) {
  // Only async-signal-safe calls: write(2) and _exit(2).
  static constexpr char kMessage[] = "\nkiln chat: interrupted while loading the model\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(130);
}

void set_sigint_handler(void (*handler)(int)) {
  struct sigaction sa = {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read blocked at the prompt returns EINTR
  ::sigaction(SIGINT, &sa, nullptr);
  // A launcher may hand SIGINT over blocked; Ctrl-C would then do nothing at all. (A SIGINT that
  // came while it was blocked is delivered here, to the handler just installed.)
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void drain_wake_pipe() {
  char buf[64];
  while (g_wake[0] >= 0 && ::read(g_wake[0], buf, sizeof buf) > 0) {
  }
}

}  // namespace

void install_load_interrupt_handler() { set_sigint_handler(on_sigint_while_loading); }

void install_chat_interrupt_handler() {
  if (g_wake[0] < 0 && ::pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0) g_wake[0] = g_wake[1] = -1;
  set_sigint_handler(on_sigint);
}

bool chat_interrupted() { return g_interrupted != 0; }

void clear_chat_interrupt() {
  g_interrupted = 0;
  drain_wake_pipe();
}

ChatLineReader::Result ChatLineReader::read_physical_line(std::string& line) {
  for (;;) {
    if (const size_t nl = pending_.find('\n'); nl != std::string::npos) {
      line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return Result::kLine;
    }
    if (chat_interrupted()) {
      pending_.clear();
      clear_chat_interrupt();
      return Result::kInterrupted;
    }
    pollfd fds[2] = {{fd_, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    if (::poll(fds, g_wake[0] >= 0 ? 2 : 1, -1) < 0 && errno != EINTR) return Result::kEnd;
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;  // woken by Ctrl-C
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n > 0) {
      pending_.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      if (pending_.empty()) return Result::kEnd;
      line.swap(pending_);
      pending_.clear();
      return Result::kLine;
    } else if (errno == EINTR) {
      if (chat_interrupted()) {
        pending_.clear();
        clear_chat_interrupt();
        return Result::kInterrupted;
      }
    } else {
      return Result::kEnd;
    }
  }
}

ChatLineReader::Result ChatLineReader::read(std::string& line) {
  line.clear();
  for (;;) {
    std::string part;
    const Result r = read_physical_line(part);
    if (r == Result::kInterrupted) return r;
    if (r == Result::kEnd) return line.empty() ? Result::kEnd : Result::kLine;
    if (!part.empty() && part.back() == '\r') part.pop_back();
    if (!part.empty() && part.back() == '\\') {
      part.pop_back();
      line += part;
      line += '\n';
      continue;
    }
    line += part;
    return Result::kLine;
  }
}

}  // namespace kiln::cli
