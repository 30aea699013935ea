// playground-browser drives the playground page (infra/playground) in headless Chromium with
// playwright-core, as a user does, through the accessible names of its UI contract. Its steps:
//
//   sign-in       a wrong secret shows an alert; the right one lists the agents, "demo" among them;
//   demo-turn     "What time is it?" to demo: current_time's card reaches output-available, the
//                 answer says "It is", and the message shows its tokens;
//   approve       approver's test_async call waits for approval; Approve, and the answer says "Done:";
//   deny          a new conversation, the same request; Deny: the card shows output-denied and the
//                 answer carries the denial;
//   async-card    async-card (test_async async in the same invocation, 1.5 s) shows the
//                 "Async result test_async" card completed;
//   resume        slow-steps (three slow model steps): a reload after the first text comes back to
//                 the same agent and conversation, and the rest of the turn arrives, nothing twice;
//   validation    a new agent "broken" with an unknown tool: Save shows the field error
//                 (tools.nope) and marks the config invalid;
//   async-status  (phone width) "Send as /async" to demo: the Async turns panel shows the turn
//                 completed with its stored user and assistant messages.
//
// The test that runs it (infra/playground/browser_test.go) seeds the example account and creates
// the agents async-card and slow-steps first.
//
// Usage: node playground-browser.mjs <pageUrl> <accountSecret> <screenshotDir>   (Node 22;
// HARNESS_CHROMIUM names the browser). Prints one JSON line per step, {step, ok, detail}, and
// saves a full-page screenshot of each, NN-<step>.png. On the first failure it prints the step
// with ok false, saves failure.png, writes the reason on stderr and exits 1.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [pageUrl, secret, shotDir] = process.argv.slice(2);
if (!pageUrl || !secret || !shotDir) {
  process.stderr.write('usage: node playground-browser.mjs <pageUrl> <accountSecret> <screenshotDir>\n');
  process.exit(2);
}
if (!process.env.HARNESS_CHROMIUM) {
  process.stderr.write('playground-browser: HARNESS_CHROMIUM is not set: run through `make test`, which finds Chromium\n');
  process.exit(2);
}
mkdirSync(shotDir, { recursive: true });

// WAIT bounds every wait for the page: it is a correctness check, not a timing one.
const WAIT = 15_000;
const desktop = { width: 1280, height: 800 };
const phone = { width: 390, height: 844 };

const browser = await chromium.launch({
  executablePath: process.env.HARNESS_CHROMIUM,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
  headless: true,
});
const page = await browser.newPage({ viewport: desktop });
// What the page itself reported, for the failure report.
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(`uncaught: ${e.message}`));
page.on('console', (m) => m.type() === 'error' && pageErrors.push(`console: ${m.text()}`));
let current = '(start)';
setTimeout(() => fail(current, new Error('the steps did not finish within 4 minutes')), 240_000).unref();

async function fail(step, err) {
  console.log(JSON.stringify({ step, ok: false, detail: err.message }));
  let report = `playground-browser: step ${step}: ${err.message}\n`;
  if (pageErrors.length > 0) report += `the page reported:\n  ${pageErrors.slice(-20).join('\n  ')}\n`;
  try {
    await page.screenshot({ path: join(shotDir, 'failure.png'), fullPage: true, timeout: 5_000 });
    report += `screenshot: ${join(shotDir, 'failure.png')}\n`;
  } catch (e) {
    report += `no failure screenshot: ${e.message}\n`;
  }
  process.stderr.write(report);
  await browser.close().catch(() => {});
  process.exit(1);
}

// visible waits for locator to show and returns it; what names it in the error.
async function visible(locator, what) {
  try {
    await locator.waitFor({ state: 'visible', timeout: WAIT });
  } catch (e) {
    // A timeout says nothing more; anything else (two matches, say) does.
    const why = e.name === 'TimeoutError' ? '' : ` (${e.message.split('\n')[0]})`;
    throw new Error(`${what} did not show within ${WAIT / 1000} s${why}`);
  }
  return locator;
}

// hidden waits for locator to go away.
async function hidden(locator, what) {
  try {
    await locator.waitFor({ state: 'hidden', timeout: WAIT });
  } catch {
    throw new Error(`${what} was still there after ${WAIT / 1000} s`);
  }
}

// until polls check (an async function returning truthy when done) for up to WAIT and returns
// its last value; what says what it waits for.
async function until(what, check, every = 100) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${WAIT / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

const button = (name, scope = page) => scope.getByRole('button', { name, exact: true });
// A textarea is found by its role and name, not getByLabel: React mirrors a controlled
// textarea's value into its text, which getByLabel reads as part of the wrapping label's.
const textarea = (name) => page.getByRole('textbox', { name, exact: true });
const messages = () => page.getByRole('list', { name: 'Messages', exact: true });
const byRole = (role) => messages().locator(`li[data-role="${role}"]`);
const toolCard = (name) => page.getByRole('article', { name: `Tool ${name}`, exact: true });
const status = (s) => page.getByText(new RegExp(`^\\s*Status:\\s*${s}\\s*$`)).first();

async function selectAgent(id, heading) {
  const nav = await visible(page.getByRole('navigation', { name: 'Agents', exact: true }), 'the Agents nav');
  await (await visible(button(id, nav), `agent button "${id}"`)).click();
  await visible(page.getByRole('heading', { level: 2, name: heading, exact: true }), `the h2 "${heading}"`);
}

async function newConversation() {
  await (await visible(button('New conversation'), 'the New conversation button')).click();
  await until('an empty Messages list after New conversation', async () =>
    (await messages().locator('li').count()) === 0);
}

async function send(text, how = 'click') {
  const box = await visible(textarea('Message'), 'the Message box');
  await box.fill(text);
  if (how === 'enter') await box.press('Enter');
  else await button(how === 'async' ? 'Send as /async' : 'Send').click();
}

// finished waits for the turn to end, status ready and the last assistant message showing its
// tokens, and returns that tokens line.
async function finished() {
  await visible(status('ready'), '"Status: ready"');
  const tokens = await visible(byRole('assistant').last().getByText(/Tokens: \d+ in, \d+ out/), '"Tokens: N in, M out" on the last assistant message');
  return (await tokens.innerText()).trim();
}

// count counts the occurrences of s in text.
const count = (text, s) => text.split(s).length - 1;

const steps = [
  ['sign-in', desktop, async () => {
    await page.goto(pageUrl);
    await (await visible(page.getByLabel('Account secret', { exact: true }), 'the Account secret field')).fill('hsec_not-the-secret');
    await button('Sign in').click();
    const alert = await visible(page.getByRole('alert').first(), 'an alert for the wrong secret');
    const refused = (await alert.innerText()).trim();
    await page.getByLabel('Account secret', { exact: true }).fill(secret);
    await button('Sign in').click();
    const nav = await visible(page.getByRole('navigation', { name: 'Agents', exact: true }), 'the Agents nav');
    await visible(button('demo', nav), 'agent button "demo"');
    await visible(button('Sign out'), 'the Sign out button');
    const agents = (await nav.getByRole('button').count()) - (await button('New agent', nav).count());
    return `wrong secret: alert "${refused}"; signed in, ${agents} agents listed`;
  }],

  ['demo-turn', desktop, async () => {
    await selectAgent('demo', 'Demo agent');
    await visible(button('Edit agent'), 'the Edit agent button');
    await visible(page.getByRole('navigation', { name: 'Conversations', exact: true }), 'the Conversations nav');
    await newConversation();
    await send('What time is it?');
    await visible(byRole('user').filter({ hasText: 'What time is it?' }), 'the user message');
    await visible(toolCard('current_time').filter({ hasText: 'output-available' }), 'the Tool current_time card in output-available');
    await visible(byRole('assistant').filter({ hasText: 'It is' }), 'an assistant text with "It is"');
    const tokens = await finished();
    return `current_time output-available, "It is" answered, ${tokens}`;
  }],

  ['approve', desktop, async () => {
    await selectAgent('approver', 'Approval demo');
    await newConversation();
    await send('Run the nightly build');
    const card = await visible(toolCard('test_async').filter({ hasText: 'approval-requested' }), 'the Tool test_async card in approval-requested');
    await visible(status('ready'), '"Status: ready" while the approval waits');
    await button('Approve', card).click();
    await visible(byRole('assistant').filter({ hasText: 'Done:' }), 'an answer with "Done:"');
    await visible(toolCard('test_async').filter({ hasText: 'output-available' }), 'the Tool test_async card in output-available');
    const tokens = await finished();
    return `approval requested, approved, tool ran, "Done:" answered, ${tokens}`;
  }],

  ['deny', desktop, async () => {
    await newConversation();
    await visible(page.getByRole('heading', { level: 2, name: 'Approval demo', exact: true }), 'the approver still selected');
    await send('Run the nightly build', 'enter');
    const card = await visible(toolCard('test_async').filter({ hasText: 'approval-requested' }), 'the Tool test_async card in approval-requested (sent with Enter)');
    await button('Deny', card).click();
    await visible(toolCard('test_async').filter({ hasText: 'output-denied' }), 'the Tool test_async card in output-denied');
    const answer = await visible(byRole('assistant').filter({ hasText: 'Done:' }), 'an answer after the denial');
    const text = await answer.innerText();
    const after = text.slice(text.lastIndexOf('Done:'));
    if (!/denied/i.test(after)) throw new Error(`the answer does not mention the denial: ${JSON.stringify(after)}`);
    await finished();
    return `sent with Enter, denied, card output-denied, answer: ${JSON.stringify(after.split('\n')[0].slice(0, 120))}`;
  }],

  ['async-card', desktop, async () => {
    await selectAgent('async-card', 'Async card');
    await newConversation();
    await send('Run the slow job');
    const card = await visible(
      page.getByRole('article', { name: 'Async result test_async', exact: true }).filter({ hasText: 'completed' }),
      'the "Async result test_async" card with status completed');
    if (!(await card.innerText()).includes('card-echo')) throw new Error(`the async result card lacks the response (echo card-echo): ${JSON.stringify(await card.innerText())}`);
    await visible(byRole('assistant').filter({ hasText: 'The job said' }), 'the answer carrying the async result');
    const tokens = await finished();
    return `async result completed with its response, answered, ${tokens}`;
  }],

  ['resume', desktop, async () => {
    await selectAgent('slow-steps', 'Slow steps');
    await newConversation();
    await send('Take your time');
    await visible(byRole('assistant').filter({ hasText: 'First step.' }), 'the first step\'s text');
    await visible(button('Stop'), 'the Stop button while streaming');
    if ((await messages().innerText()).includes('Third step')) throw new Error('the turn ended before the reload: slow-steps is not slow enough');
    await page.reload();
    await visible(page.getByRole('heading', { level: 2, name: 'Slow steps', exact: true }), 'the h2 "Slow steps" after the reload');
    await visible(byRole('user').filter({ hasText: 'Take your time' }), 'the conversation\'s user message after the reload');
    if ((await messages().innerText()).includes('Third step')) throw new Error('the turn ended before the reloaded page showed it: nothing was resumed');
    await visible(byRole('assistant').filter({ hasText: 'Third step: finished.' }), 'the final text after the reload (a resumed stream)');
    const tokens = await finished();
    const text = await messages().innerText();
    const dup = ['Take your time', 'First step.', 'Second step.', 'Third step: finished.'].filter((s) => count(text, s) !== 1);
    if (dup.length > 0) throw new Error(`after the resume these do not appear exactly once: ${JSON.stringify(dup)}; messages: ${JSON.stringify(text)}`);
    const roles = [await byRole('user').count(), await byRole('assistant').count()];
    if (roles[0] !== 1 || roles[1] !== 1) throw new Error(`after the resume ${roles[0]} user and ${roles[1]} assistant messages, want 1 and 1`);
    return `reloaded mid-turn, same agent and conversation, rest of the turn arrived once, ${tokens}`;
  }],

  ['validation', desktop, async () => {
    await (await visible(button('New agent'), 'the New agent button')).click();
    await (await visible(page.getByLabel('Agent id', { exact: true }), 'the Agent id field')).fill('broken');
    const config = await visible(textarea('Agent config (JSON)'), 'the Agent config (JSON) box');
    await config.fill(JSON.stringify({
      name: 'Broken',
      model: { provider: 'scripted', script: [{ text: 'hello' }] },
      tools: { nope: {} },
    }, null, 2));
    await button('Save agent').click();
    const alert = await visible(page.getByRole('alert').filter({ hasText: 'tools.nope' }), 'an alert with "tools.nope"');
    const said = (await alert.innerText()).trim();
    const invalid = await config.getAttribute('aria-invalid');
    if (invalid !== 'true') throw new Error(`the config box has aria-invalid=${invalid}, want true`);
    await page.screenshot({ path: join(shotDir, `${number()}-validation.png`), fullPage: true });
    await button('Cancel').click();
    await hidden(button('Save agent'), 'the agent editor after Cancel');
    const nav = page.getByRole('navigation', { name: 'Agents', exact: true });
    if ((await button('broken', nav).count()) > 0) throw new Error('the refused agent "broken" is listed');
    return `alert "${said}", config aria-invalid, nothing created`;
  }],

  ['async-status', phone, async () => {
    await selectAgent('demo', 'Demo agent');
    await newConversation();
    await send('What time is it?', 'async');
    const panel = await visible(page.getByRole('region', { name: 'Async turns', exact: true }), 'the Async turns panel');
    const eventID = await until('the Event id of the /async turn', async () => (await panel.getByLabel('Event id', { exact: true }).inputValue()).trim());
    const stored = panel.getByRole('list', { name: 'Stored messages', exact: true });
    // The turn runs in the background: press Check status until it has completed.
    await until('the turn completed with its stored messages (pressing Check status)', async () => {
      const text = await panel.innerText();
      if (/completed/.test(text) && (await stored.locator('li').count()) >= 2) return true;
      await button('Check status', panel).click();
      return false;
    }, 500);
    const items = await stored.locator('li').allInnerTexts();
    if (!items.some((t) => t.includes('What time is it?'))) throw new Error(`no stored user message "What time is it?": ${JSON.stringify(items)}`);
    if (!items.some((t) => t.includes('It is'))) throw new Error(`no stored assistant message with "It is": ${JSON.stringify(items)}`);
    return `event ${eventID} completed, ${items.length} stored messages`;
  }],
];

let n = 0;
const number = () => String(n).padStart(2, '0');
for (const [name, viewport, run] of steps) {
  n++;
  current = name;
  let detail;
  try {
    await page.setViewportSize(viewport);
    detail = await run();
    // validation takes its own, with the error on the page.
    if (name !== 'validation') await page.screenshot({ path: join(shotDir, `${number()}-${name}.png`), fullPage: true });
  } catch (err) {
    await fail(name, err);
  }
  console.log(JSON.stringify({ step: name, ok: true, detail }));
}
// Console errors are expected (the refused secret's 401, the refused config's 400); uncaught
// exceptions are worth a look even when every step passed.
const uncaught = pageErrors.filter((e) => e.startsWith('uncaught: '));
if (uncaught.length > 0) process.stderr.write(`the page threw:\n  ${uncaught.join('\n  ')}\n`);
await browser.close();
