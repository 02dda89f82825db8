// The data plane's TLS session (actors/src/data_plane/tls_session.hpp) on a
// socket pair in this thread: records are gathered before they are sent, so
// a write that reports all its bytes must have put every record on the
// socket, even when the socket fills while the last ones go out.
#include "data_plane/tls_session.hpp"
#include "tls_context.hpp"

#include "asteroid/actors/credentials.hpp"

#include <catch2/catch.hpp>
#include <openssl/ssl.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

using namespace asteroid;
using actors::detail::tls_session;
namespace fs = std::filesystem;

namespace {

struct ctx_deleter {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using ctx_ptr = std::unique_ptr<SSL_CTX, ctx_deleter>;

ctx_ptr context_of(const actors::credentials& c) {
  ctx_ptr ctx{SSL_CTX_new(TLS_method())};
  REQUIRE(ctx);
  actors::detail::configure_tls(ctx.get(), c);
  return ctx;
}

/// Everything the reader's socket holds now, decrypted and appended to `to`.
void drain(tls_session& reader, std::string& to) {
  std::string piece(size_t{1} << 20, '\0');
  for (;;) {
    auto r = reader.read(asio::buffer(piece));
    REQUIRE(!r.ec);
    if (r.then != tls_session::result::next::done || r.bytes == 0)
      return;
    to.append(piece.data(), r.bytes);
  }
}

} // namespace

TEST_CASE("tls session: a write that reports its bytes has sent every gathered "
          "record, also when the socket filled at the end") {
  auto dir = fs::path(ASTEROID_TEST_TMP) / ("tls-session-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  actors::make_cluster_keys(dir.string(), {"a", "b"});
  auto a = context_of(actors::credentials::from_folder((dir / "a").string()));
  auto b = context_of(actors::credentials::from_folder((dir / "b").string()));
  fs::remove_all(dir);

  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  // Tiny socket buffers (the kernel's least): the socket takes a few KiB
  // at a time, far less than the records gathered before a send.
  int small = 4096;
  for (int fd : fds) {
    REQUIRE(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  }
  {
    tls_session writer{a.get()}, reader{b.get()};
    writer.attach(fds[0], false);
    reader.attach(fds[1], true);
    bool writer_done = false, reader_done = false;
    for (int i = 0; i < 100 && !(writer_done && reader_done); ++i) {
      if (!writer_done) {
        auto r = writer.handshake();
        REQUIRE(!r.ec);
        writer_done = r.then == tls_session::result::next::done;
      }
      if (!reader_done) {
        auto r = reader.handshake();
        REQUIRE(!r.ec);
        reader_done = r.then == tls_session::result::next::done;
      }
    }
    REQUIRE((writer_done && reader_done));

    // Frames smaller than the gather buffer (each write encrypts all of its
    // frame before it sends anything, so the last send of every write meets
    // a socket with room for a few KiB) and one larger (records split
    // between the gather buffer and OpenSSL's pending write).
    const std::vector<size_t> sizes{size_t{200} << 10, (size_t{1} << 20) + 3,
                                    size_t{200} << 10};
    std::string stream;
    for (size_t frame = 0; frame < sizes.size(); ++frame)
      for (size_t i = 0; i < sizes[frame]; ++i)
        stream.push_back(static_cast<char>((i * 131 + frame) % 251));
    // The reader takes what the socket holds only when the writer waits.
    std::string got;
    int waits = 0;
    size_t offset = 0;
    for (size_t size : sizes) {
      const char* at = stream.data() + offset;
      size_t sent = 0;
      while (sent < size && waits < 100000) {
        auto r = writer.write({asio::buffer(at + sent, size - sent)});
        REQUIRE(!r.ec);
        if (r.then == tls_session::result::next::done) {
          sent += r.bytes;
          continue;
        }
        CHECK(r.then == tls_session::result::next::wait_writable);
        ++waits;
        drain(reader, got);
      }
      REQUIRE(sent == size);
      offset += size;
    }
    CHECK(waits > 0);
    // The writer is not called again: what it reported sent must arrive.
    drain(reader, got);
    CHECK(got.size() == stream.size());
    CHECK(got == stream);
  }
  ::close(fds[0]);
  ::close(fds[1]);
}
