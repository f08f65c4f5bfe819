#include "proto/grpc_tls.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/text_file.h"

namespace falcon::proto {
namespace {

// Certificates and keys are small; anything larger is not one.
constexpr uint64_t kMaxPemBytes = 1 << 20;

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what) {
  absl::StatusOr<std::string> text = common::ReadTextFile(path, kMaxPemBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS ", what, " '", path, "': ", text.status().message()));
  }
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("TLS ", what, " '", path, "': not a PEM file"));
  }
  return text;
}

struct Pems {
  std::string cert, key, ca;
};

absl::StatusOr<Pems> ReadAll(const TlsFiles& files) {
  Pems pems;
  for (auto [path, what, out] : {std::make_tuple(&files.cert, "certificate", &pems.cert),
                                 std::make_tuple(&files.key, "key", &pems.key),
                                 std::make_tuple(&files.ca, "CA", &pems.ca)}) {
    absl::StatusOr<std::string> text = ReadPem(*path, what);
    if (!text.ok()) return text.status();
    *out = std::move(*text);
  }
  return pems;
}

}  // namespace

absl::Status CheckTlsSettings(const TlsFiles& files, bool plaintext, absl::string_view prefix) {
  const std::string cert = absl::StrCat(prefix, "tls_cert");
  const std::string key = absl::StrCat(prefix, "tls_key");
  const std::string ca = absl::StrCat(prefix, "tls_ca");
  if (plaintext) {
    if (!files.plaintext()) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "plaintext: not with ", cert, ", ", key, ", ", ca));
    }
    return absl::OkStatus();
  }
  if (files.plaintext()) {
    return absl::InvalidArgumentError(absl::StrCat(cert, ", ", key, ", ", ca, ": required (or ",
                                                   prefix, "plaintext for a local demo)"));
  }
  for (auto [value, name] : {std::make_pair(&files.cert, &cert), std::make_pair(&files.key, &key),
                             std::make_pair(&files.ca, &ca)}) {
    if (value->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(*name, ": required with the other TLS files"));
    }
  }
  absl::StatusOr<Pems> pems = ReadAll(files);
  return pems.status();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files, absl::Duration refresh) {
  if (files.plaintext()) return grpc::InsecureServerCredentials();
  absl::StatusOr<Pems> pems = ReadAll(files);  // Clear errors at start.
  if (!pems.ok()) return pems.status();
  const int64_t seconds = std::max<int64_t>(1, absl::ToInt64Seconds(refresh));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca,
      static_cast<unsigned int>(std::min<int64_t>(seconds, 24 * 3600)));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files) {
  if (files.plaintext()) return grpc::InsecureChannelCredentials();
  absl::StatusOr<Pems> pems = ReadAll(files);
  if (!pems.ok()) return pems.status();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = pems->ca;
  options.pem_private_key = pems->key;
  options.pem_cert_chain = pems->cert;
  return grpc::SslCredentials(options);
}

std::vector<std::string> PeerIdentities(const grpc::AuthContext& context) {
  std::vector<std::string> names;
  if (!context.IsPeerAuthenticated()) return names;
  for (const grpc::string_ref& san : context.FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
    names.emplace_back(san.data(), san.size());
  }
  if (names.empty()) {
    for (const grpc::string_ref& cn : context.FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      names.emplace_back(cn.data(), cn.size());
    }
  }
  return names;
}

std::string PeerRole(const grpc::AuthContext& context) {
  if (!context.IsPeerAuthenticated()) return "";
  // RFC 2253 form, e.g. "CN=node-a,OU=node,O=falcon" (names from falcon-pki.sh hold no commas).
  for (const grpc::string_ref& subject :
       context.FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
    for (absl::string_view part :
         absl::StrSplit(absl::string_view(subject.data(), subject.size()), ',')) {
      part = absl::StripAsciiWhitespace(part);
      if (absl::StartsWith(part, "OU=")) return std::string(part.substr(3));
    }
  }
  return "";
}

}  // namespace falcon::proto
