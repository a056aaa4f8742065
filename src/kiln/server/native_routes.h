// SGLang's native HTTP API: POST /generate, GET /get_model_info, GET /get_server_info,
// GET /health, GET /health_generate, POST /flush_cache, POST /tokenize, POST /detokenize.
#pragma once
#include "kiln/server/router.h"
#include "kiln/server/server_state.h"

namespace kiln::server {

void add_native_routes(Router& router, ServerState& state);

}  // namespace kiln::server
