// Whether the client of the request a handler thread serves is still connected. A
// non-streaming handler learns nothing from the socket while it waits for its generation (it
// writes only at the end), so the transport installs a check for the thread while the handler
// runs, and the handler's wait polls it: a client that closed or reset its connection gets its
// engine requests cancelled at the next poll, and their KV pages return.
#pragma once
#include <functional>

namespace kiln::server {

class ClientWatch {
 public:
  // Installs `gone` for the current thread while the scope lives.
  class Scope {
   public:
    explicit Scope(std::function<bool()> gone);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::function<bool()> previous_;
  };
  // True when the current thread's client has gone; false when no check is installed.
  static bool client_gone();
};

}  // namespace kiln::server
