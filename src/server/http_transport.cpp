#include "server/http_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace tessera {
namespace {

thread_local ConnectionState* current_state = nullptr;

struct StateScope {
  explicit StateScope(ConnectionState* state) : previous(current_state) { current_state = state; }
  ~StateScope() { current_state = previous; }
  ConnectionState* previous;
};

// poll(2) on one descriptor: its revents, 0 on timeout, -1 on error. `ms` < 0 waits forever.
int Poll(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    return r <= 0 ? r : p.revents;
  }
}

int Millis(time_t seconds, time_t micros) { return static_cast<int>(seconds * 1000 + micros / 1000); }

void Address(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// A socket read through a 4 KiB buffer (httplib's line reader asks for one byte at a time),
// with the read and write timeouts. A read that times out marks the request's state.
class SocketStream final : public httplib::Stream {
 public:
  SocketStream(int fd, int read_ms, int write_ms) : fd_(fd), read_ms_(read_ms), write_ms_(write_ms) {}

  bool buffered() const { return begin_ < end_; }
  bool is_readable() const override { return buffered() || Poll(fd_, POLLIN, read_ms_) > 0; }
  bool is_writable() const override {
    const int r = Poll(fd_, POLLOUT, write_ms_);
    return r > 0 && !(r & (POLLERR | POLLHUP | POLLNVAL));
  }
  ssize_t read(char* ptr, size_t size) override {
    if (!buffered()) {
      const int ready = Poll(fd_, POLLIN, read_ms_);
      if (ready == 0 && current_state) current_state->read_timed_out = true;
      if (ready <= 0) return -1;
      ssize_t got;
      do got = ::recv(fd_, buffer_, sizeof(buffer_), 0);
      while (got < 0 && errno == EINTR);
      if (got == 0 && current_state) current_state->peer_finished = true;
      if (got <= 0) return got;
      begin_ = 0;
      end_ = static_cast<size_t>(got);
    }
    const size_t take = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, take);
    begin_ += take;
    return static_cast<ssize_t>(take);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t sent;
    do sent = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    return sent;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { Address(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Address(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  int fd_, read_ms_, write_ms_;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
};

// One buffer in, the replies out; the input ends where the client would half-close.
class BufferStream final : public httplib::Stream {
 public:
  explicit BufferStream(std::string_view input) : input_(input) {}
  bool is_readable() const override { return pos_ < input_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    if (pos_ >= input_.size()) {
      if (current_state) current_state->peer_finished = true;
      return 0;
    }
    const size_t take = std::min(size, input_.size() - pos_);
    std::memcpy(ptr, input_.data() + pos_, take);
    pos_ += take;
    return static_cast<ssize_t>(take);
  }
  ssize_t write(const char* ptr, size_t size) override {
    output_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 1; }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 2; }
  socket_t socket() const override { return INVALID_SOCKET; }
  bool exhausted() const { return pos_ >= input_.size(); }
  std::string& output() { return output_; }

 private:
  std::string_view input_;
  size_t pos_ = 0;
  std::string output_;
};

// Closes after sending FIN, first reading (and dropping) what the client still sends for up to
// 2 s or 1 MiB: closing with unread bytes would send a reset, and the client could lose the
// reply it has not read yet.
void LingeringClose(int fd) {
  ::shutdown(fd, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  char sink[4096];
  for (size_t drained = 0; drained < (size_t{1} << 20);) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || Poll(fd, POLLIN, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::recv(fd, sink, sizeof(sink), 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace

ConnectionState* ConnectionState::Current() { return current_state; }

void ConnectionState::CloseAfterReply(const httplib::Request& req) {
  if (current_state) current_state->close_after_reply = true;
  // httplib writes "Connection: close" (instead of Keep-Alive) when the request asked for it.
  // Its Request is a local of process_request, not a const object, so this write is defined.
  auto& headers = const_cast<httplib::Request&>(req).headers;
  headers.erase("Connection");
  headers.emplace("Connection", "close");
}

bool ConnectionState::PeerHungUp() const {
  if (fd < 0 || peer_finished) return true;
  const int r = Poll(fd, POLLRDHUP, 0);
  return r < 0 || (r & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

std::string FramingError(const httplib::Request& req) {
  const size_t lengths = req.get_header_value_count("Content-Length");
  const bool chunked = req.has_header("Transfer-Encoding");
  if (chunked && lengths > 0) return "the request has both Transfer-Encoding and Content-Length";
  if (chunked) {
    for (size_t i = 0; i < req.get_header_value_count("Transfer-Encoding"); ++i) {
      std::string coding = req.get_header_value("Transfer-Encoding", i);
      for (char& c : coding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (coding != "chunked") return "Transfer-Encoding '" + coding.substr(0, 40) + "' is not supported (only chunked)";
    }
  }
  std::string first;
  for (size_t i = 0; i < lengths; ++i) {
    const std::string value = req.get_header_value("Content-Length", i);
    const bool digits = !value.empty() && value.size() <= 18 &&
                        value.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) return "Content-Length '" + value.substr(0, 40) + "' is not a length";
    if (i == 0) first = value;
    else if (value != first) return "the request has two different Content-Length values";
  }
  return {};
}

void HttpTransport::SetBacklog(int backlog) {
  if (::listen(svr_sock_, backlog) != 0) Fail("serve: cannot set the listen backlog to ", backlog, ": ", std::strerror(errno));
}

bool HttpTransport::process_and_close_socket(socket_t sock) {
  SocketStream stream(sock, Millis(read_timeout_sec_, read_timeout_usec_), Millis(write_timeout_sec_, write_timeout_usec_));
  bool ok = true, linger = false;
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    if (svr_sock_ == INVALID_SOCKET) break;  // stopping
    if (!stream.buffered() && Poll(sock, POLLIN, static_cast<int>(keep_alive_timeout_sec_ * 1000)) <= 0) break;
    ConnectionState state;
    state.fd = sock;
    StateScope scope(&state);
    bool closed = false;
    ok = process_request(stream, left == 1, closed, nullptr);
    if (state.close_after_reply) {
      linger = true;
      break;
    }
    if (!ok || closed) break;
  }
  if (linger) {
    LingeringClose(sock);
  } else {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  return ok;
}

std::string HttpTransport::ProcessBytes(std::string_view input) {
  BufferStream stream(input);
  for (size_t left = keep_alive_max_count_; left > 0 && !stream.exhausted(); --left) {
    ConnectionState state;
    StateScope scope(&state);
    bool closed = false;
    const bool ok = process_request(stream, left == 1, closed, nullptr);
    if (state.close_after_reply || !ok || closed) break;
  }
  return std::move(stream.output());
}

}  // namespace tessera
