// Coordinator wire protocol, version 1 (docs/contracts.md, docs/protocol.md): frame header encode/decode
// and the "key=value\n" payload, with strict validation.
//
// libc only, no allocation, no exceptions, no static constructors: this file is compiled into
// librevive_inject.so. Builders write into caller buffers; parsed payloads are views into the frame.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace revive::coord {

constexpr uint8_t kMagic[4] = {'R', 'V', 'P', '1'};
constexpr size_t kHeaderSize = 16;
constexpr uint32_t kMaxPayload = 1u << 20;  // larger = protocol error, connection dropped
constexpr size_t kMaxKey = 64;              // longest key we accept (keeps error messages bounded)

enum MsgType : uint16_t {
  kHello = 1, kChallenge = 2, kWelcome = 3, kError = 4,
  kCkptRequest = 10, kCkptDone = 11,
  kPhase = 20, kPhaseDone = 21,
  kPublish = 30, kLookup = 31, kValue = 32,
  kStatusRequest = 40, kStatus = 41,
  kKill = 50, kBye = 60,
};

// Name of a known type ("HELLO"), or nullptr for an unknown one.
const char* msg_type_name(uint16_t type);

// Why a frame was refused. Every non-ok value means: drop that connection.
enum class WireErr : int {
  kOk = 0,
  kBadMagic, kBadFlags, kTooLarge, kUnknownType,
  kNoNewline,      // payload does not end with '\n'
  kNoEquals,       // a line without '='
  kBadKey,         // empty, too long, or a byte outside [a-z0-9_.]
  kBadValue,       // NUL byte or invalid UTF-8 in a value
  kDuplicateKey,
  kMissingField,   // a field the message type requires
  kNoSpace,        // builder: caller buffer too small (local error, not a peer's fault)
};
const char* wire_err_str(WireErr e);

struct FrameHeader {
  uint16_t type;
  uint16_t flags;
  uint32_t length;  // payload bytes
  uint32_t seq;
};

// Writes the 16 header bytes. decode_header() needs exactly kHeaderSize bytes and validates magic, flags,
// type and length, so a reader knows how many payload bytes to expect before reading them.
void encode_header(const FrameHeader& h, uint8_t out[kHeaderSize]);
WireErr decode_header(const uint8_t in[kHeaderSize], FrameHeader* h);

// One "key=value" line, as a view into the payload (not nul-terminated).
struct Field {
  const char* key;
  size_t key_len;
  const char* value;
  size_t value_len;
};

// A validated payload. parse() checks every line (key syntax, '=', UTF-8, no NUL, no duplicates); the
// accessors then scan it. O(lines) per lookup: payloads are small except STATUS, read once by the CLI.
class Payload {
 public:
  WireErr parse(const char* data, size_t len);
  // Iteration: start with pos = 0; returns false at the end.
  bool next(size_t* pos, Field* f) const;
  bool has(const char* key) const;
  bool get(const char* key, const char** value, size_t* value_len) const;
  // Copies a value and nul-terminates it; false if missing or it does not fit in cap-1 bytes.
  bool get_str(const char* key, char* out, size_t cap) const;
  // Decimal, no sign, no overflow; false if missing or malformed.
  bool get_u64(const char* key, uint64_t* out) const;
  bool get_i64(const char* key, int64_t* out) const;
  // Exactly n bytes of lower/upper-case hex; false otherwise.
  bool get_hex(const char* key, void* out, size_t n) const;
  const char* data() const { return data_; }
  size_t size() const { return len_; }

 private:
  bool HasDuplicateKey() const;
  const char* data_ = nullptr;
  size_t len_ = 0;
};

// The fields each message type must carry (contracts.md table). kOk or kMissingField; *missing names it.
WireErr check_required(uint16_t type, const Payload& p, const char** missing);

// Validates a complete frame (header + payload) in one buffer: header, payload syntax, required fields.
// On success *payload views into buf. *consumed = kHeaderSize + length. kNoSpace means "need more bytes".
WireErr decode_frame(const uint8_t* buf, size_t len, FrameHeader* h, Payload* payload, size_t* consumed);

// Builds one frame into a caller buffer. Any add() that does not fit or is invalid makes finish() fail,
// so call sites can chain adds and check once.
class FrameBuilder {
 public:
  FrameBuilder(uint8_t* buf, size_t cap, uint16_t type, uint32_t seq);
  FrameBuilder& add(const char* key, const char* value);
  FrameBuilder& add(const char* key, const char* value, size_t value_len);
  FrameBuilder& add_u64(const char* key, uint64_t v);
  FrameBuilder& add_i64(const char* key, int64_t v);
  FrameBuilder& add_hex(const char* key, const void* data, size_t n);
  // Total frame size, or 0 if something did not fit or was invalid (see error()).
  size_t finish();
  WireErr error() const { return err_; }
  const uint8_t* data() const { return buf_; }

 private:
  bool append(const char* s, size_t n);
  uint8_t* buf_;
  size_t cap_;
  size_t len_;
  uint16_t type_;
  uint32_t seq_;
  WireErr err_ = WireErr::kOk;
};

// Helpers shared by the client and the server.
bool valid_key(const char* key, size_t len);
bool valid_value(const char* value, size_t len);  // no '\n', no NUL, valid UTF-8
void hex_encode(const void* data, size_t n, char* out);  // writes 2n chars, no terminator
bool hex_decode(const char* hex, size_t hex_len, void* out, size_t n);
// Decimal formatting without stdio; returns chars written (no terminator). out must hold 21 bytes.
size_t format_u64(uint64_t v, char* out);

}  // namespace revive::coord
