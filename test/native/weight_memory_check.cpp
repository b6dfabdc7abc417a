// Packed weights' memory (csrc/kernels/cpu/gemm/weight_memory.h): a buffer of a huge page or more starts 2 MiB-aligned,
// holds zeros, is advised for transparent huge pages (its mapping's VmFlags in /proc/self/smaps carry "hg"), and is
// unmapped when its tensor goes; a smaller one holds zeros. Prints one JSON line, with the system's THP mode and the
// huge pages the large buffer got once written (the kernel may fall back to small pages: reported, not required);
// test/kernels/cpu.test.ts reads it.
#include <ATen/ATen.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/cpu/gemm/weight_memory.h"

namespace {

struct Mapping {
  bool found = false, advised = false;
  long huge_kb = 0;
};

// The /proc/self/smaps entry of the mapping that holds `address`.
Mapping mapping_of(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  Mapping m;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long begin, end;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(':') > line.find(' ')) {
      if (inside) break;
      inside = begin <= at && at < end;
      m.found = m.found || inside;
      continue;
    }
    if (!inside) continue;
    if (line.rfind("AnonHugePages:", 0) == 0) m.huge_kb = std::stol(line.substr(14));
    if (line.rfind("VmFlags:", 0) == 0) m.advised = (line + " ").find(" hg ") != std::string::npos;
  }
  return m;
}

bool all_zero(const at::Tensor& t) {
  const auto* p = t.data_ptr<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (p[i]) return false;
  return true;
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  const auto a = s.find('['), b = s.find(']');
  return a == std::string::npos || b == std::string::npos ? "none" : s.substr(a + 1, b - a - 1);
}

}  // namespace

int main() {
  const int64_t large_bytes = (int64_t{5} << 20) + 123;
  bool aligned, zeros, advised, unmapped;
  long huge_kb;
  {
    auto large = tq::weight_buffer(large_bytes);
    const void* data = large.data_ptr();
    aligned = reinterpret_cast<uintptr_t>(data) % (uintptr_t{2} << 20) == 0;
    zeros = large.numel() == large_bytes && all_zero(large);
    std::memset(large.data_ptr(), 1, static_cast<size_t>(large_bytes));
    const auto m = mapping_of(data);
    advised = m.found && m.advised;
    huge_kb = m.huge_kb;
    large.reset();
    unmapped = !mapping_of(data).found;
  }
  const auto small = tq::weight_buffer(1000);
  std::printf("{\"check\":\"weightMemory\",\"thp\":\"%s\",\"large\":{\"aligned\":%s,\"zeros\":%s,\"advised\":%s,\"hugePagesKb\":%ld,\"unmapped\":%s},"
              "\"small\":{\"bytes\":%lld,\"zeros\":%s}}\n",
              thp_mode().c_str(), aligned ? "true" : "false", zeros ? "true" : "false", advised ? "true" : "false", huge_kb,
              unmapped ? "true" : "false", static_cast<long long>(small.numel()), all_zero(small) ? "true" : "false");
  return 0;
}
