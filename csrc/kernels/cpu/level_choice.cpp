#include "kernels/cpu/level_choice.h"

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "kernels/cpu/cpu_layer_kernels.h"

namespace tq {
namespace {

// Each weight is timed at 128 rows (a prefill chunk's) over at most 512 of its output rows (the same kernel path
// at a bounded cost) and at least 1,024 inputs: a small model's GEMMs measure only each call's fixed costs, alike
// at every level, so they are timed at the size where the levels' rates show (a real model's are that size or more).
constexpr int64_t kRows = 128, kMaxOut = 512, kMinIn = 1024;
constexpr double kLevelMs = 40;  // timed passes per level, after a warm-up

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// A test instrument: TQ_LEVEL_HANDICAP=<level> times that level as if it ran 10 times slower,
// so a test can show that a slow level is not chosen on any CPU.
std::string handicapped() {
  const char* env = std::getenv("TQ_LEVEL_HANDICAP");
  return env ? env : "";
}

// The levels to time: best_isa() and below, one per distinct kernel path, named by its lowest level (fp32 at
// avx512-bf16 runs avx512's path, and says so).
std::vector<Isa> candidates(at::ScalarType dtype, Quantization quantization) {
  std::vector<Isa> out;
  std::string last;
  for (int l = static_cast<int>(best_isa()); l >= 0; --l) {
    const auto level = static_cast<Isa>(l);
    std::string path = cpu_layer_kernels(true, level, dtype, quantization)->name();
    if (quantization == Quantization::Int8) path += int8_kernel_name(level);
    if (path == last) out.back() = level;
    else out.push_back(level);
    last = path;
  }
  return out;
}

double measure(Isa level, const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization) {
  const auto kernels = cpu_layer_kernels(true, level, dtype, quantization);
  std::vector<std::unique_ptr<Linear>> linears;
  std::vector<at::Tensor> inputs;
  double flops = 0;
  for (const auto& s : shapes) {
    const int64_t out = std::min(s.out, kMaxOut), in = std::max(s.in, kMinIn);
    linears.push_back(kernels->linear(at::randn({out, in}).div_(16).to(dtype), {}));
    inputs.push_back(at::randn({kRows, in}).to(dtype));
    flops += 2.0 * kRows * static_cast<double>(out * in);
  }
  auto pass = [&] {
    for (size_t i = 0; i < linears.size(); ++i) (*linears[i])(inputs[i], at::kFloat);
  };
  pass();  // warm-up: packing, first-touch pages
  int passes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double ms = 0;
  while (passes < 2 || ms < kLevelMs) {
    pass();
    ++passes;
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  if (handicapped() == isa_name(level)) ms *= 10;
  return flops * passes / (ms * 1e6);
}

std::string key_of(const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization) {
  std::ostringstream k;
  k << cpu_model() << "|" << c10::toString(dtype) << "|" << quantization_name(quantization) << "|"
    << at::get_num_threads() << "|" << isa_name(best_isa()) << "|" << handicapped();
  for (const auto& s : shapes) k << "|" << s.out << "x" << s.in;
  return k.str();
}

// "level\tname:gflops,name:gflops" and back.
std::string encode(const LevelChoice& c) {
  std::ostringstream out;
  out << isa_name(c.level) << "\t";
  for (size_t i = 0; i < c.rates.size(); ++i) out << (i ? "," : "") << isa_name(c.rates[i].level) << ":" << c.rates[i].gflops;
  return out.str();
}

bool decode(const std::string& text, LevelChoice& c) {
  const auto tab = text.find('\t');
  if (tab == std::string::npos) return false;
  try {
    c.level = isa_for(text.substr(0, tab));
    std::stringstream rates(text.substr(tab + 1));
    for (std::string item; std::getline(rates, item, ',');) {
      const auto colon = item.find(':');
      c.rates.push_back({isa_for(item.substr(0, colon)), std::stod(item.substr(colon + 1))});
    }
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

std::string cache_path() {
  if (const char* env = std::getenv("TQ_LEVEL_CACHE"); env && *env) return env;
  std::string dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) dir = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home) dir = std::string(home) + "/.cache";
  else return "";
  dir += "/tqserve";
  ::mkdir(dir.substr(0, dir.rfind('/')).c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  return dir + "/kernel-levels";
}

LevelChoice measured(const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization) {
  LevelChoice c;
  c.how = "measured";
  for (Isa level : candidates(dtype, quantization)) c.rates.push_back({level, measure(level, shapes, dtype, quantization)});
  std::stable_sort(c.rates.begin(), c.rates.end(), [](const LevelRate& a, const LevelRate& b) { return a.gflops > b.gflops; });
  c.level = c.rates.front().level;
  return c;
}

// The file's choice for `key`, or one measured now and added to it, under the file's lock.
LevelChoice through_file(const std::string& key, const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization) {
  const auto path = cache_path();
  const int fd = path.empty() ? -1 : ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  if (fd < 0) return measured(shapes, dtype, quantization);  // nowhere to keep it: this process's choice
  ::flock(fd, LOCK_EX);
  LevelChoice c;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == '\t' && decode(line.substr(key.size() + 1), c)) {
      c.how = "cached";
      break;
    }
  if (c.how.empty()) {
    c = measured(shapes, dtype, quantization);
    const auto line = key + "\t" + encode(c) + "\n";
    ::lseek(fd, 0, SEEK_END);
    if (::write(fd, line.data(), line.size()) < 0) {
      // Not kept: the next process measures again.
    }
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  return c;
}

}  // namespace

LevelChoice choose_level(const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization) {
  static std::mutex mutex;
  static std::map<std::string, LevelChoice> chosen;  // this process's, by key
  auto set = [](const char* name) { return std::getenv(name) && *std::getenv(name) && std::string(std::getenv(name)) != "0"; };
  const bool forced = set("TQ_KERNELS") || set("TQ_PORTABLE_KERNELS");
  if (forced || candidates(dtype, quantization).size() == 1) return {best_isa(), forced ? "forced" : "only", {}};
  const auto key = key_of(shapes, dtype, quantization);
  std::lock_guard<std::mutex> lock(mutex);
  // By file too: another file is another record of choices.
  if (auto it = chosen.find(cache_path() + "\n" + key); it != chosen.end()) {
    LevelChoice again = it->second;
    again.how = "cached";
    return again;
  }
  return chosen[cache_path() + "\n" + key] = through_file(key, shapes, dtype, quantization);
}

}  // namespace tq
