#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace asteroid::planner {

/// What crosses a link: a job compresses each kind with its own codec.
enum class traffic {
  activations, ///< forward, to the next stage
  gradients,   ///< backward, to the stage before
  all_reduce,  ///< chunks of a replicated stage's gradient ring
};

/// One device of a cluster as the planner sees it.
struct device_spec {
  std::string name;
  /// Catalog type ("jetson-nano", "jetson-tx2", "xavier-nx", "local", ...).
  std::string type;
  /// Compute speed relative to the profile's device: time = profiled / speed.
  double speed = 1.0;
  /// Memory budget for training on this device.
  int64_t memory_bytes = 0;
  /// "host:port" of the node process, empty for a planning-only cluster.
  std::string endpoint;
  /// Measured seconds per training sample (forward, backward and update) of
  /// a model on this device, by model name (optional; cluster files:
  /// "seconds_per_sample": {"efficientnet-b1": 0.032}). Emulations use it to
  /// give the device an absolute speed (`absolute_speeds`) instead of one
  /// relative to the fastest device; the catalog has the paper's figures.
  std::map<std::string, double> seconds_per_sample;
};

/// Devices plus the links between them.
///
/// `bandwidth_Bps[i][j]` is bytes per second from device i to j and
/// `latency_s[i][j]` the one-way latency; both are square with the size of
/// `devices`. The diagonal is unused.
struct cluster {
  std::string name;
  std::vector<device_spec> devices;
  std::vector<std::vector<double>> bandwidth_Bps;
  std::vector<std::vector<double>> latency_s;
  /// How many times slower than profiled each device computes when a plan
  /// uses more than one device of the cluster. 1 for devices with hardware of
  /// their own; above 1 for devices emulated side by side on one machine,
  /// which share its cores, caches and memory bandwidth (throughput_bench
  /// measures it; see docs/benchmarks.md). The planners price multi-device
  /// plans with it.
  double co_location_slowdown = 1.0;
  /// Bytes on the wire per float32 byte of the activations (forward) and
  /// gradients (backward) that cross stage boundaries: 1 uncompressed, 0.5
  /// for fp16 or bf16, 0.25 for int8 (a job's "compression",
  /// kernels/wire_codec.hpp). Every planner prices those transfers with them.
  double activation_wire_ratio = 1.0;
  double gradient_wire_ratio = 1.0;
  /// The same for the chunks of a replicated stage's gradient all-reduce.
  double all_reduce_wire_ratio = 1.0;
  /// The ratios above apply to the links slower than this (bytes per
  /// second); faster links carry float32 (a job's "compression":
  /// {"below_mbps"}). 0: to every link. Compressing a fast link costs
  /// encode and decode time and saves little, so a job that mixes Wi-Fi
  /// and wired links compresses only the slow ones.
  double compress_below_Bps = 0.0;
  /// True when the two directions of a link carry their transfers at once
  /// (switched Ethernet; the data plane sends each direction on a
  /// connection of its own): a stage boundary is then busy max(activations,
  /// gradients) per micro-batch, not their sum. False, the default, prices a
  /// link whose directions take turns, as on a shared Wi-Fi medium: never
  /// faster than the full-duplex pricing of the same plan.
  bool full_duplex_links = false;

  int size() const { return static_cast<int>(devices.size()); }
  double bandwidth(int from, int to) const { return bandwidth_Bps[from][to]; }
  double latency(int from, int to) const { return latency_s[from][to]; }
  /// The ratio above for `t`: what a compressed link carries.
  double compressed_ratio(traffic t) const;
  /// True when a link of `link_Bps` carries the ratios above.
  bool compresses(double link_Bps) const {
    return compress_below_Bps <= 0.0 || link_Bps < compress_below_Bps;
  }
  /// Bytes on the wire per float32 byte of `t`, on a link of `link_Bps`.
  double wire_ratio_at(double link_Bps, traffic t) const;
  /// True when the link between `a` and `b` is compressed: both ways when
  /// either way is slower than compress_below_Bps, so that both ends agree.
  bool compressed(int a, int b) const {
    return compresses(std::min(bandwidth(a, b), bandwidth(b, a)));
  }
  /// The wire ratio of `t` on the link from `from` to `to`.
  double wire_ratio(int from, int to, traffic t) const;
  /// Float32 bytes of `t` the link moves per second: its bandwidth over its
  /// wire ratio. Every planner prices transfers with it.
  double payload_rate(int from, int to, traffic t) const {
    return bandwidth(from, to) / wire_ratio(from, to, t);
  }

  /// True when every link between two distinct devices has one bandwidth and
  /// one latency: devices of one speed and budget are then interchangeable.
  bool uniform_links() const;

  /// Builds the full matrices from one uniform link rate (bits per second).
  static cluster uniform(std::string name, std::vector<device_spec> devices,
                         double link_bps, double latency_s = 0.0);
};

} // namespace asteroid::planner
