#pragma once
/// \file
/// Devices: the actor a node process publishes, and the node process itself.
#include "asteroid/actors/fwd.hpp"
#include "asteroid/actors/protocol.hpp"

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

namespace asteroid::actors {

/// What a device offers; reported to the supervisor as JSON (`ast_caps`).
struct device_options {
  std::string name = "node";
  int64_t memory_bytes = int64_t{4} << 30;
  /// LibTorch intra-op threads of this process (>= 1; `run_node` refuses less).
  int threads = 1;
  /// Emulated slowdown factor (>= 1): compute is padded to factor × measured.
  double slowdown = 1.0;
  /// Where replicas compute: "cpu", "cuda", "cuda:N" or "auto" as given;
  /// `run_node` resolves it (kernels/compute_device.hpp) and refuses a CUDA
  /// device this build or machine lacks.
  std::string compute_device = "cpu";
  /// "host:port" it is published at (empty for an in-process device).
  std::string endpoint;
  /// The interface, outside the node's network namespace, that carries all
  /// its traffic (the testbed's host-side veth); empty: none. The supervisor
  /// takes it down and up for `cut` and `heal` faults (link_switch.hpp).
  std::string link_interface;
};

/// Spawns a device actor (detached, so it answers pings while it builds
/// replicas). It never dies on a bad message: it logs and goes on.
/// With `dp`, snapshots from other nodes arrive on the data plane, probes
/// can use it, and replicas deployed here send and receive tensors on it.
device_actor spawn_device(caf::actor_system& sys, const device_options& opts,
                          std::shared_ptr<data_plane> dp = {});

/// Options of `asteroid node`.
struct node_options {
  device_options device;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  net_options net;
  /// Tensors between nodes on the data plane (data_plane.hpp); off: in CAF
  /// messages.
  bool data_plane = true;
  uint16_t data_port = 0; ///< 0: any free port (reported in `ast_caps`)
  /// > 0: outgoing data-plane bytes paced to this rate (emulated link).
  double link_rate_Bps = 0;
  /// Without credentials (`net.tls`) a node listens only on a loopback
  /// address, unless this is set; then it warns at every start.
  bool insecure = false;
};

/// Whether `host` is a loopback address (127.0.0.0/8, ::1, "localhost"),
/// reachable only from this machine.
bool is_loopback_host(const std::string& host);

/// Runs a node process until SIGINT/SIGTERM: publishes a device actor at
/// host:port and prints "asteroid node NAME listening on HOST:PORT" once it
/// listens. Returns the process exit code; throws std::runtime_error when the
/// port cannot be opened, std::invalid_argument on bad options (among them a
/// non-loopback host without credentials or `insecure`).
int run_node(const node_options& opts);

} // namespace asteroid::actors

#include <vector>

namespace asteroid::actors {

/// Node processes on this machine (`asteroid cluster`, tests): each is
/// `EXE node --listen 127.0.0.1:PORT ...` with stdout and stderr in
/// `log_dir/NAME.log`. The destructor stops them (SIGTERM, then SIGKILL).
/// A log folder the cluster made itself (no `log_dir` given) is removed with
/// it, unless `keep_logs` is set, `keep_logs()` was called, or the cluster
/// is destroyed by an exception: then the logs are what explains a failure,
/// and stderr says where they are.
class local_cluster {
public:
  struct options {
    std::string exe;                 ///< the `asteroid` program
    int nodes = 4;
    uint16_t base_port = 27000;      ///< node i listens on base_port + i
    std::vector<double> slowdowns;   ///< one per node, or one for all, or none
    std::vector<int64_t> memory;     ///< bytes, same convention
    /// `--device` of each node, same convention (none: the CPU).
    std::vector<std::string> devices;
    int threads = 1;
    /// Mbit/s, same convention as `slowdowns`: > 0 paces a node's outgoing
    /// tensors to that rate (emulated links on loopback, `asteroid node
    /// --link-rate`); 0 or none: unpaced. One slow node among fast ones
    /// emulates a device on a slower network.
    std::vector<double> link_rates_mbps;
    /// Throw-away credentials of a new cluster (a fresh folder in $TMPDIR,
    /// or /tmp, removed with the cluster): the nodes accept only TLS with them, and
    /// the program that drives them connects with `credentials_folder()`.
    bool tls = false;
    std::string log_dir;             ///< empty: a fresh folder in $TMPDIR or /tmp
    bool keep_logs = false;          ///< keep that fresh folder at exit
    std::chrono::milliseconds start_timeout{20000};
  };
  /// Starts the nodes and waits until each one listens; throws
  /// std::runtime_error naming the node (and its log) that did not start.
  explicit local_cluster(options opts);
  ~local_cluster();
  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;
  /// "127.0.0.1:PORT" of every node.
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  const std::vector<int>& pids() const { return pids_; }
  std::string log_path(int i) const;
  const std::string& log_dir() const { return opts_.log_dir; }
  /// With `options::tls`: the member folder a job on these nodes connects
  /// with (`job_spec::credentials`, `--credentials`); otherwise empty.
  std::string credentials_folder() const;
  /// Keeps a log folder the cluster made itself: its owner saw something
  /// fail that the nodes' logs may explain.
  void keep_logs();
  /// Stops every node still running and removes the throw-away
  /// credentials; idempotent.
  void stop();

private:
  void stop_nodes();
  void remove_own_logs();
  static void forget_paths(std::vector<int>& tickets);

  options opts_;
  std::string keys_dir_; ///< the throw-away credentials; empty: none
  /// What a quit from a signal handler removes (exit_cleanup.hpp): the
  /// throw-away credentials, and a log folder of our own with its logs.
  std::vector<int> keys_tickets_, log_tickets_;
  bool owns_log_dir_ = false;
  /// Exceptions in flight at construction: more at destruction means the
  /// cluster is being unwound by a failure.
  int uncaught_at_start_ = std::uncaught_exceptions();
  std::vector<int> pids_;
  std::vector<std::string> endpoints_;
};

} // namespace asteroid::actors
