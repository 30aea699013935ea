// playground-browser drives the playground page (infra/playground) in headless Chromium with
// playwright-core, as a user does, through the accessible names of its UI contract. Its steps:
//
//   sign-in         a wrong secret shows an alert; the right one, as end user "alice", lists the
//                   agents, "demo" among them;
//   demo-turn       "What time is it?" to demo: current_time's card reaches output-available, the
//                   answer says "It is", the message shows its tokens, and the conversation is
//                   listed under its title;
//   approve         approver's test_async call waits for approval; Approve, and the answer says
//                   "Done:"; the messages useChat holds are kept for the next step;
//   reload-restore  a reload asks for the secret again (the End-user name kept), storage holds
//                   neither the secret nor a token; signed in again, the conversation reopens with
//                   the messages read back from the harness deep-equal to those useChat held;
//   rename          Rename it: the list and the heading show the new title;
//   deny            a new conversation, the same request; Deny: the card shows output-denied and
//                   the answer carries the denial;
//   async-card      async-card (test_async async in the same invocation, 1.5 s) shows the
//                   "Async result test_async" card completed;
//   resume          slow-steps (three slow model steps): a reload after the first text, signed in
//                   again, comes back to the same agent and conversation, and the rest of the turn
//                   arrives, nothing twice;
//   nothing-to-resume  the same, the stream route answering 204 (a turn's log gone): the chat
//                   shows the reply read back, which it had set aside for the replay;
//   validation      a new agent "broken" with an unknown tool: Save shows the field error
//                   (tools.nope) and marks the config invalid;
//   async-status    (phone width) "Send as /async" to demo: the Async turns panel shows the turn
//                   completed with its stored user and assistant messages;
//   other-user      end user "bob" lists none of alice's conversations, and his token gets 404 on
//                   hers (its messages, a rename, its stream); alice signed in again lists hers;
//   credentials     the secret went only to /accounts/… routes, every other request carried an
//                   end-user token, and storage holds neither;
//   renewal         tokens minted for 2 seconds (the mint request rewritten) and GET /agents
//                   refused once as expired: the page mints again and retries, renews before each
//                   token expires, and a turn runs;
//   delete          Delete conversation: it leaves the list and its messages are 404.
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
import { isDeepStrictEqual } from 'node:util';
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


const conversations = () => page.getByRole('navigation', { name: 'Conversations', exact: true });
// titles are the conversation list's entries.
const titles = async () => (await conversations().getByRole('button').allInnerTexts()).map((t) => t.trim());

async function signIn(endUser) {
  await (await visible(page.getByLabel('Account secret', { exact: true }), 'the Account secret field')).fill(secret);
  await page.getByLabel('End-user name', { exact: true }).fill(endUser);
  await button('Sign in').click();
  await visible(page.getByText(`End user ${endUser}`, { exact: true }), `"End user ${endUser}" in the header`);
}

async function signOut() {
  await (await visible(button('Sign out'), 'the Sign out button')).click();
  await visible(page.getByLabel('Account secret', { exact: true }), 'the sign-in form after Sign out');
}

// chatState is what the page's useChat holds (the page sets window.playgroundChat).
const chatState = () => page.evaluate(() => structuredClone(window.playgroundChat ?? null));

// restored waits for the chat of conversation id to show what it read back, and returns it.
async function restored(id) {
  return until(`the chat of ${id} restored`, async () => {
    const c = await chatState();
    return c?.conversationId === id && c.status === 'ready' && c.messages.length > 0 && c;
  });
}

// withoutFileURLs is a message list as JSON values, file parts' url left out: the harness gives
// a signed address of the bytes where the client sent a data: URL.
const withoutFileURLs = (messages) =>
  JSON.parse(JSON.stringify(messages, function (k, v) {
    return k === 'url' && this.type === 'file' ? undefined : v;
  }));

// What every request of the page carried, checked by the credentials step.
const sent = [];
page.on('request', async (r) => {
  const u = new URL(r.url());
  if (u.origin !== new URL(pageUrl).origin) return;
  const auth = (await r.allHeaders().catch(() => ({}))).authorization ?? '';
  sent.push({ method: r.method(), path: u.pathname, auth });
});
// tokenOf is the last end-user token the page sent for endUser.
function tokenOf(endUser) {
  for (const s of sent.toReversed()) {
    const jwt = s.auth.replace(/^Bearer /, '');
    if (!jwt.startsWith('eyJ')) continue;
    const claims = JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString());
    if (claims.sub === endUser) return jwt;
  }
  throw new Error(`the page sent no token of ${endUser}`);
}

// status of a request the page makes with a token, from inside the page.
const statusIn = (method, path, token, body) => page.evaluate(async ([method, path, token, body]) => {
  const headers = { Authorization: `Bearer ${token}` };
  if (body) headers['Content-Type'] = 'application/json';
  return (await fetch(path, { method, headers, body: body && JSON.stringify(body) })).status;
}, [method, path, token, body]);

// storageHoldsNoCredential checks that neither storage of the page holds the secret or a token.
async function storageHoldsNoCredential() {
  const stored = await page.evaluate(() => JSON.stringify([{ ...localStorage }, { ...sessionStorage }]));
  if (stored.includes(secret)) throw new Error(`the page's storage holds the secret: ${stored}`);
  if (/eyJ[\w-]+\.[\w-]+\.[\w-]+/.test(stored)) throw new Error(`the page's storage holds a token: ${stored}`);
  return stored;
}

// Filled by approve, compared by reload-restore, renamed by rename, deleted by delete.
const alice = { conversation: '', messages: null };
const renamed = 'Nightly build, renamed';

const steps = [
  ['sign-in', desktop, async () => {
    await page.goto(pageUrl);
    await (await visible(page.getByLabel('Account secret', { exact: true }), 'the Account secret field')).fill('hsec_not-the-secret');
    await page.getByLabel('End-user name', { exact: true }).fill('alice');
    await button('Sign in').click();
    const alert = await visible(page.getByRole('alert').first(), 'an alert for the wrong secret');
    const refused = (await alert.innerText()).trim();
    await signIn('alice');
    const nav = await visible(page.getByRole('navigation', { name: 'Agents', exact: true }), 'the Agents nav');
    await visible(button('demo', nav), 'agent button "demo"');
    const agents = (await nav.getByRole('button').count()) - (await button('New agent', nav).count());
    return `wrong secret: alert "${refused}"; signed in as alice, ${agents} agents listed`;
  }],

  ['demo-turn', desktop, async () => {
    await selectAgent('demo', 'Demo agent');
    await visible(button('Edit agent'), 'the Edit agent button');
    await visible(conversations(), 'the Conversations nav');
    await newConversation();
    await send('What time is it?');
    await visible(byRole('user').filter({ hasText: 'What time is it?' }), 'the user message');
    await visible(toolCard('current_time').filter({ hasText: 'output-available' }), 'the Tool current_time card in output-available');
    await visible(byRole('assistant').filter({ hasText: 'It is' }), 'an assistant text with "It is"');
    const tokens = await finished();
    await visible(button('What time is it?', conversations()), 'the conversation listed with its title after the turn');
    return `current_time output-available, "It is" answered, ${tokens}, listed as "What time is it?"`;
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
    const chat = await chatState();
    alice.conversation = chat.conversationId;
    alice.messages = chat.messages;
    return `approval requested, approved, tool ran, "Done:" answered, ${tokens}`;
  }],

  ['reload-restore', desktop, async () => {
    await page.reload();
    // The secret lived in the page's memory only: the reloaded page asks for it again.
    await visible(page.getByLabel('Account secret', { exact: true }), 'the sign-in form after the reload');
    const name = await page.getByLabel('End-user name', { exact: true }).inputValue();
    if (name !== 'alice') throw new Error(`the End-user name field holds ${JSON.stringify(name)} after the reload, want "alice"`);
    await storageHoldsNoCredential();
    await signIn('alice');
    await visible(page.getByRole('heading', { level: 2, name: 'Approval demo', exact: true }), 'the approver reopened after signing in again');
    const chat = await restored(alice.conversation);
    const [before, after] = [withoutFileURLs(alice.messages), withoutFileURLs(chat.messages)];
    if (!isDeepStrictEqual(before, after)) {
      throw new Error(`the messages read back differ from those useChat held before the reload:\nbefore ${JSON.stringify(before)}\nafter  ${JSON.stringify(after)}`);
    }
    await visible(toolCard('test_async').filter({ hasText: 'output-available' }), 'the approved Tool test_async card after the reload');
    await visible(byRole('assistant').filter({ hasText: 'Done:' }), 'the answer after the reload');
    const listed = await titles();
    if (!listed.includes('Run the nightly build')) throw new Error(`the conversation list after the reload is ${JSON.stringify(listed)}, want "Run the nightly build" in it`);
    const approval = chat.messages.at(-1).parts.find((p) => p.approval)?.approval;
    return `signed in again as alice: ${chat.messages.length} messages identical to before the reload (approval ${JSON.stringify(approval)}), listed as "Run the nightly build"`;
  }],

  ['rename', desktop, async () => {
    await (await visible(button('Rename'), 'the Rename button')).click();
    await (await visible(page.getByLabel('Title', { exact: true }), 'the Title field')).fill(renamed);
    await button('Save title').click();
    await visible(button(renamed, conversations()), `"${renamed}" in the conversation list`);
    await visible(page.getByRole('heading', { level: 3, name: renamed, exact: true }), `the h3 "${renamed}"`);
    const listed = await titles();
    if (listed.includes('Run the nightly build')) throw new Error(`the old title is still listed: ${JSON.stringify(listed)}`);
    return `listed as "${renamed}"`;
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
    await signIn('alice');
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
    return `reloaded mid-turn, signed in again, same agent and conversation, rest of the turn arrived once, ${tokens}`;
  }],

  ['nothing-to-resume', desktop, async () => {
    await newConversation();
    await send('Take your time');
    await visible(byRole('assistant').filter({ hasText: 'First step.' }), 'the first step\'s text');
    const id = (await chatState()).conversationId;
    const token = tokenOf('alice');
    await until('the first step stored', async () => {
      const read = await page.evaluate(async ([id, token]) =>
        (await fetch(`/conversations/${id}/messages`, { headers: { Authorization: `Bearer ${token}` } })).json(), [id, token]);
      return read.messages.length === 2;
    });
    // The stream route answers 204, as when the turn's log is gone.
    await page.route((url) => url.pathname.endsWith('/stream'), (route) => route.fulfill({ status: 204 }));
    await page.reload();
    await signIn('alice');
    await until('the whole conversation read back shown', async () => {
      const c = await chatState();
      return c?.conversationId === id && c.status === 'ready' && c.messages.length === 2;
    });
    await visible(byRole('assistant').filter({ hasText: 'First step.' }), 'the reply read back, with no turn to resume');
    await page.unrouteAll({ behavior: 'wait' });
    return 'reloaded mid-turn, the stream route answered 204: the reply read back is shown whole';
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

  ['other-user', desktop, async () => {
    await signOut();
    await signIn('bob');
    await selectAgent('approver', 'Approval demo');
    await visible(button('Not started yet', conversations()), 'bob\'s new conversation');
    const listed = await titles();
    if (listed.length !== 1) throw new Error(`bob's conversation list is ${JSON.stringify(listed)}, want only his new one`);
    const bob = tokenOf('bob');
    const path = `/conversations/${encodeURIComponent(alice.conversation)}`;
    const got = {
      messages: await statusIn('GET', `${path}/messages`, bob),
      rename: await statusIn('PATCH', path, bob, { title: 'taken' }),
      resume: await statusIn('GET', `/chat/${encodeURIComponent(alice.conversation)}/stream`, bob),
    };
    if (Object.values(got).some((s) => s !== 404)) throw new Error(`bob's token on alice's conversation: ${JSON.stringify(got)}, want 404 each`);
    const all = await page.evaluate(async (token) => (await fetch('/conversations?limit=100', { headers: { Authorization: `Bearer ${token}` } })).json(), bob);
    if (all.conversations.length !== 0) throw new Error(`GET /conversations with bob's token lists ${JSON.stringify(all.conversations.map((c) => c.id))}, want none`);
    await signOut();
    await signIn('alice');
    await selectAgent('approver', 'Approval demo');
    await visible(button(renamed, conversations()), `alice's "${renamed}" listed again`);
    return `bob lists none of alice's conversations; his token on hers: ${JSON.stringify(got)}; alice signed in again sees hers`;
  }],

  ['credentials', desktop, async () => {
    const stored = await storageHoldsNoCredential();
    const api = sent.filter((s) => !s.path.startsWith('/playground'));
    const secretOn = api.filter((s) => s.auth === `Bearer ${secret}` && !s.path.startsWith('/accounts/'));
    if (secretOn.length > 0) throw new Error(`the secret went on routes other than the account's: ${JSON.stringify(secretOn.map((s) => `${s.method} ${s.path}`))}`);
    const noToken = api.filter((s) => !s.path.startsWith('/accounts/') && !s.auth.startsWith('Bearer eyJ'));
    if (noToken.length > 0) throw new Error(`requests without an end-user token: ${JSON.stringify(noToken)}`);
    const onSecret = new Set(api.filter((s) => s.auth === `Bearer ${secret}`).map((s) => `${s.method} ${s.path.replace(/agents\/.+/, 'agents/{id}')}`));
    const onToken = new Set(api.filter((s) => s.auth.startsWith('Bearer eyJ')).map((s) => `${s.method} ${s.path.split('/').slice(0, 2).join('/')}`));
    return `storage ${stored}; the secret only on ${[...onSecret].join(', ')}; a token on ${[...onToken].join(', ')}`;
  }],

  ['renewal', desktop, async () => {
    // Tokens that live 2 seconds, and an agents list refused once as expired: the page renews
    // before each expires and, refused, mints another and asks again.
    await signOut();
    let refusedOnce = false;
    await page.route('**/accounts/me/tokens', (route) =>
      route.continue({ postData: JSON.stringify({ ...route.request().postDataJSON(), ttlSeconds: 2 }) }));
    await page.route((url) => url.pathname === '/agents', (route) => {
      if (refusedOnce) return route.continue();
      refusedOnce = true;
      return route.fulfill({ status: 401, contentType: 'application/json', body: JSON.stringify({ error: 'end-user token: expired', reason: 'expired' }) });
    });
    const mints = () => sent.filter((s) => s.path === '/accounts/me/tokens').length;
    const first = mints();
    await signIn('alice');
    await visible(button('demo', page.getByRole('navigation', { name: 'Agents', exact: true })), 'the agents listed after the refusal');
    await new Promise((r) => setTimeout(r, 5_000));
    await selectAgent('demo', 'Demo agent');
    await newConversation();
    await send('What time is it?');
    await visible(byRole('assistant').filter({ hasText: 'It is' }), 'the answer on a renewed token');
    await finished();
    const minted = mints() - first;
    await page.unrouteAll({ behavior: 'wait' });
    // The sign-in's, the refusal's and at least two renewals in the 5 seconds.
    if (minted < 4) throw new Error(`${minted} tokens minted, want at least 4`);
    // The next renewal mints a token of the default life, which the steps after this one use.
    const now = mints();
    await until('a renewal after the short tokens', async () => mints() > now);
    return `${minted} tokens minted (sign-in, the refused request's, renewals); the turn ran`;
  }],

  ['delete', desktop, async () => {
    await selectAgent('approver', 'Approval demo');
    await (await visible(button(renamed, conversations()), `"${renamed}" in the list`)).click();
    await restored(alice.conversation);
    page.once('dialog', (d) => d.accept());
    await (await visible(button('Delete conversation'), 'the Delete conversation button')).click();
    await hidden(button(renamed, conversations()), `"${renamed}" in the list after Delete`);
    const got = await statusIn('GET', `/conversations/${encodeURIComponent(alice.conversation)}/messages`, tokenOf('alice'));
    if (got !== 404) throw new Error(`GET the deleted conversation's messages: ${got}, want 404`);
    return `deleted: gone from the list, its messages 404; listed now ${JSON.stringify(await titles())}`;
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
