#include "asteroid/training/memory_tracker.hpp"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>

namespace asteroid::training {

namespace {

class counting_allocator final : public c10::Allocator {
public:
  explicit counting_allocator(c10::Allocator* base) : base_(base) {
    // nop
  }

  c10::DataPtr allocate(size_t n) const override {
    auto* rec = new record{base_->allocate(n), static_cast<int64_t>(n), this};
    auto now = current_.fetch_add(rec->size) + rec->size;
    auto peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
      // retry
    }
    void* data = rec->inner.get();
    auto device = rec->inner.device();
    return {data, rec, &release, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return nullptr; // the context owns the inner pointer
  }

  int64_t current() const { return current_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(current_.load()); }

private:
  struct record {
    c10::DataPtr inner;
    int64_t size;
    const counting_allocator* owner;
  };

  static void release(void* ctx) {
    auto* rec = static_cast<record*>(ctx);
    rec->owner->current_.fetch_sub(rec->size);
    delete rec;
  }

  c10::Allocator* base_;
  mutable std::atomic<int64_t> current_{0};
  mutable std::atomic<int64_t> peak_{0};
};

counting_allocator& instance() {
  // Never destroyed: tensors freed during static destruction still call it.
  static auto* alloc = [] {
    auto* a = new counting_allocator(c10::GetCPUAllocator());
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
