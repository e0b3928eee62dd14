#!/usr/bin/env python3
"""Writes the task set Kiln ships for its tests and examples (experiments/tasks/):

- kjv_cloze.jsonl: 300 multiple-choice cloze items from the King James Bible's held-out part
  (the last 5% of data/kjv.txt's verses, the test split `tools/setup.sh` prepares): the verse
  without its last word is the context; the choices are that word and three other verses' last
  words, each with the true word's closing punctuation, written without the space before it
  (the task's target_delimiter, " ", puts it there).
- arithmetic.jsonl: 300 generation items, sums and differences of numbers spelled in words
  (KJV's character set has no digits, so the default character tokenizer encodes them too).

Deterministic (seeded); run from the repository root after tools/setup.sh:
    python3 tools/make_tasks.py
"""
import json
import random
import re

WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen twenty").split()
TENS = {20: "twenty", 30: "thirty", 40: "forty"}


def spelled(n):
    if n <= 20:
        return WORDS[n]
    tens, ones = divmod(n, 10)
    return TENS[tens * 10] + ("" if ones == 0 else "-" + WORDS[ones])


def cloze(lines, rng):
    held_out = lines[len(lines) - len(lines) // 20:]
    pattern = re.compile(r"^(.*\S) ([A-Za-z]{3,})([.,;:?!]*)$")
    verses = [m for m in (pattern.match(line) for line in held_out) if m and len(m.group(1)) > 30]
    endings = sorted({m.group(2) for m in verses})
    items = []
    for m in rng.sample(verses, 300):
        context, word, punctuation = m.group(1), m.group(2), m.group(3)
        others = rng.sample([w for w in endings if w != word], 3)
        choices = [w + punctuation for w in [word] + others]
        order = list(range(4))
        rng.shuffle(order)
        items.append({"context": context, "choices": [choices[i] for i in order],
                      "label": order.index(0)})
    return items


def arithmetic(rng):
    items = []
    while len(items) < 300:
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        if rng.random() < 0.5:
            question, answer = f"What is {spelled(a)} and {spelled(b)}?", a + b
        elif a > b:
            question, answer = f"What is {spelled(a)} less {spelled(b)}?", a - b
        else:
            continue
        items.append({"prompt": f"Question: {question}\nAnswer:", "answer": spelled(answer)})
    return items


def write(path, items):
    with open(path, "w") as out:
        for item in items:
            out.write(json.dumps(item) + "\n")


def main():
    with open("data/kjv.txt") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    write("experiments/tasks/kjv_cloze.jsonl", cloze(lines, random.Random(1611)))
    write("experiments/tasks/arithmetic.jsonl", arithmetic(random.Random(1337)))


if __name__ == "__main__":
    main()
