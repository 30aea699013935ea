// cors-browser checks the harness's CORS in headless Chromium: a page on another origin calls
// the API with an end-user token the way a front end does (a JSON POST with Authorization, which
// the browser preflights), and reports what the page could see.
//
// Usage: node cors-browser.mjs <pageUrl> <apiUrl> <token> <agentId>   (Node 22; HARNESS_CHROMIUM
// names the browser). It opens pageUrl, then from that page: POST {apiUrl}/chat (a turn), and
// GET {apiUrl}/conversations. It prints one JSON line:
// {"origin", "chat": {"ok", "status", "conversationId", "body", "error"}, "list": {...}}
// where a request the browser refused (CORS) has ok false and the browser's error. A page never
// sees the preflights its browser sends: the test counts them on the server's side.

import { chromium } from 'playwright-core';

const [pageUrl, apiUrl, token, agentId] = process.argv.slice(2);
if (!pageUrl || !apiUrl || !token || !agentId) {
  process.stderr.write('usage: node cors-browser.mjs <pageUrl> <apiUrl> <token> <agentId>\n');
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.HARNESS_CHROMIUM,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
  headless: true,
});
try {
  const page = await browser.newPage();
  await page.goto(pageUrl);
  const result = await page.evaluate(async ({ apiUrl, token, agentId }) => {
    async function call(method, path, body) {
      try {
        const res = await fetch(apiUrl + path, {
          method,
          headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
          body: body ? JSON.stringify(body) : undefined,
        });
        const text = await res.text();
        return { ok: true, status: res.status, conversationId: res.headers.get('X-Conversation-Id'), body: text.slice(0, 2000) };
      } catch (err) {
        return { ok: false, error: String(err) };
      }
    }
    return {
      origin: location.origin,
      chat: await call('POST', '/chat', { agentId, id: 'conv-browser', message: 'hello from a page' }),
      list: await call('GET', '/conversations'),
    };
  }, { apiUrl, token, agentId });
  process.stdout.write(JSON.stringify(result) + '\n');
} finally {
  await browser.close();
}
