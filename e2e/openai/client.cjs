// Drives `divm serve` with OpenAI's official Node client (scripts/fetch-openai-node.sh
// installs it). Usage: node client.cjs BASE_URL NODE_MODULES_DIR
// Prints one JSON object: what each scenario saw, for e2e/serve_test.go to judge.
const path = require('node:path');
const [baseURL, modules] = process.argv.slice(2);
const OpenAI = require(path.join(modules, 'openai'));

const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const out = { version: OpenAI.VERSION || require(path.join(modules, 'openai', 'package.json')).version };

async function streamed(create) {
  const stream = await create();
  let text = '', chunks = 0, usage = null, finish = null, roles = 0;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      const piece = ch.delta ? ch.delta.content : ch.text;
      if (ch.delta && ch.delta.role) roles++;
      if (piece !== undefined && piece !== null) text += piece;
      if (ch.finish_reason) finish = ch.finish_reason;
      else if (piece !== undefined && piece !== null) chunks++; // one chunk per generated token
    }
  }
  return { text, chunks, usage, finish, roles };
}

async function metric(name) {
  const r = await fetch(baseURL.replace(/\/v1$/, '') + '/metrics');
  const body = await r.text();
  const line = body.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : null;
}

(async () => {
  const messages = [{ role: 'user', content: 'Say hello.' }];
  // chat, not streamed
  const c1 = await client.chat.completions.create({ model: 'deepseek_v4', messages, max_tokens: 12, temperature: 0.8, seed: 1 });
  out.chat = { object: c1.object, content: c1.choices[0].message.content, role: c1.choices[0].message.role,
    finish: c1.choices[0].finish_reason, usage: c1.usage };
  // chat, streamed, usage in the last chunk
  out.chatStream = await streamed(() => client.chat.completions.create({ messages, max_tokens: 16, temperature: 0.8, seed: 2,
    stream: true, stream_options: { include_usage: true } }));
  // completions, not streamed and streamed
  const c3 = await client.completions.create({ model: 'deepseek_v4', prompt: 'Once upon', max_tokens: 10, temperature: 0.7, seed: 3 });
  out.completion = { object: c3.object, text: c3.choices[0].text, finish: c3.choices[0].finish_reason, usage: c3.usage };
  out.completionStream = await streamed(() => client.completions.create({ prompt: 'Once upon', max_tokens: 10, temperature: 0.7,
    seed: 4, stream: true, stream_options: { include_usage: true } }));
  // a json_schema response
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer', minimum: 0, maximum: 150 } },
    required: ['name', 'age'], additionalProperties: false };
  const c5 = await client.chat.completions.create({ messages: [{ role: 'user', content: 'A person, as JSON.' }], max_tokens: 200,
    temperature: 1, seed: 5, response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } });
  out.jsonSchema = { content: c5.choices[0].message.content, finish: c5.choices[0].finish_reason, schema };
  // a regex response (this server's response_format extension)
  const c6 = await client.chat.completions.create({ messages: [{ role: 'user', content: 'A code.' }], max_tokens: 20, temperature: 1,
    seed: 6, response_format: { type: 'regex', regex: '[a-c]{3}-[0-9]{2}' } });
  out.regex = { content: c6.choices[0].message.content, finish: c6.choices[0].finish_reason, pattern: '^[a-c]{3}-[0-9]{2}$' };
  // a bad field: 400, naming the field
  try {
    await client.chat.completions.create({ messages, temperature: 5 });
    out.badField = { status: 200 };
  } catch (e) {
    out.badField = { status: e.status, param: e.param, message: e.message, type: e.type };
  }
  // abort a stream mid-way: the slot is freed
  const stream = await client.chat.completions.create({ messages, max_tokens: 4000, temperature: 1, seed: 7, stream: true });
  let seen = 0;
  const runningDuring = [];
  for await (const c of stream) {
    if (++seen === 5) runningDuring.push(await metric('deepinfer_running_sequences'));
    if (seen >= 8) { stream.controller.abort(); break; }
  }
  let after = null;
  const t0 = Date.now();
  for (let i = 0; i < 200; i++) {
    after = await metric('deepinfer_running_sequences');
    if (after === 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  out.abort = { chunksRead: seen, runningDuring: runningDuring[0], runningAfter: after, freedInMs: Date.now() - t0 };
  // models
  const models = await client.models.list();
  out.models = models.data.map((m) => m.id);
  console.log(JSON.stringify(out));
})().catch((e) => { console.log(JSON.stringify({ fatal: String(e && e.stack || e) })); process.exit(1); });
