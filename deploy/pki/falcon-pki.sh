#!/usr/bin/env bash
# Falcon's cluster PKI with openssl (docs/operations.md#tls): one CA per cluster, one certificate
# per node for its agent (the node name in the SAN and CN), one for the controller (its host
# names and addresses in the SAN), and client certificates for falconctl users (CN = the user,
# OU = operator or viewer).
#
# usage: falcon-pki.sh DIR ca                        the cluster CA: DIR/ca.pem, DIR/ca.key
#        falcon-pki.sh DIR node NAME                 an agent's: DIR/NAME.pem, DIR/NAME.key
#        falcon-pki.sh DIR controller NAME [SAN...]  the controller's (SAN entries DNS:x or IP:x;
#                                                    NAME is added as DNS:NAME)
#        falcon-pki.sh DIR client NAME operator|viewer  a falconctl user's
# Options (environment): FALCON_PKI_DAYS (validity, default 825 for certificates, 3650 for the CA).
# Keys are P-256, written mode 0600; an existing file is never overwritten (exit 1 naming it).
# Rotation: make a new certificate under another DIR (or after moving the old files away),
# install it, and restart or reload the daemon that uses it.
set -euo pipefail

die() { echo "falcon-pki: $*" >&2; exit 1; }
usage() { sed -n '7,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[ $# -ge 2 ] || usage
dir=$1 kind=$2
shift 2
command -v openssl >/dev/null || die "openssl not found (Debian: apt-get install openssl)"
mkdir -p "$dir"
umask 077

fresh() { for f in "$@"; do [ ! -e "$f" ] || die "$f exists; move it away first"; done; }
valid_name() {
  [[ "$1" =~ ^[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?$ ]] ||
    die "name '$1': 1 to 253 characters of [A-Za-z0-9._-], starting and ending alphanumeric"
}

# sign NAME SUBJECT EXTENSIONS: a key and a certificate signed by the CA.
sign() {
  local name=$1 subject=$2 ext=$3
  [ -f "$dir/ca.pem" ] && [ -f "$dir/ca.key" ] || die "no CA in $dir (run: $0 $dir ca)"
  fresh "$dir/$name.pem" "$dir/$name.key"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/$name.key" 2>/dev/null
  openssl req -new -key "$dir/$name.key" -subj "$subject" -out "$dir/$name.csr"
  printf '%s\n' "$ext" >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days "${FALCON_PKI_DAYS:-825}" -sha256 -extfile "$dir/$name.ext" \
    -out "$dir/$name.pem" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
  chmod 0644 "$dir/$name.pem"
  echo "$dir/$name.pem $dir/$name.key"
}

case "$kind" in
  ca)
    [ $# -eq 0 ] || usage
    fresh "$dir/ca.pem" "$dir/ca.key"
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$dir/ca.key" -subj "/O=falcon/CN=falcon cluster CA" \
      -days "${FALCON_PKI_DAYS:-3650}" -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$dir/ca.pem"
    chmod 0644 "$dir/ca.pem"
    echo "$dir/ca.pem $dir/ca.key"
    ;;
  node)
    [ $# -eq 1 ] || usage
    valid_name "$1"
    sign "$1" "/O=falcon/OU=node/CN=$1" \
      "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
subjectAltName=DNS:$1"
    ;;
  controller)
    [ $# -ge 1 ] || usage
    valid_name "$1"
    san="DNS:$1"
    name=$1
    shift
    for s in "$@"; do
      [[ "$s" =~ ^(DNS|IP):[A-Za-z0-9.:_-]+$ ]] || die "SAN '$s': DNS:name or IP:address"
      san="$san,$s"
    done
    sign "$name" "/O=falcon/OU=controller/CN=$name" \
      "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san"
    ;;
  client)
    [ $# -eq 2 ] || usage
    valid_name "$1"
    case "$2" in operator | viewer) ;; *) die "role '$2': operator or viewer" ;; esac
    sign "$1" "/O=falcon/OU=$2/CN=$1" \
      "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
    ;;
  *) usage ;;
esac
