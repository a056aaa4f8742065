#include "kiln/model/tensor_source.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include "kiln/model/gguf.h"

namespace kiln::model {
namespace {

class GgufTensorSource final : public TensorSource {
 public:
  explicit GgufTensorSource(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {}

  bool has_tensor(const std::string& name) const override { return file_->has_tensor(name); }
  StoredTensorInfo tensor_info(const std::string& name) const override {
    const GgufTensorInfo& info = file_->tensor_info(name);
    return {info.dtype, gguf_tensor_type_name(info.gguf_type), info.shape};
  }
  Tensor tensor(const std::string& name) const override { return file_->tensor(name); }
  int64_t parameter_count() const override {
    int64_t n = 0;
    for (const auto& t : file_->tensor_infos()) n += t.shape.numel();
    return n;
  }
  std::string identity() const override {
    struct stat st {};
    if (::stat(file_->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
    return fmt::format("gguf {} size {} mtime {}.{:09d} inode {}:{}", file_->path(), st.st_size,
                       st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_dev, st.st_ino);
  }

 private:
  std::shared_ptr<const GgufFile> file_;
};

}  // namespace

std::shared_ptr<const TensorSource> gguf_tensor_source(std::shared_ptr<const GgufFile> file) {
  return std::make_shared<GgufTensorSource>(std::move(file));
}

}  // namespace kiln::model
