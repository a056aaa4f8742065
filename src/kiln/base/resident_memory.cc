#include "kiln/base/resident_memory.h"

#include <fstream>
#include <string>

namespace kiln {

ResidentMemory read_resident_memory() {
  ResidentMemory m;
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t kib = 0;
  // Lines are "Key:   value kB"; the ones read here are all in kB.
  while (status >> key) {
    int64_t* field = key == "VmRSS:"     ? &m.resident
                     : key == "RssFile:" ? &m.file
                     : key == "RssAnon:" ? &m.anon
                     : key == "VmHWM:"   ? &m.peak
                                         : nullptr;
    if (field != nullptr && status >> kib) *field = kib * 1024;
    status.ignore(1 << 16, '\n');
  }
  return m;
}

}  // namespace kiln
