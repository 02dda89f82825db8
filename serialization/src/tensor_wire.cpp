#include "asteroid/serialization/tensor_wire.hpp"

#include "tensor_record.hpp"

#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

namespace asteroid::serialization {

namespace {

constexpr std::array<char, 4> tensor_magic{'A', 'S', 'T', 'T'};
constexpr std::array<char, 4> list_magic{'A', 'S', 'T', 'L'};

// Fixed part of a tensor record: magic, version, dtype, ndim, byte count.
constexpr std::size_t tensor_fixed_bytes = 4 + 2 + 1 + 1 + 8;
// Smallest possible list entry: empty name plus a 0-dim record header.
constexpr std::size_t min_entry_bytes = 4 + tensor_fixed_bytes;
// Names are parameter paths; anything longer is garbage.
constexpr std::uint32_t max_name_bytes = 4096;

struct dtype_entry {
  std::uint8_t code;
  torch::Dtype dtype;
};

// Codes are part of the format: never renumber, only append.
constexpr std::array<dtype_entry, 12> dtype_table{{
  {1, torch::kFloat32},
  {2, torch::kFloat64},
  {3, torch::kFloat16},
  {4, torch::kBFloat16},
  {5, torch::kInt64},
  {6, torch::kInt32},
  {7, torch::kInt16},
  {8, torch::kInt8},
  {9, torch::kUInt8},
  {10, torch::kBool},
  {11, torch::kComplexFloat},
  {12, torch::kComplexDouble},
}};

std::string shape_string(const std::vector<std::int64_t>& dims) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < dims.size(); ++i)
    os << (i ? ", " : "") << dims[i];
  os << ']';
  return os.str();
}

int floor_log2(std::uint64_t x) {
  int k = -1;
  while (x) {
    x >>= 1;
    ++k;
  }
  return k;
}

// Returns the element count of `dims`, or throws when it is absurd. Zero-sized
// dimensions are treated as 1 for the limit: a [0, 2^62] tensor has no
// elements but its strides would overflow.
std::int64_t checked_numel(const std::vector<std::int64_t>& dims) {
  std::uint64_t extent = 1;
  bool has_zero = false;
  bool overflow = false;
  for (auto d : dims) {
    if (d == 0) {
      has_zero = true;
      continue;
    }
    auto ud = static_cast<std::uint64_t>(d);
    if (extent > std::numeric_limits<std::uint64_t>::max() / ud) {
      overflow = true;
      break;
    }
    extent *= ud;
  }
  std::string where = has_zero ? " in its non-empty dimensions" : "";
  if (overflow)
    throw wire_error("absurd shape " + shape_string(dims) + ": more than 2^64 elements"
                     + where);
  if (extent >= static_cast<std::uint64_t>(absurd_elements)) {
    int k = floor_log2(extent);
    std::string count = (extent == (std::uint64_t{1} << k))
                          ? "2^" + std::to_string(k)
                          : std::to_string(extent) + " (over 2^" + std::to_string(k) + ")";
    throw wire_error("absurd shape " + shape_string(dims) + ": " + count + " elements" + where
                     + ", limit is below 2^40");
  }
  return has_zero ? 0 : static_cast<std::int64_t>(extent);
}

void check_magic(detail::wire_reader& r, const std::array<char, 4>& magic, const char* what) {
  auto at = r.offset();
  std::array<char, 4> got{};
  r.read_bytes(got.data(), got.size(), what);
  if (got != magic) {
    char hex[16];
    std::uint32_t v;
    std::memcpy(&v, got.data(), 4);
    std::snprintf(hex, sizeof hex, "0x%08x", v);
    throw wire_error(std::string("bad magic: expected '") + std::string(magic.data(), 4)
                     + "', got " + hex + " at offset " + std::to_string(at));
  }
}

void check_version(detail::wire_reader& r) {
  auto v = r.read<std::uint16_t>("format version");
  if (v != wire_version)
    throw wire_error("unsupported version " + std::to_string(v) + " (this build reads version "
                     + std::to_string(wire_version) + ")");
}

// Copies a tensor to a contiguous, CPU, conj/neg-resolved form (a CUDA
// tensor through a pinned buffer).
torch::Tensor host_contiguous(const torch::Tensor& t) {
  if (!t.defined())
    throw wire_error("cannot encode an undefined tensor");
  if (t.layout() != torch::kStrided)
    throw wire_error("cannot encode a non-strided (sparse or mkldnn) tensor");
  auto c = t.detach();
  if (c.device().is_cuda()) {
    // Through page-locked memory (LibTorch's caching host allocator): the
    // copy is a DMA transfer, and the buffer is reused for the next one.
    auto host = torch::empty(c.sizes(), c.options().device(torch::kCPU).pinned_memory(true));
    host.copy_(c);
    c = host;
  } else if (!c.device().is_cpu()) {
    c = c.to(torch::kCPU);
  }
  c = c.resolve_conj().resolve_neg();
  return c.contiguous();
}

void throw_trailing(std::size_t extra, std::size_t at) {
  throw wire_error("trailing garbage: " + std::to_string(extra) + " bytes after the record at offset "
                   + std::to_string(at));
}

} // namespace

std::uint8_t dtype_code(torch::Dtype dtype) {
  for (const auto& e : dtype_table)
    if (e.dtype == dtype)
      return e.code;
  throw wire_error(std::string("unsupported dtype ") + c10::toString(dtype));
}

torch::Dtype dtype_from_code(std::uint8_t code) {
  for (const auto& e : dtype_table)
    if (e.code == code)
      return e.dtype;
  throw wire_error("unknown dtype code " + std::to_string(code));
}

torch::Tensor host_copy(const torch::Tensor& t) {
  return t.is_cuda() ? t.detach().to(torch::kCPU) : t.detach().clone();
}

torch::Tensor host_tensor(const torch::Tensor& t, tensor_capture how) {
  if (how == tensor_capture::share && !t.is_cuda())
    return t.detach();
  return host_copy(t);
}

namespace detail {

void write_tensor_record(wire_writer& w, const torch::Tensor& t) {
  if (!t.defined())
    throw wire_error("cannot encode an undefined tensor");
  auto code = dtype_code(t.scalar_type());
  if (static_cast<std::size_t>(t.dim()) > max_dims)
    throw wire_error("cannot encode a tensor with " + std::to_string(t.dim())
                     + " dimensions (max " + std::to_string(max_dims) + ")");
  auto c = host_contiguous(t);
  w.write_bytes(tensor_magic.data(), tensor_magic.size());
  w.write(wire_version);
  w.write(code);
  w.write(static_cast<std::uint8_t>(c.dim()));
  for (auto d : c.sizes())
    w.write(static_cast<std::int64_t>(d));
  auto nbytes = c.nbytes();
  w.write(static_cast<std::uint64_t>(nbytes));
  w.write_bytes(c.data_ptr(), nbytes);
}

torch::Tensor read_tensor_record(wire_reader& r, torch::Tensor* into, bool must_end) {
  check_magic(r, tensor_magic, "tensor magic");
  check_version(r);
  auto dtype = dtype_from_code(r.read<std::uint8_t>("dtype code"));
  auto ndim = r.read<std::uint8_t>("dimension count");
  if (ndim > max_dims)
    throw wire_error("too many dimensions: " + std::to_string(ndim) + " (max "
                     + std::to_string(max_dims) + ")");
  r.need(8 * std::size_t{ndim}, "shape");
  std::vector<std::int64_t> dims(ndim);
  for (auto& d : dims) {
    d = r.read<std::int64_t>("shape");
    if (d < 0)
      throw wire_error("negative dimension " + std::to_string(d) + " in shape");
  }
  auto numel = checked_numel(dims);
  auto elem = c10::elementSize(dtype);
  auto expected = static_cast<std::uint64_t>(numel) * elem; // < 2^44, no overflow
  auto nbytes = r.read<std::uint64_t>("payload size");
  if (nbytes != expected)
    throw wire_error("inconsistent payload size: header says " + std::to_string(nbytes)
                     + " bytes, shape " + shape_string(dims) + " of " + c10::toString(dtype)
                     + " needs " + std::to_string(expected));
  // Checked before allocating: a forged shape cannot make us allocate more
  // than the sender actually sent.
  r.need(nbytes, "tensor payload");
  if (must_end && r.remaining() != nbytes)
    throw_trailing(r.remaining() - nbytes, r.offset() + nbytes);
  if (dtype == torch::kBool) {
    // Any byte other than 0/1 in a bool tensor is undefined behaviour in ATen.
    auto p = r.peek(nbytes, "tensor payload");
    for (std::size_t i = 0; i < nbytes; ++i)
      if (static_cast<unsigned char>(p[i]) > 1)
        throw wire_error("invalid bool value " + std::to_string(static_cast<unsigned char>(p[i]))
                         + " at element " + std::to_string(i));
  }
  if (into) {
    if (!into->defined() || into->scalar_type() != dtype || into->sizes() != at::IntArrayRef(dims))
      throw wire_error("received " + shape_string(dims) + " " + c10::toString(dtype)
                       + " but the destination is "
                       + (into->defined() ? c10::str(into->sizes()) + " "
                                              + c10::toString(into->scalar_type())
                                          : std::string("undefined")));
    if (into->is_contiguous() && into->device().is_cpu()) {
      r.read_bytes(into->data_ptr(), nbytes, "tensor payload");
      return *into;
    }
  }
  torch::Tensor t;
  try {
    t = torch::empty(dims, torch::TensorOptions().dtype(dtype));
  } catch (const c10::Error& e) {
    throw wire_error("cannot allocate shape " + shape_string(dims) + ": " + e.what_without_backtrace());
  }
  r.read_bytes(t.data_ptr(), nbytes, "tensor payload");
  if (into) {
    torch::NoGradGuard no_grad;
    into->copy_(t);
    return *into;
  }
  return t;
}

void write_named_record(wire_writer& w, const named_tensors& tensors) {
  if (tensors.size() > std::numeric_limits<std::uint32_t>::max())
    throw wire_error("cannot encode more than 2^32 tensors in one list");
  w.write_bytes(list_magic.data(), list_magic.size());
  w.write(wire_version);
  w.write(static_cast<std::uint32_t>(tensors.size()));
  for (const auto& [name, t] : tensors) {
    if (name.size() > max_name_bytes)
      throw wire_error("tensor name of " + std::to_string(name.size()) + " bytes (max "
                       + std::to_string(max_name_bytes) + ")");
    w.write(static_cast<std::uint32_t>(name.size()));
    w.write_bytes(name.data(), name.size());
    write_tensor_record(w, t);
  }
}

named_tensors read_named_record(wire_reader& r) {
  check_magic(r, list_magic, "tensor list magic");
  check_version(r);
  auto count = r.read<std::uint32_t>("tensor count");
  if (count > r.remaining() / min_entry_bytes)
    throw wire_error("absurd tensor count " + std::to_string(count) + " for "
                     + std::to_string(r.remaining()) + " remaining bytes");
  named_tensors out;
  out.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    auto len = r.read<std::uint32_t>("tensor name length");
    if (len > max_name_bytes)
      throw wire_error("tensor name of " + std::to_string(len) + " bytes (max "
                       + std::to_string(max_name_bytes) + ") in entry " + std::to_string(i));
    std::string name(len, '\0');
    r.read_bytes(name.data(), len, "tensor name");
    auto t = read_tensor_record(r);
    out.emplace_back(std::move(name), std::move(t));
  }
  return out;
}

} // namespace detail

std::size_t encoded_size(const torch::Tensor& t) {
  if (!t.defined())
    throw wire_error("cannot encode an undefined tensor");
  return tensor_fixed_bytes + 8 * static_cast<std::size_t>(t.dim())
         + static_cast<std::size_t>(t.numel()) * t.element_size();
}

void append_tensor(std::string& out, const torch::Tensor& t) {
  out.reserve(out.size() + encoded_size(t));
  detail::wire_writer w(out);
  detail::write_tensor_record(w, t);
}

std::string encode_tensor(const torch::Tensor& t) {
  std::string out;
  append_tensor(out, t);
  return out;
}

torch::Tensor read_tensor(std::string_view bytes, std::size_t& offset) {
  if (offset > bytes.size())
    throw wire_error("offset " + std::to_string(offset) + " past the end of "
                     + std::to_string(bytes.size()) + " bytes");
  detail::wire_reader r(bytes.substr(offset), offset);
  auto t = detail::read_tensor_record(r);
  offset += r.consumed();
  return t;
}

void decode_tensor_into(std::string_view bytes, torch::Tensor& dst) {
  detail::wire_reader r(bytes);
  // must_end: trailing bytes are detected before anything is written to dst.
  detail::read_tensor_record(r, &dst, /*must_end=*/true);
}

torch::Tensor decode_tensor(std::string_view bytes) {
  std::size_t offset = 0;
  auto t = read_tensor(bytes, offset);
  if (offset != bytes.size())
    throw_trailing(bytes.size() - offset, offset);
  return t;
}

void append_tensors(std::string& out, const named_tensors& tensors) {
  std::size_t total = 4 + 2 + 4;
  for (const auto& [name, t] : tensors)
    total += 4 + name.size() + encoded_size(t);
  out.reserve(out.size() + total);
  detail::wire_writer w(out);
  detail::write_named_record(w, tensors);
}

std::string encode_tensors(const named_tensors& tensors) {
  std::string out;
  append_tensors(out, tensors);
  return out;
}

named_tensors read_tensors(std::string_view bytes, std::size_t& offset) {
  if (offset > bytes.size())
    throw wire_error("offset " + std::to_string(offset) + " past the end of "
                     + std::to_string(bytes.size()) + " bytes");
  detail::wire_reader r(bytes.substr(offset), offset);
  auto out = detail::read_named_record(r);
  offset += r.consumed();
  return out;
}

named_tensors decode_tensors(std::string_view bytes) {
  std::size_t offset = 0;
  auto out = read_tensors(bytes, offset);
  if (offset != bytes.size())
    throw_trailing(bytes.size() - offset, offset);
  return out;
}

} // namespace asteroid::serialization
