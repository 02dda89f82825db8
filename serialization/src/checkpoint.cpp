#include "asteroid/serialization/checkpoint.hpp"

#include "checksum.hpp"
#include "tensor_record.hpp"
#include "wire_io.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace asteroid::serialization {

namespace {

constexpr char checkpoint_magic[4] = {'A', 'S', 'T', 'C'};
constexpr std::size_t header_bytes = 4 + 2 + 2 + 8 + 8;

std::string hex64(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

checkpoint_error error(const std::string& source, const std::string& problem) {
  return checkpoint_error("checkpoint '" + source + "': " + problem);
}

std::string errno_text(int err) {
  return std::strerror(err);
}

void write_body(detail::wire_writer& w, const checkpoint& c) {
  w.write_string(c.model_name);
  w.write_string(c.model_options_json);
  w.write_string(c.metadata);
  w.write(c.step);
  w.write(c.epoch);
  w.write(c.data_position);
  w.write_string(c.rng_state);
  detail::write_named_record(w, c.model_state);
  w.write_string(c.optimizer.kind);
  detail::write_named_record(w, c.optimizer.tensors);
  if (c.optimizer.hyper_params.size() > std::numeric_limits<std::uint32_t>::max())
    throw wire_error("too many optimizer hyper-parameters");
  w.write(static_cast<std::uint32_t>(c.optimizer.hyper_params.size()));
  for (const auto& [name, value] : c.optimizer.hyper_params) {
    w.write_string(name);
    w.write(value);
  }
}

checkpoint read_body(detail::wire_reader& r) {
  checkpoint c;
  c.model_name = r.read_string("model name");
  c.model_options_json = r.read_string("model options");
  c.metadata = r.read_string("metadata");
  c.step = r.read<std::int64_t>("step");
  c.epoch = r.read<std::int64_t>("epoch");
  c.data_position = r.read<std::int64_t>("data position");
  c.rng_state = r.read_string("rng state");
  c.model_state = detail::read_named_record(r);
  c.optimizer.kind = r.read_string("optimizer kind");
  c.optimizer.tensors = detail::read_named_record(r);
  auto n = r.read<std::uint32_t>("hyper-parameter count");
  // Each entry takes at least a length and a value.
  if (n > r.remaining() / 16)
    throw wire_error("absurd hyper-parameter count " + std::to_string(n));
  for (std::uint32_t i = 0; i < n; ++i) {
    auto name = r.read_string("hyper-parameter name");
    auto value = r.read<double>("hyper-parameter value");
    c.optimizer.hyper_params.emplace_back(std::move(name), value);
  }
  return c;
}

// Reads a whole file; distinguishes "missing" from other failures.
std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT)
      throw error(path, "missing (no such file)");
    throw error(path, "cannot open: " + errno_text(err));
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw error(path, "not a regular file");
  }
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    auto n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw error(path, "read failed: " + errno_text(err));
    }
    if (n == 0)
      break; // shrank while reading: decode reports truncation
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  bytes.resize(done);
  return bytes;
}

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    auto n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw errno;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

} // namespace

std::string encode_checkpoint(const checkpoint& ckpt) {
  std::string out(header_bytes, '\0');
  {
    detail::wire_writer w(out);
    write_body(w, ckpt);
  }
  std::string_view body(out.data() + header_bytes, out.size() - header_bytes);
  std::uint64_t body_len = body.size();
  std::uint64_t sum = detail::checksum64(body);
  std::memcpy(out.data(), checkpoint_magic, 4);
  std::memcpy(out.data() + 4, &checkpoint_version, 2);
  std::memset(out.data() + 6, 0, 2);
  std::memcpy(out.data() + 8, &body_len, 8);
  std::memcpy(out.data() + 16, &sum, 8);
  return out;
}

checkpoint decode_checkpoint(std::string_view bytes, const std::string& source) {
  auto truncated = [&](std::size_t need) {
    return error(source, "truncated: need " + std::to_string(need) + " bytes, have "
                           + std::to_string(bytes.size()));
  };
  if (bytes.size() < 4)
    throw truncated(header_bytes);
  if (std::memcmp(bytes.data(), checkpoint_magic, 4) != 0)
    throw error(source, "bad magic (not an Asteroid checkpoint)");
  if (bytes.size() < header_bytes)
    throw truncated(header_bytes);
  std::uint16_t version, flags;
  std::uint64_t body_len, stored_sum;
  std::memcpy(&version, bytes.data() + 4, 2);
  std::memcpy(&flags, bytes.data() + 6, 2);
  std::memcpy(&body_len, bytes.data() + 8, 8);
  std::memcpy(&stored_sum, bytes.data() + 16, 8);
  if (version != checkpoint_version)
    throw error(source, "unsupported version " + std::to_string(version)
                          + " (this build reads version "
                          + std::to_string(checkpoint_version) + ")");
  if (flags != 0)
    throw error(source, "unsupported flags " + std::to_string(flags));
  auto available = bytes.size() - header_bytes;
  if (body_len > available)
    throw truncated(body_len > std::numeric_limits<std::size_t>::max() - header_bytes
                      ? std::numeric_limits<std::size_t>::max()
                      : header_bytes + body_len);
  if (body_len < available)
    throw error(source, "corrupted: " + std::to_string(available - body_len)
                          + " unexpected bytes after the body");
  auto body = bytes.substr(header_bytes);
  auto sum = detail::checksum64(body);
  if (sum != stored_sum)
    throw error(source, "corrupted: checksum mismatch (stored " + hex64(stored_sum)
                          + ", computed " + hex64(sum) + ")");
  try {
    detail::wire_reader r(body, header_bytes);
    auto c = read_body(r);
    if (r.remaining() != 0)
      throw wire_error(std::to_string(r.remaining()) + " bytes left after the body");
    return c;
  } catch (const wire_error& e) {
    // The checksum matched, so the writer itself produced this.
    throw error(source, std::string("corrupted: ") + e.what());
  }
}

void save_checkpoint(const std::string& path, const checkpoint& ckpt) {
  std::string bytes;
  try {
    bytes = encode_checkpoint(ckpt);
  } catch (const wire_error& e) {
    throw error(path, std::string("cannot encode: ") + e.what());
  }
  auto tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw error(path, "cannot create '" + tmp + "': " + errno_text(errno));
  try {
    write_all(fd, bytes);
    if (::fsync(fd) != 0)
      throw errno;
  } catch (int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw error(path, "cannot write '" + tmp + "': " + errno_text(err));
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw error(path, "cannot write '" + tmp + "': " + errno_text(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw error(path, "cannot rename '" + tmp + "' into place: " + errno_text(err));
  }
  // Persist the rename itself; failure here only risks durability, not
  // integrity, so it is not an error.
  auto dir = std::filesystem::path(path).parent_path();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

checkpoint load_checkpoint(const std::string& path) {
  return decode_checkpoint(read_file(path), path);
}

} // namespace asteroid::serialization
