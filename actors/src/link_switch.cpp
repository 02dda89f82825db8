// The `cut` / `heal` faults: one interface flag, through the same ioctl that
// `ip link set dev X down` ends in, so the supervisor needs no iproute2 at run
// time and gets the kernel's own error.
#include "asteroid/actors/link_switch.hpp"

#include <cerrno>
#include <cstring>

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace asteroid::actors {

std::string set_interface_up(const std::string& name, bool up) {
  auto fail = [&](const char* what) {
    return std::string("cannot set interface '") + name + "' "
           + (up ? "up" : "down") + ": " + what + ": " + std::strerror(errno);
  };
  if (name.empty() || name.size() >= IFNAMSIZ) {
    errno = EINVAL;
    return fail("not an interface name");
  }
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return fail("socket");
  ifreq req{};
  std::memcpy(req.ifr_name, name.c_str(), name.size());
  std::string err;
  if (::ioctl(fd, SIOCGIFFLAGS, &req) != 0) {
    err = fail("reading its flags");
  } else {
    if (up)
      req.ifr_flags = static_cast<short>(req.ifr_flags | IFF_UP);
    else
      req.ifr_flags = static_cast<short>(req.ifr_flags & ~IFF_UP);
    if (::ioctl(fd, SIOCSIFFLAGS, &req) != 0)
      err = fail("writing its flags");
  }
  ::close(fd);
  return err;
}

} // namespace asteroid::actors
