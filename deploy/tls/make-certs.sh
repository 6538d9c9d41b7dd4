#!/bin/sh
# Development certificates for the compose file's TLS profile (docker-compose --profile tls up):
# a CA, a server certificate for groupcoord-tls/localhost, and client certificates whose CN is the
# principal (User:alice, User:ops). Writes deploy/tls/certs/. Not for production: keys are world-readable
# so the container's non-root user can read the bind mount.
set -eu
cd "$(dirname "$0")"
mkdir -p certs && cd certs
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 365 -subj "/CN=groupcoord-dev-ca"
issue() {  # name subject [extfile-content]
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
  if [ -n "${3:-}" ]; then printf '%s\n' "$3" > "$1.ext"; set -- "$1" "$2" "-extfile $1.ext"; fi
  # shellcheck disable=SC2086
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 -out "$1.pem" ${3:-}
}
issue server "/CN=groupcoord-tls" "subjectAltName=DNS:groupcoord-tls,DNS:localhost,IP:127.0.0.1"
# X.509 v3 (extensions given): without them `openssl x509 -req` makes v1, which the native front end refuses
issue alice "/CN=alice" "extendedKeyUsage=clientAuth"
issue ops "/CN=ops" "extendedKeyUsage=clientAuth"
chmod 644 ./*.key
rm -f ./*.csr ./*.ext ca.srl
echo "certificates in $(pwd)"
