#include "ring_all_reduce.hpp"

#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/wire_compression.hpp"
#include "asteroid/kernels/weighted_sum.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "device_clock.hpp"
#include "replica_links.hpp"

#include <stdexcept>

namespace asteroid::actors::detail {

namespace {

/// Elements [begin, end) of chunk `i` (taken mod n) of a gradient of `numel`.
std::pair<int64_t, int64_t> chunk(int64_t numel, int n, int i) {
  i = ((i % n) + n) % n;
  return {numel * i / n, numel * (i + 1) / n};
}

void send_chunk(replica_self* self, int k, int idx) {
  auto& st = self->state;
  auto n = static_cast<int>(st.e->spec.shares.size());
  auto [b, en] = chunk(st.ar_flat.numel(), n, idx);
  auto m = outgoing(self, serialization::tensor_kind::all_reduce);
  m.piece = static_cast<int32_t>(k);
  auto part = st.ar_flat.slice(0, b, en);
  const auto codec = st.e->all_reduce_codec;
  m.payload = encode_wire_payload(part, codec);
  if (k == n - 1 && codec != kernels::wire_codec::none)
    // The first all-gather send: this chunk's sum is complete here, and
    // every other replica will hold it as decoded from these bytes. Keeping
    // the same rounding keeps the group's gradients (and weights) equal.
    part.copy_(decode_wire_payload(m.payload, codec));
  st.bytes["ar " + link_name(st.e->spec.stage, st.e->spec.replica,
                             st.e->spec.stage,
                             (st.e->spec.replica + 1) % n)]
    += static_cast<int64_t>(m.payload.size());
  transmit(self, peer_ring_next, 0, std::move(m));
}

} // namespace

bool all_reduce(replica_self* self) {
  auto& st = self->state;
  auto& e = *st.e;
  auto n = static_cast<int>(e.spec.shares.size());
  auto r = e.spec.replica;
  if (st.ar_k < 0) {
    st.ar_grads.clear();
    for (auto& p : e.params) {
      if (!p.grad().defined())
        p.mutable_grad() = torch::zeros_like(p);
      st.ar_grads.push_back(p.grad());
    }
    if (n == 1)
      return true;
    compute(self, "FLATTEN", [&] {
      // From the second step on, the gradients are views of the bucket the
      // last all-reduce left (below): autograd accumulated into it in
      // place, and there is nothing to copy. A fresh bucket per step paged
      // in 28,095 pages for BERT-small's 115 MB of gradients (above
      // glibc's largest mmap threshold), 30-330 ms of system time per step
      // and replica on the development machine.
      if (st.ar_buckets.size() != 1 || !kernels::aliases(st.ar_buckets[0], st.ar_grads))
        st.ar_buckets = kernels::flatten_into_buckets(st.ar_grads, int64_t{1} << 40);
      // One bucket (one dtype: the usual case) is reduced in place: a copy
      // of it doubled the gradients' memory and page faults every step
      // (230 MB faulted in per step for BERT-small's 28.8 M parameters).
      if (st.ar_buckets.size() == 1) {
        st.ar_flat = st.ar_buckets[0].flat;
      } else {
        std::vector<torch::Tensor> flats;
        for (auto& b : st.ar_buckets)
          flats.push_back(b.flat);
        st.ar_flat = torch::cat(flats);
      }
    });
    if (!st.ring_next)
      throw std::runtime_error("no ring successor for the all-reduce");
    st.ar_k = 0;
    send_chunk(self, 0, r);
  }
  while (st.ar_k < 2 * n - 2) {
    auto key = std::make_pair(st.step, st.ar_k);
    auto i = st.ar_in.find(key);
    if (i == st.ar_in.end())
      return false;
    auto recv = i->second;
    st.ar_in.erase(i);
    auto k = st.ar_k;
    int idx = k < n - 1 ? r - k - 1 : r - (k - (n - 1));
    auto [b, en] = chunk(st.ar_flat.numel(), n, idx);
    auto dst = st.ar_flat.slice(0, b, en);
    if (recv.numel() != dst.numel() || recv.scalar_type() != dst.scalar_type())
      throw std::runtime_error("all-reduce chunk " + std::to_string(k)
                               + " has " + std::to_string(recv.numel())
                               + " elements, expected "
                               + std::to_string(dst.numel()));
    compute(self, "AR k=" + std::to_string(k), [&] {
      // The kernels' accumulate: on a GPU the project's CUDA kernel, on
      // the CPU ATen's add (the same bits as before).
      if (k < n - 1)
        kernels::weighted_sum_(dst, recv.view_as(dst), 1.0);
      else
        dst.copy_(recv.view_as(dst));
    });
    ++st.ar_k;
    if (st.ar_k < 2 * n - 2) {
      auto nk = st.ar_k;
      int send_idx = nk < n - 1 ? r - nk : r + 1 - (nk - (n - 1));
      send_chunk(self, nk, send_idx);
    }
  }
  // Compute like FLATTEN: a slower device copies slower.
  compute(self, "UNFLATTEN", [&] {
    if (st.ar_buckets.size() == 1) {
      // The bucket holds the sums: it becomes the gradients, which the
      // optimizer reads and the next backward accumulates into. Their old
      // tensors go.
      if (!kernels::aliases(st.ar_buckets[0], st.ar_grads)) {
        auto views = kernels::slot_views(st.ar_buckets[0], st.ar_grads);
        for (size_t i = 0; i < views.size(); ++i)
          e.params[i].mutable_grad() = views[i];
      }
      return;
    }
    int64_t at = 0;
    for (auto& b : st.ar_buckets) {
      b.flat.copy_(st.ar_flat.slice(0, at, at + b.flat.numel()));
      at += b.flat.numel();
    }
    kernels::unflatten_from_buckets(st.ar_buckets, st.ar_grads);
    st.ar_buckets.clear();
  });
  st.ar_grads.clear();
  st.ar_flat = torch::Tensor();
  return true;
}

} // namespace asteroid::actors::detail
