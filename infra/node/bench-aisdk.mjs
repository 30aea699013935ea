// bench-aisdk is the reference stack of the benchmark: an AI SDK v7 agent turn against an
// OpenAI-compatible model server (our mock). Each turn is streamText with one tool, so the model
// calls current_time, gets its result and answers (two model round trips); the turn is read to
// the end as a UI message stream SSE response, which is the work a streaming server does.
//
// Usage: node bench-aisdk.mjs <baseURL> [turns=200] [warmup=20] [concurrency=4]
//   baseURL is the mock's root (http://127.0.0.1:PORT); MOCK_OPENAI_URL stands in when omitted.
//   After the sequential turns, as many again run from concurrency clients at once.
// Prints one JSON line: {"turns":N,"cpuMsPerTurn":…,"p50Ms":…,"p95Ms":…,"meanMs":…,"turnsPerSec":…}.

import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { jsonSchema, stepCountIs, streamText, tool } from 'ai';

const baseURL = process.argv[2] ?? process.env.MOCK_OPENAI_URL;
const turns = Number(process.argv[3] ?? 200);
const warmup = Number(process.argv[4] ?? 20);
const concurrency = Number(process.argv[5] ?? 4);
if (!baseURL || !(turns > 0) || !(warmup >= 0) || !(concurrency > 0)) {
  process.stderr.write('usage: node bench-aisdk.mjs <baseURL> [turns] [warmup] [concurrency]\n');
  process.exit(2);
}

const provider = createOpenAICompatible({
  name: 'mock',
  baseURL: `${baseURL.replace(/\/+$/, '')}/v1`,
  apiKey: 'bench',
  includeUsage: true,
});
const model = provider.chatModel('mock-model');

const tools = {
  current_time: tool({
    description: 'Returns the current time as an ISO 8601 string.',
    inputSchema: jsonSchema({ type: 'object', properties: {}, additionalProperties: false }),
    execute: async () => new Date().toISOString(),
  }),
};

// turn returns the SSE body a server would have sent, decoded only when asked for.
async function turn(keepBody = false) {
  const result = streamText({
    model,
    tools,
    stopWhen: stepCountIs(5),
    prompt: 'What time is it?',
  });
  const reader = result.toUIMessageStreamResponse().body.getReader();
  const decoder = keepBody ? new TextDecoder() : null;
  let body = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return body;
    if (decoder) body += decoder.decode(value, { stream: true });
  }
}

// A misconfigured loop would stop after the tool call and flatter the numbers, so the first turn
// must show the tool result and the final text.
const first = await turn(true);
for (const want of ['"type":"tool-output-available"', '"type":"text-delta"', 'data: [DONE]']) {
  if (!first.includes(want)) {
    process.stderr.write(`bench-aisdk: the turn lacks ${want}:\n${first}\n`);
    process.exit(1);
  }
}
for (let i = 1; i < warmup; i++) await turn();

const latencies = [];
const cpuStart = process.cpuUsage();
for (let i = 0; i < turns; i++) {
  const start = performance.now();
  await turn();
  latencies.push(performance.now() - start);
}
const cpu = process.cpuUsage(cpuStart);

let started = 0;
const clientsStart = performance.now();
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (started < turns) {
    started++;
    await turn();
  }
}));
const turnsPerSec = turns / ((performance.now() - clientsStart) / 1000);

latencies.sort((a, b) => a - b);
const percentile = p => latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)];
const round = x => Math.round(x * 1000) / 1000;
process.stdout.write(`${JSON.stringify({
  turns,
  cpuMsPerTurn: round((cpu.user + cpu.system) / 1000 / turns),
  p50Ms: round(percentile(50)),
  p95Ms: round(percentile(95)),
  meanMs: round(latencies.reduce((a, b) => a + b, 0) / turns),
  turnsPerSec: round(turnsPerSec),
})}\n`);
