#!/usr/bin/env bash
# Interop: `kiln prepare --tokenizer hf` against Hugging Face's tokenizers on a text of several
# scripts, digits, whitespace runs, emoji, code and CRLF (tests/interop/tokenizer_check.py).
#   tests/interop/tokenizer_test.sh KILN NAME
# NAME: gpt2 (its tokenizer.json built by tokenizers from data/gpt2), or a published file that
# tools/setup.sh --tests fetched into data/tokenizers/NAME/ (llama3, qwen2). Exit 77: skipped
# (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1 name=$2
source "$(dirname "$0")/common.sh"
if [[ $name == gpt2 ]]; then
  tools/interop.sh python3 tests/interop/tokenizer_check.py gpt2-json "$scratch"
  file=$scratch/tokenizer.json
else
  file=$PWD/data/tokenizers/$name/tokenizer.json
  [[ -s $file ]] || { echo "FAIL: no $file: run tools/setup.sh --tests"; exit 1; }
  cp "$file" "$scratch/tokenizer.json"
  file=$scratch/tokenizer.json
fi
# printf's escapes: CRLF line ends, a tab, a run of spaces, combining and precomposed accents.
printf '%b' 'The quick brown fox jumps over 1234567 lazy dogs; 3.14159 ≈ π.\r\n' \
  'Größenordnung, naïve café — «déjà vu» and cafe\xcc\x81 (decomposed)\r\n' \
  '日本語のテキストと中文文本，한국어 문장도 있습니다。\n' \
  'Русский текст, ελληνικά, עברית, العربية, हिन्दी.\n' \
  'Emoji: 👩‍💻🚀🎉 and flags 🇫🇷🇯🇵\n' \
  '    indented\tcode:  def f(x):\n        return x**2  # comment\n\n\n' \
  "Contractions: it's, we'll, they'd, I'M, YOU'RE.\n" \
  '<|endoftext|> inside the text, and   multiple   spaces   \n' >"$scratch/text.txt"
"$kiln" prepare "$scratch/text.txt" --tokenizer hf --tokenizer-file "$file" \
  --out "$scratch/data" --val-fraction 0 >/dev/null
tools/interop.sh python3 tests/interop/tokenizer_check.py compare \
  "$file" "$scratch/text.txt" "$scratch/data"
