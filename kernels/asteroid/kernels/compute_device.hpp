#pragma once
/// \file
/// Where a node computes: the CPU or one CUDA device. Tensors cross between
/// that device and host memory only where they meet the network (the
/// replica's receive path, the wire encoding), and this file is what they
/// cross with.
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace asteroid::kernels {

/// Whether the LibTorch this program was built against has CUDA.
bool libtorch_has_cuda();

/// Resolves a `--device` value: "cpu", "cuda" (device 0), "cuda:N", or
/// "auto" (CUDA device 0 when one can be used, else the CPU). Throws
/// std::invalid_argument naming the problem: a malformed name, a CUDA device
/// asked of a CPU-only LibTorch, or one this machine does not have.
torch::Device resolve_compute_device(const std::string& name);

/// A device as a node reports it in its capabilities.
struct device_info {
  std::string device = "cpu";  ///< "cpu", "cuda:0"
  std::string name = "cpu";    ///< the GPU's name ("NVIDIA H200")
  int64_t memory_bytes = 0;    ///< the GPU's total memory; 0 for the CPU
  /// library_workspace_bytes(d): what the GPU libraries keep per thread.
  int64_t library_workspace_bytes = 0;
};
device_info describe_device(torch::Device d);

/// Bytes the GPU libraries keep allocated on `d` once a thread has run a
/// matrix product and a convolution there, forward and backward: on the
/// H200 machine 64 MiB, which a thread started after the probe's did not
/// add to, as cuBLAS workspaces kept per handle (thread) and stream would
/// behave (docs/jetson.md, "Measured"). No layer profile sees them, so a
/// node adds them once to its replicas' predicted footprint. Measured once
/// per device, on a thread that then ends; 0 on the CPU, and 0 with a
/// warning on stderr when the probe fails (a node still starts). Transient
/// workspaces (cuDNN's, per convolution) are not included.
int64_t library_workspace_bytes(torch::Device d);

/// Waits until the work queued on `d` is done (nothing to wait for on the
/// CPU): a compute time measured on CUDA then includes the kernels, not
/// only their launches.
void synchronize(torch::Device d);

/// The CUDA caching allocator's counts for device `d` since the last
/// `reset_device_memory_peak`: bytes held by tensors now and at their peak,
/// and the most it reserved from the driver. All -1 on the CPU, whose
/// memory the process's resident high-water mark measures instead.
struct device_memory {
  int64_t allocated_now = -1;
  int64_t allocated_peak = -1;
  int64_t reserved_peak = -1;
};
device_memory device_memory_stats(torch::Device d);
void reset_device_memory_peak(torch::Device d);

/// `t` on `d`, as a tensor of its own. A host tensor bound for a CUDA
/// device is staged in pinned memory (LibTorch's caching host allocator)
/// and copied without blocking, ordered on the current stream; one already
/// on `d` is returned as it is.
torch::Tensor to_compute_device(const torch::Tensor& t, torch::Device d);

} // namespace asteroid::kernels
