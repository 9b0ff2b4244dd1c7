#!/usr/bin/env bash
# Makes a private certificate authority and one server certificate for the NATS servers of
# deploy/nats/nats.conf and deploy/nats-cluster/, for deployments that have no CA of their own.
#
#   bash deploy/make-nats-tls.sh [OUT_DIR]          (default: deploy/nats/tls)
#
#   NATS_TLS_NAMES  extra DNS names or IP addresses of the servers, comma separated
#                   (always included: localhost, 127.0.0.1, ::1, nats, nats-1, nats-2, nats-3)
#   NATS_TLS_DAYS   validity of the server certificate in days (default 825)
#
# Writes OUT_DIR/ca.pem (give it to clients: NATS_TLS_CA), ca-key.pem (keep it offline),
# server-cert.pem and server-key.pem (the servers read them; mode 600). The server certificate
# serves both client connections and cluster routes (extended key usage serverAuth+clientAuth:
# a route dials its peers with it). An existing CA is reused, so re-running renews the server
# certificate without changing what clients trust; delete OUT_DIR to start over.
set -euo pipefail

OUT_DIR="${1:-$(cd "$(dirname "$0")" && pwd)/nats/tls}"
DAYS="${NATS_TLS_DAYS:-825}"
NAMES="localhost,127.0.0.1,::1,nats,nats-1,nats-2,nats-3${NATS_TLS_NAMES:+,$NATS_TLS_NAMES}"

say() { printf 'make-nats-tls: %s\n' "$*"; }
die() { printf 'make-nats-tls: error: %s\n' "$*" >&2; exit 1; }

command -v openssl >/dev/null 2>&1 || die "openssl is required (apt-get install openssl)"
[[ $DAYS =~ ^[0-9]+$ ]] || die "NATS_TLS_DAYS must be a number of days, got '$DAYS'"

mkdir -p "$OUT_DIR"
umask 077

# subjectAltName: IP:... for addresses, DNS:... for names; anything else is refused.
san=""
IFS=',' read -r -a names <<<"$NAMES"
for name in "${names[@]}"; do
  name="${name//[[:space:]]/}"
  [[ -n $name ]] || continue
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then
    [[ $name =~ ^[0-9a-fA-F.:]+$ ]] || die "not an IP address: '$name'"
    san+="${san:+,}IP:$name"
  else
    [[ $name =~ ^[A-Za-z0-9*]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]] || die "not a DNS name: '$name'"
    san+="${san:+,}DNS:$name"
  fi
done

if [[ -s $OUT_DIR/ca.pem && -s $OUT_DIR/ca-key.pem ]]; then
  say "reusing the CA in $OUT_DIR/ca.pem"
else
  say "making a private CA in $OUT_DIR/ca.pem"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -days 3650 \
    -subj "/CN=ads-agent-runs NATS CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$OUT_DIR/ca-key.pem" -out "$OUT_DIR/ca.pem" 2>/dev/null
fi

say "making the server certificate $OUT_DIR/server-cert.pem for $san"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
  -subj "/CN=ads-agent-runs NATS server" -keyout "$OUT_DIR/server-key.pem" -out "$OUT_DIR/server.csr" 2>/dev/null
extensions=$(mktemp)
trap 'rm -f "$extensions" "$OUT_DIR/server.csr" "$OUT_DIR/ca.srl"' EXIT
printf '%s\n' \
  "basicConstraints=critical,CA:FALSE" \
  "keyUsage=critical,digitalSignature,keyEncipherment" \
  "extendedKeyUsage=serverAuth,clientAuth" \
  "subjectAltName=$san" >"$extensions"
openssl x509 -req -in "$OUT_DIR/server.csr" -CA "$OUT_DIR/ca.pem" -CAkey "$OUT_DIR/ca-key.pem" -CAcreateserial \
  -days "$DAYS" -sha256 -extfile "$extensions" -out "$OUT_DIR/server-cert.pem" 2>/dev/null
chmod 644 "$OUT_DIR/ca.pem" "$OUT_DIR/server-cert.pem"
# The nats image runs as root; a server run as another user needs read access to the key.
chmod 600 "$OUT_DIR/server-key.pem" "$OUT_DIR/ca-key.pem"
openssl verify -CAfile "$OUT_DIR/ca.pem" "$OUT_DIR/server-cert.pem" >/dev/null || die "the new certificate does not verify against the CA"
say "done: clients set NATS_TLS_CA=$OUT_DIR/ca.pem"
