// The files plugin's section of an image, as `revive inspect` reports it (inspect_files.cpp).
#pragma once

#include <stdint.h>

#include <string>
#include <nlohmann/json.hpp>

#include "image/view.h"

namespace revive::cli {

// One JSON object per file the image writes back at restore (path, origin, size, how it is stored); for a
// file stored by blocks, every block beside the image is checked (present, its length, its XXH3-128).
// Each problem adds 1 to *bad; the first one's message (naming image, file, block) goes to *first_bad.
nlohmann::json InspectFiles(const image::View& v, const std::string& image_path, uint64_t* bad,
                            std::string* first_bad);

}  // namespace revive::cli
