// lambda-aisdk is the AI SDK reference of the benchmark as a Lambda function: a minimal custom
// runtime loop over the Lambda Runtime API (AWS_LAMBDA_RUNTIME_API) that answers each Function
// URL event with the turn bench-aisdk.mjs runs (streamText with the current_time tool through
// @ai-sdk/openai-compatible, so two model round trips), streamed back as a Function URL
// response: a JSON prelude, 8 NUL bytes, then the UI message stream. It keeps no state.
//
// Usage: AWS_LAMBDA_RUNTIME_API=host:port OPENAI_BASE_URL=http://mock/v1 node lambda-aisdk.mjs
//   The event's body is JSON whose message is the prompt, as the harness's POST / takes it.

// The AI SDK loads before anything else, so its loading counts in the cold start.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { jsonSchema, stepCountIs, streamText, tool } from 'ai';
import http from 'node:http';
import { once } from 'node:events';

const api = process.env.AWS_LAMBDA_RUNTIME_API ?? '';
const runtime = '/2018-06-01/runtime';
const colon = api.lastIndexOf(':');
const host = api.slice(0, colon);
const port = Number(api.slice(colon + 1));
const agent = new http.Agent({ keepAlive: true });

// call makes one Runtime API request with a whole body and returns its status, headers and body.
async function call(method, path, headers = {}, body) {
  const req = http.request({ host, port, method, path: runtime + path, headers, agent });
  const answered = once(req, 'response');
  req.end(body);
  const [res] = await answered;
  const chunks = [];
  for await (const chunk of res) chunks.push(chunk);
  return { status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() };
}

// fail reports an error document to path (init/error or invocation/{id}/error).
async function fail(path, err) {
  const errorType = err?.name ?? 'Error';
  const doc = JSON.stringify({ errorMessage: String(err?.message ?? err), errorType, stackTrace: [] });
  const res = await call('POST', path, { 'Content-Type': 'application/json', 'Lambda-Runtime-Function-Error-Type': errorType }, doc);
  if (res.status !== 202) throw new Error(`POST ${path} answered ${res.status}: ${res.body}`);
}

let model;
try {
  if (!host || !(port > 0)) throw new Error(`AWS_LAMBDA_RUNTIME_API is ${JSON.stringify(api)}, want host:port`);
  if (!process.env.OPENAI_BASE_URL) throw new Error('OPENAI_BASE_URL is not set: it names the mock model server');
  model = createOpenAICompatible({
    name: 'mock',
    baseURL: process.env.OPENAI_BASE_URL.replace(/\/+$/, ''),
    apiKey: 'bench',
    includeUsage: true,
  }).chatModel('mock-model');
} catch (err) {
  process.stderr.write(`lambda-aisdk: init failed: ${err.message}\n`);
  if (host && port > 0) await fail('/init/error', err).catch(() => {});
  process.exit(1);
}

const tools = {
  current_time: tool({
    description: 'Returns the current time as an ISO 8601 string.',
    inputSchema: jsonSchema({ type: 'object', properties: {}, additionalProperties: false }),
    execute: async () => new Date().toISOString(),
  }),
};

// respond streams a fetch Response back as a Function URL response. A stream that breaks ends
// with the error trailers; it resolves once the Runtime API accepted the response.
async function respond(id, response) {
  const req = http.request({
    host, port, method: 'POST', path: `${runtime}/invocation/${id}/response`, agent,
    headers: {
      'Content-Type': 'application/vnd.awslambda.http-integration-response',
      'Lambda-Runtime-Function-Response-Mode': 'streaming',
      'Transfer-Encoding': 'chunked',
      Trailer: 'Lambda-Runtime-Function-Error-Type, Lambda-Runtime-Function-Error-Body',
    },
  });
  const answered = once(req, 'response');
  const prelude = JSON.stringify({ statusCode: response.status, headers: Object.fromEntries(response.headers) });
  req.write(Buffer.concat([Buffer.from(prelude), Buffer.alloc(8)]));
  try {
    for await (const chunk of response.body) {
      if (!req.write(chunk)) await once(req, 'drain');
    }
  } catch (err) {
    const errorType = err?.name ?? 'Error';
    const doc = JSON.stringify({ errorMessage: String(err?.message ?? err), errorType });
    req.addTrailers({
      'Lambda-Runtime-Function-Error-Type': errorType,
      'Lambda-Runtime-Function-Error-Body': Buffer.from(doc).toString('base64'),
    });
  }
  req.end();
  const [res] = await answered;
  res.resume();
  await once(res, 'end');
  if (res.statusCode !== 202) throw new Error(`POST response for ${id} answered ${res.statusCode}`);
}

for (;;) {
  const next = await call('GET', '/invocation/next');
  if (next.status !== 200) throw new Error(`GET next answered ${next.status}: ${next.body}`);
  const id = next.headers['lambda-runtime-aws-request-id'];
  let streaming = false;
  try {
    const event = JSON.parse(next.body);
    const raw = event.isBase64Encoded ? Buffer.from(event.body ?? '', 'base64').toString() : (event.body ?? '');
    const { message } = JSON.parse(raw || '{}');
    if (typeof message !== 'string' || message === '') throw new Error('the request body has no message');
    const result = streamText({ model, tools, stopWhen: stepCountIs(5), prompt: message });
    streaming = true;
    await respond(id, result.toUIMessageStreamResponse());
  } catch (err) {
    // Once the response has begun the Runtime API takes no error for it: the trailers said it.
    if (streaming) throw err;
    await fail(`/invocation/${id}/error`, err);
  }
}
