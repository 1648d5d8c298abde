// The agent over MCP: an MCP server (the official SDK, Streamable HTTP) at /agent/mcp on Harper's HTTP port, behind
// Harper's authentication. It offers the five agent operations as tools, listed only to a user whose role may call
// them, and runs each call through the same path and permission check as the operations API (runOperation).
// Stateless: a server and transport per request, so any worker thread (or node) answers any request.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { json, runOperation, viaOf, type HarperRequest, type Operations } from './http.js';
import { mayUse } from './access.js';
import type { AgentConfig } from './agent.js';

export const MCP_PATH = '/agent/mcp';

/** Hand-written for a client's model: what each does, and how to follow a run. */
const DESCRIPTIONS: Record<string, { description: string; readOnly: boolean }> = {
  agent_prompt: {
    description:
      'Ask the Harper Agent to investigate this Harper instance (its logs, config, components, data, replication). ' +
      'Starts a run and answers at once with session_id and status "running"; read the answer with get_agent_session ' +
      'until status is completed, error, aborted or awaiting_approval. Pass session_id to continue a session.',
    readOnly: false,
  },
  get_agent_session: {
    description:
      "A session: its status, last error, pending approvals and transcript (each tool result as stored, cut results " +
      'marked). The last assistant message of a completed session is the answer.',
    readOnly: true,
  },
  list_agent_sessions: { description: 'Sessions, newest first, without their transcripts (status, sizes, last error, title), a page at a time (nextCursor), filtered by status, user or title.', readOnly: true },
  approve_agent_action: {
    description: 'Approve (or deny, approved: false) an action a run is waiting for (e.g. write_file); the run then goes on.',
    readOnly: false,
  },
  cancel_agent_run: { description: "Stop a session's run; it ends as aborted.", readOnly: false },
};

/** The MCP tools for the agent operations: the operations' own input schemas, without their `operation` field. */
export function agentMcpTools(operations: Operations): Tool[] {
  return Object.entries(DESCRIPTIONS).map(([name, { description, readOnly }]) => {
    const schema = operations[name]!.schema as { properties?: Record<string, object>; required?: string[] };
    const { operation: _op, ...properties } = schema.properties ?? {};
    return {
      name,
      description,
      inputSchema: { type: 'object' as const, properties, required: schema.required ?? [], additionalProperties: false },
      annotations: { readOnlyHint: readOnly, destructiveHint: !readOnly, openWorldHint: false },
    };
  });
}

export function mcpListener(deps: { operations: Operations; version: string; log(message: string): void; config(): Pick<AgentConfig, 'roles'> }) {
  const tools = agentMcpTools(deps.operations);
  return async (request: HarperRequest, next: (request: HarperRequest) => unknown) => {
    if (new URL(request.url ?? '/', 'http://harper').pathname !== MCP_PATH) return next(request);
    // Harper adds `WWW-Authenticate: Basic` to a 401.
    if (!request.user) return json(401, { error: 'authentication required: send Basic credentials or an operation token' });
    if (!request._nodeRequest || !request._nodeResponse) return json(500, { error: 'this Harper gives listeners no node request' });
    const user = request.user;
    // The same rule as the operations: listed only to a user whose role may call them.
    const mayCall = mayUse(user, deps.config());
    const server = new Server({ name: 'harper-agent', version: deps.version }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: mayCall ? tools : [] }));
    server.setRequestHandler(CallToolRequestSchema, async (call) => {
      const name = call.params.name;
      if (!tools.some((t) => t.name === name)) return { isError: true, content: [{ type: 'text', text: `unknown tool ${name}` }] };
      const answer = await runOperation(deps.operations, name, { operation: name, ...(call.params.arguments ?? {}) }, user, viaOf(request), deps.log);
      const text = JSON.stringify(answer.status === 200 ? answer.body : { status: answer.status, ...(answer.body as object) });
      return { isError: answer.status !== 200, content: [{ type: 'text', text }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    request._nodeResponse.on('close', () => void transport.close().then(() => server.close()));
    await server.connect(transport);
    await transport.handleRequest(request._nodeRequest as Parameters<typeof transport.handleRequest>[0], request._nodeResponse);
    return undefined; // answered on node's own response
  };
}
