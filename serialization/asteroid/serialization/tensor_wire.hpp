#pragma once

/// \file
/// Tensor wire format: how tensors travel between Asteroid processes.
///
/// Tensors never go through CAF's own float serialization (it corrupts NaN,
/// denormals and hangs on inf in 0.17); they travel as these byte strings.
///
/// One tensor record (version 1), all integers in host byte order, which must
/// be little-endian (checked at compile time; every target we run on is):
///
///     offset  size     field
///     0       4        magic "ASTT"
///     4       2        u16 format version (1)
///     6       1        u8 dtype code (see dtype_code(); stable across releases)
///     7       1        u8 ndim (<= max_dims)
///     8       8*ndim   i64 dims (each >= 0)
///     8+8*nd  8        u64 payload byte count (= numel * element size)
///     16+8*nd n        raw element bytes, row-major (C-contiguous)
///
/// A named list: magic "ASTL", u16 version, u32 count, then per entry a u32
/// name length, the name bytes and one tensor record.
///
/// Encoding copies non-contiguous, conjugated or CUDA tensors to a contiguous
/// CPU tensor first. Decoding always yields a contiguous CPU tensor. Values are
/// copied bit for bit, so NaN payloads, infinities and denormals survive.

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace asteroid::serialization {

/// A list of tensors with names, in order (model or optimizer state).
using named_tensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// Current version written by the encoders; decoders accept only this one.
inline constexpr std::uint16_t wire_version = 1;

/// Largest number of dimensions a decoder accepts.
inline constexpr std::size_t max_dims = 16;

/// Smallest element count a decoder rejects as absurd (2^40).
inline constexpr std::int64_t absurd_elements = std::int64_t{1} << 40;

/// Returns the stable wire code of `dtype`; throws wire_error if unsupported.
///
/// Supported: float32, float64, float16, bfloat16, int64, int32, int16, int8,
/// uint8, bool, complex64, complex128.
std::uint8_t dtype_code(torch::Dtype dtype);

/// Returns the dtype for a wire code; throws "unknown dtype code N".
torch::Dtype dtype_from_code(std::uint8_t code);

/// A copy of `t` that nothing else writes to, in host memory: a clone of a
/// CPU tensor, a device-to-host copy of a GPU one. What a captured state
/// (weights, optimizer buffers) is made of: it goes to the wire or a file,
/// and a copy on a GPU would hold it there twice until it is encoded.
torch::Tensor host_copy(const torch::Tensor& t);

/// How a captured state holds its tensors.
enum class tensor_capture {
  /// host_copy: nothing else writes to them; a state that is kept, or
  /// encoded later.
  copy,
  /// The tensors themselves (a GPU one still copied to the host): for a
  /// state encoded at once on the thread that updates them, which then
  /// saves a pass over every byte (a replica's snapshot after each step).
  share,
};

/// `t` as `how` captures it.
torch::Tensor host_tensor(const torch::Tensor& t, tensor_capture how);

/// Returns the exact number of bytes encode_tensor() produces for `t`.
std::size_t encoded_size(const torch::Tensor& t);

/// Encodes one tensor as a self-describing byte string.
std::string encode_tensor(const torch::Tensor& t);

/// Appends the encoding of `t` to `out`, growing it at most once.
void append_tensor(std::string& out, const torch::Tensor& t);

/// Decodes exactly one tensor; trailing bytes are an error.
torch::Tensor decode_tensor(std::string_view bytes);

/// Decodes exactly one tensor into an existing tensor of the same dtype and
/// shape (any device, any strides), e.g. a parameter or gradient buffer.
///
/// Skips the allocation (and, for a fresh buffer, the page faults) that
/// dominate decode_tensor() for large tensors. Throws wire_error naming both
/// shapes on a mismatch; `dst` is untouched on any error.
void decode_tensor_into(std::string_view bytes, torch::Tensor& dst);

/// Decodes one tensor starting at `offset` and advances `offset` past it.
///
/// Lets a receiver walk a buffer holding several records back to back.
torch::Tensor read_tensor(std::string_view bytes, std::size_t& offset);

/// Encodes a list of named tensors.
std::string encode_tensors(const named_tensors& tensors);

/// Appends the encoding of a named list to `out`.
void append_tensors(std::string& out, const named_tensors& tensors);

/// Decodes exactly one named list; trailing bytes are an error.
named_tensors decode_tensors(std::string_view bytes);

/// Decodes one named list starting at `offset` and advances `offset` past it.
named_tensors read_tensors(std::string_view bytes, std::size_t& offset);

} // namespace asteroid::serialization
