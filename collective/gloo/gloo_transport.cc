#include "collective/gloo/gloo_transport.h"

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <exception>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace falcon::collective::gloo {
namespace {

// Which side an exception came from, for the error's peer and wording.
absl::StatusCode CodeFor(const std::exception& e) {
  const absl::string_view what = e.what();
  if (absl::StrContains(what, "Timed out") || absl::StrContains(what, "timeout")) {
    return absl::StatusCode::kDeadlineExceeded;
  }
  return absl::StatusCode::kUnavailable;
}

}  // namespace

GlooTransport::GlooTransport(std::shared_ptr<::gloo::Context> context, std::vector<int32_t> members,
                             const CommRuntime* runtime, uint64_t slot,
                             std::chrono::milliseconds timeout, ErrorFn error)
    : context_(std::move(context)),
      members_(std::move(members)),
      runtime_(runtime),
      slot_(slot),
      timeout_(timeout),
      error_(std::move(error)) {}

int GlooTransport::rank() const { return context_->rank; }
int GlooTransport::size() const { return context_->size; }

void GlooTransport::Shape(int peer, size_t bytes) const {
  const fault::LinkShaper* shaper = runtime_->link_shaper();
  if (shaper == nullptr) return;
  shaper->Apply(members_[context_->rank], members_[peer], bytes, runtime_->iteration());
}

absl::Status GlooTransport::Send(int peer, const void* data, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  try {
    auto buf = context_->createUnboundBuffer(const_cast<void*>(data), bytes);
    Shape(peer, bytes);
    buf->send(peer, slot_);
    buf->waitSend(timeout_);
  } catch (const std::exception& e) {
    const absl::StatusCode code = CodeFor(e);
    return error_(
        code, peer,
        absl::StrCat(code == absl::StatusCode::kDeadlineExceeded ? "send made no progress: "
                                                                 : "connection lost during send: ",
                     e.what()));
  }
  return absl::OkStatus();
}

absl::Status GlooTransport::Recv(int peer, void* data, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  try {
    auto buf = context_->createUnboundBuffer(data, bytes);
    buf->recv(peer, slot_);
    buf->waitRecv(timeout_);
  } catch (const std::exception& e) {
    const absl::StatusCode code = CodeFor(e);
    return error_(code, peer,
                  absl::StrCat(code == absl::StatusCode::kDeadlineExceeded
                                   ? "no data received within the timeout: "
                                   : "connection lost during recv: ",
                               e.what()));
  }
  return absl::OkStatus();
}

absl::Status GlooTransport::SendRecv(int dst, const void* send, size_t send_bytes, int src,
                                     void* recv, size_t recv_bytes) {
  int waiting_on = src;
  bool sending = false;
  try {
    std::unique_ptr<::gloo::transport::UnboundBuffer> in;
    std::unique_ptr<::gloo::transport::UnboundBuffer> out;
    if (recv_bytes > 0) {
      in = context_->createUnboundBuffer(recv, recv_bytes);
      in->recv(src, slot_);
    }
    if (send_bytes > 0) {
      out = context_->createUnboundBuffer(const_cast<void*>(send), send_bytes);
      Shape(dst, send_bytes);
      out->send(dst, slot_);
    }
    if (in != nullptr) in->waitRecv(timeout_);
    if (out != nullptr) {
      waiting_on = dst;
      sending = true;
      out->waitSend(timeout_);
    }
  } catch (const std::exception& e) {
    const absl::StatusCode code = CodeFor(e);
    return error_(
        code, waiting_on,
        absl::StrCat(
            code == absl::StatusCode::kDeadlineExceeded
                ? (sending ? "send made no progress: " : "no data received within the timeout: ")
                : (sending ? "connection lost during send: " : "connection lost during recv: "),
            e.what()));
  }
  return absl::OkStatus();
}

}  // namespace falcon::collective::gloo
