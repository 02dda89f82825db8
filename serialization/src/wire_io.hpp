#pragma once

// Private: cereal binary archives over an appendable std::string and over a
// borrowed byte view. The view side checks every length against the bytes
// that are left *before* reading or allocating, so hostile input can only
// ever produce a wire_error.

#include "asteroid/serialization/wire_error.hpp"

#include <cereal/archives/binary.hpp>

#include <cstddef>
#include <cstdint>
#include <istream>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>
#include <type_traits>

namespace asteroid::serialization::detail {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the Asteroid wire format stores host-order (little-endian) values");

/// Stream buffer that appends everything written to a caller's string.
class append_streambuf : public std::streambuf {
public:
  explicit append_streambuf(std::string& out) : out_(out) {}

protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_.append(s, static_cast<std::size_t>(n));
    return n;
  }
  int_type overflow(int_type ch) override {
    if (!traits_type::eq_int_type(ch, traits_type::eof()))
      out_.push_back(traits_type::to_char_type(ch));
    return traits_type::not_eof(ch);
  }

private:
  std::string& out_;
};

/// Stream buffer reading a borrowed byte range without copying it first.
class view_streambuf : public std::streambuf {
public:
  explicit view_streambuf(std::string_view bytes) {
    // The get area is never written through; std::streambuf just wants char*.
    auto* p = const_cast<char*>(bytes.data());
    setg(p, p, p + bytes.size());
  }
  std::size_t remaining() const { return static_cast<std::size_t>(egptr() - gptr()); }
  std::size_t consumed() const { return static_cast<std::size_t>(gptr() - eback()); }
  const char* next() const { return gptr(); }
};

/// Appends cereal binary values to a string.
class wire_writer {
public:
  explicit wire_writer(std::string& out) : buf_(out), os_(&buf_), ar_(os_) {}

  template <class T>
  void write(const T& value) {
    static_assert(std::is_arithmetic_v<T>);
    ar_(value);
  }
  void write_bytes(const void* data, std::size_t n) {
    if (n > 0)
      ar_(cereal::binary_data(data, n));
  }
  /// Writes a u64 length followed by the raw bytes.
  void write_string(std::string_view s) {
    write(static_cast<std::uint64_t>(s.size()));
    write_bytes(s.data(), s.size());
  }

private:
  append_streambuf buf_;
  std::ostream os_;
  cereal::BinaryOutputArchive ar_;
};

/// Reads cereal binary values from a byte view, bounds-checked.
class wire_reader {
public:
  /// Reads `bytes`; `base_offset` is only used to report absolute offsets.
  explicit wire_reader(std::string_view bytes, std::size_t base_offset = 0)
    : buf_(bytes), is_(&buf_), ar_(is_), base_(base_offset) {}

  std::size_t remaining() const { return buf_.remaining(); }
  std::size_t consumed() const { return buf_.consumed(); }
  std::size_t offset() const { return base_ + buf_.consumed(); }

  /// Throws "truncated: need N bytes, have M (<what> at offset K)".
  void need(std::size_t n, const char* what) const {
    if (n > remaining())
      throw wire_error("truncated: need " + std::to_string(n) + " bytes, have "
                       + std::to_string(remaining()) + " (" + what + " at offset "
                       + std::to_string(offset()) + ")");
  }

  /// Returns the next `n` bytes without consuming them.
  std::string_view peek(std::size_t n, const char* what) const {
    need(n, what);
    return std::string_view(buf_.next(), n);
  }

  template <class T>
  T read(const char* what) {
    static_assert(std::is_arithmetic_v<T>);
    need(sizeof(T), what);
    T value{};
    ar_(value);
    return value;
  }
  void read_bytes(void* dst, std::size_t n, const char* what) {
    need(n, what);
    if (n > 0)
      ar_(cereal::binary_data(dst, n));
  }
  /// Reads a u64 length and that many bytes; checks the length first.
  std::string read_string(const char* what) {
    auto n = read<std::uint64_t>(what);
    need(n, what);
    std::string s(static_cast<std::size_t>(n), '\0');
    read_bytes(s.data(), s.size(), what);
    return s;
  }

private:
  view_streambuf buf_;
  std::istream is_;
  cereal::BinaryInputArchive ar_;
  std::size_t base_;
};

} // namespace asteroid::serialization::detail
