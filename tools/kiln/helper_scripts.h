// The Python helpers the CLI runs (`kiln pull`'s downloader, the default model's locator): data
// files of the program, not of a checkout. The build copies them beside the executable
// (<build>/share/kiln) and `cmake --install` puts them in <prefix>/share/kiln, so a kiln
// binary finds its own helpers wherever it was built or installed.
#pragma once
#include <string>

namespace kiln::cli {

// <dir of the running executable>/share/kiln, else <that dir>/../share/kiln (an installed
// bin/kiln), whichever holds `name`; throws kiln::Error naming both places when neither does.
std::string helper_script(const std::string& name);

// The interpreter for the helpers: $KILN_PYTHON, else the Python the build was configured with
// (the project's .venv, where scripts/setup.sh installs the packages the helpers import), else
// python3 from PATH.
std::string helper_python();

}  // namespace kiln::cli
