#include "core/store/runs/rung_probes.h"

#include "core/store/runs/lookup.h"

namespace kiln {

void write_rung_probe(Connection& db, int64_t run_id, int64_t step, const RungProbe& probe) {
  Statement(db,
            "INSERT OR REPLACE INTO rung_probes (run_id, step, cooldown_steps, val_loss) VALUES "
            "(?, ?, ?, ?)",
            {run_id, step, probe.steps, probe.val_loss})
      .step();
}

std::map<int64_t, RungProbe> read_rung_probes(Connection& db, int64_t run_id) {
  std::map<int64_t, RungProbe> probes;
  if (!has_table(db, "rung_probes")) return probes;
  Statement q(db, "SELECT step, cooldown_steps, val_loss FROM rung_probes WHERE run_id = ?",
              {run_id});
  while (q.step())
    probes[q.integer(0)] = RungProbe{q.integer(1), q.real(2)};
  return probes;
}

}  // namespace kiln
