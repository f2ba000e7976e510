// Host side of the plugin interface: runs each plugin's events in list order and carries their sections
// between process memory and the image without malloc (mmap-backed buffers).
#include <errno.h>
#include <sys/mman.h>

#include "inject/engine.h"
#include "inject/plugin.h"
#include "plugins/plugins.h"
#include "inject/sys.h"

namespace revive::inject {
namespace {

class BufWriter final : public SectionWriter {
 public:
  explicit BufWriter(Buf* b) : b_(b) {}
  bool write(const void* data, size_t len) override { return b_->put(data, len); }

 private:
  Buf* b_;
};

class SpanReader final : public SectionReader {
 public:
  SpanReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool read(void* data, size_t len) override {
    if (len > n_) return false;
    sys::copy(data, p_, len);
    p_ += len;
    n_ -= len;
    return true;
  }
  size_t remaining() const override { return n_; }

 private:
  const uint8_t* p_;
  size_t n_;
};

void add_error(char* err, size_t n, const char* plugin, const char* what) {
  sys::append(err, n, "plugin ");
  sys::append(err, n, plugin);
  sys::append(err, n, ": ");
  sys::append(err, n, what);
}

}  // namespace

bool plugins_init() {
  for (size_t i = 0; i < kPluginCount; ++i) {
    const Plugin* p = kPlugins[i];
    if (p && p->init && p->init() != 0) {
      sys::log(0, "plugin init failed: ", p->name);
      return false;
    }
  }
  return true;
}

namespace {
char g_refusal[400];  // only the checkpoint thread runs save
}  // namespace

void plugin_refusal(const char* text) {
  g_refusal[0] = 0;
  sys::append(g_refusal, sizeof g_refusal, text);
}

namespace {
// Pre-images (files plugin) are for the program's own changes, not for what the plugins write back.
struct QuietFiles {
  QuietFiles() { preimage_quiet(true); }
  ~QuietFiles() { preimage_quiet(false); }
};
}  // namespace

bool plugins_save(char* err, size_t err_len) {
  QuietFiles quiet;
  g.plugin_out_count = 0;
  g_refusal[0] = 0;
  for (size_t i = 0; i < kPluginCount && g.plugin_out_count < kMaxPluginSections; ++i) {
    const Plugin* p = kPlugins[i];
    if (!p || !p->save) continue;
    PluginOut* o = &g.plugin_out[g.plugin_out_count++];
    o->name = p->name;
    o->version = p->version;
    o->data = Buf{nullptr, 0, 0};
    BufWriter w(&o->data);
    int rc = p->save(w);
    if (o->data.p && g.excl_count < sizeof g.excl / sizeof g.excl[0]) {
      // Not part of the process: keep the buffer out of the image's memory.
      g.excl[g.excl_count][0] = reinterpret_cast<uint64_t>(o->data.p);
      g.excl[g.excl_count][1] = reinterpret_cast<uint64_t>(o->data.p) + o->data.cap;
      ++g.excl_count;
    }
    if (rc != 0) {
      g.save_again = rc == -EAGAIN;
      add_error(err, err_len, p->name,
                g_refusal[0]      ? g_refusal
                : rc == -EAGAIN   ? "refused for now (a fork or spawn is in progress)"
                                  : "save failed");
      return false;
    }
  }
  return true;
}

void plugins_resume(bool ok) {
  for (size_t i = 0; i < kPluginCount; ++i)
    if (kPlugins[i] && kPlugins[i]->resume) kPlugins[i]->resume(ok);
}

void plugins_restored(uint64_t gen) {
  for (size_t i = 0; i < kPluginCount; ++i)
    if (kPlugins[i] && kPlugins[i]->restored) kPlugins[i]->restored(gen);
}

bool plugins_phase(const char* name, uint64_t gen, char* err, size_t err_len) {
  for (size_t i = 0; i < kPluginCount; ++i) {
    const Plugin* p = kPlugins[i];
    if (!p) continue;
    int (*fn)(uint64_t, char*, size_t) = nullptr;
    if (sys::starts_with(name, "drain")) fn = p->drain;
    else if (sys::starts_with(name, "reconnect")) fn = p->reconnect;
    else if (sys::starts_with(name, "refill")) fn = p->refill;
    if (!fn) continue;
    char msg[400] = "";
    if (fn(gen, msg, sizeof msg) != 0) {
      add_error(err, err_len, p->name, msg[0] ? msg : name);
      return false;
    }
  }
  return true;
}

void plugins_free_output() {
  for (uint32_t i = 0; i < g.plugin_out_count; ++i) g.plugin_out[i].data.release();
  g.plugin_out_count = 0;
  g.excl_count = g.excl_fixed;  // drop the plugin buffers
}

bool plugins_restore(const image::RestartInfo& ri, char* err, size_t err_len) {
  QuietFiles quiet;
  for (size_t i = 0; i < kPluginCount; ++i) {
    const Plugin* p = kPlugins[i];
    if (!p || !p->restore) continue;
    const uint8_t* rec = nullptr;
    const image::PluginBlob* hdr = nullptr;
    if (ri.magic == image::kRestartInfoMagic) {
      const uint8_t* q = reinterpret_cast<const uint8_t*>(ri.blob_addr + ri.plugins_off);
      const uint8_t* end = q + ri.plugins_len;
      while (q + sizeof(image::PluginBlob) <= end) {
        auto* h = reinterpret_cast<const image::PluginBlob*>(q);
        char name[sizeof h->name + 1];
        sys::copy(name, h->name, sizeof h->name);
        name[sizeof h->name] = 0;
        size_t nl = sys::slen(p->name);
        if (sys::slen(name) == nl && sys::starts_with(name, p->name)) {
          hdr = h;
          rec = q + sizeof *h;
          break;
        }
        q += sizeof *h + (h->length + 7) / 8 * 8;
      }
    }
    if (!hdr) {
      add_error(err, err_len, p->name, "the image has no section for this plugin");
      return false;
    }
    const uint32_t oldest = p->oldest_version ? p->oldest_version : p->version;
    if (hdr->version > p->version || hdr->version < oldest) {
      add_error(err, err_len, p->name, "section version in the image differs from this plugin's version ");
      sys::append_u64(err, err_len, p->version);
      return false;
    }
    SpanReader r(rec, hdr->length);
    char msg[400] = "";
    if (p->restore(r, msg, sizeof msg) != 0) {
      add_error(err, err_len, p->name, msg[0] ? msg : "restore failed");
      return false;
    }
  }
  return true;
}

}  // namespace revive::inject
