#include "storage/data_file.h"

#include "core/checksum.h"

#include <zstd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace revive::storage {
namespace {

// Reads: read(2) and checksum in pieces small enough to stay in the (32 MiB) L3 between the two passes.
constexpr size_t kChunk = size_t{4} << 20;
// Writes: checksum and write(2) in pieces that stay in the L2 cache (1 MiB per core here) between the two
// passes, so the data is read from memory once: XXH3 over data in DRAM ran at only 2-4 GB/s on this VM,
// the same order as the disk. (The Env starts writeback per 8 MiB, independently of the piece size.)
constexpr size_t kWritePiece = size_t{256} << 10;
// Payloads from this size on are read and checksummed by two threads at once (ReadPayload).
constexpr uint64_t kPipelineMin = uint64_t{16} << 20;

// Checksums the bytes another thread reads into dst, chunk by chunk, while it reads the next one. Restart
// reads each byte once, straight into user memory: done serially, the checksum (memory-bound, 2-4 GB/s
// over DRAM on this VM) added half again to the read; overlapped, each chunk is hashed while it is still
// in the cache and the read is the only cost left.
class PipelinedChecksum {
 public:
  explicit PipelinedChecksum(const char* base) : base_(base), thread_([this] { Run(); }) {}
  ~PipelinedChecksum() { Finish(); }
  // Bytes [0, end) of base are in place.
  void Ready(uint64_t end) {
    {
      std::lock_guard<std::mutex> l(mu_);
      ready_ = end;
    }
    cv_.notify_one();
  }
  // Waits until everything Ready() announced is hashed; returns the digest.
  uint64_t Finish() {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
      }
      cv_.notify_one();
      thread_.join();
    }
    return st_.Digest();
  }

 private:
  void Run() {
    uint64_t done = 0;
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return ready_ > done || stop_; });
      const uint64_t end = ready_;
      if (end == done) return;  // stop_ and nothing left
      l.unlock();
      st_.Update(base_ + done, end - done);
      done = end;
      l.lock();
    }
  }
  const char* base_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t ready_ = 0;
  bool stop_ = false;
  Checksum64Stream st_;
  std::thread thread_;  // last: starts once the rest is constructed
};

Status Compress(const std::vector<Span>& spans, uint64_t raw_len, int level, std::string* out) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) return Status::IOError("zstd: cannot allocate a compression context");
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setPledgedSrcSize(cctx, raw_len);
  out->resize(ZSTD_compressBound(raw_len));
  ZSTD_outBuffer ob{out->data(), out->size(), 0};
  Status s;
  for (size_t i = 0; i <= spans.size() && s.ok(); ++i) {
    bool last = i == spans.size();
    ZSTD_inBuffer ib{last ? nullptr : spans[i].data, last ? 0 : spans[i].size, 0};
    ZSTD_EndDirective mode = last ? ZSTD_e_end : ZSTD_e_continue;
    for (;;) {
      size_t r = ZSTD_compressStream2(cctx, &ob, &ib, mode);
      if (ZSTD_isError(r)) {
        s = Status::IOError(std::string("zstd compression failed: ") + ZSTD_getErrorName(r));
        break;
      }
      if (last ? r == 0 : ib.pos == ib.size) break;
    }
  }
  ZSTD_freeCCtx(cctx);
  out->resize(ob.pos);
  return s;
}

}  // namespace

Status WriteDataFile(Env* env, const std::string& path, FileHeader h, const std::vector<Span>& spans,
                     int compress_level) {
  uint64_t raw = 0;
  for (const auto& sp : spans) raw += sp.size;
  h.raw_len = raw;
  h.flags = 0;
  std::string packed;
  std::vector<Span> one;
  const std::vector<Span>* payload = &spans;
  if (compress_level > 0) {
    Status s = Compress(spans, raw, compress_level, &packed);
    if (!s.ok()) return Status::IOError(path + ": " + s.message());
    h.flags |= kFlagZstd;
    one.push_back({packed.data(), packed.size()});
    payload = &one;
  }
  h.payload_len = 0;
  for (const auto& sp : *payload) h.payload_len += sp.size;

  std::unique_ptr<WritableFile> f;
  Status s = env->NewWritableFile(path, &f);
  if (!s.ok()) return s;
  std::string head = EncodeHeader(h);
  s = f->Append(head.data(), head.size());
  Checksum64Stream st;
  for (const auto& sp : *payload) {
    const char* p = static_cast<const char*>(sp.data);
    for (size_t off = 0; off < sp.size && s.ok(); off += kWritePiece) {
      size_t n = sp.size - off < kWritePiece ? sp.size - off : kWritePiece;
      st.Update(p + off, n);
      s = f->Append(p + off, n);
    }
  }
  if (s.ok()) {
    std::string tail = EncodeTrailer(st.Digest());
    s = f->Append(tail.data(), tail.size());
  }
  if (s.ok()) s = f->Sync();
  Status c = f->Close();
  return s.ok() ? c : s;
}

Status EncodeDataRecord(const std::string& what, FileHeader h, const std::vector<Span>& spans,
                        int compress_level, EncodedRecord* out, Checksum64Stream* region) {
  uint64_t raw = 0;
  for (const auto& sp : spans) raw += sp.size;
  h.raw_len = raw;
  h.flags = 0;
  std::vector<Span> payload;
  if (compress_level > 0) {
    Status s = Compress(spans, raw, compress_level, &out->packed);
    if (!s.ok()) return Status::IOError(what + ": " + s.message());
    h.flags |= kFlagZstd;
    payload.push_back({out->packed.data(), out->packed.size()});
  } else {
    payload = spans;
  }
  h.payload_len = 0;
  for (const auto& sp : payload) h.payload_len += sp.size;
  out->head = EncodeHeader(h);
  if (region) region->Update(out->head.data(), out->head.size());
  out->spans.clear();
  out->spans.push_back({out->head.data(), out->head.size()});
  Checksum64Stream st;
  for (const auto& sp : payload) {
    const char* p = static_cast<const char*>(sp.data);
    for (size_t off = 0; off < sp.size; off += kWritePiece) {
      size_t n = sp.size - off < kWritePiece ? sp.size - off : kWritePiece;
      st.Update(p + off, n);
      if (region) region->Update(p + off, n);  // same piece, still in L2
    }
    if (sp.size) out->spans.push_back(sp);
  }
  out->tail = EncodeTrailer(st.Digest());
  if (region) region->Update(out->tail.data(), out->tail.size());
  out->spans.push_back({out->tail.data(), out->tail.size()});
  out->size = h.file_size();
  return Status::OK();
}

Status ParseDataRecord(const std::string& what, const char* bytes, size_t n, FileHeader* h,
                       const char** payload, size_t* consumed) {
  std::string head(bytes, n < kFixedHeaderSize ? n : kFixedHeaderSize);
  if (head.size() == kFixedHeaderSize) {
    uint32_t key_len;
    std::memcpy(&key_len, bytes + 36, 4);
    if (key_len <= kMaxKeyLength && kFixedHeaderSize + key_len <= n) head.append(bytes + kFixedHeaderSize, key_len);
  }
  Status s = DecodeHeader(what, head, h);
  if (!s.ok()) return s;
  // Overflow-safe: payload_len comes from disk.
  if (h->payload_len > n || h->file_size() > n)
    return Status::Corruption(what + ": truncated: header says " + std::to_string(h->file_size()) +
                              " bytes, " + std::to_string(n) + " left");
  const char* p = bytes + h->header_size();
  const char* t = p + h->payload_len;
  if (std::memcmp(t + 8, kEndMagic, 8) != 0) return Status::Corruption(what + ": bad end marker");
  uint64_t stored;
  std::memcpy(&stored, t, 8);
  if (stored != Checksum64(p, h->payload_len))
    return Status::Corruption(what + ": payload checksum mismatch (data corrupted)");
  *payload = p;
  *consumed = h->file_size();
  return Status::OK();
}

Status DecodePayload(const std::string& what, const FileHeader& h, const char* payload, void* dst) {
  if (!(h.flags & kFlagZstd)) {
    if (h.raw_len) std::memcpy(dst, payload, h.raw_len);
    return Status::OK();
  }
  size_t r = ZSTD_decompress(dst, h.raw_len, payload, h.payload_len);
  if (ZSTD_isError(r)) return Status::Corruption(what + ": zstd: " + ZSTD_getErrorName(r));
  if (r != h.raw_len)
    return Status::Corruption(what + ": decompressed to " + std::to_string(r) + " bytes, header says " +
                              std::to_string(h.raw_len));
  return Status::OK();
}

Status DataFileReader::Open(Env* env, const std::string& path, std::unique_ptr<DataFileReader>* out) {
  std::unique_ptr<DataFileReader> r(new DataFileReader);
  r->env_ = env;
  r->path_ = path;
  uint64_t size = 0;
  Status s = env->GetFileSize(path, &size);
  if (!s.ok()) return s.IsNotFound() ? Status::NotFound(path + ": file is missing") : s;
  s = env->NewSequentialFile(path, &r->f_);
  if (!s.ok()) return s;
  std::string b(size < kFixedHeaderSize ? size : kFixedHeaderSize, '\0');
  s = r->ReadExact(b.data(), b.size(), "header");
  if (!s.ok()) return s;
  if (b.size() >= kFixedHeaderSize) {
    uint32_t key_len;
    std::memcpy(&key_len, b.data() + 36, 4);
    if (key_len <= kMaxKeyLength && kFixedHeaderSize + key_len <= size) {
      std::string key(key_len, '\0');
      s = r->ReadExact(key.data(), key_len, "header");
      if (!s.ok()) return s;
      b += key;
    }
  }
  s = DecodeHeader(path, b, &r->h_);
  if (!s.ok()) return s;
  if (size != r->h_.file_size())
    return Status::Corruption(path + ": " + (size < r->h_.file_size() ? "truncated" : "has trailing bytes") +
                              ": header says " + std::to_string(r->h_.file_size()) + " bytes, file has " +
                              std::to_string(size));
  *out = std::move(r);
  return Status::OK();
}

Status DataFileReader::ReadExact(void* buf, size_t n, const char* what) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    size_t got = 0;
    Status s = f_->Read(p, n, &got);
    if (!s.ok()) return s;
    if (got == 0) return Status::Corruption(path_ + ": unexpected end of file in " + what);
    p += got;
    n -= got;
  }
  return Status::OK();
}

Status DataFileReader::CheckTrailer(uint64_t checksum) {
  char t[kTrailerSize];
  Status s = ReadExact(t, sizeof t, "trailer");
  if (!s.ok()) return s;
  if (std::memcmp(t + 8, kEndMagic, 8) != 0) return Status::Corruption(path_ + ": bad end marker");
  uint64_t stored;
  std::memcpy(&stored, t, 8);
  if (stored != checksum) return Status::Corruption(path_ + ": payload checksum mismatch (data corrupted)");
  return Status::OK();
}

Status DataFileReader::ReadPayload(void* dst) {
  if (!(h_.flags & kFlagZstd)) {
    char* p = static_cast<char*>(dst);
    if (h_.payload_len >= kPipelineMin) {
      PipelinedChecksum pc(p);
      for (uint64_t off = 0; off < h_.payload_len; off += kChunk) {
        size_t n = h_.payload_len - off < kChunk ? h_.payload_len - off : kChunk;
        Status s = ReadExact(p + off, n, "payload");
        if (!s.ok()) return s;  // ~PipelinedChecksum stops the thread
        pc.Ready(off + n);
      }
      return CheckTrailer(pc.Finish());
    }
    Checksum64Stream st;
    for (uint64_t off = 0; off < h_.payload_len; off += kChunk) {
      size_t n = h_.payload_len - off < kChunk ? h_.payload_len - off : kChunk;
      Status s = ReadExact(p + off, n, "payload");
      if (!s.ok()) return s;
      st.Update(p + off, n);
    }
    return CheckTrailer(st.Digest());
  }
  std::string packed(h_.payload_len, '\0');
  Status s = ReadExact(packed.data(), packed.size(), "payload");
  if (s.ok()) s = CheckTrailer(Checksum64(packed.data(), packed.size()));
  if (!s.ok()) return s;
  size_t r = ZSTD_decompress(dst, h_.raw_len, packed.data(), packed.size());
  if (ZSTD_isError(r)) return Status::Corruption(path_ + ": zstd: " + ZSTD_getErrorName(r));
  if (r != h_.raw_len)
    return Status::Corruption(path_ + ": decompressed to " + std::to_string(r) + " bytes, header says " +
                              std::to_string(h_.raw_len));
  return Status::OK();
}

Status DataFileReader::ReadPayloadRange(uint64_t off, uint64_t len, void* dst) {
  if (off > h_.raw_len || len > h_.raw_len - off)
    return Status::InvalidArgument(path_ + ": range [" + std::to_string(off) + ", +" + std::to_string(len) +
                                   ") is outside its " + std::to_string(h_.raw_len) + " payload bytes");
  if (off == 0 && len == h_.raw_len) return ReadPayload(dst);
  if (h_.flags & kFlagZstd) {
    std::string raw(h_.raw_len, '\0');
    Status s = ReadPayload(raw.data());
    if (s.ok() && len) std::memcpy(dst, raw.data() + off, len);
    return s;
  }
  // Pieces never straddle off or off + len: those inside go straight to dst, the others to buf.
  Checksum64Stream st;
  std::string buf(h_.payload_len < kChunk ? h_.payload_len : kChunk, '\0');
  char* d = static_cast<char*>(dst);
  const uint64_t end = off + len;
  for (uint64_t pos = 0; pos < h_.payload_len;) {
    const uint64_t limit = pos < off ? off : pos < end ? end : h_.payload_len;
    const size_t n = limit - pos < kChunk ? limit - pos : kChunk;
    char* to = pos >= off && pos < end ? d + (pos - off) : buf.data();
    Status s = ReadExact(to, n, "payload");
    if (!s.ok()) return s;
    st.Update(to, n);
    pos += n;
  }
  return CheckTrailer(st.Digest());
}

Status DataFileReader::Verify() {
  if (h_.flags & kFlagZstd) {
    std::string raw(h_.raw_len, '\0');
    return ReadPayload(raw.data());
  }
  Checksum64Stream st;
  std::string buf(h_.payload_len < kChunk ? h_.payload_len : kChunk, '\0');
  for (uint64_t off = 0; off < h_.payload_len; off += kChunk) {
    size_t n = h_.payload_len - off < kChunk ? h_.payload_len - off : kChunk;
    Status s = ReadExact(buf.data(), n, "payload");
    if (!s.ok()) return s;
    st.Update(buf.data(), n);
  }
  return CheckTrailer(st.Digest());
}

}  // namespace revive::storage
