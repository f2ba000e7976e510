// On-disk layout of a transparent checkpoint image (".rimg"). Plain C structs, native little-endian
// x86-64, fixed widths, so the injected library writes them and the static restart program reads them
// without any serialisation code. Described for humans in docs/image-format.md; bump kFormatVersion on
// any change here.
//
// File:  [FileHeader, padded to 4096] [data chunks, each page-aligned when uncompressed]
//        [sections (engine + plugin), 8-aligned] [section directory] [Trailer (last 64 bytes)]
// Data comes first so it can be streamed straight from process memory while the tables (which are only
// complete at the end) follow; the header is rewritten last and the trailer makes truncation evident.
#pragma once

#include <stdint.h>

namespace revive::image {

constexpr char kMagic[8] = {'R', 'V', 'I', 'M', 'G', '\r', '\n', '\x1a'};
constexpr char kTrailerMagic[8] = {'R', 'V', 'I', 'M', 'G', 'E', 'N', 'D'};
// 2: adds the "shm" engine section (shared memory objects, saved once per computation). Version 1 images
// (no such section) are still read: their shared regions come back as before, one copy per process.
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kFormatVersionMin = 1;
constexpr uint32_t kArchX86_64 = 62;  // EM_X86_64
constexpr uint64_t kHeaderSize = 4096;

enum HeaderFlags : uint32_t {
  kFlagCompressed = 1u << 0,  // data chunks are zstd frames (stored_len < len possible)
  kFlagSparse = 1u << 1,      // untouched and all-zero pages are absent (always set by the writer)
  kFlagForked = 1u << 2,      // written by a forked child from a copy-on-write snapshot
};

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t arch;
  uint32_t page_size;
  uint32_t flags;
  uint64_t dir_offset;  // section directory
  uint32_t dir_count;   // entries in it
  uint32_t reserved0;
  uint64_t file_size;   // whole file, trailer included
  uint64_t pid;         // kernel pid at checkpoint
  uint64_t upid;        // coordinator's id (pid when standalone)
  uint64_t generation;
  uint64_t created_unix_ns;
  char kernel[65];      // uname release
  char glibc[31];       // gnu_get_libc_version()
  char prog[64];        // basename of the program
  uint64_t header_xxh3; // XXH3-64 of the bytes before this field
};

enum SectionKind : uint32_t { kKindEngine = 1, kKindPlugin = 2 };

// Engine section names (kind engine).
constexpr const char* kSecProcess = "process";
constexpr const char* kSecThreads = "threads";
constexpr const char* kSecRegions = "regions";
constexpr const char* kSecChunks = "chunks";
constexpr const char* kSecShm = "shm";  // optional (format 2): ShmRecord[]

struct SectionEntry {
  char name[24];      // nul-terminated
  uint32_t kind;      // SectionKind
  uint32_t version;   // schema version of the payload
  uint64_t offset;
  uint64_t length;
  uint64_t xxh3;      // of the payload
};

struct Trailer {
  char magic[8];
  uint64_t dir_offset;
  uint64_t dir_count;
  uint64_t file_size;
  uint64_t dir_xxh3;  // of the directory entries
  uint64_t reserved[2];
  uint64_t trailer_xxh3;  // of the bytes before this field
};
static_assert(sizeof(Trailer) == 64);

// --- engine section payloads ---

constexpr uint32_t kProcessVersion = 1;
struct ProcessInfo {
  // mm fields from /proc/self/stat, for prctl(PR_SET_MM_MAP) on restore.
  uint64_t start_code, end_code, start_data, end_data, start_brk, brk, start_stack;
  uint64_t arg_start, arg_end, env_start, env_end;
  // Special mappings of the checkpointed kernel (0 when absent).
  uint64_t vdso_start, vdso_end, vvar_start, vvar_end, vclock_start, vclock_end;
  uint64_t restart_info_addr;  // engine's RestartInfo in the restored memory
  uint64_t rseq_offset;        // glibc __rseq_offset (from the thread pointer); 0 = no rseq
  uint32_t rseq_size;          // length registered with the kernel
  uint32_t rseq_sig;
  uint32_t thread_count;
  uint32_t tid_offset;         // offset of struct pthread::tid from the thread pointer
  char exe[256];
};

constexpr uint32_t kThreadsVersion = 1;
// Where a suspended thread continues: callee-saved registers of a setjmp-like save inside the engine.
// The interrupted user context itself lives in the signal frame on the thread's stack (saved memory)
// and comes back with rt_sigreturn, so registers, FPU/AVX state, signal mask and sigaltstack are exact.
struct ThreadRecord {
  uint64_t tid;
  uint64_t fs_base;
  uint64_t ctx[8];  // rbx rbp r12 r13 r14 r15 rsp rip
  uint64_t robust_head, robust_len;
  uint64_t tid_addr;  // &struct pthread::tid (CLONE_PARENT_SETTID / CHILD_CLEARTID target)
  uint32_t is_main;   // the thread-group leader: becomes the restarter's own thread
  uint32_t is_ckpt;   // the engine's checkpoint thread
};

constexpr uint32_t kRegionsVersion = 1;
enum RegionFlags : uint32_t {
  kRegShared = 1u << 0,
  kRegGrowsDown = 1u << 1,
  kRegFile = 1u << 2,       // backed by a file that still exists: re-mapped from it
  kRegSpecial = 1u << 3,    // [vdso] [vvar] [vvar_vclock] [vsyscall]: never restored as data
  kRegSavedAll = 1u << 4,   // every non-zero page stored (anonymous, deleted file, shared anon, /dev/shm)
  kRegHeap = 1u << 5,
  kRegStack = 1u << 6,
  kRegFromImage = 1u << 7,  // pages mapped from an earlier image by a lazy restart: every page stored
  kRegShmObj = 1u << 8,     // a shared memory object's mapping: its ShmRecord (section "shm") says which
  kRegSharedFileAll = 1u << 9,  // with kRegShmObj: a disk file's shared writable mapping; every page below
                                // the file's end stored (a page not in memory may have been written since)
};
struct RegionRecord {
  uint64_t start, end;
  uint64_t file_offset;
  uint64_t dev, ino;
  uint64_t file_size;
  int64_t file_mtime_ns;
  uint32_t prot;        // PROT_*
  uint32_t flags;       // RegionFlags
  uint32_t first_chunk; // index into the chunk table
  uint32_t chunk_count;
  char path[256];       // as in /proc/self/maps ("" for anonymous, "[heap]", "... (deleted)")
};

constexpr uint32_t kChunksVersion = 1;
struct ChunkRecord {
  uint64_t addr;        // where the bytes go in the process
  uint64_t len;         // bytes in memory (multiple of the page size)
  uint64_t file_offset; // where the stored bytes are in the image
  uint64_t stored_len;  // == len unless compressed
  uint64_t xxh3;        // of the stored bytes
};

// Shared memory objects (docs/image-format.md "Shared memory"). Every shared mapping whose bytes only
// memory holds (shared anonymous, SysV, memfd, a deleted file, a file on tmpfs such as /dev/shm) is a
// mapping of one kernel object, named by (host, dev, ino); processes of one computation that map the
// same object restore one object and all map it. The bytes of each mapped range (offset, length) are
// stored once per checkpoint: by the first process to claim the range (an O_EXCL file in the checkpoint
// directory); the others store no chunks for that region and point at it with kShmBytesElsewhere.
constexpr uint32_t kShmVersion = 1;
enum ShmKind : uint32_t {
  kShmAnon = 1,      // MAP_SHARED|MAP_ANONYMOUS ("/dev/zero (deleted)")
  kShmSysV = 2,      // shmat ("/SYSV<key> (deleted)", inode = shmid)
  kShmMemfd = 3,     // "/memfd:<name> (deleted)"
  kShmDeleted = 4,   // another deleted file
  kShmTmpfsFile = 5, // an existing file on tmpfs (/dev/shm, a tmpfs /tmp): the file is the object
  kShmDiskFile = 6,  // an existing file on another filesystem, mapped shared and writable: the same, but
                     // every page below the file's end is stored (kRegSharedFileAll), resident or not
};
enum ShmFlags : uint32_t {
  kShmBytesElsewhere = 1u << 0,  // another image of the generation holds this range's bytes
  kShmSysvDest = 1u << 1,        // the SysV segment was marked for removal (IPC_RMID)
};
struct ShmRecord {
  uint32_t region;    // index into the regions table; that region has kRegShared | kRegShmObj
  uint32_t kind;      // ShmKind
  uint64_t host;      // XXH3-64 of the kernel's boot_id: equal dev:ino on another machine is another object
  uint64_t dev, ino;  // st_dev (makedev), inode; SysV: ino is the shmid
  uint64_t size;      // object size when known (SysV segsz, tmpfs file size), else 0
  uint32_t flags;     // ShmFlags
  int32_t sysv_key;   // SysV only
  uint32_t sysv_mode; // SysV only: permission bits
  int32_t sysv_id;    // SysV only: the shmid (== ino)
};
static_assert(sizeof(ShmRecord) == 56);

}  // namespace revive::image
