#include "asteroid/kernels/cpu_threads.hpp"

#include <ATen/Parallel.h>

#include <dlfcn.h>

#include <stdexcept>

namespace asteroid::kernels {

namespace {

// Looked up at run time, not linked: the program links `libblas.so.3`, and
// which library answers to that name is the machine's choice, not ours.
template <class F>
F openblas_symbol(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
}

} // namespace

void set_cpu_threads(int n) {
  if (n < 1)
    throw std::invalid_argument("CPU threads must be at least 1, got "
                                + std::to_string(n));
  at::set_num_threads(n);
  if (auto set = openblas_symbol<void (*)(int)>("openblas_set_num_threads"))
    set(n);
}

std::string cpu_blas_name() {
  if (auto config = openblas_symbol<char* (*)()>("openblas_get_config"))
    if (const char* text = config())
      return text;
  return "reference BLAS, or another one that is not OpenBLAS";
}

int openblas_threads() {
  if (auto get = openblas_symbol<int (*)()>("openblas_get_num_threads"))
    return get();
  return -1;
}

} // namespace asteroid::kernels
