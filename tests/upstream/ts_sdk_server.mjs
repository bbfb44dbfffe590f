// An MCP server written with the official TypeScript SDK and zod, as most servers are, so that
// its tools' schemas are exactly what the SDK emits: draft-07 by its `$schema`, a tuple as an
// array of `items` with `additionalItems`, a union as `anyOf`, a record as
// `additionalProperties`, string formats as ECMA-262 patterns. Each tool answers with the
// arguments it was given, as JSON text.
//
//     node ts_sdk_server.mjs NODE_MODULES
//
// NODE_MODULES is the folder holding @modelcontextprotocol/sdk and zod (scripts/test-deps
// installs both, pinned by tests/deps/package-lock.json).
import path from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
const load = (file) => import(pathToFileURL(path.join(modules, file)).href);
const { McpServer } = await load("@modelcontextprotocol/sdk/dist/esm/server/mcp.js");
const { StdioServerTransport } = await load("@modelcontextprotocol/sdk/dist/esm/server/stdio.js");
const z = await load("zod/v4/index.js");

const server = new McpServer({ name: "shapes", version: "1.0.0" });
const echo = async (args) => ({ content: [{ type: "text", text: JSON.stringify(args) }] });

server.registerTool(
  "plot",
  {
    description: "Plots a point on the chart.",
    inputSchema: {
      point: z.tuple([z.number(), z.number()]),
      label: z.string().max(10).optional(),
      style: z.union([z.literal("dot"), z.object({ size: z.number().int().min(1) })]).optional(),
      tags: z.record(z.string(), z.string()).optional(),
    },
    annotations: { readOnlyHint: true },
  },
  echo,
);

server.registerTool(
  "schedule",
  {
    description: "Books a meeting.",
    inputSchema: {
      when: z.object({ day: z.enum(["mon", "tue", "wed"]), hour: z.number().int().min(8).max(17) }),
      attendees: z.array(z.string()).min(1),
      // A pattern with lookahead, as zod writes ISO 8601 durations.
      every: z.iso.duration().optional(),
    },
    annotations: { readOnlyHint: true },
  },
  echo,
);

await server.connect(new StdioServerTransport());
