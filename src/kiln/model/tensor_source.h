// Where a model's weights come from, by the GGUF tensor names the forward pass uses
// (transformer.cc): a GGUF file, or a Hugging Face checkpoint whose tensors are renamed and,
// where the layouts differ, converted (hf_tensor_source.h). The weight store reads only this.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kiln/base/dtype.h"
#include "kiln/base/shape.h"
#include "kiln/base/tensor.h"

namespace kiln::model {

class GgufFile;

struct StoredTensorInfo {
  std::optional<DType> dtype;  // nullopt: a type kiln cannot compute with
  std::string type_name;       // for messages ("iq2_xs", "bf16")
  Shape shape;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual bool has_tensor(const std::string& name) const = 0;
  // Throws kiln::Error when absent.
  virtual StoredTensorInfo tensor_info(const std::string& name) const = 0;
  // The tensor's bytes: borrowed from the file where they can be used as stored, otherwise
  // converted now (the caller keeps what it needs; a converted tensor is not cached here).
  virtual Tensor tensor(const std::string& name) const = 0;
  // Total elements of every weight (the model's parameter count).
  virtual int64_t parameter_count() const = 0;
  // What stands for these exact weights in a cache key without reading them: for a file, its
  // path, size, modification time and inode, so a changed or replaced file never matches an
  // entry made from the old one. Empty: no cheap identity (the packed-weights file is then
  // not used).
  virtual std::string identity() const { return {}; }
};

std::shared_ptr<const TensorSource> gguf_tensor_source(std::shared_ptr<const GgufFile> file);

}  // namespace kiln::model
