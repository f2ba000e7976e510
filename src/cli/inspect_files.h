// The files plugin's section of an image, as `revive inspect` reports it (inspect_files.cpp).
#pragma once

#include <stdint.h>

#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "image/view.h"

namespace revive::cli {

// One JSON object per file the image writes back at restore (path, origin, size, how it is stored); for a
// file stored by blocks, every block beside the image is checked (present, its length, its XXH3-128).
// Each problem adds 1 to *bad; the first one's message (naming image, file, block) goes to *first_bad.
// check_blocks false: the blocks are not read (only the section is parsed).
nlohmann::json InspectFiles(const image::View& v, const std::string& image_path, uint64_t* bad,
                            std::string* first_bad, bool check_blocks = true);

// The paths of the files the images at `image_paths` write back at restore (every origin but the working
// directory's listing). An image that cannot be read adds nothing (the restart names it later).
std::vector<std::string> FilesRestoredFrom(const std::vector<std::string>& image_paths);

}  // namespace revive::cli
