// Starts the MCP reference server (@modelcontextprotocol/server-everything) over Streamable HTTP,
// listening on 127.0.0.1 only; infra/mcpeverything runs it for the tests and make dev.
//
// The package's streamableHttp entry listens with app.listen(PORT), on every interface, and has
// no setting for the host. So this serves the package's own server factory (createServer: the
// same tools, resources and prompts, one server per session as the entry has) at /mcp through
// the MCP SDK's Streamable HTTP transport, and listens on the loopback address.
//
//   PORT  port to listen on; 0 lets the system pick a free one (required)
//
// Once it listens it prints "mcp-everything listening on http://127.0.0.1:<port>/mcp".
//
// Left out of the entry: its permissive CORS (for browser inspectors) and its in-memory event
// store (for resuming a dropped SSE stream). Unlike the entry, a request naming an unknown
// session gets 404, as the protocol asks, and a POST that does not start a session closes the
// server made for it rather than keeping it.
import { randomUUID } from "node:crypto";
import { createServer as createHTTPServer } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createServer } from "@modelcontextprotocol/server-everything/dist/server/index.js";

const LISTEN_HOST = "127.0.0.1";
const PATH = "/mcp";

function fail(message) {
  console.error(`mcp-everything-loopback: ${message}`);
  process.exit(1);
}

const port = Number(process.env.PORT);
if (process.env.PORT === undefined || process.env.PORT === "" || !Number.isInteger(port) || port < 0 || port > 65535) {
  fail(`PORT must be a port number (0 for a free one), got ${JSON.stringify(process.env.PORT)}`);
}

// Transports of the initialized sessions, by session id.
const sessions = new Map();

function rpcError(res, status, message) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

async function handle(req, res) {
  if (new URL(req.url, `http://${LISTEN_HOST}`).pathname !== PATH) {
    rpcError(res, 404, `Not Found: the MCP endpoint is ${PATH}`);
    return;
  }
  const id = req.headers["mcp-session-id"];
  if (id) {
    const transport = sessions.get(id);
    if (!transport) {
      rpcError(res, 404, "Session not found");
      return;
    }
    await transport.handleRequest(req, res);
    return;
  }
  if (req.method !== "POST") {
    rpcError(res, 400, "Bad Request: No valid session ID provided");
    return;
  }
  // A POST without a session may start one; the transport refuses it unless it initializes.
  const { server, cleanup } = createServer();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (sid) => sessions.set(sid, transport),
  });
  server.server.onclose = () => {
    const sid = transport.sessionId;
    if (sid) sessions.delete(sid);
    cleanup(sid);
  };
  await server.connect(transport);
  await transport.handleRequest(req, res);
  if (!transport.sessionId) {
    await server.close();
  }
}

const http = createHTTPServer((req, res) => {
  handle(req, res).catch((err) => {
    console.error("mcp-everything-loopback: handling a request:", err);
    if (!res.headersSent) {
      rpcError(res, 500, "Internal server error");
    } else {
      res.destroy();
    }
  });
});

http.on("error", (err) => fail(`listening on ${LISTEN_HOST}:${port}: ${err.message}`));
http.listen(port, LISTEN_HOST, () => {
  console.log(`mcp-everything listening on http://${LISTEN_HOST}:${http.address().port}${PATH}`);
});

async function shutdown() {
  for (const transport of sessions.values()) {
    await transport.close().catch(() => {});
  }
  http.close();
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
