// Server-sent events for a running GenerationJob: each update becomes `data: {json}\n\n`, the
// end `data: [DONE]\n\n` (the framing SGLang and OpenAI share). The body is produced by the
// HTTP worker as events arrive; when the client goes away (a write fails) the job is
// destroyed, which cancels its engine requests.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/server/generation_job.h"
#include "kiln/server/http_message.h"
#include "kiln/server/server_state.h"

namespace kiln::server {

std::string sse_data(const nlohmann::json& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

struct SseRenderer {
  // Payloads for one update (may be none, e.g. an event that carried no text).
  std::function<std::vector<nlohmann::json>(const GenerationJob&, const GenerationJob::Update&)>
      on_update;
  // Payloads after every sequence finished, before [DONE] (the usage chunk).
  std::function<std::vector<nlohmann::json>(const GenerationJob&)> on_finish;
};

// Makes `res` stream the (already started) job.
void stream_job(HttpResponse& res, std::shared_ptr<GenerationJob> job, ServerState& state,
                SseRenderer renderer);

}  // namespace kiln::server
