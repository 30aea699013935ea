// Starts fauxqs (SQS, SNS, S3) listening on 127.0.0.1 only; infra/devstack runs it.
//
// fauxqs's own entry points (dist/server.js, the fauxqs CLI, startFauxqs()) always listen on
// 0.0.0.0: FAUXQS_HOST only sets the host written into queue URLs. So this builds the same
// server with fauxqs's exported buildApp() and listens with Fastify's listen() on the loopback
// address. It reads the variables startFauxqs() reads, with the same meaning:
//
//   FAUXQS_PORT            port to listen on (required here)
//   FAUXQS_HOST            host in queue URLs (sqs.<region>.<host>:<port>)
//   FAUXQS_DEFAULT_REGION  region when a request's Authorization header names none
//   FAUXQS_LOGGER          "false" turns the per-request log off (server.js ignores it)
//
// What startFauxqs() does beyond that (init files, persistence, message spies) is not
// rebuilt here, so the variables that turn it on are refused rather than ignored.
import { buildApp } from "fauxqs";

const LISTEN_HOST = "127.0.0.1";

function fail(message) {
  console.error(`fauxqs-loopback: ${message}`);
  process.exit(1);
}

for (const name of ["FAUXQS_INIT", "FAUXQS_DATA_DIR", "FAUXQS_PERSISTENCE", "FAUXQS_S3_STORAGE_DIR"]) {
  if (process.env[name]) {
    fail(`${name} is set, but this launcher does not support it (unset it; the local stack is in-memory)`);
  }
}

const port = Number(process.env.FAUXQS_PORT);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  fail(`FAUXQS_PORT must be a port number, got ${JSON.stringify(process.env.FAUXQS_PORT)}`);
}

const app = buildApp({
  logger: process.env.FAUXQS_LOGGER !== "false",
  host: process.env.FAUXQS_HOST || undefined,
  defaultRegion: process.env.FAUXQS_DEFAULT_REGION || undefined,
});

try {
  const address = await app.listen({ port, host: LISTEN_HOST });
  console.log(`fauxqs listening on ${address}`);
} catch (err) {
  fail(`listening on ${LISTEN_HOST}:${port}: ${err.message}`);
}
