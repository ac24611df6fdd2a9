// A plan's seal: a BLAKE2b-256 hash over the whole file, checked at every
// load, so a flipped byte in a kernel or a constant is caught; and an
// optional ed25519 signature of that hash, so an edge box can accept only
// plans compiled by keys it trusts. libsodium does the cryptography.
#ifndef WEFT_RUNTIME_PLAN_PLANSEAL_H_
#define WEFT_RUNTIME_PLAN_PLANSEAL_H_

#include "runtime/base/Status.h"
#include "runtime/plan/plan_generated.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::plan {

using PublicKey = std::array<uint8_t, 32>;

// An ed25519 key pair; the secret key file holds the 64-byte secret key
// (which contains the public key) as hex, one line.
struct SigningKey {
  std::array<uint8_t, 64> secret{};
  PublicKey publicKey{};
};
StatusOr<SigningKey> generateSigningKey();
StatusOr<SigningKey> readSigningKey(const std::string &path);
Status writeSigningKey(const std::string &path, const SigningKey &key);

// Trusted public keys: a file of hex keys, one a line ('#' starts a comment).
StatusOr<std::vector<PublicKey>> readTrustedKeys(const std::string &path);
std::string toHex(const uint8_t *bytes, size_t n);

// The seal table a builder puts in a plan before finishing it: zeroed
// vectors of the right sizes, filled by sealPlan.
flatbuffers::Offset<fb::Seal> createSealPlaceholder(flatbuffers::FlatBufferBuilder &b);

// Hashes the finished plan `bytes` and writes the hash (and, with `key`,
// the signer and signature) into its seal. The plan must carry a
// placeholder seal.
Status sealPlan(std::vector<uint8_t> &bytes, const SigningKey *key);

// What a load accepts: `trusted` empty: any plan whose hash matches;
// otherwise only plans signed by one of `trusted`. `requireSeal` false
// skips the seal entirely (fuzzing the checks behind it).
struct SealPolicy {
  std::vector<PublicKey> trusted;
  bool requireSeal = true;
};

// The policy for `trustedKeysPath` (a file of public keys; empty: any
// sealed plan). Errors name the file.
StatusOr<SealPolicy> sealPolicyFor(const std::string &trustedKeysPath);

// Checks the seal of a FlatBuffers-verified plan; errors start with
// `display`.
Status checkSeal(const std::vector<uint8_t> &bytes, const std::string &display,
                 const SealPolicy &policy);

// What a sealed plan's signature is, checked rather than read: none, one
// that verifies against the plan's hash with the signer key it names, or
// one that does not (forged, or the plan changed after signing). Whether
// that key is trusted is checkSeal's business, under a SealPolicy.
enum class SignatureState { kUnsigned, kVerified, kDoesNotVerify };
StatusOr<SignatureState> signatureState(const std::vector<uint8_t> &bytes,
                                        const std::string &display);

} // namespace weft::plan

#endif // WEFT_RUNTIME_PLAN_PLANSEAL_H_
