#include "kernels/cpu/level_choice.h"

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "kernels/cpu/cpu_layer_kernels.h"

namespace tq {
namespace {

// Each weight is timed at 128 rows (a prefill chunk's) over at most 512 of its output rows (the same kernel path
// at a bounded cost) and at least 1,024 inputs: a small model's GEMMs measure only each call's fixed costs, alike
// at every level, so they are timed at the size where the levels' rates show (a real model's are that size or more).
constexpr int64_t kRows = 128, kMaxOut = 512, kMinIn = 1024;
constexpr int kRounds = 7;         // each level timed once a round, the levels taking turns, at most
constexpr int kDecisiveRounds = 3; // the rounds after which a decisive lead ends the measurement
constexpr double kDecisiveLead = 1.25;  // a lead is decisive when the leader's median round beats every other round by this
constexpr double kRoundMs = 8;     // a level's time in one round, after a warm-up
constexpr double kSlack = 0.1;     // of the engine's threads: what other processes may take of them unnoticed

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// A test instrument: TQ_LEVEL_HANDICAP=<level>[,<level>...] times those levels as if they ran 100 times slower
// (10 was a near-tie on a CPU whose bf16 level runs ten times its generic one),
// so a test can show that a slow level is not chosen, and is left when it was, on any CPU.
std::string handicapped() {
  const char* env = std::getenv("TQ_LEVEL_HANDICAP");
  return env ? env : "";
}
bool is_handicapped(Isa level) {
  std::stringstream list(handicapped());
  for (std::string name; std::getline(list, name, ',');)
    if (name == isa_name(level)) return true;
  return false;
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

// CPU seconds the whole machine has been busy (every CPU; all but idle and I/O wait, steal included: time a
// hypervisor gave to others), from /proc/stat; and those of this process. -1 where /proc/stat cannot be read.
double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user, nice, system, idle, iowait, irq, softirq, steal;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return -1;
  return (user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// Whether other processes took CPU time the engine's threads needed while it measured: more than the CPUs its
// threads leave free, plus a tenth of its threads.
class BusyWatch {
 public:
  BusyWatch() : machine_(machine_busy_seconds()), own_(process_cpu_seconds()), t0_(std::chrono::steady_clock::now()) {}
  bool busy() const {
    const double machine = machine_busy_seconds();
    if (machine_ < 0 || machine < 0) return false;  // no /proc/stat: nothing to tell by
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double others = (machine - machine_) - (process_cpu_seconds() - own_);
    const double threads = at::get_num_threads(), cpus = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
    return others > (std::max(0.0, cpus - threads) + kSlack * threads) * wall;
  }

 private:
  double machine_, own_;
  std::chrono::steady_clock::time_point t0_;
};

// One level's GEMMs of the model's shapes, packed once.
class LevelBench {
 public:
  LevelBench(Isa level, const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization)
      : level_(level), kernels_(cpu_layer_kernels(true, level, dtype, quantization)) {
    for (const auto& s : shapes) {
      const int64_t out = std::min(s.out, kMaxOut), in = std::max(s.in, kMinIn);
      linears_.push_back(kernels_->linear(at::randn({out, in}).div_(16).to(dtype), {}));
      inputs_.push_back(at::randn({kRows, in}).to(dtype));
      flops_ += 2.0 * kRows * static_cast<double>(out * in);
    }
    const auto t0 = std::chrono::steady_clock::now();
    pass();  // warm-up: first-touch pages; and how many passes fill a round
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    passes_ = std::max(1, static_cast<int>(kRoundMs / std::max(ms, 1e-3)));
  }
  Isa level() const { return level_; }
  // One round: GFLOP/s.
  double round() {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < passes_; ++i) pass();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (is_handicapped(level_)) ms *= 100;
    return flops_ * passes_ / (ms * 1e6);
  }

 private:
  void pass() {
    for (size_t i = 0; i < linears_.size(); ++i) (*linears_[i])(inputs_[i], at::kFloat);
  }
  Isa level_;
  std::unique_ptr<LayerKernels> kernels_;
  std::vector<std::unique_ptr<Linear>> linears_;
  std::vector<at::Tensor> inputs_;
  double flops_ = 0;
  int passes_ = 1;
};

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

// Whether one level's median round beats every other level's fastest by kDecisiveLead: more rounds could not change
// which level is fastest, only the rates reported. (Load only slows a round: a level's fastest round is the best
// sign of its rate, and the leader's median stands one slowed round.)
bool decisive(const std::vector<std::vector<double>>& rates) {
  std::vector<double> middle, fastest;
  for (const auto& r : rates) {
    middle.push_back(median(r));
    fastest.push_back(*std::max_element(r.begin(), r.end()));
  }
  const size_t leader = std::max_element(middle.begin(), middle.end()) - middle.begin();
  for (size_t b = 0; b < rates.size(); ++b)
    if (b != leader && middle[leader] <= kDecisiveLead * fastest[b]) return false;
  return true;
}

// Every level a round at a time, the order turning each round; each level's median over its rounds, so that a
// moment of load hits every level alike; ended early by a decisive lead (the usual case: the levels' rates are
// far apart where their kernels differ), else after kRounds. Marked busy where other processes took the
// engine's CPUs meanwhile.
LevelChoice measured(const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization) {
  std::vector<LevelBench> benches;
  for (Isa level : candidates(dtype, quantization)) benches.emplace_back(level, shapes, dtype, quantization);
  const BusyWatch watch;
  std::vector<std::vector<double>> rates(benches.size());
  for (int r = 0; r < kRounds && !(r >= kDecisiveRounds && decisive(rates)); ++r)
    for (size_t i = 0; i < benches.size(); ++i) {
      const size_t b = (i + r) % benches.size();
      rates[b].push_back(benches[b].round());
    }
  LevelChoice c;
  c.how = "measured";
  c.busy = watch.busy();
  c.rounds = static_cast<int>(rates.front().size());
  for (size_t b = 0; b < benches.size(); ++b) c.rates.push_back({benches[b].level(), median(rates[b])});
  std::stable_sort(c.rates.begin(), c.rates.end(), [](const LevelRate& a, const LevelRate& b) { return a.gflops > b.gflops; });
  c.level = c.rates.front().level;
  return c;
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

constexpr auto kBusyChoiceKept = std::chrono::seconds(60);

int64_t seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A small file of lines "key\tvalue", read when opened and rewritten whole, under an exclusive lock held while this
// lives: processes started together wait for the one measuring, then read what it wrote.
class LockedLines {
 public:
  explicit LockedLines(const std::string& path) : path_(path), fd_(path.empty() ? -1 : ::open(path.c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ < 0) return;
    ::flock(fd_, LOCK_EX);
    std::ifstream in(path_);
    for (std::string line; std::getline(in, line);) lines_.push_back(line);
  }
  ~LockedLines() {
    if (fd_ < 0) return;
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  LockedLines(const LockedLines&) = delete;
  LockedLines& operator=(const LockedLines&) = delete;

  bool open() const { return fd_ >= 0; }

  std::optional<std::string> value(const std::string& key) const {
    for (const auto& line : lines_)
      if (is_of(line, key)) return line.substr(key.size() + 1);
    return std::nullopt;
  }

  // The file again with `key`'s line holding `value`, less the other lines whose value `stale` says.
  template <class Stale>
  void put(const std::string& key, const std::string& value, Stale stale) {
    std::string text;
    for (const auto& line : lines_) {
      const auto tab = line.find('\t');
      if (!is_of(line, key) && tab != std::string::npos && !stale(line.substr(tab + 1))) text += line + "\n";
    }
    text += key + "\t" + value + "\n";
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) < 0) {
      // Not kept: the next process measures again.
    }
  }

 private:
  static bool is_of(const std::string& line, const std::string& key) {
    return line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == '\t';
  }
  std::string path_;
  int fd_;
  std::vector<std::string> lines_;
};

// A busy measurement's value: "seconds since the epoch\tlevel\trates". Whether it is under a minute old.
bool fresh(const std::string& busy_value) {
  try {
    return seconds_now() - std::stoll(busy_value.substr(0, busy_value.find('\t'))) < kBusyChoiceKept.count();
  } catch (const std::exception&) {
    return false;
  }
}

// The file's choice for `key` (how "cached"); else one measured busy by any process in the last minute (kept
// beside the file, in `<file>.busy`: cached, busy); else, or `again`, one measured now, written to the file if
// trusted, beside it if busy. The file is locked throughout, so that processes started together measure once.
LevelChoice through_file(const std::string& key, const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization,
                         bool again) {
  const auto path = cache_path();
  LockedLines trusted(path);
  if (!trusted.open()) return measured(shapes, dtype, quantization);  // nowhere to keep it: this process's choice
  LevelChoice c;
  if (const auto value = trusted.value(key); !again && value && decode(*value, c)) {
    c.how = "cached";
    return c;
  }
  LockedLines busy(path + ".busy");
  if (const auto value = busy.value(key); !again && value && fresh(*value)) {
    LevelChoice b;
    if (decode(value->substr(value->find('\t') + 1), b)) {
      b.how = "cached";
      b.busy = true;
      return b;
    }
  }
  c = measured(shapes, dtype, quantization);
  // Rewritten whole (a few lines): a later measurement replaces an earlier one; busy ones older than a minute go.
  if (!c.busy) trusted.put(key, encode(c), [](const std::string&) { return false; });
  else if (busy.open()) busy.put(key, std::to_string(seconds_now()) + "\t" + encode(c), [](const std::string& v) { return !fresh(v); });
  return c;
}

// This process's choices, by file and key: a trusted one for as long as it runs, one measured busy for a minute.
struct Chosen {
  LevelChoice choice;
  std::chrono::steady_clock::time_point at;
};
std::mutex chosen_mutex;
std::map<std::string, Chosen> chosen;

const LevelChoice* still_chosen(const std::string& id) {
  const auto it = chosen.find(id);
  if (it == chosen.end()) return nullptr;
  const bool current = !it->second.choice.busy || std::chrono::steady_clock::now() - it->second.at < kBusyChoiceKept;
  return current ? &it->second.choice : nullptr;
}

// A trusted choice is not replaced by a busy one.
void remember(const std::string& id, const LevelChoice& c) {
  const auto it = chosen.find(id);
  if (c.busy && it != chosen.end() && !it->second.choice.busy) return;
  chosen[id] = {c, std::chrono::steady_clock::now()};
}

}  // namespace

LevelChoice choose_level(const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization) {
  auto set = [](const char* name) { return std::getenv(name) && *std::getenv(name) && std::string(std::getenv(name)) != "0"; };
  const bool forced = set("TQ_KERNELS") || set("TQ_PORTABLE_KERNELS");
  if (forced || candidates(dtype, quantization).size() == 1) return {best_isa(), forced ? "forced" : "only", false, {}};
  const auto key = key_of(shapes, dtype, quantization);
  const auto id = cache_path() + "\n" + key;
  std::lock_guard<std::mutex> lock(chosen_mutex);
  if (const LevelChoice* before = still_chosen(id)) {
    LevelChoice again = *before;
    again.how = "cached";
    again.rounds = 0;
    return again;
  }
  auto c = through_file(key, shapes, dtype, quantization, false);
  remember(id, c);
  return c;
}

LevelChoice remeasure_level(const std::vector<GemmShape>& shapes, at::ScalarType dtype, Quantization quantization) {
  const auto key = key_of(shapes, dtype, quantization);
  std::lock_guard<std::mutex> lock(chosen_mutex);
  auto c = through_file(key, shapes, dtype, quantization, true);
  remember(cache_path() + "\n" + key, c);
  c.how = "re-measured";
  return c;
}

}  // namespace tq
