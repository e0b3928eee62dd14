// What `kiln serve` answers under /api/: the run store as JSON for the dashboard's page (web/).
// Every answer comes from the read side of the store (core/store/history/queries.h, opened
// read-only per request), so no request can change it, a run being trained is read as it commits
// (SQLite's WAL lets readers in beside the writer), and a store replaced on disk is read anew. No
// LibTorch and no HTTP: tools/kiln/serve_command.cpp carries these answers.
#pragma once

#include <string>

#include "core/app/presentation/dashboard_params.h"

namespace kiln {

// One answer: an HTTP status and its JSON body. Every body is an object with "store", the
// identity of the store that answered (a file's device and inode; a database URL as given), so
// the page can tell when the store it was showing has been replaced by another. A failure is
// {"error": "kiln: error: ..."}: the line the command line would print for the same mistake,
// with "gone": true when a run the page asked for is no longer in the store.
struct DashboardReply {
  int status = 200;
  std::string body;
};

// `endpoint` is the path after /api/:
//   runs     ?where=EXPR&sort=[-]KEY   the rows of `kiln runs list --format json`, filtered and
//                                      sorted by the --where language
//   metrics  ?run=ID&after=S&evals_after=E
//                                      the run's metrics rows after step S and its validation
//                                      evals after step E, column by column, for live curves,
//                                      with the same steps' layer measures by name
//   run      ?run=ID                   a run page: summary, resolved config, evals, snapshots,
//                                      resumes
//   compare  ?runs=ID,ID...&group_by=auto|KEY,KEY&metric=M&x=X&smooth=K&band=ci|minmax
//                                      config keys that differ, the layer measures there are to
//                                      pick as M, and with group_by the seeds' grouped report and
//                                      the mean curve of each group in its band
//   ladder   ?sweep=NAME               an asha sweep's rungs, each with its members best first:
//                                      value of the metric at the rung's step, place, state
// Anything else is a 404.
DashboardReply dashboard_api(const std::string& db_path, const std::string& endpoint,
                             const DashboardParams& params);

}  // namespace kiln
