// libFuzzer target for the frame decoder (built with clang, -fsanitize=fuzzer,address,undefined; see
// CMakeLists.txt). Coverage-guided, so it reaches the corners the mutation test (wire_fuzz_test) may not.
// Properties checked on every input:
//  - decode_frame never reads outside [data, data+size) (ASan) and never aborts;
//  - an accepted frame re-encodes through FrameBuilder to a frame that decodes to the same fields.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coord/wire.h"

using namespace revive::coord;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FrameHeader h;
  Payload p;
  size_t used = 0;
  if (decode_frame(data, size, &h, &p, &used) != WireErr::kOk) return 0;
  if (used != kHeaderSize + h.length || used > size) abort();
  static uint8_t out[kHeaderSize + kMaxPayload];
  FrameBuilder b(out, sizeof out, h.type, h.seq);
  size_t pos = 0;
  Field f;
  char key[kMaxKey + 1];
  while (p.next(&pos, &f)) {
    memcpy(key, f.key, f.key_len);
    key[f.key_len] = '\0';
    b.add(key, f.value, f.value_len);
  }
  size_t n = b.finish();
  if (n != used || memcmp(out, data, n) != 0) abort();  // the encoding is canonical
  return 0;
}
