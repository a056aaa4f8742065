// POST /v1/embeddings (OpenAI) and POST /encode (SGLang's native embedding request), answered
// by the state's EmbeddingBackend. When the loaded model cannot embed (no backend), both answer
// 404 naming the route and why.
#pragma once
#include "kiln/server/router.h"
#include "kiln/server/server_state.h"

namespace kiln::server {

void add_embedding_routes(Router& router, ServerState& state);

}  // namespace kiln::server
