// Keys spread over the ranks (add_distributed / add_replicated) and the restart that reads a version
// written by another number of ranks: each rank reads its new block's parts from the old ranks' files.
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "applevel/checkpoint_impl.h"

namespace revive {

void Checkpoint::Impl::SetLayout(const std::string& key, Layout layout, storage::Block block, uint64_t global_n,
                                 uint64_t unit) {
  // Called right after the Add() of the same key (the public templates), so it is the last entry.
  if (entries.empty() || entries.back().key != key) throw Error(Where() + ": key '" + key + "': layout of no key");
  Entry& e = entries.back();
  e.layout = layout;
  e.block = block;
  e.dist.key = key;
  e.dist.global_n = global_n;
  e.dist.unit = unit;
  if (layout == Layout::kDistributed && !e.item->direct())
    throw Error(Where() + ": key '" + key + "': only plain arrays and vectors can be distributed");
}

// Every rank sends "offset count global_n unit" per distributed key; every rank then checks the same
// gathered table, so all of them accept it or all throw the same error.
void Checkpoint::Impl::GatherLayouts() {
  std::string mine;
  size_t n = 0;
  for (const auto& e : entries)
    if (e.layout == Layout::kDistributed) {
      char b[96];
      std::snprintf(b, sizeof b, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 ";", e.block.offset, e.block.count,
                    e.dist.global_n, e.dist.unit);
      mine += b;
      ++n;
    }
  // No distributed key anywhere: nothing to exchange (and Comms of tests need no allgather).
  if (!comm->allreduce_max_u64(n)) return;
  const std::vector<std::string> all = comm->allgather_string(mine);
  // Each rank checks the same table, but a rank whose own registration differs (a programming error)
  // would see other errors than the rest: agree, so that every rank throws, none waits in a collective.
  std::string err;
  for (auto& e : entries)
    if (e.layout == Layout::kDistributed) e.dist.blocks.assign(all.size(), {});
  for (size_t r = 0; r < all.size() && err.empty(); ++r) {
    const char* p = all[r].c_str();
    for (auto& e : entries) {
      if (e.layout != Layout::kDistributed) continue;
      uint64_t o, c, g, u;
      int used = 0;
      if (std::sscanf(p, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 ";%n", &o, &c, &g, &u, &used) != 4) {
        err = "key '" + e.key + "' is distributed on some ranks but not on rank " + std::to_string(r) +
              " (every rank must register the same keys alike)";
        break;
      }
      p += used;
      if (g != e.dist.global_n || u != e.dist.unit) {
        err = "distributed key '" + e.key + "': rank " + std::to_string(r) + " declares " + std::to_string(g) +
              " x " + std::to_string(u) + " elements, rank " + std::to_string(comm->rank()) + " " +
              std::to_string(e.dist.global_n) + " x " + std::to_string(e.dist.unit);
        break;
      }
      e.dist.blocks[r] = {o, c};
    }
  }
  for (const auto& e : entries)
    if (err.empty() && e.layout == Layout::kDistributed) {
      Status s = storage::CheckTiling(e.dist);
      if (!s.ok()) err = "add_distributed: " + s.message();
    }
  if (!comm->allreduce_and(err.empty()))
    throw Error(Where() + ": " + (err.empty() ? "the distributed keys' registrations differ on another rank" : err));
}

storage::Layouts Checkpoint::Impl::MakeLayouts() const {
  storage::Layouts l;
  for (const auto& e : entries) {
    if (e.layout == Layout::kDistributed) l.distributed.push_back(e.dist);
    if (e.layout == Layout::kReplicated) l.replicated.push_back(e.key);
  }
  return l;
}

bool Checkpoint::Impl::Redistributes(const storage::Manifest& m, const Entry& e) const {
  if (e.layout != Layout::kDistributed) return false;
  const storage::Distribution* d = m.layouts.Find(e.key);
  if (!d) return false;  // written private with as many ranks (CheckLayouts): read as such
  return m.ranks != static_cast<uint32_t>(comm->size()) || d->blocks[static_cast<size_t>(comm->rank())] != e.block;
}

Status Checkpoint::Impl::CheckLayouts(const storage::Manifest& m, const std::string& vdir) const {
  const bool other = m.ranks != static_cast<uint32_t>(comm->size());
  const std::string counts = vdir + " was written by " + std::to_string(m.ranks) + " ranks, this run has " +
                             std::to_string(comm->size());
  if (other && !m.shared_file.empty())
    return Status::InvalidArgument(counts + ": it was written in shared-file mode (MPI-IO), and a restart with "
                                   "another number of ranks reads per-rank files only");
  for (const auto& e : entries) {
    const storage::Distribution* d = m.layouts.Find(e.key);
    switch (e.layout) {
      case Layout::kPrivate:
        if (other)
          return Status::InvalidArgument(counts + ": key '" + e.key + "' is private to each rank (added with add()); "
                                         "another number of ranks needs every key added with add_distributed() "
                                         "or add_replicated()");
        break;
      case Layout::kReplicated:
        if (other && !m.layouts.IsReplicated(e.key))
          return Status::InvalidArgument(counts + ": key '" + e.key + "' is replicated in this program but " + vdir +
                                         " holds it private to each rank");
        break;
      case Layout::kDistributed:
        if (!d) {
          if (other)
            return Status::InvalidArgument(counts + ": key '" + e.key + "' is distributed in this program but " +
                                           vdir + " holds it private to each rank");
          break;
        }
        if (d->global_n != e.dist.global_n || d->unit != e.dist.unit)
          return Status::InvalidArgument("distributed key '" + e.key + "': " + vdir + " holds " +
                                         std::to_string(d->global_n) + " x " + std::to_string(d->unit) +
                                         " elements, this run declares " + std::to_string(e.dist.global_n) + " x " +
                                         std::to_string(e.dist.unit) + " (the global size must not change)");
        if (!m.shared_file.empty() && Redistributes(m, e))
          return Status::InvalidArgument("distributed key '" + e.key + "': " + vdir +
                                         " was written in shared-file mode (MPI-IO) with other blocks; such a "
                                         "version is read with the blocks it was written with only");
        break;
    }
  }
  return Status::OK();
}

Status Checkpoint::Impl::OpenParts(uint64_t v, const storage::Manifest& m, const Entry& e, std::vector<Part>* parts) {
  const storage::Distribution& d = *m.layouts.Find(e.key);
  const uint64_t unit_bytes = e.dist.unit * e.item->type().elem_size;
  for (const storage::Piece& p : storage::Overlaps(d, e.block)) {
    Part part;
    const std::string path = store.DataPath(v, e.key, static_cast<int>(p.rank), static_cast<int>(m.ranks));
    Status s = storage::DataFileReader::Open(env, path, &part.reader);
    const uint64_t want = d.blocks[p.rank].count * d.unit;
    if (s.ok()) s = CheckType(part.reader->header(), path, *e.item, e.key, &want);
    if (!s.ok()) return s;
    part.src = p.src * unit_bytes;
    part.dst = p.dst * unit_bytes;
    part.len = p.count * unit_bytes;
    parts->push_back(std::move(part));
  }
  return Status::OK();
}

// Each old file's payload checksum covers the whole payload, so a part is verified by reading that file
// in full (ReadPayloadRange); only the part's bytes reach user memory.
Status Checkpoint::Impl::ReadParts(Entry& e, std::vector<Part>& parts) {
  char* dst = static_cast<char*>(e.item->dest(e.block.count * e.dist.unit));
  for (Part& p : parts) {
    Status s = p.reader->ReadPayloadRange(p.src, p.len, dst + p.dst);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace revive
