// Line input for `kiln chat`: reads lines from a file descriptor (a terminal, or a pipe), with
// Ctrl-C as an event rather than the end of the program. SIGINT only sets a flag and wakes the
// reader through a self-pipe (no Ctrl-C is lost between a check and a blocking read): at the
// prompt it discards the line being typed, during a reply the chat loop sees the flag and
// cancels the reply.
#pragma once
#include <string>

namespace kiln::cli {

// While the model loads: Ctrl-C ends the program at once, saying so on stderr, with status 130
// (128 + SIGINT, what a shell reports for an interrupted command). Nothing is lost, and a load
// can take minutes without calling back, so the handler itself ends the process.
void install_load_interrupt_handler();
// From the first prompt on: Ctrl-C is an event (the reply stops, or the typed line is dropped).
void install_chat_interrupt_handler();
bool chat_interrupted();  // Ctrl-C since the last clear
void clear_chat_interrupt();

class ChatLineReader {
 public:
  enum class Result { kLine, kEnd, kInterrupted };

  explicit ChatLineReader(int fd) : fd_(fd) {}

  // One line without its newline. A line ending in a backslash continues on the next one (the
  // two joined by a newline), so a message can span lines. kEnd: end of input with nothing
  // pending; kInterrupted: Ctrl-C (the partial line is dropped and the flag cleared).
  Result read(std::string& line);

 private:
  Result read_physical_line(std::string& line);

  int fd_;
  std::string pending_;  // bytes read past the last returned line
};

}  // namespace kiln::cli
