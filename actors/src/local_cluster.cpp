// Local clusters: N `asteroid node` processes on loopback, owned by this
// process (asteroid cluster, tests, benchmarks).
#include "asteroid/actors/node.hpp"

#include "asteroid/actors/credentials.hpp"
#include "asteroid/actors/exit_cleanup.hpp"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace asteroid::actors {

namespace {

template <class T>
T pick(const std::vector<T>& v, int i, T fallback) {
  if (v.empty())
    return fallback;
  return v.size() == 1 ? v[0] : v.at(static_cast<size_t>(i));
}

/// A fresh folder `NAME-XXXXXX` (mode 0700) in $TMPDIR, or /tmp without it;
/// throws std::runtime_error naming the folder and why, for `what`.
std::string make_temp_folder(const std::string& name, const std::string& what) {
  const char* root = std::getenv("TMPDIR");
  std::string path = (root != nullptr && *root != '\0') ? root : "/tmp";
  path += "/" + name + "-XXXXXX";
  const std::string pattern = path; // mkdtemp fills in the X's even when it fails
  if (::mkdtemp(path.data()) == nullptr)
    throw std::runtime_error("cluster: cannot create " + what + " " + pattern + ": "
                             + std::strerror(errno));
  return path;
}

} // namespace

std::string local_cluster::credentials_folder() const {
  return keys_dir_.empty() ? std::string() : keys_dir_ + "/job";
}

std::string local_cluster::log_path(int i) const {
  return opts_.log_dir + "/node" + std::to_string(i) + ".log";
}

local_cluster::local_cluster(options opts) : opts_(std::move(opts)) {
  if (opts_.nodes < 1)
    throw std::invalid_argument("cluster: need at least one node");
  for (auto [v, what] : {std::pair{&opts_.slowdowns, "slowdown"},
                         std::pair{&opts_.link_rates_mbps, "link rate"}})
    if (v->size() > 1 && static_cast<int>(v->size()) != opts_.nodes)
      throw std::invalid_argument(std::string("cluster: give one ") + what
                                  + " per node (" + std::to_string(opts_.nodes)
                                  + "), or one for all");
  if (opts_.memory.size() > 1
      && static_cast<int>(opts_.memory.size()) != opts_.nodes)
    throw std::invalid_argument("cluster: give one memory budget per node");
  if (opts_.devices.size() > 1
      && static_cast<int>(opts_.devices.size()) != opts_.nodes)
    throw std::invalid_argument("cluster: give one device per node, or one for all");
  for (double x : opts_.slowdowns)
    if (!(std::isfinite(x) && x >= 1.0))
      throw std::invalid_argument("cluster: --slowdown " + std::to_string(x)
                                  + " is not a finite number >= 1");
  for (double x : opts_.link_rates_mbps)
    if (!(std::isfinite(x) && x >= 0.0))
      throw std::invalid_argument("cluster: --link-rate " + std::to_string(x)
                                  + " is not a finite number >= 0");
  for (auto bytes : opts_.memory)
    if (bytes < 0)
      throw std::invalid_argument("cluster: a memory budget must not be negative");
  if (opts_.threads < 1)
    throw std::invalid_argument("cluster: --threads must be >= 1, got "
                                + std::to_string(opts_.threads));
  if (opts_.log_dir.empty()) {
    opts_.log_dir = make_temp_folder("asteroid-cluster", "a log folder");
    owns_log_dir_ = true;
    if (!opts_.keep_logs) {
      log_tickets_.push_back(remember_path_for_exit(opts_.log_dir));
      for (int i = 0; i < opts_.nodes; ++i)
        log_tickets_.push_back(remember_path_for_exit(log_path(i)));
    }
  } else {
    ::mkdir(opts_.log_dir.c_str(), 0755);
  }
  if (opts_.tls) {
    try {
      // mkdtemp: readable by us only
      keys_dir_ = make_temp_folder("asteroid-keys", "a folder for credentials");
    } catch (...) {
      remove_own_logs();
      throw;
    }
    std::vector<std::string> members{"job"};
    for (int i = 0; i < opts_.nodes; ++i)
      members.push_back("node" + std::to_string(i));
    try {
      make_cluster_keys(keys_dir_, members, 2);
      // Nothing signs for a throw-away cluster after this: without its CA
      // key, a folder left behind by a second Ctrl-C or a SIGKILL lets no one
      // make members of it.
      std::filesystem::remove(std::filesystem::path(keys_dir_) / "ca.key");
      // Pre-order (a folder before what it holds), as exit_cleanup wants.
      keys_tickets_.push_back(remember_path_for_exit(keys_dir_));
      for (const auto& entry : std::filesystem::recursive_directory_iterator(keys_dir_))
        keys_tickets_.push_back(remember_path_for_exit(entry.path().string()));
    } catch (...) {
      stop();
      remove_own_logs();
      throw;
    }
  }
  for (int i = 0; i < opts_.nodes; ++i) {
    auto port = static_cast<uint16_t>(opts_.base_port + i);
    std::vector<std::string> args{
      opts_.exe,
      "node",
      "--listen",
      "127.0.0.1:" + std::to_string(port),
      "--name",
      "node" + std::to_string(i),
      "--memory",
      std::to_string(pick(opts_.memory, i, int64_t{4} << 30)),
      "--threads",
      std::to_string(opts_.threads),
      "--slowdown",
      std::to_string(pick(opts_.slowdowns, i, 1.0)),
      "--device",
      pick(opts_.devices, i, std::string("cpu"))};
    if (!keys_dir_.empty()) {
      args.push_back("--credentials");
      args.push_back(keys_dir_ + "/node" + std::to_string(i));
    }
    if (const double rate = pick(opts_.link_rates_mbps, i, 0.0); rate > 0) {
      args.push_back("--link-rate");
      args.push_back(std::to_string(rate));
    }
    auto log = log_path(i);
    // The wait below looks for "listening on" in this file: a previous
    // cluster's log on the same port must not be read before the node
    // truncates it.
    ::unlink(log.c_str());
    auto parent = ::getpid();
    auto pid = ::fork();
    if (pid < 0) {
      stop();
      throw std::runtime_error("cluster: fork failed");
    }
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::setpgid(0, 0); // a Ctrl-C on the terminal goes to the parent only
      // If the owner dies without running our destructor (SIGKILL, crash),
      // its nodes must not outlive it holding their ports.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        std::_Exit(1);
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    pids_.push_back(pid);
    endpoints_.push_back("127.0.0.1:" + std::to_string(port));
  }
  // Wait until each node says it listens.
  auto deadline = std::chrono::steady_clock::now() + opts_.start_timeout;
  for (int i = 0; i < opts_.nodes; ++i) {
    for (;;) {
      std::ifstream in{log_path(i)};
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find("listening on") != std::string::npos)
        break;
      int status = 0;
      if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
        pids_[i] = -1;
        stop();
        throw std::runtime_error("cluster: node" + std::to_string(i)
                                 + " exited at start; see " + log_path(i)
                                 + ":\n" + text.str());
      }
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        throw std::runtime_error("cluster: node" + std::to_string(i)
                                 + " did not start in time; see "
                                 + log_path(i));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void local_cluster::stop_nodes() {
  for (auto pid : pids_)
    if (pid > 0)
      ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (auto& pid : pids_) {
    if (pid <= 0)
      continue;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = -1;
  }
}

void local_cluster::stop() {
  stop_nodes();
  // Always: they are worth nothing once the nodes are gone, and a log kept
  // for a failure does not need them.
  if (!keys_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(keys_dir_, ignored);
    keys_dir_.clear();
  }
  forget_paths(keys_tickets_);
}

void local_cluster::keep_logs() {
  opts_.keep_logs = true;
  forget_paths(log_tickets_);
}

void local_cluster::forget_paths(std::vector<int>& tickets) {
  for (int ticket : tickets)
    forget_path(ticket);
  tickets.clear();
}

void local_cluster::remove_own_logs() {
  forget_paths(log_tickets_);
  if (!owns_log_dir_)
    return;
  if (opts_.keep_logs || std::uncaught_exceptions() > uncaught_at_start_) {
    std::fprintf(stderr, "cluster: node logs kept in %s\n", opts_.log_dir.c_str());
    return;
  }
  // Only what the cluster wrote: anything else found there stays, and so does
  // the folder then (rmdir fails on a non-empty folder).
  for (int i = 0; i < opts_.nodes; ++i)
    ::unlink(log_path(i).c_str());
  ::rmdir(opts_.log_dir.c_str());
}

local_cluster::~local_cluster() {
  stop();
  remove_own_logs();
}

} // namespace asteroid::actors
