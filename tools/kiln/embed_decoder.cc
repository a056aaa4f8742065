#include "embed_decoder.h"

#include "kiln/base/error.h"
#include "kiln/engine/runtime.h"
#include "kiln/engine/sequence_stepper.h"
#include "kiln/model/tokenizer.h"

namespace kiln::cli {

DecoderEmbeddings embed_with_decoder(const std::string& model_path,
                                     const std::vector<std::string>& texts,
                                     const std::vector<std::vector<int32_t>>& ids,
                                     const model::PoolingSpec& spec, int threads) {
  KILN_CHECK(spec.mode == model::Pooling::kLast || spec.mode == model::Pooling::kMean,
             "a decoder embeds with --pooling last or mean, not {}",
             model::pooling_name(spec.mode));
  engine::RuntimeOptions opts;
  opts.model_path = model_path;
  opts.threads = threads;
  opts.graph_mode = engine::GraphMode::Off;  // every step is a hidden-state prefill: eager
  opts.compile_cache = false;
  opts.max_graph_bs = 1;
  // The pool holds one input at a time (pages are released after each): the default size,
  // the model's context, is enough for any input the context takes.
  engine::Runtime rt(opts);
  std::vector<std::vector<int32_t>> inputs(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    inputs[i] = !ids[i].empty() ? ids[i] : rt.tokenizer().encode(texts[i], true, true);
    KILN_CHECK(!inputs[i].empty(),
               "input {} has no tokens (the model adds no BOS to an empty "
               "text)",
               i + 1);
    KILN_CHECK(static_cast<int64_t>(inputs[i].size()) <= rt.info().context_length,
               "input {} has {} tokens; the model's context is {}", i + 1, inputs[i].size(),
               rt.info().context_length);
    for (int32_t id : inputs[i])
      KILN_CHECK(id >= 0 && id < rt.info().vocab_size,
                 "input {}: token id {} is outside "
                 "the vocabulary",
                 i + 1, id);
  }
  engine::SequenceStepper stepper(rt.executor(), rt.kv_pool());
  DecoderEmbeddings out;
  for (const auto& input : inputs) {
    engine::SteppedSequence seq;
    const bool all = spec.mode == model::Pooling::kMean;
    const std::vector<float> hidden = stepper.step_hidden(seq, input, all);
    stepper.release(seq);
    const int64_t rows = all ? static_cast<int64_t>(input.size()) : 1;
    out.dim = static_cast<int64_t>(hidden.size()) / rows;
    std::vector<float> v(static_cast<size_t>(out.dim));
    model::PoolingSpec row_spec = spec;
    if (!all) row_spec.mode = model::Pooling::kLast;  // the one row returned is the last
    model::pool_hidden(hidden.data(), rows, out.dim, row_spec, v.data());
    out.vectors.insert(out.vectors.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace kiln::cli
