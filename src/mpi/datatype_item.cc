// Checkpointing an MPI derived datatype: the library stores opaque bytes, so the object is packed with
// MPI_Pack (which follows any datatype layout, holes included) and unpacked with MPI_Unpack. The stored
// blob is [u64 magic][u64 packed size][packed bytes]; the size lets a restart with another datatype or
// count fail with a message instead of reading garbage.
#include <cstdint>
#include <cstring>
#include <string>

#include "revive/checkpoint_mpi.hpp"

namespace revive::mpi {
namespace {

constexpr uint64_t kMagic = 0x3150595444495052ULL;  // "RPIDTYP1"
constexpr size_t kHeader = 2 * sizeof(uint64_t);

std::string MpiError(int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string(msg, static_cast<size_t>(len));
}

class DatatypeItem final : public detail::Item {
 public:
  DatatypeItem(std::string what, void* buf, int count, MPI_Datatype type, MPI_Comm comm)
      : what_(std::move(what)), buf_(buf), count_(count), type_(type), comm_(comm) {}

  detail::TypeDesc type() const override { return {detail::kTagBlob, 1}; }
  bool resizable() const override { return true; }  // the packed size is only known after packing
  uint64_t count() const override { return 0; }

  void gather(std::vector<detail::ByteSpan>& out, std::string& scratch) override {
    const int bound = PackBound();
    const size_t at = scratch.size();
    scratch.resize(at + kHeader + static_cast<size_t>(bound));
    char* base = scratch.data() + at;
    int pos = 0;
    const int rc = MPI_Pack(buf_, count_, type_, base + kHeader, bound, &pos, comm_);
    if (rc != MPI_SUCCESS) throw Error(what_ + ": MPI_Pack failed: " + MpiError(rc));
    const uint64_t header[2] = {kMagic, static_cast<uint64_t>(pos)};
    std::memcpy(base, header, kHeader);
    scratch.resize(at + kHeader + static_cast<size_t>(pos));
    // scratch may have moved while growing: take the address only now.
    out.push_back({scratch.data() + at, kHeader + static_cast<size_t>(pos)});
  }

  void load(uint64_t, const char* data, size_t size, const std::string& what) override {
    uint64_t header[2] = {0, 0};
    if (size < kHeader) throw Error(what + ": MPI datatype blob too short (" + std::to_string(size) + " bytes)");
    std::memcpy(header, data, kHeader);
    if (header[0] != kMagic) throw Error(what + ": not an MPI datatype blob (bad magic)");
    if (header[1] != size - kHeader) {
      throw Error(what + ": MPI datatype blob says " + std::to_string(header[1]) + " packed bytes but holds " +
                  std::to_string(size - kHeader));
    }
    const int bound = PackBound();
    if (header[1] > static_cast<uint64_t>(bound)) {
      throw Error(what + ": stored object (" + std::to_string(header[1]) + " bytes) is larger than " +
                  std::to_string(count_) + " elements of this datatype (" + std::to_string(bound) +
                  " bytes): restarted with another datatype or count?");
    }
    int pos = 0;
    const int rc = MPI_Unpack(data + kHeader, static_cast<int>(header[1]), &pos, buf_, count_, type_, comm_);
    if (rc != MPI_SUCCESS) throw Error(what + ": MPI_Unpack failed: " + MpiError(rc));
    if (static_cast<uint64_t>(pos) != header[1]) {
      throw Error(what + ": datatype consumed " + std::to_string(pos) + " of " + std::to_string(header[1]) +
                  " stored bytes: restarted with another datatype or count?");
    }
  }

 private:
  int PackBound() const {
    int bound = 0;
    const int rc = MPI_Pack_size(count_, type_, comm_, &bound);
    if (rc != MPI_SUCCESS) throw Error(what_ + ": MPI_Pack_size failed: " + MpiError(rc));
    return bound;
  }

  std::string what_;
  void* buf_;
  int count_;
  MPI_Datatype type_;
  MPI_Comm comm_;
};

}  // namespace

std::shared_ptr<detail::Item> datatype_item(const std::string& key, void* buf, int count, MPI_Datatype type,
                                            MPI_Comm comm) {
  if (count < 0) throw Error(key + ": negative element count " + std::to_string(count));
  return std::make_shared<DatatypeItem>(key, buf, count, type, comm);
}

}  // namespace revive::mpi
