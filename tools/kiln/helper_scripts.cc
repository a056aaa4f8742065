#include "helper_scripts.h"

#include <cstdlib>
#include <filesystem>

#include "kiln/base/error.h"

namespace kiln::cli {

std::string helper_script(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  const fs::path beside = exe_dir / "share" / "kiln";
  const fs::path installed = exe_dir.parent_path() / "share" / "kiln";
  for (const fs::path& dir : {beside, installed}) {
    if (fs::exists(dir / name, ec)) return (dir / name).string();
  }
  fail("kiln's helper '{}' is in neither {} nor {}; rebuild kiln or reinstall it", name,
       beside.string(), installed.string());
}

std::string helper_python() {
  if (const char* env = std::getenv("KILN_PYTHON"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  if (std::filesystem::exists(KILN_CONFIGURED_PYTHON, ec)) return KILN_CONFIGURED_PYTHON;
  return "python3";
}

}  // namespace kiln::cli
