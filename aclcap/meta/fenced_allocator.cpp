// A CPU allocator for the synthesis worker's kernel calls (aclcap/meta/fence.py): every
// block lies on pages of its own, its end (rounded up to torch's 64-byte alignment) against
// an inaccessible page, and a second one before it. A kernel that writes or reads past a
// tensor it allocated, or past an input copied under the fence, then faults at that
// access, in every run, instead of corrupting the heap (a crash some calls later, or none,
// as the heap's layout fell: fbgemm's permute_1D_sparse_data given lengths beyond its
// permuted_lengths_sum crashed in 3 runs of 4). Blocks start filled with the run's byte,
// so an output the kernel leaves unwritten differs between two runs, and a write into the
// alignment's slack past the end (fewer than 64 bytes) is found when the fence goes off.
// No library offers a guard-page allocator for torch (sanitizers instrument a whole build;
// Electric Fence replaces malloc for the whole process), hence this file.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <unordered_map>
#include <vector>
#include <cstdint>
#include <cstring>

namespace {
constexpr size_t kAlign = 64;             // c10's gAlignment: kernels may rely on it
constexpr size_t kMaxLive = 8000;         // each block is 3 mappings; the kernel caps them
constexpr uint8_t kPriority = 255;        // above any allocator a library set

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// One block: its mapping (an inaccessible page, `pages` of data, another inaccessible one)
// and the bytes of its pages around the data (the alignment's slack after it, the page's
// head before it), which hold the fill byte until written.
struct Block {
  char* base;
  size_t pages;
  size_t bytes;
  int fill;
  bool watched;  // made since the fence went on

  char* usable() const { return base + page_size(); }
  size_t usable_length() const { return pages * page_size(); }
  size_t length() const { return (pages + 2) * page_size(); }
};

std::mutex g_mutex;
// By data pointer: oneDNN's raw_allocate (conv1d) wants a block's context to be its data.
std::unordered_map<void*, Block> g_blocks;
// Mappings freed, by their pages of data, kept for the next block of as many: a kernel
// call allocates a few tensors, and a run of synthesis tens of thousands of calls, so a
// mapping made and unmapped for each cost 11% of the run's wall time.
std::unordered_map<size_t, std::vector<char*>> g_spare;
size_t g_spare_bytes = 0;
constexpr size_t kMaxSpareBytes = size_t{64} << 20;
bool g_overran = false;
c10::Allocator* g_default = nullptr;  // torch's own, for what the fence cannot serve
bool g_on = false;

bool intact(const char* data, const Block& block) {
  const auto held = [&block](const char* from, const char* to) {
    for (const char* p = from; p < to; ++p) {
      if (static_cast<uint8_t>(*p) != static_cast<uint8_t>(block.fill)) return false;
    }
    return true;
  };
  return held(block.usable(), data) &&
         held(data + block.bytes, block.usable() + block.usable_length());
}

void fenced_free(void* data) {
  std::unique_lock<std::mutex> lock(g_mutex);
  const auto found = g_blocks.find(data);
  if (found == g_blocks.end()) {  // served by torch's own allocator (raw_allocate's)
    lock.unlock();
    g_default->raw_deleter()(data);
    return;
  }
  const Block block = found->second;
  if (block.watched && !intact(static_cast<char*>(data), block)) g_overran = true;
  g_blocks.erase(found);
  if (g_spare_bytes + block.length() <= kMaxSpareBytes) {
    g_spare[block.pages].push_back(block.base);
    g_spare_bytes += block.length();
    return;
  }
  lock.unlock();
  munmap(block.base, block.length());
}

// The mapping of a block of `pages` pages of data: a spare one, else new.
char* mapping(size_t pages) {
  const Block shape{nullptr, pages, 0, 0, false};
  auto spare = g_spare.find(pages);
  if (spare != g_spare.end() && !spare->second.empty()) {
    char* base = spare->second.back();
    spare->second.pop_back();
    g_spare_bytes -= shape.length();
    return base;
  }
  void* base = mmap(nullptr, shape.length(), PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  char* at = static_cast<char*>(base);
  if (mprotect(at + page_size(), shape.usable_length(), PROT_READ | PROT_WRITE) != 0) {
    munmap(base, shape.length());
    return nullptr;
  }
  return at;
}

struct FencedAllocator final : c10::Allocator {
  int fill = 0;

  c10::DataPtr allocate(size_t n) override {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_on || g_blocks.size() >= kMaxLive) {  // a storage resized later, or many kept
      return g_default->allocate(n);
    }
    const size_t body = (n + kAlign - 1) / kAlign * kAlign;
    const size_t pages = body == 0 ? 1 : (body + page_size() - 1) / page_size();
    char* base = mapping(pages);
    if (base == nullptr) {
      return g_default->allocate(n);
    }
    const Block block{base, pages, n, fill, true};
    std::memset(block.usable(), fill, block.usable_length());
    char* data = block.usable() + block.usable_length() - body;
    g_blocks[data] = block;
    return {data, data, &fenced_free, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &fenced_free; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

FencedAllocator g_fenced;
}  // namespace

// 1 when the fence now serves torch's CPU allocations, 0 when it cannot (already on, or a
// library's allocator outranks it).
extern "C" int aclcap_fence_on(int fill) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_on) return 0;
  c10::Allocator* current = c10::GetCPUAllocator();
  if (g_default == nullptr) g_default = current;
  if (current != g_default) return 0;
  g_fenced.fill = fill;
  g_overran = false;
  c10::SetCPUAllocator(&g_fenced, kPriority);
  g_on = c10::GetCPUAllocator() == &g_fenced;
  return g_on ? 1 : 0;
}

// Off again: 1 when a block made meanwhile was written outside its bytes (past its end,
// within the alignment's slack, or before its start), else 0.
extern "C" int aclcap_fence_off() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_on) return 0;
  c10::SetCPUAllocator(g_default, kPriority);
  g_on = false;
  for (auto& [data, block] : g_blocks) {
    if (block.watched && !intact(static_cast<char*>(data), block)) g_overran = true;
    block.watched = false;
  }
  return g_overran ? 1 : 0;
}
