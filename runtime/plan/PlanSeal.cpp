// Sealing plans (hash, optional signature) and checking seals at load.
#include "runtime/plan/PlanSeal.h"

#include "runtime/io/ReadFile.h"

#include <sodium.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace weft::plan {

namespace {

constexpr size_t kHashBytes = 32, kKeyBytes = 32, kSignatureBytes = 64;

Status sodiumReady() {
  static const int ready = sodium_init();
  if (ready < 0)
    return internalError("libsodium failed to initialise");
  return Status::ok();
}

// Where the seal's vectors lie in `bytes`, checked to be inside it and of
// the expected sizes.
struct SealSpans {
  size_t hash = 0, signer = 0, signature = 0;
};
Status locate(const std::vector<uint8_t> &bytes, const std::string &display, SealSpans &out) {
  const fb::Plan *plan = fb::GetPlan(bytes.data());
  const fb::Seal *seal = plan->seal();
  if (!seal || !seal->hash() || !seal->signer() || !seal->signature())
    return invalidArgument(display + ": the plan has no seal (no checksum): expected one "
                                     "written by weft-compile; recompile the plan");
  auto span = [&](const flatbuffers::Vector<uint8_t> *v, size_t n, const char *what,
                  size_t &at) -> Status {
    if (v->size() != n)
      return invalidArgument(display + ": seal." + what + " has " + std::to_string(v->size()) +
                             " bytes: expected " + std::to_string(n));
    at = size_t(v->data() - bytes.data());
    if (at > bytes.size() || bytes.size() - at < n)
      return invalidArgument(display + ": seal." + what + " lies outside the file");
    return Status::ok();
  };
  WEFT_RETURN_IF_ERROR(span(seal->hash(), kHashBytes, "hash", out.hash));
  WEFT_RETURN_IF_ERROR(span(seal->signer(), kKeyBytes, "signer", out.signer));
  WEFT_RETURN_IF_ERROR(span(seal->signature(), kSignatureBytes, "signature", out.signature));
  return Status::ok();
}

// BLAKE2b-256 of `bytes` with the hash and signature spans read as zeros.
std::array<uint8_t, kHashBytes> digest(const std::vector<uint8_t> &bytes, const SealSpans &s) {
  std::vector<uint8_t> copy = bytes;
  std::memset(copy.data() + s.hash, 0, kHashBytes);
  std::memset(copy.data() + s.signature, 0, kSignatureBytes);
  std::array<uint8_t, kHashBytes> out{};
  crypto_generichash(out.data(), out.size(), copy.data(), copy.size(), nullptr, 0);
  return out;
}

bool allZero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i])
      return false;
  return true;
}

bool fromHex(std::string_view hex, uint8_t *out, size_t n) {
  if (hex.size() != 2 * n)
    return false;
  return sodium_hex2bin(out, n, hex.data(), hex.size(), nullptr, nullptr, nullptr) == 0;
}

std::string trimmed(std::string s) {
  size_t hash = s.find('#');
  if (hash != std::string::npos)
    s.resize(hash);
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

} // namespace

std::string toHex(const uint8_t *bytes, size_t n) {
  std::string out(2 * n + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), bytes, n);
  out.pop_back();
  return out;
}

StatusOr<SigningKey> generateSigningKey() {
  WEFT_RETURN_IF_ERROR(sodiumReady());
  SigningKey k;
  crypto_sign_keypair(k.publicKey.data(), k.secret.data());
  return k;
}

StatusOr<SigningKey> readSigningKey(const std::string &path) {
  WEFT_RETURN_IF_ERROR(sodiumReady());
  StatusOr<std::string> text = io::readRegularFile(path, 4096, "the signing key");
  if (!text.isOk())
    return text.status();
  SigningKey k;
  if (!fromHex(trimmed(*text), k.secret.data(), k.secret.size()))
    return invalidArgument(path + ": expected an ed25519 secret key as 128 hex digits "
                                  "(weft-compile --generate-signing-key)");
  crypto_sign_ed25519_sk_to_pk(k.publicKey.data(), k.secret.data());
  return k;
}

Status writeSigningKey(const std::string &path, const SigningKey &key) {
  std::ofstream f(path, std::ios::trunc);
  f << toHex(key.secret.data(), key.secret.size()) << "\n";
  std::ofstream pub(path + ".pub", std::ios::trunc);
  pub << toHex(key.publicKey.data(), key.publicKey.size()) << "\n";
  if (!f || !pub)
    return failedPrecondition(path + ": cannot write the key files");
  return Status::ok();
}

StatusOr<std::vector<PublicKey>> readTrustedKeys(const std::string &path) {
  WEFT_RETURN_IF_ERROR(sodiumReady());
  StatusOr<std::string> text = io::readRegularFile(path, 1u << 20, "the trusted keys");
  if (!text.isOk())
    return text.status();
  std::vector<PublicKey> keys;
  std::istringstream in(*text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string key = trimmed(line);
    if (key.empty())
      continue;
    PublicKey k;
    if (!fromHex(key, k.data(), k.size()))
      return invalidArgument(path + ":" + std::to_string(number) +
                             ": expected an ed25519 public key as 64 hex digits");
    keys.push_back(k);
  }
  if (keys.empty())
    return invalidArgument(path + ": no keys in it");
  return keys;
}

StatusOr<SealPolicy> sealPolicyFor(const std::string &trustedKeysPath) {
  SealPolicy policy;
  if (trustedKeysPath.empty())
    return policy;
  StatusOr<std::vector<PublicKey>> keys = readTrustedKeys(trustedKeysPath);
  if (!keys.isOk())
    return keys.status();
  policy.trusted = std::move(keys.value());
  return policy;
}

flatbuffers::Offset<fb::Seal> createSealPlaceholder(flatbuffers::FlatBufferBuilder &b) {
  std::vector<uint8_t> hash(kHashBytes, 0), signer(kKeyBytes, 0), signature(kSignatureBytes, 0);
  return fb::CreateSeal(b, b.CreateVector(hash), b.CreateVector(signer), b.CreateVector(signature));
}

Status sealPlan(std::vector<uint8_t> &bytes, const SigningKey *key) {
  WEFT_RETURN_IF_ERROR(sodiumReady());
  SealSpans s;
  WEFT_RETURN_IF_ERROR(locate(bytes, "the plan being sealed", s));
  std::memcpy(bytes.data() + s.signer, key ? key->publicKey.data() : PublicKey{}.data(),
              kKeyBytes);
  std::array<uint8_t, kHashBytes> h = digest(bytes, s);
  std::memcpy(bytes.data() + s.hash, h.data(), kHashBytes);
  if (key)
    crypto_sign_detached(bytes.data() + s.signature, nullptr, h.data(), h.size(),
                         key->secret.data());
  return Status::ok();
}

Status checkSeal(const std::vector<uint8_t> &bytes, const std::string &display,
                 const SealPolicy &policy) {
  if (!policy.requireSeal)
    return Status::ok();
  WEFT_RETURN_IF_ERROR(sodiumReady());
  SealSpans s;
  WEFT_RETURN_IF_ERROR(locate(bytes, display, s));
  std::array<uint8_t, kHashBytes> h = digest(bytes, s);
  if (sodium_memcmp(h.data(), bytes.data() + s.hash, kHashBytes) != 0)
    return invalidArgument(display + ": checksum mismatch (BLAKE2b-256 " +
                           toHex(h.data(), 8) + "... against " +
                           toHex(bytes.data() + s.hash, 8) +
                           "... in the seal): the file was changed or damaged after it was "
                           "compiled");
  if (policy.trusted.empty())
    return Status::ok();
  const uint8_t *signer = bytes.data() + s.signer;
  if (allZero(signer, kKeyBytes))
    return failedPrecondition(display + ": the plan is not signed, and only plans signed by "
                                        "a trusted key are accepted");
  bool trusted = false;
  for (const PublicKey &k : policy.trusted)
    trusted |= std::memcmp(k.data(), signer, kKeyBytes) == 0;
  if (!trusted)
    return failedPrecondition(display + ": signed by " + toHex(signer, kKeyBytes) +
                              ", which is not a trusted key");
  if (crypto_sign_verify_detached(bytes.data() + s.signature, h.data(), h.size(), signer) != 0)
    return failedPrecondition(display + ": the signature does not verify with its signer's "
                                        "key: the plan was changed after it was signed");
  return Status::ok();
}

StatusOr<SignatureState> signatureState(const std::vector<uint8_t> &bytes,
                                        const std::string &display) {
  WEFT_RETURN_IF_ERROR(sodiumReady());
  SealSpans s;
  WEFT_RETURN_IF_ERROR(locate(bytes, display, s));
  const uint8_t *signer = bytes.data() + s.signer;
  if (allZero(signer, kKeyBytes))
    return SignatureState::kUnsigned;
  std::array<uint8_t, kHashBytes> h = digest(bytes, s);
  return crypto_sign_verify_detached(bytes.data() + s.signature, h.data(), h.size(), signer) == 0
             ? SignatureState::kVerified
             : SignatureState::kDoesNotVerify;
}

} // namespace weft::plan
