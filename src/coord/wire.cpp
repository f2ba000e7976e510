#include "coord/wire.h"

#include <string.h>

namespace revive::coord {
namespace {

void put_u16(uint8_t* p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
uint16_t get_u16(const uint8_t* p) { return (uint16_t)(p[0] | p[1] << 8); }
uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF.
bool valid_utf8(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) { i++; continue; }
    size_t extra;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) { extra = 1; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { extra = 2; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { extra = 3; cp = c & 0x07; }
    else return false;
    if (n - i <= extra) return false;
    for (size_t k = 1; k <= extra; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10ffff))) return false;
    if (cp >= 0xd800 && cp <= 0xdfff) return false;
    i += extra + 1;
  }
  return true;
}

bool key_equals(const Field& f, const char* key) {
  size_t n = strlen(key);
  return f.key_len == n && memcmp(f.key, key, n) == 0;
}

int hex_nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

const char* msg_type_name(uint16_t type) {
  switch (type) {
    case kHello: return "HELLO";
    case kChallenge: return "CHALLENGE";
    case kWelcome: return "WELCOME";
    case kError: return "ERROR";
    case kCkptRequest: return "CKPT_REQUEST";
    case kCkptDone: return "CKPT_DONE";
    case kPhase: return "PHASE";
    case kPhaseDone: return "PHASE_DONE";
    case kPublish: return "PUBLISH";
    case kLookup: return "LOOKUP";
    case kValue: return "VALUE";
    case kStatusRequest: return "STATUS_REQUEST";
    case kStatus: return "STATUS";
    case kKill: return "KILL";
    case kBye: return "BYE";
  }
  return nullptr;
}

const char* wire_err_str(WireErr e) {
  switch (e) {
    case WireErr::kOk: return "ok";
    case WireErr::kBadMagic: return "bad magic (not a revive protocol v1 frame)";
    case WireErr::kBadFlags: return "non-zero flags";
    case WireErr::kTooLarge: return "payload larger than 1 MiB";
    case WireErr::kUnknownType: return "unknown message type";
    case WireErr::kNoNewline: return "payload does not end with a newline";
    case WireErr::kNoEquals: return "line without '='";
    case WireErr::kBadKey: return "bad key (must match [a-z0-9_.]+, at most 64 bytes)";
    case WireErr::kBadValue: return "bad value (NUL byte or invalid UTF-8)";
    case WireErr::kDuplicateKey: return "duplicate key";
    case WireErr::kMissingField: return "missing required field";
    case WireErr::kNoSpace: return "buffer too small";
  }
  return "unknown error";
}

void encode_header(const FrameHeader& h, uint8_t out[kHeaderSize]) {
  memcpy(out, kMagic, 4);
  put_u16(out + 4, h.type);
  put_u16(out + 6, h.flags);
  put_u32(out + 8, h.length);
  put_u32(out + 12, h.seq);
}

WireErr decode_header(const uint8_t in[kHeaderSize], FrameHeader* h) {
  if (memcmp(in, kMagic, 4) != 0) return WireErr::kBadMagic;
  h->type = get_u16(in + 4);
  h->flags = get_u16(in + 6);
  h->length = get_u32(in + 8);
  h->seq = get_u32(in + 12);
  if (h->flags != 0) return WireErr::kBadFlags;
  if (h->length > kMaxPayload) return WireErr::kTooLarge;
  if (msg_type_name(h->type) == nullptr) return WireErr::kUnknownType;
  return WireErr::kOk;
}

bool valid_key(const char* key, size_t len) {
  if (len == 0 || len > kMaxKey) return false;
  for (size_t i = 0; i < len; i++) {
    char c = key[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
  }
  return true;
}

bool valid_value(const char* value, size_t len) {
  if (memchr(value, '\n', len) != nullptr || memchr(value, '\0', len) != nullptr) return false;
  return valid_utf8((const uint8_t*)value, len);
}

// Splits the next line without validating it: parse() validated everything once.
bool Payload::next(size_t* pos, Field* f) const {
  if (*pos >= len_) return false;
  const char* line = data_ + *pos;
  const char* nl = (const char*)memchr(line, '\n', len_ - *pos);
  const char* eq = (const char*)memchr(line, '=', (size_t)(nl - line));
  f->key = line;
  f->key_len = (size_t)(eq - line);
  f->value = eq + 1;
  f->value_len = (size_t)(nl - eq - 1);
  *pos = (size_t)(nl - data_) + 1;
  return true;
}

WireErr Payload::parse(const char* data, size_t len) {
  data_ = nullptr;
  len_ = 0;
  if (len > kMaxPayload) return WireErr::kTooLarge;
  if (len > 0 && data[len - 1] != '\n') return WireErr::kNoNewline;
  size_t pos = 0;
  size_t lines = 0;
  while (pos < len) {
    const char* line = data + pos;
    const char* nl = (const char*)memchr(line, '\n', len - pos);
    size_t line_len = (size_t)(nl - line);
    const char* eq = (const char*)memchr(line, '=', line_len);
    if (eq == nullptr) return WireErr::kNoEquals;
    if (!valid_key(line, (size_t)(eq - line))) return WireErr::kBadKey;
    if (!valid_value(eq + 1, (size_t)(nl - eq - 1))) return WireErr::kBadValue;
    pos += line_len + 1;
    lines++;
  }
  data_ = data;
  len_ = len;
  // Duplicate keys are ambiguous (which one wins?): refuse them. An open-addressing table of line offsets
  // on the stack (no allocation: this runs in the injected library) makes it linear up to kDupSlots*3/4
  // lines; only longer payloads fall back to pairwise comparison of the rest. A peer that has not
  // authenticated can send at most 4 KiB (under 1400 lines), so it can never trigger the quadratic path.
  if (lines > 1 && HasDuplicateKey()) {
    data_ = nullptr;
    len_ = 0;
    return WireErr::kDuplicateKey;
  }
  return WireErr::kOk;
}

bool Payload::HasDuplicateKey() const {
  constexpr size_t kDupSlots = 2048;
  uint32_t slot[kDupSlots];  // 1 + offset of the line, 0 = empty
  memset(slot, 0, sizeof slot);
  size_t used = 0, pos = 0;
  Field f;
  while (used < kDupSlots * 3 / 4) {
    size_t at = pos;
    if (!next(&pos, &f)) return false;
    uint32_t h = 2166136261u;  // FNV-1a
    for (size_t i = 0; i < f.key_len; i++) h = (h ^ (uint8_t)f.key[i]) * 16777619u;
    for (size_t i = h % kDupSlots;; i = (i + 1) % kDupSlots) {
      if (slot[i] == 0) {
        slot[i] = (uint32_t)at + 1;
        used++;
        break;
      }
      size_t other = slot[i] - 1;
      Field g;
      next(&other, &g);
      if (g.key_len == f.key_len && memcmp(g.key, f.key, f.key_len) == 0) return true;
    }
  }
  // Table full: compare each remaining line with every line (rare: only huge STATUS-like payloads).
  Field fa;
  while (next(&pos, &fa)) {
    size_t b = 0;
    Field fb;
    while (next(&b, &fb) && fb.key != fa.key) {
      if (fa.key_len == fb.key_len && memcmp(fa.key, fb.key, fa.key_len) == 0) return true;
    }
  }
  return false;
}

bool Payload::get(const char* key, const char** value, size_t* value_len) const {
  size_t pos = 0;
  Field f;
  while (next(&pos, &f)) {
    if (key_equals(f, key)) {
      *value = f.value;
      *value_len = f.value_len;
      return true;
    }
  }
  return false;
}

bool Payload::has(const char* key) const {
  const char* v;
  size_t n;
  return get(key, &v, &n);
}

bool Payload::get_str(const char* key, char* out, size_t cap) const {
  const char* v;
  size_t n;
  if (!get(key, &v, &n) || n + 1 > cap) return false;
  memcpy(out, v, n);
  out[n] = '\0';
  return true;
}

bool Payload::get_u64(const char* key, uint64_t* out) const {
  const char* v;
  size_t n;
  if (!get(key, &v, &n) || n == 0 || n > 20) return false;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return false;
    uint64_t d = (uint64_t)(v[i] - '0');
    if (x > (UINT64_MAX - d) / 10) return false;
    x = x * 10 + d;
  }
  *out = x;
  return true;
}

bool Payload::get_i64(const char* key, int64_t* out) const {
  const char* v;
  size_t n;
  if (!get(key, &v, &n) || n == 0 || n > 20) return false;
  bool neg = v[0] == '-';
  size_t i = neg ? 1 : 0;
  if (i == n) return false;
  uint64_t x = 0;
  for (; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return false;
    uint64_t d = (uint64_t)(v[i] - '0');
    uint64_t limit = (uint64_t)INT64_MAX + (neg ? 1 : 0);
    if (x > (limit - d) / 10) return false;
    x = x * 10 + d;
  }
  *out = neg ? (int64_t)(0 - x) : (int64_t)x;
  return true;
}

bool Payload::get_hex(const char* key, void* out, size_t n) const {
  const char* v;
  size_t len;
  return get(key, &v, &len) && hex_decode(v, len, out, n);
}

WireErr check_required(uint16_t type, const Payload& p, const char** missing) {
  static const char* const kHelloF[] = {"role", "pid", "proof", nullptr};
  static const char* const kChallengeF[] = {"nonce", nullptr};
  static const char* const kWelcomeF[] = {"upid", nullptr};
  static const char* const kErrorF[] = {"reason", nullptr};
  static const char* const kCkptDoneF[] = {"ok", "generation", nullptr};
  static const char* const kPhaseF[] = {"name", "generation", nullptr};
  static const char* const kPhaseDoneF[] = {"name", "ok", nullptr};
  static const char* const kPublishF[] = {"key", "value", nullptr};
  static const char* const kLookupF[] = {"key", nullptr};
  static const char* const kValueF[] = {"key", "found", nullptr};
  static const char* const kStatusF[] = {"procs", "generation", "state", nullptr};
  static const char* const kByeF[] = {"status", nullptr};
  const char* const* req = nullptr;
  switch (type) {
    case kHello: req = kHelloF; break;
    case kChallenge: req = kChallengeF; break;
    case kWelcome: req = kWelcomeF; break;
    case kError: req = kErrorF; break;
    case kCkptDone: req = kCkptDoneF; break;
    case kPhase: req = kPhaseF; break;
    case kPhaseDone: req = kPhaseDoneF; break;
    case kPublish: req = kPublishF; break;
    case kLookup: req = kLookupF; break;
    case kValue: req = kValueF; break;
    case kStatus: req = kStatusF; break;
    case kBye: req = kByeF; break;
    default: break;
  }
  for (; req != nullptr && *req != nullptr; req++) {
    if (!p.has(*req)) {
      if (missing != nullptr) *missing = *req;
      return WireErr::kMissingField;
    }
  }
  return WireErr::kOk;
}

WireErr decode_frame(const uint8_t* buf, size_t len, FrameHeader* h, Payload* payload, size_t* consumed) {
  if (len < kHeaderSize) return WireErr::kNoSpace;
  WireErr e = decode_header(buf, h);
  if (e != WireErr::kOk) return e;
  if (len - kHeaderSize < h->length) return WireErr::kNoSpace;
  e = payload->parse((const char*)buf + kHeaderSize, h->length);
  if (e != WireErr::kOk) return e;
  e = check_required(h->type, *payload, nullptr);
  if (e != WireErr::kOk) return e;
  *consumed = kHeaderSize + h->length;
  return WireErr::kOk;
}

FrameBuilder::FrameBuilder(uint8_t* buf, size_t cap, uint16_t type, uint32_t seq)
    : buf_(buf), cap_(cap), len_(kHeaderSize), type_(type), seq_(seq) {
  if (cap < kHeaderSize) err_ = WireErr::kNoSpace;
}

bool FrameBuilder::append(const char* s, size_t n) {
  if (err_ != WireErr::kOk) return false;
  if (cap_ - len_ < n || len_ - kHeaderSize + n > kMaxPayload) {
    err_ = WireErr::kNoSpace;
    return false;
  }
  memcpy(buf_ + len_, s, n);
  len_ += n;
  return true;
}

FrameBuilder& FrameBuilder::add(const char* key, const char* value, size_t value_len) {
  if (err_ != WireErr::kOk) return *this;
  size_t klen = strlen(key);
  if (!valid_key(key, klen)) { err_ = WireErr::kBadKey; return *this; }
  if (!valid_value(value, value_len)) { err_ = WireErr::kBadValue; return *this; }
  append(key, klen) && append("=", 1) && append(value, value_len) && append("\n", 1);
  return *this;
}

FrameBuilder& FrameBuilder::add(const char* key, const char* value) {
  return add(key, value, strlen(value));
}

FrameBuilder& FrameBuilder::add_u64(const char* key, uint64_t v) {
  char tmp[21];
  return add(key, tmp, format_u64(v, tmp));
}

FrameBuilder& FrameBuilder::add_i64(const char* key, int64_t v) {
  char tmp[22];
  if (v >= 0) return add(key, tmp, format_u64((uint64_t)v, tmp));
  tmp[0] = '-';
  return add(key, tmp, 1 + format_u64(0 - (uint64_t)v, tmp + 1));
}

FrameBuilder& FrameBuilder::add_hex(const char* key, const void* data, size_t n) {
  if (err_ != WireErr::kOk) return *this;
  size_t klen = strlen(key);
  if (!valid_key(key, klen)) { err_ = WireErr::kBadKey; return *this; }
  if (!append(key, klen) || !append("=", 1)) return *this;
  if (cap_ - len_ < 2 * n || len_ - kHeaderSize + 2 * n > kMaxPayload) {
    err_ = WireErr::kNoSpace;
    return *this;
  }
  hex_encode(data, n, (char*)buf_ + len_);
  len_ += 2 * n;
  append("\n", 1);
  return *this;
}

size_t FrameBuilder::finish() {
  if (err_ != WireErr::kOk) return 0;
  FrameHeader h{type_, 0, (uint32_t)(len_ - kHeaderSize), seq_};
  encode_header(h, buf_);
  return len_;
}

void hex_encode(const void* data, size_t n, char* out) {
  static const char kDigits[] = "0123456789abcdef";
  const uint8_t* p = (const uint8_t*)data;
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
}

bool hex_decode(const char* hex, size_t hex_len, void* out, size_t n) {
  if (hex_len != 2 * n) return false;
  uint8_t* o = (uint8_t*)out;
  for (size_t i = 0; i < n; i++) {
    int hi = hex_nibble(hex[2 * i]), lo = hex_nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    o[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

size_t format_u64(uint64_t v, char* out) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  return n;
}

}  // namespace revive::coord
