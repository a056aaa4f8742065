// The OpenAI-compatible API: POST /v1/completions, POST /v1/chat/completions, GET /v1/models.
#pragma once
#include "kiln/server/router.h"
#include "kiln/server/server_state.h"

namespace kiln::server {

void add_openai_routes(Router& router, ServerState& state);

}  // namespace kiln::server
