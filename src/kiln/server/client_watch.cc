#include "kiln/server/client_watch.h"

#include <utility>

namespace kiln::server {

namespace {
thread_local std::function<bool()> t_client_gone;
}  // namespace

ClientWatch::Scope::Scope(std::function<bool()> gone) : previous_(std::move(t_client_gone)) {
  t_client_gone = std::move(gone);
}

ClientWatch::Scope::~Scope() { t_client_gone = std::move(previous_); }

bool ClientWatch::client_gone() { return t_client_gone && t_client_gone(); }

}  // namespace kiln::server
