// Node-local pieces of multi-level checkpoints (levels L1-L3, docs/storage-levels.md).
//
// Each host keeps, under <local root>/<host>/<id>/v-<N>/, the pieces it holds of version N:
//   rank-<R>        rank R's checkpoint bytes: its data files (format.h) concatenated in registration order,
//                   the same bytes as its range of a shared file (shared_file.h). Written by rank R on its own
//                   host (L1) and, byte for byte, by its partner on another host (L2).
//   parity-<R>      the parity that rank R holds for its erasure-coded group (L3): its parity slots of the
//                   group's rotated stripes (stripes.h), concatenated.
//   <piece>.meta    what the piece is (text, checksummed; below). Written atomically after the piece is
//                   durable, so a meta that decodes always names a complete piece (its bytes are checked
//                   against the meta's checksum when read, which catches later damage).
// <id> is "<name>-<XXH3-64 of the global (L4) checkpoint directory, 16 hex>": two jobs with the same
// checkpoint name on one node never share pieces, and `revive ls <L4 dir>` finds them.
#ifndef REVIVE_STORAGE_LOCAL_STORE_H_
#define REVIVE_STORAGE_LOCAL_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "storage/data_file.h"
#include "storage/distribution.h"

namespace revive::storage {

struct PieceMeta {
  enum Kind { kData, kParity };
  Kind kind = kData;
  std::string name;             // checkpoint name
  uint64_t version = 0;
  int64_t iteration = 0;
  uint64_t parent_version = 0;  // nested checkpoints (manifest.h)
  uint32_t ranks = 1;           // ranks of the run that wrote it
  uint32_t rank = 0;            // data: whose bytes; parity: who holds this parity
  std::string host;             // host of the writing rank (the owner's host for a partner copy too)
  std::string holder_host;      // host whose local storage this piece was written to
  // kData: the piece's bytes.
  uint64_t length = 0;
  uint64_t checksum = 0;              // XXH3-64
  std::vector<std::string> keys;      // registration order, as in the manifest
  Layouts layouts;                    // distributed / replicated keys, as in the manifest
  // kParity: the group.
  int parity = 0;                     // m: 1 = XOR, >= 2 = Reed-Solomon
  std::vector<uint32_t> members;      // the group's ranks, in stripe-layout order
  uint64_t block = 0;                 // stripe block size (stripes.h)
  std::vector<uint64_t> lengths;      // every member's data length
  std::vector<uint64_t> checksums;    // every member's data checksum
  uint64_t parity_length = 0;         // this piece's bytes (= parity * block)
  uint64_t parity_checksum = 0;

  // Index of `rank` in members, or -1.
  int MemberIndex(uint32_t r) const;
  // The file name in the version directory, without ".meta".
  std::string FileName() const;
  // Bytes and checksum of the piece file this meta describes.
  uint64_t FileLength() const { return kind == kData ? length : parity_length; }
  uint64_t FileChecksum() const { return kind == kData ? checksum : parity_checksum; }
};

std::string EncodePieceMeta(const PieceMeta& m);
// `what` names the file in errors.
Status DecodePieceMeta(const std::string& what, const std::string& text, PieceMeta* m);

// One host's local storage of one checkpoint.
class LocalStore {
 public:
  LocalStore(Env* env, std::string root, std::string host, std::string id);
  // "<name>-<16 hex of XXH3(global_dir)>".
  static std::string MakeId(const std::string& name, const std::string& global_dir);

  Env* env() const { return env_; }
  const std::string& host() const { return host_; }
  // <root>/<host>/<id>
  const std::string& dir() const { return dir_; }
  std::string VersionDir(uint64_t v) const;
  std::string PiecePath(uint64_t v, const PieceMeta& m) const { return VersionDir(v) + "/" + m.FileName(); }

  // Writes the piece's bytes (fsync), then its meta atomically; creates the directories as needed. The
  // file is a recycled one of an old version when there is one (see RemoveVersion).
  Status WritePiece(const PieceMeta& m, const void* data, size_t n);
  Status WritePiece(const PieceMeta& m, const std::vector<Span>& spans);
  // A read-only mapping of the piece's file (no copy: tmpfs pages are the bytes), checked for its size but
  // not its checksum (the caller reads it once for that, or already knows it). Empty file: no mapping.
  struct Mapping {
    const char* data = nullptr;
    size_t size = 0;
    ~Mapping();
  };
  Status MapPiece(const PieceMeta& m, std::shared_ptr<const Mapping>* out) const;
  // Reads the piece a meta describes into *out and checks its length and checksum (Corruption naming the file).
  Status ReadPiece(const PieceMeta& m, std::string* out) const;

  // Version directories present, ascending.
  Status ListVersions(std::vector<uint64_t>* out) const;
  // Every piece of every version in this host's directory whose meta decodes. Metas that do not decode are
  // reported in *problems ("<file>: <reason>") and otherwise ignored.
  Status Scan(std::vector<PieceMeta>* metas, std::vector<std::string>* problems) const;
  // Deletes version directories older than `oldest_kept` (metas first, so a crash halfway leaves pieces
  // without metas, which are ignored). Their piece files are moved to <dir>/recycle/ (a few at most) for
  // WritePiece to overwrite: fresh tmpfs pages cost a host fault each on this VM, recycled ones do not.
  Status RemoveOlderThan(uint64_t oldest_kept);
  Status RemoveVersion(uint64_t v);

 private:
  Env* env_;
  std::string root_, host_, id_, dir_;
};

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_LOCAL_STORE_H_
