// The connection side of `tessera serve` under cpp-httplib's request parser and routes.
//
// httplib (Debian's 0.11.4) parses requests and dispatches routes well, but its own connection
// loop gives a handler no way to close the connection after a reply, and its socket stream takes
// a client that half-closed (shut down its sending side after a complete request) for one that
// is gone. A server behind a proxy must close after a framing error (RFC 9112 §6.3, §11.2:
// otherwise the rest of a smuggled body is read as the next request), and must answer a client
// that half-closes. So HttpTransport keeps httplib's parser and routes (Server::process_request)
// and owns the rest: the keep-alive loop per accepted socket, a buffered socket stream with
// timeouts, a lingering close (our reply is not lost to a reset while the client's unread body
// is still arriving), the listen backlog, and per-request connection state that handlers reach
// through ConnectionState::Current().
//
// ProcessBytes runs one buffer through the same parser and routes as one connection would: the
// fuzz target (tests/fuzz/) and the framing tests use it without a socket.
#pragma once

#include <httplib.h>

#include <string>
#include <string_view>

namespace tessera {

// The state of the connection whose request this thread is handling.
struct ConnectionState {
  bool close_after_reply = false;  // set by a handler: close once the reply is written
  bool read_timed_out = false;     // a read of the request ran past the read timeout
  bool peer_finished = false;      // the client shut down its sending side (or went away)
  int fd = -1;                     // the socket; -1 for ProcessBytes

  // Whether the client has shut down its sending side: a half-close after a complete request,
  // or a client that is gone (only a write can tell the two apart). Always true in ProcessBytes.
  bool PeerHungUp() const;
  // nullptr outside a request handler.
  static ConnectionState* Current();
  // Marks the connection of `req` (the request this thread is handling) to close once its reply
  // is written, and the reply to say "Connection: close".
  static void CloseAfterReply(const httplib::Request& req);
};

// Why a request's framing headers are refused (RFC 9112 §6.1-§6.3), or "" when they are fine:
// Transfer-Encoding together with Content-Length, Content-Length values that differ, a
// Content-Length that is not a decimal number of at most 18 digits (negative, overflowing, a
// list), a Transfer-Encoding other than chunked. Each is answered with 400 and the connection
// closed: behind a proxy that reads the framing otherwise, the rest would be smuggled in as
// another request.
std::string FramingError(const httplib::Request& req);

class HttpTransport : public httplib::Server {
 public:
  HttpTransport() = default;
  // The accept queue of the bound listening socket (httplib listens with a backlog of 5); call
  // after binding. Throws tessera::Error when the socket refuses.
  void SetBacklog(int backlog);
  // Every byte of `input` as one connection's requests, the client's sending side closed after
  // them; returns everything the server wrote (the replies, in order).
  std::string ProcessBytes(std::string_view input);

 private:
  // The keep-alive loop of one accepted socket (replaces httplib's; it is virtual there).
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace tessera
