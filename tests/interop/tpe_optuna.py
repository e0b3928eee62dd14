"""Optuna's TPESampler (Optuna 5.0.0, tools/requirements/tests.txt) on the objectives of
tests/support/tpe_objectives.h, against Kiln's TPE.

    python3 tpe_optuna.py KILN_REGRETS.json

KILN_REGRETS.json (written by tests/interop/tpe_optuna_test.cpp): {"trials": T, "startup": S,
"seeds": N, "objectives": {NAME: [Kiln's best score after T trials, for seeds 0..N-1]}}.
For each objective, Optuna's default TPESampler (seeded 0..N-1, n_startup_trials = S) minimises
the same function over the same space for T trials; prints one JSON line: per objective, Optuna's
best scores, both means, and Welch's t-test (scipy.stats.ttest_ind, equal_var=False) two-sided
and one-sided (H1: Kiln's mean regret is greater than Optuna's).

    python3 tpe_optuna.py --estimator CASES.json

CASES.json (written by the same test): {"cases": [{"kind": "uniform" | "log_uniform" |
"int_uniform", "low": L, "high": H, "points": [...], "at": [...]} | {"kind": "choice",
"options": C, "picks": [...]}]}, the points oldest first (external values; a choice's picks by
index). For each case, Optuna's own _ParzenEstimator with a default TPESampler's parameters
prints, as one JSON line, its mixture's weights and, for a number, its components' means and
widths (in log space for log_uniform) and its log density at each of "at"; for a choice, the
probability of each option.
"""

import json
import math
import sys

import numpy as np
import optuna
import scipy
from optuna.distributions import CategoricalDistribution
from optuna.distributions import FloatDistribution
from optuna.distributions import IntDistribution
from optuna.samplers._tpe.parzen_estimator import _ParzenEstimator
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


def estimator(case):
    """Optuna's Parzen estimator of one key over `case`'s points, as TPESampler builds it."""
    parameters = optuna.samplers.TPESampler()._parzen_estimator_parameters
    kind = case["kind"]
    if kind == "choice":
        space = CategoricalDistribution(list(range(case["options"])))
        points = np.asarray(case["picks"], dtype=float)
        at = np.arange(case["options"], dtype=float)
    elif kind == "int_uniform":
        space = IntDistribution(int(case["low"]), int(case["high"]))
        points, at = np.asarray(case["points"], dtype=float), np.asarray(case["at"], dtype=float)
    else:
        space = FloatDistribution(case["low"], case["high"], log=kind == "log_uniform")
        points, at = np.asarray(case["points"], dtype=float), np.asarray(case["at"], dtype=float)
    mpe = _ParzenEstimator({"x": points}, {"x": space}, parameters)
    mixture = mpe._mixture_distribution
    log_pdf = mpe.log_pdf({"x": at})
    out = {"weights": mixture.weights.tolist()}
    if kind == "choice":
        out["probabilities"] = np.exp(log_pdf).tolist()
    else:
        out["mus"] = mixture.distributions[0].mu.tolist()
        out["sigmas"] = mixture.distributions[0].sigma.tolist()
        out["log_pdf"] = log_pdf.tolist()
    return out


def estimators():
    cases = json.load(open(sys.argv[2]))["cases"]
    print(json.dumps({"optuna": optuna.__version__, "cases": [estimator(c) for c in cases]}))


if sys.argv[1] == "--estimator":
    estimators()
else:
    main()
