#include "kernels/cpu/gemm/weight_memory.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace tq {

#if defined(__linux__) && defined(MADV_HUGEPAGE)
namespace {
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

// `bytes` of zeros from an anonymous mapping that starts on a huge page and is advised for them, or null. Mapped with a
// huge page's slack, the unaligned head and what lies past the buffer's last page unmapped at once; `mapped` is what
// stays mapped.
void* map_for_huge_pages(size_t bytes, size_t& mapped) {
  void* raw = ::mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw), end = begin + bytes + kHugePage;
  const uintptr_t start = (begin + kHugePage - 1) & ~(kHugePage - 1), stop = (start + bytes + page - 1) & ~(page - 1);
  if (start > begin) ::munmap(raw, start - begin);
  if (end > stop) ::munmap(reinterpret_cast<void*>(stop), end - stop);
  mapped = stop - start;
  ::madvise(reinterpret_cast<void*>(start), mapped, MADV_HUGEPAGE);  // refused where the kernel has no THP: small pages then
  return reinterpret_cast<void*>(start);
}
}  // namespace
#endif

at::Tensor weight_buffer(int64_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  size_t mapped = 0;
  // A smaller buffer would hold no whole huge page.
  if (bytes >= static_cast<int64_t>(kHugePage))
    if (void* data = map_for_huge_pages(static_cast<size_t>(bytes), mapped))
      return at::from_blob(data, {bytes}, [mapped](void* p) { ::munmap(p, mapped); }, at::TensorOptions().dtype(at::kByte));
#endif
  return at::zeros({bytes}, at::kByte);
}

}  // namespace tq
