#pragma once
/// \file
/// How many threads a process computes with on the CPU, for LibTorch and for
/// the BLAS under it.
///
/// Why a function of its own: LibTorch 1.13 from Debian calls whatever
/// `libblas.so.3` the machine's alternatives name. The reference BLAS (what
/// `libtorch-dev` alone brings) is single-threaded and slow; OpenBLAS is
/// many times faster, and its OpenMP build follows LibTorch's thread count
/// in every thread that applied it (OpenMP's count is per thread: replicas
/// and inference stages call `at::init_num_threads()` on their own threads;
/// a thread that did not runs its first products on every core until a
/// LibTorch op applies it), but its pthread build (`libopenblas0-pthread`,
/// the one Debian's recommendation of `libopenblas0` installs) starts a pool
/// as large as the machine and ignores `torch::set_num_threads`: four nodes
/// on one machine, each told to compute on one thread, would then each run
/// matrix products on every core. Setting OpenBLAS's count as well keeps
/// `--threads` true whichever build is loaded.
#include <string>

namespace asteroid::kernels {

/// Sets LibTorch's intra-op threads to `n` (> 0) and, when the process's
/// BLAS is OpenBLAS, OpenBLAS's threads too. Throws std::invalid_argument
/// for n < 1.
void set_cpu_threads(int n);

/// The BLAS this process's matrix products go to, as a person would name
/// it: OpenBLAS's own configuration string ("OpenBLAS 0.3.21 ..."), or
/// "reference BLAS, or another one that is not OpenBLAS".
std::string cpu_blas_name();

/// OpenBLAS's thread count, or -1 when the process's BLAS is not OpenBLAS.
int openblas_threads();

} // namespace asteroid::kernels
