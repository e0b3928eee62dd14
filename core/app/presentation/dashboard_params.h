// The query string of a dashboard request (core/app/presentation/dashboard_api.h) as its views
// read it: a value or its fallback, a whole number, the run id a view needs, a comma-separated
// list. A value that is not what its key takes is a UserError, which the page shows in the
// command line's words.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

using DashboardParams = std::multimap<std::string, std::string>;

// The value of `key`, or `fallback` when it is missing or empty.
std::string param(const DashboardParams& params, const std::string& key,
                  const std::string& fallback = "");

// `text`, the value of `key`, as a whole number >= 0.
int64_t parse_whole(const std::string& key, const std::string& text);

// The value of `key` as a whole number >= 0, or `fallback` when it is missing.
int64_t whole_param(const DashboardParams& params, const std::string& key, int64_t fallback);

// A run id the page must give: run=ID.
int64_t required_id(const DashboardParams& params, const std::string& key);

// The comma-separated items of `key`, empty ones left out.
std::vector<std::string> list_param(const DashboardParams& params, const std::string& key);

}  // namespace kiln
