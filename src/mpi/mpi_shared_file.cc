// Shared-file mode over MPI-IO (storage/shared_file.h): every rank writes its records into one file per
// version with MPI_File_write_at_all at the exclusive prefix sum (MPI_Exscan) of the ranks' sizes, and
// reads its range back with MPI_File_read_at_all.
//
// Everything runs on a private duplicate of the checkpoint's communicator, used by nothing else: the async
// writer thread can then run these collectives while the application thread uses MPI (which needs
// MPI_THREAD_MULTIPLE; Checkpoint refuses async shared-file mode without it).
//
// Every collective is called by every rank whatever happened before on that rank (a failed rank writes
// zero bytes), so a local failure is an error on the ranks, never a hang; errors are then agreed by the
// library's own collective (Checkpoint::Impl::Finish / RestartIfNeeded).
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "mpi_comm.h"
#include "storage/shared_file.h"

namespace revive::mpi {
namespace {

std::string MpiError(int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string(msg, static_cast<size_t>(len));
}

// Pieces of at most 1 GiB: MPI counts and block lengths are int.
constexpr size_t kPiece = size_t{1} << 30;
// Writes go out in windows of 8 MiB (one collective call each), and each rank streams its own range out of
// the page cache as in file-per-rank mode (core/env_posix.cc): writeback of a window starts when it is
// written, and what lies two windows behind is waited for and dropped (POSIX_FADV_DONTNEED). Why: on this
// VM every fresh page-cache page costs a host fault (free page reporting); measured 2 ranks x 256 MiB, one
// write_at_all per rank ran at 0.1-0.2 GB/s like a raw write+fsync of new files, file-per-rank mode
// (streamed) at 0.6-0.8 GB/s.
constexpr uint64_t kWindow = uint64_t{8} << 20;

// The part [from, to) of the rank's byte stream (the concatenated spans) as MPI blocks.
void Blocks(const std::vector<storage::Span>& spans, uint64_t from, uint64_t to, std::vector<int>* lens,
            std::vector<MPI_Aint>* addrs) {
  lens->clear();
  addrs->clear();
  uint64_t at = 0;
  for (const auto& sp : spans) {
    const uint64_t a = std::max(at, from), b = std::min(at + sp.size, to);
    if (a < b) {
      MPI_Aint addr = 0;
      MPI_Get_address(static_cast<const char*>(sp.data) + (a - at), &addr);
      addrs->push_back(addr);
      lens->push_back(static_cast<int>(b - a));  // < kWindow
    }
    at += sp.size;
    if (at >= to) break;
  }
}

const char* LevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

class MpiSharedFileIO final : public storage::SharedFileIO {
 public:
  explicit MpiSharedFileIO(MPI_Comm comm) {
    MPI_Comm_dup(comm, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiSharedFileIO() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  bool ThreadsAllowed(std::string* level_name) const override {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level_name) *level_name = LevelName(level);
    return level == MPI_THREAD_MULTIPLE;
  }

  Status Write(const std::string& path, const std::vector<storage::Span>& spans, uint64_t checksum,
               std::vector<storage::RankRange>* ranges) override {
    ranges->clear();
    uint64_t mine = 0;
    for (const auto& sp : spans) mine += sp.size;
    uint64_t offset = 0;
    // MPI_Exscan leaves rank 0's result undefined: it starts at 0.
    MPI_Exscan(&mine, &offset, 1, MPI_UINT64_T, MPI_SUM, comm_);
    if (rank_ == 0) offset = 0;

    Status s;
    MPI_File fh = MPI_FILE_NULL;
    int rc = MPI_File_open(comm_, path.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) s = Status::IOError(path + ": MPI_File_open failed: " + MpiError(rc));
    // The open is collective, but if it failed on some ranks only, the others must not enter the
    // collective writes alone.
    if (!AllOk(s.ok())) {
      if (s.ok()) s = Status::IOError(path + ": MPI_File_open failed on another rank");
      return s;  // a handle opened here is leaked rather than closed (closing is collective too)
    }
    if (rc == MPI_SUCCESS) {
      // Open MPI's default handler for files is MPI_ERRORS_RETURN, but say so: a failed write must be a
      // Status, not an abort.
      MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    }

    // Each window of the rank's spans (headers, user memory, trailers) is one hindexed datatype at absolute
    // addresses, written straight from user memory. Every rank makes as many collective calls as the rank
    // with the most windows (the others write nothing in the extra calls).
    uint64_t windows = (mine + kWindow - 1) / kWindow, most = 0;
    MPI_Allreduce(&windows, &most, 1, MPI_UINT64_T, MPI_MAX, comm_);
    // A plain descriptor of the same file for the page-cache streaming; without it (any failure) the
    // final sync does all the work.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    std::vector<int> lens;
    std::vector<MPI_Aint> addrs;
    uint64_t written = 0;
    for (uint64_t w = 0; w < most; ++w) {
      const uint64_t from = std::min(mine, w * kWindow), to = std::min(mine, from + kWindow);
      Blocks(spans, from, to, &lens, &addrs);
      MPI_Datatype type = MPI_BYTE;
      int count = 0;
      if (!lens.empty()) {
        MPI_Type_create_hindexed(static_cast<int>(lens.size()), lens.data(), addrs.data(), MPI_BYTE, &type);
        MPI_Type_commit(&type);
        count = 1;
      }
      MPI_Status st;
      const MPI_Offset at = static_cast<MPI_Offset>(offset + from);
      rc = MPI_File_write_at_all(fh, at, count ? MPI_BOTTOM : nullptr, count, type, &st);
      if (rc != MPI_SUCCESS && s.ok())
        s = Status::IOError(path + ": rank " + std::to_string(rank_) + ": MPI_File_write_at_all of " +
                            std::to_string(to - from) + " bytes at offset " + std::to_string(at) + " failed: " +
                            MpiError(rc));
      if (rc == MPI_SUCCESS && count) {
        MPI_Count n = 0;
        MPI_Get_elements_x(&st, MPI_BYTE, &n);
        written += static_cast<uint64_t>(n);
        MPI_Type_free(&type);
      } else if (count) {
        MPI_Type_free(&type);
      }
      if (fd >= 0 && to > from) {
        ::sync_file_range(fd, at, static_cast<off_t>(to - from), SYNC_FILE_RANGE_WRITE);
        if (w >= 2) {
          const off_t old = static_cast<off_t>(offset + (w - 2) * kWindow);
          ::sync_file_range(fd, old, static_cast<off_t>(kWindow),
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
          ::posix_fadvise(fd, old, static_cast<off_t>(kWindow), POSIX_FADV_DONTNEED);
        }
      }
    }
    if (s.ok() && written != mine)
      s = Status::IOError(path + ": rank " + std::to_string(rank_) + ": short write (" + std::to_string(written) +
                          " of " + std::to_string(mine) + " bytes)");
    // Durable before rank 0 publishes the manifest (which also fsyncs the directory).
    rc = MPI_File_sync(fh);
    if (rc != MPI_SUCCESS && s.ok())
      s = Status::IOError(path + ": rank " + std::to_string(rank_) + ": MPI_File_sync failed: " + MpiError(rc));
    rc = MPI_File_close(&fh);
    if (rc != MPI_SUCCESS && s.ok()) s = Status::IOError(path + ": MPI_File_close failed: " + MpiError(rc));
    if (fd >= 0) {
      ::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(mine), POSIX_FADV_DONTNEED);  // durable now
      ::close(fd);
    }

    // Rank 0 records every rank's range in the manifest.
    const uint64_t me[3] = {offset, mine, checksum};
    std::vector<uint64_t> all(rank_ == 0 ? 3 * static_cast<size_t>(size_) : 0);
    MPI_Gather(me, 3, MPI_UINT64_T, all.data(), 3, MPI_UINT64_T, 0, comm_);
    if (rank_ == 0)
      for (int r = 0; r < size_; ++r) ranges->push_back({all[3 * r], all[3 * r + 1], all[3 * r + 2]});
    return s;
  }

  Status Read(const std::string& path, const storage::RankRange& range, void* buf) override {
    Status s;
    MPI_File fh = MPI_FILE_NULL;
    int rc = MPI_File_open(comm_, path.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
      int cls = 0;
      MPI_Error_class(rc, &cls);
      s = cls == MPI_ERR_NO_SUCH_FILE ? Status::NotFound(path + ": shared file is missing")
                                      : Status::IOError(path + ": MPI_File_open failed: " + MpiError(rc));
    }
    if (!AllOk(s.ok())) {
      if (s.ok()) s = Status::IOError(path + ": MPI_File_open failed on another rank");
      return s;
    }
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    MPI_Offset size = 0;
    rc = MPI_File_get_size(fh, &size);
    uint64_t want = range.length;
    if (rc != MPI_SUCCESS) {
      s = Status::IOError(path + ": MPI_File_get_size failed: " + MpiError(rc));
      want = 0;
    } else if (range.offset + range.length > static_cast<uint64_t>(size)) {
      s = Status::Corruption(path + ": truncated: rank " + std::to_string(rank_) + "'s bytes [" +
                             std::to_string(range.offset) + ", " + std::to_string(range.offset + range.length) +
                             ") end beyond the file's " + std::to_string(size) + " bytes");
      want = 0;  // still take part in the collective reads, with nothing to read
    }
    // Every rank must make the same number of collective calls: the most pieces any rank needs.
    uint64_t pieces = (want + kPiece - 1) / kPiece, most = 0;
    MPI_Allreduce(&pieces, &most, 1, MPI_UINT64_T, MPI_MAX, comm_);
    char* p = static_cast<char*>(buf);
    for (uint64_t i = 0; i < most; ++i) {
      uint64_t at = i * kPiece;
      int n = at < want ? static_cast<int>(std::min<uint64_t>(kPiece, want - at)) : 0;
      MPI_Status st;
      rc = MPI_File_read_at_all(fh, static_cast<MPI_Offset>(range.offset + at), n ? p + at : nullptr, n, MPI_BYTE, &st);
      if (rc != MPI_SUCCESS && s.ok())
        s = Status::IOError(path + ": rank " + std::to_string(rank_) + ": MPI_File_read_at_all failed: " + MpiError(rc));
      int got = 0;
      if (rc == MPI_SUCCESS && n) MPI_Get_count(&st, MPI_BYTE, &got);
      if (rc == MPI_SUCCESS && got != n && s.ok())
        s = Status::Corruption(path + ": rank " + std::to_string(rank_) + ": short read at offset " +
                               std::to_string(range.offset + at));
    }
    rc = MPI_File_close(&fh);
    if (rc != MPI_SUCCESS && s.ok()) s = Status::IOError(path + ": MPI_File_close failed: " + MpiError(rc));
    return s;
  }

 private:
  bool AllOk(bool ok) {
    int in = ok ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm_);
    return out != 0;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::shared_ptr<storage::SharedFileIO> MpiComm::open_shared_file_io() {
  return std::make_shared<MpiSharedFileIO>(comm_);
}

}  // namespace revive::mpi
