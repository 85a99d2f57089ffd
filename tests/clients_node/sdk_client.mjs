// The official TypeScript SDK clients against examples/quickstart.py over Streamable HTTP.
//
//   cd "$(scripts/node_tools.sh)" && node_modules/.bin/node --input-type=module - URL MODE < tests/clients_node/sdk_client.mjs
//
// Read from stdin with the tools' cache as the working directory, so the SDK packages resolve
// from the cache's node_modules (this file lives in the repository, the packages do not).
// MODE: v1          @modelcontextprotocol/sdk (v1), the 2025 handshake era
//       v2-legacy   @modelcontextprotocol/client (v2), versionNegotiation "legacy"
//       v2-modern   @modelcontextprotocol/client (v2), pinned to 2026-07-28
//       v2-auto     @modelcontextprotocol/client (v2), "auto" (server/discover probe first)
// Connects, lists the tools, calls add, whoami, count_to (with progress) and find_note (a tool
// error), and prints what it saw as one JSON object; tests/clients_node asserts on it.
// Exits 1, with the error on stderr, when the SDK throws.
const [url, mode] = process.argv.slice(2);
const clientInfo = { name: "fastapi-mcp-ctx-ts-check", version: "1.0.0" };

async function open() {
  if (mode === "v1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
    const client = new Client(clientInfo);
    const transport = new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport);
    return {
      client,
      call: (params, options) => client.callTool(params, undefined, options),
      negotiated: () => ({ protocolVersion: transport.protocolVersion, era: "legacy", sessionId: transport.sessionId ?? null }),
    };
  }
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  const negotiation = { "v2-legacy": "legacy", "v2-modern": { pin: "2026-07-28" }, "v2-auto": "auto" }[mode];
  if (negotiation === undefined) throw new Error(`unknown mode ${mode}`);
  const client = new Client(clientInfo, { versionNegotiation: { mode: negotiation } });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return {
    client,
    call: (params, options) => client.callTool(params, options),
    negotiated: () => ({
      protocolVersion: client.getNegotiatedProtocolVersion(),
      era: client.getProtocolEra(),
      sessionId: transport.sessionId ?? null,
    }),
  };
}

const { client, call, negotiated } = await open();
try {
  const listed = await client.listTools();
  const progress = [];
  const report = {
    mode,
    ...negotiated(),
    server: client.getServerVersion(),
    tools: listed.tools,
    add: await call({ name: "add", arguments: { a: 2, b: 40 } }),
    whoami: await call({ name: "whoami", arguments: {} }),
    countTo: await call(
      { name: "count_to", arguments: { n: 3 } },
      { onprogress: (p) => progress.push({ progress: p.progress, total: p.total, message: p.message }) },
    ),
    findNote: await call({ name: "find_note", arguments: { note_id: 999 } }),
  };
  report.progress = progress;
  console.log(JSON.stringify(report));
} finally {
  await client.close();
}
