#!/usr/bin/env bash
# Sweeps that stop early: on the default experiment's space (optimizer.lr log-uniform
# over 1e-4..3e-2, schedule.warmup, optimizer.weight_decay), 27 trials of 400 steps, with
# --jobs 2, for each sweep seed (default 1 2 3) and each method of METHODS (default all):
#   random             every trial trained to step 400 on the base's cosine
#   random-wsd         the same, on a wsd schedule (decay over the last 20%)
#   asha               the same 27 trials (the same seed draws the same values), min_steps 25,
#                      reduction_factor 3: rungs at 25, 75, 225, 400 (cosine)
#   tpe-asha           TPE proposes (10 random startup trials), ASHA stops
#   asha-cooldown      wsd; rungs 50, 150, 400 scored by cooldown probes of 20% of the rung's
#                      steps (min_steps 50: the space's warmup reaches 50, and a probe branches
#                      the stable phase, after it)
#   asha-sf            schedule-free AdamW on a constant schedule, rungs 50, 150, 400, no probes
#   tpe-asha-cooldown  TPE + ASHA with the cooldown probes
# Per sweep: optimizer steps spent (every member's last step: a promoted member resumes, it
# does not retrain; plus the cooldown probes' steps), wall time, and the best val_loss at step
# 400 of the members that got there.
# Steps and losses are exact (members run at a fixed 1 thread each); wall times are comparable only
# within one sitting on a quiet machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds=${SEEDS:-"1 2 3"}
[[ -n "$(ls data/kjv_char/train_*.bin 2>/dev/null)" ]] || { echo "bench: run tools/setup.sh first" >&2; exit 2; }
scratch=${KILN_BENCH_DIR:-$(mktemp -d /tmp/kiln-bench-asha.XXXXXX)}
mkdir -p "$scratch"
cp build/kiln "$scratch/kiln"  # members run /proc/self/exe: a rebuild meanwhile changes nothing
echo "== $(uname -n), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 "model name" /proc/cpuinfo

# sweep NAME SEED SEARCH_LINES [SET_LINES]: writes the sweep file, runs it, prints its row
sweep() {
  local file="$scratch/$1.toml" start end
  cat > "$file" <<TOML
base = "$PWD/experiments/kjv_char.toml"
name = "$1"
[set]
run.out_dir = "$scratch/runs"
${4:-}
[search]
seed = $2
trials = 27
metric = "val_loss"
$3
[space]
optimizer.lr = { log_uniform = [1e-4, 3e-2] }
schedule.warmup = { int_uniform = [0, 50] }
optimizer.weight_decay = { uniform = [0.0, 0.2] }
TOML
  start=$(date +%s.%N)
  "$scratch/kiln" sweep "$file" --jobs 2 --db "$scratch/runs.db" > "$scratch/$1.log" 2>&1 || {
    echo "bench: sweep $1 failed: $scratch/$1.log" >&2; exit 1; }
  end=$(date +%s.%N)
  sqlite3 -separator ' ' "$scratch/runs.db" "
    select '$1', (select sum(s) from (select max(m.step) as s from metrics m join runs r
                   on r.id = m.run_id where r.sweep = '$1' group by r.id))
                 + (select coalesce(sum(p.cooldown_steps), 0) from rung_probes p join runs r
                   on r.id = p.run_id where r.sweep = '$1'),
           printf('%.1f', $end - $start),
           (select printf('%.4f', min(e.loss)) from evals e join runs r on r.id = e.run_id
             where r.sweep = '$1' and e.split = 'val' and e.step = 400),
           (select count(*) from runs where sweep = '$1' and status = 'completed')"
}

wsd=$'schedule.type = "wsd"\nschedule.decay_fraction = 0.2'
sf=$'optimizer.type = "schedule_free_adamw"\nschedule.type = "constant"'
methods=${METHODS:-"random random-wsd asha tpe-asha asha-cooldown asha-sf tpe-asha-cooldown"}
echo "sweep steps wall_s best_val_at_400 members_at_400"
for seed in $seeds; do
  for method in $methods; do
    case $method in
      random) sweep "random-s$seed" "$seed" 'type = "random"' ;;
      random-wsd) sweep "random-wsd-s$seed" "$seed" 'type = "random"' "$wsd" ;;
      asha) sweep "asha-s$seed" "$seed" $'type = "asha"\nmin_steps = 25\nreduction_factor = 3' ;;
      tpe-asha)
        sweep "tpe-asha-s$seed" "$seed" $'type = "asha"\nsampler = "tpe"\nstartup = 10\nmin_steps = 25' ;;
      asha-cooldown)
        sweep "asha-cooldown-s$seed" "$seed" $'type = "asha"\nmin_steps = 50\nrung_cooldown = 0.2' "$wsd" ;;
      asha-sf) sweep "asha-sf-s$seed" "$seed" $'type = "asha"\nmin_steps = 50' "$sf" ;;
      tpe-asha-cooldown)
        sweep "tpe-asha-cooldown-s$seed" "$seed" \
          $'type = "asha"\nsampler = "tpe"\nstartup = 10\nmin_steps = 50\nrung_cooldown = 0.2' "$wsd" ;;
      *) echo "bench: unknown method $method" >&2; exit 2 ;;
    esac
  done
done
echo "(full length: 27 x 400 = 10800 steps per sweep; logs and store in $scratch)"
