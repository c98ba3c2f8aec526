// A small MCP client on the official TypeScript SDK, for the proxy's tests:
// it starts the command in MCP_CMD (a JSON array) over stdio, in MCP_CWD,
// makes the calls of the JSON file argv[2] ([{name, arguments}]), and
// prints one JSON line per call: {name, isError, content}.
// UNDOLOG_MCP_SDK_DIR is the installed @modelcontextprotocol/sdk package.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const sdk = process.env.UNDOLOG_MCP_SDK_DIR;
const { Client } = await import(pathToFileURL(join(sdk, "dist/esm/client/index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "dist/esm/client/stdio.js")).href);

const [command, ...args] = JSON.parse(process.env.MCP_CMD);
const transport = new StdioClientTransport({ command, args, cwd: process.env.MCP_CWD, env: process.env, stderr: "inherit" });
const client = new Client({ name: "undolog-test-client", version: "1" });
await client.connect(transport);
for (const call of JSON.parse(readFileSync(process.argv[2], "utf8"))) {
  const r = await client.callTool({ name: call.name, arguments: call.arguments });
  process.stdout.write(JSON.stringify({ name: call.name, isError: r.isError === true, content: r.content }) + "\n");
}
await client.close();
