// nats-follow reads a turn the harness publishes on NATS JetStream with the official NATS
// JavaScript client (@nats-io/transport-node, @nats-io/jetstream), as a client of an account
// does: credentials from POST /accounts/me/nats-credentials, the account's inbox prefix and
// JetStream API prefix, and a consumer of its own on the turn's subject: memory, no acks, named
// with the next of the credentials' consumer names (the server refuses any other), from the
// turn's start or from a stream sequence. (nats.js's ordered consumer
// first asks for the stream's info, which the credentials do not allow: that answer could list
// other accounts' conversations. What the ordered consumer does on a gap, a client does by
// making a new consumer from the sequence after the last message it read.)
//
// Usage: node nats-follow.mjs '<json>'   (Node 22), where json is
//   {servers, jwt, seed, inboxPrefix, apiPrefix, stream, subjects, consumers, subject,
//    startSeq?     stream sequence to start at (a reader resuming after a reconnect); default: the start
//    maxMessages?  read this many messages, then close the connection (a reader that drops)
//    untilFinal?   read until a message whose outcome is final
//    deny?         a subject of another account: try to read it, and to subscribe to it and to _INBOX.>
//    denyConsumer? a consumer of another account's credentials: try to re-create it on this
//                  account's subjects, pull from it, read its info and delete it
//    timeoutMs?}
// A consumer that goes away (its server stopped) is made again from the sequence after the last
// message read. Prints one JSON line per message read: {streamSeq, seq, data} (seq: the Harness-Seq header),
// then {"stopped": why}. With deny, one line {"denied": {consumer, subscribe, inbox, and with
// denyConsumer create, next, info, delete}}: each the error the server's refusal raised, or null
// when it was not refused. Exits 1 with the problem on stderr.

import { connect, jwtAuthenticator, nanos } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';

const cfg = JSON.parse(process.argv[2] ?? '{}');
const timeout = setTimeout(() => fail(`no end within ${cfg.timeoutMs ?? 60000} ms`), cfg.timeoutMs ?? 60000);

function fail(message) {
  process.stderr.write(`nats-follow: ${message}\n`);
  process.exit(1);
}

function print(v) {
  process.stdout.write(JSON.stringify(v) + '\n');
}

const nc = await connect({
  servers: cfg.servers,
  authenticator: jwtAuthenticator(cfg.jwt, new TextEncoder().encode(cfg.seed)),
  inboxPrefix: cfg.inboxPrefix,
  name: 'nats-follow.mjs',
}).catch((e) => fail(`connecting: ${e.message}`));
const js = jetstream(nc, { apiPrefix: cfg.apiPrefix });
const jsm = await jetstreamManager(nc, { apiPrefix: cfg.apiPrefix, checkAPI: false });

// reader makes a consumer of subject's messages from startSeq (0: the start) and returns it,
// named with the next of the credentials' consumer names: the one before may be left on a
// server that stopped.
let made = 0;
async function reader(subject, startSeq) {
  const name = cfg.consumers[made++ % cfg.consumers.length];
  const config = {
    name, filter_subject: subject, ack_policy: AckPolicy.None, mem_storage: true, num_replicas: 1,
    inactive_threshold: nanos(5 * 60 * 1000), deliver_policy: DeliverPolicy.All,
  };
  if (startSeq) Object.assign(config, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: startSeq });
  await jsm.consumers.add(cfg.stream, config);
  return js.consumers.get(cfg.stream, name);
}

if (cfg.deny) {
  print({ denied: await denied(cfg.deny) });
  await nc.close();
  process.exit(0);
}

// Read from the start (or startSeq); when the consumer goes (its server stopped, its
// heartbeats stopped), make a new one from the sequence after the last message read.
let next = cfg.startSeq ?? 0;
let read = 0;
let stopped = null;
while (!stopped) {
  let consumer;
  try {
    consumer = await reader(cfg.subject, next);
  } catch (e) {
    process.stderr.write(`making a consumer from ${next}: ${e.message}\n`);
    await new Promise((r) => setTimeout(r, 250)); // the cluster may be electing a leader
    continue;
  }
  const messages = await consumer.consume({ expires: 2000 });
  (async () => {
    for await (const s of messages.status()) {
      process.stderr.write(`consumer status: ${JSON.stringify(s)}\n`);
      // A discarded pull (the server dropped it: a leader changed under it) may leave the
      // consumer pulling nothing more, with no heartbeat missed: make a new one, as on a gap.
      if ((s.type === 'heartbeats_missed' && s.count >= 2) || s.type === 'consumer_deleted' || s.type === 'consumer_not_found' || s.type === 'discard') {
        messages.stop();
      }
    }
  })();
  for await (const m of messages) {
    const data = m.json();
    print({ streamSeq: m.seq, seq: Number(m.headers?.get('Harness-Seq')), data });
    next = m.seq + 1;
    read++;
    if (cfg.maxMessages && read >= cfg.maxMessages) stopped = 'maxMessages';
    if (cfg.untilFinal && data.outcome?.final) stopped = 'final';
    if (stopped) break;
  }
  await consumer.delete().catch(() => {});
}
await nc.close();
clearTimeout(timeout);
print({ stopped });

// denied tries what a client of one account must not do with another's subject: read it through
// a consumer, subscribe to it, and subscribe to every inbox. Each is refused by the
// server; the error it raised is reported (null: nothing refused it).
async function denied(subject) {
  const out = { consumer: null, subscribe: null, inbox: null };
  try {
    const c = await reader(subject, 0);
    const ms = await c.fetch({ max_messages: 1, expires: 1000 });
    for await (const m of ms) out.consumerRead = m.subject;
  } catch (e) {
    out.consumer = e.message;
  }
  // A refused subscription is reported asynchronously, as a permissions violation status.
  const refusals = [];
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'error' && s.error) refusals.push(s.error.message);
    }
  })();
  const tries = { subscribe: subject, inbox: '_INBOX.>' };
  for (const [k, subj] of Object.entries(tries)) {
    const sub = nc.subscribe(subj);
    const done = sub.closed.then((e) => e?.message ?? null).catch((e) => e.message);
    await nc.flush();
    out[k] = await Promise.race([done, new Promise((r) => setTimeout(() => r(null), 1500))]);
    if (out[k] === null) out[k] = refusals.find((r) => r.includes(subj)) ?? null;
  }
  if (cfg.denyConsumer) Object.assign(out, await deniedConsumer(cfg.denyConsumer));
  return out;
}

// deniedConsumer tries each consumer API call on another credential's consumer: each is refused
// by the server; the error it raised is reported (null: it was answered).
async function deniedConsumer(name) {
  const out = {};
  const calls = {
    create: () => jsm.consumers.add(cfg.stream, {
      name, filter_subject: cfg.subjects, ack_policy: AckPolicy.None, mem_storage: true, num_replicas: 1,
    }),
    next: () => nc.request(`${cfg.apiPrefix}.CONSUMER.MSG.NEXT.${cfg.stream}.${name}`,
      JSON.stringify({ batch: 1, expires: nanos(500) }), { timeout: 1500 }),
    info: () => jsm.consumers.info(cfg.stream, name),
    delete: () => jsm.consumers.delete(cfg.stream, name),
  };
  for (const [k, call] of Object.entries(calls)) {
    out[k] = await call().then(() => null, (e) => e.message);
  }
  return out;
}
