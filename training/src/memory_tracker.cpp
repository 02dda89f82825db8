#include "asteroid/training/memory_tracker.hpp"

#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace asteroid::training {

namespace {

// LibTorch 2.3 made Allocator::allocate non-const and added copy_data (for
// Allocator::clone); 1.13 to 2.2 have neither.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define ASTEROID_ALLOCATE_QUALIFIER
#define ASTEROID_ALLOCATOR_COPIES 1
#else
#define ASTEROID_ALLOCATE_QUALIFIER const
#define ASTEROID_ALLOCATOR_COPIES 0
#endif

// Wraps LibTorch's CPU allocator and counts live bytes.
//
// LibTorch's raw interface (raw_allocate, used e.g. by oneDNN convolutions)
// requires the DataPtr's context to be the data pointer itself, so the size
// of each live block is kept in a side table keyed by that pointer.
class counting_allocator final : public c10::Allocator {
public:
  explicit counting_allocator(c10::Allocator* base)
    : base_(base), base_deleter_(base->raw_deleter()) {
    // nop
  }

  c10::DataPtr allocate(size_t n) ASTEROID_ALLOCATE_QUALIFIER override {
    auto inner = base_->allocate(n);
    void* data = inner.get();
    auto device = inner.device();
    if (base_deleter_ == nullptr || inner.get_context() != data || !data)
      return inner; // not raw-compatible (or empty): pass through uncounted
    inner.release_context();
    {
      std::lock_guard<std::mutex> guard{mtx_};
      sizes_[data] = static_cast<int64_t>(n);
    }
    auto now = current_.fetch_add(static_cast<int64_t>(n))
               + static_cast<int64_t>(n);
    auto peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
      // retry
    }
    return {data, data, &release, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return base_deleter_ ? &release : nullptr;
  }

#if ASTEROID_ALLOCATOR_COPIES
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

  int64_t current() const { return current_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(current_.load()); }

  static counting_allocator* self;

private:
  static void release(void* ptr) {
    auto* me = self;
    int64_t size = 0;
    {
      std::lock_guard<std::mutex> guard{me->mtx_};
      auto i = me->sizes_.find(ptr);
      if (i != me->sizes_.end()) {
        size = i->second;
        me->sizes_.erase(i);
      }
    }
    me->current_.fetch_sub(size);
    me->base_deleter_(ptr);
  }

  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
  mutable std::mutex mtx_;
  mutable std::unordered_map<void*, int64_t> sizes_;
  mutable std::atomic<int64_t> current_{0};
  mutable std::atomic<int64_t> peak_{0};
};

counting_allocator* counting_allocator::self = nullptr;

counting_allocator& instance() {
  // Never destroyed: tensors freed during static destruction still call it.
  static auto* alloc = [] {
    auto* a = new counting_allocator(c10::GetCPUAllocator());
    counting_allocator::self = a;
    c10::SetCPUAllocator(a, /*priority=*/100);
    return a;
  }();
  return *alloc;
}

} // namespace

memory_tracker::memory_tracker() {
  instance();
}

int64_t memory_tracker::current_bytes() const {
  return instance().current();
}

int64_t memory_tracker::peak_bytes() const {
  return instance().peak();
}

void memory_tracker::reset_peak() {
  instance().reset_peak();
}

} // namespace asteroid::training
