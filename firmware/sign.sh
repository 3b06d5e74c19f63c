#!/usr/bin/env bash
# Signs an ESP app image for Chela's over-the-air updates, with openssl (Ed25519):
#   firmware/sign.sh KEYFILE IMAGE OUT    writes OUT: the update file the chip takes
#   firmware/sign.sh --pubkey KEYFILE     prints the key's public half as 64 hex digits
#                                         (what `build.sh --sign` builds into the firmware)
# KEYFILE is an Ed25519 private key in PEM, made once with
#   openssl genpkey -algorithm ed25519 -out chela-ota.pem
# and kept off the device and out of the repository: whoever holds it can update every chip
# built with it.
# The update file: "CHELAOTA", format 1, three zero bytes, the image length (u32 LE), the
# signature (64 B, Ed25519 over the image bytes exactly), then the image
# (chela_chip::ota::Header).
set -euo pipefail

fail() {
  echo "chela-sign: FAILED: $*" >&2
  exit 1
}
command -v openssl >/dev/null || fail "openssl is missing (apt-get install openssl)"

pubkey() {
  local der
  der=$(openssl pkey -in "$1" -pubout -outform DER 2>/dev/null | od -An -v -tx1 | tr -d ' \n') ||
    fail "$1 is not a private key openssl reads"
  # An Ed25519 SubjectPublicKeyInfo is 44 bytes: a fixed 12-byte prefix, then the key.
  [ "${der:0:24}" = 302a300506032b6570032100 ] || fail "$1 is not an Ed25519 key (make one with: openssl genpkey -algorithm ed25519)"
  echo "${der:24}"
}

if [ "${1:-}" = --pubkey ]; then
  [ $# -eq 2 ] || fail "usage: firmware/sign.sh --pubkey KEYFILE"
  pubkey "$2"
  exit 0
fi
[ $# -eq 3 ] || fail "usage: firmware/sign.sh KEYFILE IMAGE OUT"
key=$1 image=$2 out=$3
pubkey "$key" >/dev/null
[ -f "$image" ] || fail "no image at $image"
len=$(stat -c %s "$image")
[ "$len" -ge 24 ] && [ "$(od -An -N1 -tx1 "$image" | tr -d ' ')" = e9 ] || fail "$image is not an ESP app image"
sig=$(mktemp)
trap 'rm -f "$sig" "$out.tmp"' EXIT
openssl pkeyutl -sign -inkey "$key" -rawin -in "$image" -out "$sig" || fail "openssl could not sign $image"
[ "$(stat -c %s "$sig")" -eq 64 ] || fail "openssl made a signature that is not 64 bytes"
{
  printf 'CHELAOTA\001\000\000\000'
  printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((len & 255)) $((len >> 8 & 255)) $((len >> 16 & 255)) $((len >> 24 & 255)))"
  cat "$sig" "$image"
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "chela-sign: $out: $len B image, signed with the key $(pubkey "$key")"
