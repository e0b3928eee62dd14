// The dashboard's page (web/ and the uPlot files tools/setup.sh fetched into web/vendor/),
// compiled into the kiln binary by cmake/embed_web.cmake. `kiln serve` answers a URL path only
// with one of these, by exact match: no file is ever opened from a path a request names, so
// `/../`, encoded dots and absolute paths have nothing to reach.
#pragma once

#include <cstddef>

namespace kiln {

struct WebAsset {
  const char* path;  // the URL path: "/index.html", "/uPlot.iife.min.js", ...
  const char* content_type;
  const unsigned char* data;
  size_t size;
};

// Every asset, ended by one whose path is null.
extern const WebAsset kWebAssets[];

}  // namespace kiln
