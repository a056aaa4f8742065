// The CLI finds its helper scripts beside its own executable (the build copies them there),
// not in a checkout.
#include "helper_scripts.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "kiln/base/error.h"

namespace kiln::cli {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(HelperScripts, FoundBesideTheBuildAndIdenticalToTheSources) {
  for (const char* name : {"pull_model.py", "models.json", "default_model.py"}) {
    const std::string path = helper_script(name);
    EXPECT_NE(path.find("/share/kiln/"), std::string::npos) << path;
    EXPECT_EQ(path.find(KILN_SOURCE_DIR "/scripts"), std::string::npos) << path;
    EXPECT_EQ(read(path), read(std::string(KILN_SOURCE_DIR) + "/scripts/" + name)) << name;
  }
}

TEST(HelperScripts, AMissingHelperNamesWhereItLooked) {
  try {
    helper_script("no_such_helper.py");
    FAIL() << "found a helper that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("share/kiln"), std::string::npos) << e.what();
  }
}

TEST(HelperScripts, KilnPythonOverridesTheInterpreter) {
  ::setenv("KILN_PYTHON", "/opt/some/python3", 1);
  EXPECT_EQ(helper_python(), "/opt/some/python3");
  ::unsetenv("KILN_PYTHON");
  EXPECT_FALSE(helper_python().empty());
}

}  // namespace
}  // namespace kiln::cli
