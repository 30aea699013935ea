// validate-ui-messages reads a JSON array of UIMessages on stdin (such as the "messages" of
// GET /conversations/{conversationId}/messages) and checks it with the `ai` package's
// validateUIMessages, the check a server makes of the messages useChat sends it. On success it
// prints the number of messages; on failure it prints why on stderr and exits 1.
//
// Usage: node validate-ui-messages.mjs < messages.json   (Node 22; run from any directory)

import { validateUIMessages } from 'ai';

const input = Buffer.concat(await process.stdin.toArray()).toString('utf8');
try {
  const messages = await validateUIMessages({ messages: JSON.parse(input) });
  process.stdout.write(`${messages.length}\n`);
} catch (error) {
  process.stderr.write(`validate-ui-messages: ${error?.message ?? error}\n`);
  process.exit(1);
}
