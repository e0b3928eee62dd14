"""Optuna's TPESampler (Optuna 5.0.0, tools/requirements/tests.txt) on the objectives of
tests/support/tpe_objectives.h, against Kiln's TPE.

    python3 tpe_optuna.py KILN_REGRETS.json

KILN_REGRETS.json (written by tests/interop/tpe_optuna_test.cpp): {"trials": T, "startup": S,
"seeds": N, "objectives": {NAME: [Kiln's best score after T trials, for seeds 0..N-1]}}.
For each objective, Optuna's default TPESampler (seeded 0..N-1, n_startup_trials = S) minimises
the same function over the same space for T trials; prints one JSON line: per objective, Optuna's
best scores, both means, and Welch's t-test (scipy.stats.ttest_ind, equal_var=False) two-sided
and one-sided (H1: Kiln's mean regret is greater than Optuna's).
"""

import json
import math
import sys

import optuna
import scipy
from scipy import stats


def training(trial):
    # The default experiment's kind of space (training_space in tpe_objectives.h); the optimizer
    # does not matter to the score.
    lr = trial.suggest_float("optimizer.lr", 1e-4, 3e-2, log=True)
    wd = trial.suggest_float("optimizer.weight_decay", 0.0, 0.2)
    warmup = trial.suggest_int("schedule.warmup", 0, 50)
    trial.suggest_categorical("optimizer.type", ["adamw", "lion", "sgd"])
    a = math.log10(lr) - math.log10(2e-3)
    b = (wd - 0.05) / 0.2
    c = (warmup - 20) / 50
    return a * a + b * b + c * c


def quadratic(trial):
    x = trial.suggest_float("x", -10.0, 10.0)
    return (x - 3) ** 2


def main():
    kiln = json.load(open(sys.argv[1]))
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    objectives = {"training": training, "quadratic": quadratic}
    out = {"optuna": optuna.__version__, "scipy": scipy.__version__, "objectives": {}}
    for name, kiln_best in kiln["objectives"].items():
        best = []
        for seed in range(kiln["seeds"]):
            sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=kiln["startup"])
            study = optuna.create_study(direction="minimize", sampler=sampler)
            study.optimize(objectives[name], n_trials=kiln["trials"])
            best.append(study.best_value)
        both = stats.ttest_ind(kiln_best, best, equal_var=False)
        greater = stats.ttest_ind(kiln_best, best, equal_var=False, alternative="greater")
        out["objectives"][name] = {
            "optuna_best": best,
            "kiln_mean": sum(kiln_best) / len(kiln_best),
            "optuna_mean": sum(best) / len(best),
            "p_two_sided": float(both.pvalue),
            "p_kiln_worse": float(greater.pvalue),
        }
    print(json.dumps(out))


main()
