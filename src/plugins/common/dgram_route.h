// The channels plugin's routes for datagrams (chan_portmap.cpp): after a restart on other hosts, a
// datagram sent to a bound UDP socket's old address goes to its new one, and one received from its new
// address is reported from the old one (and one a restart queued again from a stand-in sender, because
// its source could not be bound, is reported from that source: chan_udp.cpp). Weak: the signal and vpid plugins' send/receive wrappers link and
// work without the channels plugin (then nothing is translated).
#pragma once
#include <sys/socket.h>

extern "C" bool revive_chan_dgram_to(const struct sockaddr* to, socklen_t len, struct sockaddr_storage* out)
    __attribute__((weak, visibility("hidden")));
// flags: the receive call's (MSG_PEEK: a datagram read again later is still translated then).
extern "C" void revive_chan_dgram_from(struct sockaddr* from, socklen_t len, int flags)
    __attribute__((weak, visibility("hidden")));

namespace revive::plugins {
// `to` for a send: its new address when it names a UDP socket's old one (moved holds it), else itself.
inline const struct sockaddr* dgram_to(const struct sockaddr* to, socklen_t len, struct sockaddr_storage* moved) {
  return to && revive_chan_dgram_to && revive_chan_dgram_to(to, len, moved) ? reinterpret_cast<const sockaddr*>(moved)
                                                                            : to;
}
// A received datagram's source, named as the program knows it: cap, the buffer's size the program gave;
// len, the address's length the kernel reported (more than cap: truncated, left alone); flags, the call's.
inline void dgram_from(struct sockaddr* from, socklen_t cap, socklen_t len, int flags) {
  if (from && len <= cap && revive_chan_dgram_from) revive_chan_dgram_from(from, len, flags);
}
}  // namespace revive::plugins
