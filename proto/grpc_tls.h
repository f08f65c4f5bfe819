// TLS for Falcon's gRPC TCP endpoints (docs/operations.md#tls): server and channel credentials
// from PEM files, and the identity a peer's certificate proves. The controller serves with mutual
// TLS (every client presents a certificate signed by the cluster CA); agents and falconctl
// present theirs. An empty TlsFiles means plaintext, which binaries allow only with an explicit
// --plaintext flag (and a warning in the log).
#ifndef FALCON_PROTO_GRPC_TLS_H_
#define FALCON_PROTO_GRPC_TLS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace falcon::proto {

// PEM file paths: this side's certificate (chain) and private key, and the CA certificate(s)
// that sign the other side's. All empty: plaintext.
struct TlsFiles {
  std::string cert;
  std::string key;
  std::string ca;

  bool plaintext() const { return cert.empty() && key.empty() && ca.empty(); }
};

// The three settings of a binary: OK when all three are set (and each names a readable file)
// or, with `plaintext`, none is; otherwise kInvalidArgument naming the flags, e.g.
// "--tls_key: required with --tls_cert" or "--tls_cert, --tls_key, --tls_ca: required (or
// --plaintext for a local demo)". `prefix` is "--" for flags, "" for config keys.
absl::Status CheckTlsSettings(const TlsFiles& files, bool plaintext, absl::string_view prefix);

// Server credentials: mutual TLS requiring and verifying a client certificate signed by
// `files.ca`; insecure when `files` is plaintext. The three files are read again every `refresh`
// (at least 1 s): a rotated certificate, key or CA serves new connections from then on, while open
// connections and their streams stay up (replace the files by renaming complete new ones over
// them). Errors: kInvalidArgument naming a file that cannot be read or is not PEM (at start; a bad
// file later keeps the previous credentials, logged by gRPC).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files, absl::Duration refresh = absl::Seconds(60));
// Channel credentials: TLS verifying the server against `files.ca` and presenting `files.cert`;
// insecure when `files` is plaintext. Errors: as MakeServerCredentials.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files);

// The names a peer's verified certificate proves: its subject alternative names (DNS), else its
// common name. Empty for a plaintext peer.
std::vector<std::string> PeerIdentities(const grpc::AuthContext& context);

// The organizational unit (OU) of a peer's verified certificate: the role deploy/pki/falcon-pki.sh
// writes ("node", "controller", "operator", "viewer"); empty without one or for a plaintext peer.
std::string PeerRole(const grpc::AuthContext& context);

}  // namespace falcon::proto

#endif  // FALCON_PROTO_GRPC_TLS_H_
